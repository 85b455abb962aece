"""vitedu.interpret against hand-computed cases and independent references (numpy eigh for PCA)."""

import math

import numpy as np
import pytest
import torch

from vitedu import VisionTransformer
from vitedu.interpret import (
    attention_rollout,
    box_coverage,
    cls_attention,
    mass_in_boxes,
    mean_attention_distance,
    patch_distances,
    patch_embed_components,
    pos_embed_similarity,
    show_overlay,
    token_map_to_image,
)


def _maps(*layers):
    """Single-image, single-head maps from a list of (tokens, tokens) matrices: (depth, 1, 1, T, T)."""
    return torch.stack([torch.tensor(m, dtype=torch.float64) for m in layers])[:, None, None]


# --- attention rollout ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("residual", [True, False])
@pytest.mark.parametrize("fusion", ["mean", "max", "min"])
def test_rollout_of_identity_attention_is_identity(residual, fusion):
    maps = torch.eye(5).expand(3, 2, 4, 5, 5)  # (depth, batch, heads, tokens, tokens)
    rollout = attention_rollout(maps, head_fusion=fusion, residual=residual)
    assert rollout.shape == (2, 5, 5)
    torch.testing.assert_close(rollout, torch.eye(5).expand(2, 5, 5))


def test_rollout_multiplies_later_layers_on_the_left():
    # Layer 1: everyone reads token 0. Layer 2: everyone reads token 1, which by then holds token 0.
    first, second = [[1, 0], [1, 0]], [[0, 1], [0, 1]]
    rollout = attention_rollout(_maps(first, second), residual=False)[0]
    torch.testing.assert_close(rollout, torch.tensor([[1.0, 0.0], [1.0, 0.0]], dtype=torch.float64))


def test_rollout_residual_halves_the_attention():
    swap = [[0, 1], [1, 0]]
    # Without the residual, swapping twice is the identity; with it, (swap + I) / 2 is all 0.5.
    torch.testing.assert_close(attention_rollout(_maps(swap, swap), residual=False)[0], torch.eye(2).double())
    torch.testing.assert_close(attention_rollout(_maps(swap, swap))[0], torch.full((2, 2), 0.5).double())
    # One layer, by hand: A = [[0.2, 0.8], [0.6, 0.4]] -> (A + I) / 2 = [[0.6, 0.4], [0.3, 0.7]].
    one = attention_rollout(_maps([[0.2, 0.8], [0.6, 0.4]]))[0]
    torch.testing.assert_close(one, torch.tensor([[0.6, 0.4], [0.3, 0.7]], dtype=torch.float64))


def test_rollout_head_fusion_by_hand():
    heads = torch.tensor([[[1.0, 0.0], [0.0, 1.0]], [[0.2, 0.8], [0.6, 0.4]]])[None, None]  # (1, 1, 2, 2, 2)
    mean = attention_rollout(heads, "mean", residual=False)[0]
    torch.testing.assert_close(mean, torch.tensor([[0.6, 0.4], [0.3, 0.7]]))
    top = attention_rollout(heads, "max", residual=False)[0]  # max = [[1, .8], [.6, 1]], renormalised
    torch.testing.assert_close(top, torch.tensor([[1 / 1.8, 0.8 / 1.8], [0.6 / 1.6, 1 / 1.6]]))


def test_rollout_rows_of_a_real_model_sum_to_one():
    model = VisionTransformer(img_size=16, patch_size=4, in_chans=1, embed_dim=32, depth=3, num_heads=2).eval()
    maps = model.attention_maps(torch.randn(2, 1, 16, 16))
    rollout = attention_rollout(maps)
    assert rollout.shape == (2, 17, 17)
    torch.testing.assert_close(rollout.sum(-1), torch.ones(2, 17))


def test_rollout_explains_bad_input():
    with pytest.raises(ValueError, match=r"\(depth, batch, heads, tokens, tokens\).*unsqueeze\(0\)"):
        attention_rollout(torch.rand(2, 3, 5, 5))
    with pytest.raises(ValueError, match="head_fusion must be one of"):
        attention_rollout(torch.rand(1, 2, 3, 5, 5), head_fusion="median")
    with pytest.raises(TypeError, match="torch.Tensor"):
        attention_rollout(np.ones((1, 1, 1, 2, 2)))


# --- mean attention distance ----------------------------------------------------------------------------------


