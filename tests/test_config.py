"""vitedu.config: a TrainConfig is frozen, and refuses what cannot be trained before any work starts; the command
line shares those checks and prints every explained error as one line, not a traceback."""

from __future__ import annotations

import copy
import dataclasses
import json
import math
import pickle
import re
import subprocess
import sys
from pathlib import Path

import pytest

from vitedu import config as K
from vitedu import train as T

REPO = Path(__file__).resolve().parents[1]


def test_presets_are_frozen_and_say_how_to_change_them():
    preset = K.PRESETS["digits"]
    with pytest.raises(dataclasses.FrozenInstanceError, match=r"dataclasses\.replace\(config, epochs=5\)"):
        preset.epochs = 5
    with pytest.raises(TypeError, match=r"dataclasses\.replace"):
        K.PRESETS["cluttered_digits"].model_kwargs["drop_path_rate"] = 0.3
    with pytest.raises(dataclasses.FrozenInstanceError):
        del preset.lr
    assert preset.epochs == 100 and K.PRESETS["cluttered_digits"].model_kwargs["drop_path_rate"] == 0.1
    shorter = dataclasses.replace(preset, epochs=5)  # the way to change one
    assert shorter.epochs == 5 and preset.epochs == 100


def test_model_kwargs_are_copied_and_the_config_still_serialises():
    overrides = {"drop_path_rate": 0.1}
    config = K.TrainConfig(model_kwargs=overrides)
    overrides["drop_path_rate"] = 0.5  # the caller's dict is not the config's
    assert config.model_kwargs == {"drop_path_rate": 0.1}
    saved = json.loads(json.dumps(dataclasses.asdict(config)))
    assert K.TrainConfig(**saved) == config  # what save_checkpoint writes and fit(resume=True) reads
    for clone in (copy.deepcopy(config), pickle.loads(pickle.dumps(config))):
        assert clone == config and isinstance(clone.model_kwargs, K.FrozenKwargs)


def test_fit_defaults_to_the_digits_preset_without_binding_it():
    import inspect

    assert inspect.signature(T.fit).parameters["config"].default is None


# field -> bad values; each must be refused with the field, the value and the valid range in the message.
BAD = [
    ("dataset", "mnist", "one of digits, cluttered_digits, cifar10, imagefolder"),
    ("model", "", "a model name"),
    ("model_kwargs", {1: 2}, "a dict of keyword arguments"),
    ("epochs", 0, "a whole number >= 1"),
    ("epochs", -3, "a whole number >= 1"),
    ("epochs", 2.5, "a whole number >= 1"),
    ("epochs", True, "a whole number >= 1"),
    ("batch_size", 0, "a whole number >= 1"),
    ("lr", math.nan, "a finite number > 0"),
    ("lr", math.inf, "a finite number > 0"),
    ("lr", 0.0, "a finite number > 0"),
    ("lr", -1e-3, "a finite number > 0"),
    ("min_lr", -1.0, "from 0 to lr"),
    ("min_lr", 1.0, "from 0 to lr"),
    ("warmup_epochs", -1, r"a number from 0 to epochs \(100\)"),
    ("warmup_epochs", 101, r"a number from 0 to epochs \(100\): lower warmup_epochs or raise epochs"),
    ("warmup_epochs", math.inf, r"a number from 0 to epochs \(100\)"),
    ("weight_decay", -0.05, "a finite number >= 0"),
    ("label_smoothing", 1.0, r"in \[0, 1\)"),
    ("grad_clip", -1.0, "a finite number >= 0"),
    ("augment", "flip", "one of none, digits"),
    ("teacher_epochs", -1, "a whole number >= 0"),
    ("teacher_path", 3, "'' or a file"),
    ("distill_alpha", 1.5, r"in \[0, 1\]"),
    ("distill_alpha", -0.1, r"in \[0, 1\]"),
    ("distill_temperature", -4.0, "a finite number >= 0"),
    ("position_step", 0, "a whole number >= 1"),
    ("grid_epochs", -1, "a whole number >= 0"),
    ("window_tokens", 2, r"0 \(the whole canvas\) or a window side of at least 3 patches"),
    ("window_epochs", -1, "a whole number >= 0"),
    ("window_start", -1, "a whole number >= 0"),
    ("train_on_val", "yes", "True or False"),
    ("train_fraction", 0.0, r"in \(0, 1\]"),
    ("train_fraction", 1.5, r"in \(0, 1\]"),
    ("seed", -1, "a whole number >= 0"),
    ("data_root", None, "a folder path"),
]


