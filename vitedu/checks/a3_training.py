"""Assignment 3: the accuracy, the training step and the [CLS] attention (chapter 7); the evaluation is in
``a3_evaluation``.

See ``vitedu.checks`` for what each check diagnoses by name. Each check takes ``only=`` for the graded cells that
give partial credit: every aspect also checks the core (the right values, the right update), so a broken
mechanism fails every cell and a slip only the cell of its aspect."""

from __future__ import annotations

import numbers
from typing import Any, Callable

import numpy as np
import torch
from torch import Tensor, nn

from ..models import create_model
from .diagnosis import (
    CheckFailed,
    aspect,
    check_shape,
    close,
    diagnose,
    other_sizes,
    passed,
    randn,
    resolve_device,
    run_student,
    tensor_out,
)

# ----------------------------------------------------------------------------------------------------
# Part 1: accuracy


def _as_number(value: Any, what: str) -> float:
    if isinstance(value, Tensor) and value.numel() == 1:
        return float(value.item())
    if isinstance(value, numbers.Real) and not isinstance(value, bool):  # also numpy's scalars
        return float(value)
    if isinstance(value, np.ndarray) and value.size == 1:
        return float(value.item())
    raise CheckFailed(f"{what} should return one number, the fraction of right predictions, but returned "
                      f"{type(value).__name__}" + (f" of shape {tuple(value.shape)}" if isinstance(value, Tensor)
                                                   else "") + ".")


def check_accuracy(accuracy: Callable[[Tensor, Tensor], float], device=None, only: str | None = None) -> None:
    """Check ``accuracy(logits, labels) -> float``: the fraction of rows whose arg-max is the label.

    ``only="values"``: the value alone (a tensor or a float); without it also a Python float and another shape.
    """
    only = aspect(only, ("values",), "check_accuracy")
    # Seed 18: on the first logits the arg-max over the batch axis and argmin give other values than the
    # right one and than each other (0.5 and 0.1 against 0.6), so each is named.
    device, gen, what = resolve_device(device), torch.Generator().manual_seed(18), "accuracy(logits, labels)"

    def one(batch: int, classes: int, right: int) -> None:
        logits = randn(gen, batch, classes, device=device) * 2
        predicted = logits.argmax(dim=-1)
        labels = predicted.clone()
        labels[right:] = (predicted[right:] + 1) % classes  # the first `right` predictions are right
        out = run_student(accuracy, logits, labels, what=what)
        got = _as_number(out, what)
        expected = right / batch
        def share(right_ones: Callable[[], Tensor]) -> Callable[[], Tensor]:
            return lambda: right_ones().float().mean().cpu()

        def number(value: float) -> Callable[[], Tensor]:
            return lambda: torch.tensor(value)

        variants = [
            ("you took the arg-max over the batch axis (dim=0); the predicted class of each image is the largest "
             "logit of its *row*: logits.argmax(dim=-1).", share(lambda: logits.argmax(dim=0) == labels)),
            ("you used argmin: the prediction is the class with the *largest* logit, logits.argmax(dim=-1).",
             share(lambda: logits.argmin(dim=-1) == labels)),
            (f"you returned a percentage ({got:g}); return the fraction in [0, 1], {expected:g} here (without * 100).",
             number(100 * expected)),
            (f"you returned the number of right predictions ({got:g}); divide by the number of images: the fraction "
             f"is {expected:g} here (.float().mean()).", number(float(right))),
            (f"you returned the error rate ({got:g}), the fraction of *wrong* predictions; the accuracy is the "
             f"fraction of right ones, {expected:g} here.", number(1 - expected)),
            (f"your accuracy is 0 although {right} of these {batch} predictions are right. Compare the predicted "
             "classes, logits.argmax(dim=-1), with the labels (not the largest logit *values*, max(dim=-1).values, "
             "and not an arg-max of the whole tensor without dim), and divide as floats: integer division (//) "
             "or int() rounds the fraction down to 0; (predictions == labels).float().mean().item().",
             number(0.0)),
        ]
        diagnose(torch.tensor(got), torch.tensor(expected), variants, what,
                 otherwise=f"Of these {batch} images {right} are predicted right: the accuracy is {expected:g}.")
        if only is None and not isinstance(out, float):
            raise CheckFailed(f"{what} returned {type(out).__name__} {out!r}; return a Python float, e.g. "
                              "(predictions == labels).float().mean().item(), so that the history of a run holds "
                              "plain numbers (and no tensors that keep memory alive).")

    one(10, 10, 6)  # square, so that an arg-max over the wrong axis gives values instead of an error
    if only == "values":
        passed("check_accuracy", "the values: the fraction of right predictions for 10 images of 10 classes")
        return
    other_sizes("10 images, 10 classes", "7 images, 4 classes", lambda: one(7, 4, 3))
    passed("check_accuracy", "a Python float, the fraction of right predictions, for two shapes of logits")


