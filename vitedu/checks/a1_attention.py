"""Assignment 1: scaled dot-product attention, one head, many heads (chapters 1-3).

See ``vitedu.checks`` for what each check diagnoses by name. Every check takes ``only="values"``: the first
configuration alone (one set of sizes, small logits), for the graded cell that gives the points of a right
computation; without it the check also runs other sizes (a size written in as a number fails there) and, for
the attention weights, large logits. The masked attention check is in ``a1_masking``.
"""

from __future__ import annotations

import itertools
from typing import Callable, Iterator

import torch
from einops import rearrange
from torch import Tensor, nn

from ..attention import MultiHeadSelfAttention, scaled_dot_product_attention
from ..attention import merge_heads as reference_merge_heads
from ..attention import split_heads as reference_split_heads
from .a1_family import (
    BATCH_HINT,
    diagnose_weights,
    fit_the_scale,
    hardcoded_scale_variants,
    scale_mistakes,
    sdpa,
    softmax_axis,
    structure_variants,
    token_sizes,
)
from .diagnosis import (
    aspect,
    build_student,
    check_large_logits,
    check_shape,
    close,
    diagnose,
    other_sizes,
    passed,
    randn,
    resolve_device,
    run_student,
    tensor_out,
)

AXES_4D = ("batch", "heads", "queries", "keys")
AXES_3D = ("batch", "queries", "keys")


def check_attention_weights(attention_weights: Callable[[Tensor, Tensor], Tensor], device=None,
                            only: str | None = None) -> None:
    """Check ``attention_weights(q, k)`` = softmax(q k^T / sqrt(d_k)) over the keys.

    q: (..., queries, d_k), k: (..., keys, d_k) -> (..., queries, keys); every row sums to one.
    ``only="values"``: 4-D self-attention inputs only (no other sizes, no large logits).
    """
    only = aspect(only, ("values",), "check_attention_weights")
    device, gen, what = resolve_device(device), torch.Generator().manual_seed(1), "attention_weights(q, k)"
    # Square (self-attention) first: mistakes that swap axes then change values instead of crashing.
    q, k = (randn(gen, 2, 3, 6, 8, device=device) * 1.5 for _ in range(2))
    got = tensor_out(run_student(attention_weights, q, k, what=what, hint=BATCH_HINT), what)
    check_shape(got, (2, 3, 6, 6), AXES_4D, what)
    diagnose_weights(got, q, k, what, AXES_4D, token_sizes(q, k), hardcoded=True)
    if only == "values":
        passed("check_attention_weights", "the values: rows sum to one and match vitedu for 4-D self-attention "
               "inputs (batch, heads, tokens, d_k)")
        return
    # Cross-attention shapes: fewer queries than keys, leading axes of another length, another d_k.
    q, k = randn(gen, 4, 5, 5, device=device), randn(gen, 4, 7, 5, device=device)

    def cross() -> None:
        got = tensor_out(run_student(attention_weights, q, k, what=what, hint=BATCH_HINT), what)
        check_shape(got, (4, 5, 7), AXES_3D, what, hints={
            (4, 7, 5): "One row per key instead of one per query: compute q @ k.transpose(-2, -1), not k @ q^T."})
        diagnose_weights(got, q, k, what, AXES_3D, token_sizes(q, k), hardcoded=True)

    other_sizes("q, k of shape (2, 3, 6, 8)", "q (4, 5, 5), k (4, 7, 5)", cross)
    big_q, big_k = 30 * q, 30 * k  # logits in the hundreds: a trained model's attention can be this sharp
    check_large_logits(attention_weights, (big_q, big_k), sdpa(big_q, big_k), big_q @ big_k.mT / 5**0.5, what)
    passed("check_attention_weights", "rows sum to one and match vitedu for self- and cross-attention shapes, "
           "several d_k, and large logits")


