r"""Scaled dot-product attention and multi-head self-attention (Vaswani et al., 2017):

.. math::

    \operatorname{Attention}(Q, K, V) = \operatorname{softmax}\big(Q K^\top / \sqrt{d_k}\big)\, V

One function holds both routes: the explicit maths, which also returns the attention weights (the
T x T matrix the book plots), and PyTorch's fused kernel (``F.scaled_dot_product_attention``), which
is what training uses and, when PyTorch picks its flash or memory-efficient backend (not its "math"
fallback), never materialises that matrix. Tests check that the two agree.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import Tensor, nn


def _check_qkv(q: Tensor, k: Tensor, v: Tensor) -> None:
    if q.dim() < 2 or k.dim() < 2 or v.dim() < 2:
        raise ValueError(
            f"attention expects q, k, v of shape (..., tokens, features); got q {tuple(q.shape)}, "
            f"k {tuple(k.shape)}, v {tuple(v.shape)}. For a single sequence use (tokens, features)."
        )
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"queries and keys must have the same feature size d_k to be compared by a dot product; "
            f"got q (..., {q.shape[-1]}) and k (..., {k.shape[-1]}). Project them to the same size first."
        )
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(
            f"every key needs exactly one value: k has {k.shape[-2]} tokens but v has {v.shape[-2]}. "
            "Keys and values must come from the same sequence."
        )


def scaled_dot_product_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Tensor | None = None,
    dropout_p: float = 0.0,
    need_weights: bool = True,
    scale: float | None = None,
) -> tuple[Tensor, Tensor | None]:
    """Attend from every query to every key and return the weighted sum of values.

    q: (..., queries, d_k)   k: (..., keys, d_k)   v: (..., keys, d_v)
    -> output (..., queries, d_v), weights (..., queries, keys) or None

    ``...`` is any number of leading axes, e.g. (batch, heads). ``mask`` is either boolean (True where
    a query may attend) or additive (added to the logits), broadcastable to (..., queries, keys).
    A query with every key masked gets zero weights and a zero output on both paths (not NaN).
    ``scale`` defaults to 1/sqrt(d_k), which keeps the logits at unit variance when q and k have unit-variance
    entries (chapter 2).
    With ``need_weights=False`` PyTorch's fused kernel runs and the weights are ``None``.
    The returned weights are the softmax output before attention dropout.
    """
    _check_qkv(q, k, v)
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    if not need_weights:
        output = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p, scale=scale)
        return output, None

    logits = (q @ k.transpose(-2, -1)) * scale  # (..., queries, keys)
    if mask is not None:
        logits = logits.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else logits + mask
        # A query whose every key is masked has no distribution to form: softmax of a row of -inf is
        # 0/0 = NaN. Like PyTorch's fused kernel, give such a row zero weights, hence a zero output.
        empty = torch.isneginf(logits).all(dim=-1, keepdim=True)  # (..., queries, 1)
        logits = logits.masked_fill(empty, 0.0)  # finite, so no NaN reaches the backward pass
    weights = logits.softmax(dim=-1)  # each row (one query) sums to one over the keys
    if mask is not None:
        weights = weights.masked_fill(empty, 0.0)
    dropped = F.dropout(weights, p=dropout_p) if dropout_p > 0 else weights
    return dropped @ v, weights  # (..., queries, d_v)


def check_num_heads(dim: int, num_heads: int) -> None:
    """Raise a helpful error unless ``num_heads`` divides ``dim`` (every head gets dim / heads features)."""
    if dim % num_heads:
        divisors = [h for h in range(1, dim + 1) if dim % h == 0]
        raise ValueError(
            f"embed_dim={dim} is not divisible by num_heads={num_heads}: every head needs the same "
            f"size d_k = dim / heads. Choose num_heads from {divisors} (or change embed_dim)."
        )


def split_heads(x: Tensor, num_heads: int) -> Tensor:
    """(batch, tokens, heads * head_dim) -> (batch, heads, tokens, head_dim): head i gets features
    [i * head_dim, (i + 1) * head_dim) of every token (the row layout of timm's ``qkv`` and ``proj``)."""
    return rearrange(x, "b t (h d) -> b h t d", h=num_heads)


def merge_heads(x: Tensor) -> Tensor:
    """(batch, heads, tokens, head_dim) -> (batch, tokens, heads * head_dim): the heads concatenated, head 0's
    features first; the inverse of :func:`split_heads`."""
    return rearrange(x, "b h t d -> b t (h d)")


class AttentionBase(nn.Module):
    """What every attention layer in vitedu shares; the variants override only the step that differs.

    (batch, tokens, dim) -> (batch, queries, dim), weights (batch, heads, queries, keys) or None

    The contract (timm's names): ``num_heads``; ``head_dim`` = d_k = dim / heads; ``scale`` = 1/sqrt(head_dim);
    ``attn_drop``, an ``nn.Dropout`` on the attention weights (only its rate ``attn_drop.p`` reaches the fused
    kernel); ``proj``, the Linear that mixes the concatenated heads, and ``proj_drop`` after it. ``forward`` runs
    three steps, each a method a variant may replace:

    1. ``project(x)`` -> q, k, v, each (batch, heads, tokens, head_dim), cut with :func:`split_heads`;
    2. ``attend(q, k, v, need_weights)`` -> per-head output (batch, heads, queries, head_dim), weights or None;
    3. :func:`merge_heads`, then ``proj`` and ``proj_drop``.

    Subclasses call ``super().__init__`` first, then build their input projections and ``proj`` (in the order of
    timm's modules, so a seeded model starts from the same weights).
    """

    proj: nn.Linear

    def __init__(self, dim: int, num_heads: int, attn_drop: float = 0.0, proj_drop: float = 0.0,
                 fused_attn: bool = True) -> None:
        super().__init__()
        check_num_heads(dim, num_heads)
        self.num_heads = num_heads
        self.head_dim = dim // num_heads
        self.scale = self.head_dim**-0.5  # 1/sqrt(d_k), with d_k the *head* size, not dim
        self.fused_attn = fused_attn
        self.attn_drop = nn.Dropout(attn_drop)
        self.proj_drop = nn.Dropout(proj_drop)

    def project(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """(batch, tokens, dim) -> q, k, v, each (batch, heads, tokens, head_dim)."""
        raise NotImplementedError(f"{type(self).__name__} must define project(x) -> q, k, v")

    def attend(self, q: Tensor, k: Tensor, v: Tensor, need_weights: bool = False) -> tuple[Tensor, Tensor | None]:
        r"""$\operatorname{softmax}(q k^\top \cdot \mathrm{scale})\, v$ per head, with dropout on the weights in
        training; the fused kernel unless the weights are needed or ``fused_attn`` is off.
        -> (batch, heads, queries, head_dim), weights or None"""
        return scaled_dot_product_attention(
            q, k, v,
            dropout_p=self.attn_drop.p if self.training else 0.0,
            need_weights=need_weights or not self.fused_attn,
            scale=self.scale,
        )

    def forward(self, x: Tensor, need_weights: bool = False) -> tuple[Tensor, Tensor | None]:
        q, k, v = self.project(x)  # each (batch, heads, tokens, head_dim)
        x, weights = self.attend(q, k, v, need_weights=need_weights)
        x = self.proj_drop(self.proj(merge_heads(x)))  # concatenate the heads and mix them: (batch, queries, dim)
        return x, weights if need_weights else None


class MultiHeadSelfAttention(AttentionBase):
    """h attention heads of size d_k = dim / h, computed in parallel and mixed by an output projection.

    (batch, tokens, dim) -> (batch, tokens, dim), weights (batch, heads, tokens, tokens) or None

    Layout as in timm: one fused ``qkv`` Linear whose output is [q | k | v], each split into heads as
    (heads, head_dim) - the same row layout as ``nn.MultiheadAttention.in_proj_weight`` - and a
    ``proj`` Linear that mixes the concatenated heads. Splitting into heads adds no parameters.
    """

    def __init__(
        self,
        dim: int,
        num_heads: int,
        qkv_bias: bool = True,
        attn_drop: float = 0.0,
        proj_drop: float = 0.0,
        fused_attn: bool = True,
    ) -> None:
        super().__init__(dim, num_heads, attn_drop=attn_drop, proj_drop=proj_drop, fused_attn=fused_attn)
        self.qkv = nn.Linear(dim, 3 * dim, bias=qkv_bias)
        self.proj = nn.Linear(dim, dim)

    def project(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        q, k, v = (split_heads(part, self.num_heads) for part in self.qkv(x).chunk(3, dim=-1))  # [q | k | v]
        return q, k, v
