"""The last step of chapter 9's honest study: test read once, the summary written.

    python benchmarks/honest_analysis.py            # when `honest_study.py plan` says nothing is left

Learning rates are chosen per (arm, fraction) on validation (``honest_study.chosen_lrs``) before any test number
exists; then every final run (``honest_study.final_jobs``: the chosen recipes, three seeds, and the ablations at
their parent's choice) is loaded from its weights and scored once on the test canvases: with the digit anywhere
(the task), with the digit on the patch grid (the nuisance the on-grid study fixed), and per sub-patch offset of the
digit (``vitedu.shift.offset_accuracy``: the shift curve). ``SUMMARY`` holds the choices, the tuning table (val),
and for every arm/ablation and fraction the per-seed and mean +- std of each number and the seconds of training.
Each final run also gets what chapter 9 reads from inside it (``inside``), on the first ``ANALYSE`` test canvases
with the digit anywhere: every layer's mean attention distance, how much of [CLS]'s (and [DIST]'s) last attention
lands on the digit, a ConViT's gates, and how often a DeiT's two heads, its teacher and the labels agree.
The ViT's and ConViT's runs, and the longer-budget arms', also get ``own_digits_acc``: accuracy on fresh canvases
of their own training digits, which says whether a run has fitted what it trained on (a training number: it is
added to a run scored before without reading test again).

A run is scored once: its numbers are kept in ``SUMMARY`` ("scores") and read from there when the analysis runs
again (after more runs finished), so test is read once per run, after every choice at its fraction was made.
When the seed-0 runs at ``SEED0_FRACTION`` of every main arm are in, their weights go to ``SEED0_FILE``, keyed by
arm (``vit.``, ``deit.``, ``cait.``, ``convit.``, and the CNN as ``teacher.``), as chapter 9 loads them.
"""

from __future__ import annotations

import argparse
import json
import statistics

import torch
from honest_arms import (
    ABLATIONS,
    ARMS,
    FITTED,
    FITTED_FRACTION,
    FRACTIONS,
    LONGER,
    SEEDS,
    TEACHER,
    build,
    config,
    needs_teacher,
    parse_job,
)
from honest_study import RUNS, SUMMARY, WEIGHTS, chosen_lrs, read_runs, role_job
from safetensors.torch import load_file, save_file
from variants import attention_analysis

from vitedu import cluttered as C
from vitedu.cnn import load_conv_teacher
from vitedu.shift import offset_accuracy
from vitedu.train import evaluate

METRICS = ("test_acc", "grid_acc", "offset_worst", "offset_mean", "train_seconds", "own_digits_acc")
FIT_CHECKED = ("vit", "convit", *FITTED)  # the roles whose fit to their own training digits is measured
ANALYSE = 500  # test canvases (digit anywhere) for what is read inside the models
SEED0_FRACTION = 0.1  # the seed-0 models chapter 9 looks inside: the fraction complete first
SEED0_FILE = RUNS.parent.parent / "variants_seed0.safetensors"


def load(name: str, seed: int, device: str) -> torch.nn.Module | None:
    path = WEIGHTS / f"{name}_seed{seed}.safetensors"
    if not path.exists():
        return None
    arm, fraction, lr = parse_job(name)
    model = build(config(arm, fraction, lr, seed))
    model.load_state_dict(load_file(str(path)))  # float16 on disk, copied into the float32 parameters
    return model.to(device).eval()


@torch.no_grad()
def accuracy(model: torch.nn.Module, position_step: int, device: str, n: int | None = None) -> float:
    """Accuracy on the 2,000 test canvases (or the first ``n``), the digit's cell at multiples of ``position_step``
    (1: anywhere)."""
    images, labels, _ = (t[:n] for t in C.load_cluttered_digits("test", position_step=position_step))
    images = C.normalise_canvases(images)
    loader = [(images[i:i + 500].to(device), labels[i:i + 500].to(device)) for i in range(0, len(labels), 500)]
    return evaluate(model, loader)[1]


