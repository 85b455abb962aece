"""The machinery every assignment check shares: run the student's code, compare with the reference, diagnose.

``run_student`` turns the student's exceptions (``NotImplementedError`` of an unfilled cell, a shape error)
into a ``CheckFailed`` that says where; ``diagnose`` compares a result with the reference and with deliberately
wrong variants and names the mistake the result matches; ``other_sizes`` re-runs a check at a second set of sizes
to catch sizes written in as numbers. Inputs come from a generator of the check's own (``randn``), so a check
never changes the notebook's random numbers.
"""

from __future__ import annotations

import math
import textwrap
from typing import Any, Callable, Iterable

import torch
from torch import Tensor, nn

from ..utils import get_device

# Results count as equal within this fraction of the reference's largest value (close()). Loose enough for
# float32 results computed in another order, or on a GPU whose convolutions may use TF32 (about 1e-3
# relative); tight enough to tell every mistake the checks name from the right result (tests/test_checks.py).
TOLERANCE = 2e-3
# Messages are printed into notebooks, whose rendered code blocks show 76 characters before they scroll.
PAGE_WIDTH = 76


class CheckFailed(AssertionError):
    """A check found a mistake; the message names the likely mistake and how to fix it."""


class StudentError(CheckFailed):
    """The student's code raised an exception (other than the NotImplementedError of an unfilled cell)."""


class WrongSize(CheckFailed):
    """A size of the inputs used where another belongs (the scale 1/sqrt(d_v) instead of 1/sqrt(d_k), say).

    Sizes that are equal in a check's first configuration can tell this apart only in its second; such a
    mistake is not a number written in, so ``other_sizes`` passes it on as it is."""


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


# Errors whose message says little to a student, each with what usually causes it and the fix: (words of the
# error message, the explanation). The first whose words all occur in the message is added to the report.
_ERROR_HINTS: list[tuple[tuple[str, ...], str]] = [
    (("same device",), "Create new tensors on the device of the inputs (e.g. torch.zeros_like(x), "
     "torch.ones(..., device=x.device)) instead of the default CPU."),
    (("view size is not compatible",),
     "After a transpose the memory is not contiguous: use .reshape(...) instead of .view(...)."),
    (("modified by an inplace operation",),
     "optimizer.step() changed the weights in place after the forward pass and before loss.backward(), which "
     "still needed the old weights (the step used the previous batch's gradients). The order within each batch "
     "is: forward and loss, optimizer.zero_grad(), loss.backward(), optimizer.step()."),
    (("does not require grad",),
     "The loss has no gradient graph: the forward pass ran under torch.no_grad() (or the logits were detached, "
     "e.g. with .item() or .detach()). Training needs the graph: run the model outside torch.no_grad()."),
    (("unsupported operand", "tuple"),
     "A tuple met a tensor: vitedu's attention and blocks return a pair (output, attention weights or None). "
     "Unpack it, out, _ = self.attn(x) (or take [0]), before adding it to x."),
    (("'tuple' object has no attribute",),
     "A tuple was used as a tensor: vitedu's attention and blocks return a pair (output, attention weights or "
     "None). Unpack it, x, _ = block(x) (or out, _ = self.attn(x)), before using the output."),
    (("mean(): could not infer output dtype",),
     "(predictions == labels) is a tensor of booleans, which has no mean: convert it first, "
     "(predictions == labels).float().mean()."),
    (("Sizes of tensors must match except in dimension",),
     "torch.cat needs the same sizes on every other axis: self.cls_token has shape (1, 1, D); expand it to the "
     "batch first, self.cls_token.expand(x.shape[0], -1, -1)."),
]


def run_student(fn: Callable[..., Any], *args: Any, what: str, hint: str = "") -> Any:
    """Call the student's code; turn a stub or a crash into a CheckFailed that says what to do
    (a ``StudentError`` for a crash)."""
    try:
        return fn(*args)
    except NotImplementedError as err:
        raise CheckFailed(
            f"you have not implemented `{_where_not_implemented(err)}` yet (it raises NotImplementedError). "
            "Replace `raise NotImplementedError()` with your code, run that cell, then run this check again."
        ) from None
    except Exception as err:
        shapes = ", ".join(f"{tuple(a.shape)}" for a in args if isinstance(a, Tensor))
        extra = next((text for words, text in _ERROR_HINTS if all(w in str(err) for w in words)), "")
        if extra:
            hint = ""  # the explanation of this error replaces the check's generic hint
        if isinstance(err, IndexError) and "shape of the mask" in str(err):
            extra = (
                " Indexing with a boolean mask, t[mask], needs a mask of t's full shape: it does not broadcast. "
                "masked_fill broadcasts a mask such as (batch, 1, 1, keys) over the heads and queries: "
                "logits = logits.masked_fill(~mask, float('-inf'))."
            )
            hint = ""  # the generic hint of the check (about k.T, ...) does not apply to this error
        raise StudentError(
            f"{what} raised {type(err).__name__}: {err}"
            + (f"\n(called with tensors of shape {shapes})" if shapes else "")
            + (f"\n{extra.strip()}" if extra else "")
            + (f"\nHint: {hint}" if hint else "")
        ) from err


