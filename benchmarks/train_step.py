"""How much of the CPU does the speedrun's training step use? FLOP/s against the matmul peak, and where the rest goes.

    python benchmarks/train_step.py                    # 1 and 2 threads, every variant, about 3 minutes
    python benchmarks/train_step.py --threads 1 --json benchmarks/results/train_step.json

For ``vit_cluttered_digits`` at the speedrun's batch (``PRESETS["speedrun"]``), in one process per thread count:

1. the **peak**: a 1024 x 1024 fp32 matrix product, timed in this same process at the same thread count, before
   and after the step's timings (the higher of the two);
2. the **step**: forward, label-smoothed cross-entropy, backward, gradient clipping and the preset's optimizer
   (Muon for the blocks' matrices, AdamW for the rest), as ``fit`` runs it, on random canvases (the data costs
   nothing here). Its FLOPs are counted by torch's ``FlopCounterMode``, forward and backward, with attention
   written out as matrix products while counting: the fused CPU attention kernel has no FLOP formula, so a count
   through it leaves out the attention's Q K^T and A V (about a fifth of the arithmetic). Muon's Newton-Schulz
   products are counted too (once a step, small beside a batch's). Softmax, norms, GELU and AdamW are not
   (they are not matrix products); they are where time goes without arithmetic;
3. **variants** of the step, each timed against the baseline in alternating rounds (so a background job slows
   both alike): the batch, AdamW alone (its for-each, fused and for-loop paths), attention through the explicit
   softmax, no stochastic depth, bf16 autocast (it pays only on CPUs with bf16 instructions: the first line says
   what this CPU has), ``torch.compile`` (with ``--compile``: it takes half a minute), and the convnet teacher's
   forward pass that distillation adds;
4. a **profile** of the baseline step (torch.profiler), grouped into matrix products, the attention kernel,
   softmax, LayerNorm, GELU, copies, other elementwise work and the optimizer; "outside the kernels" is the
   wall time no operator accounts for (autograd's bookkeeping and Python).
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Callable, Iterator

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

import vitedu
from vitedu.cnn import ConvTeacher
from vitedu.config import PRESETS
from vitedu.optimizers import make_optimizer, param_groups


def matmul_peak(threads: int, n: int = 1024, dtype: torch.dtype = torch.float32, seconds: float = 1.0) -> float:
    """FLOP/s of an n x n x n matrix product at ``threads`` threads, the best of a second's repeats."""
    torch.set_num_threads(threads)
    a, b = torch.randn(n, n, dtype=dtype), torch.randn(n, n, dtype=dtype)
    for _ in range(3):
        a @ b
    best, end = float("inf"), time.perf_counter() + seconds
    while time.perf_counter() < end:
        start = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - start)
    return 2 * n**3 / best


def build(config=PRESETS["speedrun"], **model_kwargs) -> nn.Module:
    return vitedu.create_model(config.model, **{**config.model_kwargs, **model_kwargs}).train()


@contextmanager
def attention_written_out(model: nn.Module) -> Iterator[None]:
    """Attention as explicit matrix products (``fused_attn=False``), so that FlopCounterMode sees them."""
    layers = [m for m in model.modules() if hasattr(m, "fused_attn")]
    saved = [m.fused_attn for m in layers]
    for m in layers:
        m.fused_attn = False
    try:
        yield
    finally:
        for m, fused in zip(layers, saved):
            m.fused_attn = fused


def make_step(model: nn.Module, batch: int, optimizer: str = "preset", precision: str = "fp32",
              teacher: nn.Module | None = None, compiled: bool = False) -> Callable[[], None]:
    """One training step of ``fit`` on random canvases: forward, loss, backward, clipping, the optimizer step.
    ``optimizer``: "preset" (the speedrun's, ``make_optimizer``), or AdamW alone "foreach", "fused", "for-loop"."""
    config = PRESETS["speedrun"]
    if optimizer == "preset":
        opt = make_optimizer(model, config.optimizer, 1e-4, config.weight_decay)
    else:
        kwargs = {"fused": True} if optimizer == "fused" else {"foreach": optimizer == "foreach"}
        opt = torch.optim.AdamW(param_groups(model, config.weight_decay), lr=1e-4, **kwargs)
    forward = torch.compile(model) if compiled else model
    images = torch.randn(batch, 1, 32, 32)  # (batch, 1, 32, 32) normalised canvases
    labels = torch.randint(0, 10, (batch,))

    def step() -> None:
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"):
            logits = forward(images).float()  # (batch, 10)
            loss = F.cross_entropy(logits, labels, label_smoothing=config.label_smoothing)
            if teacher is not None:  # distillation's extra cost: the teacher's forward pass on the batch
                with torch.no_grad():
                    teacher_logits = teacher(images).float()  # (batch, 10)
                loss = loss + 0 * teacher_logits.sum()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
        opt.step()

    return step


