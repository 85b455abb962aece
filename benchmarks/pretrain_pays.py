"""Chapter 10's comparison: does MAE pre-training pay against the book's own recipe?

    python benchmarks/pretrain_pays.py jobs                  # what is done, and what can run now (priority order)
    python benchmarks/gpu_sweep.py --runner benchmarks/pretrain_pays.py --jobs $(python benchmarks/pretrain_pays.py \\
        jobs --plain) --deadline 500 --device cuda --parallel 6 --save-dir runs/pretrain_pays --pack-dir OUT
    python benchmarks/gpu_sweep.py ... --device cpu --parallel 2 --deadline 9000   # the same, in the background here
    python benchmarks/pretrain_pays.py collect --from runs/pretrain_pays    # finished runs into RUNS and WEIGHTS
    python benchmarks/pretrain_pays.py summary      # what chapter 10 prints, into vitedu/assets/pretrain_pays.json

One architecture, ``vit_cluttered_digits`` (width 64, 4 blocks, 4 heads: the shipped MAE encoder's size) with
learned positions that start as 2-D sin-cos, and two starts (``ARMS``): *sup*, the book's own start (mimetic
attention, ``weight_init="mimetic"``), and *mae*, the shipped MAE encoder (200 epochs of pre-training on unlabelled
canvases) loaded into the same model. Only the starting weights differ; the head is drawn alike for both.

One recipe for both (``config``): ``PRESETS["cluttered_digits"]`` without a teacher, shortened to the budget:
batches of 256, warm-up (a tenth of the budget, at most 5 epochs) and cosine, digits warped, stochastic depth
0.1, the first fifth of the epochs with the digit on the patch grid. ``train_fraction`` of the training digits
(stratified; fresh canvases every epoch): 1, 10 and 100 %. Budgets of 20 and 100 epochs (``BUDGETS``), and one
compute-matched run (``MATCHED``): the supervised arm at 10 % for 20 + 200 epochs, as many extra labelled canvases
(2 million) as the MAE saw in pre-training, at the rate the supervised arm chose at 10 % and 20 epochs.

A job is ``ARM_fFRACTION_eEPOCHS_lrLR`` plus a seed. Seed 0 at each rate of ``LRS`` first (the tuning); the rate
is chosen on validation (``comparison.pick``) per arm, fraction and budget; then seeds 1 and 2 at the choice.
No test number is read by ``jobs``, ``collect`` or ``run``. ``summary`` writes ``SUMMARY``, the package asset
chapter 10 loads: the design, the tuning table (seed 0, val), the choices made so far, every seed's val numbers of
each choice, what is still missing, and chapter 8's bag-of-patches baseline. Test stays unread ("test": null) until
the study is complete, every choice made and every final seed in; then each final run is loaded from its weights
and scored once on the 2,000 test canvases with the digit anywhere, and its number is kept in ``SUMMARY`` (a later
``summary`` reuses it instead of reading test again).
"""

from __future__ import annotations

import argparse
import collections
import functools
import json
import re
import shutil
import statistics
import time
from dataclasses import asdict, replace
from pathlib import Path

import torch
from comparison import add_run_command, pick
from safetensors.torch import load_file, save_file

from vitedu import cluttered as C
from vitedu import train as T
from vitedu.config import PRESETS, TrainConfig
from vitedu.models import create_model
from vitedu.shipped import load_shipped_weights, shipped_metadata

ARMS = ("sup", "mae")  # the book's own start; the shipped MAE encoder
FRACTIONS = (0.01, 0.1, 1.0)
BUDGETS = (20, 100)
LRS = (1e-3, 4e-3)  # the two rates that won every choice of the earlier fine-tuning runs (benchmarks/README.md)
SEEDS = (0, 1, 2)
MATCHED = ("sup", 0.1, 20, 220)  # arm, fraction, the budget whose choice it takes, its own budget
ENCODER = "vit_cluttered_digits_mae"
RESULTS = Path(__file__).parent / "results" / "pretrain_pays"
RUNS = RESULTS / "runs.jsonl"  # one line a finished job: validation numbers only
WEIGHTS = RESULTS / "weights"  # float16 weights of the final runs (the tuning runs that were not chosen pruned)
ASSETS = Path(__file__).resolve().parent.parent / "vitedu" / "assets"
SUMMARY = ASSETS / "pretrain_pays.json"  # what chapter 10 prints (shipped with the package: Colab reads it)
BASELINES = ASSETS / "cluttered_baselines.json"  # chapter 8's baselines (val chosen, test read once each)
BAG = "bag of 4x4 patches, no positions"
RUN_COMMAND = ["run"]  # how benchmarks/gpu_sweep.py --runner calls this file
_NAME = re.compile(r"^(?P<arm>sup|mae)_f(?P<fraction>[0-9.]+)_e(?P<epochs>[0-9]+)_lr(?P<lr>[0-9.e-]+)$")