def _diagnose_attention(attention: Callable[..., Tensor], got: Tensor, q: Tensor, k: Tensor, v: Tensor,
                        what: str, axes: tuple[str, ...], hardcoded: bool) -> None:
    """Compare attention(q, k, v) with vitedu and name the mistake: the family's (one or two at a time), a
    fitted scale, and otherwise whatever is wrong with the weights the student's code uses, read off by
    handing it v = the identity (each output row is then that query's row of weights)."""

    def row_sums() -> str:  # with v = ones, every output entry is the sum of one row of the weights
        sums = tensor_out(run_student(attention, q, k, torch.ones_like(v), what=what), what)[..., 0]
        return f"{sums.min().item():.2f}...{sums.max().item():.2f}"

    def variants() -> Iterator[tuple[str, Callable[[], Tensor]]]:
        yield from structure_variants(q, k, v, axes, transposed_weights=True, sums=row_sums)
        if hardcoded:
            yield from hardcoded_scale_variants(q, k, v)

    def weights_used() -> None:
        eye = torch.eye(k.shape[-2], device=v.device, dtype=v.dtype).expand(*k.shape[:-1], k.shape[-2])
        weights = tensor_out(run_student(attention, q, k, eye, what=what), what)
        if weights.shape == (*q.shape[:-1], k.shape[-2]) and close(got, weights.to(v) @ v):
            diagnose_weights(weights, q, k, f"{what}, in its attention weights", axes, token_sizes(q, k))

    diagnose(got, scaled_dot_product_attention(q, k, v)[0], variants(), what,
             fit=fit_the_scale(lambda s: sdpa(q, k, v, scale=s), q.shape[-1], token_sizes(q, k, v), what),
             fallback=weights_used)


def check_attention(attention: Callable[[Tensor, Tensor, Tensor], Tensor], device=None,
                    only: str | None = None) -> None:
    """Check ``attention(q, k, v)`` = softmax(q k^T / sqrt(d_k)) v.

    q: (..., queries, d_k), k: (..., keys, d_k), v: (..., keys, d_v) -> (..., queries, d_v).
    (A returned tuple (values, weights) is accepted; its first element is checked.)
    ``only="values"``: 4-D self-attention inputs only (no other sizes, no large logits).
    """
    only = aspect(only, ("values",), "check_attention")
    device, gen, what = resolve_device(device), torch.Generator().manual_seed(2), "attention(q, k, v)"
    # d_v = 4, not d_k = 8: a scale by the width of the values is then visibly wrong from the start.
    q, k, v = (randn(gen, 2, 3, 6, d, device=device) * 1.5 for d in (8, 8, 4))
    got = tensor_out(run_student(attention, q, k, v, what=what, hint=BATCH_HINT), what)
    check_shape(got, (2, 3, 6, 4), ("batch", "heads", "queries", "d_v"), what)
    _diagnose_attention(attention, got, q, k, v, what, AXES_4D, hardcoded=False)
    if only == "values":
        passed("check_attention", "the values: matches vitedu.scaled_dot_product_attention for 4-D "
               "self-attention inputs with d_v != d_k")
        return
    q, k = randn(gen, 4, 5, 5, device=device), randn(gen, 4, 7, 5, device=device)
    v = randn(gen, 4, 7, 3, device=device)

    def cross() -> None:
        got = tensor_out(run_student(attention, q, k, v, what=what, hint=BATCH_HINT), what)
        check_shape(got, (4, 5, 3), ("batch", "queries", "d_v"), what)
        _diagnose_attention(attention, got, q, k, v, what, AXES_3D, hardcoded=True)

    other_sizes("q, k, v of shape (2, 3, 6, 8)", "q (4, 5, 5), k (4, 7, 5), v (4, 7, 3)", cross)
    big = (30 * q, 30 * k, v)
    check_large_logits(attention, big, sdpa(*big), big[0] @ big[1].mT / 5**0.5, what)
    passed("check_attention", "matches vitedu.scaled_dot_product_attention for self- and cross-attention shapes, "
           "several d_k, and large logits")


