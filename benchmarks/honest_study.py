"""Chapter 9's controlled study on the honest task, in waves that each fit one GPU call (issue 25).

    python benchmarks/honest_study.py plan                       # what is done, the waves still to run
    python benchmarks/honest_study.py gpu --wave next --pack-dir "$OUT"   # on the GPU machine: the next wave
    python benchmarks/honest_study.py collect --from DIR         # here: merge what a wave brought back
    python benchmarks/honest_study.py analyse                    # here: lrs chosen on val, test + shift, summary

The arms, ablations and budget are in ``honest_arms.py``. The study, in the order the planner schedules it:
1. tuning: every arm at every fraction at every learning rate of ``LRS``, seed 0 (validation numbers only);
2. the chosen learning rate of each (arm, fraction), picked on validation (``comparison.pick``), seeds 1 and 2;
3. every ablation at ``ABLATION_FRACTIONS``, at its parent arm's chosen learning rate, seeds 0-2.
A wave is the next ``--size`` runnable jobs, jobs stopped by an earlier wave (checkpoints in ``SAVE``) first.
``gpu`` runs it with ``tools/gpu_sweep.py`` (``--parallel`` processes at once on one GPU, every job checkpointing
each epoch) and packs into --pack-dir what finished (JSON lines, logs, weights) and the checkpoints of what did
not; ``collect`` merges that into ``RUNS`` (committed) and ``WORK`` (git-ignored: weights and checkpoints).
``analyse`` reads test once, for the final runs only, and writes ``SUMMARY``.
"""

from __future__ import annotations

import argparse
import glob
import json
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

from comparison import pick
from honest_arms import (
    ABLATION_FRACTIONS,
    ABLATIONS,
    ARMS,
    FRACTIONS,
    LRS,
    SEEDS,
    job_epochs,
    job_name,
    parameter_counts,
    run_job,
)

from vitedu.checkpoints import STATE_FILE

RESULTS = Path(__file__).parent / "results" / "honest_study"
RUNS = RESULTS / "runs.jsonl"  # one line per finished job: validation numbers only
SUMMARY = RESULTS / "summary.json"
WORK = Path("runs") / "honest_study"  # git-ignored: weights/ of finished jobs, save/ checkpoints to resume
SAVE = WORK / "save"
RUN_COMMAND = ["run"]  # how tools/gpu_sweep.py --runner calls this file: honest_study.py run --variants ...
WAVE = 24  # jobs a wave: about 3 rounds of PARALLEL 100-epoch runs in a 9-minute call (an estimate, see README)
PARALLEL = 9  # at once on one GPU: 9 runs of the 300-epoch recipe took about 7.5 min on an H200
__all__ = ["job_epochs"]


def read_runs(path: Path | None = None) -> list[dict]:
    path = RUNS if path is None else path
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


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


def final_jobs(chosen: dict) -> list[tuple[str, int]]:
    """The runs the summary reports (given the choices made so far): main arms and ablations, every seed."""
    jobs = [(job_name(arm, f, chosen[arm, f]), s) for f in FRACTIONS for arm in ARMS if (arm, f) in chosen
            for s in SEEDS]
    return jobs + [(job_name(a, f, chosen[p, f]), s) for f in ABLATION_FRACTIONS for a, (p, *_) in ABLATIONS.items()
                   if (p, f) in chosen for s in SEEDS]


def total_runs() -> int:
    return (len(ARMS) * len(FRACTIONS) * (len(LRS) + len(SEEDS) - 1)
            + len(ABLATIONS) * len(ABLATION_FRACTIONS) * len(SEEDS))


def plan(records: list[dict], started: set[tuple[str, int]] = frozenset()) -> tuple[list[tuple[str, int]], int]:
    """-> (the runnable jobs not yet done, in priority order; how many more wait for a tuning to finish).

    ``started``: jobs with a checkpoint from a stopped wave; they go first, so that they finish."""
    done = {(r["job"], r["seed"]) for r in records}
    chosen = chosen_lrs(records)
    tuning = [(job_name(arm, f, lr), 0) for f in sorted(FRACTIONS, reverse=True) for arm in ARMS for lr in LRS]
    todo = [j for j in tuning + final_jobs(chosen) if j not in done]
    todo = list(dict.fromkeys([j for j in todo if j in started] + todo))  # stopped jobs first, no duplicates
    return todo, total_runs() - len(done) - len(todo)


def started_jobs(save: Path | None = None) -> set[tuple[str, int]]:
    """Jobs with a checkpoint in ``save`` (default SAVE): stopped by a wave, to be resumed."""
    save, found = SAVE if save is None else save, set()
    for state in glob.glob(f"{save}/*_seed*/{STATE_FILE}"):  # written last in a checkpoint
        name, _, seed = Path(state).parent.name.rpartition("_seed")
        found.add((name, int(seed)))
    return found


def show_plan(size: int) -> None:
    counts = parameter_counts()
    print("parameters: " + ", ".join(f"{arm} {n:,}" for arm, n in counts.items()) +
          f"; largest / smallest = {max(counts.values()) / min(counts.values()):.3f}")
    records = read_runs()
    todo, waiting = plan(records, started_jobs())
    print(f"{total_runs()} runs in the study, {len(records)} done, {len(todo)} runnable now, {waiting} waiting "
          f"for a tuning to finish; about {-(-(len(todo) + waiting) // size)} more waves of {size}")
    for i in range(0, len(todo), size):
        print(f"wave {i // size + 1}: " + " ".join(f"{n}:{s}" for n, s in todo[i:i + size]))


