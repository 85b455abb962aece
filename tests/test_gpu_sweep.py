"""benchmarks/gpu_sweep.py: many sweep jobs on one GPU against a deadline (how the sweeps' GPU runs were made)."""

from __future__ import annotations

import importlib.util
import json
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

TOOL = Path(__file__).resolve().parent.parent / "benchmarks" / "gpu_sweep.py"


def _tool():
    spec = importlib.util.spec_from_file_location("gpu_sweep", TOOL)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_epochs_are_counted_from_the_per_epoch_log(tmp_path):
    tool = _tool()
    assert tool.epochs_logged(str(tmp_path), ("v", 1)) == 0  # not started yet
    (tmp_path / "v_seed1.log").write_text("teacher: ...\nepoch   1/300  train ...\nresuming ...\n"
                                          "epoch   2/300  train ...\n")
    assert tool.epochs_logged(str(tmp_path), ("v", 1)) == 2


def test_a_bad_job_says_what_a_job_looks_like(tmp_path):
    run = subprocess.run([sys.executable, str(TOOL), "--jobs", "no_such_variant:1", "--deadline", "1", "--device",
                          "cpu", "--save-dir", str(tmp_path / "runs"), "--pack-dir", str(tmp_path / "out")],
                         capture_output=True, text=True)
    assert run.returncode != 0 and "VARIANT:SEED" in run.stderr and "'no_such_variant:1'" in run.stderr
    assert not (tmp_path / "runs").exists()  # nothing started, nothing half-written


def test_a_seed_that_is_not_a_number_says_what_a_job_looks_like(tmp_path, monkeypatch):
    """In this process (the exit code and stderr of such a refusal are checked by the test above)."""
    monkeypatch.setattr(sys, "argv", ["gpu_sweep.py", "--jobs", "base:one", "--deadline", "1", "--device", "cpu",
                                      "--save-dir", str(tmp_path / "runs"), "--pack-dir", str(tmp_path / "out")])
    with pytest.raises(SystemExit, match="VARIANT:SEED") as refused:
        _tool().main()
    assert "'base:one'" in str(refused.value.code)
    assert not (tmp_path / "runs").exists()


SLEEPING_RUNNER = '''
import argparse, os, subprocess, sys, time
def job_epochs(name):
    return 300 if name == "sleeper" else None
if __name__ == "__main__":
    p = argparse.ArgumentParser()
    for flag in ("--variants", "--seeds", "--workers", "--device", "--save-dir", "--out"):
        p.add_argument(flag)
    a = p.parse_args()
    open(a.out, "a").close()  # as sweep_cluttered.py, which opens it at the start
    os.makedirs(f"{a.save_dir}/{a.variants}_seed{a.seeds}")  # its checkpoint, as sweep_cluttered.py's
    with open(f"{a.save_dir}/{a.variants}_seed{a.seeds}/last.pt", "w") as ckpt:
        ckpt.write("weights")
    with open(f"{a.save_dir}/{a.variants}_seed{a.seeds}.log", "a") as log:
        print("epoch 1/300", file=log, flush=True)
    worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])  # as the sweep's pool
    with open(f"{a.save_dir}/worker.pid", "w") as pid:
        pid.write(str(worker.pid))
    time.sleep(300)
'''