@pytest.mark.parametrize("name, value, allowed", BAD, ids=[f"{n}={v!r}" for n, v, _ in BAD])
def test_a_config_that_cannot_be_trained_is_refused_naming_field_value_and_range(name, value, allowed):
    with pytest.raises(K.ConfigError, match=rf"\b{name} must be [^;]*{allowed}") as err:
        dataclasses.replace(K.PRESETS["digits"], **{name: value})
    assert f"got {value!r}" in str(err.value) and isinstance(err.value, ValueError)


def test_every_problem_is_named_at_once_and_contradictions_too(tmp_path):
    with pytest.raises(K.ConfigError) as err:
        K.TrainConfig(epochs=0, batch_size=0, lr=math.nan)
    lines = str(err.value).splitlines()
    assert lines[0] == "this TrainConfig cannot be trained:" and len(lines) == 4
    teacher = tmp_path / "teacher.safetensors"
    teacher.write_bytes(b"")
    assert K.TrainConfig(teacher_path=str(teacher)).teacher_path == str(teacher)  # a file that is there: fine
    with pytest.raises(K.ConfigError, match="teacher_epochs and teacher_path must not both be set"):
        K.TrainConfig(teacher_epochs=3, teacher_path=str(teacher))


def test_a_window_needs_its_epochs_and_the_cluttered_digits():
    cluttered = K.PRESETS["speedrun"]
    assert dataclasses.replace(cluttered, window_tokens=4, window_epochs=10).window_tokens == 4
    for fields in ({"window_tokens": 4}, {"window_epochs": 10}):
        with pytest.raises(K.ConfigError, match="window_tokens and window_epochs go together"):
            dataclasses.replace(cluttered, **fields)
    with pytest.raises(K.ConfigError, match="only with dataset 'cluttered_digits'.*dataset='digits'"):
        dataclasses.replace(K.PRESETS["digits"], window_tokens=4, window_epochs=10)
    convit = dataclasses.replace(cluttered, model="convit_cluttered_digits", model_kwargs={}, window_tokens=4,
                                 window_epochs=1)
    with pytest.raises(K.ConfigError, match="needs a model whose forward takes keep=.*ConVit does not"):
        T.fit(convit, log=lambda line: None)  # refused before the first step


def test_fit_refuses_a_teacher_file_that_is_not_there_before_any_work(monkeypatch):
    """A config may name a teacher an earlier job will write; fit checks the file when the run starts."""
    config = dataclasses.replace(K.PRESETS["digits"], teacher_epochs=0, teacher_path="no/such/teacher.safetensors")
    monkeypatch.setattr(T, "make_loaders", lambda *a, **k: pytest.fail("no data may be loaded"))
    with pytest.raises(K.ConfigError, match=r"teacher_path must be an existing file .*no/such/teacher"):
        T.fit(config, device="cpu")


@pytest.mark.parametrize("argv, says", [
    (["--epochs", "0"], "epochs must be a whole number >= 1; got 0"),
    (["--epochs", "-3"], "epochs must be a whole number >= 1; got -3"),
    (["--batch-size", "0"], "batch_size must be a whole number >= 1; got 0"),
    (["--lr", "nan"], "lr must be a finite number > 0; got nan"),
    (["--distill-alpha", "2"], r"distill_alpha must be a number in \[0, 1\]; got 2.0"),
    (["--model", "vit_nothing"], "model must be a name of vitedu.list_models"),
])
def test_the_cli_refuses_a_bad_config_before_any_work(argv, says, capsys, monkeypatch):
    monkeypatch.setattr(T, "fit", lambda *a, **k: pytest.fail("fit must not start"))
    with pytest.raises(SystemExit) as exit_:
        T.main(["--dataset", "digits", *argv])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.splitlines()[0].startswith("usage: python -m vitedu.train")
    assert re.search(says, err)


def test_the_cli_prints_an_explained_error_as_one_line_in_a_subprocess(tmp_path):
    """A missing image folder (DatasetError) reaches the terminal as one line, exit status 1, no traceback."""
    missing = tmp_path / "no_images"
    run = subprocess.run([sys.executable, "-m", "vitedu.train", "--dataset", "imagefolder", "--data-root", str(missing),
                          "--epochs", "1", "--warmup-epochs", "0", "--device", "cpu"], capture_output=True, text=True,
                         cwd=REPO, timeout=120)
    assert run.returncode == 1 and run.stdout == ""
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("python -m vitedu.train: error: ") and str(missing) in lines[0]
    assert "Traceback" not in run.stderr
