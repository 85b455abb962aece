"""Checks for the assignments: feedback that teaches instead of a bare ``AssertionError``.

    from vitedu.checks import check_attention
    check_attention(attention)    # prints "✓ check_attention passed ..." or raises CheckFailed

Each check runs the student's function (or builds the student's module) on fresh random inputs of
its own and compares the result with the reference in ``vitedu``. When they differ, it also computes a
few *deliberately wrong* variants - softmax over the wrong axis, no scale, heads merged in the wrong
order, [CLS] at the wrong end, ... - and when the student's result matches one of them, the message
names that mistake and its fix. Inputs use their own random generator, so a check never changes the
random numbers of the notebook that calls it, and they live on ``device`` (default: the best
available), so a correct solution passes on CPU and GPU alike. Every check runs a second set of sizes
(another d_k, number of heads, stride, ...): code that passes the first and fails the second has a size
written in as a number, and the message says so.

The mistakes diagnosed by name (each has a test in tests/test_checks.py that plants it and expects its hint):

- check_attention_weights, check_attention: softmax over the queries axis; softmax missing; scale missing,
  1/d_k, or multiplied; keys compared with queries (k q^T); transposed weights (check_attention);
  ``k.T`` on batched inputs; a hard-coded d_k (e.g. sqrt(8)); a naive exp / sum softmax that turns
  large logits into NaN (numerically unstable); a wrong shape, with the axis named.
- check_masked_attention: the mask ignored; the mask inverted; weights zeroed after the softmax;
  logits multiplied by the mask; NaN for a fully masked query; uniform weights (a finite fill such as
  -1e9) for a fully masked query; hard-coded sizes.
- check_single_head: sqrt(D) instead of sqrt(d_k); queries and keys swapped; the wrong value
  projection; softmax axis; scale mistakes; a hard-coded d_k; missing projection (shape).
- check_multi_head_split, check_multi_head_merge: a plain reshape without the transpose; interleaved
  heads ('(d h)'); heads axis not moved; heads of width num_heads (head width wrong); a hard-coded
  number of heads.
- check_multi_head_attention: scale by sqrt(D) or sqrt(h) instead of sqrt(d_k); split into head_dim
  heads (head width wrong); no split at all (one head); heads merged or split in the wrong order;
  output projection missing; wrong [q | k | v] slices; a hard-coded size.
- check_patchify, check_patch_embedding: column-major patch order; (channel, row, column) order inside
  a patch; rows and columns swapped inside a patch; a plain reshape; missing bias.
- check_unfold_embedding: the kernel reordered to (row, column, channel); missing bias; tokens and
  features not transposed; stride hard-coded to the kernel size (overlapping windows).
- check_encoder_block: post-norm; a missing residual connection (either or both); the normalised tokens
  on the skip path; norm1 used twice; parallel sub-layers; no LayerNorms.
- check_vit_forward: [CLS] at the wrong end; positions not added, or not for [CLS]; mean pooling;
  final LayerNorm missing; logits for every token (shape).
- check_train_epoch: ``model.train()`` missing; ``optimizer.step()`` missing; ``zero_grad()`` missing
  (gradients accumulate); a tensor returned instead of a float; the mean of batch losses instead of
  the mean per image.
"""

from __future__ import annotations

from typing import Any, Callable

import torch
from einops import rearrange
from torch import Tensor, nn

from .attention import MultiHeadSelfAttention, scaled_dot_product_attention
from .blocks import Block
from .patching import PatchEmbedding, patchify
from .utils import get_device
from .vit import VisionTransformer

__all__ = [
    "CheckFailed",
    "check_attention",
    "check_attention_weights",
    "check_encoder_block",
    "check_masked_attention",
    "check_multi_head_attention",
    "check_multi_head_merge",
    "check_multi_head_split",
    "check_patch_embedding",
    "check_patchify",
    "check_single_head",
    "check_train_epoch",
    "check_unfold_embedding",
    "check_vit_forward",
]

# Results count as equal within this fraction of the reference's largest value. Loose enough for
# TF32 convolutions on a GPU (~1e-3 relative); every diagnosed mistake changes the result by far more.
TOLERANCE = 2e-3


class CheckFailed(AssertionError):
    """A check found a mistake; the message names the likely mistake and how to fix it."""


# ----------------------------------------------------------------------------------------------------
# Running the student's code


def _where_not_implemented(err: BaseException) -> str:
    """The (qualified) name of the innermost function that raised, e.g. ``PatchEmbed.forward``."""
    tb = err.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if tb is None:
        return "this function"
    code = tb.tb_frame.f_code
    return getattr(code, "co_qualname", code.co_name)  # co_qualname: Python 3.11+


def _run(fn: Callable[..., Any], *args: Any, what: str, hint: str = "") -> Any:
    """Call the student's code; turn a stub or a crash into a CheckFailed that says what to do."""
    try:
        return fn(*args)
    except NotImplementedError as err:
        raise CheckFailed(
            f"you have not implemented `{_where_not_implemented(err)}` yet (it raises NotImplementedError). "
            "Replace `raise NotImplementedError()` with your code, run that cell, then run this check again."
        ) from None
    except Exception as err:
        shapes = ", ".join(f"{tuple(a.shape)}" for a in args if isinstance(a, Tensor))
        extra = ""
        if "same device" in str(err):
            extra = (
                " Create new tensors on the device of the inputs (e.g. torch.zeros_like(x), "
                "torch.ones(..., device=x.device)) instead of the default CPU."
            )
        elif "view size is not compatible" in str(err):
            extra = " After a transpose the memory is not contiguous: use .reshape(...) instead of .view(...)."
        raise CheckFailed(
            f"{what} raised {type(err).__name__}: {err}"
            + (f"\n(called with tensors of shape {shapes})" if shapes else "")
            + (f"\n{extra.strip()}" if extra else "")
            + (f"\nHint: {hint}" if hint else "")
        ) from err