def check_single_head(single_head: Callable[..., Tensor], device=None, only: str | None = None) -> None:
    """Check ``single_head(x, w_q, w_k, w_v)``: one attention head on the token matrix x.

    x: (batch, tokens, D), w_q / w_k / w_v: (D, d_k) -> (batch, tokens, d_k), with d_k < D.
    ``only="values"``: (D, d_k) = (12, 4) only.
    """
    only = aspect(only, ("values",), "check_single_head")
    device, gen, what = resolve_device(device), torch.Generator().manual_seed(3), "single_head(x, w_q, w_k, w_v)"

    def one(dim: int, d_k: int, tokens: int) -> None:
        x = randn(gen, 2, tokens, dim, device=device)
        w_q, w_k, w_v = (randn(gen, dim, d_k, device=device) for _ in range(3))
        got = tensor_out(run_student(single_head, x, w_q, w_k, w_v, what=what, hint=(
            "Project with x @ w_q, x @ w_k, x @ w_v: each w has shape (D, d_k) = "
            f"({dim}, {d_k}) as given, so x (batch, tokens, D) @ w needs no transpose.")), what)
        check_shape(got, (2, tokens, d_k), ("batch", "tokens", "d_k"), what, hints={
            (2, tokens, dim): "The last axis has the model width D: did you forget to project the values, "
            "v = x @ w_v?",
            (2, tokens, tokens): "You returned the attention weights (tokens x tokens); return weights @ v."})
        q, k, v = x @ w_q, x @ w_k, x @ w_v

        def variants() -> Iterator[tuple[str, Callable[[], Tensor]]]:
            yield (f"you scaled by sqrt(D) = sqrt({dim}), the width of the token vectors. The scale is "
                   f"1 / sqrt(d_k) with d_k = {d_k} the size of one query or key: use q.shape[-1], not x.shape[-1].",
                   lambda: sdpa(q, k, v, scale=dim**-0.5))
            yield ("queries and keys are swapped (q = x @ w_k, k = x @ w_q, which transposes the logits): use "
                   "q = x @ w_q and k = x @ w_k, and compare them as q @ k^T.",
                   lambda: sdpa(q, k, v, keys_first=True))
            for name, other in (("w_q", q), ("w_k", k)):
                yield (f"the values are wrong: you used x @ {name} as the values; use v = x @ w_v.",
                       lambda other=other: sdpa(q, k, other))
            yield ("the values are not projected: you took x itself as the values. Use v = x @ w_v.",
                   lambda: sdpa(q, k, x))
            yield from structure_variants(q, k, v, AXES_3D)
            yield from hardcoded_scale_variants(q, k, v)

        sizes = {**token_sizes(q, k), "D, the width of the token vectors (x.shape[-1])": dim}
        diagnose(got, scaled_dot_product_attention(q, k, v)[0], variants(), what,
                 fit=fit_the_scale(lambda s: sdpa(q, k, v, scale=s), d_k, sizes, what))

    one(12, 4, 6)  # sqrt(D) is not d_k: a scale by sqrt(D) and one by d_k (scaled twice) differ
    if only == "values":
        passed("check_single_head", "the values: matches vitedu for (D, d_k) = (12, 4)")
        return
    other_sizes("D=12, d_k=4", "D=10, d_k=5", lambda: one(10, 5, 7))
    passed("check_single_head", "matches vitedu for (D, d_k) = (12, 4) and (10, 5)")


def _split(x: Tensor, heads: int, pattern: str = "b t (h d) -> b h t d") -> Tensor:
    return rearrange(x, pattern, h=heads)


