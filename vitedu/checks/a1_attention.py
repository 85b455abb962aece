"""Assignment 1: scaled dot-product attention, one head, many heads (chapters 1-3).

See ``vitedu.checks`` for what each check diagnoses by name."""

from __future__ import annotations

from typing import Callable

import torch
from einops import rearrange
from torch import Tensor, nn

from ..attention import MultiHeadSelfAttention, scaled_dot_product_attention
from ..attention import merge_heads as reference_merge_heads
from ..attention import split_heads as reference_split_heads
from .diagnosis import (
    CheckFailed,
    WrongSize,
    build_student,
    check_large_logits,
    check_shape,
    diagnose,
    fit_scale,
    name_scale,
    named_scale,
    other_sizes,
    passed,
    randn,
    resolve_device,
    run_student,
    tensor_out,
)

_BATCH_HINT = (
    "Your function must work for any leading axes (..., tokens, features), e.g. (batch, heads, tokens, d_k): "
    "transpose the keys with k.transpose(-2, -1) rather than k.T, and take the softmax with dim=-1."
)


def _softmax_axis(dim: int, axes: tuple[str, ...]) -> str:
    """How a student may have written the axis ``dim`` of logits with these axes: 'dim=-2', 'dim=1 or -3'."""
    n = len(axes)
    d = dim % n
    return f"dim={d - n}" if d == n - 2 else f"dim={d} or {d - n}"


def _sdpa(q: Tensor, k: Tensor, v: Tensor | None = None, scale: float | None = None, softmax_dim: int = -1,
          keys_first: bool = False, softmax: bool = True) -> Tensor:
    """Attention with switchable mistakes (the variants); ``v=None`` returns the weights."""
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    logits = (k @ q.transpose(-2, -1) if keys_first else q @ k.transpose(-2, -1)) * scale
    weights = logits.softmax(dim=softmax_dim) if softmax else logits
    return weights if v is None else weights @ v


def _scale_variants(q: Tensor, k: Tensor, v: Tensor | None) -> list[tuple[str, Callable[[], Tensor]]]:
    d_k = q.shape[-1]
    return [
        (f"the scale is missing. Divide the logits q @ k^T by sqrt(d_k) = sqrt({d_k}) before the softmax; "
         "without it the logits grow with d_k and the softmax saturates.",
         lambda: _sdpa(q, k, v, scale=1.0)),
        (f"you divided by d_k = {d_k}; the scale is 1 / sqrt(d_k) = 1 / sqrt({d_k}) (use q.shape[-1] ** 0.5).",
         lambda: _sdpa(q, k, v, scale=1.0 / d_k)),
        (f"you multiplied the logits by sqrt(d_k); divide them by sqrt(d_k) = sqrt({d_k}).",
         lambda: _sdpa(q, k, v, scale=d_k**0.5)),
    ]


def _hardcoded_scale_variants(q: Tensor, k: Tensor, v: Tensor | None) -> list[tuple[str, Callable[[], Tensor]]]:
    d_k = q.shape[-1]
    return [(f"you scaled by 1 / sqrt({c}) although d_k = {d_k} here: d_k is hard-coded. Read it from the "
             "inputs, d_k = q.shape[-1], so that the function works for every head size.",
             lambda c=c: _sdpa(q, k, v, scale=c**-0.5)) for c in (4, 8, 16, 32, 64, 128) if c != d_k]


def _fit_the_scale(at_scale: Callable[[float], Tensor], d_k: int, sizes: dict[str, int],
                   what: str) -> Callable[[Tensor], str | None]:
    """Fit the scale of the logits that best explains the student's result and name it (``diagnose``'s fit).

    A scale that is a size of the inputs (the number of keys, d_v, ...) is that size used in the wrong
    place, not a number written in: it is raised as ``WrongSize``, which ``other_sizes`` passes on as it is.
    """

    def hint(got: Tensor) -> str | None:
        s = fit_scale(got, at_scale)
        if s is None:
            return None
        fix = (f"The scale uses d_k = {d_k}, the size of one query or key: multiply the logits by "
               f"1 / sqrt(d_k) = 1 / sqrt({d_k}) = {d_k**-0.5:.3g} (d_k = q.shape[-1]).")
        named = named_scale(s, sizes)
        if named:
            raise WrongSize(f"{what}: your output matches {named}. {fix}")
        return f"your output matches {name_scale(s, sizes)}. {fix}"

    return hint