def test_patch_distances_on_a_2x2_grid():
    d = patch_distances(2, patch_size=16)
    s = 16 * math.sqrt(2)
    expected = torch.tensor([[0, 16, 16, s], [16, 0, s, 16], [16, s, 0, 16], [s, 16, 16, 0]])
    torch.testing.assert_close(d, expected)


def test_attention_that_stays_on_itself_has_distance_zero():
    maps = torch.eye(1 + 16).expand(2, 3, 4, 17, 17)  # [CLS] + a 4x4 grid
    distance = mean_attention_distance(maps, grid_size=4, patch_size=8, num_prefix_tokens=1)
    assert distance.shape == (2, 4)
    torch.testing.assert_close(distance, torch.zeros(2, 4))


def test_mean_attention_distance_on_a_2x2_grid_by_hand():
    p = 16
    uniform = torch.full((4, 4), 0.25)  # every patch spreads evenly: (0 + p + p + p*sqrt(2)) / 4
    right = torch.tensor([[0, 1, 0, 0], [1, 0, 0, 0], [0, 0, 0, 1], [0, 0, 1, 0]]).float()  # neighbour, p px
    diagonal = torch.tensor([[0, 0, 0, 1], [0, 0, 1, 0], [0, 1, 0, 0], [1, 0, 0, 0]]).float()  # p*sqrt(2) px
    # Layer 1: heads (uniform, right); layer 2: heads (diagonal, half self half right).
    half = 0.5 * torch.eye(4) + 0.5 * right
    patches = torch.stack([torch.stack([uniform, right]), torch.stack([diagonal, half])])  # (2, 2, 4, 4)
    # Put [CLS] in front and let every patch give it 0.4 of its attention: renormalisation removes it.
    maps = torch.zeros(2, 1, 2, 5, 5)
    maps[..., 0, :] = 0.2
    maps[..., 1:, 0] = 0.4
    maps[..., 1:, 1:] = 0.6 * patches[:, None]
    distance = mean_attention_distance(maps, grid_size=(2, 2), patch_size=p, num_prefix_tokens=1)
    expected = torch.tensor([[(2 * p + p * math.sqrt(2)) / 4, p], [p * math.sqrt(2), p / 2]])
    torch.testing.assert_close(distance, expected)


def test_mean_attention_distance_explains_a_wrong_grid():
    with pytest.raises(ValueError, match="17 tokens.*3x3 grid.*1 prefix"):
        mean_attention_distance(torch.rand(1, 1, 1, 17, 17), grid_size=3, patch_size=4)


# --- position-embedding similarity ----------------------------------------------------------------------------


def test_pos_embed_similarity_of_a_hand_made_embedding():
    model = VisionTransformer(img_size=8, patch_size=4, in_chans=1, embed_dim=3, depth=1, num_heads=1)
    with torch.no_grad():  # [CLS], then patches (0,0) (0,1) (1,0) (1,1)
        model.pos_embed.copy_(torch.tensor([[[9, 9, 9], [1, 0, 0], [3, 0, 0], [0, 1, 1], [0, -2, -2]]]))
    sim = pos_embed_similarity(model)
    assert sim.shape == (2, 2, 2, 2)
    expected = torch.tensor([[1, 1, 0, 0], [1, 1, 0, 0], [0, 0, 1, -1], [0, 0, -1, 1]]).float()
    torch.testing.assert_close(sim.reshape(4, 4), expected)


def test_pos_embed_similarity_wants_a_vit():
    with pytest.raises(TypeError, match="VisionTransformer.*without 'pos_embed'"):
        pos_embed_similarity(torch.nn.Linear(2, 2))


# --- principal components of the patch-embedding filters -----------------------------------------------------


def test_components_of_a_known_case():
    # Filters = mean + a_i u + b_i v with u, v orthonormal 2x2 patterns and var(a) > var(b) > 0.
    u = torch.tensor([1.0, 1.0, 1.0, 1.0]) / 2
    v = torch.tensor([1.0, -1.0, 1.0, -1.0]) / 2
    a, b = torch.tensor([3.0, -3.0, 3.0, -3.0]), torch.tensor([1.0, 1.0, -1.0, -1.0])
    filters = torch.tensor([0.5, 0.0, -0.5, 2.0]) + a[:, None] * u + b[:, None] * v  # (dim=4, 4)
    components, ratio = patch_embed_components(filters.reshape(4, 1, 2, 2), num_components=2)
    assert components.shape == (2, 1, 2, 2)
    torch.testing.assert_close(components.reshape(2, 4), torch.stack([u, v]))  # signs: largest entry > 0
    torch.testing.assert_close(ratio, torch.tensor([0.9, 0.1]))  # variances 9 and 1


