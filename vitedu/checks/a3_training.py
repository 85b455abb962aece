"""Assignment 3: the training step (chapter 7).

See ``vitedu.checks`` for what each check diagnoses by name."""

from __future__ import annotations

from typing import Callable

import torch
from torch import Tensor, nn

from .diagnosis import (
    CheckFailed,
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


def _tiny_classifier(gen: torch.Generator, device: torch.device) -> nn.Module:
    """A small MLP on 8x8 images (its weights drawn from ``gen``): the check needs a model, not a ViT."""
    model = nn.Sequential(nn.Flatten(), nn.Linear(64, 16), nn.GELU(), nn.Linear(16, 10))
    with torch.no_grad():
        for param in model.parameters():
            param.copy_(torch.randn(param.shape, generator=gen) * 0.3)
    return model.to(device)


def _reference_epoch(model: nn.Module, batches: list, lr: float, zero_grad: bool = True,
                     step: bool = True, reduction: str = "mean", softmax: bool = False) -> list[float]:
    """The reference training epoch (SGD), with switchable mistakes; returns each batch's mean loss."""
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    losses = []
    for images, labels in batches:
        logits = model(images)
        logits = logits.softmax(dim=-1) if softmax else logits
        loss = torch.nn.functional.cross_entropy(logits, labels, reduction=reduction)
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

    def trained(**mistake: bool | str) -> tuple[list[float], list[Tensor]]:
        ref = _tiny_classifier(torch.Generator(), device)
        ref.load_state_dict(start)
        losses = _reference_epoch(ref, batches, lr=0.5, **mistake)
        return losses, [p.detach() for p in ref.parameters()]

    model.eval()  # as after evaluate(): train_epoch must switch training mode back on
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    steps_with_gradients: list[bool] = []  # at each optimizer.step(): were there gradients to use?
    sgd_step = optimizer.step

    def spy_step(*args, **kwargs):
        steps_with_gradients.append(any(p.grad is not None and bool(p.grad.abs().sum() > 0)
                                        for p in model.parameters()))
        return sgd_step(*args, **kwargs)

    optimizer.step = spy_step
    loss = run_student(train_epoch, model, batches, optimizer, what=what)
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
        if steps_with_gradients and not any(steps_with_gradients):
            raise CheckFailed(
                f"{what}: optimizer.step() found no gradients, so the weights did not move: the gradients were "
                "cleared before the step used them (zero_grad() between loss.backward() and optimizer.step()), "
                "or loss.backward() is missing. The order is zero_grad(), backward(), step().")
        if all(torch.equal(a, b) for a, b in zip(params, start.values())):
            raise CheckFailed(f"{what} did not change the weights: call optimizer.step() after loss.backward().")
        if same(trained(zero_grad=False)[1]):
            raise CheckFailed(
                f"{what}: the gradients accumulate from batch to batch: call optimizer.zero_grad() before "
                "loss.backward() (PyTorch adds new gradients to the old ones).")
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


def _peaked_vit(gen: torch.Generator, device: torch.device, patch_size: int = 2) -> nn.Module:
    """A digits ViT (2 blocks of 4 heads) with random weights drawn from ``gen``, the query-key-value weights
    large (std 1) so that its attention is peaked in both blocks and differs from block to block and from
    head to head: a map from the wrong block, a single head, a transposed grid or a shifted column is then
    far from the right one (a freshly initialised ViT attends almost uniformly, and a trained one may attend
    to almost nothing but itself). tests/test_checks.py measures how peaked: with all weights at std 0.3
    the last block's head-averaged [CLS] row was near uniform (at most 0.066 against 1/17 = 0.059)."""
    from ..models import create_model

    with torch.random.fork_rng(devices=[]):  # the notebook's random numbers stay as they were
        model = create_model("vit_digits_patch2_8", depth=2, num_heads=4, patch_size=patch_size)
    with torch.no_grad():
        for name, param in model.named_parameters():
            std = 1.0 if name.endswith("attn.qkv.weight") else 0.3
            param.copy_(torch.randn(param.shape, generator=gen) * std)
    return model.to(device).eval()


def check_cls_attention(cls_attention: Callable[..., Tensor], device=None) -> None:
    """Check ``cls_attention(model, images) -> (batch, grid, grid)``: the last block's attention from [CLS]
    (row 0) to the patches (columns 1...), averaged over the heads, in the patch grid's row-major layout.

    The model is the check's own (random, peaked attention), not the student's trained one, so that the check
    does not depend on the training run; each known mistake is named.
    """
    device, gen = resolve_device(device), torch.Generator().manual_seed(17)
    what = "cls_attention(model, images)"

    def run(patch_size: int, batch: int) -> None:
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
        })
        ref = layout(maps[-1, :, :, 0, 1:].mean(dim=1))
        diagnose(got, ref, [
            ("this is the first block's attention; take the last block's, maps[-1] (the [CLS] token that the "
             "head classifies is the output of the last block).", lambda: layout(maps[0, :, :, 0, 1:].mean(1))),
            ("this is head 0 only; average the [CLS] row over all the heads (.mean over the heads axis).",
             lambda: layout(maps[-1, :, 0, 0, 1:])),
            ("the grid is transposed: the patches are in row-major order (patch 1 is row 0, column 1), so a "
             "plain .reshape(batch, rows, columns) lays them out; do not transpose it.",
             lambda: layout(maps[-1, :, :, 0, 1:].mean(1)).transpose(-2, -1)),
            ("you kept the [CLS] column (column 0, its attention to itself) and dropped the last patch: the "
             "patches are columns 1 onwards, [..., 0, 1:].", lambda: layout(maps[-1, :, :, 0, :-1].mean(1))),
            ("this is the attention *to* [CLS] from each patch (column 0); [CLS]'s own attention is row 0: "
             "[..., 0, 1:].", lambda: layout(maps[-1, :, :, 1:, 0].mean(1))),
            ("the weights are renormalised over the patches (as vitedu.interpret.cls_attention and chapter 6 do, "
             "to compare maps on one scale); this part asks for them as the softmax gave them, not "
             "renormalised: their sum is below 1 by [CLS]'s attention to itself.",
             lambda: layout(maps[-1, :, :, 0, 1:].mean(1) / maps[-1, :, :, 0, 1:].mean(1).sum(-1, keepdim=True))),
        ], what, otherwise="Take maps[-1] (last block), row 0 ([CLS]), columns 1: (patches), the mean over heads.")

    run(2, 6)
    other_sizes("a 4x4 grid", "a 2x2 grid (4x4 patches)", lambda: run(4, 3))
    passed("check_cls_attention", "last block, [CLS] row, patch columns, mean over heads, row-major grid, "
           "not renormalised (on a model of the check's own whose random attention is peaked: in its last "
           "block [CLS]'s strongest patch gets 2 to 5 times the uniform share)")