def _token_sizes(q: Tensor, k: Tensor, v: Tensor | None = None) -> dict[str, int]:
    """The sizes of the inputs other than d_k that a wrong scale may have used, each with its name."""
    if q.shape[-2] == k.shape[-2]:
        sizes = {"the number of tokens (keys), k.shape[-2]": k.shape[-2]}
    else:
        sizes = {"the number of keys, k.shape[-2]": k.shape[-2], "the number of queries, q.shape[-2]": q.shape[-2]}
    if v is not None and v.shape[-1] != q.shape[-1]:
        sizes["d_v, the width of the values (v.shape[-1]), not of the queries and keys"] = v.shape[-1]
    return sizes


def _axis_variants(q: Tensor, k: Tensor, v: Tensor, axes: tuple[str, ...],
                   sums: Callable[[], str]) -> list[tuple[str, Callable[[], Tensor]]]:
    """A softmax over each wrong axis of the logits (queries, heads, batch, ...), each named."""
    return [(f"the softmax ran over the wrong axis ({_softmax_axis(d, axes)}, the {axes[d]}): the rows of your "
             f"attention weights sum to {sums()} instead of 1. Each query distributes its attention over "
             "the keys: softmax(dim=-1).", lambda d=d: _sdpa(q, k, v, softmax_dim=d))
            for d in range(len(axes) - 1)][::-1]  # the queries axis first, the likeliest


