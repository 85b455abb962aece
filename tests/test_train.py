"""vitedu.train: the schedule, weight-decay groups, mixed precision, one epoch of the loop, fit (a short run that
learns, its logs, bars, devices and processes), the teacher's training, the history plot and the command line.
Checkpoints and resume are in test_checkpoints.py, the loaders of a run in test_make_loaders.py, the distillation
losses and the convolutional teacher in test_distillation.py."""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, replace
from types import SimpleNamespace

import pytest
import torch
from train_recipes import SMALL, TINY, quiet

from vitedu import create_model
from vitedu import run_files as RF
from vitedu import train as T
from vitedu.cnn import ConvTeacher
from vitedu.config import PRESETS
from vitedu.constants import DIGITS_MEAN, DIGITS_STD
from vitedu.data import make_loaders
from vitedu.deit import distillation_loss, distillation_token_loss
from vitedu.digits import DIGITS_MAX, load_digits
from vitedu.loaders import TensorLoader
from vitedu.optimizers import param_groups
from vitedu.run_files import TEACHER_FILE

pytestmark = pytest.mark.usefixtures("one_thread")


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
    decay, no_decay = param_groups(model, 0.05)
    names = {id(p): n for n, p in model.named_parameters()}
    decayed = {names[id(p)] for p in decay["params"]}
    skipped = {names[id(p)] for p in no_decay["params"]}
    assert decay["weight_decay"] == 0.05 and no_decay["weight_decay"] == 0.0
    assert {"pos_embed", "cls_token", "blocks.0.norm1.weight", "blocks.0.attn.qkv.bias", "head.bias"} <= skipped
    assert {"patch_embed.proj.weight", "blocks.0.attn.qkv.weight", "blocks.0.mlp.fc1.weight", "head.weight"} <= decayed
    assert len(decayed) + len(skipped) == len(names)


def test_short_run_reduces_loss(device):
    result = T.fit(TINY, device=device, progress=False, log=quiet)
    h = result.history
    assert h.epoch == [1, 2] and len(h.lr) == len(h.images_per_s) == 2
    assert h.train_loss[1] < h.train_loss[0] and h.val_loss[1] < h.val_loss[0]
    assert 0.0 <= result.test_acc <= 1.0


def test_cli_prints_test_accuracy_last(tmp_path, capsys):
    acc = T.main(["--dataset", "digits", "--epochs", "1", "--warmup-epochs", "0.5", "--out", str(tmp_path),
                  "--batch-size", "256", "--teacher-epochs", "0", "--no-progress"])
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[-1] == f"test accuracy: {acc:.4f}"
    assert lines[0].startswith("epoch   1/1")
    assert (tmp_path / RF.MODEL_FILE).exists()


def test_epoch_line_fits_the_page_and_says_what_each_number_is():
    line = T.epoch_line(10, 100, 0.6432, 0.8314, 0.4029, 0.877, 2e-3, 1894.6)
    assert line == "epoch  10/100  train 0.643 83.1%  val 0.403 87.7%  lr 2.0e-03  1895 img/s"
    # the widest a realistic run writes: three-digit epochs, 100 % on both sides, a fast GPU
    widest = T.epoch_line(100, 300, 2.3026, 1.0, 2.3026, 1.0, 1e-5, 99_999)
    assert len(widest) == 76 and widest.startswith("epoch 100/300  train 2.303 100.0%  val 2.303 100.0%")


def test_bf16_precision_autocasts_on_the_cpu_too():
    cpu = torch.device("cpu")
    assert T.autocast_dtype(cpu) is None and T.autocast_dtype(cpu, "fp32") is None  # "auto": as before
    assert T.autocast_dtype(cpu, "bf16") is torch.bfloat16
    with pytest.raises(ValueError, match="choose from"):
        T.autocast_dtype(cpu, "fp16")
    fp32 = T.fit(replace(SMALL, epochs=1), progress=False, log=quiet, device="cpu", precision="fp32")  # one step
    bf16 = T.fit(replace(SMALL, epochs=1), progress=False, log=quiet, device="cpu", precision="bf16")
    assert all(p.dtype == torch.float32 for p in bf16.model.parameters())  # fp32 weights, bf16 products
    assert not torch.equal(fp32.model.head.weight, bf16.model.head.weight)  # the products were rounded
    assert torch.allclose(fp32.model.head.weight, bf16.model.head.weight, atol=0.05)
    auto = T.fit(replace(SMALL, epochs=1), progress=False, log=quiet, device="cpu")
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