def gpu(args: argparse.Namespace) -> None:
    todo, _ = plan(read_runs(), started_jobs(args.save_dir))
    wave = todo[:args.size]
    if not wave:
        print("nothing to run: every job of the study is in", RUNS)
        return
    tool = Path(__file__).resolve().parent.parent / "tools" / "gpu_sweep.py"
    cmd = [sys.executable, str(tool), "--runner", str(Path(__file__).resolve()), "--jobs",
           *[f"{n}:{s}" for n, s in wave], "--deadline", str(args.deadline), "--parallel", str(args.parallel),
           "--device", args.device, "--save-dir", str(args.save_dir), "--pack-dir", str(args.pack_dir)]
    print(" ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)
    print(f"next, where the repository is kept: honest_study.py collect --from <the folder {args.pack_dir} "
          "came back to>, then commit benchmarks/results/honest_study/runs.jsonl", flush=True)


def collect(source: Path) -> None:
    """Merge a wave's pack (results.tgz, ckpt.tar.part-*) into RUNS and WORK."""
    unpacked = WORK / "incoming"
    shutil.rmtree(unpacked, ignore_errors=True)
    with tarfile.open(source / "results.tgz") as tar:
        tar.extractall(unpacked, filter="data")
    records, new = read_runs(), 0
    seen = {(r["job"], r["seed"]) for r in records}
    rows = read_runs(unpacked / "sweep.jsonl")
    RUNS.parent.mkdir(parents=True, exist_ok=True)
    for row in rows:
        if (row["job"], row["seed"]) not in seen:
            with open(RUNS, "a") as out:
                out.write(json.dumps(row) + "\n")
            seen.add((row["job"], row["seed"]))
            new += 1
    for folder in ("weights", "logs"):
        (WORK / folder).mkdir(parents=True, exist_ok=True)
    for path in unpacked.glob("*.safetensors"):
        shutil.move(path, WORK / "weights" / path.name)
    for path in [*unpacked.glob("*.log"), *unpacked.glob("*.txt")]:
        shutil.move(path, WORK / "logs" / path.name)
    parts = sorted(source.glob("ckpt.tar.part-*"))
    if parts:
        SAVE.mkdir(parents=True, exist_ok=True)
        subprocess.run(f"cat {' '.join(map(str, parts))} | tar xf - -C {SAVE}", shell=True, check=True)
    (SAVE / "ckpt.tar").unlink(missing_ok=True)  # gpu_sweep's packing, if the wave ran here: not to be carried
    for name, seed in seen:  # a finished job needs no checkpoint any more
        shutil.rmtree(SAVE / f"{name}_seed{seed}", ignore_errors=True)
    print(f"{new} new runs in {RUNS} ({len(seen)} in all); {len(started_jobs())} stopped jobs to resume in {SAVE}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("plan", help="print what is done and the waves to run")
    s.add_argument("--size", type=int, default=WAVE)
    s = sub.add_parser("gpu", help="run the next wave with tools/gpu_sweep.py")
    s.add_argument("--wave", choices=["next"], required=True)
    s.add_argument("--size", type=int, default=WAVE)
    s.add_argument("--parallel", type=int, default=PARALLEL)
    s.add_argument("--deadline", type=float, default=480, help="seconds until every job is stopped and packed")
    s.add_argument("--device", default="cuda")
    s.add_argument("--save-dir", type=Path, default=SAVE)
    s.add_argument("--pack-dir", type=Path, required=True)
    s = sub.add_parser("collect", help="merge a wave's pack into the results")
    s.add_argument("--from", dest="source", type=Path, required=True)
    s = sub.add_parser("analyse", help="choose on val, read test once, write the summary")
    s.add_argument("--device", default="cpu")
    s = sub.add_parser("run", help="train jobs (how tools/gpu_sweep.py calls this file)")
    s.add_argument("--variants", nargs="+", required=True)
    s.add_argument("--seeds", type=int, nargs="+", default=[0])
    s.add_argument("--workers", type=int, default=1, help="ignored: one job a process")
    s.add_argument("--device", default="cpu")
    s.add_argument("--save-dir", required=True)
    s.add_argument("--out", required=True)
    s.add_argument("--epochs", type=int, help="fewer epochs, for a quick check")
    args = p.parse_args()
    if args.command == "plan":
        show_plan(args.size)
    elif args.command == "gpu":
        gpu(args)
    elif args.command == "collect":
        collect(args.source)
    elif args.command == "analyse":
        from honest_analysis import analyse

        analyse(read_runs(), args.device)
    else:
        import torch

        torch.set_num_threads(1)
        for name in args.variants:
            for seed in args.seeds:
                record = run_job(name, seed, args.device, args.save_dir, args.epochs)
                with open(args.out, "a") as out:
                    out.write(json.dumps(record) + "\n")
                print(f"{name} seed {seed}: val {record['val_acc']:.4f} ({record['seconds']:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
