"""The package's edges: every bad input is refused, before any work, with what was expected, what was given and
what to do (no silent input).

One table of bad inputs across the entry points: package functions (``create_model``, ``load_trained``, the
registry's settings, ``TrainConfig``, ``MAEConfig``) and the command lines, called in-process through their
``main(argv)``: ``python -m vitedu.train`` and ``tools/pretrain_mae.py``. Each row says the exception (a CLI:
``SystemExit`` with a non-zero code, one error line on stderr and no traceback) and a pattern its message must
match, which names the bad value and the fix. No row may write a file into its output folder, and no row may start
training: ``fit`` and ``pretrain`` are replaced by functions that fail the test.
"""

from __future__ import annotations

import copy
import json
import pickle
import re
from pathlib import Path
from typing import Callable

import pytest
import torch
from safetensors.torch import save_file
from tools_loader import load_tool

import vitedu
from vitedu import mae_pretrain as MP
from vitedu import registry
from vitedu import train as T
from vitedu.checkpoints import CheckpointError
from vitedu.config import ConfigError, TrainConfig

mae_tool = load_tool("pretrain_mae")
FIT, PRETRAIN = T.fit, MP.pretrain  # the real ones: the fixture no_work replaces T.fit and the tool's pretrain

NO_CUDA = pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")


def _set_depth() -> None:
    vitedu.MODEL_CONFIGS["vit_cluttered_digits"]["depth"] = 2


def _a_file(tmp_path: Path) -> str:
    """A file beside the output folder, where a folder is expected."""
    path = tmp_path / "notes.txt"
    path.write_text("not a run")
    return str(path)


