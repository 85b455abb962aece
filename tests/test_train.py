"""vitedu.train: the schedule, weight-decay groups, a short run that learns, checkpoints, resume, CLI."""

from __future__ import annotations

import json
import math
import pickle
from dataclasses import replace

import pytest
import torch
from safetensors.torch import load_file

from vitedu import create_model
from vitedu import train as T

# A tiny, quick recipe: 2 epochs of the digits with a small model.
TINY = replace(T.PRESETS["digits"], model="vit_digits_patch2_8", model_kwargs={"embed_dim": 32, "depth": 1},
               epochs=2, batch_size=128, warmup_epochs=0.5, teacher_epochs=0, distill_alpha=0.0)


def quiet(_: str) -> None:
    pass


def test_lr_schedule_warmup_then_cosine():
    lrs = [T.lr_at(s, total_steps=100, warmup_steps=10, lr=1.0, min_lr=0.1) for s in range(100)]
    assert lrs[0] == pytest.approx(0.1) and lrs[9] == pytest.approx(1.0)  # linear warm-up to the peak
    assert all(b > a for a, b in zip(lrs[:10], lrs[1:10]))
    assert all(b <= a for a, b in zip(lrs[10:], lrs[11:]))  # then monotone decay
    mid = 10 + 45  # half-way through the cosine: halfway between peak and floor
    assert lrs[mid] == pytest.approx(0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * 0.5)))
    assert lrs[-1] == pytest.approx(0.1, abs=1e-3)


def test_weight_decay_skips_norms_biases_positions_and_cls():
    model = create_model("vit_digits_patch2_8")
    decay, no_decay = T.param_groups(model, 0.05)
    names = {id(p): n for n, p in model.named_parameters()}
    decayed = {names[id(p)] for p in decay["params"]}
    skipped = {names[id(p)] for p in no_decay["params"]}
    assert decay["weight_decay"] == 0.05 and no_decay["weight_decay"] == 0.0
    assert {"pos_embed", "cls_token", "blocks.0.norm1.weight", "blocks.0.attn.qkv.bias", "head.bias"} <= skipped
    assert {"patch_embed.proj.weight", "blocks.0.attn.qkv.weight", "blocks.0.mlp.fc1.weight", "head.weight"} <= decayed
    assert len(decayed) + len(skipped) == len(names)


def test_distillation_loss_hard_and_soft():
    student, teacher = torch.randn(6, 10), torch.randn(6, 10)
    hard = T.distillation_loss(student, teacher)
    assert torch.allclose(hard, torch.nn.functional.cross_entropy(student, teacher.argmax(-1)))
    t = 3.0
    p_t, p_s = torch.softmax(teacher / t, -1), torch.softmax(student / t, -1)
    by_hand = (p_t * (p_t.log() - p_s.log())).sum(-1).mean() * t**2  # KL(teacher || student), batch mean
    assert torch.allclose(T.distillation_loss(student, teacher, t), by_hand, atol=1e-6)
    assert T.distillation_loss(teacher, teacher, t).abs() < 1e-6  # copying the teacher costs nothing


def test_short_run_reduces_loss(device):
    result = T.fit(TINY, device=device, progress=False, log=quiet)
    h = result.history
    assert h.epoch == [1, 2] and len(h.lr) == len(h.images_per_s) == 2
    assert h.train_loss[1] < h.train_loss[0] and h.val_loss[1] < h.val_loss[0]
    assert 0.0 <= result.test_acc <= 1.0


def test_checkpoint_roundtrip_gives_identical_predictions(tmp_path):
    result = T.fit(replace(TINY, epochs=1), out=tmp_path, progress=False, log=quiet, device="cpu")
    model, config = T.load_trained(tmp_path)
    assert config == replace(TINY, epochs=1)
    images = torch.randn(16, 1, 8, 8)
    result.model.eval()
    with torch.no_grad():
        assert torch.equal(model(images), result.model(images))
    state = json.loads((tmp_path / T.STATE_FILE).read_text())
    assert state["epoch"] == 1 and state["step"] == 10 and state["history"]["epoch"] == [1]
    # Optimizer moments are tensors in safetensors, not pickles.
    flat = load_file(str(tmp_path / T.OPTIMIZER_FILE))
    assert any(k.endswith("exp_avg_sq") for k in flat) and all(torch.is_tensor(v) for v in flat.values())


