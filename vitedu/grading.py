"""Fair grading: each graded part of an assignment is tested on top of *reference* earlier parts.

    # in the graded cell of part 2
    with reference_parts(globals(), "attention_weights"):
        check_attention(attention)

A student's ``attention`` calls their own ``attention_weights``. Tested as it is, one wrong line in part 1
would fail every later part too (a cascade: a softmax over the wrong axis once cost 16 of 20 points).
Inside ``reference_parts`` the notebook's names of the earlier parts point to the reference versions
below, so the later part is graded on its own code alone; on leaving the block the student's versions
are put back, whatever happened inside. This is nbgrader's recommended practice for dependent parts.

The references are thin wrappers around ``vitedu`` (nothing here that the book does not already show).

``where_run`` names what decides a CPU training run's last digits (the processor, PyTorch's CPU kernels,
the threads, the PyTorch version), so that a student's run and the grader's re-execution can be compared:
where both lines are the same, a seeded run repeats to the last digit; a different line explains different
digits.
"""

from __future__ import annotations

import contextlib
import io
import platform
from contextlib import contextmanager
from typing import Any, Callable, Iterator

import torch
from torch import Tensor

from .attention import merge_heads, scaled_dot_product_attention, split_heads
from .patching import patchify

__all__ = ["REFERENCE_PARTS", "part_is_right", "reference_parts", "where_run"]


def _attention_weights(q: Tensor, k: Tensor) -> Tensor:
    """(..., queries, d_k), (..., keys, d_k) -> (..., queries, keys)"""
    return (q @ k.transpose(-2, -1) * q.shape[-1] ** -0.5).softmax(dim=-1)


def _attention(q: Tensor, k: Tensor, v: Tensor) -> Tensor:
    """(..., queries, d_k), (..., keys, d_k), (..., keys, d_v) -> (..., queries, d_v)"""
    return scaled_dot_product_attention(q, k, v)[0]


def _masked_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor) -> Tensor:
    """Attention where ``mask`` (True = may attend) is broadcastable to (..., queries, keys)."""
    return scaled_dot_product_attention(q, k, v, mask=mask)[0]


def _accuracy(logits: Tensor, labels: Tensor) -> float:
    """logits (batch, classes), labels (batch,) -> fraction of correct predictions"""
    return (logits.argmax(dim=-1) == labels).float().mean().item()


# The name each part has in the assignment notebooks -> its reference implementation.
REFERENCE_PARTS: dict[str, Callable[..., Any]] = {
    "attention_weights": _attention_weights,
    "attention": _attention,
    "masked_attention": _masked_attention,
    "split_heads": split_heads,
    "merge_heads": merge_heads,
    "patchify": patchify,
    "accuracy": _accuracy,
}

_MISSING = object()


@contextmanager
def reference_parts(namespace: dict[str, Any], *names: str) -> Iterator[None]:
    """Within the block, ``namespace[name]`` is the reference implementation for every name given.

    ``namespace`` is the notebook's ``globals()``: functions defined there look their helpers up in it
    at call time, so a student's ``attention`` then calls the reference ``attention_weights``.
    """
    unknown = [name for name in names if name not in REFERENCE_PARTS]
    if unknown:
        raise ValueError(f"no reference implementation for {unknown}; known parts: {sorted(REFERENCE_PARTS)}")
    saved = {name: namespace.get(name, _MISSING) for name in names}
    namespace.update({name: REFERENCE_PARTS[name] for name in names})
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is _MISSING:
                namespace.pop(name, None)
            else:
                namespace[name] = value



def part_is_right(name: str, fn: Callable[..., Any]) -> bool:
    """Whether the student's ``fn`` (the part called ``name``) passes its check, with the check's output hidden.

    For a part that has no function of its own but runs an earlier one, such as A3's training run (Part 4), which
    runs the student's ``train_epoch``: when the earlier part is wrong its points are already lost there, and the
    later part is graded on what is left to it (error carried forward), not charged the same mistake again. What
    is left to it is real: A3's Part 4 still asks that the run learns (more than 50 % of the validation images
    right), so a loop that never moves the weights earns nothing there either.
    """
    from .checks import CheckFailed, check_cls_attention, check_train_epoch

    checks: dict[str, Callable[..., None]] = {"train_epoch": check_train_epoch, "cls_attention": check_cls_attention}
    if name not in checks:
        raise ValueError(f"no check for {name!r}; known parts: {sorted(checks)}")
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            checks[name](fn, device="cpu")
    except CheckFailed:
        return False
    return True


def where_run() -> str:
    """Two lines: the processor, then PyTorch's CPU kernels, threads and version.

    A seeded CPU run repeats to the last digit where all of these are the same; elsewhere the kernels sum in
    another order (AVX2 or AVX-512 vectors, the matrix libraries' own code per processor), and a long run
    turns that into a slightly different model. The processor's name is read from ``/proc/cpuinfo`` on
    Linux (Colab), otherwise it is what ``platform`` knows (e.g. "arm" on an Apple chip).
    """
    name = platform.processor() or platform.machine() or "unknown"
    with contextlib.suppress(OSError):
        with open("/proc/cpuinfo") as cpuinfo:
            name = next((line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name")), name)
    threads = torch.get_num_threads()
    return (f"processor: {name}\nCPU kernels {torch.backends.cpu.get_cpu_capability()}, "
            f"{threads} thread{'s' * (threads != 1)}, torch {torch.__version__}")