def written_out_step(batch: int) -> Callable[[], None]:
    """The step with attention as explicit softmax(Q K^T) V, not the fused kernel."""
    model = build()
    for m in model.modules():
        if hasattr(m, "fused_attn"):
            m.fused_attn = False
    return make_step(model, batch)


def step_flops(batch: int) -> tuple[int, int]:
    """FLOPs of one training step (forward + backward) as counted: (attention written out, through the kernel)."""
    counts = []
    for written_out in (True, False):
        model = build()
        step = make_step(model, batch)
        with attention_written_out(model) if written_out else nullcontext():
            with FlopCounterMode(display=False) as counter:
                step()
        counts.append(counter.get_total_flops())
    return counts[0], counts[1]


def time_pair(baseline: Callable[[], None], variant: Callable[[], None], rounds: int, reps: int) -> tuple[float, float]:
    """Median seconds per call of two steps timed in alternating rounds (after a warm-up of each)."""
    for f in (baseline, variant):
        for _ in range(2):
            f()
    times: dict[int, list[float]] = {0: [], 1: []}
    for r in range(rounds):
        for i in ((0, 1) if r % 2 == 0 else (1, 0)):
            f = (baseline, variant)[i]
            start = time.perf_counter()
            for _ in range(reps):
                f()
            times[i].append((time.perf_counter() - start) / reps)
    return statistics.median(times[0]), statistics.median(times[1])


CATEGORIES = [  # (name, operator-name fragments); the first match wins
    ("attention kernel", ("scaled_dot_product", "flash_attention")),
    ("matrix products", ("aten::mm", "aten::addmm", "aten::bmm", "aten::matmul", "convolution")),
    ("softmax", ("softmax",)),
    ("LayerNorm", ("layer_norm",)),
    ("GELU", ("gelu",)),
    ("copies", ("aten::copy_", "aten::cat", "aten::clone", "aten::contiguous")),
    ("optimizer", ("_foreach", "adamw", "Optimizer", "aten::addcdiv", "aten::lerp", "aten::sqrt", "muon")),
    ("other elementwise", ("aten::",)),
]


def profile_step(step: Callable[[], None], steps: int = 5) -> dict[str, float]:
    """Share of the step's wall time per category of operator (self time), and what no operator accounts for."""
    from torch.profiler import ProfilerActivity, profile

    for _ in range(2):
        step()
    start = time.perf_counter()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(steps):
            step()
    wall = (time.perf_counter() - start) * 1e6  # microseconds, as the profiler's
    shares = {name: 0.0 for name, _ in CATEGORIES}
    for event in prof.key_averages():
        for name, fragments in CATEGORIES:
            if any(f in event.key for f in fragments):
                shares[name] += event.self_cpu_time_total
                break
    shares["outside the kernels (autograd, Python)"] = max(0.0, wall - sum(shares.values()))
    return {name: value / wall for name, value in shares.items()}


def cpu_flags() -> str:
    """The instruction sets that decide which kernels run: torch's choice, and bf16 support in the CPU."""
    flags = ""
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        pass
    bf16 = [f for f in ("avx512_bf16", "amx_bf16") if f in flags]
    return f"torch kernels {torch.backends.cpu.get_cpu_capability()}, bf16 instructions: {', '.join(bf16) or 'none'}"


