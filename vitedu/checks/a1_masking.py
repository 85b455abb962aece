"""Assignment 1, Part 3: masked attention.

The check compares the student's result with vitedu's and with a family of deliberately wrong masked
attentions, each computed here: the mask ignored, inverted (whatever the fill: -inf, a large finite number,
masked_fill or added, +1e9 where -1e9 belongs), applied to the queries, applied after the softmax, multiplied
into the logits, 0 x -inf; a fully masked query left NaN, made uniform by a finite fill, or left unmasked by a
moderate additive one; each alone or with one of attention's own mistakes (scale, softmax axis, k q^T). A form
of a mistake is recognised by what it computes, however it is written.
"""

from __future__ import annotations

from typing import Callable, Iterator

import torch
from torch import Tensor

from ..attention import scaled_dot_product_attention
from .a1_family import BATCH_HINT, fit_the_scale, sdpa, structure_atoms, token_sizes
from .diagnosis import (
    CheckFailed,
    aspect,
    check_shape,
    diagnose,
    other_sizes,
    passed,
    randn,
    resolve_device,
    run_student,
    tensor_out,
)

_FIX = "logits.masked_fill(~mask, float('-inf')) before the softmax"
_ON_KEYS = ("The padding mask (batch, 1, 1, keys) already lies along the keys: use it as it is, "
            f"{_FIX}, without transposing it.")
ON_QUERIES = ("the mask is applied to the queries: it hides the padding *queries* (rows of the logits) instead of "
              "the padding *keys* (columns), so the real queries still attend to the padding. " + _ON_KEYS)
IGNORED = ("the mask is ignored: every query still attends to the padding keys. Before the softmax, set the "
           f"logits of the masked keys to -inf: {_FIX}.")
INVERTED = ("the mask is inverted, it works the wrong way round: the keys the mask hides (False) get the attention "
            "and the others none. True means 'may attend', so hide the keys where the mask is *False*: "
            f"{_FIX} (or, added: logits + (~mask) * -1e9; never +1e9, and never where mask is True).")
AFTER_SOFTMAX = ("you zeroed the masked weights *after* the softmax (or the values of the masked keys, which is the "
                 "same), so the rows no longer sum to one. Mask the "
                 "logits before the softmax (fill them with -inf), then the softmax renormalises over the kept keys.")
MULTIPLIED = ("you multiplied the logits by the mask (or zeroed the masked keys), which sets masked logits to 0, and "
              f"exp(0) = 1 is still a share of attention. Fill them with -inf instead: {_FIX}.")
ZERO_TIMES_INF = ("every output is NaN (or zero, after nan_to_num): adding mask * -inf (or (~mask) * -inf) "
                  "multiplies the kept positions by -inf too, and 0 x -inf is NaN. Use masked_fill (or torch.where), "
                  f"which writes -inf only where the mask is False: {_FIX}.")
EMPTY_NAN = ("a query whose every key is masked gets NaN: the softmax of a row of -inf is 0 / 0. Such a query has "
             "nothing to attend to; give it zero weights and so a zero output, as vitedu and "
             "F.scaled_dot_product_attention do (e.g. weights = logits.softmax(-1).nan_to_num(0.0)).")
EMPTY_UNIFORM = ("a query whose every key is masked got uniform weights (the mean of all values): with a finite fill "
                 "value such as -1e9 every logit of a fully masked row is the same number and the softmax of that "
                 "row is uniform. Give such a query zero weights, hence a zero output, as vitedu does: fill with "
                 "-inf and replace the NaN rows by zeros (.nan_to_num(0.0)).")
EMPTY_UNMASKED = ("a query whose every key is masked attends to all its keys as if there were no mask: adding the "
                  "same moderate number (say -1e4) to every logit of a row changes nothing after the softmax. Give "
                  "such a query zero weights, hence a zero output, as vitedu does: fill with -inf "
                  "(masked_fill(~mask, float('-inf'))) and replace the NaN rows by zeros (.nan_to_num(0.0)).")