def build_student(cls: Callable[..., nn.Module], reference: nn.Module, what: str, device: torch.device, **kwargs: Any):
    """Instantiate the student's module and give it the reference's (randomised) parameters."""
    with torch.random.fork_rng(devices=[]):  # the notebook's random numbers stay as they were
        module = run_student(cls, *kwargs.values(), what=f"creating {what}")
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


def tensor_out(out: Any, what: str) -> Tensor:
    if isinstance(out, (tuple, list)) and out and isinstance(out[0], Tensor):
        out = out[0]  # e.g. (output, attention weights)
    if not isinstance(out, Tensor):
        raise CheckFailed(
            f"{what} should return a tensor, but it returned {type(out).__name__}. Did you forget `return`?"
        )
    return out.detach()


# ----------------------------------------------------------------------------------------------------
# Comparing with the reference and with the deliberately wrong variants


def close(got: Tensor, ref: Tensor, nan_equal: bool = False) -> bool:
    """Equal within the checks' tolerance. With ``nan_equal``, NaN where ``ref`` has NaN counts as equal (a
    deliberately wrong variant may produce NaN, e.g. a softmax over a row of -inf)."""
    if got.shape != ref.shape:
        return False
    got = got.to(device=ref.device, dtype=ref.dtype)
    if nan_equal:
        nan = torch.isnan(ref)
        if not torch.equal(torch.isnan(got), nan):
            return False
        got, ref = got.masked_fill(nan, 0.0), ref.masked_fill(nan, 0.0)
    if not torch.isfinite(got).all() or not torch.isfinite(ref).all():
        return False
    return bool((got - ref).abs().max() <= TOLERANCE * ref.abs().max() + 1e-5)


def check_shape(got: Tensor, expected: tuple[int, ...], axes: tuple[str, ...], what: str, hints=None) -> None:
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


Variants = Iterable[tuple[str, Callable[[], Tensor]]]


def diagnose(got: Tensor, ref: Tensor, variants: Variants, what: str, otherwise: str = "",
             fit: Callable[[Tensor], str | None] | None = None, fallback: Callable[[], None] | None = None) -> None:
    """Pass if ``got`` matches ``ref``; else name the first deliberately wrong variant it matches (NaN where
    the variant has NaN counts as a match: a variant may be a softmax of a row of -inf), or what ``fit`` finds
    when it fits a parameter (a scale, ...) of the computation to ``got``, or what ``fallback`` finds (it
    raises a CheckFailed, or returns when it has nothing to say).

    ``variants`` may be a generator: the variants are computed one by one until one matches, so a family of
    many deliberately wrong computations (every combination of two mistakes, say) costs only what it tries.
    """
    if close(got, ref):
        return
    finite = bool(torch.isfinite(got).all())
    for hint, variant in variants:
        try:
            expected = variant()
        except (RuntimeError, IndexError, ValueError):
            continue  # a mistake that cannot be made with inputs of these shapes
        if close(got, expected, nan_equal=not finite):
            raise CheckFailed(f"{what}: {hint}")
    if not finite:
        raise CheckFailed(f"{what} returned NaN or inf values. Look for a division by zero or a log of zero.")
    hint = fit(got) if fit is not None else None
    if hint:
        raise CheckFailed(f"{what}: {hint}")
    if fallback is not None:
        fallback()
    err = (got.to(ref.device, ref.dtype) - ref).abs().max().item()
    raise CheckFailed(
        f"{what} returns the right shape but wrong values: the largest difference from vitedu's result is "
        f"{err:.3g} (the reference's values reach {ref.abs().max().item():.3g}). "
        + (otherwise or "Compare your code with the formula in the text, one line at a time.")
    )


