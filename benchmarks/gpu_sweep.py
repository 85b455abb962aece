"""Run many benchmarks/sweep_cluttered.py jobs at once on one GPU, against a deadline.

    python benchmarks/gpu_sweep.py --jobs anywhere_b256_e300_grid60_warp:1 anywhere_b256_e300_grid60_warp:2 \\
        --deadline 535 --save-dir /tmp/runs --pack-dir out

How benchmarks/results/cluttered_sweep.jsonl's GPU runs were made (benchmarks/README.md, "On a GPU"): this
140k-parameter ViT keeps a GPU busy only a fraction of each step, so nine runs share one GPU (one process and
one CPU thread each). Every job is ``sweep_cluttered.py --variants V --seeds S --save-dir ...``: it checkpoints
every epoch, so a job stopped here resumes from its checkpoint when started again with the same --save-dir.

Jobs are listed by priority, highest first. Every --poll seconds (10) the script counts each job's logged
epochs; from the last minute's rate it projects whether the high-priority jobs (the first --core jobs) will
finish before the deadline, and if not it stops the lowest-priority job still running, at most once a minute,
so the others get its share of the GPU. At the deadline it stops what is left (Ctrl-C, or SIGTERM, does the same
at once). Then it packs into --pack-dir:
results.tgz (the JSON lines, the per-epoch logs, the final weights) and, for the stopped jobs, their checkpoints
as ckpt.tar.part-* pieces of 15 MB (``cat ckpt.tar.part-* | tar xf -`` to resume them elsewhere).

Two generalisations (chapter 9's honest study, benchmarks/honest_study.py, uses both): ``--runner FILE`` runs
another script's jobs. The file must define ``job_epochs(name)`` (the epochs a job logs, None for a name that is
not a job), may define ``RUN_COMMAND`` (words put before its arguments), and must take sweep_cluttered.py's
``--variants NAME --seeds S --workers 1 --device D --save-dir DIR --out FILE`` and log ``NAME_seedS.log`` with one
line starting "epoch" an epoch. ``--parallel K`` runs at most K jobs at once; the next job in priority order
starts when one ends (a job that never started is reported as such; only running jobs are stopped when late).
"""

from __future__ import annotations

import argparse
import glob
import importlib.util
import os
import re
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def epochs_logged(save_dir: str, job: tuple[str, int]) -> int:
    """Epochs the job has done: its "epoch" lines, after the epoch a "resuming ... after epoch N" line names."""
    count = 0
    try:
        with open(f"{save_dir}/{job[0]}_seed{job[1]}.log") as log:
            for line in log:
                resumed = re.match(r"resuming .* after epoch (\d+)", line)
                count = int(resumed[1]) if resumed else count + line.startswith("epoch")
    except FileNotFoundError:
        pass
    return count