def test_components_match_the_eigenvectors_of_the_covariance():
    weight = torch.randn(32, 3, 4, 4, dtype=torch.float64) * torch.linspace(0.1, 2, 48).reshape(1, 3, 4, 4)
    components, ratio = patch_embed_components(weight, num_components=5)
    x = weight.reshape(32, -1).numpy()
    eigenvalues, eigenvectors = np.linalg.eigh(np.cov(x, rowvar=False))  # ascending
    reference = torch.from_numpy(eigenvectors[:, ::-1][:, :5].T.copy())
    ours = components.reshape(5, -1)
    torch.testing.assert_close(ours.abs(), reference.abs())
    torch.testing.assert_close((ours * reference).sum(-1).abs(), torch.ones(5, dtype=torch.float64))
    torch.testing.assert_close(ratio, torch.from_numpy(eigenvalues[::-1][:5] / eigenvalues.sum()))


def test_components_take_a_model_and_check_their_number():
    model = VisionTransformer(img_size=8, patch_size=4, in_chans=1, embed_dim=8, depth=1, num_heads=1)
    components, ratio = patch_embed_components(model)
    assert components.shape == (8, 1, 4, 4) and ratio.shape == (8,)
    with pytest.raises(ValueError, match="between 1 and 8"):
        patch_embed_components(model, num_components=9)


# --- [CLS] maps as images, and the share on a box -------------------------------------------------------------


def test_cls_attention_drops_prefix_and_renormalises():
    attn = torch.tensor([[[0.5, 0.1, 0.3, 0.1, 0.0]] * 5])  # (1, 5, 5): [CLS] gives half to itself
    torch.testing.assert_close(cls_attention(attn), torch.tensor([[0.2, 0.6, 0.2, 0.0]]))
    with pytest.raises(ValueError, match="needs a \\[CLS\\] token"):
        cls_attention(attn, num_prefix_tokens=0)


def test_token_map_to_image_fills_each_patch():
    image = token_map_to_image(torch.tensor([[1.0, 2.0, 3.0, 4.0]]), grid_size=2, patch_size=2)
    expected = torch.tensor([[[1, 1, 2, 2], [1, 1, 2, 2], [3, 3, 4, 4], [3, 3, 4, 4]]]).float()
    torch.testing.assert_close(image, expected)
    with pytest.raises(ValueError, match="expected 4 values.*got 5"):
        token_map_to_image(torch.ones(1, 5), grid_size=2, patch_size=2)


def test_mass_in_boxes_by_hand():
    uniform = torch.full((3, 16), 1 / 16)  # a 4x4 grid of 4x4-pixel patches: a 16x16 image
    boxes = torch.tensor([[0, 0, 4, 4], [2, 2, 8, 6], [0, 0, 16, 16]])
    torch.testing.assert_close(mass_in_boxes(uniform, boxes, 4, 4), torch.tensor([16, 48, 256]) / 256)
    one_patch = torch.zeros(3, 16)
    one_patch[:, 5] = 1.0  # patch (1, 1): pixels 4-7 x 4-7; inside the second box (rows 2-9, columns 2-7)
    torch.testing.assert_close(mass_in_boxes(one_patch, boxes, 4, 4), torch.tensor([0.0, 1.0, 1.0]))
    half = torch.tensor([[0, 0, 4, 2]])  # covers the left half of patch (0, 0)
    torch.testing.assert_close(mass_in_boxes(torch.eye(16)[:1], half, 4, 4), torch.tensor([0.5]))
    with pytest.raises(ValueError, match="one box per image"):
        mass_in_boxes(uniform, boxes[:2], 4, 4)