def check_multi_head_split(split_heads: Callable[[Tensor, int], Tensor], device=None, only: str | None = None) -> None:
    """Check ``split_heads(x, num_heads)``: (batch, tokens, dim) -> (batch, heads, tokens, dim / heads).

    Head i gets the contiguous slice of features x[..., i * d_k:(i + 1) * d_k].
    ``only="values"``: 3 heads of width 4 only.
    """
    only = aspect(only, ("values",), "check_multi_head_split")
    device, gen, what = resolve_device(device), torch.Generator().manual_seed(4), "split_heads(x, num_heads)"

    def one(batch: int, tokens: int, heads: int, d_k: int) -> None:
        x = randn(gen, batch, tokens, heads * d_k, device=device)
        got = tensor_out(run_student(split_heads, x, heads, what=what), what)
        check_shape(got, (batch, heads, tokens, d_k), ("batch", "heads", "tokens", "head_dim"), what, hints={
            (batch, tokens, heads, d_k): "You split the features but did not move the heads axis in front of the "
            "tokens: add .transpose(1, 2) (einops: 'b t (h d) -> b h t d').",
            (batch, heads, d_k, tokens): "The last two axes are swapped: tokens come before head_dim.",
            (batch, d_k, tokens, heads): "The head width is wrong: you made heads of width num_heads "
            f"({heads}); each head must be d_k = dim / num_heads = {d_k} wide. Reshape the last axis as "
            "(num_heads, dim // num_heads).",
            (heads, batch, tokens, d_k): "The heads axis is in front of the batch (as torch.stack(..., dim=0) puts "
            "it): the order is (batch, heads, tokens, head_dim); stack along dim=1, or reshape and transpose(1, 2).",
        })
        variants = [
            ("you reshaped straight to (batch, heads, tokens, head_dim). That keeps the memory order, so a 'head' "
             "gets features of *several tokens* mixed together. First split the last axis, "
             "x.reshape(batch, tokens, heads, head_dim), then move the heads forward with .transpose(1, 2).",
             lambda: x.reshape(batch, heads, tokens, d_k)),
            ("you transposed before the reshape: x.transpose(1, 2) puts the features first, so the reshape to "
             "(batch, heads, tokens, head_dim) cuts the (dim, tokens) grid into pieces that mix features and "
             "tokens. Reshape first, while each token's features are still together, then transpose: "
             "x.reshape(batch, tokens, heads, head_dim).transpose(1, 2).",
             lambda: x.transpose(1, 2).reshape(batch, heads, tokens, d_k)),
            ("head i must get the contiguous slice of features x[..., i*d_k:(i+1)*d_k]; you gave it every "
             f"{heads}-th feature (the '(d h)' order). Reshape the last axis as (heads, head_dim), not "
             "(head_dim, heads).",
             lambda: _split(x, heads, "b t (d h) -> b h t d")),
        ]
        diagnose(got, reference_split_heads(x, heads), variants, what)

    one(2, 5, 3, 4)
    if only == "values":
        passed("check_multi_head_split", "the values: (batch, tokens, dim) -> (batch, heads, tokens, head_dim), "
               "heads in order, for 3 heads of 4 features")
        return
    other_sizes("3 heads of width 4", "2 heads of width 5", lambda: one(1, 4, 2, 5))
    passed("check_multi_head_split", "(batch, tokens, dim) -> (batch, heads, tokens, head_dim), heads in order, "
           "for 3 heads of 4 and 2 heads of 5 features")


def check_multi_head_merge(merge_heads: Callable[[Tensor], Tensor], device=None, only: str | None = None) -> None:
    """Check ``merge_heads(x)``: (batch, heads, tokens, head_dim) -> (batch, tokens, heads * head_dim).

    The inverse of splitting: head 0's features first, then head 1's, ... (concatenation of the heads).
    ``only="values"``: 3 heads of width 4 only.
    """
    only = aspect(only, ("values",), "check_multi_head_merge")
    device, gen, what = resolve_device(device), torch.Generator().manual_seed(5), "merge_heads(x)"

    def one(batch: int, heads: int, tokens: int, d_k: int) -> None:
        x = randn(gen, batch, heads, tokens, d_k, device=device)
        got = tensor_out(run_student(merge_heads, x, what=what), what)
        check_shape(got, (batch, tokens, heads * d_k), ("batch", "tokens", "dim"), what, hints={
            (batch, heads, tokens * d_k): "You merged tokens with head_dim; move the heads axis behind the tokens "
            "first: x.transpose(1, 2), then reshape to (batch, tokens, heads * head_dim).",
            (batch, heads * tokens, d_k): "You concatenated the heads along the tokens axis: each token must get "
            "all heads' features side by side, torch.cat(list of heads, dim=-1) (or transpose(1, 2) and reshape).",
            (batch, tokens, d_k): "You combined the heads into one of width head_dim (a sum or a mean over the heads "
            "axis): concatenate them instead, x.transpose(1, 2).reshape(batch, tokens, heads * head_dim)."})
        variants = [
            ("heads merged in the wrong order: you reshaped (batch, heads, tokens, head_dim) straight to "
             "(batch, tokens, dim), which mixes the features of different tokens. Transpose first: "
             "x.transpose(1, 2).reshape(batch, tokens, heads * head_dim).",
             lambda: x.reshape(batch, tokens, heads * d_k)),
            ("heads merged in the wrong order: the features of head 0 must come first (dim[0:d_k]), then head 1, "
             "...; you interleaved them (the '(d h)' order). Use 'b h t d -> b t (h d)'.",
             lambda: rearrange(x, "b h t d -> b t (d h)")),
            ("you swapped tokens and features (transpose(2, 3)) before the reshape, which mixes the tokens. "
             "Move the heads behind the tokens instead: x.transpose(1, 2).reshape(batch, tokens, heads * head_dim).",
             lambda: x.transpose(2, 3).reshape(batch, tokens, heads * d_k)),
        ]
        diagnose(got, reference_merge_heads(x), variants, what)

    one(2, 3, 5, 4)
    if only == "values":
        passed("check_multi_head_merge", "the values: (batch, heads, tokens, head_dim) -> (batch, tokens, dim), "
               "heads concatenated in order, for 3 heads of 4 features")
        return
    other_sizes("3 heads of width 4", "2 heads of width 5", lambda: one(1, 2, 4, 5))
    passed("check_multi_head_merge", "(batch, heads, tokens, head_dim) -> (batch, tokens, dim), heads "
           "concatenated in order")