def test_evaluate_measures_in_eval_mode():
    """evaluate() turns dropout and drop-path off, whatever mode the model was left in by training."""

    model = create_model("vit_digits_patch2_8", drop_rate=0.5, drop_path_rate=0.5).train()
    images, labels = load_digits()["val"]
    loader = TensorLoader(images, labels, 500, DIGITS_MEAN, DIGITS_STD, max_value=DIGITS_MAX)
    with torch.no_grad():
        logits = torch.cat([model.eval()(x) for x, _ in loader])
    expected_loss = torch.nn.functional.cross_entropy(logits, labels).item()
    expected_acc = (logits.argmax(-1) == labels).float().mean().item()
    for _ in range(2):  # the same numbers every time, from a model in training mode
        model.train()
        loss, acc = T.evaluate(model, loader)
        assert loss == pytest.approx(expected_loss, rel=1e-5) and acc == pytest.approx(expected_acc)


def test_lr_schedule_never_overshoots_and_rests_at_the_floor():
    """The warm-up ends exactly at the peak (the first cosine step is the peak, not above it); after the planned
    steps the rate stays at min_lr (no second cycle); without warm-up the cosine starts at the peak."""
    lrs = [T.lr_at(s, total_steps=100, warmup_steps=10, lr=1.0, min_lr=0.1) for s in range(130)]
    assert max(lrs) == pytest.approx(1.0) and lrs[10] == pytest.approx(1.0)
    assert all(lr == pytest.approx(0.1) for lr in lrs[100:])
    assert T.lr_at(0, total_steps=10, warmup_steps=0, lr=1.0, min_lr=0.0) == pytest.approx(1.0)
    assert T.lr_at(11, total_steps=11, warmup_steps=10, lr=1.0, min_lr=0.1) == pytest.approx(0.1)  # one cosine step


def test_weight_decay_groups_skip_frozen_parameters_and_the_distillation_token():
    model = create_model("deit_digits_patch2_8")
    model.patch_embed.proj.weight.requires_grad_(False)  # frozen: the optimizer never sees it
    decay, no_decay = param_groups(model, 0.05)
    names = {id(p): n for n, p in model.named_parameters()}
    decayed = {names[id(p)] for p in decay["params"]}
    skipped = {names[id(p)] for p in no_decay["params"]}
    assert "dist_token" in skipped and "patch_embed.proj.weight" not in decayed | skipped
    assert "blocks.0.attn.qkv.weight" in decayed
    assert len(decayed) + len(skipped) == len(names) - 1


def test_mixed_precision_dtype_on_cuda(monkeypatch):
    """Only the device's type and bf16 support decide, so this runs without a GPU."""
    cuda = torch.device("cuda")
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *args, **kwargs: True)
    assert T.amp_dtype(cuda) is torch.bfloat16 and T.autocast_dtype(cuda) is torch.bfloat16
    assert T.autocast_dtype(cuda, "bf16") is torch.bfloat16 and T.autocast_dtype(cuda, "fp32") is None
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *args, **kwargs: False)
    assert T.amp_dtype(cuda) is torch.float16 and T.autocast_dtype(cuda) is torch.float16  # with loss scaling
    with pytest.raises(ValueError, match="bfloat16"):
        T.autocast_dtype(cuda, "bf16")
    assert T.amp_dtype(torch.device("cpu")) is None and T.amp_dtype(torch.device("mps")) is None


def _fixed_model_epoch(model, config, teacher=None):
    """One train_one_epoch with lr 0 (the weights never move) on un-augmented digits; returns its numbers and the
    loader, so the same batches can be replayed by hand."""
    loader = make_loaders(config, torch.device("cpu"))["train"]
    optimizer = torch.optim.AdamW(param_groups(model, config.weight_decay), lr=0.0)
    loader.set_epoch(3)
    frozen = SimpleNamespace(**{**asdict(config), "lr": 0.0, "min_lr": 0.0})  # no TrainConfig trains at lr 0
    numbers = T.train_one_epoch(model, loader, optimizer, torch.amp.GradScaler("cpu", enabled=False), frozen, 0,
                                len(loader), teacher)
    loader.set_epoch(3)
    return numbers, loader