# ----------------------------------------------------------------------------------------------------
# Part 2: one epoch of training


def _tiny_classifier(gen: torch.Generator, device: torch.device) -> nn.Module:
    """A small MLP on 8x8 images (its weights drawn from ``gen``): the check needs a model, not a ViT."""
    model = nn.Sequential(nn.Flatten(), nn.Linear(64, 16), nn.GELU(), nn.Linear(16, 10))
    with torch.no_grad():
        for param in model.parameters():
            param.copy_(torch.randn(param.shape, generator=gen) * 0.3)
    return model.to(device)


def _reference_epoch(model: nn.Module, batches: list, lr: float, zero_grad: bool = True, step: bool = True,
                     reduction: str = "mean", softmax: bool = False, nll: bool = False) -> list[float]:
    """The reference training epoch (SGD), with switchable mistakes; returns each batch's mean loss."""
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    losses = []
    for images, labels in batches:
        logits = model(images)
        logits = logits.softmax(dim=-1) if softmax else logits
        loss_fn = torch.nn.functional.nll_loss if nll else torch.nn.functional.cross_entropy
        loss = loss_fn(logits, labels, reduction=reduction)
        if zero_grad:
            optimizer.zero_grad()
        loss.backward()
        if step:
            optimizer.step()
        losses.append(loss.item())
    return losses


class _Trace:
    """What the student's loop did, in order: 'zero' (optimizer.zero_grad or model.zero_grad), 'backward' (a
    gradient reached the model's first weight), 'step' (the given optimizer's step, with whether it found
    gradients). The order says which mistake it is, however the loop is written."""

    def __init__(self, model: nn.Module, optimizer: torch.optim.Optimizer) -> None:
        self.events: list[str] = []
        self.steps_with_gradients: list[bool] = []
        params = list(model.parameters())
        params[0].register_post_accumulate_grad_hook(lambda _: self.events.append("backward"))
        step, zero, model_zero = optimizer.step, optimizer.zero_grad, model.zero_grad

        def spy_step(*args, **kwargs):
            self.events.append("step")
            self.steps_with_gradients.append(any(p.grad is not None and bool(p.grad.abs().sum() > 0) for p in params))
            return step(*args, **kwargs)

        def spy_zero(*args, **kwargs):
            self.events.append("zero")
            return zero(*args, **kwargs)

        def spy_model_zero(*args, **kwargs):
            self.events.append("zero")
            return model_zero(*args, **kwargs)

        optimizer.step, optimizer.zero_grad, model.zero_grad = spy_step, spy_zero, spy_model_zero

    def step_before_backward(self) -> bool:
        """Whether a step came before the backward pass of its batch (the first step before the first backward)."""
        return "step" in self.events and "backward" in self.events and \
            self.events.index("step") < self.events.index("backward")