def job_name(arm: str, fraction: float, epochs: int, lr: float) -> str:
    return f"{arm}_f{fraction:g}_e{epochs}_lr{lr:g}"


def parse_job(name: str) -> tuple[str, float, int, float]:
    """'mae_f0.1_e20_lr0.004' -> ('mae', 0.1, 20, 0.004); a clear error otherwise."""
    match = _NAME.match(name)
    if match is None:
        raise ValueError(f"a job is ARM_fFRACTION_eEPOCHS_lrLR with ARM one of {ARMS}, e.g. "
                         f"{job_name('mae', 0.1, 20, 4e-3)}; got {name!r}")
    return match["arm"], float(match["fraction"]), int(match["epochs"]), float(match["lr"])


def job_epochs(name: str) -> int | None:
    """Epochs a job logs (benchmarks/gpu_sweep.py's progress); None for a name that is not a job."""
    try:
        return parse_job(name)[2]
    except ValueError:
        return None


def encoder_kwargs() -> dict:
    """The shipped MAE encoder's architecture, with learned positions that start as its fixed sin-cos ones."""
    kwargs = json.loads(shipped_metadata(ENCODER)["model_kwargs"])
    return {k: v for k, v in kwargs.items() if k not in ("num_classes", "pos_embed")}


def config(arm: str, fraction: float, epochs: int, lr: float, seed: int = 0) -> TrainConfig:
    """The one recipe, at this budget; the arms differ in ``model_kwargs["weight_init"]`` only, which for the MAE
    arm draws nothing that survives the encoder's weights but the head (drawn alike: ``build``)."""
    kwargs = {**encoder_kwargs(), "pos_embed": "learn_sincos", "drop_path_rate": 0.1, "weight_init": "mimetic"}
    return replace(PRESETS["cluttered_digits"], model_kwargs=kwargs, epochs=epochs, grid_epochs=epochs // 5,
                   warmup_epochs=min(5.0, epochs / 10), teacher_epochs=0, lr=lr, train_fraction=fraction, seed=seed)


def build_for(arm: str):
    """``fit``'s ``build``: the book's start, plus (arm "mae") the shipped encoder's weights on top of it."""
    def build(c: TrainConfig) -> torch.nn.Module:
        model = create_model(c.model, **c.model_kwargs)
        if arm == "mae":
            encoder = load_shipped_weights(ENCODER)
            missing, unexpected = model.load_state_dict(encoder, strict=False)
            if set(missing) != {"head.weight", "head.bias"} or unexpected:
                raise ValueError(f"the MAE encoder does not fit {c.model}: missing {missing}, unexpected {unexpected}")
        return model
    return build