@pytest.mark.parametrize("family", ["vit", "deit"])
def test_train_one_epoch_reports_the_loss_it_minimises(family):
    """Mean loss and accuracy over the epoch are those of the recipe: label smoothing, and the teacher mixed in with
    weight distill_alpha (through the one head of a ViT, or the [DIST] head of a DeiT, whose prediction is the mean
    of its two heads)."""
    config = replace(TINY, model=f"{family}_digits_patch2_8", augment="none", label_smoothing=0.2,
                     distill_alpha=0.3, distill_temperature=2.0)
    torch.manual_seed(0)
    model = create_model(config.model, **config.model_kwargs)
    teacher = create_model("vit_digits_patch2_8", **TINY.model_kwargs).eval()  # any network can teach
    if family == "deit":
        model.set_distilled_training(True)
        with torch.no_grad():  # the heads start at zero: give them weights of their own, so that they disagree
            model.head.weight.normal_(std=0.5), model.head_dist.weight.normal_(std=0.5)
    (loss, acc, speed, step), loader = _fixed_model_epoch(model, config, teacher)
    loss_sum, correct, seen = 0.0, 0, 0
    with torch.no_grad():
        for images, labels in loader:
            outputs, teacher_logits = model(images), teacher(images)
            if family == "deit":
                cls_logits, dist_logits = outputs
                batch_loss = distillation_token_loss(cls_logits, dist_logits, labels, teacher_logits, 0.3, 2.0, 0.2)
                logits = (cls_logits + dist_logits) / 2
            else:
                logits = outputs
                label_loss = torch.nn.functional.cross_entropy(logits, labels, label_smoothing=0.2)
                batch_loss = 0.7 * label_loss + 0.3 * distillation_loss(logits, teacher_logits, 2.0)
            loss_sum += batch_loss.item() * len(labels)
            correct += (logits.argmax(-1) == labels).sum().item()
            seen += len(labels)
    assert step == len(loader) and seen == len(loader.labels)
    assert loss == pytest.approx(loss_sum / seen, rel=1e-5) and acc == pytest.approx(correct / seen)
    assert model.training  # train_one_epoch trains: dropout and drop-path active


def test_train_one_epoch_sets_the_scheduled_lr_on_every_group_and_counts_steps():
    config = replace(TINY, warmup_epochs=0.5, lr=1e-3, min_lr=1e-5)
    model = create_model(config.model, **config.model_kwargs)
    loader = make_loaders(config, torch.device("cpu"))["train"]
    optimizer = torch.optim.AdamW(param_groups(model, config.weight_decay), lr=config.lr)
    total = 3 * len(loader)
    start = time.perf_counter()
    _, _, speed, step = T.train_one_epoch(model, loader, optimizer, torch.amp.GradScaler("cpu", enabled=False),
                                          config, 5, total)
    elapsed = time.perf_counter() - start
    assert step == 5 + len(loader)
    expected = T.lr_at(step - 1, total, round(0.5 * len(loader)), 1e-3, 1e-5)  # the lr of the last step taken
    assert [group["lr"] for group in optimizer.param_groups] == pytest.approx([expected, expected])
    assert len(loader.labels) / elapsed <= speed  # images per second of the loop itself


def test_gradients_are_clipped_to_grad_clip_before_each_step():
    """grad_clip bounds the global gradient norm the optimizer steps with; 0 turns clipping off."""
    norms = {}
    for clip in (0.05, 0.0):
        config = replace(TINY, grad_clip=clip)
        torch.manual_seed(0)
        model = create_model(config.model, **config.model_kwargs)
        optimizer = torch.optim.AdamW(param_groups(model, config.weight_decay), lr=config.lr)
        seen, step = [], optimizer.step

        def spy(*args, _seen=seen, _step=step, _model=model, **kwargs):
            _seen.append(torch.linalg.vector_norm(
                torch.stack([p.grad.norm() for p in _model.parameters() if p.grad is not None])).item())
            return _step(*args, **kwargs)

        optimizer.step = spy
        loader = make_loaders(config, torch.device("cpu"))["train"]
        T.train_one_epoch(model, loader, optimizer, torch.amp.GradScaler("cpu", enabled=False), config, 0,
                          len(loader))
        assert len(seen) == len(loader)
        norms[clip] = max(seen)
    assert norms[0.05] <= 0.05 * (1 + 1e-4)
    assert norms[0.0] > 0.05  # without clipping the gradients are larger, so the bound above did something