def _build(cls: Callable[..., nn.Module], reference: nn.Module, what: str, device: torch.device, **kwargs: Any):
    """Instantiate the student's module and give it the reference's (randomised) parameters."""
    with torch.random.fork_rng(devices=[]):  # the notebook's random numbers stay as they were
        module = _run(cls, *kwargs.values(), what=f"creating {what}")
    if not isinstance(module, nn.Module):
        raise CheckFailed(f"{what} should be an nn.Module class, but calling it returned {type(module).__name__}")
    try:
        module.load_state_dict(reference.state_dict())
    except RuntimeError as err:
        raise CheckFailed(
            f"{what} does not have the layers of the given __init__ (the names and shapes must match "
            f"vitedu's {type(reference).__name__}, so that the check can copy its weights):\n{err}\n"
            "Keep the __init__ you were given and write only forward()."
        ) from None
    return module.to(device).eval()


def _tensor_out(out: Any, what: str) -> Tensor:
    if isinstance(out, (tuple, list)) and out and isinstance(out[0], Tensor):
        out = out[0]  # e.g. (output, attention weights)
    if not isinstance(out, Tensor):
        raise CheckFailed(
            f"{what} should return a tensor, but it returned {type(out).__name__}. Did you forget `return`?"
        )
    return out.detach()


# ----------------------------------------------------------------------------------------------------
# Comparing with the reference and with the deliberately wrong variants


def _close(got: Tensor, ref: Tensor) -> bool:
    if got.shape != ref.shape:
        return False
    got = got.to(device=ref.device, dtype=ref.dtype)
    if not torch.isfinite(got).all():
        return False
    return bool((got - ref).abs().max() <= TOLERANCE * ref.abs().max() + 1e-5)


def _check_shape(got: Tensor, expected: tuple[int, ...], axes: tuple[str, ...], what: str, hints=None) -> None:
    """Raise a CheckFailed that names the wrong axis (and a mistake-specific hint, if one is known)."""
    if tuple(got.shape) == tuple(expected):
        return
    hints = hints or {}
    named = ", ".join(f"{name}={size}" for name, size in zip(axes, expected))
    message = f"{what} returned shape {tuple(got.shape)}, expected {tuple(expected)} = ({named})."
    if got.dim() != len(expected):
        message += f" It has {got.dim()} axes instead of {len(expected)}."
    elif sorted(got.shape) == sorted(expected):
        message += " The sizes are right but the axes are in the wrong order."
    else:
        wrong = [f"axis {i} ({name}) has size {g} instead of {e}"
                 for i, (name, g, e) in enumerate(zip(axes, got.shape, expected)) if g != e]
        message += " " + "; ".join(wrong) + "."
    hint = hints.get(tuple(got.shape))
    raise CheckFailed(message + (f"\n{hint}" if hint else ""))


def _diagnose(got: Tensor, ref: Tensor, variants: list[tuple[str, Callable[[], Tensor]]], what: str,
              otherwise: str = "") -> None:
    """Pass if ``got`` matches ``ref``; else name the first deliberately wrong variant it matches."""
    if _close(got, ref):
        return
    if not torch.isfinite(got).all():
        raise CheckFailed(f"{what} returned NaN or inf values. Look for a division by zero or a log of zero.")
    for hint, variant in variants:
        if _close(got, variant()):
            raise CheckFailed(f"{what}: {hint}")
    err = (got.to(ref.device, ref.dtype) - ref).abs().max().item()
    raise CheckFailed(
        f"{what} returns the right shape but wrong values: the largest difference from vitedu's result is "
        f"{err:.3g} (the reference's values reach {ref.abs().max().item():.3g}). "
        + (otherwise or "Compare your code with the formula in the text, one line at a time.")
    )


def _passed(name: str, detail: str) -> None:
    print(f"✓ {name} passed: {detail}")


def _device(device: str | torch.device | None) -> torch.device:
    return get_device() if device is None else torch.device(device)


def _randn(gen: torch.Generator, *shape: int, device: torch.device) -> Tensor:
    return torch.randn(*shape, generator=gen).to(device)


def _other_sizes(first: str, second: str, run: Callable[[], None]) -> None:
    """Run a check's second configuration. The first one passed, so a failure here means a hard-coded size."""
    try:
        run()
    except CheckFailed as err:
        raise CheckFailed(
            f"a size is hard-coded: your code is right for {first} but not for {second}. Read every size from "
            "the inputs (q.shape[-1], x.shape, num_heads, self.head_dim, conv.stride), never write a number.\n"
            f"What went wrong with the second sizes: {err}"
        ) from None


_UNSTABLE = (
    "the softmax is numerically unstable: with large logits (here up to {top:.0f}) exp() overflows to inf and "
    "inf / inf gives NaN. Use torch.softmax(logits, dim=-1), which subtracts each row's maximum before exp() "
    "(softmax(z) = softmax(z - max z))."
)


def _check_large_logits(fn: Callable[..., Any], args: tuple, ref: Tensor, logits: Tensor, what: str) -> None:
    """Large logits are where a naive exp(z) / exp(z).sum() breaks down (exp(89) is inf in float32)."""
    got = _tensor_out(_run(fn, *args, what=what), what)
    if not torch.isfinite(got).all():
        raise CheckFailed(f"{what}: " + _UNSTABLE.format(top=logits.abs().max().item()))
    _diagnose(got, ref, [], what)


# ----------------------------------------------------------------------------------------------------
# A1: scaled dot-product attention, one head, many heads

_BATCH_HINT = (
    "Your function must work for any leading axes (..., tokens, features), e.g. (batch, heads, tokens, d_k): "
    "transpose the keys with k.transpose(-2, -1) rather than k.T, and take the softmax with dim=-1."
)


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