def test_loading_never_unpickles(tmp_path, monkeypatch):
    T.fit(replace(TINY, epochs=1), out=tmp_path, progress=False, log=quiet, device="cpu")

    def boom(*args, **kwargs):
        raise AssertionError("pickle was used to load a checkpoint")

    monkeypatch.setattr(pickle, "load", boom)
    monkeypatch.setattr(pickle, "loads", boom)
    monkeypatch.setattr(pickle, "Unpickler", boom)
    T.load_trained(tmp_path)


def test_resume_matches_uninterrupted_run(tmp_path):
    full = T.fit(TINY, out=tmp_path / "full", progress=False, log=quiet, device="cpu")
    T.fit(TINY, out=tmp_path / "split", stop_after=1, progress=False, log=quiet, device="cpu")
    half = json.loads((tmp_path / "split" / T.STATE_FILE).read_text())
    assert half["epoch"] == 1
    resumed = T.fit(TINY, out=tmp_path / "split", resume=True, progress=False, log=quiet, device="cpu")
    assert resumed.history.epoch == [1, 2] and resumed.history.lr == full.history.lr
    for (name, a), b in zip(full.model.state_dict().items(), resumed.model.state_dict().values()):
        assert torch.equal(a, b), name
    assert resumed.test_acc == full.test_acc


def test_teacher_distillation_run_resumes_with_the_same_teacher(tmp_path):
    config = replace(TINY, teacher_epochs=1, distill_alpha=0.5)
    full = T.fit(config, out=tmp_path / "full", progress=False, log=quiet, device="cpu")
    assert isinstance(full.teacher, T.ConvTeacher) and (tmp_path / "full" / T.TEACHER_FILE).exists()
    T.fit(config, out=tmp_path / "split", stop_after=1, progress=False, log=quiet, device="cpu")
    resumed = T.fit(config, out=tmp_path / "split", resume=True, progress=False, log=quiet, device="cpu")
    for a, b in zip(full.teacher.state_dict().values(), resumed.teacher.state_dict().values()):
        assert torch.equal(a, b)
    for a, b in zip(full.model.state_dict().values(), resumed.model.state_dict().values()):
        assert torch.equal(a, b)
    plain = T.fit(TINY, progress=False, log=quiet, device="cpu")  # the teacher changes the student
    assert not torch.equal(plain.model.head.weight, full.model.head.weight)


def test_train_fraction_keeps_a_stratified_subset():
    loaders = T.make_loaders(replace(TINY, train_fraction=0.2), torch.device("cpu"))
    labels = loaders["train"].labels
    assert abs(len(labels) - 0.2 * 1259) <= 10 and torch.bincount(labels).min() >= 24
    with pytest.raises(ValueError, match="train_fraction"):
        T.make_loaders(replace(TINY, train_fraction=0.0), torch.device("cpu"))


def test_resume_restores_optimizer_state(tmp_path):
    result = T.fit(replace(TINY, epochs=1), out=tmp_path, progress=False, log=quiet, device="cpu")
    model = create_model(TINY.model, **TINY.model_kwargs)
    optimizer = torch.optim.AdamW(T.param_groups(model, TINY.weight_decay), lr=TINY.lr)
    T.load_checkpoint(tmp_path, model, optimizer)
    saved = result.optimizer.state_dict()
    loaded = optimizer.state_dict()
    assert loaded["param_groups"][0]["lr"] == saved["param_groups"][0]["lr"]
    for index, state in saved["state"].items():
        for key, value in state.items():
            assert torch.equal(loaded["state"][index][key], value), (index, key)


def test_torn_checkpoint_is_detected(tmp_path):
    T.fit(replace(TINY, epochs=1), out=tmp_path, progress=False, log=quiet, device="cpu")
    state = json.loads((tmp_path / T.STATE_FILE).read_text())
    state["epoch"] = 2  # as if the JSON were written for a later epoch than the weights
    (tmp_path / T.STATE_FILE).write_text(json.dumps(state))
    with pytest.raises(ValueError, match="interrupted while saving"):
        T.load_trained(tmp_path)