def _mhsa(attn: MultiHeadSelfAttention, x: Tensor, split: str = "qkv h d", merge: str = "h d",
          scale: float | None = None, proj: bool = True, heads: int | None = None, softmax_dim: int = -1,
          order: tuple[int, int, int] = (0, 1, 2), keys_first: bool = False) -> Tensor:
    """Multi-head attention with switchable mistakes, on the weights of ``attn`` (the variants). ``order``:
    which slices of qkv(x) serve as q, k and v."""
    h = attn.num_heads if heads is None else heads
    if split == "view":  # reshape straight to heads, without the transpose
        q, k, v = (t.reshape(x.shape[0], h, x.shape[1], -1) for t in attn.qkv(x).chunk(3, dim=-1))
    elif split == "transpose first":  # transpose (batch, dim, tokens), then reshape to heads
        q, k, v = (t.transpose(1, 2).reshape(x.shape[0], h, x.shape[1], -1) for t in attn.qkv(x).chunk(3, dim=-1))
    else:
        q, k, v = rearrange(attn.qkv(x), f"b t ({split}) -> qkv b h t d", qkv=3, h=h)
    q, k, v = ((q, k, v)[i] for i in order)
    scale = attn.scale if scale is None else scale
    if softmax_dim == -1 and not keys_first:
        out, _ = scaled_dot_product_attention(q, k, v, scale=scale)
    else:
        out = sdpa(q, k, v, scale=scale, softmax_dim=softmax_dim, keys_first=keys_first)
    out = out.reshape(x.shape) if merge == "view" else rearrange(out, f"b h t d -> b t ({merge})")
    return attn.proj(out) if proj else out


