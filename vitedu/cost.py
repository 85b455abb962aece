"""What a call costs, measured: its time, the peak memory of attention, the tensors autograd saves (chapter 3).

Chapter 3 weighs the explicit attention path (which builds the (T, T) weights) against the fused kernel. Its
arguments are measurements, not shapes multiplied out, and these are the instruments:

    # ms per call, this thread's CPU time
    time_ms(lambda: attention(q, k, v))
    # {T: (explicit MiB, fused MiB)}, measured in a fresh process
    peak_memory_mib([256, 512, 1024])
    # what backward will need, and its first node
    saved, node = saved_for_backward(lambda: attention(...))
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import torch
from torch import Tensor


def time_ms(fn: Callable[[], object], min_s: float = 0.02, device: torch.device | str = "cpu") -> float:
    """Time of one call of ``fn()`` in milliseconds, averaged over as many calls as fill ``min_s`` seconds.

    On the CPU the clock is this thread's CPU time (``time.thread_time``), which other programs on the machine do
    not inflate; on a GPU it is wall time, with the device synchronised after every call (its kernels run
    asynchronously, so without that the clock would time the launches only).
    """
    cuda = torch.device(device).type == "cuda"
    clock = time.perf_counter if cuda else time.thread_time
    calls, start = 0, clock()
    while True:
        fn()
        if cuda:
            torch.cuda.synchronize()
        calls += 1
        elapsed = clock() - start
        if elapsed >= min_s:
            return 1e3 * elapsed / calls


# Run in a fresh process by peak_memory_mib: argv is heads, head_dim, then the lengths T.
PEAK_SCRIPT = """
import sys
import torch
from vitedu.attention import scaled_dot_product_attention as sdpa
torch.set_num_threads(1)
def peak():  # the highest resident memory of this process so far, in MiB
    if sys.platform.startswith("linux"):
        with open("/proc/self/status") as status:
            line = next(l for l in status if l.startswith("VmHWM"))
        return int(line.split()[1]) / 2**10
    if sys.platform == "darwin":  # ru_maxrss, in bytes on macOS
        import resource  # a Unix module: Windows has none
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    # Windows: the peak working set (psutil comes with Jupyter's kernel)
    import psutil
    return psutil.Process().memory_info().peak_wset / 2**20
def reset_peak():  # Linux only: the peak becomes the memory in use now
    with open("/proc/self/clear_refs", "w") as refs:
        refs.write("5")
heads, head_dim, *lengths = map(int, sys.argv[1:])
for n in lengths:  # several lengths: Linux only
    q, k, v = (torch.randn(1, heads, n, head_dim) for _ in range(3))
    with torch.no_grad():
        for need_weights in (False, True):  # warm-up: one-off allocations
            sdpa(q[..., :16, :], k[..., :16, :], v[..., :16, :], need_weights=need_weights)
        if sys.platform.startswith("linux"):
            reset_peak()
        base = peak()
        sdpa(q, k, v, need_weights=False)  # fused first: it needs less
        fused = peak() - base
        sdpa(q, k, v, need_weights=True)  # the new peak is explicit's
        print(peak() - base, fused)
    del q, k, v  # freed, and handed back, before the next length
"""


def peak_memory_mib(lengths: Sequence[int], heads: int = 12, head_dim: int = 64) -> dict[int, tuple[float, float]]:
    """Extra peak memory of one attention call on one image, explicit path and fused kernel, at each length T, in MiB.

    -> {T: (explicit, fused)}. Peak memory belongs to a whole process, and a notebook's process passed its peak
    long ago, so the measurement runs in a fresh Python process on the CPU (one thread): for each T it creates
    q, k, v of shape (1, heads, T, head_dim), calls the fused path and then the explicit one, and reports how far
    each call raised the process's peak resident memory, as the operating system counts it. On Linux one process
    measures every length, resetting its peak before each (``/proc/self/clear_refs``) and running with
    ``MALLOC_MMAP_THRESHOLD_=65536``, so that glibc hands every freed block of 64 KiB or more back at once and a
    later length cannot reuse it; elsewhere each length gets a process of its own.
    """
    if not lengths or any(int(n) < 16 for n in lengths):
        raise ValueError(f"lengths must be token counts of at least 16 (the warm-up call uses 16); got {lengths!r}")
    runs = [list(lengths)] if sys.platform.startswith("linux") else [[n] for n in lengths]
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="65536")
    peaks = {}
    for run in runs:
        result = subprocess.run(
            [sys.executable, "-c", PEAK_SCRIPT, str(heads), str(head_dim), *map(str, run)],
            # started beside this copy of vitedu, so that the process imports the same one
            cwd=Path(__file__).resolve().parents[1], env=env, capture_output=True, text=True, check=True,
        )
        for n, line in zip(run, result.stdout.splitlines()):
            explicit, fused = (float(mib) for mib in line.split())
            peaks[n] = (explicit, fused)
    return peaks


def saved_for_backward(fn: Callable[[], Tensor]) -> tuple[list[Tensor], str]:
    """The distinct tensors autograd saves for the backward pass while ``fn()`` runs, and the name of the node of
    the tensor it returns (where backward starts: ``ScaledDotProductFlashAttentionForCpuBackward0`` for the fused
    kernel on a CPU). A tensor saved twice, for two nodes, is counted once."""
    saved: dict[int, Tensor] = {}

    def pack(tensor: Tensor) -> Tensor:
        saved[tensor.data_ptr()] = tensor
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        out = fn()
    if not isinstance(out, Tensor) or out.grad_fn is None:
        raise ValueError("fn must return a tensor that autograd tracks: give it inputs with requires_grad=True")
    return list(saved.values()), type(out.grad_fn).__name__
