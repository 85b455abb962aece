"""vitedu against timm and transformers: forward and train-step time of the same ViT with the same weights.

    make bench                                    # or: python benchmarks/bench_models.py --threads 2
    python benchmarks/bench_models.py --models vit_small_patch16_224 --repeats 20

One process builds the three implementations of each model, gives them identical weights (a random
transformers ViTForImageClassification, converted with vitedu.hf_configs.convert_hf_state_dict and
loaded into vitedu and timm, which share timm's state_dict layout), checks that their logits agree, and
then times them in interleaved rounds (vitedu, timm, transformers, vitedu, ...; the order rotates each
round), so a background job that slows the machine slows all three alike. Reported: median seconds
per call and the ratio to timm (< 1: vitedu is faster), and vitedu's GFLOP/s (FLOPs counted by
torch.utils.flop_counter). A train step is forward + cross-entropy + backward + an SGD step.

Then: explicit vs fused attention (benchmarks/bench_attention.py) with measured peak memory, and on a
CUDA GPU the ViT-B/16 bf16 throughput of the three (skipped, saying so, without one).
timm hard-requires torchvision; benchmarks/timm_reference.py stands in for it where it is missing.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from pathlib import Path
from typing import Callable

import torch
import torch.nn.functional as F
from bench_attention import attention_table  # benchmarks/, this script's folder, is on the path
from timm_reference import import_timm  # a neighbour too
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

import vitedu
from vitedu.hf_configs import convert_hf_state_dict
from vitedu.models import MODEL_CONFIGS

ROOT = Path(__file__).resolve().parents[1]


def machine() -> str:
    """The CPU's name, cores and the torch threads in use (and the GPU, when there is one)."""
    cpu = platform.processor() or platform.machine()
    try:
        names = [line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                 if line.startswith("model name")]
        cpu = names[0] if names else cpu
    except OSError:
        pass
    gpu = f", GPU {torch.cuda.get_device_name()}" if torch.cuda.is_available() else ""
    return f"{cpu}, {os.cpu_count()} cores, torch {torch.__version__} with {torch.get_num_threads()} threads{gpu}"


def three_models(name: str, device: torch.device) -> dict[str, nn.Module]:
    """vitedu, timm and transformers versions of ``name`` holding the same (random) weights."""
    import transformers

    timm = import_timm()
    cfg = MODEL_CONFIGS[name]
    hf_config = transformers.ViTConfig(
        image_size=224, patch_size=cfg["patch_size"], hidden_size=cfg["embed_dim"], num_hidden_layers=cfg["depth"],
        num_attention_heads=cfg["num_heads"], intermediate_size=4 * cfg["embed_dim"], num_labels=1000,
        hidden_act="gelu", layer_norm_eps=1e-6, attn_implementation="sdpa",
    )
    torch.manual_seed(0)
    hf = transformers.ViTForImageClassification(hf_config)
    with torch.no_grad():  # HF starts LayerNorms at (1, 0) and [CLS] at 0: perturb everything
        for p in hf.parameters():
            p.add_(torch.randn_like(p) * 0.02)
    state = convert_hf_state_dict(hf.state_dict())
    ours = vitedu.create_model(name)
    ours.load_state_dict(state, strict=True)
    theirs = timm.create_model(name, pretrained=False)
    theirs.load_state_dict(state, strict=True)
    return {"vitedu": ours.to(device), "timm": theirs.to(device), "transformers": hf.to(device)}


def logits(model: nn.Module, images: torch.Tensor) -> torch.Tensor:
    out = model(pixel_values=images) if "transformers" in type(model).__module__ else model(images)
    return out.logits if hasattr(out, "logits") else out


def forward_step(model: nn.Module, images: torch.Tensor) -> Callable[[], None]:
    def step() -> None:
        with torch.no_grad():
            logits(model, images)
    return step


