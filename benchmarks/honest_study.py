"""Chapter 9's controlled study on the honest task, run in the background on this CPU (or in waves on a GPU).

    python benchmarks/honest_study.py plan                  # what is done, what runs next, what waits for what
    python benchmarks/honest_study.py cpu --hours 2.5       # here: 2 jobs at once, 1 thread each, niced; resumes
    python benchmarks/honest_study.py cpu --hours 0.12 --stop-after 500 --device cuda --parallel 9   # a lent GPU
    python benchmarks/honest_analysis.py                   # when plan says nothing is left: test read once

    python benchmarks/honest_study.py gpu --wave next --pack-dir "$OUT"   # on a lent GPU: the next wave
    python benchmarks/honest_study.py collect --from DIR    # here: merge what a wave brought back

The arms, ablations and budget are in ``honest_arms.py``. The study, fraction by fraction (the smallest first, so
that a stopped study has one fraction complete rather than every fraction half done):
1. tuning: every arm at every learning rate of ``LRS``, seed 0 (validation numbers only). The CNN goes first:
   its chosen run is the teacher of the distilled arms (DeiT), which wait for it;
2. the chosen learning rate of each (arm, fraction), picked on validation (``comparison.pick``), seeds 1 and 2;
3. every ablation at its parent arm's chosen learning rate, seeds 0-2;
4. the longer-budget arms (``FITTED``: the ViT and ConViT trained with the CPU speedrun's recipe), at 10 % of the
   digits, seeds 0-2: whether ConViT's lead survives a ViT that has fitted.
Every job checkpoints each epoch into ``SAVE`` and resumes from it, in this session or a later one. A finished job
appends its validation numbers to ``RUNS`` and its float16 weights to ``WEIGHTS`` (both committed: a later session
on a fresh machine picks up from them); a tuning run that was not chosen has its weights removed (``prune``).
``honest_analysis.py`` reads test once, for the final runs only, and writes ``SUMMARY``.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

from comparison import add_run_command, pick
from honest_arms import (
    ABLATIONS,
    ARMS,
    FITTED,
    FITTED_FRACTION,
    FITTED_LR,
    FRACTIONS,
    LRS,
    SAME_AS,
    SEEDS,
    TEACHER,
    job_epochs,
    job_name,
    needs_teacher,
    parameter_counts,
    parse_job,
    run_job,
)

from vitedu.run_files import STATE_FILE

RESULTS = Path(__file__).parent / "results" / "honest_study"
RUNS = RESULTS / "runs.jsonl"  # one line per finished job: validation numbers only
WEIGHTS = RESULTS / "weights"  # float16 weights of the finished jobs that are (or may become) final
SUMMARY = RESULTS / "summary.json"
WORK = Path("runs") / "honest_study"  # git-ignored: save/ checkpoints to resume, logs/
SAVE = WORK / "save"
RUN_COMMAND = ["run"]  # how benchmarks/gpu_sweep.py --runner calls this file: honest_study.py run --variants ...
WAVE = 24  # jobs a GPU wave
PARALLEL = 9  # at once on one GPU: 9 runs of the 300-epoch recipe took about 7.5 min on an H200
__all__ = ["job_epochs"]


def read_runs(path: Path | None = None) -> list[dict]:
    """The records of ``path``; from RUNS (the default), only the current ones (``current``)."""
    file = RUNS if path is None else path
    records = [json.loads(line) for line in file.read_text().splitlines() if line.strip()] if file.exists() else []
    return current(records) if path is None else records


def current(records: list[dict]) -> list[dict]:
    """``records`` without the distilled runs whose teacher is no longer the CNN arm's chosen run of their fraction
    and seed (a later tuning run moved the CNN's choice): such a run is out of date and runs again; its record stays
    in the file, for the history, and a newer record of the same job and seed is read instead."""
    teachers = {r["job"] + f"_seed{r['seed']}" for r in records if r["arm"] == TEACHER}
    chosen = chosen_lrs([r for r in records if r["arm"] == TEACHER])
    kept = []
    for r in records:
        if r.get("teacher") and needs_teacher(r["arm"]):
            lr = chosen.get((TEACHER, r["fraction"]))
            wanted = job_name(TEACHER, r["fraction"], lr) + f"_seed{r['seed']}" if lr is not None else None
            if r["teacher"] != wanted or wanted not in teachers:
                continue
        kept = [k for k in kept if (k["job"], k["seed"]) != (r["job"], r["seed"])] + [r]  # the newest record
    return kept


def chosen_lrs(records: list[dict]) -> dict[tuple[str, float], float]:
    """(arm, fraction) -> the learning rate with the best validation numbers among its seed-0 tuning runs,
    for the main arms whose tuning is complete. Reads val_acc and val_loss only (``comparison.pick``)."""
    chosen = {}
    for arm in ARMS:
        for f in FRACTIONS:
            tuning = [r for r in records if r["arm"] == arm and r["fraction"] == f and r["seed"] == 0]
            if {r["lr"] for r in tuning} >= set(LRS):
                chosen[arm, f] = pick([r for r in tuning if r["lr"] in LRS])["lr"]
    return chosen


def role_job(role: str, fraction: float, chosen: dict) -> str | None:
    """The job that stands for ``role`` (an arm or an ablation) at ``fraction`` once its learning rate is chosen:
    an arm at its own choice, an ablation at its parent's (run under another arm's name if ``SAME_AS`` says so);
    a longer-budget arm (``FITTED``) at its recipe's rate, at ``FITTED_FRACTION`` only (else None)."""
    if role in FITTED:
        return job_name(role, fraction, FITTED_LR) if fraction == FITTED_FRACTION else None
    parent = ABLATIONS[role][0] if role in ABLATIONS else role
    if (parent, fraction) not in chosen:
        return None
    return job_name(SAME_AS.get(role, role), fraction, chosen[parent, fraction])


