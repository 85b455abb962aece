"""Chapter 9's controlled comparison: ViT, DeiT (distillation token), CaiT and ConViT on cluttered digits.

Controlled means:
- the same model size and budget: the four models have the width, depth (4 blocks), heads and 8x8 patch
  grid of ``vit_cluttered_digits`` (139-141k parameters each, ``MODEL_CONFIGS``/``VARIANT_CONFIGS``'
  "*_cluttered_digits"), and every run takes the same AdamW steps: ``EPOCHS`` epochs of 10,000 fresh
  canvases in batches of 32, with chapter 8's schedule, weight decay, label smoothing, clipping and
  stochastic depth (``PRESETS["cluttered_digits_grid"]``, the digit on the patch grid) -- whatever the
  training fraction, since a smaller fraction means fewer distinct digits on the canvases, not fewer canvases;
- the same data: a run with ``train_fraction`` f draws its canvases (digit *and* clutter) from the same
  stratified f of the training digits for every model (and for DeiT's teacher);
- the same tuning care, on validation only: each model's learning rate is picked among ``LRS`` on the
  validation canvases (all training digits, seed 0), highest val accuracy first, then lowest val loss;
- 3 seeds of the chosen recipes at every fraction. ``vitedu.train.fit`` scores the test canvases at the
  end of every run; the selection reads validation numbers only.

DeiT gets one thing the others do not: a convnet teacher (``ConvTeacher``, ``TEACHER_EPOCHS`` epochs on the
same canvases) and hard distillation through its [DIST] token, as in the paper. That extra compute is the
method; the table says so.

    python benchmarks/variants.py --workers 2     # about 110 CPU-minutes: an hour on 2 cores

Results go to ``benchmarks/results/variants.json`` (every run, the analyses of every final run, the
summary) and the seed-0, all-data models to ``benchmarks/results/variants_grid_seed0.safetensors`` (float16),
which chapter 9 loads. Re-running skips runs already in the JSON (``--fresh`` starts over).
"""

from __future__ import annotations

import json
import statistics
import time
from dataclasses import asdict, replace
from pathlib import Path

import torch
from comparison import command_line, key, pick, run_all
from safetensors.torch import load_file, save_file

from vitedu import cluttered as C
from vitedu import interpret as I
from vitedu import train as T
from vitedu.config import PRESETS, TrainConfig
from vitedu.data import make_loaders

EPOCHS = 6
TEACHER_EPOCHS = 4
BASE = replace(PRESETS["cluttered_digits_grid"], epochs=EPOCHS, teacher_epochs=0)  # on the grid
ARMS = {  # arm -> what differs from BASE
    "vit": dict(model="vit_cluttered_digits"),
    "deit": dict(model="deit_cluttered_digits", teacher_epochs=TEACHER_EPOCHS, distill_temperature=0.0,
                 distill_alpha=0.5),  # hard distillation through [DIST]
    "cait": dict(model="cait_cluttered_digits"),
    "convit": dict(model="convit_cluttered_digits"),
}
LRS = (1e-3, 2e-3, 4e-3, 8e-3)  # 8e-3 added for every model when 4e-3 was the ViT's best
FRACTIONS = (1.0, 0.1)
SEEDS = (0, 1, 2)
ANALYSE = 500  # test canvases used for attention distances and DeiT's head agreement
RESULTS = Path(__file__).parent / "results"
OUT = RESULTS / "variants.json"
WEIGHTS = RESULTS / "variants_grid_seed0.safetensors"
CACHE = Path("runs") / "variants"  # seed-0, all-data weights of every tuning run (ignored by git)


def config(arm: str, lr: float, fraction: float = 1.0, seed: int = 0) -> TrainConfig:
    return replace(BASE, **ARMS[arm], lr=lr, train_fraction=fraction, seed=seed)


def attention_analysis(model: torch.nn.Module, images: torch.Tensor, boxes: torch.Tensor) -> dict:
    """How far every layer looks, and how much of [CLS]'s last attention lands on the digit.

    "attention_distance": mean attention distance (pixels) of every self-attention layer, averaged over
    heads -> (layers,); None for CaiT, whose talking-heads weights are mixed across heads after the
    softmax, so they are not distributions over positions. "cls_box": the share of the last [CLS] map
    (mean over heads) that falls on the digit's box, divided by the box's share of the canvas (1 = chance);
    DeiT adds "dist_box", the same for its [DIST] token."""
    grid, patch = model.patch_embed.grid_size, model.patch_embed.patch_size[0]
    maps = model.attention_maps(images)  # (layers, batch, heads, tokens, tokens) for every model
    # CaiT's last layer is class attention (row 0 only); ConViT's GPSA layers have zeros for [CLS], which
    # mean_attention_distance leaves out anyway.
    self_maps, last = (None if hasattr(model, "blocks_token_only") else maps), maps[-1]
    prefix = lambda m: m.shape[-1] - grid[0] * grid[1]  # noqa: E731
    share = (boxes[:, 2] * boxes[:, 3]).float().mean() / images[0, 0].numel()

    def on_box(row: torch.Tensor) -> float:  # (batch, heads, patches) -> mass on the box / chance
        return (I.mass_in_boxes(row.mean(1), boxes, grid, patch).mean() / share).item()

    out = {"attention_distance": None if self_maps is None else
           [I.mean_attention_distance(m[None], grid, patch, prefix(m)).mean().item() for m in self_maps],
           "cls_box": on_box(I.cls_attention(last, prefix(last)))}
    if prefix(last) == 2:  # DeiT: row 1 is the [DIST] query
        row = last[..., 1, 2:]
        out["dist_box"] = on_box(row / row.sum(-1, keepdim=True))
    return out


