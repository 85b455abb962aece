"""Assignment 3: the training step (chapter 7).

See ``vitedu.checks`` for what each check diagnoses by name."""

from __future__ import annotations

from typing import Callable

import torch
from torch import Tensor, nn

from .diagnosis import (
    CheckFailed,
    close,
    passed,
    randn,
    resolve_device,
    run_student,
)


def _tiny_classifier(gen: torch.Generator, device: torch.device) -> nn.Module:
    """A small MLP on 8x8 images (its weights drawn from ``gen``): the check needs a model, not a ViT."""
    model = nn.Sequential(nn.Flatten(), nn.Linear(64, 16), nn.GELU(), nn.Linear(16, 10))
    with torch.no_grad():
        for param in model.parameters():
            param.copy_(torch.randn(param.shape, generator=gen) * 0.3)
    return model.to(device)


def _reference_epoch(model: nn.Module, batches: list, lr: float, zero_grad: bool = True,
                     step: bool = True) -> list[float]:
    """The reference training epoch (SGD), with switchable mistakes; returns each batch's mean loss."""
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    losses = []
    for images, labels in batches:
        loss = torch.nn.functional.cross_entropy(model(images), labels)
        if zero_grad:
            optimizer.zero_grad()
        loss.backward()
        if step:
            optimizer.step()
        losses.append(loss.item())
    return losses


def check_train_epoch(train_epoch: Callable[..., float], device=None) -> None:
    """Check ``train_epoch(model, batches, optimizer) -> float``: training mode, one optimizer step per batch
    (zero_grad, backward, step), and the mean loss per *image* over the epoch.

    The check compares the parameters after one epoch of plain SGD with a reference epoch, starting from the
    same weights, and hands the model over in eval mode (as after an evaluation) to see that training mode
    is switched on.
    """
    device, gen = resolve_device(device), torch.Generator().manual_seed(13)
    what = "train_epoch(model, batches, optimizer)"
    model = _tiny_classifier(gen, device)
    sizes = (8, 8, 5)  # the last batch is smaller, so a plain mean of batch losses is visibly wrong
    batches = [(randn(gen, n, 1, 8, 8, device=device), torch.randint(0, 10, (n,), generator=gen).to(device))
               for n in sizes]
    start = {name: p.detach().clone() for name, p in model.state_dict().items()}

    def trained(**mistake: bool) -> tuple[list[float], list[Tensor]]:
        ref = _tiny_classifier(torch.Generator(), device)
        ref.load_state_dict(start)
        losses = _reference_epoch(ref, batches, lr=0.5, **mistake)
        return losses, [p.detach() for p in ref.parameters()]

    model.eval()  # as after evaluate(): train_epoch must switch training mode back on
    loss = run_student(train_epoch, model, batches, torch.optim.SGD(model.parameters(), lr=0.5), what=what)
    if not model.training:
        raise CheckFailed(
            f"{what} left the model in eval mode: call model.train() at its start. After an evaluation the "
            "model is in eval mode, where dropout, stochastic depth and batch-norm statistics behave as at test "
            "time; training in that mode silently trains a different model.")
    if isinstance(loss, Tensor):
        raise CheckFailed(f"{what} returned a tensor; return a Python float (loss.item()), so that the "
                          "history does not keep every batch's computation graph alive.")
    if not isinstance(loss, (float, int)):
        raise CheckFailed(f"{what} should return the mean loss as a float, but returned {type(loss).__name__}.")
    params = [p.detach() for p in model.parameters()]

    def same(other: list[Tensor]) -> bool:
        return all(close(a, b) for a, b in zip(params, other))

    losses, expected = trained()
    if not same(expected):
        if all(torch.equal(a, b) for a, b in zip(params, start.values())):
            raise CheckFailed(f"{what} did not change the weights: call optimizer.step() after loss.backward().")
        if same(trained(zero_grad=False)[1]):
            raise CheckFailed(
                f"{what}: the gradients accumulate from batch to batch: call optimizer.zero_grad() before "
                "loss.backward() (PyTorch adds new gradients to the old ones).")
        raise CheckFailed(f"{what}: after one epoch the weights differ from those of a reference epoch (one "
                          "zero_grad, backward, step per batch, with F.cross_entropy on the model's logits).")
    per_image = sum(value * n for value, n in zip(losses, sizes)) / sum(sizes)
    if abs(loss - per_image) > 1e-4:
        if abs(loss - sum(losses) / len(losses)) < 1e-4:
            raise CheckFailed(
                f"{what} returned the mean of the batch losses ({loss:.4f}); the last batch is smaller, so weight "
                f"each batch by its size: sum(loss * len(labels)) / number of images = {per_image:.4f}.")
        raise CheckFailed(f"{what} returned {loss:.4f}; the mean training loss per image is {per_image:.4f}.")
    passed("check_train_epoch", "training mode, one step per batch, mean loss per image")