def final_jobs(chosen: dict) -> list[tuple[str, int]]:
    """The runs the summary reports (given the choices made so far): main arms, ablations and the longer-budget
    arms, every seed."""
    jobs = [(role_job(role, f, chosen), s) for f in FRACTIONS for role in [*ARMS, *ABLATIONS, *FITTED]
            if role_job(role, f, chosen) for s in SEEDS]
    return list(dict.fromkeys(jobs))


def total_runs() -> int:
    """Runs in the whole study when every ablation that ``SAME_AS`` maps lands on a run of its own (at most)."""
    return (len(FRACTIONS) * (len(ARMS) * (len(LRS) + len(SEEDS) - 1) + len(ABLATIONS) * len(SEEDS))
            + len(FITTED) * len(SEEDS))


def teacher_file(records: list[dict], fraction: float, seed: int) -> Path | None:
    """The weights a distilled run of (fraction, seed) learns from: the CNN arm's run at its chosen learning
    rate, that fraction and seed; None until that run is done."""
    lr = chosen_lrs(records).get((TEACHER, fraction))
    if lr is None or (job_name(TEACHER, fraction, lr), seed) not in {(r["job"], r["seed"]) for r in records}:
        return None
    return WEIGHTS / f"{job_name(TEACHER, fraction, lr)}_seed{seed}.safetensors"


def plan(records: list[dict], started: set[tuple[str, int]] = frozenset()) -> tuple[list[tuple[str, int]], int]:
    """-> (the runnable jobs not yet done, in priority order; how many more wait for a choice or a teacher).

    ``started``: jobs with a checkpoint from a stopped run; they go first, so that they finish."""
    chosen = chosen_lrs(records)
    # a final run counts as done only with its weights (the analysis loads them): one whose weights were pruned
    # before it became final runs again
    finals = set(final_jobs(chosen))
    done = {(r["job"], r["seed"]) for r in records
            if (r["job"], r["seed"]) not in finals or (WEIGHTS / f"{r['job']}_seed{r['seed']}.safetensors").exists()}
    # the teacher first, at every fraction (distilled arms wait for its tuning and for its seeds); then, fraction
    # by fraction, the other arms' tuning and the final runs
    wanted = [(job_name(TEACHER, f, lr), 0) for f in sorted(FRACTIONS) for lr in LRS]
    wanted += [j for f in sorted(FRACTIONS) for j in final_jobs(chosen) if parse_job(j[0])[:2] == (TEACHER, f)]
    for f in sorted(FRACTIONS):
        wanted += [(job_name(arm, f, lr), 0) for arm in ARMS if arm != TEACHER for lr in LRS]
        wanted += [j for j in final_jobs(chosen) if parse_job(j[0])[1] == f]
    wanted = list(dict.fromkeys(wanted))
    ready = [j for j in wanted if j not in done and (not needs_teacher(parse_job(j[0])[0])
                                                    or teacher_file(records, parse_job(j[0])[1], j[1]))]
    blocked = [j for j in wanted if j not in done and j not in ready]  # distilled runs without their teacher
    # final runs not known yet: an arm's seeds 1 and 2 (its seed 0 is a tuning run), an ablation's three seeds
    unknown = sum(len(SEEDS) - (role in ARMS) for role in [*ARMS, *ABLATIONS] for f in FRACTIONS
                  if role_job(role, f, chosen) is None)
    ready = list(dict.fromkeys([j for j in ready if j in started] + ready))  # stopped jobs first
    return ready, len(blocked) + unknown