def check_train_epoch(train_epoch: Callable[..., float], device=None, only: str | None = None) -> None:
    """Check ``train_epoch(model, batches, optimizer) -> float``: training mode, one optimizer step per batch
    (zero_grad, backward, step), and the mean loss per *image* over the epoch.

    The check compares the parameters after one epoch of plain SGD with a reference epoch, starting from the
    same weights, and hands the model over in eval mode (as after an evaluation) to see that training mode
    is switched on. ``only``: "update" (the weights after the epoch: the order of the calls, the loss, the
    optimizer passed in), "training mode" (the update, and model.train()), "mean loss" (the update, and the
    returned mean loss per image); without it, all of them.
    """
    only = aspect(only, ("update", "training mode", "mean loss"), "check_train_epoch")
    device, gen = resolve_device(device), torch.Generator().manual_seed(13)
    what = "train_epoch(model, batches, optimizer)"
    model = _tiny_classifier(gen, device)
    sizes = (8, 8, 5)  # the last batch is smaller, so a plain mean of batch losses is visibly wrong
    batches = [(randn(gen, n, 1, 8, 8, device=device), torch.randint(0, 10, (n,), generator=gen).to(device))
               for n in sizes]
    start = {name: p.detach().clone() for name, p in model.state_dict().items()}

    def trained(**mistake: bool | str) -> tuple[list[float], list[Tensor]]:
        ref = _tiny_classifier(torch.Generator(), device)
        ref.load_state_dict(start)
        losses = _reference_epoch(ref, batches, lr=0.5, **mistake)
        return losses, [p.detach() for p in ref.parameters()]

    model.eval()  # as after evaluate(): train_epoch must switch training mode back on
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    trace = _Trace(model, optimizer)
    loss = run_student(train_epoch, model, batches, optimizer, what=what)
    if only in (None, "training mode") and not model.training:
        raise CheckFailed(
            f"{what} left the model in eval mode: call model.train() at its start. After an evaluation the "
            "model is in eval mode, where dropout, stochastic depth and batch-norm statistics behave as at test "
            "time; training in that mode silently trains a different model.")
    params = [p.detach() for p in model.parameters()]

    def same(other: list[Tensor]) -> bool:
        return all(close(a, b) for a, b in zip(params, other))

    losses, expected = trained()
    if not same(expected):
        _diagnose_update(trace, params, start, same, trained, what)
    if only in (None, "mean loss"):
        _check_returned_loss(loss, losses, sizes, what)
    detail = {"update": "the update: one zero_grad, backward, step per batch, with the optimizer passed in",
              "training mode": "training mode, and the update", "mean loss": "the mean loss per image, and the update",
              None: "training mode, one step per batch, mean loss per image"}[only]
    passed("check_train_epoch", detail)


def _diagnose_update(trace: _Trace, params: list[Tensor], start: dict, same: Callable, trained: Callable,
                     what: str) -> None:
    """The weights after the student's epoch differ from the reference's: say why, from the trace of calls and
    from epochs with the usual mistakes."""
    unchanged = all(torch.equal(a, b) for a, b in zip(params, start.values()))
    if not trace.steps_with_gradients:
        if unchanged:
            raise CheckFailed(f"{what} did not change the weights: call optimizer.step() after loss.backward(), "
                              "once per batch (it was never called).")
        raise CheckFailed(
            f"{what} changed the weights without calling optimizer.step() of the optimizer passed in (a new "
            "optimizer made inside train_epoch, or a hand-written update): use the optimizer argument, "
            "optimizer.zero_grad(), loss.backward(), optimizer.step(). The caller chooses it (Part 4 uses AdamW "
            "with a learning-rate schedule).")
    if not any(trace.steps_with_gradients):
        if trace.step_before_backward():
            raise CheckFailed(
                f"{what}: optimizer.step() comes before loss.backward(), so every step found no gradients (they "
                "were cleared, or not computed yet) and the weights never moved: the model cannot learn. In each "
                "batch: forward and loss, optimizer.zero_grad(), loss.backward(), then optimizer.step().")
        if "backward" not in trace.events:
            raise CheckFailed(
                f"{what}: loss.backward() is missing, so there are no gradients and optimizer.step() does "
                "nothing: the model cannot learn. In each batch: optimizer.zero_grad(), loss.backward(), "
                "optimizer.step().")
        raise CheckFailed(
            f"{what}: optimizer.step() found no gradients, so the weights did not move: the gradients were "
            "cleared before the step used them (zero_grad() between loss.backward() and optimizer.step()). The "
            "order is zero_grad(), backward(), step().")
    if unchanged:
        raise CheckFailed(f"{what} did not change the weights: call optimizer.step() after loss.backward().")
    if same(trained(zero_grad=False)[1]):
        raise CheckFailed(
            f"{what}: the gradients accumulate from batch to batch: call optimizer.zero_grad() in every batch, "
            "before loss.backward() (PyTorch adds new gradients to the old ones).")
    if same(trained(reduction="sum")[1]):
        raise CheckFailed(
            f"{what}: the loss is summed over the batch (reduction='sum'), so each step is as many times too "
            "large as the batch has images, and a smaller last batch takes a smaller step. Train on the mean "
            "over the batch, F.cross_entropy's default: loss = F.cross_entropy(logits, labels). (For the mean "
            "per image that train_epoch returns, weight each batch's loss.item() by len(labels).)")
    if same(trained(softmax=True)[1]):
        raise CheckFailed(
            f"{what}: you applied a softmax before F.cross_entropy, which applies log-softmax itself: it then "
            "reads probabilities as logits, so the loss can never go near 0 and the gradients are tiny. Pass "
            "the model's raw logits: F.cross_entropy(model(images), labels).")
    if same(trained(nll=True)[1]):
        raise CheckFailed(
            f"{what}: you used F.nll_loss on the model's raw logits; it expects log-probabilities, so it just "
            "averages -logit of the right class, which grows without bound. Use F.cross_entropy(logits, labels), "
            "which applies log_softmax itself (or F.nll_loss(logits.log_softmax(-1), labels)).")
    steps = trace.events.count("step")
    if steps != 3:
        raise CheckFailed(f"{what} called optimizer.step() {steps} times for 3 batches: take one step per batch, "
                          "inside the loop over the batches.")
    raise CheckFailed(f"{what}: after one epoch the weights differ from those of a reference epoch (one "
                      "zero_grad, backward, step per batch, with F.cross_entropy on the model's logits).")