def masked_variant(q: Tensor, k: Tensor, v: Tensor, mask: Tensor, how: str = "fill", fill: float = float("-inf"),
                   inverted: bool = False, queries: bool = False, nan_rows: bool = False, **structure) -> Tensor:
    """Masked attention with switchable mistakes; ``structure`` takes ``sdpa``'s (scale, softmax_dim, keys_first).

    how: "fill" (masked_fill with ``fill``), "add" (logits + hidden * fill), "ignored", "after softmax" (weights
    zeroed afterwards), "multiplied" (logits * mask). ``inverted`` hides the keys the mask keeps; ``queries``
    lays the mask along the queries; ``nan_rows`` keeps the NaN of fully masked rows instead of zeros.
    """
    softmax_dim = structure.pop("softmax_dim", -1)
    logits = sdpa(q, k, softmax=False, **structure)
    keep = mask.transpose(-2, -1) if queries else mask
    keep = ~keep if inverted else keep
    keep = keep.expand_as(logits) if keep.dim() <= logits.dim() else keep
    if how == "ignored":
        weights = logits.softmax(dim=softmax_dim)
    elif how == "after softmax":
        weights = logits.softmax(dim=softmax_dim) * keep
    elif how == "multiplied":
        weights = (logits * keep).softmax(dim=softmax_dim)
    elif how == "add":
        weights = (logits + (~keep).to(logits.dtype) * fill).softmax(dim=softmax_dim)
    elif how == "fill":
        weights = logits.masked_fill(~keep, fill).softmax(dim=softmax_dim)
    else:
        raise ValueError(how)
    weights = weights if nan_rows else weights.nan_to_num(0.0)
    return weights @ v


def _mask_forms() -> list[tuple[str, dict]]:
    """The mask's mistakes, each (hint, switches of ``masked_variant``), several forms of each mistake."""
    forms: list[tuple[str, dict]] = [(IGNORED, dict(how="ignored"))]
    for fill in (float("-inf"), -1e9, -1e4):
        for nan_rows in (False, True):
            forms.append((INVERTED, dict(fill=fill, inverted=True, nan_rows=nan_rows)))
    forms += [(INVERTED, dict(how="add", fill=1e9)), (INVERTED, dict(how="add", fill=-1e9, inverted=True)),
              (AFTER_SOFTMAX, dict(how="after softmax")), (MULTIPLIED, dict(how="multiplied")),
              (ZERO_TIMES_INF, dict(how="add", fill=float("-inf"), nan_rows=True)),
              (ZERO_TIMES_INF, dict(how="add", fill=float("-inf")))]
    for fill in (float("-inf"), -1e9):
        for nan_rows in (False, True):
            forms.append((ON_QUERIES, dict(fill=fill, queries=True, nan_rows=nan_rows)))
    forms += [(EMPTY_NAN, dict(nan_rows=True)), (EMPTY_UNIFORM, dict(fill=-1e9)),
              (EMPTY_UNIFORM, dict(how="add", fill=-1e9)), (EMPTY_UNMASKED, dict(how="add", fill=-1e4))]
    return forms


def _family(q: Tensor, k: Tensor, v: Tensor, mask: Tensor, axes: tuple[str, ...]) -> Iterator[tuple[str, Callable]]:
    """The mask's mistakes alone, attention's own mistakes with a right mask, then one of each together."""
    forms = _mask_forms()
    atoms = structure_atoms(q.shape[-1], axes)
    atoms = [atom for atom in atoms if "softmax" not in atom[3]]  # a masked softmax cannot be left out
    for hint, switches in forms:
        yield hint, lambda s=switches: masked_variant(q, k, v, mask, **s)
    for _, alone, _, structure in atoms:
        yield alone, lambda s=structure: masked_variant(q, k, v, mask, **s)
    for hint, switches in forms:
        for _, _, phrase, structure in atoms:
            yield (f"two mistakes at once. First, {hint[0].lower()}{hint[1:]} Second, {phrase}.",
                   lambda s={**switches, **structure}: masked_variant(q, k, v, mask, **s))