def started_jobs(save: Path | None = None) -> set[tuple[str, int]]:
    """Jobs with a checkpoint in ``save`` (default SAVE): stopped, to be resumed."""
    save, found = SAVE if save is None else save, set()
    for state in glob.glob(f"{save}/*_seed*/{STATE_FILE}"):  # written last in a checkpoint
        name, _, seed = Path(state).parent.name.rpartition("_seed")
        found.add((name, int(seed)))
    return found


def prune(records: list[dict]) -> list[Path]:
    """Remove the weights of seed-0 tuning runs whose (arm, fraction) chose another learning rate and that no
    final job names; -> the files removed."""
    chosen = chosen_lrs(records)
    keep = {f"{n}_seed{s}.safetensors" for n, s in final_jobs(chosen)}
    # an arm that stands in for an ablation (SAME_AS) keeps its runs until that ablation's parent has chosen
    waiting = {(arm, f) for role, arm in SAME_AS.items() for f in FRACTIONS if (ABLATIONS[role][0], f) not in chosen}
    removed = []
    for r in records:
        path = WEIGHTS / f"{r['job']}_seed{r['seed']}.safetensors"
        if ((r["arm"], r["fraction"]) in chosen and (r["arm"], r["fraction"]) not in waiting
                and path.name not in keep and path.exists()):
            path.unlink()
            removed.append(path)
    return removed


def show_plan() -> None:
    counts = parameter_counts()
    print("parameters: " + ", ".join(f"{arm} {n:,}" for arm, n in counts.items()) +
          f"; largest / smallest = {max(counts.values()) / min(counts.values()):.3f}")
    records = read_runs()
    todo, waiting = plan(records, started_jobs())
    print(f"at most {total_runs()} runs in the study, {len(records)} done, {len(todo)} runnable now, "
          f"{waiting} waiting for a choice or a teacher; chosen so far: "
          + (", ".join(f"{a}@{f:g} {lr:g}" for (a, f), lr in chosen_lrs(records).items()) or "none"))
    for name, seed in todo:
        print(f"  {name}:{seed}" + ("  (resumes)" if (name, seed) in started_jobs() else ""))


def finish(name: str, seed: int, out: Path) -> dict | None:
    """Move a finished job's record into RUNS and its weights into WEIGHTS; drop its checkpoint."""
    if not out.exists():
        return None
    record = json.loads(out.read_text().splitlines()[-1])
    rerun = not (WEIGHTS / f"{name}_seed{seed}.safetensors").exists()  # a final run whose weights were pruned
    if (name, seed) not in {(r["job"], r["seed"]) for r in read_runs()} or rerun:
        RUNS.parent.mkdir(parents=True, exist_ok=True)
        with open(RUNS, "a") as runs:
            runs.write(json.dumps(record) + "\n")
    WEIGHTS.mkdir(parents=True, exist_ok=True)
    (WORK / "logs").mkdir(parents=True, exist_ok=True)
    stem = SAVE / f"{name}_seed{seed}"
    shutil.move(f"{stem}.safetensors", WEIGHTS / f"{name}_seed{seed}.safetensors")
    shutil.move(f"{stem}.log", WORK / "logs" / f"{name}_seed{seed}.log")
    shutil.rmtree(stem, ignore_errors=True)
    out.unlink()
    return record