def train_step(model: nn.Module, images: torch.Tensor, labels: torch.Tensor) -> Callable[[], None]:
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-4)

    def step() -> None:
        loss = F.cross_entropy(logits(model, images).float(), labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    return step


def interleaved(steps: dict[str, Callable[[], None]], repeats: int, sync: Callable[[], None]) -> dict[str, float]:
    """Median seconds per call of each step, timed in interleaved rounds after one warm-up call each."""
    for step in steps.values():
        step()
    sync()
    times: dict[str, list[float]] = {name: [] for name in steps}
    names = list(steps)
    for r in range(repeats):
        for name in names[r % len(names):] + names[: r % len(names)]:
            start = time.perf_counter()
            steps[name]()
            sync()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) for name, t in times.items()}


def forward_flops(model: nn.Module, images: torch.Tensor) -> int:
    counter = FlopCounterMode(display=False)
    with counter, torch.no_grad():
        model(images)
    return counter.get_total_flops()


def compare(names: list[str], batch: int, repeats: int, device: torch.device, autocast: bool = False) -> None:
    """Print the ratio table for ``names`` at this batch size (bf16 autocast on CUDA when ``autocast``)."""
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    print(f"{'model':<24} {'pass':<6} {'vitedu ms':>10} {'timm ms':>9} {'HF ms':>9} {'vitedu/timm':>12} "
          f"{'vitedu/HF':>10} {'vitedu GFLOP/s':>15} {'max |logit diff|':>17}")
    for name in names:
        models = three_models(name, device)
        images = torch.randn(batch, 3, 224, 224, device=device)
        labels = torch.randint(0, 1000, (batch,), device=device)
        with torch.no_grad():
            for m in models.values():
                m.eval()
            ref = logits(models["timm"], images)
            diff = max((logits(m, images) - ref).abs().max().item() for m in models.values())
        flops = forward_flops(models["vitedu"], images)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=autocast):
            fwd = interleaved({k: forward_step(m, images) for k, m in models.items()}, repeats, sync)
            for m in models.values():
                m.train()
            train = interleaved({k: train_step(m, images, labels) for k, m in models.items()}, repeats, sync)
        for kind, t, f in (("fwd", fwd, flops), ("train", train, 3 * flops)):  # backward ~ 2 x forward
            extra = f"{batch / t['vitedu']:,.0f} img/s" if autocast else f"{f / t['vitedu'] / 1e9:.0f}"
            print(f"{name:<24} {kind:<6} {t['vitedu'] * 1e3:>10.1f} {t['timm'] * 1e3:>9.1f} "
                  f"{t['transformers'] * 1e3:>9.1f} {t['vitedu'] / t['timm']:>11.3f}x "
                  f"{t['vitedu'] / t['transformers']:>9.3f}x {extra:>15} {diff:>17.1e}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="+", default=["vit_tiny_patch16_224", "vit_small_patch16_224"])
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=7, help="interleaved timing rounds (the median is shown)")
    parser.add_argument("--threads", type=int, help="torch CPU threads (default: torch's choice)")
    parser.add_argument("--skip-attention", action="store_true", help="leave out the explicit-vs-fused table")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device("cpu")
    print(f"machine: {machine()}")
    print(f"1. vitedu vs timm vs transformers, same weights, batch {args.batch} at 224x224, fp32 on the CPU, "
          f"median of {args.repeats} interleaved rounds")
    compare(args.models, args.batch, args.repeats, device)
    if not args.skip_attention:
        print("\n2. explicit vs fused attention (one layer's attention, batch 8, 6 heads, d_k 64)")
        attention_table([65, 197, 577, 1025], batch=8, heads=6, head_dim=64, repeats=5, device=device)
    print("\n3. CUDA: ViT-B/16, bf16 autocast, batch 64")
    if torch.cuda.is_available():
        compare(["vit_base_patch16_224"], 64, args.repeats, torch.device("cuda"), autocast=True)
    else:
        print("skipped: no CUDA GPU on this machine (the same command runs it where torch sees one)")


if __name__ == "__main__":
    main()
