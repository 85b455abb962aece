"""vitedu.run_files (and vitedu.checkpoints' reading) as training uses them: save_checkpoint / load_checkpoint /
load_trained round trips, files that are never unpickled, torn checkpoints, and a resumed run that matches an
uninterrupted one."""

from __future__ import annotations

import json
import pickle
import re
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from train_recipes import SMALL, TINY, quiet

from vitedu import create_model
from vitedu import run_files as RF
from vitedu import train as T
from vitedu.cnn import ConvTeacher
from vitedu.optimizers import param_groups
from vitedu.run_files import STATE_FILE, TEACHER_FILE, load_checkpoint, save_checkpoint

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def one_epoch_run(tmp_path_factory):
    """One epoch of TINY and the folder it saved, made once for the tests that only read it (a test that damages
    the folder works on a copy)."""
    out = tmp_path_factory.mktemp("one_epoch")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    result = T.fit(replace(TINY, epochs=1), out=out, progress=False, log=quiet, device="cpu")
    torch.set_num_threads(threads)
    return result, out


@pytest.fixture(scope="module")
def tiny_runs(tmp_path_factory):
    """TINY trained once without checkpoints ("plain") and once checkpointing every epoch into a folder ("full"),
    for the tests that compare other runs with them (each made once instead of in every such test)."""
    out = tmp_path_factory.mktemp("tiny_full")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    plain = T.fit(TINY, progress=False, log=quiet, device="cpu")
    full = T.fit(TINY, out=out, progress=False, log=quiet, device="cpu")
    torch.set_num_threads(threads)
    return {"plain": plain, "full": full}


def test_checkpoint_roundtrip_gives_identical_predictions(one_epoch_run):
    result, out = one_epoch_run
    model, config = T.load_trained(out)
    assert config == replace(TINY, epochs=1)
    images = torch.randn(16, 1, 8, 8)
    result.model.eval()
    with torch.no_grad():
        assert torch.equal(model(images), result.model(images))
    state = json.loads((out / STATE_FILE).read_text())
    assert state["epoch"] == 1 and state["step"] == 10 and state["history"]["epoch"] == [1]
    # Optimizer moments are tensors in safetensors, not pickles.
    flat = load_file(str(out / RF.OPTIMIZER_FILE))
    assert any(k.endswith("exp_avg_sq") for k in flat) and all(torch.is_tensor(v) for v in flat.values())


def test_loading_never_unpickles(one_epoch_run, monkeypatch):
    _, out = one_epoch_run

    def boom(*args, **kwargs):
        raise AssertionError("pickle was used to load a checkpoint")

    monkeypatch.setattr(pickle, "load", boom)
    monkeypatch.setattr(pickle, "loads", boom)
    monkeypatch.setattr(pickle, "Unpickler", boom)
    T.load_trained(out)


def test_resume_matches_uninterrupted_run(tiny_runs, tmp_path):
    full = tiny_runs["full"]
    T.fit(TINY, out=tmp_path / "split", stop_after=1, progress=False, log=quiet, device="cpu")
    half = json.loads((tmp_path / "split" / STATE_FILE).read_text())
    assert half["epoch"] == 1
    resumed = T.fit(TINY, out=tmp_path / "split", resume=True, progress=False, log=quiet, device="cpu")
    assert resumed.history.epoch == [1, 2] and resumed.history.lr == full.history.lr
    for (name, a), b in zip(full.model.state_dict().items(), resumed.model.state_dict().values()):
        assert torch.equal(a, b), name
    assert resumed.test_acc == full.test_acc


def test_checkpointing_every_epoch_leaves_the_run_bit_identical(tiny_runs, tmp_path):
    """benchmarks/README.md: on a CPU, `make weights` (vitedu.train's CLI, no checkpoints) and the sweep's path
    (benchmarks/sweep_cluttered.py: a checkpoint every epoch, resume=True) train the same weights. Saving changes
    neither the model nor the optimizer, and every epoch seeds its own random numbers, so a run with checkpoints is
    the run without them, bit for bit."""
    plain = tiny_runs["plain"]
    saved = T.fit(TINY, out=tmp_path / "run", resume=True, progress=False, log=quiet, device="cpu")
    assert (tmp_path / "run" / STATE_FILE).exists()  # it did checkpoint
    assert saved.history.train_loss == plain.history.train_loss
    for (name, a), b in zip(plain.model.state_dict().items(), saved.model.state_dict().values()):
        assert torch.equal(a, b), name


