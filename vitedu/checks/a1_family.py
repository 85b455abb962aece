"""The family of attention computations A1's checks compare a student's result with: vitedu's, and the same
computation with one or two of the usual mistakes switched on (a softmax over another axis, another scale,
keys compared with queries, no softmax, transposed weights).

A mistake is recognised by what the code *computes*, not by how it is written: ``q @ k.mT``, ``torch.matmul``,
``einsum`` or ``F.softmax(x, 2)`` on 4-D inputs all give one member of the family, and the check names that
member. Two mistakes at once are named together. A scale that is none of the family's is *fitted* and named
when it is a size of the inputs (``fit_the_scale``).
"""

from __future__ import annotations

import itertools
from typing import Callable, Iterator

import torch
from torch import Tensor

from .diagnosis import CheckFailed, Variants, WrongSize, close, diagnose, fit_scale, name_scale, named_scale

BATCH_HINT = (
    "Your function must work for any leading axes (..., tokens, features), e.g. (batch, heads, tokens, d_k): "
    "transpose the keys with k.transpose(-2, -1) rather than k.T, and take the softmax with dim=-1."
)


def softmax_axis(dim: int, axes: tuple[str, ...]) -> str:
    """How a student may have written the axis ``dim`` of logits with these axes: 'dim=-2', 'dim=1 or -3'."""
    n = len(axes)
    d = dim % n
    return f"dim={d - n}" if d == n - 2 else f"dim={d} or {d - n}"


def sdpa(q: Tensor, k: Tensor, v: Tensor | None = None, scale: float | None = None, softmax_dim: int = -1,
         keys_first: bool = False, softmax: bool = True, transpose_weights: bool = False) -> Tensor:
    """Attention with switchable mistakes (the family); ``v=None`` returns the weights."""
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    logits = (k @ q.transpose(-2, -1) if keys_first else q @ k.transpose(-2, -1)) * scale
    weights = logits.softmax(dim=softmax_dim) if softmax else logits
    weights = weights.transpose(-2, -1) if transpose_weights else weights
    return weights if v is None else weights @ v


def scale_mistakes(d_k: int) -> list[tuple[str, str, float]]:
    """The usual wrong scales: (the hint when it is the only mistake, a short phrase for two mistakes, scale)."""
    return [
        (f"the scale is missing. Divide the logits q @ k^T by sqrt(d_k) = sqrt({d_k}) before the softmax; "
         "without it the logits grow with d_k and the softmax saturates.",
         f"the scale is missing (divide the logits by sqrt(d_k) = sqrt({d_k}))", 1.0),
        (f"you divided by d_k = {d_k}; the scale is 1 / sqrt(d_k) = 1 / sqrt({d_k}) (use q.shape[-1] ** 0.5). "
         "(Scaling twice, e.g. q / sqrt(d_k) handed to a function that scales again, gives the same.)",
         f"the logits are divided by d_k = {d_k} instead of sqrt(d_k)", 1.0 / d_k),
        (f"you multiplied the logits by sqrt(d_k); divide them by sqrt(d_k) = sqrt({d_k}).",
         "the logits are multiplied by sqrt(d_k) instead of divided by it", d_k**0.5),
    ]


def hardcoded_scale_variants(q: Tensor, k: Tensor, v: Tensor | None) -> list[tuple[str, Callable[[], Tensor]]]:
    d_k = q.shape[-1]
    return [(f"you scaled by 1 / sqrt({c}) although d_k = {d_k} here: d_k is hard-coded. Read it from the "
             "inputs, d_k = q.shape[-1], so that the function works for every head size.",
             lambda c=c: sdpa(q, k, v, scale=c**-0.5)) for c in (4, 8, 16, 32, 64, 128) if c != d_k]