def test_fit_logs_every_log_every_epochs_and_the_last():
    lines = []
    result = T.fit(replace(SMALL, epochs=3), device="cpu", progress=False, log=lines.append, log_every=2)
    assert [line.split()[1] for line in lines] == ["2/3", "3/3"]
    h = result.history
    assert h.epoch == [1, 2, 3] and h.lr[-1] == result.optimizer.param_groups[0]["lr"]
    assert all(0.0 <= a <= 1.0 for a in h.val_acc) and result.teacher is None


def test_fit_validates_every_validate_every_epochs_and_after_the_last(monkeypatch):
    scored = []
    evaluate = T.evaluate
    monkeypatch.setattr(T, "evaluate", lambda model, loader: scored.append(loader) or evaluate(model, loader))
    result = T.fit(replace(SMALL, epochs=5), device="cpu", progress=False, log=quiet, validate_every=2)
    h = result.history
    assert [math.isnan(a) for a in h.val_acc] == [True, False, True, False, False]  # epochs 2, 4 and the last
    assert [math.isnan(v) for v in h.val_loss] == [math.isnan(a) for a in h.val_acc]
    assert len(scored) == 4  # three validations and the test
    import matplotlib.pyplot as plt

    plt.close(h.plot())  # a history with unscored epochs still draws
    with pytest.raises(ValueError, match="validate_every is a number of epochs, at least 1.*got 0"):
        T.fit(SMALL, validate_every=0)


def test_teacher_is_a_trained_convnet_returned_in_eval_mode(tmp_path):
    config = replace(TINY, teacher_epochs=1)
    loaders = make_loaders(config, torch.device("cpu"))
    lines = []
    teacher = T.train_teacher(config, loaders, torch.device("cpu"), out=tmp_path, log=lines.append)
    assert isinstance(teacher, ConvTeacher) and not teacher.training
    images, labels = next(iter(loaders["val"]))
    with torch.no_grad():
        logits = teacher(images)
    assert logits.shape == (len(images), 10)  # one output per class of the data, no more
    assert (logits.argmax(-1) == labels).float().mean() > 0.2  # one epoch already beats chance (0.1)
    assert len(lines) == 1 and lines[0].startswith("teacher:")
    again = T.train_teacher(config, loaders, torch.device("cpu"), out=tmp_path, log=lines.append)  # reloaded
    for a, b in zip(teacher.state_dict().values(), again.state_dict().values()):
        assert torch.equal(a, b)
    assert len(lines) == 1 and not again.training


def test_history_plot_shows_loss_and_accuracy_curves():
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    h = T.History()
    h.append(epoch=1, train_loss=2.0, train_acc=0.3, val_loss=1.5, val_acc=0.6, lr=1e-3, images_per_s=100.0)
    h.append(epoch=2, train_loss=1.0, train_acc=0.7, val_loss=0.9, val_acc=0.8, lr=5e-4, images_per_s=110.0)
    fig = h.plot()
    loss_ax, acc_ax = fig.axes
    assert [list(line.get_ydata()) for line in loss_ax.lines] == [h.train_loss, h.val_loss]
    assert [list(line.get_ydata()) for line in acc_ax.lines] == [h.train_acc, h.val_acc]
    assert all(list(line.get_xdata()) == [1, 2] for line in loss_ax.lines + acc_ax.lines)
    assert loss_ax.get_yscale() == "log" and acc_ax.get_ylim() == pytest.approx((0.55, 1.0))
    assert [t.get_text() for t in acc_ax.get_legend().get_texts()] == ["train (augmented)", "val"]
    assert [t.get_text() for t in loss_ax.get_legend().get_texts()] == ["train (smoothed labels)", "val"]
    assert (loss_ax.get_xlabel(), loss_ax.get_ylabel(), acc_ax.get_xlabel(), acc_ax.get_ylabel()) == (
        "epoch", "cross-entropy", "epoch", "accuracy")
    plt.close(fig)
    empty = T.History().plot()  # before the first epoch: an empty figure with the accuracy axis at the top
    assert empty.axes[1].get_ylim() == pytest.approx((0.95, 1.0))
    plt.close(empty)


