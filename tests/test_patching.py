"""Patches and positions: exact round trips, the Conv2d = Linear identity, position resampling."""

import pytest
import torch
import torch.nn.functional as F

from vitedu.patching import (
    PatchEmbedding,
    learned_pos_embed,
    patchify,
    resample_pos_embed,
    sincos_pos_embed_2d,
    unpatchify,
)


def test_patchify_row_major_and_roundtrip(device):
    images = torch.randn(2, 3, 12, 16, device=device)
    patches = patchify(images, 4)  # grid 3 x 4
    assert patches.shape == (2, 12, 4 * 4 * 3)
    for i in range(12):
        row, col = divmod(i, 4)
        crop = images[:, :, 4 * row : 4 * row + 4, 4 * col : 4 * col + 4]  # (batch, c, p1, p2)
        torch.testing.assert_close(patches[:, i], crop.permute(0, 2, 3, 1).reshape(2, -1))
    assert torch.equal(unpatchify(patches, 4, (12, 16)), images)


def test_conv_patch_embedding_is_a_linear_map_on_patches(device):
    embed = PatchEmbedding(img_size=(16, 24), patch_size=8, in_chans=3, embed_dim=20).to(device)
    images = torch.randn(2, 3, 16, 24, device=device)
    # Conv weight (D, C, P, P) -> Linear weight over patchify's (p1, p2, c) order
    linear_weight = embed.proj.weight.permute(0, 2, 3, 1).reshape(20, -1)
    expected = patchify(images, 8) @ linear_weight.T + embed.proj.bias
    torch.testing.assert_close(embed(images), expected, atol=1e-5, rtol=1e-5)
    assert embed.grid_size == (2, 3) and embed.num_patches == 6


@pytest.mark.parametrize(
    "shape, message",
    [
        ((2, 3, 30, 32), "30x32 is not divisible by patch size 8x8.*24x32"),
        ((2, 1, 32, 32), "expects 3 channel"),
        ((3, 32, 32), "4-D batch.*unsqueeze\\(0\\)"),
    ],
)
def test_patch_embedding_rejects_bad_images(shape, message):
    embed = PatchEmbedding(img_size=32, patch_size=8, in_chans=3, embed_dim=16)
    with pytest.raises(ValueError, match=message):
        embed(torch.randn(shape))


def test_patch_size_must_divide_image_size():
    with pytest.raises(ValueError, match="not divisible by patch_size"):
        PatchEmbedding(img_size=30, patch_size=8)


def test_unpatchify_checks_its_input():
    with pytest.raises(ValueError, match="expected patches of shape"):
        unpatchify(torch.randn(1, 5, 48), 4, 16)


@pytest.mark.parametrize("grid, prefix", [((14, 14), 1), ((3, 5), 0), ((4, 6), 2)])
def test_resample_to_the_same_grid_is_identity(grid, prefix):
    pos = torch.randn(1, prefix + grid[0] * grid[1], 32)
    torch.testing.assert_close(resample_pos_embed(pos, grid, grid, prefix), pos, atol=1e-5, rtol=0)


