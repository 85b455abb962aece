"""tools/gpu_sweep.py: many sweep jobs on one GPU against a deadline (how the GPU runs of issue 31 were made)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

TOOL = Path(__file__).resolve().parent.parent / "tools" / "gpu_sweep.py"


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


@pytest.mark.parametrize("spec", ["no_such_variant:1", "base:one"])
def test_a_bad_job_says_what_a_job_looks_like(tmp_path, spec):
    run = subprocess.run([sys.executable, str(TOOL), "--jobs", spec, "--deadline", "1", "--device", "cpu",
                          "--save-dir", str(tmp_path / "runs"), "--pack-dir", str(tmp_path / "out")],
                         capture_output=True, text=True)
    assert run.returncode != 0 and "VARIANT:SEED" in run.stderr and repr(spec) in run.stderr
    assert not (tmp_path / "runs").exists()  # nothing started, nothing half-written


@pytest.mark.slow  # starts a real job (its teacher) and stops it at the deadline
def test_a_job_past_the_deadline_is_stopped_and_what_it_wrote_is_packed(tmp_path):
    # 15 s: time for the job to import torch and open its log on a loaded 2-core CI machine (at 5 s it once had
    # not yet written base_seed0.log), far from the minutes its 30-epoch teacher takes
    run = subprocess.run([sys.executable, str(TOOL), "--jobs", "base:0", "--deadline", "15", "--poll", "1",
                          "--device", "cpu", "--save-dir", str(tmp_path / "runs"), "--pack-dir", str(tmp_path / "out")],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert "stopped: [('base', 0)]" in run.stdout
    with tarfile.open(tmp_path / "out" / "results.tgz") as tar:
        assert {"stdout_base_0.txt", "base_seed0.log", "sweep.jsonl"} <= set(tar.getnames())
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
    time.sleep(1)
'''


@pytest.mark.slow  # about 8 s: three runner processes, one after the other
def test_another_runner_s_jobs_run_at_most_parallel_at_once_in_priority_order(tmp_path):
    runner = tmp_path / "fake_runner.py"
    runner.write_text(FAKE_RUNNER)
    run = subprocess.run([sys.executable, str(TOOL), "--runner", str(runner), "--jobs", "job_a:0", "job_b:0",
                          "job_c:1", "--parallel", "1", "--poll", "0.5", "--deadline", "120", "--device", "cpu",
                          "--save-dir", str(tmp_path / "runs"), "--pack-dir", str(tmp_path / "out")],
                         capture_output=True, text=True, timeout=200)
    assert run.returncode == 0, run.stderr
    assert "stopped: []" in run.stdout and "not started: []" in run.stdout
    with tarfile.open(tmp_path / "out" / "results.tgz") as tar:
        rows = [json.loads(line) for line in tar.extractfile("sweep.jsonl").read().splitlines()]
    assert [(r["job"], r["seed"]) for r in rows] == [("job_a", 0), ("job_b", 0), ("job_c", 1)]
    starts = [r["start"] for r in rows]
    assert starts[1] - starts[0] >= 1 and starts[2] - starts[1] >= 1  # one at a time: each waited for the last


def test_a_resumed_job_counts_the_epochs_done_before_it_stopped(tmp_path):
    (tmp_path / "v_seed0.log").write_text("resuming runs/v_seed0 after epoch 40 of 100 (step 1600)\n"
                                          "epoch  41/100  train ...\n")
    assert _tool().epochs_logged(str(tmp_path), ("v", 0)) == 41