@pytest.mark.integration
def test_teacher_distillation_run_resumes_with_the_same_teacher(tiny_runs, tmp_path):
    config = replace(TINY, teacher_epochs=1, distill_alpha=0.5)
    full = T.fit(config, out=tmp_path / "full", progress=False, log=quiet, device="cpu")
    assert isinstance(full.teacher, ConvTeacher) and (tmp_path / "full" / TEACHER_FILE).exists()
    T.fit(config, out=tmp_path / "split", stop_after=1, progress=False, log=quiet, device="cpu")
    resumed = T.fit(config, out=tmp_path / "split", resume=True, progress=False, log=quiet, device="cpu")
    for a, b in zip(full.teacher.state_dict().values(), resumed.teacher.state_dict().values()):
        assert torch.equal(a, b)
    for a, b in zip(full.model.state_dict().values(), resumed.model.state_dict().values()):
        assert torch.equal(a, b)
    plain = tiny_runs["plain"]  # the teacher changes the student
    assert not torch.equal(plain.model.head.weight, full.model.head.weight)


def test_resume_restores_optimizer_state(one_epoch_run):
    result, out = one_epoch_run
    model = create_model(TINY.model, **TINY.model_kwargs)
    optimizer = torch.optim.AdamW(param_groups(model, TINY.weight_decay), lr=TINY.lr)
    load_checkpoint(out, model, optimizer)
    saved = result.optimizer.state_dict()
    loaded = optimizer.state_dict()
    assert loaded["param_groups"][0]["lr"] == saved["param_groups"][0]["lr"]
    for index, state in saved["state"].items():
        for key, value in state.items():
            assert torch.equal(loaded["state"][index][key], value), (index, key)


def test_torn_checkpoint_is_detected(one_epoch_run, tmp_path):
    tmp_path = Path(shutil.copytree(one_epoch_run[1], tmp_path / "run"))  # a copy: this test tears it
    state = json.loads((tmp_path / STATE_FILE).read_text())
    state["epoch"] = 2  # as if the JSON were written for a later epoch than the weights
    (tmp_path / STATE_FILE).write_text(json.dumps(state))
    with pytest.raises(ValueError, match="interrupted while saving"):
        T.load_trained(tmp_path)


def test_resume_carries_on_with_the_saved_config_and_a_new_run_starts_afresh(tmp_path):
    """resume=True continues the run in ``out`` with its saved config, whatever config is passed; without resume=True
    an existing checkpoint is overwritten by a fresh run. By default every epoch is logged."""
    config = replace(SMALL, epochs=3)
    T.fit(config, out=tmp_path, stop_after=1, device="cpu", log=quiet)
    lines = []
    resumed = T.fit(replace(config, lr=0.5, epochs=7), out=tmp_path, resume=True, device="cpu", log=lines.append)
    assert resumed.config == config and resumed.history.epoch == [1, 2, 3]
    assert lines[0].startswith(f"resuming {tmp_path} after epoch 1 of 3") and len(lines) == 3  # epochs 2 and 3
    lines = []
    fresh = T.fit(replace(config, epochs=2), out=tmp_path, device="cpu", log=lines.append)
    assert [line.split()[:2] for line in lines] == [["epoch", "1/2"], ["epoch", "2/2"]]
    assert fresh.history.epoch == [1, 2]
    assert json.loads((tmp_path / STATE_FILE).read_text())["config"]["epochs"] == 2


def test_checkpoints_stamp_every_file_and_keep_no_loss_scale_without_float16(tmp_path):
    """Each tensor file carries the epoch and step it belongs to; the gradient scaler only runs for float16 (CUDA),
    so a CPU run saves it empty. The folder is created, parents included."""
    from safetensors import safe_open

    out = tmp_path / "runs" / "small"
    T.fit(replace(SMALL, epochs=1), out=out, device="cpu", log=quiet)
    for name in (RF.MODEL_FILE, RF.OPTIMIZER_FILE):
        with safe_open(str(out / name), framework="pt") as f:
            assert f.metadata() == {"epoch": "1", "step": "1"}
    assert json.loads((out / STATE_FILE).read_text())["scaler"] == {}