def structure_variants(q: Tensor, k: Tensor, v: Tensor | None, axes: tuple[str, ...],
                       transposed_weights: bool = False, sums: Callable[[], str] | None = None) -> Variants:
    """Every single mistake of the family, then every pair of mistakes of different kinds, lazily.

    ``axes`` names the axes of the logits (the last two are queries and keys); ``sums`` says what the rows of the
    student's weights sum to, for the hint of a softmax over a wrong axis (called only when that hint is needed).
    """

    def variants() -> Iterator[tuple[str, Callable[[], Tensor]]]:
        atoms = structure_atoms(q.shape[-1], axes, transposed_weights, sums)
        for _, alone, _, switches in atoms:
            yield alone, lambda s=switches: sdpa(q, k, v, **s)
        for (kind_a, _, a, sa), (kind_b, _, b, sb) in itertools.combinations(atoms, 2):
            if kind_a != kind_b:
                yield (f"two mistakes at once: {a}; and {b}. Fix both.",
                       lambda s={**sa, **sb}: sdpa(q, k, v, **s))

    return variants()


def structure_atoms(d_k: int, axes: tuple[str, ...], transposed_weights: bool = False,
                    sums: Callable[[], str] | None = None) -> list[tuple[str, str, str, dict]]:
    """The family's single mistakes: (kind, the hint when it is the only mistake, a short phrase for a pair,
    ``sdpa``'s switches). Two mistakes of one kind (two softmax axes, two scales) cannot occur together."""
    atoms: list[tuple[str, str, str, dict]] = []
    rows = f": the rows of your attention weights sum to {sums()} instead of 1" if sums else ""
    for d in reversed(range(len(axes) - 1)):  # the queries axis first, the likeliest
        atoms.append(("axis", f"the softmax ran over the wrong axis ({softmax_axis(d, axes)}, the {axes[d]}){rows}. "
                      "Each query distributes its attention over the keys: softmax(dim=-1).",
                      f"the softmax runs over the {axes[d]} axis ({softmax_axis(d, axes)}) instead of the keys "
                      "(dim=-1)", dict(softmax_dim=d)))
    atoms.append(("keys", "you compared the keys with the queries (k @ q^T), as if with transposed keys, which "
                  "gives one row per *key*. The logits are q @ k.transpose(-2, -1): row i holds query i's "
                  "similarity to every key.",
                  "the logits compare keys with queries (k @ q^T instead of q @ k.transpose(-2, -1))",
                  dict(keys_first=True)))
    atoms.append(("axis", "the softmax is missing: the logits go straight into the weighted sum. Apply "
                  "softmax(dim=-1) to the scaled logits first, so that each query's weights are positive and sum "
                  "to one.", "the softmax is missing (apply softmax(dim=-1) to the scaled logits)",
                  dict(softmax=False)))
    if transposed_weights:
        atoms.append(("transposed", "you multiplied the *transposed* weights with v. The output is weights @ v "
                      "with weights of shape (..., queries, keys).",
                      "the weights are transposed before the product with v", dict(transpose_weights=True)))
    for alone, phrase, scale in scale_mistakes(d_k):
        atoms.append(("scale", alone, phrase, dict(scale=scale)))
    return atoms


