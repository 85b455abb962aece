"""The shift experiment of chapter 8: accuracy against the digit's offset from the patch grid, three seeds a model.

    python benchmarks/shift.py                 # score every stored model, write vitedu/assets/shift.json
    python benchmarks/shift.py --train-cnn     # first train the three on-grid CNNs (about 2 CPU-minutes each)

The models, each as three seeds:
- "ViT, trained on the grid": the earlier recipe, trained with the digit's cell on the 4-pixel patch grid
  (``position_step=4``), kept as a stored artefact: ``vitedu/assets/vit_grid_3_seeds.safetensors``;
- "CNN, trained on the grid": the small convnet (``ConvTeacher``) trained on the same on-grid canvases with the
  preset's teacher recipe: ``vitedu/assets/cnn_grid_3_seeds.safetensors`` (``--train-cnn`` makes it);
- "ViT, trained anywhere": the shipped recipe's three seeds (1, 2, 3), trained with the digit at any pixel
  (``vitedu/assets/vit_cluttered_digits_3_seeds.safetensors``);
- "ViT, trained anywhere, no teacher": the same recipe without the CNN teacher, seeds 1, 2, 3
  (``vitedu/assets/vit_anywhere_noteacher_3_seeds.safetensors``, packed by ``tools/seed_weights.py``).

Every model is scored with :func:`vitedu.shift.offset_accuracy` on 1,000 test canvases per offset, drawn with a
seed that no training or model choice used (``--canvas-seed``, default 11): test is read for the final models
only, never to choose anything.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict, replace
from pathlib import Path

import torch
from safetensors.torch import save_file

import vitedu
from vitedu.cnn import ConvTeacher
from vitedu.config import PRESETS
from vitedu.data import make_loaders
from vitedu.shift import offset_accuracy
from vitedu.shipped import load_seed_pack
from vitedu.train import train_teacher

ROOT = Path(__file__).resolve().parent.parent
# Package data, so that chapter 8 can read them on Colab (pip-installed vitedu has no benchmarks/).
ASSETS = ROOT / "vitedu" / "assets"
VIT_GRID = ASSETS / "vit_grid_3_seeds.safetensors"
CNN_GRID = ASSETS / "cnn_grid_3_seeds.safetensors"
VIT_ANYWHERE = ASSETS / "vit_cluttered_digits_3_seeds.safetensors"
VIT_ANYWHERE_NOTEACHER = ASSETS / "vit_anywhere_noteacher_3_seeds.safetensors"
SEEDS = (0, 1, 2)  # of the CNNs that --train-cnn trains


def seed_pack(path: Path, build) -> tuple[list[torch.nn.Module], dict]:
    """The models of a seed pack in vitedu/assets (vitedu.shipped.load_seed_pack) and its recipe."""
    models, meta = load_seed_pack(path.name, build)
    return models, meta["config"]


def vit(config: dict) -> torch.nn.Module:
    return vitedu.create_model(config["model"], **config["model_kwargs"])


def cnn(config: dict) -> torch.nn.Module:
    return ConvTeacher(1, 10)


def summarise(accs: list[torch.Tensor]) -> dict[str, tuple[float, float]]:
    """Mean and std over seeds of the on-grid accuracy (offset (0, 0)), and of the worst and the mean of the
    15 off-grid offsets. accs: one (P, P) accuracy table per seed."""
    off_grid = [a.flatten()[1:] for a in accs]  # (P*P - 1,) each: every offset but (0, 0)
    stats = {"on_grid": torch.stack([a[0, 0] for a in accs]),
             "worst_off_grid": torch.stack([o.min() for o in off_grid]),
             "mean_off_grid": torch.stack([o.mean() for o in off_grid])}
    return {k: (round(v.mean().item(), 4), round(v.std().item(), 4) if len(v) > 1 else 0.0) for k, v in stats.items()}


def train_cnns() -> None:
    """Three on-grid CNNs, the earlier preset's teacher recipe (PRESETS["cluttered_digits_grid"]),
    seeds 0, 1, 2."""
    packed = {}
    for seed in SEEDS:
        config = replace(PRESETS["cluttered_digits_grid"], seed=seed)
        torch.manual_seed(seed)
        teacher = train_teacher(config, make_loaders(config, torch.device("cpu")), torch.device("cpu"))
        packed |= {f"seed{seed}.{k}": v.half().contiguous() for k, v in teacher.state_dict().items()}
    meta = {"config": json.dumps(asdict(config) | {"seed": None}), "dtype": "float16", "seeds": "0,1,2"}
    save_file(packed, str(CNN_GRID), metadata=meta)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--train-cnn", action="store_true", help="train the three on-grid CNNs first")
    p.add_argument("--canvas-seed", type=int, default=11)
    p.add_argument("--num-images", type=int, default=1_000)
    p.add_argument("--out", default=str(ASSETS / "shift.json"), help="JSON (package data: chapter 8 plots it)")
    args = p.parse_args()
    torch.set_num_threads(1)
    if args.train_cnn:
        train_cnns()
    packs = {"ViT, trained on the grid": (VIT_GRID, vit), "CNN, trained on the grid": (CNN_GRID, cnn),
             "ViT, trained anywhere": (VIT_ANYWHERE, vit),
             "ViT, trained anywhere, no teacher": (VIT_ANYWHERE_NOTEACHER, vit)}
    results = {"canvas_seed": args.canvas_seed, "num_images": args.num_images, "split": "test", "models": {}}
    for name, (path, build) in packs.items():
        if not path.exists():
            print(f"{name}: {path.relative_to(ROOT)} not found (not trained yet), skipped")
            continue
        models, config = seed_pack(path, build)
        if name.startswith("ViT, trained anywhere") and config.get("position_step", 4) != 1:
            print(f"{name}: {path.relative_to(ROOT)} was trained with the digit on the grid, skipped")
            continue
        accs = [offset_accuracy(m, 4, "test", args.num_images, args.canvas_seed) for m in models]
        summary = summarise(accs)
        results["models"][name] = {"per_seed": [a.tolist() for a in accs], "summary": summary,
                                   "position_step": config.get("position_step", 4)}
        worst = [a.min().item() for a in accs]
        print(f"{name}: worst offset per seed {[round(w, 3) for w in worst]}; "
              + ", ".join(f"{k.replace('_', ' ')} {m:.3f} ± {s:.3f}" for k, (m, s) in summary.items()))
    Path(args.out).write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
