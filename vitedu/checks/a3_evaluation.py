"""Assignment 3, Part 3: the evaluation, ``evaluate(model, split) -> (mean loss per image, accuracy)``.

The student's ``evaluate`` reads a split of the digits through the notebook's ``loader``, so the check hands it
models of its own that watch what they are given: which images (hence which split: each image is looked up
among the 1,797 digits), in batches of which sizes, in which mode, with gradients on or off. The results are
compared with the reference on every split, and a wrong one is explained by what the model saw: the training
images scored when the validation images were asked for, only the first batch, a mean of batch means, ...
"""

from __future__ import annotations

import math
from typing import Any, Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..constants import DIGITS_MEAN, DIGITS_STD
from ..digits import DIGITS_MAX, load_digits
from ..loaders import TensorLoader
from ..models import create_model
from .diagnosis import CheckFailed, aspect, passed, resolve_device, run_student

SPLITS = ("train", "val", "test")
# The split model's (right?, loss) for every image of a split: a split's mean loss and accuracy are then the same
# whatever the batches, and tell the splits apart.
_SPLIT_MODEL = {"train": (True, 0.3), "val": (False, 2.6), "test": (True, 1.0)}


def _digits(device: torch.device) -> dict[str, tuple[Tensor, Tensor]]:
    """Every split's images normalised as the notebook's loader normalises them, and the labels."""
    out = {}
    for split, (images, labels) in load_digits().items():
        loader = TensorLoader(images, labels, len(images), mean=DIGITS_MEAN, std=DIGITS_STD, max_value=DIGITS_MAX,
                              device=device)
        out[split] = next(iter(loader))
    return out


class _Watcher(nn.Module):
    """Wraps a model (or, with ``model=None``, plays the split model) and records each call: the split and
    index of every image (nearest of the 1,797 digits), the batch size, training mode and grad mode."""

    def __init__(self, digits: dict[str, tuple[Tensor, Tensor]], model: nn.Module | None = None) -> None:
        super().__init__()
        self.model = model
        self.table = torch.cat([digits[s][0].flatten(1) for s in SPLITS])  # (1797, 64)
        self.labels = torch.cat([digits[s][1] for s in SPLITS])
        self.split_of = [s for s in SPLITS for _ in range(len(digits[s][1]))]
        self.calls: list[dict[str, Any]] = []

    def forward(self, images: Tensor) -> Tensor:
        table = self.table.to(images.device)
        with torch.no_grad():
            # exact distances (no matrix-product shortcut, whose rounding reaches 1e-2): 0 for a digit as the loader
            # serves it, at least 0.88 between two different digits
            distance, index = torch.cdist(images.flatten(1).float(), table,
                                          compute_mode="donot_use_mm_for_euclid_dist").min(dim=1)
        index = index.cpu()
        self.calls.append(dict(index=index, size=len(images), training=self.training, grad=torch.is_grad_enabled(),
                               splits={self.split_of[i] for i in index.tolist()},
                               foreign=bool(distance.max() > 0.1)))
        if self.model is not None:
            return self.model.to(images.device)(images)
        labels = self.labels[index]
        logits = torch.zeros(len(images), 10)
        for row, i in enumerate(index.tolist()):
            right, loss = _SPLIT_MODEL[self.split_of[i]]
            if right:  # logit a on the label: loss = log(1 + 9 exp(-a))
                logits[row, labels[row]] = -math.log((math.exp(loss) - 1) / 9)
            else:  # logit b on the next class, 0 on the label: loss = log(exp(b) + 9)
                logits[row, (labels[row] + 1) % 10] = math.log(math.exp(loss) - 9)
        return logits.to(images.device)

    def seen(self) -> set[str]:
        return set().union(*(call["splits"] for call in self.calls)) if self.calls else set()