def test_cli_prints_test_accuracy_last(tmp_path, capsys):
    acc = T.main(["--dataset", "digits", "--epochs", "1", "--out", str(tmp_path), "--batch-size", "256",
                  "--teacher-epochs", "0", "--no-progress"])
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[-1] == f"test accuracy: {acc:.4f}"
    assert lines[0].startswith("epoch   1/1")
    assert (tmp_path / T.MODEL_FILE).exists()


def test_bf16_precision_autocasts_on_the_cpu_too():
    cpu = torch.device("cpu")
    assert T.autocast_dtype(cpu) is None and T.autocast_dtype(cpu, "fp32") is None  # "auto": as before
    assert T.autocast_dtype(cpu, "bf16") is torch.bfloat16
    with pytest.raises(ValueError, match="choose from"):
        T.autocast_dtype(cpu, "fp16")
    fp32 = T.fit(replace(TINY, epochs=1), progress=False, log=quiet, device="cpu", precision="fp32")
    bf16 = T.fit(replace(TINY, epochs=1), progress=False, log=quiet, device="cpu", precision="bf16")
    assert all(p.dtype == torch.float32 for p in bf16.model.parameters())  # fp32 weights, bf16 products
    assert not torch.equal(fp32.model.head.weight, bf16.model.head.weight)  # the products were rounded
    assert torch.allclose(fp32.model.head.weight, bf16.model.head.weight, atol=0.05)
    auto = T.fit(replace(TINY, epochs=1), progress=False, log=quiet, device="cpu")
    assert torch.equal(auto.model.head.weight, fp32.model.head.weight)


def test_cli_help_explains_every_option(capsys):
    with pytest.raises(SystemExit):
        T.parse_args(["--help"])
    text = capsys.readouterr().out
    for option in ("--dataset", "--epochs", "--out", "--resume", "--lr", "--augment", "--device", "--precision",
                   "--compile"):
        assert option in text
    parser_actions = [a for a in T.build_parser()._actions if a.option_strings and a.dest != "help"]
    assert all(a.help for a in parser_actions)


@pytest.fixture(autouse=True)
def _one_thread():
    """These models are tiny: one thread avoids the overhead of splitting them over cores."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


# ------------------------------------------------------------------ behaviours found by mutation testing
def _rows(images: torch.Tensor, labels: torch.Tensor) -> list[bytes]:
    """Each example as bytes (pixels + label), so splits can be compared as multisets."""
    return sorted(x.numpy().tobytes() + bytes([int(y)]) for x, y in zip(images, labels))


@pytest.mark.parametrize("dataset", ["digits", "cluttered_digits"])
def test_train_on_val_adds_the_val_split_and_never_test(dataset):
    """train_on_val fits on train + val (the recipe is already chosen); test stays untouched for the final number."""
    from vitedu import data as D

    splits = D.load_digits()
    config = replace(TINY, dataset=dataset, augment="none", train_on_val=True)
    loaders = T.make_loaders(config, torch.device("cpu"))
    train = loaders["train"]
    # TensorLoader keeps the uint8 images; ClutteredLoader keeps the digits it draws canvases from, scaled to [0, 1].
    images = train.images if dataset == "digits" else (train.digits * D.DIGITS_MAX).round().to(torch.uint8)
    (train_x, train_y), (val_x, val_y) = splits["train"], splits["val"]
    expected = _rows(torch.cat([train_x, val_x]), torch.cat([train_y, val_y]))
    assert _rows(images, train.labels) == expected  # every train and val example once, no test example


def test_evaluate_measures_in_eval_mode():
    """evaluate() turns dropout and drop-path off, whatever mode the model was left in by training."""
    from vitedu import data as D

    model = create_model("vit_digits_patch2_8", drop_rate=0.5, drop_path_rate=0.5).train()
    images, labels = D.load_digits()["val"]
    loader = D.TensorLoader(images, labels, 500, D.DIGITS_MEAN, D.DIGITS_STD, max_value=D.DIGITS_MAX)
    with torch.no_grad():
        logits = torch.cat([model.eval()(x) for x, _ in loader])
    expected_loss = torch.nn.functional.cross_entropy(logits, labels).item()
    expected_acc = (logits.argmax(-1) == labels).float().mean().item()
    for _ in range(2):  # the same numbers every time, from a model in training mode
        model.train()
        loss, acc = T.evaluate(model, loader)
        assert loss == pytest.approx(expected_loss, rel=1e-5) and acc == pytest.approx(expected_acc)
