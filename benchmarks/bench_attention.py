"""Print how time and memory of attention grow with the number of tokens T: explicit vs fused.

The explicit path materialises the (batch, heads, T, T) weights; PyTorch's fused kernel
(F.scaled_dot_product_attention) does not. Run with `make bench` (or python benchmarks/bench_attention.py);
on a GPU the same script measures CUDA kernels. Peak memory is measured on both (CUDA's allocator
statistics; on the CPU, torch.profiler's allocation events).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time

import torch

import vitedu
from vitedu.attention import scaled_dot_product_attention


def time_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, need_weights: bool, repeats: int) -> float:
    """Seconds per call, after one warm-up call; waits for the GPU before reading the clock."""
    sync = torch.cuda.synchronize if q.device.type == "cuda" else (lambda: None)
    scaled_dot_product_attention(q, k, v, need_weights=need_weights)
    sync()
    start = time.perf_counter()
    for _ in range(repeats):
        scaled_dot_product_attention(q, k, v, need_weights=need_weights)
    sync()
    return (time.perf_counter() - start) / repeats


@contextlib.contextmanager
def quiet_stderr():
    """Silence file descriptor 2 for a moment: torch.profiler's C++ side prints start/stop lines there."""
    sys.stderr.flush()
    saved, devnull = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def peak_memory_mib(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, need_weights: bool) -> float:
    """Measured peak of the memory one attention call allocates, in MiB (beyond q, k, v themselves).

    CUDA: the caching allocator's peak counter. CPU: torch.profiler's record of every allocation and free,
    replayed in time order; the peak of the running total is what the call needed at its worst moment.
    """
    if q.device.type == "cuda":
        torch.cuda.synchronize()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        scaled_dot_product_attention(q, k, v, need_weights=need_weights)
        torch.cuda.synchronize()
        return (torch.cuda.max_memory_allocated() - base) / 2**20
    activities = [torch.profiler.ProfilerActivity.CPU]
    with quiet_stderr(), torch.profiler.profile(activities=activities, profile_memory=True) as prof:
        scaled_dot_product_attention(q, k, v, need_weights=need_weights)
    events = sorted(prof.events(), key=lambda e: e.time_range.start)
    running, peak = 0, 0
    for event in events:  # what each op allocated and freed itself; "[memory]" events: frees outside any op
        running += event.self_cpu_memory_usage
        peak = max(peak, running)
    return peak / 2**20


def attention_table(tokens: list[int], batch: int, heads: int, head_dim: int, repeats: int,
                    device: torch.device) -> None:
    """Print time and measured peak memory of the explicit and the fused path as T grows."""
    print(f"{'T':>6} {'explicit ms':>12} {'fused ms':>9} {'speed-up':>9} {'T x T weights MiB':>18} "
          f"{'peak MiB explicit / fused':>26}")
    for t in tokens:
        q, k, v = (torch.randn(batch, heads, t, head_dim, device=device) for _ in range(3))
        explicit = time_attention(q, k, v, need_weights=True, repeats=repeats)
        fused = time_attention(q, k, v, need_weights=False, repeats=repeats)
        weights_mib = batch * heads * t * t * q.element_size() / 2**20
        peaks = f"{peak_memory_mib(q, k, v, True):.1f} / {peak_memory_mib(q, k, v, False):.1f}"
        print(f"{t:>6} {explicit * 1e3:>12.2f} {fused * 1e3:>9.2f} {explicit / fused:>8.1f}x "
              f"{weights_mib:>18.1f} {peaks:>26}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", type=int, nargs="+", default=[65, 197, 577, 1025])
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--heads", type=int, default=6)
    parser.add_argument("--head-dim", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    device = vitedu.get_device()
    print(f"device: {device}, torch {torch.__version__}, batch {args.batch}, heads {args.heads}, d_k {args.head_dim}")
    attention_table(args.tokens, args.batch, args.heads, args.head_dim, args.repeats, device)


if __name__ == "__main__":
    main()