def check_attention_weights(attention_weights: Callable[[Tensor, Tensor], Tensor], device=None) -> None:
    """Check ``attention_weights(q, k)`` = softmax(q k^T / sqrt(d_k)) over the keys.

    q: (..., queries, d_k), k: (..., keys, d_k) -> (..., queries, keys); every row sums to one.
    """
    device, gen, what = resolve_device(device), torch.Generator().manual_seed(1), "attention_weights(q, k)"
    # Square (self-attention) first: mistakes that swap axes then change values instead of crashing.
    q, k = (randn(gen, 2, 3, 6, 8, device=device) * 1.5 for _ in range(2))
    got = tensor_out(run_student(attention_weights, q, k, what=what, hint=_BATCH_HINT), what)
    check_shape(got, (2, 3, 6, 6), ("batch", "heads", "queries", "keys"), what)
    got = got.to(device, q.dtype)
    rows = got.sum(dim=-1)
    if not torch.allclose(rows, torch.ones_like(rows), atol=1e-3):
        axes = ("batch", "heads", "queries", "keys")
        for d in (2, 1, 0):  # the queries axis first, the likeliest
            sums = got.sum(dim=d)
            if torch.allclose(sums, torch.ones_like(sums), atol=1e-3):
                along = "the columns" if d == 2 else f"the weights along axis {d} ({axes[d]})"
                raise CheckFailed(
                    f"{what}: the rows of your weights sum to {rows.min().item():.2f}...{rows.max().item():.2f} "
                    f"instead of 1, but {along} sum to one: the softmax ran over the {axes[d]} axis "
                    f"({_softmax_axis(d, axes)}). Each query distributes its attention over the keys, so apply "
                    "softmax over the last axis: softmax(dim=-1)."
                )
        if got.min() < 0:
            raise CheckFailed(
                f"{what}: some weights are negative and the rows sum to {rows.min().item():.2f}..."
                f"{rows.max().item():.2f} instead of 1: did you forget the softmax? Attention weights are "
                "softmax(logits, dim=-1), a probability distribution over the keys for every query."
            )
        raise CheckFailed(
            f"{what}: the rows sum to {rows.min().item():.2f}...{rows.max().item():.2f} instead of 1. Every row "
            "(one query) must be a probability distribution over the keys: softmax(logits, dim=-1)."
        )
    variants = [
        ("you compared the keys with the queries (k @ q^T), which gives one row per *key*. The logits "
         "are q @ k.transpose(-2, -1): row i holds query i's similarity to every key.",
         lambda: _sdpa(q, k, keys_first=True)),
        *_scale_variants(q, k, None),
    ]
    diagnose(got, _sdpa(q, k), variants, what,
             fit=_fit_the_scale(lambda s: _sdpa(q, k, scale=s), q.shape[-1], _token_sizes(q, k), what))
    # Cross-attention shapes: fewer queries than keys, leading axes of another length, another d_k.
    q, k = randn(gen, 4, 5, 5, device=device), randn(gen, 4, 7, 5, device=device)

    def cross() -> None:
        got = tensor_out(run_student(attention_weights, q, k, what=what, hint=_BATCH_HINT), what)
        check_shape(got, (4, 5, 7), ("batch", "queries", "keys"), what, hints={
            (4, 7, 5): "One row per key instead of one per query: compute q @ k.transpose(-2, -1), not k @ q^T."})
        diagnose(got, scaled_dot_product_attention(q, k, k)[1], _hardcoded_scale_variants(q, k, None), what,
                 fit=_fit_the_scale(lambda s: _sdpa(q, k, scale=s), q.shape[-1], _token_sizes(q, k), what))

    other_sizes("q, k of shape (2, 3, 6, 8)", "q (4, 5, 5), k (4, 7, 5)", cross)
    big_q, big_k = 30 * q, 30 * k  # logits in the hundreds: a trained model's attention can be this sharp
    check_large_logits(attention_weights, (big_q, big_k), _sdpa(big_q, big_k), big_q @ big_k.mT / 5**0.5, what)
    passed("check_attention_weights", "rows sum to one and match vitedu for self- and cross-attention shapes, "
            "several d_k, and large logits")


def check_attention(attention: Callable[[Tensor, Tensor, Tensor], Tensor], device=None) -> None:
    """Check ``attention(q, k, v)`` = softmax(q k^T / sqrt(d_k)) v.

    q: (..., queries, d_k), k: (..., keys, d_k), v: (..., keys, d_v) -> (..., queries, d_v).
    (A returned tuple (values, weights) is accepted; its first element is checked.)
    """
    device, gen, what = resolve_device(device), torch.Generator().manual_seed(2), "attention(q, k, v)"
    # d_v = 4, not d_k = 8: a scale by the width of the values is then visibly wrong from the start.
    q, k, v = (randn(gen, 2, 3, 6, d, device=device) * 1.5 for d in (8, 8, 4))
    got = tensor_out(run_student(attention, q, k, v, what=what, hint=_BATCH_HINT), what)
    check_shape(got, (2, 3, 6, 4), ("batch", "heads", "queries", "d_v"), what)

    def row_sums() -> str:  # with v = ones, every output entry is the sum of one row of the weights
        sums = tensor_out(run_student(attention, q, k, torch.ones_like(v), what=what), what)[..., 0]
        return f"{sums.min().item():.2f}...{sums.max().item():.2f}"

    variants = [
        *_axis_variants(q, k, v, ("batch", "heads", "queries", "keys"), row_sums),
        ("you compared the keys with the queries (k @ q^T, i.e. transposed keys): the logits are "
         "q @ k.transpose(-2, -1), one row per query.",
         lambda: _sdpa(q, k, v, keys_first=True)),
        ("the softmax is missing: the logits go straight into the weighted sum. Apply softmax(dim=-1) to "
         "the scaled logits first, so that each query's weights are positive and sum to one.",
         lambda: _sdpa(q, k, v, softmax=False)),
        ("you multiplied the *transposed* weights with v. The output is weights @ v with weights of shape "
         "(..., queries, keys).",
         lambda: _sdpa(q, k).transpose(-2, -1) @ v),
        *_scale_variants(q, k, v),
    ]
    diagnose(got, scaled_dot_product_attention(q, k, v)[0], variants, what,
             fit=_fit_the_scale(lambda s: _sdpa(q, k, v, scale=s), q.shape[-1], _token_sizes(q, k, v), what))
    q, k = randn(gen, 4, 5, 5, device=device), randn(gen, 4, 7, 5, device=device)
    v = randn(gen, 4, 7, 3, device=device)

    def cross() -> None:
        got = tensor_out(run_student(attention, q, k, v, what=what, hint=_BATCH_HINT), what)
        check_shape(got, (4, 5, 3), ("batch", "queries", "d_v"), what)
        diagnose(got, scaled_dot_product_attention(q, k, v)[0], _hardcoded_scale_variants(q, k, v), what,
                 fit=_fit_the_scale(lambda s: _sdpa(q, k, v, scale=s), q.shape[-1], _token_sizes(q, k, v), what))

    other_sizes("q, k, v of shape (2, 3, 6, 8)", "q (4, 5, 5), k (4, 7, 5), v (4, 7, 3)", cross)
    big = (30 * q, 30 * k, v)
    check_large_logits(attention, big, _sdpa(*big), big[0] @ big[1].mT / 5**0.5, what)
    passed("check_attention", "matches vitedu.scaled_dot_product_attention for self- and cross-attention shapes, "
            "several d_k, and large logits")


