"""vitedu.speedrun: the command trains, scores as chapter 8 does, writes a run that load_trained reads back, and
ends with its one line; a folder that holds a run and bad options are refused in one line, before any work."""

from __future__ import annotations

import json
import os
import re
from dataclasses import replace

import pytest
import torch
from train_recipes import quiet

import vitedu
from vitedu import cluttered as C
from vitedu import speedrun as S
from vitedu.config import PRESETS, ConfigError
from vitedu.train import Result

# The speedrun's recipe on a model one block deep and 16 wide, for two epochs: one on windows, one on canvases.
TINY = replace(PRESETS["speedrun"], epochs=2, grid_epochs=0, warmup_epochs=0.2, window_tokens=4, window_epochs=1,
               model_kwargs={**PRESETS["speedrun"].model_kwargs, "embed_dim": 16, "depth": 1})
LINE = re.compile(r"^speedrun: test accuracy \d+\.\d %, worst offset \d+\.\d %, \d+ s on \d+ threads?$")


def test_the_preset_is_the_honest_task_without_a_teacher():
    """The speedrun trains the shipped model's architecture on the task it is scored on (the digit anywhere), and
    spends no time on a convnet teacher."""
    config = PRESETS["speedrun"]
    assert config.dataset == "cluttered_digits" and config.model == "vit_cluttered_digits"
    assert config.position_step == 1 and config.teacher_epochs == 0 and not config.teacher_path
    assert config.grid_epochs < config.epochs and not config.train_on_val


def test_speedrun_trains_scores_and_writes_a_run_that_load_trained_reads(tmp_path, monkeypatch):
    # Fewer canvases: 1,000 a training epoch, 500 each for val and test, 100 for each of the 16 offsets.
    monkeypatch.setitem(C.CLUTTERED_SIZES, "train", 1_000)
    monkeypatch.setitem(C.CLUTTERED_SIZES, "val", 500)
    monkeypatch.setitem(C.CLUTTERED_SIZES, "test", 500)
    monkeypatch.setattr(S, "OFFSET_IMAGES", 100)
    run = S.speedrun(seed=3, out=tmp_path, device="cpu", progress=False, log=quiet, config=replace(TINY, seed=3))
    assert run.offsets.shape == (4, 4) and run.worst_offset == run.offsets.min().item()
    assert 0.0 <= run.worst_offset <= run.offsets.mean().item() <= 1.0 and 0.0 <= run.test_acc <= 1.0
    assert LINE.match(run.line()), run.line()
    record = json.loads((tmp_path / S.RESULT_FILE).read_text())
    assert record["line"] == run.line() and record["seed"] == 3 and record["threads"] == torch.get_num_threads()
    assert record["test_acc"] == run.test_acc and record["offsets"] == run.offsets.tolist()

    model, config = vitedu.load_trained(tmp_path)
    assert config == replace(TINY, seed=3)
    images = torch.randn(5, 1, 32, 32)
    with torch.no_grad():
        assert torch.equal(model(images), run.model(images))

    with pytest.raises(FileExistsError, match="already holds a training run.*--resume"):
        S.speedrun(seed=3, out=tmp_path, config=TINY, log=quiet)  # nothing is overwritten
    assert json.loads((tmp_path / S.RESULT_FILE).read_text()) == record


def test_the_line_names_a_resumed_run_and_a_gpu():
    run = S.SpeedrunResult(model=None, config=TINY, history=None, test_acc=0.9861, offsets=torch.full((4, 4), 0.975),
                           seconds=512.4, threads=1, device=torch.device("cpu"), resumed=False)
    assert run.line() == "speedrun: test accuracy 98.6 %, worst offset 97.5 %, 512 s on 1 thread"
    gpu = replace(run, device=torch.device("cuda"), resumed=True, threads=2)
    assert gpu.line().startswith("speedrun: test accuracy 98.6 %, worst offset 97.5 %, 512 s on cuda (resumed")