def test_cli_options_override_the_preset_and_save_weights(tmp_path, monkeypatch, capsys):
    """Options given replace the preset's values (a new --model drops the preset's model overrides); the rest is
    passed on to fit; --save-weights writes the weights with the recipe and accuracies as metadata."""
    from safetensors import safe_open

    calls = []

    def fake_fit(config, **kwargs):
        calls.append((config, kwargs))
        model = create_model(config.model, **{**config.model_kwargs, "depth": 1})
        return T.Result(model, T.History(val_acc=[0.5, 0.875]), 0.75, config, optimizer=None)

    monkeypatch.setattr(T, "fit", fake_fit)
    path = tmp_path / "shipped" / "digits" / "vit.safetensors"  # folders made as needed
    acc = T.main(["--dataset", "cluttered_digits", "--epochs", "3", "--warmup-epochs", "1", "--lr", "0.01",
                  "--threads", "2", "--device", "cpu", "--no-progress", "--precision", "bf16", "--save-weights",
                  str(path), "--out", str(tmp_path / "run")])
    assert acc == 0.75 and torch.get_num_threads() == 2
    config, kwargs = calls[-1]
    assert config == replace(PRESETS["cluttered_digits"], epochs=3, warmup_epochs=1.0, lr=0.01)
    assert kwargs["precision"] == "bf16" and kwargs["progress"] is False and kwargs["resume"] is False
    assert kwargs["out"] == str(tmp_path / "run") and kwargs["compile"] is False and str(kwargs["device"]) == "cpu"
    with safe_open(str(path), framework="pt") as f:
        meta = f.metadata()
        assert set(f.keys()) == set(create_model(config.model, depth=1).state_dict())
    assert meta["model"] == "vit_cluttered_digits" and json.loads(meta["config"])["lr"] == 0.01
    assert meta["val_acc"] == "0.8750" and meta["test_acc"] == "0.7500"
    assert capsys.readouterr().out.strip().splitlines()[-1] == "test accuracy: 0.7500"

    old = tmp_path / "old"
    old.mkdir()
    (old / "train_state.json").write_text("{}")  # a run to resume (fit is faked: it is never read)
    T.main(["--dataset", "cluttered_digits", "--model", "vit_digits_patch2_8", "--resume", "--out", str(old)])
    config, kwargs = calls[-1]
    assert config.model == "vit_digits_patch2_8" and config.model_kwargs == {} and kwargs["resume"] is True
    T.main(["--dataset", "cluttered_digits", "--model", "vit_cluttered_digits", "--save-weights", str(path)])
    assert calls[-1][0].model_kwargs == PRESETS["cluttered_digits"].model_kwargs  # the preset's own model
    assert path.exists()  # written again into the folder that now exists


def test_cli_defaults_to_the_digits_and_names_its_command():
    assert T.parse_args([]).dataset == "digits"
    assert T.build_parser().format_usage().startswith("usage: python -m vitedu.train")
    with pytest.raises(SystemExit):
        T.parse_args(["--dataset", "mnist"])  # only the presets' datasets


def test_history_plot_puts_two_wide_panels_side_by_side_on_light_grids():
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    h = T.History(epoch=[1, 2], train_loss=[2.0, 1.0], train_acc=[0.3, 0.7], val_loss=[1.5, 0.9], val_acc=[0.6, 0.8])
    fig = h.plot()
    loss_ax, acc_ax = fig.axes
    assert tuple(fig.get_size_inches()) == pytest.approx((9, 3.2))  # the book's page width, one row
    loss_box, acc_box = loss_ax.get_position(), acc_ax.get_position()
    assert acc_box.x0 > loss_box.x1 and acc_box.y0 == pytest.approx(loss_box.y0)  # side by side, not stacked
    for ax in (loss_ax, acc_ax):
        lines = ax.xaxis.get_gridlines() + ax.yaxis.get_gridlines()
        assert lines and all(line.get_visible() and line.get_alpha() == pytest.approx(0.3) for line in lines)
    plt.close(fig)


def _stderr_of(capsys, run, tty=False, monkeypatch=None):
    """What ``run()`` wrote to stderr, with stderr looking like a terminal or not."""
    import sys

    capsys.readouterr()
    monkeypatch.setattr(sys.stderr, "isatty", lambda: tty)
    run()
    return capsys.readouterr().err