def _masked_sdpa(q: Tensor, k: Tensor, v: Tensor, mask: Tensor, how: str) -> Tensor:
    """Masked attention done wrongly in one of the usual ways (the variants of check_masked_attention)."""
    logits = q @ k.transpose(-2, -1) * q.shape[-1] ** -0.5  # (..., queries, keys)
    if how == "after softmax":  # weights zeroed after the softmax, rows no longer sum to one
        return (logits.softmax(dim=-1) * mask) @ v
    if how == "multiplied":  # masked logits set to 0 instead of -inf
        return (logits * mask).softmax(dim=-1) @ v
    if how == "finite":  # -1e9 instead of -inf: a fully masked row becomes uniform
        return logits.masked_fill(~mask, -1e9).softmax(dim=-1) @ v
    if how == "queries":  # the mask laid along the queries: the padding queries attend to nothing, the rest to all
        return logits.masked_fill(~mask.transpose(-2, -1), float("-inf")).softmax(dim=-1).nan_to_num(0.0) @ v
    if how == "queries, finite":  # the same with -1e9, or with the padding queries zeroed: their rows are uniform
        return logits.masked_fill(~mask.transpose(-2, -1), -1e9).softmax(dim=-1) @ v
    raise ValueError(how)


def check_masked_attention(masked_attention: Callable[..., Tensor], device=None) -> None:
    """Check ``masked_attention(q, k, v, mask)``: attention in which query i may only attend to key j where
    ``mask[..., i, j]`` is True.

    q: (..., queries, d_k), k: (..., keys, d_k), v: (..., keys, d_v), mask: bool, broadcastable to
    (..., queries, keys) -> (..., queries, d_v). A query whose every key is masked gets a zero output, as
    in ``vitedu.scaled_dot_product_attention`` and PyTorch's fused kernel.
    """
    device, gen, what = resolve_device(device), torch.Generator().manual_seed(11), "masked_attention(q, k, v, mask)"

    def one(batch: int, tokens: int, d_k: int, lengths: list[int]) -> None:
        q, k, v = (randn(gen, batch, 2, tokens, d_k, device=device) * 1.5 for _ in range(3))
        # A padding mask: sequence b has lengths[b] real tokens, the rest is padding no query may attend to.
        mask = (torch.arange(tokens)[None, :] < torch.tensor(lengths)[:, None]).to(device)  # (batch, keys)
        mask = mask[:, None, None, :]  # (batch, 1, 1, keys): the same for every head and query
        got = tensor_out(run_student(masked_attention, q, k, v, mask, what=what, hint=_BATCH_HINT), what)
        check_shape(got, (batch, 2, tokens, d_k), ("batch", "heads", "queries", "d_v"), what)
        fix = ("The padding mask (batch, 1, 1, keys) already lies along the keys: use it as it is, "
               "logits.masked_fill(~mask, float('-inf')), without transposing it.")
        on_queries = ("the mask is applied to the queries: it hides the padding *queries* (rows of the logits) "
                      "instead of the padding *keys* (columns), so the real queries still attend to the padding. "
                      + fix)
        nan_rows = ~torch.isfinite(got).all(dim=-1)  # (batch, heads, queries)
        if nan_rows.any() and torch.equal(nan_rows, (~mask.transpose(-2, -1)[..., 0]).expand_as(nan_rows)):
            raise CheckFailed(
                f"{what}: the mask is applied to the queries: exactly the padding *queries* get NaN (every logit "
                "of their rows is masked), while the real queries still attend to the padding *keys* (columns). "
                + fix)
        variants = [
            ("the mask is ignored: every query still attends to the padding keys. Before the softmax, set the "
             "logits of the masked keys to -inf: logits.masked_fill(~mask, float('-inf')).",
             lambda: _sdpa(q, k, v)),
            ("the mask is inverted: True means 'may attend'. Fill the logits where the mask is *False* with "
             "-inf: logits.masked_fill(~mask, float('-inf')).",
             lambda: scaled_dot_product_attention(q, k, v, mask=~mask)[0]),
            ("you zeroed the masked weights *after* the softmax, so the rows no longer sum to one. Mask the "
             "logits before the softmax (fill them with -inf), then the softmax renormalises over the kept keys.",
             lambda: _masked_sdpa(q, k, v, mask, "after softmax")),
            ("you multiplied the logits by the mask, which sets masked logits to 0, and exp(0) = 1 is still a "
             "share of attention. Fill them with -inf instead: logits.masked_fill(~mask, float('-inf')).",
             lambda: _masked_sdpa(q, k, v, mask, "multiplied")),
            (on_queries, lambda: _masked_sdpa(q, k, v, mask, "queries")),
            (on_queries, lambda: _masked_sdpa(q, k, v, mask, "queries, finite")),
        ]
        diagnose(got, scaled_dot_product_attention(q, k, v, mask=mask)[0], variants, what)

    one(2, 6, 8, [6, 4])
    other_sizes("6 tokens, d_k=8", "5 tokens, d_k=4", lambda: one(3, 5, 4, [2, 5, 3]))
    # A query that may attend to no key at all (e.g. a padding query under a padding mask).
    q, k, v = randn(gen, 3, 4, device=device), randn(gen, 5, 4, device=device), randn(gen, 5, 2, device=device)
    mask = torch.tensor([[1, 1, 0, 0, 1], [0, 0, 0, 0, 0], [1, 0, 0, 0, 0]], dtype=torch.bool, device=device)
    got = tensor_out(run_student(masked_attention, q, k, v, mask, what=what), what)
    check_shape(got, (3, 2), ("queries", "d_v"), what)
    if not torch.isfinite(got[1]).all():
        raise CheckFailed(
            f"{what}: a query whose every key is masked gets NaN: the softmax of a row of -inf is 0 / 0. Such a "
            "query has nothing to attend to; give it zero weights and so a zero output, as vitedu and "
            "F.scaled_dot_product_attention do (e.g. weights = logits.softmax(-1).nan_to_num(0.0)).")
    variants = [
        ("a query whose every key is masked got uniform weights (the mean of all values): with a finite fill "
         "value such as -1e9 the softmax of a fully masked row is uniform. Give such a query zero weights, hence "
         "a zero output, as vitedu does: fill with -inf and replace the NaN rows by zeros.",
         lambda: _masked_sdpa(q, k, v, mask, "finite")),
    ]
    diagnose(got, scaled_dot_product_attention(q, k, v, mask=mask)[0], variants, what)
    passed("check_masked_attention", "matches vitedu for padding masks of two sizes and a fully masked query "
            "(zero output)")