def _pair(out: Any, what: str) -> tuple[Any, Any]:
    if not isinstance(out, (tuple, list)) or len(out) != 2:
        raise CheckFailed(f"{what} should return two numbers, (mean loss per image, accuracy), but returned "
                          f"{type(out).__name__}" + (f" of length {len(out)}" if isinstance(out, (tuple, list))
                                                     else "") + ". Did you forget `return loss, acc`?")
    return out[0], out[1]


def _number(value: Any) -> float:
    return float(value.item()) if isinstance(value, Tensor) and value.numel() == 1 else float(value)


def _which_split(watcher: _Watcher, split: str, what: str) -> None:
    seen = watcher.seen()
    if not watcher.calls:
        raise CheckFailed(f"{what} never ran the model it was given: evaluate the `model` argument (a global "
                          "model from elsewhere in the notebook is another model).")
    if any(call["foreign"] for call in watcher.calls):
        raise CheckFailed(f"{what} gave the model images that are not the digits as the notebook's loader serves "
                          "them (scaled to [0, 1] and normalised with the training mean and std): the model was "
                          "trained on those. Read the split through loader(split, batch_size=500).")
    if seen != {split}:
        names = {"train": "training", "val": "validation", "test": "test"}
        scored = " and ".join(f"the {names[s]} images" for s in SPLITS if s in seen)
        raise CheckFailed(
            f"{what} scored {scored}, not the {names[split]} images: the split argument is ignored, so the "
            f"numbers it reports for '{split}' are those of another split. Read the split you are given: "
            "loader(split, batch_size=500).")


def check_evaluate(evaluate: Callable[[nn.Module, str], tuple[float, float]], device=None,
                   only: str | None = None) -> None:
    """Check ``evaluate(model, split) -> (mean loss per image, accuracy)`` on every split of the digits.

    ``only="split"``: that evaluate(model, split) scores the images of ``split`` (train, val and test), with a model
    whose every image of a split has the same loss (so batches and modes do not matter); without it also, on a
    small ViT with dropout handed over in training mode: eval mode, no gradients, the mean per image over
    batches of unequal sizes, two Python floats. The models move to the device of the images they are given.
    """
    only = aspect(only, ("split",), "check_evaluate")
    device = resolve_device(device)
    digits = _digits(device)
    for split in ("val", "test", "train"):
        what = f"evaluate(model, {split!r})"
        watcher = _Watcher(digits)
        loss, acc = (_number(x) for x in _pair(run_student(evaluate, watcher, split, what=what), what))
        _which_split(watcher, split, what)
        right, expected_loss = _SPLIT_MODEL[split]
        expected = (expected_loss, float(right))
        if abs(loss - expected[0]) > 1e-4 or abs(acc - expected[1]) > 1e-6:
            _explain_numbers(loss, acc, expected, what, swap_ok=expected[0] != expected[1])
    if only == "split":
        passed("check_evaluate", "the split: evaluate(model, split) scores the training, validation and test "
               "images when asked for each")
        return
    _check_on_a_vit(evaluate, digits)
    passed("check_evaluate", "every split, eval mode, no gradients, the mean per image over batches of unequal "
           "sizes, two Python floats")


def _explain_numbers(loss: float, acc: float, expected: tuple[float, float], what: str, swap_ok: bool) -> None:
    exp_loss, exp_acc = expected
    if swap_ok and abs(loss - exp_acc) < 1e-4 and abs(acc - exp_loss) < 1e-4:
        raise CheckFailed(f"{what} returned (accuracy, loss) = ({loss:.4f}, {acc:.4f}); return them the other "
                          "way round: (mean loss per image, accuracy).")
    if abs(loss - exp_loss) <= 1e-4 and abs(acc - 100 * exp_acc) < 1e-3 and exp_acc > 0:
        raise CheckFailed(f"{what} returned the accuracy as a percentage ({acc:g}); return the fraction in [0, 1] "
                          f"({exp_acc:g}).")
    raise CheckFailed(f"{what} returned loss {loss:.4f} and accuracy {acc:.4f}; on these images they are "
                      f"{exp_loss:.4f} and {exp_acc:.4f}: the mean cross-entropy per image and the fraction of "
                      "right predictions.")


