"""Deletion and insertion curves (vitedu.faithfulness): checked on models whose answer is known by hand."""

import pytest
import torch
from torch import nn

from vitedu.faithfulness import curve_area, deletion_insertion_curves, gradient_times_input, patch_mask


class PatchSum(nn.Module):
    """logits = (sum of patch `which`'s pixels, 0): a linear model that only reads one 2x2 patch of a 4x4 image."""

    def __init__(self, which: int = 3) -> None:
        super().__init__()
        weight = torch.zeros(1, 1, 4, 4)
        row, col = divmod(which, 2)
        weight[..., 2 * row:2 * row + 2, 2 * col:2 * col + 2] = 1.0
        self.register_buffer("weight", weight)
        self.scale = nn.Parameter(torch.ones(()))

    def forward(self, x):
        read = (x * self.weight).sum(dim=(1, 2, 3)) * self.scale  # (batch,)
        return torch.stack([read, torch.zeros_like(read)], dim=1)  # (batch, 2)


def test_patch_mask_marks_the_pixels_of_the_first_patches_in_order():
    order = torch.tensor([[3, 0, 1, 2]])
    assert patch_mask(order, 0, (2, 2), 2).sum() == 0
    one = patch_mask(order, 1, (2, 2), 2)[0, 0]
    assert one.shape == (4, 4) and one[2:, 2:].eq(1).all() and one.sum() == 4  # patch 3: bottom right
    two = patch_mask(order, 2, (2, 2), 2)[0, 0]
    assert two[:2, :2].eq(1).all() and two.sum() == 8  # then patch 0: top left
    assert patch_mask(order, 4, (2, 2), 2).eq(1).all()


def test_curves_start_and_end_at_the_intact_and_the_blank_image():
    torch.manual_seed(0)
    model, images = PatchSum(), torch.rand(5, 1, 4, 4)
    labels = torch.zeros(5, dtype=torch.long)
    deleted, inserted = deletion_insertion_curves(model, images, labels, torch.rand(5, 4), 2, fill=-0.5)
    intact = torch.softmax(model(images), -1)[:, 0]
    blank = torch.softmax(model(torch.full_like(images, -0.5)), -1)[:, 0]
    assert deleted.shape == inserted.shape == (5, 5)
    torch.testing.assert_close(deleted[:, 0], intact)
    torch.testing.assert_close(inserted[:, -1], intact)
    torch.testing.assert_close(deleted[:, -1], blank)
    torch.testing.assert_close(inserted[:, 0], blank)


def test_the_right_ranking_moves_the_probability_at_the_first_patch_and_a_wrong_one_at_the_last():
    model, images = PatchSum(which=3), torch.ones(1, 1, 4, 4)
    labels = torch.zeros(1, dtype=torch.long)
    right = torch.tensor([[0.0, 0.1, 0.2, 0.9]])  # patch 3 first
    wrong = torch.tensor([[0.9, 0.5, 0.2, 0.0]])  # patch 3 last
    deleted_right, inserted_right = deletion_insertion_curves(model, images, labels, right, 2, fill=0.0)
    deleted_wrong, inserted_wrong = deletion_insertion_curves(model, images, labels, wrong, 2, fill=0.0)
    # Logits (4, 0) intact and (0, 0) blank: p = sigmoid(4) with patch 3 in, 1/2 without it.
    full, half = torch.sigmoid(torch.tensor(4.0)), torch.tensor(0.5)
    torch.testing.assert_close(deleted_right[0], torch.stack([full, half, half, half, half]))
    torch.testing.assert_close(deleted_wrong[0], torch.stack([full, full, full, full, half]))
    torch.testing.assert_close(inserted_right[0], torch.stack([half, full, full, full, full]))
    assert curve_area(deleted_right) < curve_area(deleted_wrong)
    assert curve_area(inserted_right) > curve_area(inserted_wrong)


def test_step_moves_several_patches_per_point_and_ties_keep_patch_order():
    model, images = PatchSum(which=1), torch.ones(1, 1, 4, 4)
    labels = torch.zeros(1, dtype=torch.long)
    deleted, _ = deletion_insertion_curves(model, images, labels, torch.zeros(1, 4), 2, fill=0.0, step=3)
    assert deleted.shape == (1, 3)  # after 0, 3 and 4 patches
    # Equal scores: patches 0, 1, 2 go first (stable order), so patch 1 is gone after the first step.
    torch.testing.assert_close(deleted[0, 1:], torch.tensor([0.5, 0.5]))


def test_curve_area_is_one_for_a_flat_curve_and_a_trapezoid_otherwise():
    torch.testing.assert_close(curve_area(torch.ones(2, 5)), torch.ones(2))
    torch.testing.assert_close(curve_area(torch.tensor([[1.0, 0.0, 0.0]])), torch.tensor([0.25]))


def test_gradient_times_input_is_exact_for_a_linear_model():
    """For a linear logit, gradient x (input - fill) summed over a patch is exactly what blanking it costs."""
    torch.manual_seed(1)
    model, images = PatchSum(which=2), torch.rand(3, 1, 4, 4)
    labels = torch.zeros(3, dtype=torch.long)
    scores = gradient_times_input(model, images, labels, 2, fill=-0.25)
    assert scores.shape == (3, 4)
    for patch in range(4):
        row, col = divmod(patch, 2)
        blanked = images.clone()
        blanked[..., 2 * row:2 * row + 2, 2 * col:2 * col + 2] = -0.25
        cost = model(images)[:, 0] - model(blanked)[:, 0]
        torch.testing.assert_close(scores[:, patch], cost.detach())
    assert scores[:, [0, 1, 3]].eq(0).all()  # the model reads patch 2 only