def check_single_head(single_head: Callable[..., Tensor], device=None) -> None:
    """Check ``single_head(x, w_q, w_k, w_v)``: one attention head on the token matrix x.

    x: (batch, tokens, D), w_q / w_k / w_v: (D, d_k) -> (batch, tokens, d_k), with d_k < D.
    """
    device, gen, what = resolve_device(device), torch.Generator().manual_seed(3), "single_head(x, w_q, w_k, w_v)"

    def one(dim: int, d_k: int, tokens: int) -> None:
        x = randn(gen, 2, tokens, dim, device=device)
        w_q, w_k, w_v = (randn(gen, dim, d_k, device=device) for _ in range(3))
        got = tensor_out(run_student(single_head, x, w_q, w_k, w_v, what=what), what)
        check_shape(got, (2, tokens, d_k), ("batch", "tokens", "d_k"), what, hints={
            (2, tokens, dim): "The last axis has the model width D: did you forget to project the values, "
            "v = x @ w_v?",
            (2, tokens, tokens): "You returned the attention weights (tokens x tokens); return weights @ v."})
        q, k, v = x @ w_q, x @ w_k, x @ w_v
        axes = ("batch", "queries", "keys")
        variants = [
            (f"you scaled by sqrt(D) = sqrt({dim}), the width of the token vectors. The scale is 1 / sqrt(d_k) "
             f"with d_k = {d_k} the size of one query or key: use q.shape[-1], not x.shape[-1].",
             lambda: _sdpa(q, k, v, scale=dim**-0.5)),
            ("queries and keys are swapped (q = x @ w_k, k = x @ w_q, which transposes the logits): use "
             "q = x @ w_q and k = x @ w_k, and compare them as q @ k^T.",
             lambda: _sdpa(q, k, v, keys_first=True)),
            ("the values are wrong: use v = x @ w_v (you used another projection for v).",
             lambda: _sdpa(q, k, x @ w_q)),
            *[(f"the softmax ran over the wrong axis ({_softmax_axis(d, axes)}, the {axes[d]}): each query's "
               "weights must sum to one over the keys (dim=-1).", lambda d=d: _sdpa(q, k, v, softmax_dim=d))
              for d in (1, 0)],
            *_scale_variants(q, k, v),
            *_hardcoded_scale_variants(q, k, v),
        ]
        sizes = {**_token_sizes(q, k), "D, the width of the token vectors (x.shape[-1])": dim}
        diagnose(got, scaled_dot_product_attention(q, k, v)[0], variants, what,
                 fit=_fit_the_scale(lambda s: _sdpa(q, k, v, scale=s), d_k, sizes, what))

    one(16, 4, 6)
    other_sizes("D=16, d_k=4", "D=12, d_k=3", lambda: one(12, 3, 5))
    passed("check_single_head", "matches vitedu for (D, d_k) = (16, 4) and (12, 3)")