def _check_on_a_vit(evaluate: Callable[..., Any], digits: dict[str, tuple[Tensor, Tensor]]) -> None:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(15)
        vit = create_model("vit_digits_patch2_8", depth=1, drop_rate=0.5)
    vit.eval()
    with torch.no_grad():  # the reference: every image of every split, in eval mode
        reference = {s: (vit(x.cpu()), y.cpu()) for s, (x, y) in digits.items()}
    for split in ("val", "test", "train"):
        what = f"evaluate(model, {split!r})"
        watcher = _Watcher(digits, vit)
        watcher.train()  # handed over in training mode, as after an epoch of training
        out = run_student(evaluate, watcher, split, what=what)
        loss, acc = _pair(out, what)
        _which_split(watcher, split, what)
        if watcher.training or any(call["training"] for call in watcher.calls):
            raise CheckFailed(
                f"{what} ran the model in training mode: call model.eval() before the forward passes. In training "
                "mode dropout (here 50 %) drops random features, so the same images give other logits every time "
                "and the score is that of a damaged model.")
        if any(call["grad"] for call in watcher.calls):
            raise CheckFailed(
                f"{what} ran the model with gradients on: wrap the evaluation in torch.no_grad() (the decorator "
                "@torch.no_grad() above the function does it). Without it PyTorch records every operation for a "
                "backward pass that never comes: slower, and much more memory.")
        logits, labels = reference[split]
        seen = torch.cat([call["index"] for call in watcher.calls])
        offset = {"train": 0, "val": len(digits["train"][1]), "test": len(digits["train"][1]) + len(digits["val"][1])}
        if len(seen) < len(labels):
            raise CheckFailed(
                f"{what} scored {len(seen)} of the {len(labels)} images: only the first batch (next(iter(...)) or "
                "a `return` inside the loop). Go through every batch of the split and combine them.")
        losses = F.cross_entropy(logits, labels, reduction="none")
        right = (logits.argmax(dim=-1) == labels).float()
        per_image = losses.mean().item(), right.mean().item()
        got = (_number(loss), _number(acc))
        if abs(got[0] - per_image[0]) > 1e-4 or abs(got[1] - per_image[1]) > 1e-6:
            order = seen - offset[split]
            chunks = torch.split(order, [call["size"] for call in watcher.calls])
            batch_means = (sum(losses[c].mean().item() for c in chunks) / len(chunks),
                           sum(right[c].mean().item() for c in chunks) / len(chunks))
            sizes = ", ".join(str(len(c)) for c in chunks)
            if abs(got[0] - batch_means[0]) < 1e-4 or abs(got[1] - batch_means[1]) < 1e-6:
                raise CheckFailed(
                    f"{what} returned the mean of the per-batch values ({got[0]:.4f}, {got[1]:.4f}); the batches "
                    f"have unequal sizes ({sizes}), so that is not the mean per image ({per_image[0]:.4f}, "
                    f"{per_image[1]:.4f}). Concatenate the logits of all batches (torch.cat) before the loss and "
                    "the accuracy, or weight each batch by its size.")
            if abs(got[0] - losses.sum().item()) < 1e-2 * losses.sum().item():
                raise CheckFailed(f"{what} returned the summed loss ({got[0]:.1f}); return the mean per image, "
                                  f"{per_image[0]:.4f} (F.cross_entropy's default reduction).")
            _explain_numbers(got[0], got[1], per_image, what, swap_ok=True)
        if not all(isinstance(x, float) for x in (loss, acc)):
            raise CheckFailed(f"{what} returned {type(loss).__name__} and {type(acc).__name__}; return two Python "
                              "floats (.item()), so that a history of them holds plain numbers.")