def check_attention_weights(attention_weights: Callable[[Tensor, Tensor], Tensor], device=None) -> None:
    """Check ``attention_weights(q, k)`` = softmax(q k^T / sqrt(d_k)) over the keys.

    q: (..., queries, d_k), k: (..., keys, d_k) -> (..., queries, keys); every row sums to one.
    """
    device, gen, what = _device(device), torch.Generator().manual_seed(1), "attention_weights(q, k)"
    # Square (self-attention) first: mistakes that swap axes then change values instead of crashing.
    q, k = (_randn(gen, 2, 3, 6, 8, device=device) * 1.5 for _ in range(2))
    got = _tensor_out(_run(attention_weights, q, k, what=what, hint=_BATCH_HINT), what)
    _check_shape(got, (2, 3, 6, 6), ("batch", "heads", "queries", "keys"), what)
    got = got.to(device, q.dtype)
    rows, cols = got.sum(dim=-1), got.sum(dim=-2)
    if not torch.allclose(rows, torch.ones_like(rows), atol=1e-3):
        if torch.allclose(cols, torch.ones_like(cols), atol=1e-3):
            raise CheckFailed(
                f"{what}: the rows of your weights sum to {rows.min().item():.2f}...{rows.max().item():.2f} instead "
                "of 1, but the columns sum to one: the softmax ran over the queries axis (dim=-2). Each query "
                "distributes its attention over the keys, so apply softmax over the last axis: softmax(dim=-1)."
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
    _diagnose(got, _sdpa(q, k), variants, what)
    # Cross-attention shapes: fewer queries than keys, leading axes of another length, another d_k.
    q, k = _randn(gen, 4, 5, 5, device=device), _randn(gen, 4, 7, 5, device=device)

    def cross() -> None:
        got = _tensor_out(_run(attention_weights, q, k, what=what, hint=_BATCH_HINT), what)
        _check_shape(got, (4, 5, 7), ("batch", "queries", "keys"), what, hints={
            (4, 7, 5): "One row per key instead of one per query: compute q @ k.transpose(-2, -1), not k @ q^T."})
        _diagnose(got, scaled_dot_product_attention(q, k, k)[1], _hardcoded_scale_variants(q, k, None), what)

    _other_sizes("q, k of shape (2, 3, 6, 8)", "q (4, 5, 5), k (4, 7, 5)", cross)
    big_q, big_k = 30 * q, 30 * k  # logits in the hundreds: a trained model's attention can be this sharp
    _check_large_logits(attention_weights, (big_q, big_k), _sdpa(big_q, big_k), big_q @ big_k.mT / 5**0.5, what)
    _passed("check_attention_weights", "rows sum to one and match vitedu for self- and cross-attention shapes, "
            "several d_k, and large logits")


def check_attention(attention: Callable[[Tensor, Tensor, Tensor], Tensor], device=None) -> None:
    """Check ``attention(q, k, v)`` = softmax(q k^T / sqrt(d_k)) v.

    q: (..., queries, d_k), k: (..., keys, d_k), v: (..., keys, d_v) -> (..., queries, d_v).
    (A returned tuple (values, weights) is accepted; its first element is checked.)
    """
    device, gen, what = _device(device), torch.Generator().manual_seed(2), "attention(q, k, v)"
    q, k, v = (_randn(gen, 2, 3, 6, 8, device=device) * 1.5 for _ in range(3))
    got = _tensor_out(_run(attention, q, k, v, what=what, hint=_BATCH_HINT), what)
    _check_shape(got, (2, 3, 6, 8), ("batch", "heads", "queries", "d_v"), what)

    def row_sums() -> str:  # with v = ones, every output entry is the sum of one row of the weights
        sums = _tensor_out(_run(attention, q, k, torch.ones_like(v), what=what), what)[..., 0]
        return f"{sums.min().item():.2f}...{sums.max().item():.2f}"

    variants = [
        ("the softmax ran over the wrong axis (dim=-2, the queries): the rows of your attention weights sum "
         f"to {row_sums()} instead of 1. Each query distributes its attention over the keys: softmax(dim=-1).",
         lambda: _sdpa(q, k, v, softmax_dim=-2)),
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
    _diagnose(got, scaled_dot_product_attention(q, k, v)[0], variants, what)
    q, k = _randn(gen, 4, 5, 5, device=device), _randn(gen, 4, 7, 5, device=device)
    v = _randn(gen, 4, 7, 3, device=device)

    def cross() -> None:
        got = _tensor_out(_run(attention, q, k, v, what=what, hint=_BATCH_HINT), what)
        _check_shape(got, (4, 5, 3), ("batch", "queries", "d_v"), what)
        _diagnose(got, scaled_dot_product_attention(q, k, v)[0], _hardcoded_scale_variants(q, k, v), what)

    _other_sizes("q, k, v of shape (2, 3, 6, 8)", "q (4, 5, 5), k (4, 7, 5), v (4, 7, 3)", cross)
    big = (30 * q, 30 * k, v)
    _check_large_logits(attention, big, _sdpa(*big), big[0] @ big[1].mT / 5**0.5, what)
    _passed("check_attention", "matches vitedu.scaled_dot_product_attention for self- and cross-attention shapes, "
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
    raise ValueError(how)


def check_masked_attention(masked_attention: Callable[..., Tensor], device=None) -> None:
    """Check ``masked_attention(q, k, v, mask)``: attention in which query i may only attend to key j where
    ``mask[..., i, j]`` is True.

    q: (..., queries, d_k), k: (..., keys, d_k), v: (..., keys, d_v), mask: bool, broadcastable to
    (..., queries, keys) -> (..., queries, d_v). A query whose every key is masked gets a zero output, as
    in ``vitedu.scaled_dot_product_attention`` and PyTorch's fused kernel.
    """
    device, gen, what = _device(device), torch.Generator().manual_seed(11), "masked_attention(q, k, v, mask)"

    def one(batch: int, tokens: int, d_k: int, lengths: list[int]) -> None:
        q, k, v = (_randn(gen, batch, 2, tokens, d_k, device=device) * 1.5 for _ in range(3))
        # A padding mask: sequence b has lengths[b] real tokens, the rest is padding no query may attend to.
        mask = (torch.arange(tokens)[None, :] < torch.tensor(lengths)[:, None]).to(device)  # (batch, keys)
        mask = mask[:, None, None, :]  # (batch, 1, 1, keys): the same for every head and query
        got = _tensor_out(_run(masked_attention, q, k, v, mask, what=what, hint=_BATCH_HINT), what)
        _check_shape(got, (batch, 2, tokens, d_k), ("batch", "heads", "queries", "d_v"), what)
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
        ]
        _diagnose(got, scaled_dot_product_attention(q, k, v, mask=mask)[0], variants, what)

    one(2, 6, 8, [6, 4])
    _other_sizes("6 tokens, d_k=8", "5 tokens, d_k=4", lambda: one(3, 5, 4, [2, 5, 3]))
    # A query that may attend to no key at all (e.g. a padding query under a padding mask).
    q, k, v = _randn(gen, 3, 4, device=device), _randn(gen, 5, 4, device=device), _randn(gen, 5, 2, device=device)
    mask = torch.tensor([[1, 1, 0, 0, 1], [0, 0, 0, 0, 0], [1, 0, 0, 0, 0]], dtype=torch.bool, device=device)
    got = _tensor_out(_run(masked_attention, q, k, v, mask, what=what), what)
    _check_shape(got, (3, 2), ("queries", "d_v"), what)
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
    _diagnose(got, scaled_dot_product_attention(q, k, v, mask=mask)[0], variants, what)
    _passed("check_masked_attention", "matches vitedu for padding masks of two sizes and a fully masked query "
            "(zero output)")


def check_single_head(single_head: Callable[..., Tensor], device=None) -> None:
    """Check ``single_head(x, w_q, w_k, w_v)``: one attention head on the token matrix x.

    x: (batch, tokens, D), w_q / w_k / w_v: (D, d_k) -> (batch, tokens, d_k), with d_k < D.
    """
    device, gen, what = _device(device), torch.Generator().manual_seed(3), "single_head(x, w_q, w_k, w_v)"

    def one(dim: int, d_k: int, tokens: int) -> None:
        x = _randn(gen, 2, tokens, dim, device=device)
        w_q, w_k, w_v = (_randn(gen, dim, d_k, device=device) for _ in range(3))
        got = _tensor_out(_run(single_head, x, w_q, w_k, w_v, what=what), what)
        _check_shape(got, (2, tokens, d_k), ("batch", "tokens", "d_k"), what, hints={
            (2, tokens, dim): "The last axis has the model width D: did you forget to project the values, "
            "v = x @ w_v?",
            (2, tokens, tokens): "You returned the attention weights (tokens x tokens); return weights @ v."})
        q, k, v = x @ w_q, x @ w_k, x @ w_v
        variants = [
            (f"you scaled by sqrt(D) = sqrt({dim}), the width of the token vectors. The scale is 1 / sqrt(d_k) "
             f"with d_k = {d_k} the size of one query or key: use q.shape[-1], not x.shape[-1].",
             lambda: _sdpa(q, k, v, scale=dim**-0.5)),
            ("queries and keys are swapped (q = x @ w_k, k = x @ w_q, which transposes the logits): use "
             "q = x @ w_q and k = x @ w_k, and compare them as q @ k^T.",
             lambda: _sdpa(q, k, v, keys_first=True)),
            ("the values are wrong: use v = x @ w_v (you used another projection for v).",
             lambda: _sdpa(q, k, x @ w_q)),
            ("the softmax ran over the wrong axis: each query's weights must sum to one over the keys (dim=-1).",
             lambda: _sdpa(q, k, v, softmax_dim=-2)),
            *_scale_variants(q, k, v),
            *_hardcoded_scale_variants(q, k, v),
        ]
        _diagnose(got, scaled_dot_product_attention(q, k, v)[0], variants, what)

    one(16, 4, 6)
    _other_sizes("D=16, d_k=4", "D=12, d_k=3", lambda: one(12, 3, 5))
    _passed("check_single_head", "matches vitedu for (D, d_k) = (16, 4) and (12, 3)")


def _split(x: Tensor, heads: int, pattern: str = "b t (h d) -> b h t d") -> Tensor:
    return rearrange(x, pattern, h=heads)


def check_multi_head_split(split_heads: Callable[[Tensor, int], Tensor], device=None) -> None:
    """Check ``split_heads(x, num_heads)``: (batch, tokens, dim) -> (batch, heads, tokens, dim / heads).

    Head i gets the contiguous slice of features x[..., i * d_k:(i + 1) * d_k].
    """
    device, gen, what = _device(device), torch.Generator().manual_seed(4), "split_heads(x, num_heads)"

    def one(batch: int, tokens: int, heads: int, d_k: int) -> None:
        x = _randn(gen, batch, tokens, heads * d_k, device=device)
        got = _tensor_out(_run(split_heads, x, heads, what=what), what)
        _check_shape(got, (batch, heads, tokens, d_k), ("batch", "heads", "tokens", "head_dim"), what, hints={
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
            ("head i must get the contiguous slice of features x[..., i*d_k:(i+1)*d_k]; you gave it every "
             f"{heads}-th feature (the '(d h)' order). Reshape the last axis as (heads, head_dim), not "
             "(head_dim, heads).",
             lambda: _split(x, heads, "b t (d h) -> b h t d")),
        ]
        _diagnose(got, rearrange(x, "b t (h d) -> b h t d", h=heads), variants, what)

    one(2, 5, 3, 4)
    _other_sizes("3 heads of width 4", "2 heads of width 5", lambda: one(1, 4, 2, 5))
    _passed("check_multi_head_split", "(batch, tokens, dim) -> (batch, heads, tokens, head_dim), heads in order, "
            "for 3 heads of 4 and 2 heads of 5 features")


def check_multi_head_merge(merge_heads: Callable[[Tensor], Tensor], device=None) -> None:
    """Check ``merge_heads(x)``: (batch, heads, tokens, head_dim) -> (batch, tokens, heads * head_dim).

    The inverse of splitting: head 0's features first, then head 1's, ... (concatenation of the heads).
    """
    device, gen, what = _device(device), torch.Generator().manual_seed(5), "merge_heads(x)"

    def one(batch: int, heads: int, tokens: int, d_k: int) -> None:
        x = _randn(gen, batch, heads, tokens, d_k, device=device)
        got = _tensor_out(_run(merge_heads, x, what=what), what)
        _check_shape(got, (batch, tokens, heads * d_k), ("batch", "tokens", "dim"), what, hints={
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
        _diagnose(got, rearrange(x, "b h t d -> b t (h d)"), variants, what)

    one(2, 3, 5, 4)
    _other_sizes("3 heads of width 4", "2 heads of width 5", lambda: one(1, 2, 4, 5))
    _passed("check_multi_head_merge", "(batch, heads, tokens, head_dim) -> (batch, tokens, dim), heads "
            "concatenated in order")


def _mhsa(attn: MultiHeadSelfAttention, x: Tensor, split: str = "qkv h d", merge: str = "h d",
          scale: float | None = None, proj: bool = True, heads: int | None = None) -> Tensor:
    """Multi-head attention with switchable mistakes, on the weights of ``attn`` (the variants)."""
    h = attn.num_heads if heads is None else heads
    if split == "view":  # reshape straight to heads, without the transpose
        q, k, v = (t.reshape(x.shape[0], h, x.shape[1], -1) for t in attn.qkv(x).chunk(3, dim=-1))
    else:
        q, k, v = rearrange(attn.qkv(x), f"b t ({split}) -> qkv b h t d", qkv=3, h=h)
    out, _ = scaled_dot_product_attention(q, k, v, scale=attn.scale if scale is None else scale)
    out = out.reshape(x.shape) if merge == "view" else rearrange(out, f"b h t d -> b t ({merge})")
    return attn.proj(out) if proj else out


def check_multi_head_attention(cls: Callable[..., nn.Module], device=None) -> None:
    """Check a multi-head self-attention module ``cls(dim, num_heads)`` with layers ``qkv`` and ``proj``.

    forward: (batch, tokens, dim) -> (batch, tokens, dim). The check copies the weights of a
    ``vitedu.MultiHeadSelfAttention`` into the student's module and compares the outputs.
    """
    device, gen, what = _device(device), torch.Generator().manual_seed(6), "your multi-head attention"

    def one(dim: int, heads: int) -> None:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(6)
            ref = MultiHeadSelfAttention(dim, heads).eval()
        module = _build(cls, ref, what, device, dim=dim, num_heads=heads)
        ref = ref.to(device)
        x = _randn(gen, 2, 5, dim, device=device)
        d_k = dim // heads
        with torch.no_grad():
            got = _tensor_out(_run(module, x, what=what), what)
            _check_shape(got, (2, 5, dim), ("batch", "tokens", "dim"), what)
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
                ("the output projection is missing: mix the concatenated heads with self.proj.",
                 lambda: _mhsa(ref, x, proj=False)),
                ("q, k and v are taken from the wrong slices of self.qkv(x): its output is [q | k | v] "
                 "(use .chunk(3, dim=-1)), each then split into heads.",
                 lambda: _mhsa(ref, x, split="h qkv d")),
                ("the whole width went into one head: split q, k and v into self.num_heads heads "
                 f"(each d_k = {d_k} wide) before attention.",
                 lambda: _mhsa(ref, x, heads=1, scale=dim**-0.5)),
            ]
            _diagnose(got, ref(x)[0], variants, what)

    one(12, 3)
    _other_sizes("dim=12, heads=3", "dim=16, heads=2", lambda: one(16, 2))
    _passed("check_multi_head_attention", "matches vitedu.MultiHeadSelfAttention for (dim, heads) = (12, 3) "
            "and (16, 2)")


# ----------------------------------------------------------------------------------------------------
# A2: patches, patch embedding, encoder block, the whole forward pass

_COLUMN_MAJOR = (
    "the patches are in column-major order (down the first column, then the next). ViT reads them row by "
    "row, like text: patch i sits at grid position (i // W_p, i % W_p). Put the row index first: '(h w)', "
    "not '(w h)'."
)


def check_patchify(patchify_fn: Callable[[Tensor, int], Tensor], device=None) -> None:
    """Check ``patchify(images, patch_size)``: (batch, C, H, W) -> (batch, N, P * P * C), N = HW / P^2.

    Patches row by row; inside a patch the numbers are ordered (row, column, channel), as vitedu.patchify.
    """
    device, gen, what = _device(device), torch.Generator().manual_seed(7), "patchify(images, patch_size)"
    batch, chans, height, width, p = 2, 3, 8, 12, 4  # a 2 x 3 grid: not square, so orders are visible
    images = _randn(gen, batch, chans, height, width, device=device)
    n, d = height * width // p**2, p * p * chans
    got = _tensor_out(_run(patchify_fn, images, p, what=what), what)
    _check_shape(got, (batch, n, d), ("batch", "patches", "patch_size*patch_size*channels"), what, hints={
        (batch, d, n): "Patches and features are swapped: return (batch, patches, features), e.g. with "
        "'b c (h p1) (w p2) -> b (h w) (p1 p2 c)'.",
        (batch, height // p, width // p, d): "Flatten the grid of patches into one axis of N tokens: '(h w)'.",
        (batch, n, chans, p, p): "Flatten each patch into one vector of P * P * C numbers: '(p1 p2 c)'."})
    variants = [
        (_COLUMN_MAJOR, lambda: rearrange(images, "b c (h p1) (w p2) -> b (w h) (p1 p2 c)", p1=p, p2=p)),
        ("the numbers inside each patch are ordered (channel, row, column) - this is also what F.unfold "
         "returns; vitedu and timm order them (row, column, channel): '(p1 p2 c)'.",
         lambda: rearrange(images, "b c (h p1) (w p2) -> b (h w) (c p1 p2)", p1=p, p2=p)),
        ("rows and columns inside each patch are swapped: flatten a patch row by row, '(p1 p2 c)' with p1 the "
         "row inside the patch.",
         lambda: rearrange(images, "b c (h p1) (w p2) -> b (h w) (p2 p1 c)", p1=p, p2=p)),
        ("a plain reshape cuts the image into runs of consecutive pixels, not P x P squares. Split height and "
         "width into (grid, P) first: 'b c (h p1) (w p2) -> b (h w) (p1 p2 c)'.",
         lambda: images.reshape(batch, n, d)),
        ("a reshape of the channels-last image cuts it into runs of consecutive pixels, not P x P squares. "
         "Split height and width into (grid, P) first: 'b c (h p1) (w p2) -> b (h w) (p1 p2 c)'.",
         lambda: images.permute(0, 2, 3, 1).reshape(batch, n, d)),
    ]
    _diagnose(got, patchify(images, p), variants, what)
    _passed("check_patchify", f"{tuple(images.shape)} with P={p} -> {tuple(got.shape)}, row-major like vitedu")


def check_patch_embedding(cls: Callable[..., nn.Module], device=None) -> None:
    """Check a patch embedding ``cls(img_size, patch_size, in_chans, embed_dim)`` with a Linear ``proj``
    of shape (P * P * C -> embed_dim): forward (batch, C, H, W) -> (batch, N, embed_dim).

    The reference is ``vitedu.PatchEmbedding`` (a Conv2d) with the student's Linear weights reshaped into
    the convolution kernel: the two are the same map.
    """
    device, gen, what = _device(device), torch.Generator().manual_seed(8), "your patch embedding"
    img, p, chans, dim = 12, 4, 3, 10
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(8)
        module = _run(cls, img, p, chans, dim, what="creating your patch embedding")
    proj = getattr(module, "proj", None)
    if not isinstance(proj, nn.Linear) or tuple(proj.weight.shape) != (dim, p * p * chans):
        raise CheckFailed(
            f"{what} needs the layer `proj = nn.Linear(patch_size * patch_size * in_chans, embed_dim)` of the given "
            f"__init__ (here Linear({p * p * chans}, {dim})); got {proj!r}. Keep the __init__ and write only forward()."
        )
    module = module.to(device).eval()
    ref = PatchEmbedding(img, p, chans, dim).to(device).eval()
    with torch.no_grad():
        ref.proj.weight.copy_(rearrange(proj.weight, "d (p1 p2 c) -> d c p1 p2", p1=p, p2=p))
        ref.proj.bias.copy_(proj.bias)
        images = _randn(gen, 2, chans, img, img, device=device)
        got = _tensor_out(_run(module, images, what=what), what)
        n = (img // p) ** 2
        _check_shape(got, (2, n, dim), ("batch", "patches", "embed_dim"), what, hints={
            (2, n, p * p * chans): "These are the flattened patches: project them with self.proj."})

        def embed(pattern: str) -> Tensor:
            return proj(rearrange(images, f"b c (h p1) (w p2) -> {pattern}", p1=p, p2=p))

        variants = [
            (_COLUMN_MAJOR, lambda: embed("b (w h) (p1 p2 c)")),
            ("the numbers inside each patch are ordered (channel, row, column); order them (row, column, channel), "
             "'(p1 p2 c)', as vitedu.patchify does, so that self.proj sees the layout it expects.",
             lambda: embed("b (h w) (c p1 p2)")),
            ("the bias of the projection is missing: apply the whole Linear layer, self.proj(patches).",
             lambda: embed("b (h w) (p1 p2 c)") - proj.bias),
        ]
        _diagnose(got, ref(images), variants, what)
    _passed("check_patch_embedding", f"matches vitedu.PatchEmbedding (a Conv2d with kernel = stride = {p})")


def check_unfold_embedding(embed: Callable[[Tensor, nn.Conv2d], Tensor], device=None) -> None:
    """Check ``embed(images, conv)``: the patch embedding of ``conv`` (any kernel and stride, overlapping or
    not) computed with ``F.unfold`` and one matrix product instead of the convolution.

    (batch, C, H, W) -> (batch, N, D), equal to ``conv(images).flatten(2).transpose(1, 2)``.
    """
    device, gen, what = _device(device), torch.Generator().manual_seed(12), "embed_with_unfold(images, conv)"

    def one(chans: int, size: int, kernel: int, stride: int, dim: int) -> None:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(12)
            conv = nn.Conv2d(chans, dim, kernel, stride=stride).to(device)
        images = _randn(gen, 2, chans, size, size, device=device)
        with torch.no_grad():
            got = _tensor_out(_run(embed, images, conv, what=what), what)
            side = (size - kernel) // stride + 1
            n, n_plain = side * side, (size // kernel) ** 2
            _check_shape(got, (2, n, dim), ("batch", "patches", "embed_dim"), what, hints={
                (2, dim, n): "Tokens and features are swapped: unfold gives (batch, C*P*P, patches); "
                "transpose(1, 2) to (batch, patches, C*P*P) before the matrix product.",
                (2, n_plain, dim): f"You cut {n_plain} non-overlapping patches, but this convolution has stride "
                f"{stride} < kernel {kernel} (overlapping windows): pass stride=conv.stride to F.unfold.",
            })
            windows = torch.nn.functional.unfold(images, kernel, stride=stride).transpose(1, 2)  # (b, n, c*p*p)
            variants = [
                ("F.unfold flattens each window in (channel, row, column) order, the order of the convolution "
                 "kernel itself; you reordered the kernel to (row, column, channel). Use conv.weight.flatten(1) "
                 "(shape (D, C*P*P)) as it is.",
                 lambda: windows @ rearrange(conv.weight, "d c p1 p2 -> d (p1 p2 c)").T + conv.bias),
                ("the bias is missing: add conv.bias after the matrix product.",
                 lambda: windows @ conv.weight.flatten(1).T),
            ]
            _diagnose(got, conv(images).flatten(2).transpose(1, 2), variants, what)

    one(3, 12, 4, 4, 10)
    _other_sizes("kernel 4, stride 4 (patches)", "kernel 4, stride 2 (overlapping windows), 2 channels",
                 lambda: one(2, 10, 4, 2, 6))
    _passed("check_unfold_embedding", "equals the convolution for non-overlapping and overlapping windows")


def _randomise(module: nn.Module, gen: torch.Generator) -> None:
    """Give every parameter a random value of a size that matters, so that every mistake shows.

    [CLS] and positions get unit size (their usual 0.02 would hide a missing position), LayerNorms a
    random gain and shift, Linear weights std 1/sqrt(fan_in) so that attention and MLP really mix the
    tokens instead of adding a tiny correction to the residual stream.
    """
    with torch.no_grad():
        for name, param in module.named_parameters():
            noise = torch.randn(param.shape, generator=gen)
            if name in ("cls_token", "pos_embed"):
                param.copy_(noise)
            elif "norm" in name:
                param.copy_((1.0 if name.endswith("weight") else 0.0) + 0.5 * noise)
            elif param.dim() == 2:  # Linear weights (out, in)
                param.copy_(noise / param.shape[1] ** 0.5)
            else:  # biases, the patch convolution
                param.copy_(0.1 * noise if param.dim() == 1 else noise / param[0].numel() ** 0.5)


def check_encoder_block(cls: Callable[..., nn.Module], device=None) -> None:
    """Check a pre-norm encoder block ``cls(dim, num_heads)`` with layers norm1, attn, norm2, mlp.

    forward: (batch, tokens, dim) -> (batch, tokens, dim), x = x + attn(norm1(x)); x = x + mlp(norm2(x)).
    The check copies a randomised ``vitedu.Block``'s weights into the student's module.
    """
    device, gen, what = _device(device), torch.Generator().manual_seed(9), "your encoder block"
    dim, heads = 16, 4
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(9)
        ref = Block(dim, heads).eval()
    _randomise(ref, gen)
    module = _build(cls, ref, what, device, dim=dim, num_heads=heads)
    ref = ref.to(device)
    x = _randn(gen, 2, 5, dim, device=device)
    n1, n2, mlp = ref.norm1, ref.norm2, ref.mlp

    def attn(t: Tensor) -> Tensor:
        return ref.attn(t)[0]

    with torch.no_grad():
        got = _tensor_out(_run(module, x, what=what), what)
        _check_shape(got, (2, 5, dim), ("batch", "tokens", "dim"), what)
        variants = [
            ("you normalised after the residual sum (post-norm, as in the original Transformer). ViT is "
             "pre-norm: normalise the *input* of each branch, x = x + attn(norm1(x)), then x = x + mlp(norm2(x)).",
             lambda: n2((y := n1(x + attn(x))) + mlp(y))),
            ("the residual connection around attention is missing: x = x + attn(norm1(x)), not attn(norm1(x)).",
             lambda: (y := attn(n1(x))) + mlp(n2(y))),
            ("the residual connection around the MLP is missing: x = x + mlp(norm2(x)), not mlp(norm2(x)).",
             lambda: mlp(n2(x + attn(n1(x))))),
            ("both residual connections are missing: each sub-layer *adds* its output to x.",
             lambda: mlp(n2(attn(n1(x))))),
            ("the skip connection carries the normalised tokens; it must carry x itself: "
             "x = x + attn(norm1(x)) (not norm1(x) + attn(norm1(x))).",
             lambda: (y := n1(x) + attn(n1(x))) + mlp(n2(y))),
            ("you used norm1 before the MLP; each sub-layer has its own LayerNorm: x = x + mlp(norm2(x)).",
             lambda: (y := x + attn(n1(x))) + mlp(n1(y))),
            ("the MLP sees the block's input, not the output of the attention step: first x = x + attn(norm1(x)), "
             "then x = x + mlp(norm2(x)) on that updated x.",
             lambda: x + attn(n1(x)) + mlp(n2(x))),
            ("the LayerNorms are missing: normalise the input of each branch, attn(norm1(x)) and mlp(norm2(x)).",
             lambda: (y := x + attn(x)) + mlp(y)),
        ]
        _diagnose(got, ref(x)[0], variants, what)
    _passed("check_encoder_block", f"matches vitedu.Block (dim={dim}, heads={heads}), pre-norm with residuals")


def check_vit_forward(cls: Callable[..., nn.Module], device=None) -> None:
    """Check a ViT ``cls(img_size, patch_size, in_chans, num_classes, embed_dim, depth, num_heads)`` with
    timm's layer names (patch_embed, cls_token, pos_embed, blocks, norm, head).

    forward: (batch, C, H, W) -> logits (batch, num_classes). The check copies a randomised
    ``vitedu.VisionTransformer``'s weights ([CLS] and positions of unit size) into the student's model.
    """
    device, gen, what = _device(device), torch.Generator().manual_seed(10), "your ViT"
    config = dict(img_size=12, patch_size=4, in_chans=3, num_classes=5, embed_dim=16, depth=2, num_heads=2)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(10)
        ref = VisionTransformer(**config).eval()
    _randomise(ref, gen)
    model = _build(cls, ref, what, device, **config)
    ref = ref.to(device)
    images = _randn(gen, 2, 3, 12, 12, device=device)

    def forward(cls_at_end: bool = False, pos: str = "all", pool: str = "first", norm: bool = True) -> Tensor:
        x = ref.patch_embed(images)  # (batch, patches, dim)
        cls_token = ref.cls_token.expand(x.shape[0], -1, -1)
        if pos == "patches-only":
            x = x + ref.pos_embed[:, 1:]
        x = torch.cat([x, cls_token] if cls_at_end else [cls_token, x], dim=1)
        if pos == "all":
            x = x + ref.pos_embed
        for block in ref.blocks:
            x = block(x)[0]
        x = ref.norm(x) if norm else x
        pooled = {"first": x[:, 0], "last": x[:, -1], "mean": x.mean(dim=1)}[pool]
        return ref.head(pooled)

    with torch.no_grad():
        got = _tensor_out(_run(model, images, what=what), what)
        _check_shape(got, (2, config["num_classes"]), ("batch", "num_classes"), what, hints={
            (2, 10, config["num_classes"]): "You return logits for every token: classify the [CLS] token, x[:, 0].",
            (2, 9, config["num_classes"]): "You return logits for every patch: prepend [CLS] and classify x[:, 0]."})
        cls_end = ("the [CLS] token is at the wrong end: you appended it after the patches. Prepend it, "
                   "torch.cat([cls, x], dim=1), so that it is token 0, the one the head reads (x[:, 0]) and the "
                   "one pos_embed[:, 0] belongs to.")
        variants = [
            (cls_end, lambda: forward(cls_at_end=True, pool="last")),
            (cls_end, lambda: forward(cls_at_end=True, pool="first")),
            ("the position embeddings are not added: without them the model cannot tell where a patch came from. "
             "Add self.pos_embed to the tokens after prepending [CLS].",
             lambda: forward(pos="none")),
            ("the [CLS] token gets no position: prepend [CLS] first, then add all N + 1 rows of self.pos_embed.",
             lambda: forward(pos="patches-only")),
            ("you averaged all tokens; this ViT classifies from the [CLS] token alone: self.head(x[:, 0]).",
             lambda: forward(pool="mean")),
            ("the final LayerNorm is missing: apply self.norm to the tokens after the last block.",
             lambda: forward(norm=False)),
        ]
        _diagnose(got, ref(images), variants, what)
    _passed("check_vit_forward", "logits match vitedu.VisionTransformer ([CLS] first, positions added, final norm)")



# ----------------------------------------------------------------------------------------------------
# A3: the training step


def _tiny_classifier(gen: torch.Generator, device: torch.device) -> nn.Module:
    """A small MLP on 8x8 images (its weights drawn from ``gen``): the check needs a model, not a ViT."""
    model = nn.Sequential(nn.Flatten(), nn.Linear(64, 16), nn.GELU(), nn.Linear(16, 10))
    with torch.no_grad():
        for param in model.parameters():
            param.copy_(torch.randn(param.shape, generator=gen) * 0.3)
    return model.to(device)


def _reference_epoch(model: nn.Module, batches: list, lr: float, zero_grad: bool = True,
                     step: bool = True) -> list[float]:
    """The reference training epoch (SGD), with switchable mistakes; returns each batch's mean loss."""
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    losses = []
    for images, labels in batches:
        loss = torch.nn.functional.cross_entropy(model(images), labels)
        if zero_grad:
            optimizer.zero_grad()
        loss.backward()
        if step:
            optimizer.step()
        losses.append(loss.item())
    return losses


def check_train_epoch(train_epoch: Callable[..., float], device=None) -> None:
    """Check ``train_epoch(model, batches, optimizer) -> float``: training mode, one optimizer step per batch
    (zero_grad, backward, step), and the mean loss per *image* over the epoch.

    The check compares the parameters after one epoch of plain SGD with a reference epoch, starting from the
    same weights, and hands the model over in eval mode (as after an evaluation) to see that training mode
    is switched on.
    """
    device, gen, what = _device(device), torch.Generator().manual_seed(13), "train_epoch(model, batches, optimizer)"
    model = _tiny_classifier(gen, device)
    sizes = (8, 8, 5)  # the last batch is smaller, so a plain mean of batch losses is visibly wrong
    batches = [(_randn(gen, n, 1, 8, 8, device=device), torch.randint(0, 10, (n,), generator=gen).to(device))
               for n in sizes]
    start = {name: p.detach().clone() for name, p in model.state_dict().items()}

    def trained(**mistake: bool) -> tuple[list[float], list[Tensor]]:
        ref = _tiny_classifier(torch.Generator(), device)
        ref.load_state_dict(start)
        losses = _reference_epoch(ref, batches, lr=0.5, **mistake)
        return losses, [p.detach() for p in ref.parameters()]

    model.eval()  # as after evaluate(): train_epoch must switch training mode back on
    loss = _run(train_epoch, model, batches, torch.optim.SGD(model.parameters(), lr=0.5), what=what)
    if not model.training:
        raise CheckFailed(
            f"{what} left the model in eval mode: call model.train() at its start. After an evaluation the "
            "model is in eval mode, where dropout, stochastic depth and batch-norm statistics behave as at test "
            "time; training in that mode silently trains a different model.")
    if isinstance(loss, Tensor):
        raise CheckFailed(f"{what} returned a tensor; return a Python float (loss.item()), so that the "
                          "history does not keep every batch's computation graph alive.")
    if not isinstance(loss, (float, int)):
        raise CheckFailed(f"{what} should return the mean loss as a float, but returned {type(loss).__name__}.")
    params = [p.detach() for p in model.parameters()]

    def same(other: list[Tensor]) -> bool:
        return all(_close(a, b) for a, b in zip(params, other))

    losses, expected = trained()
    if not same(expected):
        if all(torch.equal(a, b) for a, b in zip(params, start.values())):
            raise CheckFailed(f"{what} did not change the weights: call optimizer.step() after loss.backward().")
        if same(trained(zero_grad=False)[1]):
            raise CheckFailed(
                f"{what}: the gradients accumulate from batch to batch: call optimizer.zero_grad() before "
                "loss.backward() (PyTorch adds new gradients to the old ones).")
        raise CheckFailed(f"{what}: after one epoch the weights differ from those of a reference epoch (one "
                          "zero_grad, backward, step per batch, with F.cross_entropy on the model's logits).")
    per_image = sum(value * n for value, n in zip(losses, sizes)) / sum(sizes)
    if abs(loss - per_image) > 1e-4:
        if abs(loss - sum(losses) / len(losses)) < 1e-4:
            raise CheckFailed(
                f"{what} returned the mean of the batch losses ({loss:.4f}); the last batch is smaller, so weight "
                f"each batch by its size: sum(loss * len(labels)) / number of images = {per_image:.4f}.")
        raise CheckFailed(f"{what} returned {loss:.4f}; the mean training loss per image is {per_image:.4f}.")
    _passed("check_train_epoch", "training mode, one step per batch, mean loss per image")