def test_load_checkpoint_restores_a_loss_scale_and_checks_only_the_files_it_reads(tmp_path):
    """A float16 run's scaler state comes back (here a CPU GradScaler stands in for a CUDA one); the stamps of the
    optimizer file are checked when the optimizer is restored, and a folder without it still gives its model."""
    from safetensors.torch import save_file

    model = create_model(TINY.model, **TINY.model_kwargs)
    optimizer = torch.optim.AdamW(param_groups(model, 0.05), lr=1e-3)
    model(torch.randn(2, 1, 8, 8)).sum().backward()
    optimizer.step()
    scaler = torch.amp.GradScaler("cpu", enabled=True, init_scale=1024.0)
    save_checkpoint(tmp_path, model, optimizer, scaler, TINY, T.History(), epoch=3, step=30)
    fresh = torch.amp.GradScaler("cpu", enabled=True)
    assert fresh.get_scale() != 1024.0
    load_checkpoint(tmp_path, model, optimizer, fresh)
    assert fresh.get_scale() == 1024.0
    load_checkpoint(tmp_path, model)  # no optimizer, no scaler: the model alone

    flat = load_file(str(tmp_path / RF.OPTIMIZER_FILE))
    save_file(flat, str(tmp_path / RF.OPTIMIZER_FILE), metadata={"epoch": "2", "step": "20"})  # torn: older
    with pytest.raises(ValueError, match="interrupted while saving"):
        load_checkpoint(tmp_path, model, optimizer)
    load_checkpoint(tmp_path, model)  # the weights themselves are whole
    (tmp_path / RF.OPTIMIZER_FILE).unlink()  # e.g. a folder shipped without the optimizer state
    T.load_trained(tmp_path)


def test_the_state_file_keeps_the_model_s_preprocessing(one_epoch_run):
    """A resumed or reloaded run knows how its images were prepared: the model's pretrained_cfg is saved too."""
    result, out = one_epoch_run
    saved = json.loads((out / STATE_FILE).read_text())["pretrained_cfg"]
    now = json.loads(json.dumps(result.model.pretrained_cfg))  # tuples become lists, as in the file
    for key in ("input_size", "mean", "std", "num_classes"):
        assert saved[key] == now[key], key


def test_load_trained_gives_the_model_the_preprocessing_its_state_file_records(one_epoch_run, tmp_path):
    """Every input setting comes back from the state file, including ones that differ from fit's own (an edited
    file, or one written by a later version); the source names the file and the weights count as trained."""
    _, out = one_epoch_run
    shutil.copytree(out, tmp_path / "run")
    state_file = tmp_path / "run" / STATE_FILE
    state = json.loads(state_file.read_text())
    recorded = {**state["pretrained_cfg"], "mean": [0.25], "std": [0.5], "interpolation": "bilinear",
                "crop_pct": 0.875, "crop_mode": "squash", "label_names": list("abcdefghij")}
    state_file.write_text(json.dumps({**state, "pretrained_cfg": recorded}))
    cfg = T.load_trained(tmp_path / "run")[0].pretrained_cfg
    assert cfg["mean"] == (0.25,) and cfg["std"] == (0.5,) and cfg["interpolation"] == "bilinear"
    assert cfg["crop_pct"] == 0.875 and cfg["crop_mode"] == "squash" and cfg["label_names"] == tuple("abcdefghij")
    assert cfg["input_size"] == (1, 8, 8) and cfg["num_classes"] == 10
    assert cfg["trained"] is True and cfg["source"] == str(state_file)


# ---- read_state_dict: any weights file, one clear error for a broken one ----

