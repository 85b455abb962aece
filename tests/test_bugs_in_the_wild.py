"""The bugs of the appendix "Six bugs that run" (notebooks/A1_bugs_in_the_wild.ipynb), as unit tests.

Each bug is a pattern from ViT code written from scratch (the appendix links public instances where they
exist: bugs 1 and 5 in code; the mistakes behind the composites 2 and 6 in public issues; 3 has none).
For each, the test asserts that its check catches the buggy
version and that the fixed version passes, so a check that stopped seeing the bug (or started rejecting
correct code) goes red. The checks are the book's: ``vitedu.checks`` functions, comparisons with vitedu's
reference modules with the same weights, gradients that must exist, counts from the formulas.
Fast: small widths, CPU.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

import vitedu
from vitedu.attention import MultiHeadSelfAttention
from vitedu.blocks import Mlp
from vitedu.checks import CheckFailed, check_encoder_block, check_vit_forward

DIM, HEADS = 16, 4


def _tokens(batch: int = 3, tokens: int = 5, seed: int = 0) -> torch.Tensor:
    return torch.randn(batch, tokens, DIM, generator=torch.Generator().manual_seed(seed))


# ----------------------------------------------------------------------------------------------------
# 1. nn.MultiheadAttention on (batch, tokens, dim) without batch_first=True


class TutorialBlock(nn.Module):
    """A pre-norm block on PyTorch's attention; ``batch_first=False`` is the bug (PyTorch's default)."""

    def __init__(self, dim: int, num_heads: int, batch_first: bool = False) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=1e-6)
        self.attn = nn.MultiheadAttention(dim, num_heads, batch_first=batch_first)
        self.norm2 = nn.LayerNorm(dim, eps=1e-6)
        self.mlp = Mlp(dim, 4 * dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (batch, tokens, dim)
        h = self.norm1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.mlp(self.norm2(x))


def _mha_names(state: dict) -> dict:
    """vitedu's attn.qkv / attn.proj -> nn.MultiheadAttention's in_proj / out_proj (same row layout)."""
    rename = {"attn.qkv.weight": "attn.in_proj_weight", "attn.qkv.bias": "attn.in_proj_bias",
              "attn.proj.weight": "attn.out_proj.weight", "attn.proj.bias": "attn.out_proj.bias"}
    return {rename.get(name, name): value for name, value in state.items()}


def _mixes_images(block: nn.Module, x: torch.Tensor) -> bool:
    """Does a new image 0 change the output for the other images? (A constant shift would not: LayerNorm.)"""
    changed = x.clone()
    changed[0] = _tokens(1, x.shape[1], seed=99)[0]
    with torch.no_grad():
        return not torch.allclose(block(x)[1:], block(changed)[1:], atol=1e-6)


def _matches_vitedu_block(block: nn.Module, x: torch.Tensor) -> bool:
    torch.manual_seed(0)
    ref = vitedu.Block(DIM, HEADS).eval()
    block.load_state_dict(_mha_names(ref.state_dict()))
    with torch.no_grad():
        return torch.allclose(block.eval()(x), ref(x)[0], atol=1e-5)


def test_multihead_attention_without_batch_first_is_caught() -> None:
    assert nn.MultiheadAttention(8, 2).batch_first is False  # why the bug is easy to write
    x = _tokens()
    buggy = TutorialBlock(DIM, HEADS)
    assert _mixes_images(buggy, x)
    assert not _matches_vitedu_block(buggy, x)
    # One image cannot mix with others, but the block still differs: each token attends only to itself.
    assert not _mixes_images(buggy, x[:1]) and not _matches_vitedu_block(buggy, x[:1])


def test_multihead_attention_with_batch_first_passes() -> None:
    x = _tokens()
    fixed = TutorialBlock(DIM, HEADS, batch_first=True)
    assert not _mixes_images(fixed, x)
    assert _matches_vitedu_block(fixed, x)


# ----------------------------------------------------------------------------------------------------
# 2. A residual wrapper whose lambda ignores the LayerNorm it was given


def _residual(x: torch.Tensor, norm: nn.Module, fn) -> torch.Tensor:
    return x + fn(norm(x))


class LambdaBlock(nn.Module):
    def __init__(self, dim: int, num_heads: int) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=1e-6)
        self.attn = MultiHeadSelfAttention(dim, num_heads)
        self.norm2 = nn.LayerNorm(dim, eps=1e-6)
        self.mlp = Mlp(dim, 4 * dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = _residual(x, self.norm1, lambda h: self.attn(x)[0])  # the bug: x, not h
        return _residual(x, self.norm2, lambda h: self.mlp(x))


class FixedLambdaBlock(LambdaBlock):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = _residual(x, self.norm1, lambda h: self.attn(h)[0])
        return _residual(x, self.norm2, lambda h: self.mlp(h))


def _unused_parameters(block: nn.Module) -> list[str]:
    block(_tokens()).pow(2).mean().backward()
    return [name for name, param in block.named_parameters() if param.grad is None]


def test_lambda_that_ignores_the_norm_is_caught() -> None:
    with pytest.raises(CheckFailed, match="the LayerNorms are missing"):
        check_encoder_block(LambdaBlock, device="cpu")
    assert _unused_parameters(LambdaBlock(DIM, HEADS)) == ["norm1.weight", "norm1.bias", "norm2.weight", "norm2.bias"]


def test_lambda_that_uses_the_norm_passes() -> None:
    check_encoder_block(FixedLambdaBlock, device="cpu")
    assert _unused_parameters(FixedLambdaBlock(DIM, HEADS)) == []


# ----------------------------------------------------------------------------------------------------
# 3. A classification head applied to every token


class EveryTokenViT(vitedu.VisionTransformer):
    def forward_head(self, features: torch.Tensor, pre_logits: bool = False) -> torch.Tensor:
        return self.head(features)  # the bug: every token, not features[:, 0]


def test_head_on_every_token_is_caught() -> None:
    model = EveryTokenViT(img_size=32, patch_size=8, num_classes=7, embed_dim=DIM, depth=1, num_heads=HEADS)
    with torch.no_grad():
        assert model(torch.zeros(1, 3, 32, 32)).shape == (1, 17, 7)  # [1, 197, 1000] for ViT-B/16
    with pytest.raises(CheckFailed, match="logits for every token"):
        check_vit_forward(EveryTokenViT, device="cpu")


def test_head_on_cls_token_passes() -> None:
    check_vit_forward(vitedu.VisionTransformer, device="cpu")


# ----------------------------------------------------------------------------------------------------
# 4. A post-norm block (LayerNorm after the residual addition) where the weights are pre-norm ViT weights


class AddThenNormBlock(LambdaBlock):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.norm1(x + self.attn(x)[0])
        return self.norm2(x + self.mlp(x))


class PreNormBlock(LambdaBlock):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm1(x))[0]
        return x + self.mlp(self.norm2(x))


def test_norm_after_the_residual_add_is_caught() -> None:
    with pytest.raises(CheckFailed, match="post-norm"):
        check_encoder_block(AddThenNormBlock, device="cpu")


def test_norm_before_each_branch_passes() -> None:
    check_encoder_block(PreNormBlock, device="cpu")


# ----------------------------------------------------------------------------------------------------
# 5. One ModuleList entry per head, scaled by the model width (ng-video-lecture#6, vit-pytorch#65)


class Head(nn.Module):
    def __init__(self, dim: int, head_dim: int) -> None:
        super().__init__()
        self.q, self.k, self.v = (nn.Linear(dim, head_dim) for _ in range(3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.q(x), self.k(x), self.v(x)
        return (q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5).softmax(dim=-1) @ v


class WidthScaledHead(Head):
    """The bug: the scores scaled by the input's width C = D, not the head's d_k."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.q(x), self.k(x), self.v(x)
        return (q @ k.transpose(-2, -1) * x.shape[-1] ** -0.5).softmax(dim=-1) @ v


