"""vitedu.probes: each probe finds its effect when it is planted, and nothing where it is absent."""

import numpy as np
import pytest
import torch

from vitedu import VisionTransformer, sincos_pos_embed_2d
from vitedu.probes import (
    attention_row_column,
    block_outputs,
    high_norm_tokens,
    position_distance_correlation,
    position_row_column,
    position_similarity,
    row_column_similarity,
    shared_limits,
    token_norms,
)

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: one thread, no waiting between cores


def _vit(**kwargs):
    torch.manual_seed(0)
    config = dict(img_size=32, patch_size=4, in_chans=1, num_classes=10, embed_dim=32, depth=4, num_heads=4)
    return VisionTransformer(**{**config, **kwargs}).eval()


def _images(batch=4):
    return torch.rand(batch, 1, 32, 32, generator=torch.Generator().manual_seed(1))


# --- 1. high-norm tokens ----------------------------------------------------------------------------------------


def test_token_norms_shape_and_agree_with_forward_features():
    model, images = _vit(), _images()
    outputs = block_outputs(model, images)
    assert outputs.shape == (4, 4, 65, 32)  # (blocks, batch, 1 + 8 * 8 tokens, dim)
    # The last block's output, through the final LayerNorm, is what forward_features returns.
    torch.testing.assert_close(model.norm(outputs[-1]), model.forward_features(images))
    norms = token_norms(model, images)
    assert norms.shape == (4, 4, 65)  # (blocks, batch, tokens)
    torch.testing.assert_close(norms, outputs.norm(dim=-1))
    assert not model.blocks[0]._forward_hooks, "token_norms must remove its hooks"


def test_random_model_has_no_high_norm_tokens():
    norms = token_norms(_vit(), _images(8))
    flags = high_norm_tokens(norms, num_prefix_tokens=1)
    assert flags.shape == norms.shape and flags.dtype == torch.bool
    assert not flags.any()


def test_planted_high_norm_token_is_flagged_from_its_block_on():
    model, images = _vit(), _images()
    planted_patch, planted_block = 5, 1
    push = torch.randn(32, generator=torch.Generator().manual_seed(2)) * 100

    def plant(module, inputs, output):  # a huge residual update from the MLP, on one background patch only
        output = output.clone()
        output[:, 1 + planted_patch] += push
        return output

    handle = model.blocks[planted_block].mlp.register_forward_hook(plant)
    try:
        flags = high_norm_tokens(token_norms(model, images), num_prefix_tokens=1)
    finally:
        handle.remove()
    expected = torch.zeros_like(flags)
    expected[planted_block:, :, 1 + planted_patch] = True  # it stays in the residual stream of later blocks
    assert torch.equal(flags, expected)


def test_high_norm_tokens_by_hand():
    norms = torch.tensor([[50.0, 1.0, 1.1, 0.9, 10.0, 2.9]])  # (batch, tokens); token 0 is [CLS]
    flags = high_norm_tokens(norms, factor=3.0, num_prefix_tokens=1)
    # median of the patches (1, 1.1, 0.9, 10, 2.9) is 1.1: only 10 is above 3.3; [CLS] is never flagged
    assert flags.tolist() == [[False, False, False, False, True, False]]
    assert high_norm_tokens(norms, factor=3.0).tolist() == [[True, False, False, False, True, False]]


def test_high_norm_errors_teach():
    with pytest.raises(ValueError, match="factor must be above 1"):
        high_norm_tokens(torch.ones(3, 5), factor=0.5)
    with pytest.raises(ValueError, match="num_prefix_tokens"):
        high_norm_tokens(torch.ones(3, 5), num_prefix_tokens=5)
    with pytest.raises(ValueError, match=r"\(batch, channels, H, W\).*unsqueeze"):
        token_norms(_vit(), torch.rand(1, 32, 32))
    with pytest.raises(TypeError, match="model.blocks"):
        token_norms(torch.nn.Linear(2, 2), _images())


# --- 2. rows versus columns at matched distances ----------------------------------------------------------------


def test_counts_per_distance_on_8x8_grid():
    result = row_column_similarity(torch.zeros(64, 64), 8)
    assert result["distance"].tolist() == list(range(1, 8))
    assert result["row_count"].tolist() == [8 * (8 - d) for d in range(1, 8)]
    assert result["column_count"].tolist() == [8 * (8 - d) for d in range(1, 8)]