def test_wrong_shapes_say_what_was_expected():
    model, images, labels = PatchSum(), torch.ones(2, 1, 4, 4), torch.zeros(2, dtype=torch.long)
    with pytest.raises(ValueError, match=r"one score per patch, \(batch=2, 4\) for a 2x2 grid"):
        deletion_insertion_curves(model, images, labels, torch.zeros(2, 16), 2, fill=0.0)
    with pytest.raises(ValueError, match="at least 1"):
        deletion_insertion_curves(model, images, labels, torch.zeros(2, 4), 2, fill=0.0, step=0)


def test_explicit_points_give_the_same_curves_and_areas_as_even_steps():
    torch.manual_seed(1)
    model, images = PatchSum(which=2), torch.rand(3, 1, 4, 4)
    labels, scores = torch.zeros(3, dtype=torch.long), torch.rand(3, 4)
    even = deletion_insertion_curves(model, images, labels, scores, 2, fill=0.0, step=1)
    listed = deletion_insertion_curves(model, images, labels, scores, 2, fill=0.0, kept=(0, 1, 2, 3, 4))
    for a, b in zip(even, listed):
        torch.testing.assert_close(a, b)
        torch.testing.assert_close(curve_area(a), curve_area(b, kept=(0, 1, 2, 3, 4)))
    uneven = deletion_insertion_curves(model, images, labels, scores, 2, fill=0.0, kept=(0, 1, 4))
    torch.testing.assert_close(uneven[0], even[0][:, [0, 1, 4]])  # the chosen columns of the full curve
    # Trapezoids on x = 0, 1/4, 1: a curve (1, 0, 0) has area 1/8, not the 1/4 of evenly spaced points.
    torch.testing.assert_close(curve_area(torch.tensor([[1.0, 0.0, 0.0]]), kept=(0, 1, 4)), torch.tensor([0.125]))


@pytest.mark.parametrize("kept", [(1, 2, 4), (0, 2, 3), (0, 2, 2, 4)])
def test_explicit_points_must_start_at_0_end_at_all_patches_and_increase(kept):
    model, images = PatchSum(), torch.rand(1, 1, 4, 4)
    with pytest.raises(ValueError, match="kept must start at 0"):
        deletion_insertion_curves(model, images, torch.zeros(1, dtype=torch.long), torch.rand(1, 4), 2, 0.0,
                                  kept=kept)


def test_curve_area_refuses_points_that_do_not_match_the_curve():
    with pytest.raises(ValueError, match="pass the same kept"):
        curve_area(torch.ones(2, 5), kept=(0, 2, 4))


class Counting(nn.Module):
    """Wraps a model and counts the images it is shown."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model, self.seen = model, 0

    def forward(self, x):
        self.seen += len(x)
        return self.model(x)


def test_several_rankings_at_once_give_each_ranking_s_own_curves():
    torch.manual_seed(2)
    model, images = PatchSum(which=2), torch.rand(3, 1, 4, 4)
    labels, scores = torch.zeros(3, dtype=torch.long), torch.rand(4, 3, 4)  # 4 rankings of 3 images
    deleted, inserted = deletion_insertion_curves(model, images, labels, scores, 2, fill=0.0, kept=(0, 1, 3, 4))
    assert deleted.shape == inserted.shape == (4, 3, 4)
    for ranking in range(4):
        alone = deletion_insertion_curves(model, images, labels, scores[ranking], 2, fill=0.0, kept=(0, 1, 3, 4))
        torch.testing.assert_close(deleted[ranking], alone[0], rtol=0, atol=0)
        torch.testing.assert_close(inserted[ranking], alone[1], rtol=0, atol=0)


def test_each_distinct_canvas_goes_through_the_model_once():
    torch.manual_seed(3)
    images, labels = torch.rand(3, 1, 4, 4), torch.zeros(3, dtype=torch.long)
    # One ranking, 5 points, 2 curves: 10 canvases per image, but the intact image (deletion's first point,
    # insertion's last) and the blank canvas (deletion's last, insertion's first) are one canvas each: 8.
    model = Counting(PatchSum(which=2))
    deletion_insertion_curves(model, images, labels, torch.rand(3, 4), 2, fill=-0.5)
    assert model.seen == 3 * 8
    # Patch 0 is background (every pixel at fill): blanking or keeping it gives the same canvas, so 4 rankings
    # of 3 patches that can differ show each image in at most 2**3 ways, not 4 * 10.
    images[:, :, :2, :2] = -0.5
    scores = torch.rand(4, 3, 4)
    model = Counting(PatchSum(which=2))
    shared = deletion_insertion_curves(model, images, labels, scores, 2, fill=-0.5)
    assert model.seen <= 3 * 2**3
    plain = PatchSum(which=2)
    for ranking in range(4):  # the same curves as computed canvas by canvas
        order = scores[ranking].argsort(dim=1, descending=True, stable=True)
        for k in range(5):
            mask = patch_mask(order, k, (2, 2), 2)
            deleted = torch.softmax(plain(images * (1 - mask) - 0.5 * mask), -1)[:, 0]
            inserted = torch.softmax(plain(images * mask - 0.5 * (1 - mask)), -1)[:, 0]
            torch.testing.assert_close(shared[0][ranking, :, k], deleted)
            torch.testing.assert_close(shared[1][ranking, :, k], inserted)