def check_masked_attention(masked_attention: Callable[..., Tensor], device=None, only: str | None = None) -> None:
    """Check ``masked_attention(q, k, v, mask)``: attention in which query i may only attend to key j where
    ``mask[..., i, j]`` is True.

    q: (..., queries, d_k), k: (..., keys, d_k), v: (..., keys, d_v), mask: bool, broadcastable to
    (..., queries, keys) -> (..., queries, d_v). A query whose every key is masked gets a zero output, as
    in ``vitedu.scaled_dot_product_attention`` and PyTorch's fused kernel.
    ``only="padding"``: padding masks only (4-D and 3-D inputs, two sizes), where every query keeps a key; without
    it the check adds a query whose every key is masked.
    """
    only = aspect(only, ("padding",), "check_masked_attention")
    device, gen, what = resolve_device(device), torch.Generator().manual_seed(11), "masked_attention(q, k, v, mask)"

    def one(shape: tuple[int, ...], lengths: list[int]) -> None:
        q, k, v = (randn(gen, *shape, device=device) * 1.5 for _ in range(3))
        batch, tokens = shape[0], shape[-2]
        # A padding mask: sequence b has lengths[b] real tokens, the rest is padding no query may attend to.
        mask = (torch.arange(tokens)[None, :] < torch.tensor(lengths)[:, None]).to(device)  # (batch, keys)
        mask = mask.reshape(batch, *[1] * (len(shape) - 2), tokens)  # the same for every head and query
        got = tensor_out(run_student(masked_attention, q, k, v, mask, what=what, hint=BATCH_HINT), what)
        axes = ("batch", "heads", "queries", "keys")[-len(shape):]
        check_shape(got, shape, (*axes[:-1], "d_v"), what)
        nan_rows = ~torch.isfinite(got).all(dim=-1)  # (batch, ..., queries)
        if nan_rows.any() and torch.equal(nan_rows, (~mask.transpose(-2, -1)[..., 0]).expand_as(nan_rows)):
            raise CheckFailed(
                f"{what}: the mask is applied to the queries: exactly the padding *queries* get NaN (every logit "
                "of their rows is masked), while the real queries still attend to the padding *keys* (columns). "
                + _ON_KEYS)
        diagnose(got, scaled_dot_product_attention(q, k, v, mask=mask)[0], _family(q, k, v, mask, axes), what,
                 fit=fit_the_scale(lambda s: masked_variant(q, k, v, mask, scale=s), shape[-1],
                                   token_sizes(q, k), what))

    one((2, 2, 6, 8), [6, 4])
    other_sizes("(batch, heads, tokens, d_k) = (2, 2, 6, 8)", "(batch, tokens, d_k) = (3, 5, 4)",
                lambda: one((3, 5, 4), [2, 5, 3]))
    if only == "padding":
        passed("check_masked_attention", "padding masks: matches vitedu for 4-D and 3-D inputs of two sizes")
        return
    # A query that may attend to no key at all (e.g. a padding query under a padding mask).
    q, k, v = randn(gen, 3, 4, device=device), randn(gen, 5, 4, device=device), randn(gen, 5, 2, device=device)
    mask = torch.tensor([[1, 1, 0, 0, 1], [0, 0, 0, 0, 0], [1, 0, 0, 0, 0]], dtype=torch.bool, device=device)
    got = tensor_out(run_student(masked_attention, q, k, v, mask, what=what), what)
    check_shape(got, (3, 2), ("queries", "d_v"), what)

    def empty_row() -> None:
        if not torch.isfinite(got[1]).all():
            raise CheckFailed(f"{what}: {EMPTY_NAN}")

    diagnose(got, scaled_dot_product_attention(q, k, v, mask=mask)[0], _family(q, k, v, mask, ("queries", "keys")),
             what, fallback=empty_row)
    passed("check_masked_attention", "matches vitedu for padding masks of two sizes and a fully masked query "
           "(zero output)")