# (id, call(tmp_path, out), exception, pattern of the message). `out` is an empty folder that must stay empty.
PACKAGE_CASES: list[tuple[str, Callable[[Path, Path], object], type[BaseException], str]] = [
    ("pretrained is a missing path", lambda t, o: vitedu.create_model("vit_cluttered_digits", pretrained="missing.pt"),
     TypeError, r"pretrained must be True .* or False .*; got 'missing.pt'.*checkpoint_path='missing.pt'"),
    ("pretrained is a number", lambda t, o: vitedu.create_model("vit_cluttered_digits", pretrained=1),
     TypeError, r"got 1: pass True or False"),
    ("checkpoint_path missing", lambda t, o: vitedu.create_model("vit_digits_patch2_8", checkpoint_path=o / "no.pt"),
     FileNotFoundError, r"checkpoint_path must be an existing state_dict file .*no\.pt', which is not a file"),
    ("pretrained and checkpoint_path", lambda t, o: vitedu.create_model(
        "vit_cluttered_digits", pretrained=True, checkpoint_path="w.pt"), ValueError, r"'w.pt'.*pass only one"),
    ("unknown model name", lambda t, o: vitedu.create_model("vit_nothing"),
     ValueError, r"unknown model 'vit_nothing'; available models: .*vit_digits_patch2_8"),
    ("registry setting assigned", lambda t, o: _set_depth(),
     TypeError, r"cannot change; build a variant with overrides instead, e.g\. vitedu\.create_model\(name, depth=2\)"),
    ("registry settings updated", lambda t, o: registry.MODELS["vit_digits_patch2_8"].kwargs.update(depth=1),
     TypeError, r"create_model\(name, depth=2\)"),
    ("registry setting deleted", lambda t, o: vitedu.models.VARIANT_CONFIGS["cait_xxs24_224"][1].pop("depth"),
     TypeError, r"dict\(vitedu\.MODEL_CONFIGS\[name\]\)"),
    ("load_trained: no folder", lambda t, o: vitedu.load_trained(o / "nope"),
     FileNotFoundError, r"'.*nope' does not exist; python -m vitedu\.train --out .*nope .*writes one"),
    ("load_trained: folder without a run", lambda t, o: vitedu.load_trained(o),
     FileNotFoundError, r"holds no training run \(no train_state\.json\).*python -m vitedu\.train --out"),
    ("load_trained: a file", lambda t, o: vitedu.load_trained(_a_file(t)),
     NotADirectoryError, r"notes\.txt' is a file; point it at the run's folder"),
    ("fit: out is a file", lambda t, o: FIT(TrainConfig(epochs=1, warmup_epochs=0), out=_a_file(t), device="cpu"),
     CheckpointError, r"out must be a folder for the run's checkpoints; got '.*notes\.txt', which is a file"),
    ("pretrain: out is a file", lambda t, o: PRETRAIN(MP.MAEConfig(epochs=1, warmup_epochs=0), out=_a_file(t)),
     CheckpointError, r"out must be a folder .*notes\.txt', which is a file: pick another path"),
    ("check_device: unknown", lambda t, o: vitedu.utils.check_device("gpu"),
     ValueError, r"device must be cpu, cuda, cuda:N or mps; got 'gpu'"),
    ("TrainConfig epochs 0", lambda t, o: TrainConfig(epochs=0),
     ConfigError, r"epochs must be a whole number >= 1; got 0"),
    ("MAEConfig epochs 0", lambda t, o: MP.MAEConfig(epochs=0, warmup_epochs=0),
     ConfigError, r"epochs must be a whole number >= 1 \(0 epochs would save an untrained encoder\); got 0"),
    ("MAEConfig mask_ratio 1.5", lambda t, o: MP.MAEConfig(mask_ratio=1.5),
     ConfigError, r"mask_ratio must be the share of the 64 patches hidden, in \(0, 1\).*; got 1\.5"),
    ("MAEConfig mask_ratio hides all", lambda t, o: MP.MAEConfig(mask_ratio=0.999),
     ConfigError, r"keeping at least one .*; got 0\.999"),
    ("MAEConfig betas", lambda t, o: MP.MAEConfig(betas=(0.9, 1.5)),
     ConfigError, r"betas must be two numbers in \[0, 1\), e\.g\. \(0\.9, 0\.95\); got \(0\.9, 1\.5\)"),
    ("MAEConfig warm-up longer than the run", lambda t, o: MP.MAEConfig(epochs=10),
     ConfigError, r"warmup_epochs must be a number from 0 to epochs \(10\): lower warmup_epochs or raise epochs .*; "
     r"got 40\.0"),
    ("TrainConfig warm-up longer than the run", lambda t, o: TrainConfig(epochs=2, warmup_epochs=5),
     ConfigError, r"warmup_epochs must be a number from 0 to epochs \(2\): lower warmup_epochs or raise epochs .*; "
     r"got 5"),
    ("MAEConfig batch_size 0", lambda t, o: MP.MAEConfig(batch_size=0),
     ConfigError, r"batch_size must be a whole number >= 1; got 0"),
    ("MAEConfig base_lr nan", lambda t, o: MP.MAEConfig(base_lr=float("nan")),
     ConfigError, r"base_lr must be a finite number > 0; got nan"),
]

# (id, argv(tmp_path, out), pattern of the error line). Every row exits non-zero before any work.
TRAIN_CLI_CASES: list = [
    ("threads -2", lambda t, o: ["--threads", "-2"], r"--threads must be a whole number >= 1 .*; got -2"),
    ("threads 0", lambda t, o: ["--threads", "0"], r"--threads must be a whole number >= 1 .*; got 0"),
    ("device foo", lambda t, o: ["--device", "foo"], r"device must be cpu, cuda, cuda:N or mps; got 'foo'"),
    pytest.param("device cuda without CUDA", lambda t, o: ["--device", "cuda"],
                 r"device 'cuda' asks for a CUDA GPU, but torch sees none .*use 'cpu'", marks=NO_CUDA,
                 id="device cuda without CUDA"),
    ("resume without out", lambda t, o: ["--resume"], r"--resume .* no --out was given: add --out <run folder>"),
    ("resume an empty folder", lambda t, o: ["--resume", "--out", str(o)],
     r"--resume: there is nothing to resume in '.*out' \(no train_state\.json\); drop --resume"),
    ("warm-up longer than the run", lambda t, o: ["--warmup-epochs", "50", "--epochs", "2", "--out", str(o)],
     r"warmup_epochs must be a number from 0 to epochs \(2\): lower warmup_epochs or raise epochs .*; got 50\.0"),
    ("out is a file", lambda t, o: ["--out", _a_file(t)], r"--out must be a folder .*notes\.txt', which is a file"),
    ("save-weights is a folder", lambda t, o: ["--save-weights", str(o)],
     r"--save-weights must be a file path .*; got '.*out', which is a folder"),
    ("a 224-pixel RGB model on the digits", lambda t, o: ["--model", "vit_tiny_patch16_224", "--out", str(o)],
     r"'vit_tiny_patch16_224' takes 3-channel 224-pixel images, but the dataset 'digits' gives 1-channel 8-pixel "
     r"ones; pick a model from vitedu\.list_models\(\) that fits it, e\.g\. .*vit_digits_patch2_8"),
    ("a digits model on CIFAR-10", lambda t, o: ["--dataset", "cifar10", "--model", "vit_digits_patch2_8"],
     r"'vit_digits_patch2_8' takes 1-channel 8-pixel .* 'cifar10' gives 3-channel 32-pixel .*vit_cifar_patch4_32"),
    ("unknown model", lambda t, o: ["--model", "vit_nothing"], r"model must be a name of vitedu\.list_models\(\); "
     r"got 'vit_nothing'"),
    ("epochs 0", lambda t, o: ["--epochs", "0", "--out", str(o)], r"epochs must be a whole number >= 1; got 0"),
    ("lr nan", lambda t, o: ["--lr", "nan"], r"lr must be a finite number > 0; got nan"),
]