def test_the_command_ends_with_the_line_and_refuses_bad_options(tmp_path, monkeypatch, capsys):
    calls = []

    def fake_fit(config, **kwargs):  # the real fit is the test above; here only the command's plumbing
        calls.append((config, kwargs))
        model = vitedu.create_model(config.model, **TINY.model_kwargs)
        return Result(model, vitedu.train.History(), 0.5, config, optimizer=None)

    monkeypatch.setattr(S, "fit", fake_fit)
    threads = torch.get_num_threads()
    try:
        S.main(["--seed", "4", "--out", str(tmp_path / "run"), "--threads", "1", "--device", "cpu", "--no-progress"])
    finally:
        torch.set_num_threads(threads)
    config, kwargs = calls[-1]
    assert config == replace(PRESETS["speedrun"], seed=4) and kwargs["precision"] == "fp32"
    assert kwargs["validate_every"] == S.VALIDATE_EVERY
    assert kwargs["out"] == str(tmp_path / "run") and kwargs["progress"] is False
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert LINE.match(last) and last.startswith("speedrun: test accuracy 50.0 %") and last.endswith("on 1 thread")

    for argv, message in [
        (["--threads", "0"], "--threads is a number of CPU threads, at least 1; got 0"),
        (["--resume"], "--resume finishes the run saved in --out: give --out too"),
        (["--seed", "-1"], "seed must be a whole number >= 0; got -1"),
        (["--epochs", "0"], "epochs must be a whole number >= 1; got 0"),
        (["--processes", "0"], "--processes is a number of training processes, at least 1; got 0"),
        (["--device", "foo"], "device must be cpu, cuda, cuda:N or mps; got 'foo'"),
        (["--out", __file__], "--out must be a folder for the run's checkpoints"),
    ]:
        with pytest.raises(SystemExit) as exit_info:
            S.main(argv)
        assert exit_info.value.code == 2
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err

    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "train_state.json").write_text("{}")
    with pytest.raises(SystemExit) as exit_info:
        S.main(["--out", str(tmp_path / "old")])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and "already holds a training run" in err and len(err.strip().splitlines()) == 1


def test_resume_names_the_run_resumed_only_when_its_folder_held_one(tmp_path, monkeypatch):
    """--resume on an empty folder trains from scratch, and the line does not call that run resumed."""
    monkeypatch.setattr(S, "fit", lambda config, **kwargs: Result(
        vitedu.create_model(config.model, **TINY.model_kwargs), vitedu.train.History(), 0.5, config, optimizer=None))
    monkeypatch.setattr(S, "offset_accuracy", lambda *args: torch.full((4, 4), 0.5))
    fresh = S.speedrun(out=tmp_path / "empty", resume=True, device="cpu", log=quiet, config=TINY)
    assert not fresh.resumed and "resumed" not in fresh.line()
    (tmp_path / "held").mkdir()
    (tmp_path / "held" / "train_state.json").write_text("{}")
    held = S.speedrun(out=tmp_path / "held", resume=True, device="cpu", log=quiet, config=TINY)
    assert held.resumed and "(resumed: the seconds are this command's only)" in held.line()


def test_a_bad_seed_is_a_config_error_before_any_work():
    with pytest.raises(ConfigError, match="seed must be a whole number >= 0"):
        S.speedrun(seed=-1, log=quiet)


def test_a_shorter_run_keeps_the_grid_phase_in_proportion():
    preset = PRESETS["speedrun"]
    assert S.recipe(2) == replace(preset, seed=2)
    short = S.recipe(2, preset.epochs // 2)
    assert short.epochs == preset.epochs // 2 and short.grid_epochs == round(preset.grid_epochs / 2)


def test_several_processes_are_started_by_torchrun_with_the_same_options(tmp_path, monkeypatch):
    """--processes 2 hands the same command to torchrun's launcher, with the start time for the last line; the
    copies (WORLD_SIZE set) train. A folder that holds a run is refused before any copy starts."""
    import torch.distributed.run as run

    started = []
    monkeypatch.setattr(run, "main", lambda args: started.append(args))
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    monkeypatch.setenv(S.START, "0")  # restored after the test (launch sets it)
    argv = ["--seed", "1", "--out", str(tmp_path / "run"), "--processes", "2"]
    assert S.main(argv) is None
    assert started == [["--standalone", "--nproc_per_node=2", "-m", "vitedu.speedrun", *argv]]
    assert float(os.environ[S.START]) > 0
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "train_state.json").write_text("{}")
    with pytest.raises(SystemExit):
        S.main(["--out", str(tmp_path / "old"), "--processes", "2"])
    assert len(started) == 1