def _split(x: Tensor, heads: int, pattern: str = "b t (h d) -> b h t d") -> Tensor:
    return rearrange(x, pattern, h=heads)


def check_multi_head_split(split_heads: Callable[[Tensor, int], Tensor], device=None) -> None:
    """Check ``split_heads(x, num_heads)``: (batch, tokens, dim) -> (batch, heads, tokens, dim / heads).

    Head i gets the contiguous slice of features x[..., i * d_k:(i + 1) * d_k].
    """
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
    other_sizes("3 heads of width 4", "2 heads of width 5", lambda: one(1, 4, 2, 5))
    passed("check_multi_head_split", "(batch, tokens, dim) -> (batch, heads, tokens, head_dim), heads in order, "
            "for 3 heads of 4 and 2 heads of 5 features")


def check_multi_head_merge(merge_heads: Callable[[Tensor], Tensor], device=None) -> None:
    """Check ``merge_heads(x)``: (batch, heads, tokens, head_dim) -> (batch, tokens, heads * head_dim).

    The inverse of splitting: head 0's features first, then head 1's, ... (concatenation of the heads).
    """
    device, gen, what = resolve_device(device), torch.Generator().manual_seed(5), "merge_heads(x)"

    def one(batch: int, heads: int, tokens: int, d_k: int) -> None:
        x = randn(gen, batch, heads, tokens, d_k, device=device)
        got = tensor_out(run_student(merge_heads, x, what=what), what)
        check_shape(got, (batch, tokens, heads * d_k), ("batch", "tokens", "dim"), what, hints={
            (batch, heads, tokens * d_k): "You merged tokens with head_dim; move the heads axis behind the tokens "
            "first: x.transpose(1, 2), then reshape to (batch, tokens, heads * head_dim)."})
        variants = [
            ("heads merged in the wrong order: you reshaped (batch, heads, tokens, head_dim) straight to "
             "(batch, tokens, dim), which mixes the features of different tokens. Transpose first: "
             "x.transpose(1, 2).reshape(batch, tokens, heads * head_dim).",
             lambda: x.reshape(batch, tokens, heads * d_k)),
            ("heads merged in the wrong order: the features of head 0 must come first (dim[0:d_k]), then head 1, "
             "...; you interleaved them (the '(d h)' order). Use 'b h t d -> b t (h d)'.",
             lambda: rearrange(x, "b h t d -> b t (d h)")),
        ]
        diagnose(got, reference_merge_heads(x), variants, what)

    one(2, 3, 5, 4)
    other_sizes("3 heads of width 4", "2 heads of width 5", lambda: one(1, 2, 4, 5))
    passed("check_multi_head_merge", "(batch, heads, tokens, head_dim) -> (batch, tokens, dim), heads "
            "concatenated in order")