def test_train_one_epoch_shows_a_bar_only_when_asked_and_clears_it(capsys, monkeypatch):
    config = SMALL
    model = create_model(config.model, **config.model_kwargs)
    loader = make_loaders(config, torch.device("cpu"))["train"]
    optimizer = torch.optim.AdamW(param_groups(model, config.weight_decay), lr=config.lr)
    scaler = torch.amp.GradScaler("cpu", enabled=False)

    def epoch(**kwargs):
        return lambda: T.train_one_epoch(model, loader, optimizer, scaler, config, 0, len(loader), **kwargs)

    assert _stderr_of(capsys, epoch(), monkeypatch=monkeypatch) == ""  # no bar by default
    assert _stderr_of(capsys, epoch(progress=False, desc="epoch 1/2"), tty=True, monkeypatch=monkeypatch) == ""
    err = _stderr_of(capsys, epoch(progress=True, desc="epoch 1/2"), monkeypatch=monkeypatch)
    assert err.startswith("\repoch 1/2:")
    assert err.endswith("\r") and "\n" not in err  # leave=False: the finished bar is wiped, no line is left
    err = _stderr_of(capsys, epoch(progress=True), monkeypatch=monkeypatch)
    assert err.startswith("\r  0%|")  # no description: the bar starts with the percentage


def test_fit_shows_bars_in_a_terminal_or_when_asked(capsys, monkeypatch):
    """progress=None: a bar only when stderr is a terminal; True / False force it on or off. The teacher's epochs and
    the student's are labelled with their numbers."""
    config = replace(SMALL, teacher_epochs=1)
    run = lambda **kwargs: lambda: T.fit(config, device="cpu", log=quiet, **kwargs)  # noqa: E731
    assert _stderr_of(capsys, run(), tty=False, monkeypatch=monkeypatch) == ""
    assert _stderr_of(capsys, run(progress=False), tty=True, monkeypatch=monkeypatch) == ""
    for err in (_stderr_of(capsys, run(), tty=True, monkeypatch=monkeypatch),
                _stderr_of(capsys, run(progress=True), tty=False, monkeypatch=monkeypatch)):
        descriptions = [part.split(":")[0] for part in err.split("\r") if part.strip()]
        assert sorted(set(descriptions)) == ["epoch 1/2", "epoch 2/2", "teacher 1/1"]


def test_train_teacher_follows_its_own_schedule_and_writes_into_new_folders(tmp_path, capsys, monkeypatch):
    """The teacher: one warm-up epoch then the cosine over teacher_epochs, steps counted from 0; no bar by default;
    its file goes into ``out`` even when the folder does not exist yet."""
    config = replace(SMALL, teacher_epochs=3, batch_size=48)
    loaders = make_loaders(config, torch.device("cpu"))
    steps_per_epoch = len(loaders["train"])
    assert steps_per_epoch == 3
    calls, lr_at = [], T.lr_at
    monkeypatch.setattr(T, "lr_at", lambda *args: calls.append(args[:3]) or lr_at(*args))
    out = tmp_path / "runs" / "teacher"
    capsys.readouterr()
    T.train_teacher(config, loaders, torch.device("cpu"), out=out, log=quiet)
    assert capsys.readouterr().err == ""
    total = 3 * steps_per_epoch
    assert calls == [(step, total, steps_per_epoch) for step in range(total)]
    assert (out / TEACHER_FILE).exists()


def test_fit_logs_every_log_every_epochs_counting_from_the_first():
    lines = []
    T.fit(replace(SMALL, epochs=4), device="cpu", log=lines.append, log_every=3)
    assert [line.split()[1] for line in lines] == ["3/4", "4/4"]


def test_history_rows_hold_the_epoch_numbers_and_the_lr_follows_the_whole_schedule():
    config = replace(TINY, epochs=2, warmup_epochs=0.5, min_lr=1e-4)
    result = T.fit(config, device="cpu", log=quiet)
    h, n = result.history, len(make_loaders(config, torch.device("cpu"))["train"])
    # the lr at the end of each epoch is that of its last step, on the schedule of epochs * steps per epoch
    assert h.lr == pytest.approx([T.lr_at(e * n - 1, 2 * n, round(0.5 * n), config.lr, 1e-4) for e in (1, 2)])
    assert len(h.train_acc) == 2 and all(0.0 < a <= 1.0 for a in h.train_acc)
    assert len(h.images_per_s) == 2 and all(s > 0 for s in h.images_per_s)