def _gone(pid: int) -> bool:
    """The process has exited (a zombie waiting for its new parent to reap it counts as exited)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def test_a_job_past_the_deadline_is_stopped_and_what_it_wrote_is_packed(tmp_path):
    """A job that would run for minutes, with a worker process of its own, is stopped at the deadline (3 s: a
    plain Python starts in well under that, even on a loaded machine); its log, stdout and checkpoint are packed.
    test_a_real_sweep_job_stopped_early_is_packed_the_same runs benchmarks/sweep_cluttered.py's own job."""
    runner = tmp_path / "sleeping_runner.py"
    runner.write_text(SLEEPING_RUNNER)
    run = subprocess.run([sys.executable, str(TOOL), "--runner", str(runner), "--jobs", "sleeper:0", "--deadline",
                          "3", "--poll", "0.2", "--device", "cpu", "--save-dir", str(tmp_path / "runs"),
                          "--pack-dir", str(tmp_path / "out")], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "stopped: [('sleeper', 0)]" in run.stdout and "interrupted" not in run.stdout
    assert _gone(int((tmp_path / "runs" / "worker.pid").read_text()))  # the job's whole process group
    with tarfile.open(tmp_path / "out" / "results.tgz") as tar:
        assert {"stdout_sleeper_0.txt", "sleeper_seed0.log", "sweep.jsonl"} <= set(tar.getnames())
        assert tar.extractfile("sleeper_seed0.log").read() == b"epoch 1/300\n"
        assert tar.extractfile("sweep.jsonl").read() == b""  # stopped before it could record a row
    pieces = sorted((tmp_path / "out").glob("ckpt.tar.part-*"))
    assert pieces, "the stopped job's checkpoint is not packed"
    (tmp_path / "ckpt.tar").write_bytes(b"".join(p.read_bytes() for p in pieces))
    with tarfile.open(tmp_path / "ckpt.tar") as tar:
        assert tar.extractfile("sleeper_seed0/last.pt").read() == b"weights"


@pytest.mark.slow  # starts a real job (its teacher), a few seconds of importing torch twice
def test_a_real_sweep_job_stopped_early_is_packed_the_same(tmp_path):
    """benchmarks/sweep_cluttered.py takes the command line the tool gives it; Ctrl-C stops its job (the sweep and its
    pool's worker) as the deadline would, once the job has opened its log, and what it wrote is packed."""
    out, runs = tmp_path / "out", tmp_path / "runs"
    tool = subprocess.Popen([sys.executable, str(TOOL), "--jobs", "base:0", "--deadline", "600", "--poll", "0.2",
                             "--device", "cpu", "--save-dir", str(runs), "--pack-dir", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        waited = time.monotonic()
        while not (runs / "base_seed0.log").exists():  # the worker has imported torch and started the teacher
            assert tool.poll() is None and time.monotonic() - waited < 240, "the job never opened its log"
            time.sleep(0.2)
        tool.send_signal(signal.SIGINT)
        stdout, stderr = tool.communicate(timeout=60)
    finally:
        tool.kill()
    assert tool.returncode == 0, stderr
    assert "interrupted at" in stdout and "stopped: [('base', 0)]" in stdout, stdout
    with tarfile.open(out / "results.tgz") as tar:
        assert {"stdout_base_0.txt", "base_seed0.log", "sweep.jsonl"} <= set(tar.getnames())
        assert "error" not in tar.extractfile("stdout_base_0.txt").read().decode().lower()  # took the options
        assert tar.extractfile("sweep.jsonl").read() == b""  # stopped before it could record a row


FAKE_RUNNER = '''
import argparse, json, time
RUN_COMMAND = ["run"]
def job_epochs(name):
    return 2 if name.startswith("job") else None
if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("command")
    for flag in ("--variants", "--seeds", "--workers", "--device", "--save-dir", "--out"):
        p.add_argument(flag)
    a = p.parse_args()
    with open(f"{a.save_dir}/{a.variants}_seed{a.seeds}.log", "a") as log:
        for epoch in (1, 2):
            print(f"epoch {epoch}/2", file=log, flush=True)
    with open(a.out, "a") as out:
        out.write(json.dumps({"job": a.variants, "seed": int(a.seeds), "start": time.time()}) + "\\n")
    time.sleep(0.5)
'''


@pytest.mark.slow  # about 3 s: three runner processes, one after the other
def test_another_runner_s_jobs_run_at_most_parallel_at_once_in_priority_order(tmp_path):
    runner = tmp_path / "fake_runner.py"
    runner.write_text(FAKE_RUNNER)
    run = subprocess.run([sys.executable, str(TOOL), "--runner", str(runner), "--jobs", "job_a:0", "job_b:0",
                          "job_c:1", "--parallel", "1", "--poll", "0.1", "--deadline", "120", "--device", "cpu",
                          "--save-dir", str(tmp_path / "runs"), "--pack-dir", str(tmp_path / "out")],
                         capture_output=True, text=True, timeout=200)
    assert run.returncode == 0, run.stderr
    assert "stopped: []" in run.stdout and "not started: []" in run.stdout
    with tarfile.open(tmp_path / "out" / "results.tgz") as tar:
        rows = [json.loads(line) for line in tar.extractfile("sweep.jsonl").read().splitlines()]
    assert [(r["job"], r["seed"]) for r in rows] == [("job_a", 0), ("job_b", 0), ("job_c", 1)]
    starts = [r["start"] for r in rows]
    assert starts[1] - starts[0] >= 0.5 and starts[2] - starts[1] >= 0.5  # one at a time: each waited for the last


def test_a_resumed_job_counts_the_epochs_done_before_it_stopped(tmp_path):
    (tmp_path / "v_seed0.log").write_text("resuming runs/v_seed0 after epoch 40 of 100 (step 1600)\n"
                                          "epoch  41/100  train ...\n")
    assert _tool().epochs_logged(str(tmp_path), ("v", 0)) == 41