def _mhsa(attn: MultiHeadSelfAttention, x: Tensor, split: str = "qkv h d", merge: str = "h d",
          scale: float | None = None, proj: bool = True, heads: int | None = None, softmax_dim: int = -1) -> Tensor:
    """Multi-head attention with switchable mistakes, on the weights of ``attn`` (the variants)."""
    h = attn.num_heads if heads is None else heads
    if split == "view":  # reshape straight to heads, without the transpose
        q, k, v = (t.reshape(x.shape[0], h, x.shape[1], -1) for t in attn.qkv(x).chunk(3, dim=-1))
    elif split == "transpose first":  # transpose (batch, dim, tokens), then reshape to heads
        q, k, v = (t.transpose(1, 2).reshape(x.shape[0], h, x.shape[1], -1) for t in attn.qkv(x).chunk(3, dim=-1))
    else:
        q, k, v = rearrange(attn.qkv(x), f"b t ({split}) -> qkv b h t d", qkv=3, h=h)
    scale = attn.scale if scale is None else scale
    if softmax_dim == -1:
        out, _ = scaled_dot_product_attention(q, k, v, scale=scale)
    else:
        out = _sdpa(q, k, v, scale=scale, softmax_dim=softmax_dim)
    out = out.reshape(x.shape) if merge == "view" else rearrange(out, f"b h t d -> b t ({merge})")
    return attn.proj(out) if proj else out


