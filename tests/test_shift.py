"""Accuracy against the digit's sub-patch offset (vitedu.shift), and the stored on-grid ViT it was built to expose."""

import importlib.util
from pathlib import Path

import pytest
import torch
from torch import nn

from vitedu.cluttered import load_cluttered_digits, make_cluttered
from vitedu.shift import offset_accuracy

ROOT = Path(__file__).resolve().parent.parent


class Oracle(nn.Module):
    """Knows the answer only where the digit's cell starts on the 4-pixel grid: reads the labels it was given
    for the on-grid canvases (by matching the canvas), and answers 0 elsewhere."""

    def __init__(self, images: torch.Tensor, labels: torch.Tensor) -> None:
        super().__init__()
        self.keys = {hash(x.numpy().tobytes()): int(y) for x, y in zip(images, labels)}
        self.dummy = nn.Parameter(torch.zeros(()))

    def forward(self, x):
        out = torch.zeros(len(x), 10)
        for i, image in enumerate(x):
            out[i, self.keys.get(hash(image.numpy().tobytes()), 0)] = 1.0
        return out


def test_offset_accuracy_reads_each_offset_from_its_own_canvases():
    from vitedu.constants import CLUTTERED_MEAN, CLUTTERED_STD

    images, labels, _ = load_cluttered_digits("val", 50, seed=1, position_step=4, position_offset=(0, 0))
    model = Oracle((images - CLUTTERED_MEAN[0]) / CLUTTERED_STD[0], labels)
    acc = offset_accuracy(model, patch_size=4, split="val", num_images=50, seed=1)
    assert acc.shape == (4, 4) and acc[0, 0] == 1.0
    # Elsewhere the oracle answers 0: its accuracy is the share of zeros among the labels of those canvases.
    for r, c in [(0, 1), (3, 2)]:
        _, other, _ = load_cluttered_digits("val", 50, seed=1, position_step=4, position_offset=(r, c))
        assert acc[r, c].item() == pytest.approx((other == 0).float().mean().item())


def test_offset_canvases_put_the_cell_at_offset_plus_multiples_of_the_step():
    # Digits inked to their edges and no clutter: the ink box is the 8x8 cell itself.
    digits, labels = torch.ones(2, 1, 8, 8), torch.tensor([0, 1])
    for offset in [(0, 0), (1, 3), (3, 2)]:
        _, _, boxes = make_cluttered(digits, labels, 500, torch.Generator().manual_seed(0), num_fragments=0,
                                     position_step=4, position_offset=offset)
        tops, lefts = boxes[:, 0], boxes[:, 1]
        assert ((tops - offset[0]) % 4 == 0).all() and ((lefts - offset[1]) % 4 == 0).all()
        assert tops.min() == offset[0] and lefts.min() == offset[1]  # from the first grid position
        assert tops.max() + 8 <= 32 and (tops.max() + 4 + 8 > 32)  # to the last one that fits
    with pytest.raises(ValueError, match="position_offset must leave room"):
        load_cluttered_digits("test", 10, position_offset=(25, 0))
    with pytest.raises(ValueError, match="positive number of pixels"):
        offset_accuracy(nn.Linear(1, 1), patch_size=0)


def _bench():
    spec = importlib.util.spec_from_file_location("shift_bench", ROOT / "benchmarks" / "shift.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench


def test_the_benchmark_summarises_on_grid_and_off_grid_offsets_over_seeds():
    perfect, on_grid_only = torch.ones(4, 4), torch.full((4, 4), 0.1)
    on_grid_only[0, 0], on_grid_only[3, 1] = 0.9, 0.05  # (3, 1): the worst off-grid offset
    summary = _bench().summarise([perfect, on_grid_only])
    assert summary["on_grid"] == pytest.approx((0.95, 0.0707), abs=1e-4)  # (mean, std) over the two seeds
    assert summary["worst_off_grid"] == pytest.approx((0.525, 0.6718), abs=1e-4)
    assert summary["mean_off_grid"][0] == pytest.approx((1.0 + (14 * 0.1 + 0.05) / 15) / 2, abs=1e-4)


def test_the_stored_on_grid_cnn_reads_even_shifts_as_on_the_grid():
    """The CNN of the shift experiment (three seeds, trained on the grid): a convolution shares its weights
    across positions, so a shift by an even number of pixels (the stride of its one max-pool) reads like the
    grid; odd shifts cost it more or less by seed, but it stays far above the on-grid ViT's 9-42 %."""
    bench = _bench()
    models, config = bench.seed_pack(bench.CNN_GRID, bench.cnn)
    assert len(models) == 3 and config["position_step"] == 4
    for model in models:
        # channels-last weights: oneDNN's faster convolutions, the same predictions (about 20 % less CPU)
        model = model.to(memory_format=torch.channels_last)
        acc = offset_accuracy(model, patch_size=4, split="val", num_images=100, seed=1)
        assert acc[0::2, 0::2].min() > 0.9  # (0, 0), (0, 2), (2, 0), (2, 2)
        assert acc.min() > 0.45  # the worst odd shift of the weakest seed: about 0.6 on the test canvases


def test_the_stored_on_grid_vit_reads_the_digit_on_the_grid_only():
    """The artefact of the shift experiment: the ViT trained with the digit on the patch grid (three seeds)."""
    bench = _bench()
    models, config = bench.seed_pack(bench.VIT_GRID, bench.vit)
    assert len(models) == 3 and config.get("position_step", 4) == 4
    # 100 canvases per offset (1,600 in all, 2 s on one thread; 200 took 5 s): 95 % on the grid, 37 % at most off it
    acc = offset_accuracy(models[0], patch_size=4, split="val", num_images=100, seed=1)
    assert acc[0, 0] > 0.9  # on the grid, as trained
    assert acc.flatten()[1:].max() < 0.6  # every other sub-patch shift loses most of it


def test_the_shipped_seeds_read_the_digit_at_every_shift():
    """The shipped recipe's three seeds, trained with the digit anywhere, read it at every sub-patch
    shift (97.4-97.6 % at the worst offset on 1,000 test canvases each; here 100 val canvases per offset)."""
    bench = _bench()
    models, config = bench.seed_pack(bench.VIT_ANYWHERE, bench.vit)
    assert len(models) == 3 and config["position_step"] == 1 and config["grid_epochs"] > 0
    acc = offset_accuracy(models[0], patch_size=4, split="val", num_images=100, seed=1)
    assert acc.min() > 0.9 and acc.mean() > 0.95