def measure(threads: int, batch: int, rounds: int, reps: int, compiled: bool) -> dict:
    torch.manual_seed(0)
    torch.set_num_threads(threads)
    peak = matmul_peak(threads)
    flops, flops_kernel = step_flops(batch)
    base_model = build()
    baseline = make_step(base_model, batch)
    variants: dict[str, Callable[[], Callable[[], None]]] = {
        f"batch {batch // 2}": lambda: make_step(build(), batch // 2),
        f"batch {batch * 2}": lambda: make_step(build(), batch * 2),
        "AdamW alone (for-each)": lambda: make_step(build(), batch, optimizer="foreach"),
        "AdamW alone, fused": lambda: make_step(build(), batch, optimizer="fused"),
        "AdamW alone, for-loop": lambda: make_step(build(), batch, optimizer="for-loop"),
        "attention written out": lambda: written_out_step(batch),
        "no stochastic depth": lambda: make_step(build(drop_path_rate=0.0), batch),
        "bf16 autocast": lambda: make_step(build(), batch, precision="bf16"),
        "+ convnet teacher's forward": lambda: make_step(build(), batch, teacher=ConvTeacher(1, 10).eval()),
    }
    if compiled:
        variants["torch.compile"] = lambda: make_step(build(), batch, compiled=True)
    rows = []
    base_times = []
    for name, make in variants.items():
        variant_batch = batch // 2 if name.startswith(f"batch {batch // 2}") else (
            batch * 2 if name.startswith(f"batch {batch * 2}") else batch)
        t_base, t_var = time_pair(baseline, make(), rounds, reps)
        base_times.append(t_base)
        per_image = (t_var / variant_batch) / (t_base / batch)  # < 1: faster per canvas
        rows.append({"variant": name, "images_per_s": variant_batch / t_var, "time_per_image_vs_baseline": per_image})
    t_base = statistics.median(base_times)
    # The peak moves on a shared host; timed again after the variants, the higher of the two is the denominator
    # (the stricter share).
    peaks = (peak, matmul_peak(threads))
    peak = max(peaks)
    return {
        "threads": threads, "batch": batch, "peak_gflops": peak / 1e9, "peaks_gflops": [p / 1e9 for p in peaks],
        "mflop_per_image": flops / batch / 1e6,
        "mflop_per_image_through_kernel": flops_kernel / batch / 1e6, "step_s": t_base,
        "images_per_s": batch / t_base, "gflops": flops / t_base / 1e9, "share_of_peak": flops / t_base / peak,
        "variants": rows, "profile": profile_step(baseline),
    }


def report(result: dict) -> None:
    r = result
    print(f"\n{r['threads']} thread(s), batch {r['batch']}: matmul peak {r['peak_gflops']:.1f} GFLOP/s (1024^3 fp32, "
          f"this process; the higher of {' and '.join(f'{p:.1f}' for p in r['peaks_gflops'])}, before and after)")
    print(f"  step {1e3 * r['step_s']:.0f} ms = {r['images_per_s']:.0f} canvases/s x {r['mflop_per_image']:.1f} MFLOP "
          f"(attention written out; {r['mflop_per_image_through_kernel']:.1f} counted through the fused kernel) = "
          f"{r['gflops']:.1f} GFLOP/s = {100 * r['share_of_peak']:.0f} % of peak")
    print("  variant                               canvases/s   time per canvas vs the step above")
    for row in r["variants"]:
        print(f"  {row['variant']:36s}  {row['images_per_s']:10.0f}   {row['time_per_image_vs_baseline']:.2f}x")
    print("  where the step's time goes (torch.profiler, self time):")
    for name, share in sorted(r["profile"].items(), key=lambda kv: -kv[1]):
        print(f"    {name:40s} {100 * share:5.1f} %")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    p.add_argument("--batch", type=int, default=PRESETS["speedrun"].batch_size)
    p.add_argument("--rounds", type=int, default=6, help="alternating rounds per comparison (the median is kept)")
    p.add_argument("--reps", type=int, default=2, help="steps per round")
    p.add_argument("--compile", action="store_true", help="also time torch.compile (about 30 s of compilation)")
    p.add_argument("--json", help="also write the numbers to this file")
    args = p.parse_args()
    print(f"torch {torch.__version__}, {platform.processor() or platform.machine()}, {cpu_flags()}")
    results = []
    for threads in args.threads:
        results.append(measure(threads, args.batch, args.rounds, args.reps, args.compile))
        report(results[-1])
    if args.json:
        Path(args.json).write_text(json.dumps({"torch": torch.__version__, "cpu": cpu_flags(), "runs": results},
                                              indent=1) + "\n")


if __name__ == "__main__":
    main()