def fit_scale(got: Tensor, at_scale: Callable[[float], Tensor], low: float = 1e-3, high: float = 1e3) -> float | None:
    """The positive scalar s for which ``at_scale(s)`` best matches ``got`` (a grid over log s, then a
    golden-section refinement); None unless that best match is within the checks' tolerance."""

    def error(log_s: float) -> float:
        out = at_scale(math.exp(log_s))
        return (got.to(out.device, out.dtype) - out).abs().max().item()

    grid = torch.linspace(math.log(low), math.log(high), 121).tolist()
    errors = [error(g) for g in grid]
    best = min(range(len(grid)), key=errors.__getitem__)
    a, b = grid[max(best - 1, 0)], grid[min(best + 1, len(grid) - 1)]
    ratio = (math.sqrt(5) - 1) / 2
    for _ in range(40):
        c, d = b - ratio * (b - a), a + ratio * (b - a)
        if error(c) < error(d):
            b = d
        else:
            a = c
    s = math.exp((a + b) / 2)
    return s if close(got, at_scale(s)) else None


def named_scale(s: float, sizes: dict[str, int], tolerance: float = 0.02) -> str | None:
    """Which simple expression of the named sizes a fitted scale is, e.g. 'a scale of 1/sqrt(6) (= 0.408),
    and 6 is the number of keys'; None when it is none of them."""
    for label, size in sizes.items():
        for text, value in ((f"1/sqrt({size})", size**-0.5), (f"1/{size}", 1 / size),
                            (f"sqrt({size})", size**0.5), (f"{size}", float(size))):
            if abs(s / value - 1) < tolerance:
                return f"a scale of {text} (= {s:.3g}), and {size} is {label}"
    return None


def name_scale(s: float, sizes: dict[str, int], tolerance: float = 0.02) -> str:
    """Say which simple expression of the named sizes a fitted scale is, e.g. '1/sqrt(6)' where 6 is the
    number of keys, or just its value when it is none of them."""
    named = named_scale(s, sizes, tolerance)
    if named:
        return named
    if abs(s - 1) < tolerance:
        return "a scale of 1 (no scale at all)"
    return f"a scale of {s:.3g}, none of 1/sqrt(n), 1/n for a size n of the inputs"


def passed(name: str, detail: str) -> None:
    """Print one success message, "✓ check_x passed: ...", wrapped to the page with its continuation lines
    indented under the check's name (so it still reads as one message)."""
    print(textwrap.fill(f"✓ {name} passed: {detail}", PAGE_WIDTH, subsequent_indent="  ",
                        break_long_words=False, break_on_hyphens=False))


def resolve_device(device: str | torch.device | None) -> torch.device:
    return get_device() if device is None else torch.device(device)


def randn(gen: torch.Generator, *shape: int, device: torch.device) -> Tensor:
    return torch.randn(*shape, generator=gen).to(device)


def aspect(only: str | None, choices: tuple[str, ...], check: str) -> str | None:
    """Validate a check's ``only=`` argument: None (everything) or one of its aspects."""
    if only is not None and only not in choices:
        raise ValueError(f"{check}: unknown only={only!r}; choose one of {', '.join(map(repr, choices))}, "
                         "or leave it out to check everything")
    return only


def other_sizes(first: str, second: str, run: Callable[[], None]) -> None:
    """Run a check's second configuration. The first one passed, so a failure here means a hard-coded size
    (or code that works for one number of axes only, when the second configuration has another)."""
    try:
        run()
    except WrongSize:
        raise
    except StudentError as err:
        raise CheckFailed(
            f"a size is hard-coded, or a number of axes assumed: your code is right for {first} but raises an "
            f"error for {second}. Read every size from the inputs and index axes from the end (x.shape[-1], "
            "k.transpose(-2, -1)), so that it works for any sizes and any number of leading axes.\n"
            f"What went wrong with the second sizes: {err}"
        ) from None
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


def check_large_logits(fn: Callable[..., Any], args: tuple, ref: Tensor, logits: Tensor, what: str) -> None:
    """Large logits are where a naive exp(z) / exp(z).sum() breaks down (exp(89) is inf in float32)."""
    got = tensor_out(run_student(fn, *args, what=what), what)
    if not torch.isfinite(got).all():
        raise CheckFailed(f"{what}: " + _UNSTABLE.format(top=logits.abs().max().item()))
    diagnose(got, ref, [], what)
