"""The catalogue of student mistakes: for every graded function of the three assignments, several written forms of
the usual mistakes, each a small function as a student writes it. Every form is planted in the source notebook
(the model solution of that function replaced by it, everything else as the instructor wrote it) and graded by
running the graded cells of its part, hidden tests included, with nbgrader's rule: a cell earns its points if
it raises nothing. Each form must

- be recognised: every graded cell of its part that calls a check and fails raises the check's CheckFailed, and
  its message names the mistake (``hint``, a regular expression), whatever the written form;
- keep exactly ``keeps`` points of its part (for ``train_epoch`` also ``run_keeps`` of Part 4, the training run
  it drives, in a slow test);
- keep more points when it is a slip at an edge (``slip=True``: a finite mask fill, a hard-coded size, a mean of
  batch means, ...) than any broken mechanism of the same function.

The forms are written independently of the checks, in plain torch, and several forms of one mistake are listed
(masked_fill or added, -inf or -1e9, before or after the scale, 3-D and 4-D code, einsum or matmul): the checks
recognise a mistake by what it computes, not by how it is written. A few right solutions in other written forms
(``RIGHT``) must keep every point.

Forms are real functions of this module, planted with the notebook's globals (so that a form calling
``attention_weights`` or ``loader`` gets the notebook's, and ``reference_parts`` swaps them as in the notebook).
A form of a class (an nn.Module of the assignment) is its ``forward``.
"""

from __future__ import annotations

import contextlib
import io
import math
import re
import types
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import nbformat
import pytest
import torch

from vitedu.checks import CheckFailed

# Runs the assignment notebooks' graded cells, about 30 s for the whole catalogue: not in `make unit`, as
# tests/test_assignments.py; the forms of train_epoch also drive A3's training run (slow, about 15 s each).
pytestmark = pytest.mark.nbgrader

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "notebooks" / "assignments" / "source"

# The notebooks' names the forms use: bound to the notebook's own objects when a form is planted.
F = nn = vitedu = loader = splits = accuracy = attention = attention_weights = split_heads = merge_heads = None
patchify = None
INF = float("-inf")


@dataclass(frozen=True)
class Form:
    assignment: str  # a1_attention, a2_patches_to_vit, a3_training
    function: str  # the grade_id of the solution cell it replaces
    code: Callable[..., Any]  # the mistaken implementation (for a class: its forward)
    hint: str  # a regular expression the check's message must match
    keeps: int  # the points it keeps in its part
    slip: bool = False  # an edge-case slip (must keep more than any broken mechanism of the function)
    run_keeps: int | None = None  # train_epoch only: the points it keeps in Part 4, the training run

    def __str__(self) -> str:
        return f"{self.function}-{self.code.__name__}"


A1, A2, A3 = "a1_attention", "a2_patches_to_vit", "a3_training"


# ---------------------------------------------------------------------------------------------------
# A1, Part 1: attention_weights (3 points: the values 2, the general case 1)


def weights_over_queries(q, k):
    return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-2)


def weights_over_heads(q, k):
    return (q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5).softmax(1)


def weights_einsum_no_scale(q, k):
    return torch.einsum("...qd,...kd->...qk", q, k).softmax(dim=-1)


def weights_divided_by_dk(q, k):
    return (torch.matmul(q, k.mT) / q.shape[-1]).softmax(-1)


def weights_keys_first(q, k):
    return torch.softmax(k @ q.transpose(-2, -1) / math.sqrt(k.shape[-1]), dim=-1)


def weights_log_softmax(q, k):
    return torch.log_softmax(q @ k.mT / math.sqrt(q.shape[-1]), dim=-1)


def weights_sigmoid(q, k):
    return torch.sigmoid(q @ k.mT / math.sqrt(q.shape[-1]))


def weights_k_dot_t(q, k):
    return torch.softmax(q @ k.T / math.sqrt(q.shape[-1]), dim=-1)


def weights_naive_softmax(q, k):
    e = (q @ k.mT / math.sqrt(q.shape[-1])).exp()
    return e / e.sum(dim=-1, keepdim=True)


def weights_sqrt_8(q, k):
    return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(8), dim=-1)


def weights_4d_only(q, k):
    return torch.softmax(q @ k.permute(0, 1, 3, 2) / math.sqrt(q.shape[-1]), dim=-1)


# A1, Part 2: attention (2 points: the values 1, the general case 1), graded with the reference attention_weights


def attention_transposed_weights(q, k, v):
    return attention_weights(q, k).transpose(-2, -1) @ v


def attention_scaled_by_d_v(q, k, v):
    return torch.softmax(q @ k.mT / math.sqrt(v.shape[-1]), dim=-1) @ v


def attention_over_queries(q, k, v):
    return torch.softmax(q @ k.mT / math.sqrt(q.shape[-1]), dim=-2) @ v


def attention_no_softmax(q, k, v):
    return (q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])) @ v


def attention_no_scale(q, k, v):
    return torch.softmax(torch.matmul(q, k.transpose(-1, -2)), dim=-1) @ v


def attention_over_queries_no_scale(q, k, v):
    return torch.softmax(q @ k.mT, dim=-2) @ v


def attention_naive_softmax(q, k, v):
    e = torch.exp(q @ k.mT / math.sqrt(q.shape[-1]))
    return e / e.sum(-1, keepdim=True) @ v


def attention_sqrt_8(q, k, v):
    return torch.softmax(q @ k.mT / 8**0.5, dim=-1) @ v


# A1, Part 3: masked_attention (3 points: padding masks 2, a fully masked query 1)


def _logits(q, k):
    return q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])


def masked_fill_finite(q, k, v, mask):
    return _logits(q, k).masked_fill(~mask, -1e9).softmax(dim=-1) @ v


def masked_fill_lowest_float(q, k, v, mask):
    logits = _logits(q, k)
    return logits.masked_fill(~mask, torch.finfo(logits.dtype).min).softmax(dim=-1) @ v


def masked_added_finite(q, k, v, mask):
    return torch.softmax(_logits(q, k) + (~mask) * -1e9, dim=-1) @ v


def masked_filled_before_the_scale(q, k, v, mask):
    logits = (q @ k.mT).masked_fill(mask == 0, -1e9) / math.sqrt(q.shape[-1])
    return logits.softmax(-1) @ v


def masked_added_moderate(q, k, v, mask):
    return torch.softmax(_logits(q, k) - (~mask).float() * 1e4, dim=-1) @ v


def masked_nan_rows(q, k, v, mask):
    return torch.softmax(_logits(q, k).masked_fill(~mask, INF), dim=-1) @ v


def masked_inverted_fill(q, k, v, mask):
    return _logits(q, k).masked_fill(mask, INF).softmax(-1).nan_to_num(0.0) @ v


def masked_inverted_added(q, k, v, mask):
    return torch.softmax(_logits(q, k) + (~mask) * 1e9, dim=-1) @ v


def masked_inverted_subtracted(q, k, v, mask):
    return torch.softmax(_logits(q, k) - mask * 1e9, dim=-1) @ v


def masked_inverted_where(q, k, v, mask):
    return torch.where(mask, INF, _logits(q, k)).softmax(-1).nan_to_num(0.0) @ v


def masked_inverted_where_finite(q, k, v, mask):
    return torch.where(mask, -1e9, _logits(q, k)).softmax(-1) @ v


