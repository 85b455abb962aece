"""The last step of chapter 9's honest study (``honest_study.py analyse``): test read once, the summary written.

Learning rates are chosen per (arm, fraction) on validation (``honest_study.chosen_lrs``) before any test number
exists; then every final run (``honest_study.final_jobs``: the chosen recipes, three seeds, and the ablations at
their parent's choice) is loaded from its weights and scored once on the test canvases, the digit anywhere, and
on the shift experiment (``vitedu.shift.offset_accuracy`` on test canvases: accuracy at each of the 16 sub-patch
offsets of the digit). ``SUMMARY`` holds the choices, the tuning table (val), and for every arm/ablation and
fraction the per-seed and mean +- std test accuracy, worst and mean offset accuracy, and the seconds of training
and of the teacher's training (the wall-clock to report beside accuracy; measured on whatever GPU ran the wave).
"""

from __future__ import annotations

import json
import statistics

import torch
from honest_arms import ABLATIONS, ARMS, build, config, parse_job
from honest_study import RUNS, SUMMARY, WORK, chosen_lrs, final_jobs
from safetensors.torch import load_file

from vitedu import cluttered as C
from vitedu.shift import offset_accuracy
from vitedu.train import evaluate


def load(name: str, seed: int, device: str) -> torch.nn.Module | None:
    path = WORK / "weights" / f"{name}_seed{seed}.safetensors"
    if not path.exists():
        return None
    arm, fraction, lr = parse_job(name)
    model = build(config(arm, fraction, lr, seed))
    model.load_state_dict(load_file(str(path)))  # float16 on disk, copied into the float32 parameters
    return model.to(device).eval()


@torch.no_grad()
def score(model: torch.nn.Module, device: str) -> dict:
    """Test accuracy on the 2,000 test canvases (digit anywhere) and accuracy per sub-patch offset (test split)."""
    images, labels, _ = C.load_cluttered_digits("test", position_step=1)
    images = (images - C.CLUTTERED_MEAN[0]) / C.CLUTTERED_STD[0]
    loader = [(images[i:i + 500].to(device), labels[i:i + 500].to(device)) for i in range(0, len(labels), 500)]
    shifts = offset_accuracy(model, patch_size=4, split="test")  # (4, 4); the CNN has no patches: same offsets
    return {"test_acc": evaluate(model, loader)[1], "offset_worst": shifts.min().item(),
            "offset_mean": shifts.mean().item(), "offsets": [[round(a, 4) for a in row] for row in shifts.tolist()]}


def mean_std(values: list[float]) -> dict:
    return {"mean": statistics.mean(values), "std": statistics.stdev(values) if len(values) > 1 else 0.0,
            "n": len(values)}


def analyse(records: list[dict], device: str = "cpu") -> dict:
    chosen = chosen_lrs(records)  # validation only: no test number exists yet
    by_job = {(r["job"], r["seed"]): r for r in records}
    final, missing = {}, []
    for name, seed in final_jobs(chosen):
        model = load(name, seed, device) if (name, seed) in by_job else None
        if model is None:
            missing.append(f"{name}:{seed}")
            continue
        run = by_job[name, seed]
        final[name, seed] = {**score(model, device), "train_seconds": run.get("train_seconds"),
                             "teacher_seconds": run.get("teacher_seconds")}
    table: dict = {}
    for (name, seed), numbers in final.items():
        arm, fraction, lr = parse_job(name)
        row = table.setdefault(arm, {}).setdefault(str(fraction), {"lr": lr, "seeds": {}})
        row["seeds"][seed] = numbers
    for arm in table.values():
        for row in arm.values():
            for metric in ("test_acc", "offset_worst", "offset_mean", "train_seconds", "teacher_seconds"):
                values = [s[metric] for s in row["seeds"].values() if s[metric] is not None]
                row[metric] = mean_std(values) if values else None
    summary = {"chosen_lr": {f"{a}@{f}": lr for (a, f), lr in chosen.items()},
               "tuning": [{k: r[k] for k in ("arm", "fraction", "lr", "val_acc", "val_loss")} for r in records
                          if r["seed"] == 0 and r["arm"] in ARMS],
               "ablations": {a: {"parent": p, "change": what} for a, (p, _, what) in ABLATIONS.items()},
               "final": table, "missing": missing, "runs": RUNS.name}
    SUMMARY.parent.mkdir(parents=True, exist_ok=True)
    SUMMARY.write_text(json.dumps(summary, indent=1) + "\n")
    print(f"wrote {SUMMARY}: {len(final)} final runs scored, {len(missing)} missing")
    return summary