def fit_the_scale(at_scale: Callable[[float], Tensor], d_k: int, sizes: dict[str, int],
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


def token_sizes(q: Tensor, k: Tensor, v: Tensor | None = None) -> dict[str, int]:
    """The sizes of the inputs other than d_k that a wrong scale may have used, each with its name: the
    numbers of keys and queries, d_v, and the leading axes (heads, batch) of 4-D inputs."""
    if q.shape[-2] == k.shape[-2]:
        sizes = {"the number of tokens (keys), k.shape[-2]": k.shape[-2]}
    else:
        sizes = {"the number of keys, k.shape[-2]": k.shape[-2], "the number of queries, q.shape[-2]": q.shape[-2]}
    if v is not None and v.shape[-1] != q.shape[-1]:
        sizes["d_v, the width of the values (v.shape[-1]), not of the queries and keys"] = v.shape[-1]
    leading = {4: ("the batch size, q.shape[0]", "the number of heads, q.shape[1]"), 3: ("the batch size, q.shape[0]",)}
    for i, name in enumerate(leading.get(q.dim(), ())):
        if q.shape[i] not in sizes.values() and q.shape[i] not in (1, q.shape[-1]):
            sizes[name] = q.shape[i]
    return sizes


def diagnose_weights(got: Tensor, q: Tensor, k: Tensor, what: str, axes: tuple[str, ...],
                     sizes: dict[str, int], hardcoded: bool = False) -> None:
    """Name what is wrong with attention weights ``got`` (already of the right shape) for inputs q, k: a softmax
    over a wrong axis (found from which axis of ``got`` sums to one), a missing or another normalisation, then
    the family's mistakes one and two at a time, and a fitted scale."""
    got = got.to(q.device, q.dtype)
    d_k = q.shape[-1]
    rows = got.sum(dim=-1)
    if torch.isfinite(got).all() and not torch.allclose(rows, torch.ones_like(rows), atol=1e-3):
        sums = f"{rows.min().item():.2f}...{rows.max().item():.2f}"
        for d in reversed(range(len(axes) - 1)):  # the queries axis first, the likeliest
            along = got.sum(dim=d)
            if torch.allclose(along, torch.ones_like(along), atol=1e-3):
                where = "the columns" if d == len(axes) - 2 else f"the weights along axis {d} ({axes[d]})"
                raise CheckFailed(
                    f"{what}: the rows of your weights sum to {sums} instead of 1, but {where} sum to one: the "
                    f"softmax ran over the {axes[d]} axis ({softmax_axis(d, axes)}). Each query distributes its "
                    "attention over the keys, so apply softmax over the last axis: softmax(dim=-1).")
        for scale in (None, 1.0, 1 / d_k, d_k**0.5):
            logits = sdpa(q, k, scale=scale, softmax=False)
            for hint, other in (
                ("you took exp() of the logits but did not divide each row by its sum: that is half a softmax. "
                 "Use logits.softmax(dim=-1).", logits.exp()),
                ("these are log-probabilities (log_softmax); attention weights are probabilities: "
                 "logits.softmax(dim=-1).", logits.log_softmax(dim=-1)),
                ("you used a sigmoid, which weighs every key on its own, so a query's weights do not sum to one. "
                 "Attention shares each query's attention among the keys: logits.softmax(dim=-1).", logits.sigmoid()),
            ):
                if close_enough(got, other):
                    raise CheckFailed(f"{what}: {hint}")
        if got.min() < 0:
            raise CheckFailed(
                f"{what}: some weights are negative and the rows sum to {sums} instead of 1: did you forget the "
                "softmax? Attention weights are softmax(logits, dim=-1), a probability distribution over the keys "
                "for every query.")
        raise CheckFailed(
            f"{what}: the rows sum to {sums} instead of 1. Every row (one query) must be a probability "
            "distribution over the keys: softmax(logits, dim=-1).")

    def variants() -> Iterator[tuple[str, Callable[[], Tensor]]]:
        yield from structure_variants(q, k, None, axes)
        if hardcoded:
            yield from hardcoded_scale_variants(q, k, None)
        logits = sdpa(q, k, softmax=False)
        yield ("you divided the logits by their row sums instead of taking a softmax: the weights sum to one "
               "but are not exp(logit) / sum(exp), and can be negative. Use logits.softmax(dim=-1).",
               lambda: logits / logits.sum(dim=-1, keepdim=True))

    diagnose(got, sdpa(q, k), variants(), what,
             fit=fit_the_scale(lambda s: sdpa(q, k, scale=s), d_k, sizes, what))


def close_enough(got: Tensor, ref: Tensor) -> bool:
    """``diagnosis.close`` for results that may hold inf (exp of large logits)."""
    return bool(torch.isfinite(ref).all()) and close(got, ref)