def test_counts_and_distances_on_a_rectangular_grid():
    result = row_column_similarity(torch.zeros(2, 3, 12, 12), (3, 4))  # leading axes kept
    assert result["distance"].tolist() == [1, 2]  # only distances both a row and a column have
    assert result["row_count"].tolist() == [3 * 3, 3 * 2]
    assert result["column_count"].tolist() == [4 * 2, 4 * 1]
    assert result["row_mean"].shape == (2, 3, 2)


def test_embeddings_constant_along_rows_make_row_pairs_more_alike():
    # Each patch's embedding depends on its row only (plus a little column signal), so patches in one row are
    # (nearly) identical and patches in one column differ: row pairs must win at every distance.
    grid, dim = 8, 32
    generator = torch.Generator().manual_seed(3)
    by_row = torch.randn(grid, 1, dim, generator=generator).expand(grid, grid, dim)
    by_col = 0.2 * torch.randn(1, grid, dim, generator=generator).expand(grid, grid, dim)
    result = position_row_column((by_row + by_col).reshape(grid * grid, dim), grid)
    assert (result["row_mean"] > result["column_mean"] + 0.3).all()


def test_sincos_treats_rows_and_columns_alike():
    pos = sincos_pos_embed_2d(64, 8, num_prefix_tokens=1)  # (1, 65, 64), [CLS] first
    result = position_row_column(pos, 8, num_prefix_tokens=1)
    torch.testing.assert_close(result["row_mean"], result["column_mean"], atol=1e-6, rtol=0)
    assert (result["row_mean"].diff() < 0.01).all()  # and nearer pairs are at least about as alike


