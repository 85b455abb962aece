"""benchmarks/baselines.py, chapter 8's baselines beside chance: its features on canvases whose answer is known,
and the stored results it wrote (every baseline present, each setting chosen on validation alone)."""

import importlib.util
import json
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("baselines", ROOT / "benchmarks" / "baselines.py")
B = importlib.util.module_from_spec(spec)
spec.loader.exec_module(B)
STORED = ROOT / "vitedu" / "assets" / "cluttered_baselines.json"
BASELINES = ("chance (majority class)", "logistic regression, raw pixels", "logistic regression, ink per 4x4 patch",
             "bag of 4x4 patches, no positions")


def test_ink_per_patch_sums_each_grid_patch():
    canvas = torch.zeros(2, 1, 32, 32)
    canvas[0, 0, 8:12, 20:24] = 1.0  # the whole patch at grid row 2, column 5: token 2 * 8 + 5 = 21
    canvas[1, 0, 31, 0] = 0.5  # one pixel of the bottom-left patch: token 7 * 8 + 0 = 56
    ink = B.ink_per_patch(canvas)
    assert ink.shape == (2, 64)
    expected = torch.zeros(2, 64)
    expected[0, 21], expected[1, 56] = 16.0, 0.5
    torch.testing.assert_close(ink, expected)
    images = torch.rand(3, 1, 32, 32)  # against a plain loop over the grid
    loop = torch.stack([images[:, 0, 4 * r:4 * r + 4, 4 * c:4 * c + 4].sum((1, 2)) for r in range(8) for c in range(8)],
                       dim=1)
    torch.testing.assert_close(B.ink_per_patch(images), loop)


def test_ink_per_patch_rejects_a_canvas_off_the_grid():
    with pytest.raises(ValueError, match="multiples of patch_size"):
        B.ink_per_patch(torch.zeros(1, 1, 30, 30))


def test_bag_of_patches_ignores_where_the_patches_are():
    # Shuffle the 64 grid patches of a canvas: the on-grid bag (stride 4) must not change, the canvas does.
    torch.manual_seed(0)
    images = (torch.rand(2, 1, 32, 32) > 0.7).float()
    blocks = images.view(2, 1, 8, 4, 8, 4).permute(0, 1, 2, 4, 3, 5).reshape(2, 64, 4, 4)
    shuffled = blocks[:, torch.randperm(64)].view(2, 1, 8, 8, 4, 4).permute(0, 1, 2, 4, 3, 5).reshape(2, 1, 32, 32)
    assert not torch.equal(shuffled, images)
    centres = torch.rand(20, 16)
    bags = B.bag_of_patches(torch.cat([images, shuffled]), centres, stride=4)
    assert bags.shape == (4, 20)
    assert bags.sum(1) == pytest.approx([1.0] * 4)  # frequencies
    assert bags[:2] == pytest.approx(bags[2:])


def test_nearest_finds_the_closest_centre():
    centres = torch.tensor([[0.0, 0.0], [1.0, 1.0], [5.0, 0.0]])
    x = torch.tensor([[0.1, -0.1], [0.9, 1.3], [4.0, 0.5], [0.4, 0.4]])
    assert B.nearest(x, centres).tolist() == [0, 1, 2, 0]


@pytest.fixture(scope="module")
def stored():
    assert STORED.exists(), "run: python benchmarks/baselines.py"
    return json.loads(STORED.read_text())


def test_every_baseline_is_stored_on_the_honest_task(stored):
    assert stored["task"]["position_step"] == 1
    assert stored["task"]["num_val"] == 2_000 and stored["task"]["num_test"] == 2_000
    assert set(stored["baselines"]) == set(BASELINES)


@pytest.mark.parametrize("name", BASELINES)
def test_each_setting_was_chosen_on_validation(stored, name):
    row = stored["baselines"][name]
    best = max(row["tried"], key=lambda t: t["val_accuracy"])  # the first of the best, as the script keeps
    assert row["chosen"] == best["setting"]
    assert row["val_accuracy"] == best["val_accuracy"]
    assert all(0.0 <= t["val_accuracy"] <= 1.0 for t in row["tried"])
    assert 0.0 <= row["test_accuracy"] <= 1.0
    assert row["fit_seconds"] >= 0.0
    if name != "chance (majority class)":
        assert len(row["tried"]) > 1  # something was chosen