def _mhsa_variants(ref: MultiHeadSelfAttention, x: Tensor, dim: int, heads: int) -> Iterator[tuple[str, Callable]]:
    d_k = dim // heads
    yield (f"you scaled the logits by 1/sqrt(D) = 1/sqrt({dim}), the model width. Each head compares queries "
           f"and keys of size d_k = D / h = {d_k}: the scale is 1/sqrt(d_k) (self.head_dim ** -0.5).",
           lambda: _mhsa(ref, x, scale=dim**-0.5))
    yield (f"you scaled the logits by 1/sqrt(h) = 1/sqrt({heads}), the number of heads; the scale uses "
           f"the head width d_k = D / h = {d_k}: 1/sqrt(d_k).",
           lambda: _mhsa(ref, x, scale=heads**-0.5))
    for alone, _, scale in scale_mistakes(d_k):
        yield alone, lambda scale=scale: _mhsa(ref, x, scale=scale)
    yield (f"the head width is wrong: you split into self.head_dim = {d_k} heads of width {heads}. "
           "split_heads takes the *number* of heads: split_heads(t, self.num_heads).",
           lambda: _mhsa(ref, x, heads=d_k, scale=heads**-0.5))
    yield ("heads merged in the wrong order: after attention, move the heads behind the tokens "
           "(transpose(1, 2)) before reshaping to (batch, tokens, dim).",
           lambda: _mhsa(ref, x, merge="view"))
    yield ("heads merged in the wrong order: concatenate head 0's features, then head 1's, ... "
           "('b h t d -> b t (h d)'), not interleaved ('(d h)').",
           lambda: _mhsa(ref, x, merge="d h"))
    yield ("the heads are split wrongly: reshape the last axis to (heads, head_dim) and then transpose(1, 2); "
           "reshaping straight to (batch, heads, tokens, head_dim) mixes tokens.",
           lambda: _mhsa(ref, x, split="view"))
    yield ("the heads are split wrongly: you transposed before the reshape, which mixes features and tokens. "
           "Reshape the last axis to (heads, head_dim) first, then transpose(1, 2): "
           "t.reshape(batch, tokens, heads, head_dim).transpose(1, 2).",
           lambda: _mhsa(ref, x, split="transpose first"))
    yield ("the output projection is missing: mix the concatenated heads with self.proj.",
           lambda: _mhsa(ref, x, proj=False))
    for d in (2, 1, 0):
        yield (f"the softmax ran over the wrong axis ({softmax_axis(d, AXES_4D)}, the {AXES_4D[d]}): each "
               "query's weights must sum to one over the keys (dim=-1).",
               lambda d=d: _mhsa(ref, x, softmax_dim=d))
    yield ("queries and keys are swapped: q is the first third of self.qkv(x) and k the second ([q | k | v]); "
           "with them swapped every head compares keys with queries (k @ q^T).",
           lambda: _mhsa(ref, x, keys_first=True))
    for order in itertools.permutations(range(3)):
        if order not in ((0, 1, 2), (1, 0, 2)):
            names = ", ".join(f"{name} = slice {i + 1}" for name, i in zip("qkv", order))
            yield (f"q, k and v are taken from the wrong slices of self.qkv(x) (yours: {names}); its output is "
                   "[q | k | v]: q, k, v = self.qkv(x).chunk(3, dim=-1), in that order.",
                   lambda order=order: _mhsa(ref, x, order=order))
    yield ("q, k and v are taken from the wrong slices of self.qkv(x): its output is [q | k | v] "
           "(use .chunk(3, dim=-1)), each then split into heads.",
           lambda: _mhsa(ref, x, split="h qkv d"))
    yield ("the heads are split wrongly: you gave each head every h-th feature (the '(d h)' order, e.g. a reshape "
           "to (..., head_dim, heads)); head i gets the contiguous slice [i * d_k, (i + 1) * d_k): reshape to "
           "(..., heads, head_dim).", lambda: _mhsa(ref, x, split="qkv d h"))
    yield ("the whole width went into one head: split q, k and v into self.num_heads heads "
           f"(each d_k = {d_k} wide) before attention.",
           lambda: _mhsa(ref, x, heads=1, scale=dim**-0.5))


def check_multi_head_attention(cls: Callable[..., nn.Module], device=None, only: str | None = None) -> None:
    """Check a multi-head self-attention module ``cls(dim, num_heads)`` with layers ``qkv`` and ``proj``.

    forward: (batch, tokens, dim) -> (batch, tokens, dim). The check copies the weights of a
    ``vitedu.MultiHeadSelfAttention`` into the student's module and compares the outputs.
    ``only="values"``: (dim, heads) = (12, 3) only.
    """
    only = aspect(only, ("values",), "check_multi_head_attention")
    device, gen, what = resolve_device(device), torch.Generator().manual_seed(6), "your multi-head attention"

    def one(dim: int, heads: int) -> None:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(6)
            ref = MultiHeadSelfAttention(dim, heads).eval()
        module = build_student(cls, ref, what, device, dim=dim, num_heads=heads)
        ref = ref.to(device)
        x = randn(gen, 2, 5, dim, device=device)
        with torch.no_grad():
            got = tensor_out(run_student(module, x, what=what), what)
            check_shape(got, (2, 5, dim), ("batch", "tokens", "dim"), what)
            sizes = {"the number of tokens, x.shape[1]": x.shape[1], "D, the model width": dim,
                     "h, the number of heads": heads}
            diagnose(got, ref(x)[0], _mhsa_variants(ref, x, dim, heads), what,
                     fit=fit_the_scale(lambda s: _mhsa(ref, x, scale=s), dim // heads, sizes, what))

    one(12, 3)
    if only == "values":
        passed("check_multi_head_attention", "the values: matches vitedu.MultiHeadSelfAttention for "
               "(dim, heads) = (12, 3)")
        return
    other_sizes("dim=12, heads=3", "dim=16, heads=2", lambda: one(16, 2))
    passed("check_multi_head_attention", "matches vitedu.MultiHeadSelfAttention for (dim, heads) = (12, 3) "
           "and (16, 2)")