def _check_returned_loss(loss: Any, losses: list[float], sizes: tuple[int, ...], what: str) -> None:
    if isinstance(loss, Tensor):
        raise CheckFailed(f"{what} returned a tensor; return a Python float (loss.item()), so that the "
                          "history does not keep every batch's computation graph alive.")
    if not isinstance(loss, (float, int)) or isinstance(loss, bool):
        raise CheckFailed(f"{what} should return the mean loss as a float, but returned {type(loss).__name__}. "
                          "Did you forget `return`?")
    per_image = sum(value * n for value, n in zip(losses, sizes)) / sum(sizes)
    if abs(loss - per_image) <= 1e-4:
        return
    fix = f"weight each batch by its size: sum(loss.item() * len(labels)) / number of images = {per_image:.4f}"
    for value, hint in (
        (sum(losses) / len(losses), f"returned the mean of the batch losses ({loss:.4f}); the last batch is "
         f"smaller, so {fix}."),
        (sum(losses), f"returned the sum of the batch losses ({loss:.4f}), not a mean; {fix}."),
        (per_image * sum(sizes), f"returned the total loss over all images ({loss:.4f}); divide it by the number "
         f"of images: {per_image:.4f}."),
        (losses[-1], f"returned the last batch's loss ({loss:.4f}), not the mean over the epoch; {fix}."),
        (losses[0], f"returned the first batch's loss ({loss:.4f}): the `return` is inside the loop, so the "
         "epoch stops after one batch. Return after the loop, the mean over all images."),
    ):
        if abs(loss - value) < 1e-4:
            raise CheckFailed(f"{what} {hint}")
    raise CheckFailed(f"{what} returned {loss:.4f}; the mean training loss per image is {per_image:.4f}.")


# ----------------------------------------------------------------------------------------------------
# Part 6: the [CLS] attention


def _peaked_vit(gen: torch.Generator, device: torch.device, patch_size: int = 2) -> nn.Module:
    """A digits ViT (2 blocks of 4 heads) with random weights drawn from ``gen``, the query-key-value weights
    large (std 1) so that its attention is peaked in both blocks and differs from block to block and from
    head to head: a map from the wrong block, a single head, a transposed grid or a shifted column is then
    far from the right one (a freshly initialised ViT attends almost uniformly, and a trained one may attend
    to almost nothing but itself). tests/test_checks.py measures how peaked: with all weights at std 0.3
    the last block's head-averaged [CLS] row was near uniform (at most 0.066 against 1/17 = 0.059)."""
    with torch.random.fork_rng(devices=[]):  # the notebook's random numbers stay as they were
        model = create_model("vit_digits_patch2_8", depth=2, num_heads=4, patch_size=patch_size)
    with torch.no_grad():
        for name, param in model.named_parameters():
            std = 1.0 if name.endswith("attn.qkv.weight") else 0.3
            param.copy_(torch.randn(param.shape, generator=gen) * std)
    return model.to(device).eval()


def _per_map(maps: Tensor) -> Tensor:
    """Each map divided by its sum: what is left when the scale of the weights is put aside."""
    return maps / maps.sum(dim=(-2, -1), keepdim=True)