def cpu(args: argparse.Namespace) -> None:
    """Run the plan here, ``--parallel`` jobs at once, each one process with one thread at ``--nice``; start no
    new job after ``--hours``; a job still running then carries on to its end (or is stopped with the session and
    resumes from its last epoch next time)."""
    deadline = time.time() + args.hours * 3600
    stop_at = time.time() + args.stop_after if args.stop_after else None
    running: dict[tuple[str, int], tuple[subprocess.Popen, Path]] = {}
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    failed: set[tuple[str, int]] = set()
    while True:
        if stop_at is not None and time.time() > stop_at:  # each stopped job keeps its last epoch's checkpoint
            for job, (process, _) in running.items():
                process.terminate()
                process.wait()
                print(f"stopped {job[0]}:{job[1]} (resumes from its checkpoint)", flush=True)
            return
        for job, (process, out) in list(running.items()):
            if process.poll() is None:
                continue
            del running[job]
            record = finish(*job, out) if process.returncode == 0 else None
            if record is None:
                failed.add(job)
                print(f"{job[0]}:{job[1]} failed (exit {process.returncode}); see {SAVE}/{job[0]}_seed{job[1]}.log",
                      flush=True)
            else:
                print(f"{job[0]}:{job[1]} val {record['val_acc']:.4f} in {record['seconds']:.0f} s", flush=True)
                for path in prune(read_runs()):
                    print(f"pruned {path.name} (not chosen)", flush=True)
        if time.time() < deadline:
            todo, _ = plan(read_runs(), started_jobs())
            for job in [j for j in todo if j not in running and j not in failed][:args.parallel - len(running)]:
                SAVE.mkdir(parents=True, exist_ok=True)
                out = SAVE / f"{job[0]}_seed{job[1]}.jsonl"
                cmd = ["nice", "-n", str(args.nice), sys.executable, str(Path(__file__).resolve()), "run",
                       "--variants", job[0], "--seeds", str(job[1]), "--save-dir", str(SAVE), "--out", str(out),
                       "--device", args.device]
                running[job] = (subprocess.Popen(cmd, env=env), out)
                print(f"started {job[0]}:{job[1]}", flush=True)
        if not running:
            print("nothing runnable left" if time.time() < deadline else "past --hours: no new job", flush=True)
            return
        time.sleep(args.poll)


