"""The linear probe: how much of a digit's class a frozen encoder's tokens hold, read by a logistic regression.

    from vitedu.linear_probe import linear_probe
    encoder = vitedu.create_model("vit_cluttered_digits_mae", pretrained=True)
    linear_probe(encoder, n_labelled=1000, seed=0)

Frozen encoder features of n labelled *training* canvases, [CLS] or the mean of the patch tokens (both after the
encoder's final norm), standardised, into a multinomial logistic regression (full-batch L-BFGS); the pooling and
the L2 penalty are chosen on the 2,000 val canvases, and only the chosen probe reads the test canvases, once.
Chapter 10 compares an MAE encoder's probe with the same probe on the random encoder it started from.
"""

from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .cluttered import load_cluttered_digits, normalise_canvases

POOLS = ("cls", "mean")  # the probe's two feature choices
PROBE_WEIGHT_DECAYS = (0.0, 1e-4, 1e-3, 1e-2, 1e-1)  # the L2 penalties the probe chooses from on val


@torch.no_grad()
def pooled_features(encoder: nn.Module, images: Tensor, pools: tuple[str, ...] = POOLS) -> dict[str, Tensor]:
    """Frozen features, one encoder pass for every pooling asked: (N, 1, 32, 32) -> {pool: (N, embed_dim)},
    [CLS] ("cls") or the mean of the patch tokens ("mean"), both after the encoder's final norm."""
    unknown = [pool for pool in pools if pool not in POOLS]
    if unknown:
        raise ValueError(f"pool must be one of {POOLS}, got {unknown[0]!r}")
    encoder.eval()
    device = next(encoder.parameters()).device
    out: dict[str, list[Tensor]] = {pool: [] for pool in pools}
    for i in range(0, len(images), 500):
        tokens = encoder.forward_features(images[i:i + 500].to(device))  # (batch, 1 + patches, dim)
        for pool in pools:
            out[pool].append((tokens[:, 0] if pool == "cls" else tokens[:, 1:].mean(1)).cpu())
    return {pool: torch.cat(parts) for pool, parts in out.items()}


def features(encoder: nn.Module, images: Tensor, pool: str) -> Tensor:
    """Frozen features of one pooling: (N, 1, 32, 32) -> (N, embed_dim) (see ``pooled_features``)."""
    return pooled_features(encoder, images, (pool,))[pool]


def fit_logistic(x: Tensor, y: Tensor, weight_decay: float, num_classes: int = 10) -> nn.Linear:
    """Multinomial logistic regression on (N, dim) features by full-batch L-BFGS; L2 penalty ``weight_decay``."""
    torch.manual_seed(0)
    head = nn.Linear(x.shape[1], num_classes)
    optimizer = torch.optim.LBFGS(head.parameters(), lr=1.0, max_iter=200, line_search_fn="strong_wolfe")

    def closure() -> Tensor:
        optimizer.zero_grad()
        loss = F.cross_entropy(head(x), y) + weight_decay * head.weight.pow(2).sum()
        loss.backward()
        return loss

    optimizer.step(closure)
    return head


def probe_data(n_labelled: int, seed: int, position_step: int = 1, test: bool = True,
               ) -> dict[str, tuple[Tensor, Tensor]]:
    """Labelled canvases for the probe: n training canvases (drawn with ``seed``), the fixed val and test ones.
    ``test=False`` leaves test out: a recipe search (benchmarks/mae_sweep.py) never has it to read."""
    def normed(split: str, **kw) -> tuple[Tensor, Tensor]:
        images, labels, _ = load_cluttered_digits(split, position_step=position_step, **kw)
        return normalise_canvases(images), labels

    data = {"train": normed("train", num_images=n_labelled, seed=seed), "val": normed("val")}
    return data | {"test": normed("test")} if test else data


def probe_each_l2(f_train: Tensor, y_train: Tensor, f_val: Tensor, y_val: Tensor) -> list[tuple]:
    """One logistic regression per L2 penalty of ``PROBE_WEIGHT_DECAYS`` on features standardised with the
    training statistics. -> [(weight_decay, val_acc, head, mean, std)], in that order."""
    mean, std = f_train.mean(0), f_train.std(0).clamp(min=1e-6)
    fits = []
    for wd in PROBE_WEIGHT_DECAYS:
        head = fit_logistic((f_train - mean) / std, y_train, wd)
        with torch.no_grad():
            acc = (head((f_val - mean) / std).argmax(1) == y_val).float().mean().item()
        fits.append((wd, acc, head, mean, std))
    return fits


def linear_probe(encoder: nn.Module, n_labelled: int, seed: int,
                 data: Optional[dict[str, tuple[Tensor, Tensor]]] = None) -> dict:
    """Probe a frozen encoder: choose pooling and L2 penalty on val, then score the chosen probe on test once.

    Returns {"pool", "weight_decay", "val_acc", "test_acc", "val_grid": {"cls/0.001": acc, ...}}. ``data``
    (``probe_data``'s layout) defaults to ``probe_data(n_labelled, seed)``; ``data`` without "test" gives no
    "test_acc" (a choice among recipes is made on val alone).
    """
    data = probe_data(n_labelled, seed) if data is None else data
    (x_train, y_train), (x_val, y_val) = data["train"], data["val"]
    grid, best = {}, None
    f_train, f_val = pooled_features(encoder, x_train), pooled_features(encoder, x_val)  # one pass each
    for pool in POOLS:
        for wd, acc, head, mean, std in probe_each_l2(f_train[pool], y_train, f_val[pool], y_val):
            grid[f"{pool}/{wd:g}"] = round(acc, 4)
            if best is None or acc > best[0]:  # the first of equal scores is kept
                best = (acc, pool, wd, head, mean, std)
    acc, pool, wd, head, mean, std = best
    chosen = {"pool": pool, "weight_decay": wd, "val_acc": round(acc, 4), "val_grid": grid}
    if "test" not in data:
        return chosen
    x_test, y_test = data["test"]
    with torch.no_grad():
        test_acc = (head((features(encoder, x_test, pool) - mean) / std).argmax(1) == y_test).float().mean().item()
    return chosen | {"test_acc": round(test_acc, 4)}


__all__ = ["POOLS", "PROBE_WEIGHT_DECAYS", "features", "fit_logistic", "linear_probe", "pooled_features", "probe_data",
           "probe_each_l2"]