def masked_not_assigned(q, k, v, mask):
    logits = _logits(q, k)
    logits.masked_fill(~mask, INF)  # the result is thrown away: masked_fill is not in place
    return logits.softmax(-1).nan_to_num(0.0) @ v


def masked_on_queries(q, k, v, mask):
    return _logits(q, k).masked_fill(~mask.transpose(-2, -1), INF).softmax(-1).nan_to_num(0.0) @ v


def masked_after_softmax(q, k, v, mask):
    return (_logits(q, k).softmax(-1) * mask) @ v


def masked_multiplied(q, k, v, mask):
    return (_logits(q, k) * mask).softmax(-1) @ v


def masked_zero_times_inf(q, k, v, mask):
    return torch.softmax(_logits(q, k) + (~mask) * INF, dim=-1).nan_to_num(0.0) @ v


def masked_no_scale(q, k, v, mask):
    return (q @ k.mT).masked_fill(~mask, INF).softmax(-1).nan_to_num(0.0) @ v


def masked_over_queries(q, k, v, mask):
    return _logits(q, k).masked_fill(~mask, INF).softmax(-2).nan_to_num(0.0) @ v


# A1, Part 4: single_head (2 points: the values 1, other sizes 1), graded with the reference attention


def head_scaled_by_width(x, w_q, w_k, w_v):
    q, k, v = x @ w_q, x @ w_k, x @ w_v
    return torch.softmax(q @ k.mT / math.sqrt(x.shape[-1]), dim=-1) @ v


def head_q_k_swapped(x, w_q, w_k, w_v):
    return attention(x @ w_k, x @ w_q, x @ w_v)


def head_values_from_w_k(x, w_q, w_k, w_v):
    return attention(x @ w_q, x @ w_k, x @ w_k)


def head_no_value_projection(x, w_q, w_k, w_v):
    return attention(x @ w_q, x @ w_k, x)


def head_transposed_weights(x, w_q, w_k, w_v):
    return attention(x @ w_q.T, x @ w_k.T, x @ w_v.T)


def head_scaled_twice(x, w_q, w_k, w_v):
    q, k, v = x @ w_q, x @ w_k, x @ w_v
    return attention(q / math.sqrt(q.shape[-1]), k, v)


def head_over_queries(x, w_q, w_k, w_v):
    q, k, v = x @ w_q, x @ w_k, x @ w_v
    return torch.softmax(q @ k.mT / math.sqrt(q.shape[-1]), dim=1) @ v


def head_sqrt_4(x, w_q, w_k, w_v):
    q, k, v = x @ w_q, x @ w_k, x @ w_v
    return torch.softmax(q @ k.mT / 2.0, dim=-1) @ v


# A1, Part 5: split_heads and merge_heads (2 points each: the values 1, other sizes 1)