def check_multi_head_attention(cls: Callable[..., nn.Module], device=None) -> None:
    """Check a multi-head self-attention module ``cls(dim, num_heads)`` with layers ``qkv`` and ``proj``.

    forward: (batch, tokens, dim) -> (batch, tokens, dim). The check copies the weights of a
    ``vitedu.MultiHeadSelfAttention`` into the student's module and compares the outputs.
    """
    device, gen, what = resolve_device(device), torch.Generator().manual_seed(6), "your multi-head attention"

    def one(dim: int, heads: int) -> None:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(6)
            ref = MultiHeadSelfAttention(dim, heads).eval()
        module = build_student(cls, ref, what, device, dim=dim, num_heads=heads)
        ref = ref.to(device)
        x = randn(gen, 2, 5, dim, device=device)
        d_k = dim // heads
        axes = ("batch", "heads", "queries", "keys")
        with torch.no_grad():
            got = tensor_out(run_student(module, x, what=what), what)
            check_shape(got, (2, 5, dim), ("batch", "tokens", "dim"), what)
            variants = [
                (f"you scaled the logits by 1/sqrt(D) = 1/sqrt({dim}), the model width. Each head compares queries "
                 f"and keys of size d_k = D / h = {d_k}: the scale is 1/sqrt(d_k) (self.head_dim ** -0.5).",
                 lambda: _mhsa(ref, x, scale=dim**-0.5)),
                (f"you scaled the logits by 1/sqrt(h) = 1/sqrt({heads}), the number of heads; the scale uses "
                 f"the head width d_k = D / h = {d_k}: 1/sqrt(d_k).",
                 lambda: _mhsa(ref, x, scale=heads**-0.5)),
                (f"the head width is wrong: you split into self.head_dim = {d_k} heads of width {heads}. "
                 "split_heads takes the *number* of heads: split_heads(t, self.num_heads).",
                 lambda: _mhsa(ref, x, heads=d_k, scale=heads**-0.5)),
                ("heads merged in the wrong order: after attention, move the heads behind the tokens "
                 "(transpose(1, 2)) before reshaping to (batch, tokens, dim).",
                 lambda: _mhsa(ref, x, merge="view")),
                ("heads merged in the wrong order: concatenate head 0's features, then head 1's, ... "
                 "('b h t d -> b t (h d)'), not interleaved ('(d h)').",
                 lambda: _mhsa(ref, x, merge="d h")),
                ("the heads are split wrongly: reshape the last axis to (heads, head_dim) and then transpose(1, 2); "
                 "reshaping straight to (batch, heads, tokens, head_dim) mixes tokens.",
                 lambda: _mhsa(ref, x, split="view")),
                ("the heads are split wrongly: you transposed before the reshape, which mixes features and tokens. "
                 "Reshape the last axis to (heads, head_dim) first, then transpose(1, 2): "
                 "t.reshape(batch, tokens, heads, head_dim).transpose(1, 2).",
                 lambda: _mhsa(ref, x, split="transpose first")),
                ("the output projection is missing: mix the concatenated heads with self.proj.",
                 lambda: _mhsa(ref, x, proj=False)),
                *[(f"the softmax ran over the wrong axis ({_softmax_axis(d, axes)}, the {axes[d]}): each query's "
                   "weights must sum to one over the keys (dim=-1).",
                   lambda d=d: _mhsa(ref, x, softmax_dim=d)) for d in (2, 1, 0)],
                ("q, k and v are taken from the wrong slices of self.qkv(x): its output is [q | k | v] "
                 "(use .chunk(3, dim=-1)), each then split into heads.",
                 lambda: _mhsa(ref, x, split="h qkv d")),
                ("the whole width went into one head: split q, k and v into self.num_heads heads "
                 f"(each d_k = {d_k} wide) before attention.",
                 lambda: _mhsa(ref, x, heads=1, scale=dim**-0.5)),
            ]
            sizes = {"the number of tokens, x.shape[1]": x.shape[1], "D, the model width": dim,
                     "h, the number of heads": heads}
            diagnose(got, ref(x)[0], variants, what,
                     fit=_fit_the_scale(lambda s: _mhsa(ref, x, scale=s), d_k, sizes, what))

    one(12, 3)
    other_sizes("dim=12, heads=3", "dim=16, heads=2", lambda: one(16, 2))
    passed("check_multi_head_attention", "matches vitedu.MultiHeadSelfAttention for (dim, heads) = (12, 3) "
            "and (16, 2)")