def test_fit_uses_the_device_given_and_compiles_only_when_asked(monkeypatch):
    def no_device_lookup():
        raise AssertionError("fit looked for a device although one was given")

    compiled = []

    class Compiled(torch.nn.Module):
        def __init__(self, model):
            super().__init__()
            self.model, self.calls = model, 0
            compiled.append(self)

        def forward(self, x):
            self.calls += 1
            return self.model(x)

    monkeypatch.setattr(T, "get_device", no_device_lookup)
    monkeypatch.setattr(T.torch, "compile", Compiled)
    T.fit(SMALL, device="cpu", log=quiet)
    assert compiled == []  # compile=False by default
    T.fit(SMALL, device="cpu", log=quiet, compile=True)
    assert len(compiled) == 1 and compiled[0].calls == SMALL.epochs  # the compiled model is the one trained


@pytest.mark.parametrize("teacher_epochs", [0, 1], ids=["alone", "with-teacher"])
def test_a_deit_uses_every_parameter_with_or_without_a_teacher(teacher_epochs, monkeypatch):
    """DistributedDataParallel expects every parameter to get a gradient in each step (or a slow search for the
    ones that do not). Without a teacher a DeiT trains on the average of its two heads, so the [DIST] head learns
    too; with one, each head has its own target."""
    config = replace(SMALL, model="deit_digits_patch2_8", teacher_epochs=teacher_epochs, distill_alpha=0.5)
    model = create_model(config.model, **config.model_kwargs).train()
    model.set_distilled_training(teacher_epochs > 0)
    logits = model(torch.randn(4, 1, 8, 8))
    sum(out.sum() for out in (logits if isinstance(logits, tuple) else [logits])).backward()
    assert [name for name, p in model.named_parameters() if p.grad is None] == []
    start, real_create_model = {}, create_model

    def remember_start(*args, **kwargs):  # fit's own model, as it was built
        built = real_create_model(*args, **kwargs)
        start.update({k: v.clone() for k, v in built.state_dict().items()})
        return built

    monkeypatch.setattr(T, "create_model", remember_start)
    trained = T.fit(config, device="cpu", log=quiet).model
    assert trained.distilled_training == (teacher_epochs > 0)
    assert not torch.equal(trained.head_dist.weight, start["head_dist.weight"])


def test_fit_trains_a_model_the_registry_does_not_build():
    """build(config) makes the model (here a CNN baseline): the same loop, seeds and checkpoints; a model without a
    patch embedding gets no pretrained_cfg and no input check."""
    from vitedu.cnn import ConvTeacher

    built = []

    def build(config):
        built.append(config.model)
        return ConvTeacher(1, 10)

    result = T.fit(replace(SMALL, epochs=1), device="cpu", log=quiet, build=build)
    assert built == [SMALL.model] and isinstance(result.model, ConvTeacher)
    assert not hasattr(result.model, "pretrained_cfg") and 0 <= result.test_acc <= 1


def test_fit_trains_the_teacher_in_the_precision_asked_for():
    config = replace(SMALL, epochs=1, teacher_epochs=1)
    fp32 = T.fit(config, device="cpu", log=quiet, precision="fp32").teacher
    bf16 = T.fit(config, device="cpu", log=quiet, precision="bf16").teacher
    assert not torch.equal(fp32[0].weight, bf16[0].weight)  # bf16 products round differently