MAE_CLI_CASES: list = [
    ("epochs 0", lambda t, o: ["--epochs", "0", "--warmup-epochs", "0"],
     r"epochs must be a whole number >= 1 \(0 epochs would save an untrained encoder\); got 0"),
    ("mask ratio 1.5", lambda t, o: ["--mask-ratio", "1.5"], r"mask_ratio must be .* in \(0, 1\) .*; got 1\.5"),
    ("warm-up longer than the run", lambda t, o: ["--epochs", "2"],
     r"warmup_epochs must be a number from 0 to epochs \(2\): lower warmup_epochs or raise epochs .*; got 40\.0"),
    ("batch size 0", lambda t, o: ["--batch-size", "0"], r"batch_size must be a whole number >= 1; got 0"),
    ("threads 0", lambda t, o: ["--threads", "0"], r"--threads must be a whole number >= 1 .*; got 0"),
    ("device foo", lambda t, o: ["--device", "foo"], r"device must be cpu, cuda, cuda:N or mps; got 'foo'"),
    ("probe 0", lambda t, o: ["--probe", "0"], r"--probe must be a number of labelled canvases >= 1; got 0"),
    ("stop-after 0", lambda t, o: ["--stop-after", "0"], r"--stop-after must be an epoch >= 1 .*; got 0"),
]


@pytest.fixture
def out(tmp_path: Path) -> Path:
    """The output folder every row points at; it must be empty afterwards."""
    folder = tmp_path / "out"
    folder.mkdir()
    return folder


@pytest.fixture
def no_work(monkeypatch: pytest.MonkeyPatch) -> None:
    """Training of either kind fails the test: a refusal comes before any work."""
    monkeypatch.setattr(T, "fit", lambda *a, **k: pytest.fail("fit started: the input was not refused first"))
    monkeypatch.setattr(T, "make_loaders", lambda *a, **k: pytest.fail("data was loaded before the refusal"))
    monkeypatch.setattr(mae_tool, "pretrain", lambda *a, **k: pytest.fail("pretrain started before the refusal"))
    monkeypatch.setattr(torch, "set_num_threads", lambda n: pytest.fail("--threads was applied before the checks"))