def test_box_coverage_by_hand():
    boxes = torch.tensor([[2, 2, 8, 6], [0, 0, 4, 2]])  # on a 4x4 grid of 4x4-pixel patches
    cover = box_coverage(boxes, 4, 4).reshape(2, 4, 4)
    # Box 1 spans rows 2-9 and columns 2-7: patch rows 0 and 2 half inside, row 1 fully; columns 0 half, 1 fully.
    expected = torch.zeros(4, 4)
    expected[:3, :2] = torch.tensor([[0.25, 0.5], [0.5, 1.0], [0.25, 0.5]])
    torch.testing.assert_close(cover[0], expected)
    assert cover[1, 0, 0] == 0.5 and cover[1].sum() == 0.5  # the left half of patch (0, 0) only
    # Every row of an attention map at once: the share of each query's attention on the box.
    maps = torch.softmax(torch.randn(2, 16, 16), dim=-1)  # (batch, queries, keys)
    per_query = (maps * box_coverage(boxes, 4, 4)[:, None, :]).sum(-1)  # (batch, queries)
    by_rows = mass_in_boxes(maps.flatten(0, 1), boxes.repeat_interleave(16, dim=0), 4, 4).reshape(2, 16)
    torch.testing.assert_close(per_query, by_rows)
    with pytest.raises(ValueError, match=r"\(batch, 4\)"):
        box_coverage(torch.tensor([1, 2, 3, 4]), 4, 4)


def test_show_overlay_draws_heat_over_a_grey_image_on_a_scale_from_zero():
    """The grey image, then the heat map on top (inferno, see-through, from 0 to vmax or to its own maximum), titled,
    without axes; the returned image is the heat map's, for a colour bar; sizes must agree."""
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    image, heat = torch.rand(1, 4, 6), torch.rand(4, 6) * 3  # not square: height and width must not swap
    shown = show_overlay(ax, image, heat, title="rollout")
    grey, top = ax.get_images()
    assert top is shown and grey.get_cmap().name == "gray" and shown.get_cmap().name == "inferno"
    assert torch.equal(torch.as_tensor(grey.get_array()), image[0])
    assert torch.equal(torch.as_tensor(shown.get_array()), heat)
    assert shown.get_alpha() == 0.6 and shown.get_clim() == (0.0, pytest.approx(heat.max().item()))
    assert ax.get_title() == "rollout" and not ax.axison
    fixed = show_overlay(ax, image[0], heat, vmax=5.0, alpha=0.3)
    assert fixed.get_clim() == (0.0, 5.0) and fixed.get_alpha() == 0.3 and ax.get_title() == ""
    with pytest.raises(ValueError, match="same size"):
        show_overlay(ax, image, heat[:2])
    plt.close(fig)


def test_interpretation_inputs_are_checked_and_read_as_documented():
    """Rollout refuses non-square maps and fuses heads by their minimum when asked; cls_attention reads row 0 (the
    [CLS] query) of 3-D or 4-D attention and renormalises each map on its own; mass_in_boxes is a share, so it does
    not change when the map is scaled, and it wants one 2-D box per image; patch_embed_components accepts k = 1
    and only 4-D weights."""
    with pytest.raises(ValueError):
        attention_rollout(torch.rand(1, 1, 1, 3, 4))
    torch.manual_seed(0)
    maps = torch.rand(1, 2, 3, 4, 4, dtype=torch.float64)  # depth 1, batch 2, 3 heads, 4 tokens
    fused = maps[0].amin(dim=1)
    torch.testing.assert_close(attention_rollout(maps, head_fusion="min", residual=False),
                               fused / fused.sum(dim=-1, keepdim=True))
    attention = torch.rand(2, 3, 5, 5, dtype=torch.float64)  # (batch, heads, tokens, tokens)
    expected = attention[..., 0, 1:] / attention[..., 0, 1:].sum(dim=-1, keepdim=True)
    torch.testing.assert_close(cls_attention(attention), expected)
    torch.testing.assert_close(cls_attention(attention[:, 0]), expected[:, 0])
    values, boxes = torch.rand(4, 4), torch.tensor([[0, 0, 4, 4]] * 4)
    torch.testing.assert_close(mass_in_boxes(10 * values, boxes, 2, 4), mass_in_boxes(values, boxes, 2, 4))
    with pytest.raises(ValueError, match="one box per image"):
        mass_in_boxes(values, boxes[0], 2, 4)
    weight = torch.randn(6, 1, 2, 2)
    components, ratios = patch_embed_components(weight, 1)
    assert components.shape == (1, 1, 2, 2) and ratios.shape == (1,)
    with pytest.raises((ValueError, TypeError)):
        patch_embed_components(weight[0])