def load_runner(path: Path):
    """The module of a runner script (see the module docstring); sweep_cluttered.py is the default. The runners
    live beside this script, whose folder Python puts on the path, so they import their neighbours as usual."""
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--jobs", nargs="+", required=True, help="VARIANT:SEED, highest priority first")
    p.add_argument("--deadline", type=float, required=True, help="seconds from start until every job is stopped")
    p.add_argument("--core", type=int, help="how many of the first jobs must finish (default: all but one)")
    p.add_argument("--device", default="cuda")
    p.add_argument("--save-dir", required=True, help="checkpoints, logs, weights and sweep.jsonl")
    p.add_argument("--pack-dir", required=True, help="where results.tgz and the checkpoint pieces go")
    p.add_argument("--runner", type=Path, default=HERE / "sweep_cluttered.py",
                   help="the script that runs one job (default: benchmarks/sweep_cluttered.py)")
    p.add_argument("--parallel", type=int, help="at most this many jobs at once (default: all)")
    p.add_argument("--poll", type=float, default=10.0, help="seconds between looks at the jobs")
    args = p.parse_args()
    runner = load_runner(args.runner.resolve())

    jobs = []
    for spec in args.jobs:
        variant, _, seed = spec.rpartition(":")
        if runner.job_epochs(variant) is None or not seed.isdigit():
            raise SystemExit(f"--jobs takes VARIANT:SEED with a job name of {args.runner.name} (for "
                             f"sweep_cluttered.py a variant of --list, e.g. anywhere_b256_e300_grid60_warp:1); "
                             f"got {spec!r}")
        jobs.append((variant, int(seed)))
    if args.parallel is not None and args.parallel < 1:
        raise SystemExit(f"--parallel is how many jobs run at once, at least 1; got {args.parallel}")
    parallel = args.parallel or len(jobs)
    core = args.core if args.core is not None else max(1, len(jobs) - 1)
    os.makedirs(args.save_dir, exist_ok=True)
    os.makedirs(args.pack_dir, exist_ok=True)
    procs = {}

    def launch(job):
        cmd = [sys.executable, str(args.runner.resolve()), *getattr(runner, "RUN_COMMAND", []), "--variants", job[0],
               "--seeds", str(job[1]), "--workers", "1", "--device", args.device, "--save-dir", args.save_dir,
               "--out", f"{args.save_dir}/sweep.jsonl"]
        out = open(f"{args.save_dir}/stdout_{job[0]}_{job[1]}.txt", "w")
        procs[job] = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)

    for job in jobs[:parallel]:
        launch(job)

    def stop(job):  # the job's whole process group: the sweep and its worker
        try:
            os.killpg(procs[job].pid, signal.SIGTERM)
        except ProcessLookupError:
            pass

    interrupted = []  # Ctrl-C or SIGTERM: the deadline is now

    def interrupt(signum, frame):
        interrupted.append(signum)

    signal.signal(signal.SIGINT, interrupt)
    signal.signal(signal.SIGTERM, interrupt)

    def alive(job):  # a process of the job's group is still there (the job's own one is reaped by poll)
        procs[job].poll()
        try:
            os.killpg(procs[job].pid, 0)
        except ProcessLookupError:
            return False
        return True

    start, history, stopped, last_stop = time.time(), [], [], 0.0
    while True:
        if not interrupted:
            time.sleep(args.poll)
        now = time.time() - start
        if interrupted:
            print(f"interrupted at {now:.0f} s: stopping every job", flush=True)
        running = [j for j in procs if procs[j].poll() is None and j not in stopped]
        pending = [j for j in jobs if j not in procs]
        while pending and len(running) < parallel and now <= args.deadline and not interrupted:  # a free slot
            launch(pending[0])
            running.append(pending.pop(0))
        done = {j: epochs_logged(args.save_dir, j) for j in jobs}
        history.append((now, done))
        print(f"{now:5.0f} s, {len(running)} running: " + " ".join(f"{j[0]}:{j[1]}={done[j]}" for j in jobs),
              flush=True)
        if not running or now > args.deadline or interrupted:
            break
        earlier = [h for h in history if h[0] <= now - 60]
        if earlier and now - last_stop > 60 and len(running) > 1 and not pending:
            t0, done0 = earlier[-1]
            late = []
            for j in running:
                total = runner.job_epochs(j[0])
                rate = (done[j] - done0[j]) / (now - t0)  # epochs a second; 0 while a teacher trains
                if jobs.index(j) < core and rate > 0 and (total - done[j]) / rate > 0.92 * (args.deadline - now):
                    late.append(j)
            if late:
                print(f"late: {late}; stopping {running[-1]}", flush=True)
                stop(running[-1])
                stopped.append(running[-1])
                last_stop = now
    for job in procs:
        if procs[job].poll() is None:
            stop(job)
            stopped.append(job)
    gone = time.time() + 3  # let the stopped jobs' processes exit (at most 3 s), so that their files are whole
    while time.time() < gone and any(alive(job) for job in stopped):
        time.sleep(0.05)
    with tarfile.open(f"{args.pack_dir}/results.tgz", "w:gz") as tar:
        for pattern in ("*.jsonl", "*.log", "*.txt", "*.safetensors"):
            for path in glob.glob(f"{args.save_dir}/{pattern}"):
                tar.add(path, arcname=os.path.basename(path))
    unfinished = [f"{j[0]}_seed{j[1]}" for j in stopped if os.path.isdir(f"{args.save_dir}/{j[0]}_seed{j[1]}")]
    if unfinished:
        with tarfile.open(f"{args.save_dir}/ckpt.tar", "w") as tar:
            for name in unfinished:
                tar.add(f"{args.save_dir}/{name}", arcname=name)
        subprocess.run(["split", "-b", "15M", f"{args.save_dir}/ckpt.tar", f"{args.pack_dir}/ckpt.tar.part-"],
                       check=True)
    print("stopped:", stopped)
    print("not started:", [j for j in jobs if j not in procs])


if __name__ == "__main__":
    main()