def _files(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*")]


@pytest.mark.usefixtures("no_work")
@pytest.mark.parametrize("name, call, error, says", PACKAGE_CASES, ids=[case[0] for case in PACKAGE_CASES])
def test_a_function_refuses_a_bad_input_and_says_what_to_do(name, call, error, says, tmp_path, out):
    before = dict(registry.MODELS["vit_cluttered_digits"].kwargs)
    with pytest.raises(error) as refused:
        call(tmp_path, out)
    assert re.search(says, str(refused.value)), str(refused.value)
    assert registry.MODELS["vit_cluttered_digits"].kwargs == before and _files(out) == []


def _refused_by(main: Callable, argv: list[str], capsys: pytest.CaptureFixture) -> str:
    """Run a command line in-process; it must exit non-zero with its error on stderr, no traceback, no output."""
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code not in (0, None)
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err and captured.out == ""
    return captured.err.strip().splitlines()[-1]


@pytest.mark.usefixtures("no_work")
@pytest.mark.parametrize("name, argv, says", TRAIN_CLI_CASES,
                         ids=[case[0] if isinstance(case, tuple) else case.id for case in TRAIN_CLI_CASES])
def test_the_training_cli_refuses_a_bad_option_before_any_work(name, argv, says, tmp_path, out, capsys):
    line = _refused_by(T.main, argv(tmp_path, out), capsys)
    assert line.startswith("python -m vitedu.train: error: ") and re.search(says, line), line
    assert _files(out) == []


@pytest.mark.usefixtures("no_work")
@pytest.mark.parametrize("name, argv, says", MAE_CLI_CASES, ids=[case[0] for case in MAE_CLI_CASES])
def test_the_mae_tool_refuses_a_bad_option_in_one_line_before_any_work(name, argv, says, tmp_path, out, capsys):
    line = _refused_by(mae_tool.main, ["--out", str(out / "run"), *argv(tmp_path, out)], capsys)
    assert line.startswith("python tools/pretrain_mae.py: error: ") and re.search(says, line), line
    assert _files(out) == []  # not even the run's folder


def test_the_table_holds_at_least_thirty_bad_inputs():
    assert len(PACKAGE_CASES) + len(TRAIN_CLI_CASES) + len(MAE_CLI_CASES) >= 30


def test_an_unexplained_error_keeps_its_traceback(monkeypatch):
    """The CLI prints only the package's own explained errors as one line; a bug (here a plain ValueError from
    inside fit) must reach the reader with its traceback, not disguised as a bad option."""
    def buggy_fit(*args, **kwargs):
        raise ValueError("a bug deep inside fit")

    monkeypatch.setattr(T, "fit", buggy_fit)
    with pytest.raises(ValueError, match="a bug deep inside fit"):
        T.main(["--epochs", "1", "--warmup-epochs", "0"])


def test_an_explained_error_inside_fit_is_one_line(monkeypatch, capsys):
    def fit_with_a_bad_file(*args, **kwargs):
        raise CheckpointError("runs/x/model.safetensors is empty (0 bytes): save it again")

    monkeypatch.setattr(T, "fit", fit_with_a_bad_file)
    line = _refused_by(T.main, [], capsys)
    assert line == "python -m vitedu.train: error: runs/x/model.safetensors is empty (0 bytes): save it again"


def test_checkpoint_path_loads_a_state_dict_as_timm_does(tmp_path):
    """timm's keyword: the file's weights, strictly, in eval mode, with the registry's inputs marked trained."""
    source = vitedu.create_model("vit_digits_patch2_8")
    save_file(source.state_dict(), str(tmp_path / "w.safetensors"))
    model = vitedu.create_model("vit_digits_patch2_8", checkpoint_path=tmp_path / "w.safetensors")
    assert all(torch.equal(a, b) for a, b in zip(source.state_dict().values(), model.state_dict().values()))
    assert not model.training and model.pretrained_cfg["trained"] is True
    with pytest.raises(ValueError, match="depth"):  # another architecture than the file's is named, not loaded
        vitedu.create_model("vit_digits_patch2_8", depth=2, checkpoint_path=tmp_path / "w.safetensors")


def test_the_frozen_settings_still_read_as_a_dict():
    """Every reader of the registry's settings keeps working: spread, copy, compare, JSON, pickle."""
    settings = vitedu.MODEL_CONFIGS["vit_cluttered_digits"]
    plain = dict(settings)
    assert {**settings} == plain == copy.deepcopy(settings) == pickle.loads(pickle.dumps(settings))
    assert json.loads(json.dumps(settings)) == plain
    variant = {**settings, "depth": 2}  # the way to a variant: a new dict, or create_model(name, depth=2)
    assert len(vitedu.create_model("vit_cluttered_digits", depth=2).blocks) == 2 and variant["depth"] == 2
    assert len(vitedu.create_model("vit_cluttered_digits").blocks) == settings["depth"] == 4