class PerHeadAttention(nn.Module):
    def __init__(self, dim: int, num_heads: int, head_dim: int | None = None, head_cls: type = Head) -> None:
        super().__init__()
        head_dim = head_dim or dim // num_heads
        self.heads = nn.ModuleList(head_cls(dim, head_dim) for _ in range(num_heads))
        self.proj = nn.Linear(num_heads * head_dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(torch.cat([head(x) for head in self.heads], dim=-1))


def _attention_like_vit(module: nn.Module) -> bool:
    """The appendix's check: 4D^2 + 4D parameters, under vitedu's (timm's) names."""
    ref = MultiHeadSelfAttention(DIM, HEADS)
    return (vitedu.count_parameters(module) == 4 * DIM**2 + 4 * DIM
            and module.state_dict().keys() == ref.state_dict().keys())


def _per_head_from_fused(fused: MultiHeadSelfAttention, head_cls: type) -> PerHeadAttention:
    """The fused layer's weights in per-head modules: rows of qkv are [q | k | v], each split into heads."""
    per_head, d = PerHeadAttention(DIM, HEADS, head_cls=head_cls), DIM // HEADS
    with torch.no_grad():
        for i, head in enumerate(per_head.heads):
            for j, layer in enumerate((head.q, head.k, head.v)):
                rows = slice(j * DIM + i * d, j * DIM + (i + 1) * d)
                layer.weight.copy_(fused.qkv.weight[rows])
                layer.bias.copy_(fused.qkv.bias[rows])
        per_head.proj.load_state_dict(fused.proj.state_dict())
    return per_head


def test_per_head_modules_compute_the_fused_function() -> None:
    # With the head's scale, not a numerical bug: with the fused layer's rows copied in, the outputs agree.
    torch.manual_seed(0)
    fused = MultiHeadSelfAttention(DIM, HEADS).eval()
    per_head = _per_head_from_fused(fused, Head)
    with torch.no_grad():
        x = _tokens()
        assert torch.allclose(per_head(x), fused(x)[0], atol=1e-5)
    assert vitedu.count_parameters(per_head) == vitedu.count_parameters(fused)


def test_per_head_modules_scaled_by_the_width_are_caught() -> None:
    # The same comparison catches the scale: 1/sqrt(D) instead of 1/sqrt(d_k), flatter attention.
    torch.manual_seed(0)
    fused = MultiHeadSelfAttention(DIM, HEADS).eval()
    buggy = _per_head_from_fused(fused, WidthScaledHead)
    x = _tokens()
    with torch.no_grad():
        assert not torch.allclose(buggy(x), fused(x)[0], atol=1e-5)
        q = buggy.heads[0].q(x)
        k = buggy.heads[0].k(x)
        right = (q @ k.transpose(-2, -1) * (DIM // HEADS) ** -0.5).softmax(-1)
        flat = (q @ k.transpose(-2, -1) * DIM**-0.5).softmax(-1)
        assert flat.amax(-1).mean() < right.amax(-1).mean()  # the wrong scale flattens every row


def test_per_head_modules_are_caught_and_the_fused_layer_passes() -> None:
    assert not _attention_like_vit(PerHeadAttention(DIM, HEADS, head_dim=DIM))  # full width: count and names
    assert not _attention_like_vit(PerHeadAttention(DIM, HEADS))  # right count, names no checkpoint has
    assert _attention_like_vit(MultiHeadSelfAttention(DIM, HEADS))


# ----------------------------------------------------------------------------------------------------
# 6. "A 224 px image cut into 16 px patches gives 14x14 pixels per patch"


def test_224_px_in_16_px_patches_is_196_patches_of_16x16_pixels() -> None:
    images = torch.zeros(1, 3, 224, 224)
    assert vitedu.patchify(images, 16).shape == (1, 196, 16 * 16 * 3)
    assert vitedu.PatchEmbedding(224, 16, 3, 8).grid_size == (14, 14)
    wrong = nn.Conv2d(3, 8, kernel_size=224 // 16, stride=224 // 16)  # "14x14 pixels per patch"
    assert wrong(images).flatten(2).shape[-1] == 256 != 196  # does not fit ViT-B/16's 196 positions