def split_plain_reshape(x, num_heads):
    b, t, d = x.shape
    return x.reshape(b, num_heads, t, d // num_heads)


def split_interleaved(x, num_heads):
    b, t, d = x.shape
    return x.reshape(b, t, d // num_heads, num_heads).permute(0, 3, 1, 2)


def split_transposed_first(x, num_heads):
    b, t, d = x.shape
    return x.transpose(1, 2).reshape(b, num_heads, t, d // num_heads)


def split_not_transposed(x, num_heads):
    b, t, d = x.shape
    return x.view(b, t, num_heads, d // num_heads)


def split_head_width(x, num_heads):
    b, t, d = x.shape
    return x.reshape(b, t, d // num_heads, num_heads).transpose(1, 2)


def split_stacked_first(x, num_heads):
    return torch.stack(x.chunk(num_heads, dim=-1), dim=0)


def split_three_heads(x, num_heads):
    b, t, d = x.shape
    return x.reshape(b, t, 3, d // 3).transpose(1, 2)


def merge_plain_reshape(x):
    b, h, t, d = x.shape
    return x.reshape(b, t, h * d)


def merge_interleaved(x):
    b, h, t, d = x.shape
    return x.permute(0, 2, 3, 1).reshape(b, t, h * d)


def merge_view(x):
    b, h, t, d = x.shape
    return x.transpose(1, 2).view(b, t, h * d)


def merge_along_tokens(x):
    return torch.cat(x.unbind(dim=1), dim=1)


def merge_tokens_and_features_swapped(x):
    b, h, t, d = x.shape
    return x.transpose(2, 3).reshape(b, t, -1)


def merge_width_12(x):
    return x.transpose(1, 2).reshape(x.shape[0], x.shape[2], 12)


def merge_summed_heads(x):
    return x.sum(dim=1)


# A1, Part 6: MultiHeadAttention.forward (4 points: the values 3, other sizes 1), with the reference parts


def mhsa_scaled_by_width(self, x):
    q, k, v = (split_heads(t, self.num_heads) for t in self.qkv(x).chunk(3, dim=-1))
    weights = torch.softmax(q @ k.mT / math.sqrt(x.shape[-1]), dim=-1)
    return self.proj(merge_heads(weights @ v))


def mhsa_no_projection(self, x):
    q, k, v = (split_heads(t, self.num_heads) for t in self.qkv(x).chunk(3, dim=-1))
    return merge_heads(attention(q, k, v))


def mhsa_split_by_head_dim(self, x):
    q, k, v = (split_heads(t, self.head_dim) for t in self.qkv(x).chunk(3, dim=-1))
    return self.proj(merge_heads(attention(q, k, v)))


def mhsa_merged_by_reshape(self, x):
    q, k, v = (split_heads(t, self.num_heads) for t in self.qkv(x).chunk(3, dim=-1))
    return self.proj(attention(q, k, v).reshape(x.shape))


def mhsa_k_q_v(self, x):
    k, q, v = (split_heads(t, self.num_heads) for t in self.qkv(x).chunk(3, dim=-1))
    return self.proj(merge_heads(attention(q, k, v)))


def mhsa_v_k_q(self, x):
    v, k, q = (split_heads(t, self.num_heads) for t in self.qkv(x).chunk(3, dim=-1))
    return self.proj(merge_heads(attention(q, k, v)))


def mhsa_one_head(self, x):
    q, k, v = self.qkv(x).chunk(3, dim=-1)
    return self.proj(attention(q, k, v))


def mhsa_scaled_twice(self, x):
    q, k, v = (split_heads(t, self.num_heads) for t in self.qkv(x).chunk(3, dim=-1))
    return self.proj(merge_heads(attention(q / math.sqrt(self.head_dim), k, v)))


def mhsa_three_heads(self, x):
    q, k, v = (split_heads(t, 3) for t in self.qkv(x).chunk(3, dim=-1))
    return self.proj(merge_heads(attention(q, k, v)))


def mhsa_heads_interleaved_by_reshape(self, x):
    b, t, d = x.shape
    q, k, v = self.qkv(x).reshape(b, t, 3, self.head_dim, self.num_heads).permute(2, 0, 4, 1, 3)
    return self.proj(merge_heads(attention(q, k, v)))


# ---------------------------------------------------------------------------------------------------
# A2, Part 1: patchify (3 points: the values 2, other sizes 1)


def _grid(images, p):
    b, c, h, w = images.shape
    return images.reshape(b, c, h // p, p, w // p, p)  # b c gh p1 gw p2


def patchify_column_major(images, patch_size):
    b, c, h, w = images.shape
    x = _grid(images, patch_size).permute(0, 4, 2, 3, 5, 1)
    return x.reshape(b, -1, patch_size * patch_size * c)


def patchify_with_unfold(images, patch_size):
    return F.unfold(images, patch_size, stride=patch_size).transpose(1, 2)


def patchify_plain_reshape(images, patch_size):
    b, c, h, w = images.shape
    return images.reshape(b, h * w // patch_size**2, -1)


def patchify_columns_first_inside(images, patch_size):
    b, c, h, w = images.shape
    x = _grid(images, patch_size).permute(0, 2, 4, 5, 3, 1)
    return x.reshape(b, -1, patch_size * patch_size * c)


def patchify_tensor_unfold_no_permute(images, patch_size):
    b, c, h, w = images.shape
    x = images.unfold(2, patch_size, patch_size).unfold(3, patch_size, patch_size)  # b c gh gw p1 p2
    return x.reshape(b, -1, patch_size * patch_size * c)


def patchify_channels_last_reshape(images, patch_size):
    b, c, h, w = images.shape
    return images.permute(0, 2, 3, 1).reshape(b, h * w // patch_size**2, -1)


def patchify_strided(images, patch_size):
    b, c, h, w = images.shape
    p = patch_size
    x = images.reshape(b, c, p, h // p, p, w // p).permute(0, 3, 5, 2, 4, 1)  # (p1 h) (p2 w): strided
    return x.reshape(b, -1, p * p * c)


def patchify_patch_size_4(images, patch_size):
    b, c, h, w = images.shape
    x = _grid(images, 4).permute(0, 2, 4, 3, 5, 1)
    return x.reshape(b, -1, 16 * c)


def patchify_three_channels(images, patch_size):
    b, _, h, w = images.shape
    x = images.reshape(b, 3, h // patch_size, patch_size, w // patch_size, patch_size).permute(0, 2, 4, 3, 5, 1)
    return x.reshape(b, -1, patch_size * patch_size * 3)


# A2, Part 2: embed_with_unfold (3 points: patches 2, overlapping windows 1)


def unfold_kernel_reordered(images, conv):
    windows = F.unfold(images, conv.kernel_size, stride=conv.stride)
    weight = conv.weight.permute(0, 2, 3, 1).flatten(1)
    return windows.transpose(1, 2) @ weight.T + conv.bias


def unfold_no_bias(images, conv):
    windows = F.unfold(images, conv.kernel_size, stride=conv.stride)
    return windows.transpose(1, 2) @ conv.weight.flatten(1).T


def unfold_not_transposed(images, conv):
    windows = F.unfold(images, conv.kernel_size, stride=conv.stride)
    return conv.weight.flatten(1) @ windows + conv.bias[:, None]


def unfold_default_stride(images, conv):
    windows = F.unfold(images, conv.kernel_size)
    return windows.transpose(1, 2) @ conv.weight.flatten(1).T + conv.bias


def unfold_weight_reshaped(images, conv):
    windows = F.unfold(images, conv.kernel_size, stride=conv.stride)
    return windows.transpose(1, 2) @ conv.weight.reshape(-1, conv.out_channels) + conv.bias


def unfold_windows_reshaped(images, conv):
    windows = F.unfold(images, conv.kernel_size, stride=conv.stride)
    b, features, n = windows.shape
    return windows.reshape(b, n, features) @ conv.weight.flatten(1).T + conv.bias


def unfold_stride_is_kernel(images, conv):
    windows = F.unfold(images, conv.kernel_size, stride=conv.kernel_size)
    return torch.einsum("bkn,dk->bnd", windows, conv.weight.flatten(1)) + conv.bias


def unfold_kernel_4(images, conv):
    windows = F.unfold(images, 4, stride=conv.stride)
    return windows.transpose(1, 2) @ conv.weight.flatten(1).T + conv.bias


# A2, Part 3: PatchEmbed.forward (2 points: the values 1, other sizes 1), with the reference patchify


def embed_no_bias(self, images):
    return patchify(images, self.patch_size) @ self.proj.weight.T


def embed_linear_without_bias(self, images):
    return F.linear(patchify(images, self.patch_size), self.proj.weight)


def embed_column_major(self, images):
    b, c, h, w = images.shape
    p = self.patch_size
    x = images.reshape(b, c, h // p, p, w // p, p).permute(0, 4, 2, 3, 5, 1).reshape(b, -1, p * p * c)
    return self.proj(x)


def embed_plain_reshape(self, images):
    return self.proj(images.reshape(images.shape[0], self.num_patches, -1))


def embed_with_unfold_order(self, images):
    return self.proj(F.unfold(images, self.patch_size, stride=self.patch_size).transpose(1, 2))


def embed_patch_size_4(self, images):
    return self.proj(patchify(images, 4))


# A2, Part 4: EncoderBlock.forward (4 points: the attention branch 1, the MLP branch 1, the whole block 2)


def block_post_norm(self, x):
    x = self.norm1(x + self.attn(x)[0])
    return self.norm2(x + self.mlp(x))


def block_no_attention_residual(self, x):
    x, _ = self.attn(self.norm1(x))
    return x + self.mlp(self.norm2(x))


def block_no_mlp_residual(self, x):
    x = x + self.attn(self.norm1(x))[0]
    return self.mlp(self.norm2(x))


def block_norm1_twice(self, x):
    x = x + self.attn(self.norm1(x))[0]
    return x + self.mlp(self.norm1(x))


def block_parallel(self, x):
    return x + self.attn(self.norm1(x))[0] + self.mlp(self.norm2(x))


def block_norm_on_outputs(self, x):
    x = x + self.norm1(self.attn(x)[0])
    return x + self.norm2(self.mlp(x))


def block_normalised_skip(self, x):
    x = self.norm1(x)
    x = x + self.attn(x)[0]
    return x + self.mlp(self.norm2(x))


def block_tuple_not_unpacked(self, x):
    x = x + self.attn(self.norm1(x))
    return x + self.mlp(self.norm2(x))


def block_no_norms(self, x):
    x = x + self.attn(x)[0]
    return x + self.mlp(x)


# A2, Part 5: ViT.forward (6 points: the logits 3, their shape 1, the [CLS] path 2)


def _tokens(self, images):
    x = self.patch_embed(images)
    return torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1)


def _encode(self, x):
    for block in self.blocks:
        x, _ = block(x)
    return self.norm(x)


def vit_no_positions(self, images):
    return self.head(_encode(self, _tokens(self, images))[:, 0])


def vit_no_blocks(self, images):
    return self.head(self.norm(_tokens(self, images) + self.pos_embed)[:, 0])


def vit_cls_appended(self, images):
    x = self.patch_embed(images)
    x = torch.cat((x, self.cls_token.repeat(x.shape[0], 1, 1)), 1) + self.pos_embed
    return self.head(_encode(self, x)[:, -1])


def vit_mean_pooling(self, images):
    return self.head(_encode(self, _tokens(self, images) + self.pos_embed).mean(dim=1))


def vit_positions_twice(self, images):
    x = _tokens(self, images) + self.pos_embed
    return self.head(_encode(self, x + self.pos_embed)[:, 0])


def vit_first_block_only(self, images):
    x = _tokens(self, images) + self.pos_embed
    for block in self.blocks:
        x, _ = block(x)
        break
    return self.head(self.norm(x)[:, 0])


def vit_cls_not_expanded(self, images):
    x = torch.cat([self.cls_token, self.patch_embed(images)], dim=1) + self.pos_embed
    return self.head(_encode(self, x)[:, 0])


def vit_every_token(self, images):
    return self.head(_encode(self, _tokens(self, images) + self.pos_embed))


def vit_first_patch(self, images):
    return self.head(_encode(self, _tokens(self, images) + self.pos_embed)[:, 1])


def vit_zeros_for_cls(self, images):
    x = self.patch_embed(images)
    x = torch.cat([x.new_zeros(x.shape[0], 1, x.shape[2]), x], dim=1) + self.pos_embed
    return self.head(_encode(self, x)[:, 0])


# ---------------------------------------------------------------------------------------------------
# A3, Part 1: accuracy (2 points: the value 1, a Python float 1)


def accuracy_tensor(logits, labels):
    return (logits.argmax(dim=-1) == labels).float().mean()


def accuracy_batch_axis(logits, labels):
    return (logits.argmax(0) == labels).float().mean().item()


def accuracy_percent(logits, labels):
    return 100 * (logits.argmax(-1) == labels).float().mean().item()


def accuracy_count(logits, labels):
    return float((logits.argmax(-1) == labels).sum())


def accuracy_bool_mean(logits, labels):
    return (logits.argmax(-1) == labels).mean().item()


def accuracy_error_rate(logits, labels):
    return (logits.argmax(-1) != labels).float().mean().item()


def accuracy_integer_division(logits, labels):
    return int((logits.argmax(-1) == labels).sum()) // len(labels)


def accuracy_max_values(logits, labels):
    return (logits.max(dim=-1).values == labels).float().mean().item()


def accuracy_numpy(logits, labels):
    return (logits.argmax(-1) == labels).float().mean().numpy()


# A3, Part 2: train_epoch (4 points: the update 2, training mode 1, the mean loss 1), and Part 4 (2 points)


def _epoch(model, batches, optimizer, step, reduction="mean", softmax=False, train=True, mean="image"):
    if train:
        model.train()
    total, seen, means = 0.0, 0, []
    for images, labels in batches:
        logits = model(images)
        loss = F.cross_entropy(logits.softmax(-1) if softmax else logits, labels, reduction=reduction)
        step(loss)
        total += loss.item() * len(labels)
        seen += len(labels)
        means.append(loss.item())
    return {"image": total / seen, "batch": sum(means) / len(means)}[mean]


def epoch_no_zero_grad(model, batches, optimizer):
    return _epoch(model, batches, optimizer, lambda loss: (loss.backward(), optimizer.step()))


def epoch_step_before_backward(model, batches, optimizer):
    return _epoch(model, batches, optimizer,
                  lambda loss: (optimizer.zero_grad(), optimizer.step(), loss.backward()))


def epoch_step_between_forward_and_backward(model, batches, optimizer):
    return _epoch(model, batches, optimizer,
                  lambda loss: (optimizer.step(), optimizer.zero_grad(), loss.backward()))


def epoch_no_step(model, batches, optimizer):
    return _epoch(model, batches, optimizer, lambda loss: (optimizer.zero_grad(), loss.backward()))


def epoch_zero_grad_before_step(model, batches, optimizer):
    return _epoch(model, batches, optimizer,
                  lambda loss: (loss.backward(), model.zero_grad(), optimizer.step()))


def epoch_summed_loss(model, batches, optimizer):
    return _epoch(model, batches, optimizer, lambda loss: (optimizer.zero_grad(), loss.backward(), optimizer.step()),
                  reduction="sum") / 64


def epoch_softmax_before_loss(model, batches, optimizer):
    return _epoch(model, batches, optimizer, lambda loss: (optimizer.zero_grad(), loss.backward(), optimizer.step()),
                  softmax=True)


def epoch_own_optimizer(model, batches, optimizer):
    sgd = torch.optim.SGD(model.parameters(), lr=0.1)
    return _epoch(model, batches, optimizer, lambda loss: (sgd.zero_grad(), loss.backward(), sgd.step()))


def epoch_no_train_mode(model, batches, optimizer):
    return _epoch(model, batches, optimizer, lambda loss: (optimizer.zero_grad(), loss.backward(), optimizer.step()),
                  train=False)


def epoch_mean_of_batch_means(model, batches, optimizer):
    return _epoch(model, batches, optimizer, lambda loss: (optimizer.zero_grad(), loss.backward(), optimizer.step()),
                  mean="batch")


def epoch_returns_a_tensor(model, batches, optimizer):
    model.train()
    total, seen = 0.0, 0
    for images, labels in batches:
        loss = F.cross_entropy(model(images), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total = total + loss.detach() * len(labels)
        seen += len(labels)
    return total / seen


# A3, Part 3: evaluate (2 points: the split 1, eval mode, no gradients, the mean per image 1)


def _scores(model, batches):
    model.eval()
    with torch.no_grad():
        logits, labels = zip(*[(model(x), y) for x, y in batches])
    logits, labels = torch.cat(logits), torch.cat(labels)
    return F.cross_entropy(logits, labels).item(), accuracy(logits, labels)


def evaluate_always_train(model, split):
    return _scores(model, loader("train", batch_size=500))


def evaluate_always_val(model, split):
    return _scores(model, loader("val"))


def evaluate_no_eval_mode(model, split):
    with torch.no_grad():
        logits, labels = zip(*[(model(x), y) for x, y in loader(split, batch_size=500)])
    logits, labels = torch.cat(logits), torch.cat(labels)
    return F.cross_entropy(logits, labels).item(), accuracy(logits, labels)


def evaluate_with_gradients(model, split):
    model.eval()
    logits, labels = zip(*[(model(x), y) for x, y in loader(split, batch_size=500)])
    logits, labels = torch.cat(logits), torch.cat(labels)
    return F.cross_entropy(logits, labels).item(), accuracy(logits, labels)


def evaluate_mean_of_batch_means(model, split):
    model.eval()
    losses, accs = [], []
    with torch.no_grad():
        for x, y in loader(split, batch_size=64):
            losses.append(F.cross_entropy(model(x), y).item())
            accs.append(accuracy(model(x), y))
    return sum(losses) / len(losses), sum(accs) / len(accs)


def evaluate_first_batch(model, split):
    return _scores(model, [next(iter(loader(split)))])


def evaluate_swapped(model, split):
    loss, acc = _scores(model, loader(split, batch_size=500))
    return acc, loss


def evaluate_tensors(model, split):
    model.eval()
    with torch.no_grad():
        logits, labels = zip(*[(model(x), y) for x, y in loader(split, batch_size=500)])
    logits, labels = torch.cat(logits), torch.cat(labels)
    return F.cross_entropy(logits, labels), (logits.argmax(-1) == labels).float().mean()


def evaluate_percent(model, split):
    loss, acc = _scores(model, loader(split, batch_size=500))
    return loss, 100 * acc


def evaluate_raw_pixels(model, split):
    images, labels = splits[split]  # the notebook's uint8 digits, neither scaled nor normalised
    return _scores(model, [(images.float(), labels)])


# A3, Part 6: cls_attention (4 points: which weights 2, as the softmax gave them 1, another grid 1)


def _grid_of(model, rows):
    return rows.reshape(rows.shape[0], *model.patch_embed.grid_size)


def cls_first_block(model, images):
    return _grid_of(model, model.attention_maps(images)[0, :, :, 0, 1:].mean(dim=1))


def cls_head_0(model, images):
    return _grid_of(model, model.attention_maps(images)[-1][:, 0, 0, 1:])


def cls_transposed(model, images):
    return _grid_of(model, model.attention_maps(images)[-1, :, :, 0, 1:].mean(1)).mT


def cls_column_kept(model, images):
    return _grid_of(model, model.attention_maps(images)[-1, :, :, 0, :-1].mean(1))


def cls_column_to_cls(model, images):
    return _grid_of(model, model.attention_maps(images)[-1, :, :, 1:, 0].mean(1))


def cls_max_over_heads(model, images):
    return _grid_of(model, model.attention_maps(images)[-1, :, :, 0, 1:].max(dim=1).values)


def cls_mean_over_blocks(model, images):
    return _grid_of(model, model.attention_maps(images)[:, :, :, 0, 1:].mean(dim=(0, 2)))


def cls_renormalised(model, images):
    rows = model.attention_maps(images)[-1, :, :, 0, 1:].mean(1)
    return _grid_of(model, rows / rows.sum(-1, keepdim=True))


def cls_summed_over_heads(model, images):
    return _grid_of(model, model.attention_maps(images)[-1, :, :, 0, 1:].sum(1))


def cls_grid_4(model, images):
    return model.attention_maps(images)[-1, :, :, 0, 1:].mean(1).reshape(len(images), 4, 4)


# ---------------------------------------------------------------------------------------------------
# The table: assignment, graded function, the form, the hint words it must get, the points it keeps

AXIS, UNIFORM = r"softmax ran over the (wrong axis|queries axis)", r"every key is masked got uniform weights"
CATALOGUE = [
    Form(A1, "attention_weights", weights_over_queries, r"softmax ran over the queries axis \(dim=-2\)", 0),
    Form(A1, "attention_weights", weights_over_heads, r"softmax ran over the heads axis \(dim=1 or -3\)", 0),
    Form(A1, "attention_weights", weights_einsum_no_scale, r"scale is missing", 0),
    Form(A1, "attention_weights", weights_divided_by_dk, r"divided by d_k = 8", 0),
    Form(A1, "attention_weights", weights_keys_first, r"compared the keys with the queries \(k @ q\^T\)", 0),
    Form(A1, "attention_weights", weights_log_softmax, r"log-probabilities \(log_softmax\)", 0),
    Form(A1, "attention_weights", weights_sigmoid, r"you used a sigmoid", 0),
    Form(A1, "attention_weights", weights_k_dot_t, r"k\.transpose\(-2, -1\) rather than k\.T", 0),
    Form(A1, "attention_weights", weights_naive_softmax, r"numerically unstable", 2, slip=True),
    Form(A1, "attention_weights", weights_sqrt_8, r"size is hard-coded.*1 / sqrt\(8\) although d_k = 5", 2, slip=True),
    Form(A1, "attention_weights", weights_4d_only, r"number of axes assumed.*raises an error for q \(4, 5, 5\)", 2,
         slip=True),
    Form(A1, "attention", attention_transposed_weights, r"\*transposed\* weights", 0),
    Form(A1, "attention", attention_scaled_by_d_v, r"4 is d_v, the width of the values", 0),
    Form(A1, "attention", attention_over_queries, r"wrong axis \(dim=-2, the queries\)", 0),
    Form(A1, "attention", attention_no_softmax, r"softmax is missing", 0),
    Form(A1, "attention", attention_no_scale, r"scale is missing", 0),
    Form(A1, "attention", attention_over_queries_no_scale,
         r"two mistakes at once: the softmax runs over the queries axis.*the scale is missing", 0),
    Form(A1, "attention", attention_naive_softmax, r"numerically unstable", 1, slip=True),
    Form(A1, "attention", attention_sqrt_8, r"size is hard-coded.*1 / sqrt\(8\) although d_k = 5", 1, slip=True),
    Form(A1, "masked_attention", masked_fill_finite, UNIFORM, 2, slip=True),
    Form(A1, "masked_attention", masked_fill_lowest_float, UNIFORM, 2, slip=True),
    Form(A1, "masked_attention", masked_added_finite, UNIFORM, 2, slip=True),
    Form(A1, "masked_attention", masked_filled_before_the_scale, UNIFORM, 2, slip=True),
    Form(A1, "masked_attention", masked_added_moderate, r"every key is masked attends to all its keys", 2, slip=True),
    Form(A1, "masked_attention", masked_nan_rows, r"every key is masked gets NaN", 2, slip=True),
    Form(A1, "masked_attention", masked_inverted_fill, r"mask is inverted", 0),
    Form(A1, "masked_attention", masked_inverted_added, r"mask is inverted", 0),
    Form(A1, "masked_attention", masked_inverted_subtracted, r"mask is inverted", 0),
    Form(A1, "masked_attention", masked_inverted_where, r"mask is inverted", 0),
    Form(A1, "masked_attention", masked_inverted_where_finite, r"mask is inverted", 0),
    Form(A1, "masked_attention", masked_not_assigned, r"mask is ignored", 0),
    Form(A1, "masked_attention", masked_on_queries, r"mask is applied to the queries", 0),
    Form(A1, "masked_attention", masked_after_softmax, r"zeroed the masked weights \*after\* the softmax", 0),
    Form(A1, "masked_attention", masked_multiplied, r"multiplied the logits by the mask", 0),
    Form(A1, "masked_attention", masked_zero_times_inf, r"0 x -inf is NaN", 0),
    Form(A1, "masked_attention", masked_no_scale, r"scale is missing", 0),
    Form(A1, "masked_attention", masked_over_queries, AXIS, 0),
    Form(A1, "single_head", head_scaled_by_width, r"scaled by sqrt\(D\) = sqrt\(12\)", 0),
    Form(A1, "single_head", head_q_k_swapped, r"queries and keys are swapped", 0),
    Form(A1, "single_head", head_values_from_w_k, r"values are wrong: you used x @ w_k", 0),
    Form(A1, "single_head", head_no_value_projection, r"did you forget to project the values, v = x @ w_v", 0),
    Form(A1, "single_head", head_transposed_weights, r"so x \(batch, tokens, D\) @ w needs no transpose", 0),
    Form(A1, "single_head", head_scaled_twice, r"divided by d_k = 4.*[Ss]caling twice", 0),
    Form(A1, "single_head", head_over_queries, r"wrong axis \(dim=-2, the queries\)", 0),
    Form(A1, "single_head", head_sqrt_4, r"size is hard-coded.*1 / sqrt\(4\)", 1, slip=True),
    Form(A1, "split_heads", split_plain_reshape, r"reshaped straight to \(batch, heads, tokens, head_dim\)", 0),
    Form(A1, "split_heads", split_interleaved, r"'\(d h\)' order", 0),
    Form(A1, "split_heads", split_transposed_first, r"transposed before the reshape", 0),
    Form(A1, "split_heads", split_not_transposed, r"did not move the heads axis in front of the tokens", 0),
    Form(A1, "split_heads", split_head_width, r"head width is wrong", 0),
    Form(A1, "split_heads", split_stacked_first, r"heads axis is in front of the batch", 0),
    Form(A1, "split_heads", split_three_heads, r"size is hard-coded.*3 heads of width 4.*2 heads of width 5", 1,
         slip=True),
    Form(A1, "merge_heads", merge_plain_reshape, r"merged in the wrong order.*Transpose first", 0),
    Form(A1, "merge_heads", merge_interleaved, r"interleaved them", 0),
    Form(A1, "merge_heads", merge_view, r"use \.reshape\(\.\.\.\) instead of \.view", 0),
    Form(A1, "merge_heads", merge_along_tokens, r"concatenated the heads along the tokens axis", 0),
    Form(A1, "merge_heads", merge_tokens_and_features_swapped, r"swapped tokens and features", 0),
    Form(A1, "merge_heads", merge_width_12, r"size is hard-coded", 1, slip=True),
    Form(A1, "merge_heads", merge_summed_heads, r"combined the heads into one of width head_dim", 0),
    Form(A1, "multi_head_attention", mhsa_scaled_by_width, r"1/sqrt\(D\) = 1/sqrt\(12\), the model width", 0),
    Form(A1, "multi_head_attention", mhsa_no_projection, r"output projection is missing", 0),
    Form(A1, "multi_head_attention", mhsa_split_by_head_dim, r"head width is wrong", 0),
    Form(A1, "multi_head_attention", mhsa_merged_by_reshape, r"heads merged in the wrong order", 0),
    Form(A1, "multi_head_attention", mhsa_k_q_v, r"queries and keys are swapped", 0),
    Form(A1, "multi_head_attention", mhsa_v_k_q, r"wrong slices of self\.qkv\(x\) \(yours: q = slice 3", 0),
    Form(A1, "multi_head_attention", mhsa_one_head, r"whole width went into one head", 0),
    Form(A1, "multi_head_attention", mhsa_heads_interleaved_by_reshape, r"every h-th feature", 0),
    Form(A1, "multi_head_attention", mhsa_scaled_twice, r"divided by d_k = 4.*[Ss]caling twice", 0),
    Form(A1, "multi_head_attention", mhsa_three_heads, r"size is hard-coded.*dim=12, heads=3.*dim=16, heads=2", 3,
         slip=True),
    Form(A2, "patchify", patchify_column_major, r"column-major order", 0),
    Form(A2, "patchify", patchify_with_unfold, r"ordered \(channel, row, column\).*F\.unfold", 0),
    Form(A2, "patchify", patchify_plain_reshape, r"a plain reshape cuts the image", 0),
    Form(A2, "patchify", patchify_columns_first_inside, r"rows and columns inside each patch are swapped", 0),
    Form(A2, "patchify", patchify_tensor_unfold_no_permute, r"patches are cut wrongly", 0),
    Form(A2, "patchify", patchify_channels_last_reshape, r"reshape of the channels-last image", 0),
    Form(A2, "patchify", patchify_strided, r"patches are strided", 0),
    Form(A2, "patchify", patchify_patch_size_4, r"size is hard-coded", 2, slip=True),
    Form(A2, "patchify", patchify_three_channels, r"size is hard-coded", 2, slip=True),
    Form(A2, "unfold_embedding", unfold_kernel_reordered, r"reordered the kernel to \(row, column, channel\)", 0),
    Form(A2, "unfold_embedding", unfold_no_bias, r"bias is missing", 0),
    Form(A2, "unfold_embedding", unfold_not_transposed, r"Tokens and features are swapped", 0),
    Form(A2, "unfold_embedding", unfold_default_stride, r"stride defaults to 1", 0),
    Form(A2, "unfold_embedding", unfold_weight_reshaped, r"kernel was reshaped, not transposed", 0),
    Form(A2, "unfold_embedding", unfold_windows_reshaped, r"windows were reshaped, not transposed", 0),
    Form(A2, "unfold_embedding", unfold_stride_is_kernel, r"size is hard-coded.*pass stride=conv\.stride", 2,
         slip=True),
    Form(A2, "unfold_embedding", unfold_kernel_4, r"size is hard-coded", 2, slip=True),
    Form(A2, "patch_embedding", embed_no_bias, r"bias of the projection is missing", 0),
    Form(A2, "patch_embedding", embed_linear_without_bias, r"bias of the projection is missing", 0),
    Form(A2, "patch_embedding", embed_column_major, r"column-major order", 0),
    Form(A2, "patch_embedding", embed_plain_reshape, r"a plain reshape cuts the image", 0),
    Form(A2, "patch_embedding", embed_with_unfold_order, r"ordered \(channel, row, column\)", 0),
    Form(A2, "patch_embedding", embed_patch_size_4, r"size is hard-coded", 1, slip=True),
    Form(A2, "encoder_block", block_post_norm, r"post-norm", 0),
    Form(A2, "encoder_block", block_no_attention_residual, r"residual connection (around attention )?is missing", 0),
    Form(A2, "encoder_block", block_no_mlp_residual, r"residual connection (around the MLP )?is missing", 0),
    Form(A2, "encoder_block", block_norm1_twice, r"norm1 before the MLP", 1),
    Form(A2, "encoder_block", block_parallel, r"MLP sees the block's input", 2),
    Form(A2, "encoder_block", block_norm_on_outputs, r"LayerNorms to the outputs of the branches", 0),
    Form(A2, "encoder_block", block_normalised_skip, r"skip connection carries the normalised tokens", 0),
    Form(A2, "encoder_block", block_tuple_not_unpacked, r"return a pair \(output, attention weights or None\)", 0),
    Form(A2, "encoder_block", block_no_norms, r"LayerNorms are missing", 0),
    Form(A2, "vit_forward", vit_no_positions, r"position embeddings are not added", 1),
    Form(A2, "vit_forward", vit_no_blocks, r"encoder blocks never run", 1),
    Form(A2, "vit_forward", vit_cls_appended, r"\[CLS\] token is at the wrong end", 1),
    Form(A2, "vit_forward", vit_mean_pooling, r"averaged all tokens", 1),
    Form(A2, "vit_forward", vit_positions_twice, r"position embeddings are added twice", 1),
    Form(A2, "vit_forward", vit_first_block_only, r"only the first block runs", 1),
    Form(A2, "vit_forward", vit_cls_not_expanded, r"expand it to the batch first", 0),
    Form(A2, "vit_forward", vit_every_token, r"logits for every token", 0),
    Form(A2, "vit_forward", vit_first_patch, r"classify token 1, the first patch", 1),
    Form(A2, "vit_forward", vit_zeros_for_cls, r"prepended zeros instead of the learned \[CLS\] token", 1),
    Form(A3, "accuracy", accuracy_tensor, r"return a Python float", 1, slip=True),
    Form(A3, "accuracy", accuracy_numpy, r"return a Python float", 1, slip=True),
    Form(A3, "accuracy", accuracy_batch_axis, r"arg-max over the batch axis \(dim=0\)", 0),
    Form(A3, "accuracy", accuracy_percent, r"percentage", 0),
    Form(A3, "accuracy", accuracy_count, r"number of right predictions", 0),
    Form(A3, "accuracy", accuracy_bool_mean, r"booleans, which has no mean", 0),
    Form(A3, "accuracy", accuracy_error_rate, r"error rate", 0),
    Form(A3, "accuracy", accuracy_integer_division, r"accuracy is 0 although.*integer division", 0),
    Form(A3, "accuracy", accuracy_max_values, r"accuracy is 0 although.*largest logit \*values\*", 0),
    Form(A3, "train_epoch", epoch_no_zero_grad, r"gradients accumulate", 0, run_keeps=0),
    Form(A3, "train_epoch", epoch_step_before_backward, r"optimizer\.step\(\) comes before loss\.backward\(\)", 0,
         run_keeps=0),
    Form(A3, "train_epoch", epoch_step_between_forward_and_backward,
         r"optimizer\.step\(\) changed the weights in place after the forward pass", 0, run_keeps=0),
    Form(A3, "train_epoch", epoch_no_step, r"call optimizer\.step\(\) after loss\.backward\(\)", 0, run_keeps=0),
    Form(A3, "train_epoch", epoch_zero_grad_before_step, r"cleared before the step used them", 0, run_keeps=0),
    Form(A3, "train_epoch", epoch_summed_loss, r"summed over the batch \(reduction='sum'\)", 0, run_keeps=2),
    Form(A3, "train_epoch", epoch_softmax_before_loss, r"softmax before F\.cross_entropy", 0, run_keeps=2),
    Form(A3, "train_epoch", epoch_own_optimizer, r"without calling optimizer\.step\(\) of the optimizer passed in", 0,
         run_keeps=0),
    Form(A3, "train_epoch", epoch_no_train_mode, r"left the model in eval mode", 3, slip=True, run_keeps=2),
    Form(A3, "train_epoch", epoch_mean_of_batch_means, r"mean of the batch losses", 3, slip=True, run_keeps=2),
    Form(A3, "train_epoch", epoch_returns_a_tensor, r"returned a tensor; return a Python float", 3, slip=True,
         run_keeps=2),
    Form(A3, "evaluate", evaluate_always_train, r"scored the training images, not the validation images", 0),
    Form(A3, "evaluate", evaluate_always_val, r"scored the validation images, not the test images", 0),
    Form(A3, "evaluate", evaluate_swapped, r"return them the other way round", 0),
    Form(A3, "evaluate", evaluate_percent, r"accuracy as a percentage", 0),
    Form(A3, "evaluate", evaluate_raw_pixels, r"not the digits as the notebook's loader serves them", 0),
    Form(A3, "evaluate", evaluate_no_eval_mode, r"ran the model in training mode: call model\.eval\(\)", 1, slip=True),
    Form(A3, "evaluate", evaluate_with_gradients, r"with gradients on: wrap the evaluation in torch\.no_grad\(\)", 1,
         slip=True),
    Form(A3, "evaluate", evaluate_mean_of_batch_means, r"mean of the per-batch values", 1, slip=True),
    Form(A3, "evaluate", evaluate_first_batch, r"only the first batch", 1, slip=True),
    Form(A3, "evaluate", evaluate_tensors, r"return two Python floats", 1, slip=True),
    Form(A3, "cls_attention", cls_first_block, r"first block's attention", 0),
    Form(A3, "cls_attention", cls_head_0, r"head 0 only", 0),
    Form(A3, "cls_attention", cls_transposed, r"grid is transposed", 0),
    Form(A3, "cls_attention", cls_column_kept, r"kept the \[CLS\] column", 0),
    Form(A3, "cls_attention", cls_column_to_cls, r"attention \*to\* \[CLS\]", 0),
    Form(A3, "cls_attention", cls_max_over_heads, r"largest weight over the heads", 0),
    Form(A3, "cls_attention", cls_mean_over_blocks, r"averaged over the blocks too", 0),
    Form(A3, "cls_attention", cls_renormalised, r"renormalised over the patches", 2, slip=True),
    Form(A3, "cls_attention", cls_summed_over_heads, r"you summed over the heads", 2, slip=True),
    Form(A3, "cls_attention", cls_grid_4, r"size is hard-coded", 3, slip=True),
]


# ---------------------------------------------------------------------------------------------------
# Right solutions in other written forms: every point kept


def weights_einsum(q, k):
    return torch.einsum("...qd,...kd->...qk", q, k / math.sqrt(k.shape[-1])).softmax(-1)


def masked_where(q, k, v, mask):
    logits = torch.where(mask, _logits(q, k), INF)
    weights = logits.softmax(-1)
    return torch.where(mask.any(-1, keepdim=True), weights, 0.0) @ v


def masked_added_log(q, k, v, mask):
    return (_logits(q, k) + mask.float().log()).softmax(-1).nan_to_num(0.0) @ v


def patchify_rearranged_by_unfold(images, patch_size):
    b, c, h, w = images.shape
    x = images.unfold(2, patch_size, patch_size).unfold(3, patch_size, patch_size)  # b c gh gw p1 p2
    return x.permute(0, 2, 3, 4, 5, 1).reshape(b, -1, patch_size * patch_size * c)


def epoch_zero_grad_last(model, batches, optimizer):
    model.train()
    total, seen = 0.0, 0
    for images, labels in batches:
        loss = F.cross_entropy(model(images), labels)
        loss.backward()
        optimizer.step()
        model.zero_grad()
        total += loss.item() * len(labels)
        seen += len(labels)
    return total / seen


def evaluate_weighted(model, split):
    model.eval()
    loss_sum, right, seen = 0.0, 0.0, 0
    with torch.no_grad():
        for x, y in loader(split, batch_size=64):
            logits = model(x)
            loss_sum += F.cross_entropy(logits, y, reduction="sum").item()
            right += accuracy(logits, y) * len(y)
            seen += len(y)
    return loss_sum / seen, right / seen


RIGHT = [
    Form(A1, "attention_weights", weights_einsum, "", 3),
    Form(A1, "masked_attention", masked_where, "", 3),
    Form(A1, "masked_attention", masked_added_log, "", 3),
    Form(A2, "patchify", patchify_rearranged_by_unfold, "", 3),
    Form(A3, "train_epoch", epoch_zero_grad_last, "", 4),
    Form(A3, "evaluate", evaluate_weighted, "", 2),
]


# ---------------------------------------------------------------------------------------------------
# Grading a form: the source notebook's cells, run in a fresh namespace


def _nbgrader(cell) -> dict:
    return cell.metadata.get("nbgrader", {})


@dataclass
class Cell:
    grade_id: str
    points: int
    source: str


class Assignment:
    """A source notebook read once: its setup cells, solution cells and graded cells, by part."""

    def __init__(self, name: str) -> None:
        nb = nbformat.read(SOURCE / name / f"{name}.ipynb", as_version=4)
        self.setup: list[str] = []  # the code cells before Part 1, but the Colab install cell
        self.solutions: dict[str, str] = {}  # grade_id -> source
        self.graded: dict[str, list[Cell]] = {}  # function -> its graded cells (after its solution, in its part)
        self.part_of: dict[str, str] = {}  # function -> its part's number
        self.ungraded: dict[str, list[str]] = {}  # part -> its other code cells (A3's Part 4: the training run)
        self.graded_in_part: dict[str, list[Cell]] = {}  # part -> all its graded code cells
        part, function, started = None, None, False
        for cell in nb.cells:
            heading = re.match(r"## Part (\d+):", cell.source) if cell.cell_type == "markdown" else None
            if heading:
                part, function, started = heading[1], None, True
            elif cell.cell_type == "markdown" and cell.source.startswith("## "):
                part, function = None, None
            if cell.cell_type != "code" or cell.source.startswith("import sys\nif"):
                continue
            meta = _nbgrader(cell)
            if part is None:
                if not meta and not started:
                    self.setup.append(cell.source)
                continue
            if meta.get("solution") and not meta.get("grade"):
                function = meta["grade_id"]
                self.solutions[function] = cell.source
                self.part_of[function] = part
                self.graded[function] = []
            elif meta.get("grade") and not meta.get("solution"):
                graded = Cell(meta["grade_id"], meta["points"], cell.source)
                self.graded_in_part.setdefault(part, []).append(graded)
                if function is not None:
                    self.graded[function].append(graded)
            elif not meta:
                self.ungraded.setdefault(part, []).append(cell.source)
        self.name_of = {f: re.search(r"^(?:def|class) (\w+)", src, re.M)[1] for f, src in self.solutions.items()}

    def namespace(self, function: str, form: Callable[..., Any]) -> dict[str, Any]:
        """A fresh namespace with the setup and every model solution run, then ``form`` planted for ``function``."""
        ns: dict[str, Any] = {"__name__": "__main__"}
        for source in [*self.setup, *self.solutions.values()]:
            exec(compile(source, "<cell>", "exec"), ns)
        name = self.name_of[function]
        planted = _plant(form, ns)
        if isinstance(ns[name], type):  # a module of the assignment: the form is its forward
            ns[name] = type(name, (ns[name],), {"forward": planted})
        else:
            ns[name] = planted
        return ns


def _plant(fn: Callable[..., Any], ns: dict[str, Any]) -> Callable[..., Any]:
    """``fn`` with the notebook's globals; the helpers of this module it uses (``_logits``, ``INF``, ...) are
    planted with it, the notebook's own names (torch, F, loader, attention_weights, ...) are the notebook's."""
    for name in fn.__code__.co_names:
        helper = globals().get(name)
        if name not in ns and (isinstance(helper, types.FunctionType) or isinstance(helper, float)):
            ns[name] = _plant(helper, ns) if isinstance(helper, types.FunctionType) else helper
    return types.FunctionType(fn.__code__, ns, fn.__name__, fn.__defaults__, fn.__closure__)


@pytest.fixture(scope="module")
def assignments() -> dict[str, Assignment]:
    return {name: Assignment(name) for name in (A1, A2, A3)}


def grade(ns: dict[str, Any], cells: list[Cell]) -> dict[str, tuple[int, BaseException | None]]:
    """Run the graded cells in order in ``ns``: each earns its points if it raises nothing (nbgrader's rule)."""
    results = {}
    for cell in cells:
        try:
            exec(compile(cell.source, f"<{cell.grade_id}>", "exec"), ns)
        except Exception as err:  # noqa: BLE001 - nbgrader counts any error as a failed cell
            results[cell.grade_id] = (0, err)
        else:
            results[cell.grade_id] = (cell.points, None)
    return results


@contextlib.contextmanager
def quietly():
    """No output, no warnings (plt.show() on Agg), and the threads and random state as they were (A3's setup
    sets one thread)."""
    threads = torch.get_num_threads()
    with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings(), torch.random.fork_rng(devices=[]):
        warnings.simplefilter("ignore")
        try:
            yield
        finally:
            torch.set_num_threads(threads)


@pytest.fixture(autouse=True)
def _agg(monkeypatch):
    monkeypatch.setenv("MPLBACKEND", "Agg")
    import matplotlib

    matplotlib.use("Agg")


def points_of(assignment: Assignment, form: Form) -> dict[str, tuple[int, BaseException | None]]:
    with quietly():
        ns = assignment.namespace(form.function, form.code)
        return grade(ns, assignment.graded[form.function])


@pytest.mark.parametrize("form", CATALOGUE, ids=str)
def test_every_form_gets_its_hint_and_keeps_its_points(form, assignments):
    assignment = assignments[form.assignment]
    results = points_of(assignment, form)
    kept = sum(points for points, _ in results.values())
    failed = {grade_id: err for grade_id, (_, err) in results.items() if err is not None}
    report = "\n".join(f"  {grade_id}: {type(err).__name__}: {err}" for grade_id, err in failed.items())
    assert failed, f"{form}: every graded cell passed"
    sources = {cell.grade_id: cell.source for cell in assignment.graded[form.function]}
    for grade_id, err in failed.items():
        if "check_" in sources[grade_id]:
            assert isinstance(err, CheckFailed), f"{form}: {grade_id} failed without a check naming it:\n{report}"
            assert re.search(form.hint, str(err), re.S), f"{form}: {grade_id} did not name the mistake:\n{report}"
    assert kept == form.keeps, f"{form}: kept {kept} points, the table says {form.keeps}:\n{report}"


@pytest.mark.parametrize("form", RIGHT, ids=str)
def test_a_right_solution_in_another_form_keeps_every_point(form, assignments):
    results = points_of(assignments[form.assignment], form)
    report = {grade_id: f"{type(err).__name__}: {err}" for grade_id, (_, err) in results.items() if err}
    assert sum(points for points, _ in results.values()) == form.keeps, report


def test_the_catalogue_has_five_forms_of_every_graded_function(assignments):
    for name, assignment in assignments.items():
        for function, cells in assignment.graded.items():
            if not cells:
                continue
            forms = [form for form in CATALOGUE if (form.assignment, form.function) == (name, function)]
            assert len(forms) >= 5, f"{name}.{function}: {len(forms)} forms in the catalogue"
            total = sum(cell.points for cell in cells)
            assert all(0 <= form.keeps < total for form in forms), f"{name}.{function}: a form keeps everything"


def test_a_slip_keeps_more_than_a_broken_mechanism():
    """Within each graded function: every edge-case slip keeps more points than every broken mechanism (the
    totals, with the training run for train_epoch); and every function has a slip that keeps something, or no
    slip at all."""
    functions = {(form.assignment, form.function) for form in CATALOGUE}
    for key in functions:
        forms = [form for form in CATALOGUE if (form.assignment, form.function) == key]
        total = [form.keeps + (form.run_keeps or 0) for form in forms]
        slips = [t for form, t in zip(forms, total) if form.slip]
        broken = [t for form, t in zip(forms, total) if not form.slip]
        if slips and broken:
            assert min(slips) > max(broken), f"{key}: slips keep {slips}, broken mechanisms {broken}"


@pytest.mark.slow
@pytest.mark.course  # about 50 s of CPU in all: make course and CI run it, make test leaves it out (its 5 minutes)
@pytest.mark.parametrize("form", [form for form in CATALOGUE if form.run_keeps is not None], ids=str)
def test_a_training_loop_that_does_not_learn_keeps_nothing_of_the_run(form, assignments):
    """Part 4, the training run, with the form as train_epoch: a loop that learns keeps its points (the mistake
    was charged in Part 2), a loop that does not learn keeps none. About 5 s of CPU per form (the real run)."""
    assignment = assignments[A3]
    with quietly():
        ns = assignment.namespace(form.function, form.code)
        with contextlib.suppress(Exception):  # a crashing loop leaves the run unfinished, as in the notebook
            for source in assignment.ungraded["4"]:  # the model, the optimizer, the run
                exec(compile(source, "<run>", "exec"), ns)
        results = grade(ns, assignment.graded_in_part["4"])
    kept = sum(points for points, _ in results.values())
    assert kept == form.run_keeps, {g: f"{type(e).__name__}: {e}" for g, (_, e) in results.items() if e}