def run_job(name: str, seed: int, device: str, save_dir: str, epochs: int | None = None) -> dict:
    """Train one job (resuming from ``save_dir/NAME_seedS`` if it was stopped); log one line an epoch into
    ``NAME_seedS.log`` and write float16 weights ``NAME_seedS.safetensors`` there. ``epochs``: fewer, for a quick
    check (the curriculum scaled with them). -> the JSON record: validation numbers only."""
    arm, fraction, budget, lr = parse_job(name)
    c = config(arm, fraction, budget, lr, seed)
    if epochs is not None:
        c = replace(c, epochs=epochs, grid_epochs=epochs // 5, warmup_epochs=min(5.0, epochs / 10))
    Path(save_dir).mkdir(parents=True, exist_ok=True)
    stem = f"{save_dir}/{name}_seed{seed}"
    start = time.perf_counter()
    with open(f"{stem}.log", "a") as log_file:
        # fit also scores the test canvases; that number is dropped here, unread
        result = T.fit(c, out=stem, resume=True, device=device, progress=False, precision="fp32",
                       log=lambda line: print(line, file=log_file, flush=True), build=build_for(arm))
    history = result.history
    weights = {k: (v.half() if v.is_floating_point() else v).detach().cpu().contiguous()
               for k, v in result.model.state_dict().items()}
    save_file(weights, f"{stem}.safetensors", metadata={"job": name, "seed": str(seed),
                                                        "config": json.dumps(asdict(c))})
    return {"job": name, "arm": arm, "fraction": fraction, "budget": budget, "lr": lr, "seed": seed,
            "epochs": c.epochs, "val_acc": history.val_acc[-1], "val_loss": history.val_loss[-1],
            "val_curve": [round(a, 4) for a in history.val_acc], "seconds": round(time.perf_counter() - start, 1),
            "resumed": "resuming" in Path(f"{stem}.log").read_text(),
            "train_seconds": round(sum(C.CLUTTERED_SIZES["train"] / s for s in history.images_per_s), 1),
            "device": str(device), "config": asdict(c)}


def read_runs(path: Path | None = None) -> list[dict]:
    path = RUNS if path is None else path
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def chosen_lrs(records: list[dict]) -> dict[tuple[str, float, int], float]:
    """(arm, fraction, budget) -> the rate with the best validation numbers among its seed-0 runs, once all are in."""
    chosen = {}
    for arm in ARMS:
        for f in FRACTIONS:
            for e in BUDGETS:
                tuning = [r for r in records if (r["arm"], r["fraction"], r["budget"], r["seed"]) == (arm, f, e, 0)]
                if {r["lr"] for r in tuning} >= set(LRS):
                    chosen[arm, f, e] = pick([r for r in tuning if r["lr"] in LRS])["lr"]
    return chosen


def final_jobs(chosen: dict) -> list[tuple[str, int]]:
    """The runs the chapter reports, given the choices made so far: every seed of each choice, and the
    compute-matched arm at its parent's choice."""
    jobs = [(job_name(a, f, e, lr), s) for (a, f, e), lr in chosen.items() for s in SEEDS]
    arm, fraction, parent, epochs = MATCHED
    if (arm, fraction, parent) in chosen:
        jobs += [(job_name(arm, fraction, epochs, chosen[arm, fraction, parent]), s) for s in SEEDS]
    return jobs


def plan(records: list[dict]) -> list[tuple[str, int]]:
    """The jobs not yet done that can run now, in priority order: the supervised arm at 100 % and the longest
    budget first (if it does not beat 10 %, the budgets must grow before the rest is worth running), longer
    budgets before shorter ones (so that a deadline stops short jobs), tuning before seeds. Until its rate is
    chosen, the compute-matched run's seed 0 goes at every rate, first of all: it is the longest job, and the
    choice made later on the 20-epoch runs says which of them counts."""
    done, chosen = {(r["job"], r["seed"]) for r in records}, chosen_lrs(records)
    arm, fraction, parent, epochs = MATCHED
    matched = [] if (arm, fraction, parent) in chosen else [(job_name(arm, fraction, epochs, lr), 0) for lr in LRS]
    first = [(job_name("sup", 1.0, max(BUDGETS), lr), 0) for lr in LRS]
    tuning = [(job_name(a, f, e, lr), 0) for e in sorted(BUDGETS, reverse=True)
              for f in sorted(FRACTIONS, reverse=True) for a in ARMS for lr in LRS]
    finals = sorted(final_jobs(chosen), key=lambda j: -parse_job(j[0])[2])
    return [j for j in dict.fromkeys(matched + first + tuning + finals) if j not in done]


def collect(save_dir: Path) -> None:
    """Finished runs of a gpu_sweep save dir (its sweep.jsonl) into RUNS, their weights into WEIGHTS; the
    tuning runs that were not chosen lose their weights."""
    records = read_runs()
    seen, new = {(r["job"], r["seed"]) for r in records}, 0
    WEIGHTS.mkdir(parents=True, exist_ok=True)
    for row in read_runs(save_dir / "sweep.jsonl"):
        key = (row["job"], row["seed"])
        weights = save_dir / f"{row['job']}_seed{row['seed']}.safetensors"
        if key in seen or not weights.exists():
            continue
        shutil.copy(weights, WEIGHTS / weights.name)
        with open(RUNS, "a") as out:
            out.write(json.dumps(row) + "\n")
        seen.add(key)
        new += 1
    keep = {f"{n}_seed{s}.safetensors" for n, s in final_jobs(chosen_lrs(read_runs()))}
    for path in WEIGHTS.glob("*.safetensors"):
        arm, fraction, budget, _ = parse_job(path.stem.rpartition("_seed")[0])
        if (arm, fraction, budget) in chosen_lrs(read_runs()) and path.name not in keep:
            path.unlink()
    print(f"{new} new runs in {RUNS} ({len(seen)} in all)")


def tuning_keys() -> list[tuple[str, float, int]]:
    """Every (arm, fraction, budget) whose rate is chosen on validation."""
    return [(a, f, e) for a in ARMS for f in FRACTIONS for e in BUDGETS]


def missing(records: list[dict]) -> dict:
    """What the study still needs: tuning runs (seed 0) not in, choices not made (and so their seeds 1 and 2,
    and the compute-matched arm's seeds while its parent's choice is open), and final runs not in."""
    done, chosen = {(r["job"], r["seed"]) for r in records}, chosen_lrs(records)
    arm, fraction, parent, epochs = MATCHED
    tuning = [(job_name(a, f, e, lr), 0) for a, f, e in tuning_keys() for lr in LRS]
    if (arm, fraction, parent) not in chosen:
        tuning += [(job_name(arm, fraction, epochs, lr), 0) for lr in LRS]
    open_choices = [k for k in tuning_keys() if k not in chosen]
    waiting = [f"{a}@{f:g}@{e}" for a, f, e in open_choices]
    if (arm, fraction, parent) not in chosen:
        waiting.append(f"{arm}@{fraction:g}@{epochs} (takes {arm}@{fraction:g}@{parent}'s rate)")
    tuning_left = [f"{n}:{s}" for n, s in tuning if (n, s) not in done]
    finals_left = [f"{n}:{s}" for n, s in final_jobs(chosen) if (n, s) not in done]
    later = 2 * len(waiting)  # seeds 1 and 2 of every open choice (the matched arm's seed 0 is in tuning)
    return {"tuning": tuning_left, "choices": waiting, "seeds": finals_left,
            "runs_left": len(tuning_left) + len(finals_left) + later,
            "complete": not tuning_left and not waiting and not finals_left}


def load(name: str, seed: int, device: str = "cpu") -> torch.nn.Module:
    """A finished run from its float16 weights (copied into the float32 parameters), in eval mode."""
    c = config(*parse_job(name), seed)
    model = create_model(c.model, **c.model_kwargs)  # both arms: the same model (``build_for``)
    model.load_state_dict(load_file(str(WEIGHTS / f"{name}_seed{seed}.safetensors")))
    return model.to(device).eval()


@functools.lru_cache(maxsize=1)
def _test_canvases() -> tuple[torch.Tensor, torch.Tensor]:
    """The 2,000 test canvases with the digit anywhere, normalised, and their labels (made once a process)."""
    images, labels, _ = C.load_cluttered_digits("test", position_step=1)
    return C.normalise_canvases(images), labels


@torch.no_grad()
def test_accuracy(model: torch.nn.Module, device: str = "cpu") -> float:
    """Accuracy on the 2,000 test canvases with the digit anywhere (as chapter 9's honest_analysis scores)."""
    images, labels = _test_canvases()
    loader = [(images[i:i + 500].to(device), labels[i:i + 500].to(device)) for i in range(0, len(labels), 500)]
    return T.evaluate(model, loader)[1]


def _stats(values: list[float]) -> dict | None:
    if not values:
        return None
    return {"mean": statistics.mean(values), "std": statistics.stdev(values) if len(values) > 1 else None,
            "n": len(values)}


def bag_of_patches() -> dict:
    """Chapter 8's position-blind baseline (all the digits, 20,000 labelled canvases), as stored there."""
    stored = json.loads(BASELINES.read_text())
    bag = stored["baselines"][BAG]
    return {"name": BAG, "setting": bag["chosen"], "val_acc": bag["val_accuracy"], "test_acc": bag["test_accuracy"],
            "num_train": stored["task"]["num_train"], "source": f"vitedu/assets/{BASELINES.name}"}


def summarise(records: list[dict], device: str = "cpu") -> dict:
    """The asset chapter 10 prints (see the module's docstring). Test is read only when the study is complete,
    once per final run: numbers already in ``SUMMARY`` are reused."""
    chosen, left = chosen_lrs(records), missing(records)
    by_job = {(r["job"], r["seed"]): r for r in records}
    earlier = json.loads(SUMMARY.read_text()).get("test_scores") or {} if SUMMARY.exists() else {}
    scores = {}
    if left["complete"]:
        for name, seed in final_jobs(chosen):
            key = f"{name}:{seed}"
            scores[key] = earlier[key] if key in earlier else test_accuracy(load(name, seed, device), device)
    arm, fraction, parent, epochs = MATCHED
    rows = [(a, f, e, chosen[a, f, e]) for a, f, e in tuning_keys() if (a, f, e) in chosen]
    if (arm, fraction, parent) in chosen:
        rows.append((arm, fraction, epochs, chosen[arm, fraction, parent]))
    final = []
    for a, f, e, lr in rows:
        name = job_name(a, f, e, lr)
        seeds = [s for s in SEEDS if (name, s) in by_job]
        val = {str(s): by_job[name, s]["val_acc"] for s in seeds}
        test = {str(s): scores[f"{name}:{s}"] for s in SEEDS} if scores else None
        final.append({"arm": a, "fraction": f, "budget": e, "lr": lr, "job": name, "matched": e == epochs,
                      "val_acc": val, "val": _stats(list(val.values())),
                      "train_seconds": {str(s): by_job[name, s].get("train_seconds") for s in seeds},
                      "val_curves": {str(s): by_job[name, s].get("val_curve") for s in seeds},
                      "test_acc": test, "test": _stats(list(test.values())) if test else None})
    tuning = sorted(({k: r.get(k) for k in ("arm", "fraction", "budget", "lr", "val_acc", "val_loss",
                                              "train_seconds", "device")} for r in records if r["seed"] == 0),
                    key=lambda r: (-r["budget"], -r["fraction"], r["arm"], r["lr"]))
    return {
        "design": {"arms": {"sup": "the book's own start (mimetic attention, sin-cos positions)",
                            "mae": f"the shipped MAE encoder ({ENCODER})"},
                   "fractions": list(FRACTIONS), "budgets": list(BUDGETS), "lrs": list(LRS), "seeds": list(SEEDS),
                   "matched": {"arm": arm, "fraction": fraction, "rate_from_budget": parent, "budget": epochs},
                   "selection": "learning rate on val per arm, fraction and budget (seed 0); test read once, "
                                "for the final runs, when every choice is made and every seed is in",
                   "val_canvases": C.CLUTTERED_SIZES["val"], "test_canvases": C.CLUTTERED_SIZES["test"]},
        "tuning": tuning,
        "chosen_lr": [{"arm": a, "fraction": f, "budget": e, "lr": lr} for (a, f, e), lr in chosen.items()],
        "final": final,
        "missing": left,
        "complete": left["complete"],
        "test": "read once for every final run" if scores else None,
        "test_note": None if scores else "test not read: the study is not complete (see missing); the numbers "
                                         "here are validation accuracies",
        "test_scores": scores or None,
        "bag_of_patches": bag_of_patches(),
        "runs": len(records),
        "devices": dict(collections.Counter(r.get("device", "cpu") for r in records)),
    }


def summary(device: str = "cpu") -> dict:
    """``summarise`` the stored runs into ``SUMMARY``."""
    result = summarise(read_runs(), device)
    SUMMARY.write_text(json.dumps(result, indent=1) + "\n")
    left = result["missing"]
    print(f"wrote {SUMMARY}: {result['runs']} runs, {len(result['chosen_lr'])} of {len(tuning_keys())} choices "
          f"made, {left['runs_left']} runs left; test " + ("read" if result["test"] else "not read"))
    return result


def run(args: argparse.Namespace) -> None:
    """Train jobs in this process (how benchmarks/gpu_sweep.py calls this file)."""
    torch.set_num_threads(1)
    for name in args.variants:
        for seed in args.seeds:
            record = run_job(name, seed, args.device, args.save_dir, args.epochs)
            with open(args.out, "a") as out:
                out.write(json.dumps(record) + "\n")
            print(f"{name} seed {seed}: val {record['val_acc']:.4f} ({record['seconds']:.0f} s)", flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("jobs", help="print the jobs that can run now, highest priority first")
    s.add_argument("--plain", action="store_true", help="only NAME:SEED words, for benchmarks/gpu_sweep.py --jobs")
    s = sub.add_parser("collect", help="finished runs of a save dir into the results")
    s.add_argument("--from", dest="source", type=Path, required=True)
    s = sub.add_parser("summary", help=f"write {SUMMARY.name} for chapter 10 (test only once the study is complete)")
    s.add_argument("--device", default="cpu")
    add_run_command(sub, help="train jobs (how benchmarks/gpu_sweep.py calls this file)")
    args = p.parse_args()
    if args.command == "jobs":
        todo = plan(read_runs())
        if args.plain:
            print(" ".join(f"{n}:{s}" for n, s in todo))
        else:
            print(f"{len(read_runs())} runs done; chosen: {chosen_lrs(read_runs())}; runnable now:")
            print("\n".join(f"  {n}:{s}" for n, s in todo))
    elif args.command == "collect":
        collect(args.source)
    elif args.command == "summary":
        summary(args.device)
    else:
        run(args)


if __name__ == "__main__":
    main()
