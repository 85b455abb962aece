r"""An image as a sequence of tokens: patches, their linear embedding, and position embeddings.

A 224 x 224 image cut into 16 x 16 patches is a 14 x 14 grid, i.e. $N = HW / P^2 = 196$ tokens, each a
flattened patch of $P \cdot P \cdot C = 768$ numbers (Dosovitskiy et al., 2021).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import Tensor, nn


def pair(x: int | tuple[int, int]) -> tuple[int, int]:
    """An int or a pair -> a pair of ints: 16 -> (16, 16), (32, 48) -> (32, 48)."""
    return (x, x) if isinstance(x, int) else (int(x[0]), int(x[1]))


def check_images(images: Tensor, patch_size: int | tuple[int, int], in_chans: int | None = None) -> None:
    """Raise a helpful error unless ``images`` is a (batch, channels, height, width) batch that the
    patch size divides (and that has ``in_chans`` channels, when given)."""
    if images.dim() != 4:
        hint = " Add a batch axis with images.unsqueeze(0)." if images.dim() == 3 else ""
        raise ValueError(
            f"expected a 4-D batch of images (batch, channels, height, width), got a {images.dim()}-D "
            f"tensor of shape {tuple(images.shape)}.{hint}"
        )
    _, channels, height, width = images.shape
    if in_chans is not None and channels != in_chans:
        raise ValueError(
            f"the model expects {in_chans} channel(s) but the images have {channels} "
            f"(shape {tuple(images.shape)}). Images must be channels-first (B, C, H, W); convert "
            f"grayscale/RGB to match, or build the model with in_chans={channels}."
        )
    ph, pw = pair(patch_size)
    if height % ph or width % pw:
        raise ValueError(
            f"image size {height}x{width} is not divisible by patch size {ph}x{pw}; resize or crop to a "
            f"multiple of the patch size (e.g. {height // ph * ph}x{width // pw * pw})"
        )


def patchify(images: Tensor, patch_size: int) -> Tensor:
    """Cut images into non-overlapping square patches and flatten each one.

    (batch, channels, height, width) -> (batch, num_patches, patch_size * patch_size * channels)
    Patches are taken row by row, as in the ViT paper, so patch i sits at (i // W_p, i % W_p); inside a
    patch the numbers are ordered (row, column, channel).
    """
    check_images(images, patch_size)
    return rearrange(images, "b c (h p1) (w p2) -> b (h w) (p1 p2 c)", p1=patch_size, p2=patch_size)


def unpatchify(patches: Tensor, patch_size: int, image_size: int | tuple[int, int]) -> Tensor:
    """The inverse of :func:`patchify`.

    (batch, num_patches, patch_size * patch_size * channels) -> (batch, channels, height, width)
    """
    height, width = pair(image_size)
    if height % patch_size or width % patch_size:
        raise ValueError(f"image size {height}x{width} is not divisible by patch size {patch_size}")
    grid_h, grid_w = height // patch_size, width // patch_size
    if patches.dim() != 3 or patches.shape[1] != grid_h * grid_w or patches.shape[2] % patch_size**2:
        raise ValueError(
            f"expected patches of shape (batch, {grid_h * grid_w}, {patch_size}*{patch_size}*channels) for "
            f"a {height}x{width} image, got {tuple(patches.shape)}"
        )
    return rearrange(patches, "b (h w) (p1 p2 c) -> b c (h p1) (w p2)", h=grid_h, p1=patch_size, p2=patch_size)


class PatchEmbedding(nn.Module):
    """Split an image into P x P patches and project each one linearly to ``embed_dim``.

    (batch, in_chans, height, width) -> (batch, num_patches, embed_dim)

    A Conv2d with kernel = stride = P *is* a Linear layer applied to every flattened patch: each output
    position sees exactly one patch, with the same weights everywhere (chapter 4 proves it numerically).
    """

    def __init__(
        self,
        img_size: int | tuple[int, int] = 224,
        patch_size: int = 16,
        in_chans: int = 3,
        embed_dim: int = 768,
    ) -> None:
        super().__init__()
        self.img_size = pair(img_size)
        self.patch_size = pair(patch_size)
        if self.img_size[0] % self.patch_size[0] or self.img_size[1] % self.patch_size[1]:
            raise ValueError(
                f"img_size {self.img_size[0]}x{self.img_size[1]} is not divisible by patch_size "
                f"{patch_size}: the patches must tile the image exactly. Pick a patch size that divides it."
            )
        self.in_chans = in_chans
        self.grid_size = (self.img_size[0] // self.patch_size[0], self.img_size[1] // self.patch_size[1])
        self.num_patches = self.grid_size[0] * self.grid_size[1]
        self.proj = nn.Conv2d(in_chans, embed_dim, kernel_size=self.patch_size, stride=self.patch_size)

    def forward(self, images: Tensor) -> Tensor:
        check_images(images, self.patch_size, self.in_chans)
        x = self.proj(images)  # (batch, embed_dim, grid_h, grid_w)
        return rearrange(x, "b d h w -> b (h w) d")  # row-major patch order, as patchify


def learned_pos_embed(num_tokens: int, embed_dim: int) -> nn.Parameter:
    """A learnable position embedding, one vector per token, initialised as in timm (std 0.02).

    -> (1, num_tokens, embed_dim)
    """
    return nn.Parameter(nn.init.trunc_normal_(torch.zeros(1, num_tokens, embed_dim), std=0.02))


def sincos_pos_embed_2d(
    embed_dim: int, grid_size: int | tuple[int, int], num_prefix_tokens: int = 0, temperature: float = 10000.0
) -> Tensor:
    """Fixed 2-D sine-cosine position embedding (the idea of MAE and Beyer et al.'s "better plain ViT").

    -> (1, num_prefix_tokens + grid_h * grid_w, embed_dim)

    The first half of the channels encodes the patch's row, the second half its column, each with
    sin/cos pairs at geometrically spaced frequencies 1 / temperature^(i / (embed_dim/4)). Prefix
    tokens (e.g. [CLS]) get zeros: they have no position.

    The layout is vitedu's own: MAE puts the *column* half first (same frequencies), and big_vision
    also puts the column first with frequencies 1 / temperature^(i / (embed_dim/4 - 1)). The three are
    equivalent for a model trained from scratch (a fixed permutation of channels, slightly different
    frequencies) but not interchangeable when loading weights trained with another layout; chapter 4
    compares them numerically.
    """
    if embed_dim % 4:
        raise ValueError(
            f"2-D sin-cos position embeddings need embed_dim divisible by 4 (a sin and a cos for each of "
            f"two axes); got {embed_dim}. Use e.g. {embed_dim // 4 * 4 or 4}."
        )
    grid_h, grid_w = pair(grid_size)
    rows, cols = torch.meshgrid(torch.arange(grid_h), torch.arange(grid_w), indexing="ij")
    omega = 1.0 / temperature ** (torch.arange(embed_dim // 4) / (embed_dim // 4))  # (embed_dim/4,)
    row_angles = rows.reshape(-1, 1).double() * omega  # (tokens, embed_dim/4)
    col_angles = cols.reshape(-1, 1).double() * omega
    pos = torch.cat([row_angles.sin(), row_angles.cos(), col_angles.sin(), col_angles.cos()], dim=1)
    pos = torch.cat([torch.zeros(num_prefix_tokens, embed_dim, dtype=pos.dtype), pos])
    return pos.float().unsqueeze(0)


def resample_pos_embed(
    pos_embed: Tensor,
    new_grid: int | tuple[int, int],
    old_grid: int | tuple[int, int] | None = None,
    num_prefix_tokens: int = 1,
    mode: str = "bicubic",
) -> Tensor:
    """Resize a position embedding to another patch grid, e.g. to fine-tune at a higher resolution.

    (1, num_prefix_tokens + old_h * old_w, dim) -> (1, num_prefix_tokens + new_h * new_w, dim)

    The patch embeddings are laid back out as an image of ``dim`` channels and interpolated; the prefix
    tokens ([CLS], distillation) are kept as they are. Simply keeping the first N vectors would be
    wrong: it would give row 1 of the new grid the embeddings of rows 1 *and* 2 of the old one.
    """
    if pos_embed.dim() != 3 or pos_embed.shape[0] != 1:
        raise ValueError(f"expected a position embedding of shape (1, tokens, dim), got {tuple(pos_embed.shape)}")
    new_h, new_w = pair(new_grid)
    num_patches = pos_embed.shape[1] - num_prefix_tokens
    if old_grid is None:
        side = math.isqrt(num_patches)
        if side * side != num_patches:
            raise ValueError(
                f"{num_patches} patch positions do not form a square grid; pass old_grid=(rows, cols)"
            )
        old_grid = side
    old_h, old_w = pair(old_grid)
    if old_h * old_w != num_patches:
        raise ValueError(
            f"old_grid {old_h}x{old_w} has {old_h * old_w} positions, but the embedding holds {num_patches} "
            f"patch positions after {num_prefix_tokens} prefix token(s)"
        )
    prefix, grid = pos_embed[:, :num_prefix_tokens], pos_embed[:, num_prefix_tokens:]
    grid = rearrange(grid, "1 (h w) d -> 1 d h w", h=old_h, w=old_w).float()
    if mode in ("bilinear", "bicubic"):  # antialias only matters when shrinking the grid
        grid = F.interpolate(grid, size=(new_h, new_w), mode=mode, align_corners=False, antialias=True)
    else:
        grid = F.interpolate(grid, size=(new_h, new_w), mode=mode)
    grid = rearrange(grid, "1 d h w -> 1 (h w) d").to(pos_embed.dtype)
    return torch.cat([prefix, grid], dim=1)