def test_row_column_matches_a_loop_and_symmetrises_attention():
    grid = (3, 4)
    values = torch.rand(12, 12, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    result = row_column_similarity(values, grid)
    for k, d in enumerate(result["distance"].tolist()):
        row = [(values[i, j] + values[j, i]) / 2 for i in range(12) for j in range(12)
               if i // 4 == j // 4 and j % 4 - i % 4 == d]
        col = [(values[i, j] + values[j, i]) / 2 for i in range(12) for j in range(12)
               if i % 4 == j % 4 and j // 4 - i // 4 == d]
        assert len(row) == result["row_count"][k] and len(col) == result["column_count"][k]
        torch.testing.assert_close(result["row_mean"][k], torch.stack(row).mean())
        torch.testing.assert_close(result["column_mean"][k], torch.stack(col).mean())


def test_attention_along_rows_is_detected():
    # Each query attends uniformly to the patches of its own row: row pairs get weight, column pairs none.
    grid = 4
    row_of = torch.arange(grid * grid) // grid
    attention = (row_of[:, None] == row_of[None, :]).double() / grid  # (patches, patches), rows sum to 1
    result = row_column_similarity(attention, grid)
    assert (result["row_mean"] == 1 / grid).all() and (result["column_mean"] == 0).all()


def test_attention_row_column_on_model_maps():
    # A real model's maps: shapes (depth, heads, D), and the [CLS] token dropped and rows renormalised, so a
    # query that looks only along its row (planted below, with weight on [CLS] too) gives column means of 0.
    model, images = _vit(), _images(2)
    maps = model.attention_maps(images)  # (depth, batch, heads, 65, 65)
    result = attention_row_column(maps, 8)
    assert result["row_mean"].shape == (4, 4, 7) and result["row_count"].tolist() == [8 * (8 - d) for d in range(1, 8)]
    row_of = torch.arange(64) // 8
    planted = torch.zeros(1, 1, 1, 65, 65)
    planted[..., 1:, 1:] = (row_of[:, None] == row_of[None, :]).float() / 16  # half of each query on its row
    planted[..., 1:, 0] = 0.5  # and half on [CLS]
    planted = attention_row_column(planted, 8)
    torch.testing.assert_close(planted["row_mean"][0, 0], torch.full((7,), 1 / 8, dtype=torch.float64))
    assert (planted["column_mean"] == 0).all()


def test_row_column_errors_teach():
    with pytest.raises(ValueError, match="unsqueeze"):
        attention_row_column(torch.zeros(1, 1, 65, 65), 8)
    with pytest.raises(ValueError, match="has 65"):
        attention_row_column(torch.zeros(1, 1, 1, 64, 64), 8)
    with pytest.raises(ValueError, match=r"Drop the prefix tokens"):
        row_column_similarity(torch.zeros(65, 65), 8)
    with pytest.raises(ValueError, match="needs 65"):
        position_row_column(torch.zeros(64, 16), 8, num_prefix_tokens=1)
    with pytest.raises(ValueError, match="pass grid_size"):
        position_row_column(torch.zeros(64, 16))


# --- 3. the similarity mosaic on one colour scale ---------------------------------------------------------------


def test_position_similarity_from_a_model_or_a_tensor():
    model = _vit(pos_embed="sincos")
    from_model = position_similarity(model)
    assert from_model.shape == (8, 8, 8, 8)
    torch.testing.assert_close(from_model, position_similarity(model.pos_embed, 8, num_prefix_tokens=1))
    torch.testing.assert_close(from_model[2, 3, 2, 3], torch.tensor(1.0, dtype=torch.float64))


def test_shared_limits_span_every_array_from_the_data():
    a, b = torch.tensor([[0.2, 0.5]]), np.array([0.4, 0.9, 0.3])
    assert shared_limits(a, b) == pytest.approx((0.2, 0.9))
    assert shared_limits(torch.tensor([-0.3, 0.1])) == pytest.approx((-0.3, 0.1))
    assert shared_limits(torch.tensor([-0.3, 0.1]), symmetric=True) == pytest.approx((-0.3, 0.3))
    assert shared_limits(torch.tensor([float("nan"), 0.5, 0.7])) == pytest.approx((0.5, 0.7))


def test_shared_limits_can_leave_out_self_similarity():
    sincos = position_similarity(sincos_pos_embed_2d(64, 8), 8)
    random = position_similarity(torch.randn(64, 64, generator=torch.Generator().manual_seed(5)), 8)
    low, high = shared_limits(sincos, random, include_self=False)
    off = ~torch.eye(64, dtype=torch.bool)
    both = torch.cat([sincos.reshape(64, 64)[off], random.reshape(64, 64)[off]])
    assert (low, high) == pytest.approx((float(both.min()), float(both.max())))
    assert high < 1 and shared_limits(sincos, random)[1] == pytest.approx(1.0)  # with self, vmax is 1


def test_shared_limits_errors_teach():
    with pytest.raises(ValueError, match="at least one"):
        shared_limits()
    with pytest.raises(ValueError, match="similarity mosaics"):
        shared_limits(torch.zeros(64, 64), include_self=False)


# --- 4. similarity against distance -----------------------------------------------------------------------------


def test_sincos_similarity_falls_with_distance():
    result = position_distance_correlation(sincos_pos_embed_2d(64, 8), 8)
    assert result["pairs"] == 64 * 63 // 2
    assert result["pearson"] < -0.8 and result["spearman"] < -0.8


def test_random_embeddings_do_not_correlate_with_distance():
    pos = torch.randn(64, 64, generator=torch.Generator().manual_seed(6))
    result = position_distance_correlation(pos, 8)
    assert abs(result["pearson"]) < 0.1 and abs(result["spearman"]) < 0.1


def _ranks_by_counting(x):
    """Average ranks from 0, ties sharing: (number below) + (number equal - 1) / 2, by brute force."""
    return (x[None, :] < x[:, None]).sum(1) + ((x[None, :] == x[:, None]).sum(1) - 1) / 2


def test_distance_correlation_against_numpy():
    pos = torch.randn(1, 17, 8, generator=torch.Generator().manual_seed(7))  # [CLS] + a 4x4 grid
    result = position_distance_correlation(pos, 4, num_prefix_tokens=1)
    patches = pos[0, 1:].double()
    unit = patches / patches.norm(dim=-1, keepdim=True)
    rows, cols = np.divmod(np.arange(16), 4)
    i, j = np.triu_indices(16, k=1)
    similarity = (unit @ unit.T).numpy()[i, j]
    distance = np.hypot(rows[i] - rows[j], cols[i] - cols[j])
    assert result["pearson"] == pytest.approx(np.corrcoef(similarity, distance)[0, 1])
    ranks = _ranks_by_counting(similarity), _ranks_by_counting(distance)  # distances tie a lot: 1, sqrt 2, ...
    assert result["spearman"] == pytest.approx(np.corrcoef(*ranks)[0, 1])