def test_read_state_dict_reads_safetensors_and_unwraps_a_training_checkpoint(tmp_path):
    from safetensors.torch import save_file

    from vitedu.checkpoints import read_state_dict

    weights = {"w": torch.arange(3.0)}
    save_file(weights, tmp_path / "w.safetensors")
    state, extras = read_state_dict(tmp_path / "w.safetensors")
    assert torch.equal(state["w"], weights["w"]) and extras == {}
    torch.save({"model": weights, "model_ema": {"w": torch.zeros(3)}, "epoch": 3}, tmp_path / "ckpt.pth")
    state, extras = read_state_dict(tmp_path / "ckpt.pth", checkpoint_key="model_ema")
    assert torch.equal(state["w"], torch.zeros(3))
    assert set(extras) == {"model", "epoch"} and extras["epoch"] == 3


def test_read_state_dict_says_what_is_wrong_with_a_broken_file(tmp_path, monkeypatch):
    import warnings

    import vitedu.checkpoints as CK

    empty = tmp_path / "empty.pth"
    empty.write_bytes(b"")
    with pytest.raises(ValueError, match=r"empty\.pth is empty \(0 bytes\): the download or save was interrupted"):
        CK.read_state_dict(empty)
    listed = tmp_path / "list.pth"
    torch.save([torch.zeros(1)], listed)
    with pytest.raises(ValueError, match=rf"^{re.escape(str(listed))} holds a list, not a dict of tensors"):
        CK.read_state_dict(listed)
    # A pickle that torch's safe unpickler refuses: the message names the cause alone, not torch's advice to
    # load with weights_only=False (wrong advice for a file that is broken or foreign).
    foreign = tmp_path / "set.pth"
    foreign.write_bytes(pickle.dumps({1, 2}, protocol=4))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch notes the pickle protocol
        with pytest.raises(ValueError, match=r"set\.pth is not a readable PyTorch checkpoint \(UnpicklingError: "
                                             r"Unsupported operand \d+\); it may be truncated") as err:
            CK.read_state_dict(foreign)
    assert "weights_only" not in str(err.value)

    def silent_failure(*args, **kwargs):
        raise EOFError()  # an exception without a message

    monkeypatch.setattr(CK.torch, "load", silent_failure)
    with pytest.raises(ValueError, match=r"set\.pth is not a readable PyTorch checkpoint \(EOFError: \); it may"):
        CK.read_state_dict(foreign)


# ---- float16 with loss scaling (a GPU without bfloat16), exercised on the CPU ----

def test_a_float16_run_scales_its_loss_and_a_resumed_run_keeps_the_scale(tmp_path, monkeypatch):
    """Where "auto" means float16 (a GPU without bfloat16), fit multiplies in float16 and scales the loss, clips the
    unscaled gradients, saves the loss scale, and a resumed run carries on with the saved scale, not a fresh one.
    The CPU runs float16 autocast and GradScaler("cpu") too, so the path is tested here."""
    monkeypatch.setattr(T, "amp_dtype", lambda device: torch.float16)
    seen = set()
    real_create_model = create_model

    def create_model_seeing_dtypes(*args, **kwargs):
        model = real_create_model(*args, **kwargs)
        model.head.register_forward_hook(lambda module, inputs, output: seen.add(output.dtype))
        return model

    monkeypatch.setattr(T, "create_model", create_model_seeing_dtypes)
    out = tmp_path / "run"
    T.fit(replace(SMALL, epochs=2), out=out, stop_after=1, device="cpu", log=quiet)  # as if interrupted
    assert torch.float16 in seen
    state_file = out / STATE_FILE
    state = json.loads(state_file.read_text())
    assert state["scaler"]["scale"] == 65536.0  # GradScaler's starting scale, kept after a step without overflow
    state["scaler"]["scale"] = 1024.0  # as if overflows had halved it six times
    state_file.write_text(json.dumps(state))
    T.fit(replace(SMALL, epochs=2), out=out, resume=True, device="cpu", log=quiet)
    state = json.loads(state_file.read_text())
    assert state["epoch"] == 2 and state["scaler"]["scale"] == 1024.0
    T.fit(replace(SMALL, epochs=1), out=tmp_path / "fp32", device="cpu", log=quiet, precision="fp32")
    assert json.loads((tmp_path / "fp32" / STATE_FILE).read_text())["scaler"] == {}  # asked for fp32: no scaling