@torch.no_grad()
def own_digits_accuracy(model: torch.nn.Module, fraction: float, seed: int, device: str) -> float:
    """Accuracy on 2,000 fresh canvases (digit anywhere) made from the run's *own* training digits (the
    stratified ``fraction`` its seed drew): how well it has fitted what it trained on. Not a test number."""
    images, labels, _ = C.load_cluttered_digits("train", num_images=2_000, seed=seed, fraction=fraction)
    images = C.normalise_canvases(images)
    loader = [(images[i:i + 500].to(device), labels[i:i + 500].to(device)) for i in range(0, len(labels), 500)]
    return evaluate(model, loader)[1]


def score(model: torch.nn.Module, device: str) -> dict:
    """Test accuracy with the digit anywhere and on the grid, and accuracy per sub-patch offset (test split)."""
    shifts = offset_accuracy(model, patch_size=4, split="test")  # (4, 4); the CNN has no patches: same offsets
    return {"test_acc": accuracy(model, 1, device), "grid_acc": accuracy(model, 4, device),
            "offset_worst": shifts.min().item(), "offset_mean": shifts.mean().item(),
            "offsets": [[round(a, 4) for a in row] for row in shifts.tolist()]}


@torch.no_grad()
def inside(model: torch.nn.Module, teacher: torch.nn.Module | None, device: str) -> dict:
    """What chapter 9 reads inside a trained transformer, on the first ``ANALYSE`` test canvases, digit anywhere."""
    images, labels, boxes = (t[:ANALYSE] for t in C.load_cluttered_digits("test", position_step=1))
    images = C.normalise_canvases(images).to(device)
    labels, model = labels.to(device), model.eval()
    out = attention_analysis(model, images, boxes.to(device))
    if hasattr(model, "gates"):  # ConViT: (gpsa layers, heads), the share of positional attention
        out["gates"] = [[round(g, 4) for g in row] for row in model.gates().tolist()]
    if hasattr(model, "head_dist") and teacher is not None:  # DeiT: token 0 [CLS], token 1 [DIST]
        features = model.forward_features(images)
        preds = {"cls": model.head(features[:, 0]).argmax(-1), "dist": model.head_dist(features[:, 1]).argmax(-1),
                 "both": model(images).argmax(-1), "teacher": teacher.to(device).eval()(images).argmax(-1)}
        out["agreement"] = {f"{a}~{b}": (preds[a] == (labels if b == "labels" else preds[b])).float().mean().item()
                            for a in ("cls", "dist", "both", "teacher") for b in ("labels", "teacher", "cls")
                            if a != b}
    return out


def teacher_of(record: dict, device: str) -> torch.nn.Module | None:
    """The CNN run a distilled run learned from (its record names it), else None."""
    if not record.get("teacher") or not needs_teacher(record["arm"]):
        return None
    return load_conv_teacher(WEIGHTS / f"{record['teacher']}.safetensors", device)


def write_seed0(chosen: dict) -> bool:
    """The seed-0 model of every main arm at ``SEED0_FRACTION`` into ``SEED0_FILE`` (the CNN as ``teacher.``);
    -> False (nothing written) while one of them is missing."""
    weights, metadata = {}, {"fraction": str(SEED0_FRACTION), "runs": RUNS.name}
    for arm in ARMS:
        name = role_job(arm, SEED0_FRACTION, chosen)
        path = WEIGHTS / f"{name}_seed0.safetensors" if name else None
        if path is None or not path.exists():
            return False
        prefix = "teacher" if arm == TEACHER else arm
        weights |= {f"{prefix}.{k}": v for k, v in load_file(str(path)).items()}
        metadata[prefix] = name
    cnn = load_conv_teacher(WEIGHTS / f"{metadata['teacher']}_seed0.safetensors")
    metadata["teacher_kwargs"] = json.dumps({"width": cnn.width, "stride": cnn.stride})
    save_file(weights, str(SEED0_FILE), metadata=metadata)
    return True