def check_cls_attention(cls_attention: Callable[..., Tensor], device=None, only: str | None = None) -> None:
    """Check ``cls_attention(model, images) -> (batch, grid, grid)``: the last block's attention from [CLS]
    (row 0) to the patches (columns 1...), averaged over the heads, in the patch grid's row-major layout.

    The model is the check's own (random, peaked attention), not the student's trained one, so that the check
    does not depend on the training run; each known mistake is named. ``only``: "weights" (which weights, up to
    their scale: each map compared after dividing it by its sum, on a 4x4 grid), "raw weights" (the same, as the
    softmax gave them); without it also a 2x2 grid.
    """
    only = aspect(only, ("weights", "raw weights"), "check_cls_attention")
    device, gen = resolve_device(device), torch.Generator().manual_seed(17)
    what = "cls_attention(model, images)"

    def run(patch_size: int, batch: int, scaled: bool) -> None:
        model = _peaked_vit(gen, device, patch_size)
        images = randn(gen, batch, 1, 8, 8, device=device)
        grid = model.patch_embed.grid_size
        with torch.no_grad():
            maps = model.attention_maps(images)  # (depth, batch, heads, tokens, tokens)
            got = tensor_out(run_student(cls_attention, model, images, what=what), what)

        def layout(rows: Tensor) -> Tensor:
            return rows.reshape(batch, *grid)

        check_shape(got, (batch, *grid), ("batch", "grid rows", "grid columns"), what, hints={
            (batch, grid[0] * grid[1]): "Reshape the patch weights to the grid: .reshape(batch, rows, columns).",
            (batch, grid[0] * grid[1] + 1): "Leave out column 0 ([CLS] attending to itself), then reshape.",
            (*grid,): "You averaged over the images too: keep one map per image, average over the heads only "
            "(.mean(dim=1) of (batch, heads, ...)).",
        })
        last = maps[-1, :, :, 0, 1:]  # (batch, heads, patches)
        variants = [
            ("this is the first block's attention; take the last block's, maps[-1] (the [CLS] token that the "
             "head classifies is the output of the last block).", lambda: layout(maps[0, :, :, 0, 1:].mean(1))),
            ("you averaged over the blocks too; take the last block's attention alone, maps[-1].",
             lambda: layout(maps[:, :, :, 0, 1:].mean(dim=(0, 2)))),
            ("this is head 0 only; average the [CLS] row over all the heads (.mean over the heads axis).",
             lambda: layout(last[:, 0])),
            ("you took the largest weight over the heads; average the [CLS] row over the heads (.mean(dim=1)).",
             lambda: layout(last.max(dim=1).values)),
            ("the grid is transposed: the patches are in row-major order (patch 1 is row 0, column 1), so a "
             "plain .reshape(batch, rows, columns) lays them out; do not transpose it.",
             lambda: layout(last.mean(1)).transpose(-2, -1)),
            ("you kept the [CLS] column (column 0, its attention to itself) and dropped the last patch: the "
             "patches are columns 1 onwards, [..., 0, 1:].", lambda: layout(maps[-1, :, :, 0, :-1].mean(1))),
            ("this is the attention *to* [CLS] from each patch (column 0); [CLS]'s own attention is row 0: "
             "[..., 0, 1:].", lambda: layout(maps[-1, :, :, 1:, 0].mean(1))),
            ("you applied a softmax to the patch weights again; they are weights already: take them as they are.",
             lambda: layout(last.mean(1).softmax(dim=-1))),
            ("you summed over the heads; average them (.mean(dim=1)), so that the map is a share of [CLS]'s "
             "attention.", lambda: layout(last.sum(1))),
            ("the weights are renormalised over the patches (as vitedu.interpret.cls_attention and chapter 6 do, "
             "to compare maps on one scale); this part asks for them as the softmax gave them, not "
             "renormalised: their sum is below 1 by [CLS]'s attention to itself.",
             lambda: layout(last.mean(1) / last.mean(1).sum(-1, keepdim=True))),
        ]
        rescale = _per_map if scaled else (lambda t: t)
        diagnose(rescale(got.to(maps)), rescale(layout(last.mean(1))),
                 [(hint, lambda v=variant: rescale(v())) for hint, variant in variants], what,
                 otherwise="Take maps[-1] (last block), row 0 ([CLS]), columns 1: (patches), the mean over heads.")

    run(2, 6, scaled=only == "weights")
    if only is not None:
        passed("check_cls_attention", "the weights: last block, [CLS] row, patch columns, mean over heads, "
               "row-major grid" + (" (each map compared up to its scale)" if only == "weights" else
                                   ", not renormalised") + ", on a 4x4 grid")
        return
    other_sizes("a 4x4 grid", "a 2x2 grid (4x4 patches)", lambda: run(4, 3, scaled=False))
    passed("check_cls_attention", "last block, [CLS] row, patch columns, mean over heads, row-major grid, "
           "not renormalised (on a model of the check's own whose random attention is peaked: in its last "
           "block [CLS]'s strongest patch gets 2 to 5 times the uniform share)")
