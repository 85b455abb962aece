"""benchmarks/speedrun_summary.py: the appendix's one file holds every sweep run with its validation curve (a run
stopped early too) and the command's runs with their validation history, read from the files that wrote them."""

from __future__ import annotations

import json
import math

from tools_loader import load_benchmark

S = load_benchmark("speedrun_summary")


def test_a_log_gives_the_validation_curve(tmp_path):
    log = ("epoch   1/50  train 2.199 18.5%  val 2.564 13.7%  lr 5.3e-03  493 img/s\n"
           "a line that is not an epoch\n"
           "epoch  50/50  train 0.563 97.6%  val 0.217 96.0%  lr 1.0e-05  480 img/s\n")
    path = tmp_path / "x_seed0.log"
    path.write_text(log)
    assert S.curve(path) == [0.137, 0.96]


def test_the_summary_reads_sweeps_stopped_runs_and_the_command(tmp_path, monkeypatch):
    logs, command = tmp_path / "speedrun", tmp_path / "speedrun" / "command"
    (command / "seed0").mkdir(parents=True)
    line = "epoch   {e}/2  train 1.0 50.0%  val 1.0 {a}%  lr 1e-3  500 img/s\n"
    (logs / "done_seed0.log").write_text(line.format(e=1, a=40.0) + line.format(e=2, a=60.0))
    (logs / "stopped_seed1.log").write_text(line.format(e=1, a=30.0))
    sweep = tmp_path / "sweep.jsonl"
    sweep.write_text(json.dumps({"variant": "done", "seed": 0, "val_acc": 0.6}) + "\n")
    history = {"epoch": [1, 2], "val_acc": [math.nan, 0.9], "images_per_s": [900.0, 1000.0]}
    (command / "seed0" / "speedrun.json").write_text(json.dumps({"test_acc": 0.95, "seconds": 30.0}))
    (command / "seed0" / "train_state.json").write_text(json.dumps({"history": history}))
    monkeypatch.setattr(S, "SWEEP", sweep)
    monkeypatch.setattr(S, "LOGS", logs)
    monkeypatch.setattr(S, "COMMAND", command)

    runs = S.sweep_runs()
    assert runs == [{"variant": "done", "seed": 0, "val_acc": 0.6, "val_curve": [0.4, 0.6]},
                    {"variant": "stopped", "seed": 1, "stopped": True, "val_curve": [0.3]}]
    [run] = S.command_runs()
    assert run["val_epochs"] == [2] and run["val_curve"] == [0.9]  # epochs without validation are left out
    assert run["images_per_s"] == [900.0, 1000.0] and run["test_acc"] == 0.95
