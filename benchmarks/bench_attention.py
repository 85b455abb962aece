"""Print how time and memory of attention grow with the number of tokens T: explicit vs fused.

The explicit path materialises the (batch, heads, T, T) weights; PyTorch's fused kernel
(F.scaled_dot_product_attention) does not. Run with `make bench` (or python benchmarks/bench_attention.py);
on a GPU the same script measures CUDA kernels and peak memory.
"""

from __future__ import annotations

import argparse
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
    print(f"{'T':>6} {'explicit ms':>12} {'fused ms':>9} {'speed-up':>9} {'T x T weights MiB':>18} {'peak MiB':>16}")
    for tokens in args.tokens:
        q, k, v = (torch.randn(args.batch, args.heads, tokens, args.head_dim, device=device) for _ in range(3))
        explicit = time_attention(q, k, v, need_weights=True, repeats=args.repeats)
        fused = time_attention(q, k, v, need_weights=False, repeats=args.repeats)
        weights_mib = args.batch * args.heads * tokens * tokens * q.element_size() / 2**20
        peak = "n/a (CPU)"
        if device.type == "cuda":
            peaks = []
            for need in (True, False):
                torch.cuda.reset_peak_memory_stats()
                scaled_dot_product_attention(q, k, v, need_weights=need)
                peaks.append(torch.cuda.max_memory_allocated() / 2**20)
            peak = f"{peaks[0]:.0f} / {peaks[1]:.0f}"
        print(f"{tokens:>6} {explicit * 1e3:>12.2f} {fused * 1e3:>9.2f} {explicit / fused:>8.1f}x "
              f"{weights_mib:>18.1f} {peak:>16}")


if __name__ == "__main__":
    main()