def gpu(args: argparse.Namespace) -> None:
    todo, _ = plan(read_runs(), started_jobs(args.save_dir))
    wave = todo[:args.size]
    if not wave:
        print("nothing to run: every runnable job of the study is in", RUNS)
        return
    tool = Path(__file__).resolve().parent / "gpu_sweep.py"
    cmd = [sys.executable, str(tool), "--runner", str(Path(__file__).resolve()), "--jobs",
           *[f"{n}:{s}" for n, s in wave], "--deadline", str(args.deadline), "--parallel", str(args.parallel),
           "--device", args.device, "--save-dir", str(args.save_dir), "--pack-dir", str(args.pack_dir)]
    print(" ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)
    print(f"next, where the repository is kept: honest_study.py collect --from <the folder {args.pack_dir} "
          "came back to>, then commit benchmarks/results/honest_study/", flush=True)


def collect(source: Path) -> None:
    """Merge a GPU wave's pack (results.tgz, ckpt.tar.part-*) into RUNS, WEIGHTS and SAVE."""
    unpacked = WORK / "incoming"
    shutil.rmtree(unpacked, ignore_errors=True)
    with tarfile.open(source / "results.tgz") as tar:
        tar.extractall(unpacked, filter="data")
    records, new = read_runs(), 0
    seen = {(r["job"], r["seed"]) for r in records}
    RUNS.parent.mkdir(parents=True, exist_ok=True)
    for row in read_runs(unpacked / "sweep.jsonl"):
        if (row["job"], row["seed"]) not in seen:
            with open(RUNS, "a") as out:
                out.write(json.dumps(row) + "\n")
            seen.add((row["job"], row["seed"]))
            new += 1
    WEIGHTS.mkdir(parents=True, exist_ok=True)
    (WORK / "logs").mkdir(parents=True, exist_ok=True)
    for path in unpacked.glob("*.safetensors"):
        shutil.move(path, WEIGHTS / path.name)
    for path in [*unpacked.glob("*.log"), *unpacked.glob("*.txt")]:
        shutil.move(path, WORK / "logs" / path.name)
    parts = sorted(source.glob("ckpt.tar.part-*"))
    if parts:
        SAVE.mkdir(parents=True, exist_ok=True)
        subprocess.run(f"cat {' '.join(map(str, parts))} | tar xf - -C {SAVE}", shell=True, check=True)
    (SAVE / "ckpt.tar").unlink(missing_ok=True)  # gpu_sweep's packing, if the wave ran here: not to be carried
    for name, seed in seen:  # a finished job needs no checkpoint any more
        shutil.rmtree(SAVE / f"{name}_seed{seed}", ignore_errors=True)
    prune(read_runs())
    print(f"{new} new runs in {RUNS} ({len(seen)} in all); {len(started_jobs())} stopped jobs to resume in {SAVE}")


def run(args: argparse.Namespace) -> None:
    """Train jobs in this process (how ``cpu`` and benchmarks/gpu_sweep.py call this file)."""
    import torch

    torch.set_num_threads(1)
    for name in args.variants:
        arm, fraction, _ = parse_job(name)
        for seed in args.seeds:
            teacher = teacher_file(read_runs(), fraction, seed) if needs_teacher(arm) else None
            if needs_teacher(arm) and teacher is None:
                raise SystemExit(f"{name}:{seed} distils the CNN arm's chosen run of fraction {fraction:g} and seed "
                                 f"{seed}, which is not in {RUNS} yet: run `honest_study.py plan` to see the order")
            # relative to the repository (the working folder of a run), so that no record names this machine's paths
            teacher_path = os.path.relpath(teacher, Path(__file__).parent.parent) if teacher else ""
            record = run_job(name, seed, args.device, args.save_dir, args.epochs, teacher_path)
            with open(args.out, "a") as out:
                out.write(json.dumps(record) + "\n")
            print(f"{name} seed {seed}: val {record['val_acc']:.4f} ({record['seconds']:.0f} s)", flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("plan", help="print what is done and what runs next")
    s = sub.add_parser("cpu", help="run the plan on this machine in the background, resuming stopped jobs")
    s.add_argument("--parallel", type=int, default=2, help="jobs at once (one thread each)")
    s.add_argument("--hours", type=float, required=True, help="start no new job after this many hours")
    s.add_argument("--nice", type=int, default=19, help="niceness of the jobs, so that foreground work goes first")
    s.add_argument("--poll", type=float, default=10.0, help="seconds between looks at the jobs")
    s.add_argument("--device", default="cpu", help="cuda on a lent GPU machine (with a larger --parallel)")
    s.add_argument("--stop-after", type=float, help="seconds after which the running jobs are stopped (they "
                   "resume from their last epoch's checkpoint next time) and the driver ends")
    s = sub.add_parser("gpu", help="run the next wave with benchmarks/gpu_sweep.py")
    s.add_argument("--wave", choices=["next"], required=True)
    s.add_argument("--size", type=int, default=WAVE)
    s.add_argument("--parallel", type=int, default=PARALLEL)
    s.add_argument("--deadline", type=float, default=480, help="seconds until every job is stopped and packed")
    s.add_argument("--device", default="cuda")
    s.add_argument("--save-dir", type=Path, default=SAVE)
    s.add_argument("--pack-dir", type=Path, required=True)
    s = sub.add_parser("collect", help="merge a wave's pack into the results")
    s.add_argument("--from", dest="source", type=Path, required=True)
    add_run_command(sub, help="train jobs (how `cpu` and benchmarks/gpu_sweep.py call this file)")
    args = p.parse_args()
    if args.command == "plan":
        show_plan()
    elif args.command == "cpu":
        cpu(args)
    elif args.command == "gpu":
        gpu(args)
    elif args.command == "collect":
        collect(args.source)
    else:
        run(args)


if __name__ == "__main__":
    main()