def test_cli_help_says_where_unset_options_come_from(capsys):
    with pytest.raises(SystemExit):
        T.parse_args(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "Train a Vision Transformer from scratch. Options not given come from the dataset's preset" in text
    assert "The last line printed is the test accuracy." in text


def test_cli_under_torchrun_only_the_first_process_speaks(monkeypatch, capsys, tmp_path):
    """Under torchrun the first process says how the batch is shared and over which backend (NCCL on GPUs, Gloo on
    CPUs); the others print nothing; the process group is left as DDP.setup says."""
    from vitedu import distributed as DDP

    cleaned = []

    def fake_fit(config, **kwargs):
        model = create_model(config.model, **{**config.model_kwargs, "depth": 1})
        return T.Result(model, T.History(val_acc=[0.5]), 0.75, config, optimizer=None)

    monkeypatch.setattr(T, "fit", fake_fit)
    monkeypatch.setattr(T.distributed, "cleanup", cleaned.append)
    path = tmp_path / "vit.safetensors"
    for rank, device, backend in ((0, "cpu", "Gloo"), (0, "cuda", "NCCL"), (1, "cpu", None)):
        process = DDP.Process(rank=rank, world_size=2)
        monkeypatch.setattr(T.distributed, "setup", lambda device_name, p=process, d=device: (p, torch.device(d), True))
        capsys.readouterr()
        T.main(["--save-weights", str(path)])
        out = capsys.readouterr().out
        if backend is None:
            assert out == ""
        else:
            lines = out.splitlines()
            assert lines[0] == f"2 processes ({backend}), each training on 1/2 of every batch of 32"
            assert f"weights written to {path}" in lines and lines[-1] == "test accuracy: 0.7500"
    assert cleaned == [True, True, True]


def test_train_one_epoch_multiplies_in_the_precision_asked_for():
    """fp32 ("auto" on the CPU): every matrix product in float32; bf16: in bfloat16, the weights staying fp32."""
    dtypes = {}
    for precision in ("auto", "fp32", "bf16"):
        model = create_model(SMALL.model, **SMALL.model_kwargs)
        seen = dtypes.setdefault(precision, set())
        model.head.register_forward_hook(lambda module, args, output, seen=seen: seen.add(output.dtype))
        loader = make_loaders(SMALL, torch.device("cpu"))["train"]
        optimizer = torch.optim.AdamW(param_groups(model, SMALL.weight_decay), lr=SMALL.lr)
        T.train_one_epoch(model, loader, optimizer, torch.amp.GradScaler("cpu", enabled=False), SMALL, 0, len(loader),
                          precision=precision)
        assert model.head.weight.dtype == torch.float32
    assert dtypes == {"auto": {torch.float32}, "fp32": {torch.float32}, "bf16": {torch.bfloat16}}


def test_fit_rejects_an_unknown_precision_before_loading_any_data(monkeypatch):
    """A typo in precision fails at once, not after CIFAR-10 is downloaded or an image folder is read."""
    def no_data(*args, **kwargs):
        raise AssertionError("the data was loaded before the precision was checked")

    monkeypatch.setattr(T, "make_loaders", no_data)
    with pytest.raises(ValueError, match="unknown precision 'fp16'"):
        T.fit(SMALL, device="cpu", log=quiet, precision="fp16")


def test_fit_on_a_process_other_than_the_first_logs_and_writes_nothing(monkeypatch, tmp_path, capsys):
    """Under torchrun only rank 0 logs, shows a bar and writes ``out``; here rank 1 of 2 is simulated in one process
    (the collective operations stand in for their lone-process selves)."""
    from vitedu import distributed as DDP

    monkeypatch.setattr(T.distributed, "current", lambda: DDP.Process(rank=1, world_size=2))
    monkeypatch.setattr(T.distributed, "barrier", lambda: None)
    monkeypatch.setattr(T.distributed, "all_sum", lambda values, device: values)
    monkeypatch.setattr(T.distributed, "wrap", lambda model, device, **kwargs: model)
    lines = []
    capsys.readouterr()
    result = T.fit(replace(SMALL, teacher_epochs=1), out=tmp_path / "run", device="cpu", log=lines.append,
                   progress=True)
    assert lines == [] and capsys.readouterr().err == "" and not (tmp_path / "run").exists()
    assert result.history.epoch == [1, 2]


def test_every_seed_and_epoch_draws_its_own_dropout_and_drop_path(monkeypatch):
    """Dropout and drop-path masks depend on (seed, epoch) only: the same pair repeats them (resume), and no two pairs
    share them, so runs with different seeds are really different runs."""
    seeds, one_epoch = [], T.train_one_epoch
    monkeypatch.setattr(T, "train_one_epoch", lambda *a, **k: seeds.append(torch.initial_seed()) or one_epoch(*a, **k))
    for seed in (0, 1, 2, 0):
        T.fit(replace(SMALL, epochs=2, teacher_epochs=0, seed=seed), device="cpu", log=quiet)
    assert len(set(seeds[:6])) == 6  # 3 seeds x 2 epochs: six different streams
    assert seeds[6:] == seeds[:2]  # seed 0 again: the same two


def test_shortest_decimals_write_a_float32_statistic_as_it_was_written():
    # a weight file's metadata says mean 0.0807, not float32's 0.08070000261068344
    assert T.shortest_decimals(torch.tensor([0.0807, 0.2384])) == [0.0807, 0.2384]
    assert torch.tensor([0.0807]).tolist() != [0.0807]  # what it avoids
    third = T.shortest_decimals(torch.tensor([[1 / 3]]))  # needs all its digits, and keeps them
    assert torch.tensor(third).item() == torch.tensor(1 / 3).item() and third != [1 / 3]