@torch.no_grad()
def analyse(arm: str, model: torch.nn.Module, teacher: torch.nn.Module | None) -> dict:
    """What chapter 9 reads from each trained model, on the first ``ANALYSE`` test canvases."""
    # the digit on the grid, as the models were trained (BASE); chapter 9 reads the same canvases
    images, labels, boxes = (t[:ANALYSE] for t in C.load_cluttered_digits("test", position_step=BASE.position_step))
    images = C.normalise_canvases(images)
    model.eval()
    out = attention_analysis(model, images, boxes)
    if arm == "convit":
        out["gates"] = model.gates().tolist()  # (gpsa layers, heads): share of positional attention
    if arm == "deit":
        features = model.forward_features(images)  # (batch, tokens, dim); token 0 [CLS], token 1 [DIST]
        preds = {"cls": model.head(features[:, 0]).argmax(-1), "dist": model.head_dist(features[:, 1]).argmax(-1),
                 "both": model(images).argmax(-1), "teacher": teacher.eval()(images).argmax(-1)}
        out["agreement"] = {f"{a}~{b}": (preds[a] == (labels if b == "labels" else preds[b])).float().mean().item()
                            for a in ("cls", "dist", "both", "teacher") for b in ("labels", "teacher", "cls")
                            if a != b}
    return out


def job(arm: str, c: TrainConfig) -> dict:
    torch.set_num_threads(1)
    start = time.perf_counter()
    result = T.fit(c, device="cpu", progress=False, log=lambda line: None)
    record = {"arm": arm, "key": key(arm, c), "lr": c.lr, "fraction": c.train_fraction, "seed": c.seed,
              "config": asdict(c), "val_acc": result.history.val_acc[-1], "val_loss": result.history.val_loss[-1],
              "val_curve": result.history.val_acc, "test_acc": result.test_acc,
              "parameters": sum(p.numel() for p in result.model.parameters()), "seconds": None}
    if result.teacher is not None:
        loaders = make_loaders(c, torch.device("cpu"))
        record["teacher_val_acc"] = T.evaluate(result.teacher, loaders["val"])[1]
        record["teacher_test_acc"] = T.evaluate(result.teacher, loaders["test"])[1]
    record.update(analyse(arm, result.model, result.teacher))
    record["seconds"] = time.perf_counter() - start
    weights = {f"{arm}.{name}": t.half().contiguous() for name, t in result.model.state_dict().items()}
    if result.teacher is not None:
        weights.update({f"teacher.{n}": t.half().contiguous() for n, t in result.teacher.state_dict().items()})
    return record, weights


def job_star(args):
    return job(*args)


def main() -> None:
    args, done = command_line(__doc__.splitlines()[0], OUT, FRACTIONS, SEEDS)
    fractions, seeds = args.fractions, args.seeds
    torch.set_num_threads(1)
    summary: dict = {}

    def save() -> None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"epochs": EPOCHS, "teacher_epochs": TEACHER_EPOCHS, "lrs": LRS,
                                        "fractions": fractions, "seeds": seeds, "summary": summary,
                                        "runs": list(done.values())}, indent=1) + "\n")

    def keep(result: tuple[dict, dict]) -> dict:  # a run's record; the seed-0, all-data weights to the cache
        record, weights = result
        if record["fraction"] == 1.0 and record["seed"] == 0:
            CACHE.mkdir(parents=True, exist_ok=True)
            save_file(weights, CACHE / f"{record['arm']}_lr{record['lr']:g}.safetensors")
        return record

    # 1. Tuning, on the validation canvases only (all training digits, seed 0).
    tuning = [(arm, config(arm, lr)) for arm in ARMS for lr in LRS]
    run_all(tuning, done, args.workers, job_star, save, keep)
    chosen = {arm: pick([done[key(a, c)] for a, c in tuning if a == arm])["lr"] for arm in ARMS}
    summary["chosen_lr"] = chosen
    summary["tuning"] = [{k: done[key(*j)][k] for k in ("arm", "lr", "val_acc", "val_loss")} for j in tuning]
    print("chosen on validation:", chosen, flush=True)

    # 2. The chosen recipes, every fraction and seed; test read here.
    final = [(arm, config(arm, chosen[arm], f, s)) for f in fractions for s in seeds for arm in ARMS]
    run_all(final, done, args.workers, job_star, save, keep)
    table: dict = {}
    for arm in ARMS:
        for f in fractions:
            runs = [done[key(a, c)] for a, c in final if a == arm and c.train_fraction == f]
            accs = [r["test_acc"] for r in runs]
            table.setdefault(arm, {})[str(f)] = {"test_acc": accs, "mean": statistics.mean(accs),
                                                 "std": statistics.stdev(accs) if len(accs) > 1 else 0.0}
    summary["test"] = table
    save()
    cached = [CACHE / f"{arm}_lr{chosen[arm]:g}.safetensors" for arm in ARMS]
    if all(path.exists() for path in cached):  # every arm, and DeiT's teacher
        weights = {name: t for path in cached for name, t in load_file(path).items()}
        save_file(weights, WEIGHTS, metadata={"chosen_lr": json.dumps(chosen), "epochs": str(EPOCHS)})
        print(f"wrote {WEIGHTS}", flush=True)
    else:
        print(f"not writing {WEIGHTS}: {CACHE} lacks the seed-0 weights; rerun with --fresh", flush=True)
    print(json.dumps(table, indent=1))


if __name__ == "__main__":
    main()