def test_resample_non_square_grid_keeps_rows_and_columns_apart():
    old_h, old_w, dim = 2, 3, 4
    rows, cols = torch.meshgrid(torch.arange(old_h), torch.arange(old_w), indexing="ij")
    grid = torch.stack([rows, cols, rows * 10 + cols, -cols], dim=-1).float()  # (h, w, dim)
    cls = torch.randn(1, 1, dim)
    pos = torch.cat([cls, grid.reshape(1, -1, dim)], dim=1)
    new = resample_pos_embed(pos, (4, 6), (old_h, old_w), num_prefix_tokens=1, mode="nearest")
    assert torch.equal(new[:, :1], cls)  # the [CLS] embedding is kept as it is
    new_grid = new[0, 1:].reshape(4, 6, dim)
    for r in range(4):
        for c in range(6):  # nearest-neighbour x2 upsampling: each old cell becomes a 2x2 block
            assert torch.equal(new_grid[r, c], grid[r // 2, c // 2])
    bicubic = resample_pos_embed(pos, (4, 6), (old_h, old_w))[0, 1:].reshape(4, 6, dim)
    assert torch.all(bicubic[:, :, 0].std(dim=1) < 1e-5)  # the row channel is constant along a row
    assert torch.all(bicubic[:, :, 1].std(dim=0) < 1e-5)  # the column channel constant along a column


def test_resample_needs_a_grid_it_can_infer():
    with pytest.raises(ValueError, match="square grid; pass old_grid"):
        resample_pos_embed(torch.randn(1, 1 + 6, 8), (4, 4))
    with pytest.raises(ValueError, match="has 9 positions"):
        resample_pos_embed(torch.randn(1, 1 + 6, 8), (4, 4), old_grid=(3, 3))


def test_sincos_embedding():
    pos = sincos_pos_embed_2d(64, (4, 6), num_prefix_tokens=1)
    assert pos.shape == (1, 25, 64)
    assert torch.equal(pos[0, 0], torch.zeros(64))
    patches = pos[0, 1:]
    # every position differs, and two positions in the same row share the first (row) half exactly
    assert torch.cdist(patches, patches).add(torch.eye(24)).min() > 0.1
    torch.testing.assert_close(patches[0, :32], patches[5, :32])
    torch.testing.assert_close(patches[0, 32:], patches[6, 32:])  # same column, next row
    with pytest.raises(ValueError, match="divisible by 4"):
        sincos_pos_embed_2d(30, 4)


# ------------------------------------------------------------------ behaviours found by mutation testing
def test_sincos_values_follow_the_documented_formula():
    """Row half: sin/cos(row * omega_i), column half: sin/cos(col * omega_i), omega_i = 1 / 10000^(i / (D/4))."""
    dim, grid = 64, (20, 3)
    pos = sincos_pos_embed_2d(dim, grid)[0]  # (60, 64)
    omega = 1.0 / 10000.0 ** (torch.arange(16, dtype=torch.float64) / 16)
    for token in (0, 7, 59):
        row, col = divmod(token, grid[1])
        expected = torch.cat([(row * omega).sin(), (row * omega).cos(), (col * omega).sin(), (col * omega).cos()])
        torch.testing.assert_close(pos[token], expected.float())
    other = sincos_pos_embed_2d(dim, grid, temperature=100.0)[0]
    assert not torch.allclose(other, pos)


@pytest.mark.parametrize("mode", ["bicubic", "bilinear"])
@pytest.mark.parametrize("new_grid", [(6, 8), (2, 3)])
def test_resample_is_torch_interpolation_with_antialiasing(mode, new_grid):
    """The grid is interpolated as timm does: align_corners=False, antialiased (which matters when shrinking)."""
    pos = torch.randn(1, 1 + 4 * 6, 8)
    grid = pos[:, 1:].reshape(1, 4, 6, 8).permute(0, 3, 1, 2)
    ref = F.interpolate(grid, size=new_grid, mode=mode, align_corners=False, antialias=True)
    ref = ref.permute(0, 2, 3, 1).reshape(1, -1, 8)
    out = resample_pos_embed(pos, new_grid, (4, 6), num_prefix_tokens=1, mode=mode)
    torch.testing.assert_close(out, torch.cat([pos[:, :1], ref], dim=1))


def test_learned_pos_embed_starts_small():
    """timm's initialisation: a truncated normal of std 0.02, one vector per token."""
    pos = learned_pos_embed(1000, 64)
    assert pos.shape == (1, 1000, 64) and pos.requires_grad
    assert abs(pos.std().item() - 0.02) < 0.001 and abs(pos.mean().item()) < 0.001


def test_unpatchify_explains_sizes_that_do_not_fit():
    with pytest.raises(ValueError, match="10x16 is not divisible by patch size 4"):
        unpatchify(torch.randn(1, 8, 48), 4, (10, 16))  # only the height is off
    with pytest.raises(ValueError, match="expected patches of shape"):
        unpatchify(torch.randn(1, 16, 20), 4, 16)  # 20 numbers per patch is no whole number of 4x4 channels


def test_patch_embedding_defaults_are_vit_base_at_224():
    """The module docstring's example: 224 x 224 RGB, 16 x 16 patches -> 14 x 14 = 196 tokens of 768."""
    with torch.device("meta"):
        embed = PatchEmbedding()
    assert embed.grid_size == (14, 14) and embed.num_patches == 196
    assert tuple(embed.proj.weight.shape) == (768, 3, 16, 16)


def test_rectangular_images_and_patches():
    embed = PatchEmbedding(img_size=(32, 36), patch_size=(8, 12), in_chans=1, embed_dim=4)
    assert embed.grid_size == (4, 3) and embed(torch.randn(2, 1, 32, 36)).shape == (2, 12, 4)
    for img_size in ((30, 32), (32, 30)):  # either side alone not divisible
        with pytest.raises(ValueError, match="not divisible by patch_size"):
            PatchEmbedding(img_size=img_size, patch_size=8)


def test_resample_infers_a_square_grid_and_checks_the_batch_axis():
    pos = torch.randn(1, 1 + 16, 8)
    torch.testing.assert_close(resample_pos_embed(pos, (2, 2)), resample_pos_embed(pos, (2, 2), old_grid=(4, 4)))
    with pytest.raises(ValueError, match="shape \\(1, tokens, dim\\)"):
        resample_pos_embed(torch.randn(2, 17, 8), (2, 2))


def test_resample_other_modes_and_dtypes():
    pos = torch.randn(1, 1 + 16, 8)
    grid = pos[:, 1:].reshape(1, 4, 4, 8).permute(0, 3, 1, 2)
    area = F.interpolate(grid, size=(2, 2), mode="area").permute(0, 2, 3, 1).reshape(1, 4, 8)
    torch.testing.assert_close(resample_pos_embed(pos, 2, mode="area")[:, 1:], area)
    assert resample_pos_embed(pos.bfloat16(), 6).dtype == torch.bfloat16  # computed in float32, returned as given