def seed0_check(chosen: dict, device: str) -> dict:
    """Each stored seed-0 model's accuracy on the first ``ANALYSE`` test canvases, digit anywhere and on the grid:
    chapter 9 re-computes the first from ``SEED0_FILE`` to show that the file holds the scored models (a quarter of
    the 2,000 canvases, so that the chapter runs in under a minute)."""
    check = {}
    for arm in ARMS:
        model = load(role_job(arm, SEED0_FRACTION, chosen), 0, device)
        check[arm] = {"anywhere": accuracy(model, 1, device, ANALYSE),
                      "grid": accuracy(model, 4, device, ANALYSE)}
    return check


def mean_std(values: list[float]) -> dict:
    return {"mean": statistics.mean(values), "std": statistics.stdev(values) if len(values) > 1 else 0.0,
            "n": len(values)}


def analyse(records: list[dict], device: str = "cpu") -> dict:
    chosen = chosen_lrs(records)  # validation only: no test number exists yet
    by_job = {(r["job"], r["seed"]): r for r in records}
    # a run that stands for two roles (SAME_AS) is scored once; a run scored by an earlier analysis is not again
    earlier = json.loads(SUMMARY.read_text()).get("scores", {}) if SUMMARY.exists() else {}
    scored: dict[tuple[str, int], dict] = {}
    table: dict = {}
    missing = []
    for role in [*ARMS, *ABLATIONS, *FITTED]:
        for f in (FITTED_FRACTION,) if role in FITTED else FRACTIONS:
            name = role_job(role, f, chosen)
            if name is None:
                missing.append(f"{role}@{f:g}: its learning rate is not chosen yet")
                continue
            row = table.setdefault(role, {}).setdefault(str(f), {"job": name, "lr": parse_job(name)[2], "seeds": {}})
            for seed in SEEDS:
                if (name, seed) not in scored and f"{name}:{seed}" in earlier and (name, seed) in by_job:
                    scored[name, seed] = earlier[f"{name}:{seed}"]
                if (name, seed) not in scored:
                    model = load(name, seed, device) if (name, seed) in by_job else None
                    if model is None:
                        missing.append(f"{name}:{seed}")
                        continue
                    scored[name, seed] = {**score(model, device), "train_seconds": by_job[name, seed]["train_seconds"]}
                    if parse_job(name)[0] != TEACHER:
                        scored[name, seed]["inside"] = inside(model, teacher_of(by_job[name, seed], device), device)
                if role in FIT_CHECKED and "own_digits_acc" not in scored[name, seed]:
                    # also for a run scored before: a number on its training digits, so no test is read again
                    own = own_digits_accuracy(load(name, seed, device), f, seed, device)
                    scored[name, seed]["own_digits_acc"] = own
                row["seeds"][seed] = scored[name, seed]
            for metric in METRICS:
                values = [s[metric] for s in row["seeds"].values() if s.get(metric) is not None]
                row[metric] = mean_std(values) if values else None
    summary = {"chosen_lr": {f"{a}@{f}": lr for (a, f), lr in chosen.items()},
               "tuning": [{k: r[k] for k in ("arm", "fraction", "lr", "val_acc", "val_loss")} for r in records
                          if r["seed"] == 0 and r["arm"] in ARMS],
               "ablations": {a: {"parent": p, "change": what} for a, (p, _, what) in ABLATIONS.items()},
               "fitted": {a: {"parent": p, "recipe": "speedrun", "epochs": LONGER.epochs,
                              "optimizer": LONGER.optimizer} for a, p in FITTED.items()},
               "final": table, "missing": list(dict.fromkeys(missing)), "runs": RUNS.name,
               "scores": {f"{n}:{s}": v for (n, s), v in scored.items()}}
    if write_seed0(chosen):
        print(f"wrote {SEED0_FILE}: the seed-0 models at {SEED0_FRACTION:g} of the digits")
        summary["seed0_check"] = seed0_check(chosen, device)
    SUMMARY.parent.mkdir(parents=True, exist_ok=True)
    SUMMARY.write_text(json.dumps(summary, indent=1) + "\n")
    print(f"wrote {SUMMARY}: {len(scored)} final runs scored, {len(summary['missing'])} missing")
    return summary


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cpu")
    analyse(read_runs(), p.parse_args().device)


if __name__ == "__main__":
    main()
