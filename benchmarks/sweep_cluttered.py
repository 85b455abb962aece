"""Recipe search for the cluttered-digits ViT, on validation canvases only (test accuracy is never recorded).

    python benchmarks/sweep_cluttered.py --variants base lr4e-3 teacher10 --seeds 0 1 --workers 2 --out sweep.jsonl
    python benchmarks/sweep_cluttered.py --shipped --out sweep.jsonl  # the shipped model, scored the same way
    python benchmarks/sweep_cluttered.py --list                      # the named variants and their overrides

Each variant is PRESETS["cluttered_digits_grid"] (the easier task: the digit on the patch grid)
with a few fields changed (VARIANTS below; model_kwargs are merged
into the preset's). Every run writes one JSON line: the variant, the model_kwargs it trained with, seed, val
accuracy on the 2,000 val canvases that training reports, on 10,000 more val canvases (other positions and
clutter for the same 179 val digits, to make a choice less noisy), the mean attention distance of each block
on 2,000 of those (pixels; uniform attention on this grid is about 16.5), and the wall time. Runs go to a
pool of processes (one torch thread each), so several share one CPU or GPU. ``fit`` also evaluates the test
canvases at the end; the number is dropped here unread: a recipe is chosen on val, and its test accuracy is
measured once, by ``python -m vitedu.train``, for the chosen recipe.

The runs of benchmarks/results/cluttered_sweep.jsonl before the preset adopted mimetic initialisation were
variants of the earlier preset (timm's initialisation): their names and overrides are relative to it, and
their model_kwargs say what was trained.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import time
from dataclasses import asdict, replace
from pathlib import Path

import torch
from safetensors.torch import save_file

B256 = {"position_step": 1, "grid_epochs": 60, "batch_size": 256, "lr": 4e-3, "warmup_epochs": 5.0,
        "teacher_epochs": 30}
SPEEDRUN = {"position_step": 1, "augment": "digits_warp", "batch_size": 256, "lr": 4e-3, "warmup_epochs": 3.0,
            "teacher_epochs": 0}
VARIANTS: dict[str, dict] = {
    "base": {},
    "lr1e-3": {"lr": 1e-3}, "lr3e-3": {"lr": 3e-3}, "lr4e-3": {"lr": 4e-3},
    "teacher10": {"teacher_epochs": 10}, "teacher20": {"teacher_epochs": 20},
    "alpha0.7": {"distill_alpha": 0.7}, "alpha0.9": {"distill_alpha": 0.9},
    "hard": {"distill_temperature": 0.0}, "hard_teacher10": {"distill_temperature": 0.0, "teacher_epochs": 10},
    "dp0": {"model_kwargs": {"drop_path_rate": 0.0}}, "dp0.2": {"model_kwargs": {"drop_path_rate": 0.2}},
    "wd0.1": {"weight_decay": 0.1}, "ls0": {"label_smoothing": 0.0}, "warmup2": {"warmup_epochs": 2.0},
    "b64_lr3e-3": {"batch_size": 64, "lr": 3e-3}, "augment_digits": {"augment": "digits"},
    "warp": {"augment": "digits_warp"},
    "epochs60": {"epochs": 60}, "b64_lr3e-3_epochs60": {"batch_size": 64, "lr": 3e-3, "epochs": 60},
    # The preset starts attention local (mimetic initialisation with sin-cos-initialised learned positions). Each
    # half alone, and timm's start (the earlier preset):
    "sincos_only": {"model_kwargs": {"weight_init": ""}},
    "random_pos": {"model_kwargs": {"pos_embed": "learn"}},
    "timm_init": {"model_kwargs": {"weight_init": "", "pos_embed": "learn"}},
    # The honest task: the digit at any pixel (position_step=1) for training and every score.
    "anywhere": {"position_step": 1},
    "anywhere_e150": {"position_step": 1, "epochs": 150},
    "anywhere_e150_warp": {"position_step": 1, "epochs": 150, "augment": "digits_warp"},
    "anywhere_e150_noteacher": {"position_step": 1, "epochs": 150, "teacher_epochs": 0},
    "anywhere_e150_teacher20": {"position_step": 1, "epochs": 150, "teacher_epochs": 20},
    # A curriculum: the first grid_epochs epochs with the digit on the patch grid, then anywhere.
    "anywhere_e60_grid30": {"position_step": 1, "epochs": 60, "grid_epochs": 30},
    "anywhere_e100_grid30": {"position_step": 1, "epochs": 100, "grid_epochs": 30},
    "anywhere_e150_grid30": {"position_step": 1, "epochs": 150, "grid_epochs": 30},
    "anywhere_e150_teacher20_warp": {"position_step": 1, "epochs": 150, "teacher_epochs": 20,
                                     "augment": "digits_warp"},
    # On a GPU, batch 32 leaves it idle (this 140k-parameter model is launch-bound): batches of 256 draw 8x the
    # canvases per step. The teacher trains 30 epochs at that batch (about the steps of 4 epochs at 32).
    "anywhere_b256_e300_grid60": {**B256, "epochs": 300},
    "anywhere_b256_e300_grid60_warp": {**B256, "epochs": 300, "augment": "digits_warp"},
    "anywhere_b256_e300_grid60_warp_noteacher": {**B256, "epochs": 300, "augment": "digits_warp",
                                                 "teacher_epochs": 0},
    "anywhere_b256_e600_grid60_warp": {**B256, "epochs": 600, "augment": "digits_warp"},
    # The chosen recipe with position embeddings from a random start (timm's), not 2-D sin-cos: does the grid
    # structure of the trained embeddings come from training (chapter 8, the ViT paper's figure 7)?
    "anywhere_b256_e300_grid60_warp_randompos": {**B256, "epochs": 300, "augment": "digits_warp",
                                                 "model_kwargs": {"pos_embed": "learn"}},
    # The model's shape and initialisation, carried over from the on-grid search, checked on the honest task:
    # attention from timm's start instead of mimetic, a wider model, larger and smaller patches.
    "anywhere_b256_e300_grid60_warp_nomimetic": {**B256, "epochs": 300, "augment": "digits_warp",
                                                 "model_kwargs": {"weight_init": ""}},
    "anywhere_b256_e300_grid60_warp_dim96": {**B256, "epochs": 300, "augment": "digits_warp",
                                             "model_kwargs": {"embed_dim": 96}},
    "anywhere_b256_e300_grid60_warp_patch8": {**B256, "epochs": 300, "augment": "digits_warp",
                                              "model_kwargs": {"patch_size": 8}},
    "anywhere_b256_e300_grid60_warp_patch2": {**B256, "epochs": 300, "augment": "digits_warp",
                                              "model_kwargs": {"patch_size": 2}},
    # The CPU speedrun (vitedu.speedrun): about 500,000 canvases, no teacher (a ConvTeacher's forward pass costs
    # more than the ViT's whole training step on a CPU), the digit on the grid first, then anywhere.
    "sr_e50_g15": {**SPEEDRUN, "epochs": 50, "grid_epochs": 15},
    "sr_e50_g15_b128": {**SPEEDRUN, "epochs": 50, "grid_epochs": 15, "batch_size": 128, "lr": 3e-3},
    # A window of 4 x 4 patches around the digit for all but the last 10 epochs (a step costs about a quarter).
    "sr_w4_e100_g30_full10": {**SPEEDRUN, "epochs": 100, "grid_epochs": 30, "window_tokens": 4, "window_epochs": 90},
    "sr_w3_e100_g30_full10": {**SPEEDRUN, "epochs": 100, "grid_epochs": 30, "window_tokens": 3, "window_epochs": 90},
    "sr_w4_e100_g30_full0": {**SPEEDRUN, "epochs": 100, "grid_epochs": 30, "window_tokens": 4, "window_epochs": 100},
    "sr_w4_e150_g40_full10": {**SPEEDRUN, "epochs": 150, "grid_epochs": 40, "window_tokens": 4,
                              "window_epochs": 140},
    # A model trained on windows reads windows (95.7 % train) but not whole canvases (54 % val): the whole canvas's
    # clutter has to be learned on whole canvases, at a learning rate that still moves the weights.
    "sr_w4_e70_g20_win40": {**SPEEDRUN, "epochs": 70, "grid_epochs": 20, "window_tokens": 4, "window_epochs": 40},
    "sr_w4_e60_g25_win25": {**SPEEDRUN, "epochs": 60, "grid_epochs": 25, "window_tokens": 4, "window_epochs": 25},
    # The whole canvas throughout: the learning rate, stochastic depth, the grid phase's length.
    "sr_e50_g15_lr8e-3": {**SPEEDRUN, "epochs": 50, "grid_epochs": 15, "lr": 8e-3},
    "sr_e50_g15_dp0": {**SPEEDRUN, "epochs": 50, "grid_epochs": 15, "model_kwargs": {"drop_path_rate": 0.0}},
    "sr_e50_g8": {**SPEEDRUN, "epochs": 50, "grid_epochs": 8},
    # The grid phase on whole canvases (where the model learns to pick the digit out of the clutter), then windows
    # to learn the sub-patch shifts cheaply, then whole canvases again.
    "sr_e60_g15_win30from15": {**SPEEDRUN, "epochs": 60, "grid_epochs": 15, "window_tokens": 4, "window_epochs": 30,
                               "window_start": 15},
    # Muon on the blocks' matrices, AdamW for the rest (vitedu.optimizers), at AdamW's rate and twice it.
    "sr_e50_g15_muon": {**SPEEDRUN, "epochs": 50, "grid_epochs": 15, "optimizer": "muon"},
    "sr_e50_g15_muon_lr8e-3": {**SPEEDRUN, "epochs": 50, "grid_epochs": 15, "optimizer": "muon", "lr": 8e-3},
    # Muon at 8e-3 (ahead of AdamW by 4-6 points through the anywhere phase): a higher rate, longer, fewer
    # regularisers, and the windows for the sub-patch shifts.
    "sr_m_e50_g15_lr1.6e-2": {**SPEEDRUN, "epochs": 50, "grid_epochs": 15, "optimizer": "muon", "lr": 1.6e-2},
    "sr_m_e70_g20_lr8e-3": {**SPEEDRUN, "epochs": 70, "grid_epochs": 20, "optimizer": "muon", "lr": 8e-3},
    "sr_m_e70_g20_lr1.6e-2": {**SPEEDRUN, "epochs": 70, "grid_epochs": 20, "optimizer": "muon", "lr": 1.6e-2},
    "sr_m_e50_g15_lr3.2e-2": {**SPEEDRUN, "epochs": 50, "grid_epochs": 15, "optimizer": "muon", "lr": 3.2e-2},
    "sr_m_e50_g15_lr8e-3_dp0": {**SPEEDRUN, "epochs": 50, "grid_epochs": 15, "optimizer": "muon", "lr": 8e-3,
                                "model_kwargs": {"drop_path_rate": 0.0}},
    # Muon at 1.6e-2 for 50 epochs (95.95 %): more steps (batch 128), and no regularisers in so short a run.
    "sr_m_e50_g15_b128": {**SPEEDRUN, "epochs": 50, "grid_epochs": 15, "optimizer": "muon", "lr": 1.6e-2,
                          "batch_size": 128},
    "sr_m_e50_g15_reg0": {**SPEEDRUN, "epochs": 50, "grid_epochs": 15, "optimizer": "muon", "lr": 1.6e-2,
                          "label_smoothing": 0.0, "model_kwargs": {"drop_path_rate": 0.0}},
    "sr_m_e50_g8_reg0": {**SPEEDRUN, "epochs": 50, "grid_epochs": 8, "optimizer": "muon", "lr": 1.6e-2,
                         "label_smoothing": 0.0, "model_kwargs": {"drop_path_rate": 0.0}},
    "sr_m_e60_g15_win30from15_lr8e-3": {**SPEEDRUN, "epochs": 60, "grid_epochs": 15, "optimizer": "muon",
                                        "lr": 8e-3, "window_tokens": 4, "window_epochs": 30, "window_start": 15},
}


def variant_config(overrides: dict, seed: int = 0):
    """The earlier preset (cluttered_digits_grid) with a variant's fields changed; model_kwargs are merged into
    the preset's, not replaced."""
    from vitedu.config import PRESETS

    preset = PRESETS["cluttered_digits_grid"]
    model_kwargs = {**preset.model_kwargs, **overrides.get("model_kwargs", {})}
    return replace(preset, **{**overrides, "model_kwargs": model_kwargs}, seed=seed)


def job_epochs(name: str) -> int | None:
    """The epochs a variant's run logs (benchmarks/gpu_sweep.py's progress); None for a name that is not a variant."""
    return variant_config(VARIANTS[name]).epochs if name in VARIANTS else None


# How many canvases score() reads beyond the 2,000 fixed val canvases (the tests make them smaller).
VAL_MORE, OFFSET_IMAGES = 10_000, 1_000


def score(model: torch.nn.Module, device: str, position_step: int) -> dict:
    """Val accuracy on the 2,000 fixed val canvases and on VAL_MORE (10,000) more, both with the digit's cell at
    multiples of ``position_step``; accuracy per sub-patch offset of the digit (OFFSET_IMAGES = 1,000 val canvases
    each, the worst and the mean); attention distance per block (pixels)."""
    from vitedu import cluttered as C
    from vitedu import interpret as I
    from vitedu.shift import offset_accuracy
    from vitedu.train import evaluate

    model = model.to(device).eval()
    found = {}
    step = {"position_step": position_step}
    for name, (images, labels, _) in {"val_acc": C.load_cluttered_digits("val", **step),
                                      "val10k_acc": C.load_cluttered_digits("val", num_images=VAL_MORE, seed=1,
                                                                            **step)}.items():
        images = C.normalise_canvases(images)
        loader = [(images[i:i + 500].to(device), labels[i:i + 500].to(device)) for i in range(0, len(labels), 500)]
        found[name] = round(evaluate(model, loader)[1], 4)
    grid, patch = model.patch_embed.grid_size, model.patch_embed.patch_size[0]  # e.g. (8, 8) and 4
    with torch.no_grad():  # on the first 2,000 of the 10,000
        distance = torch.stack([I.mean_attention_distance(model.attention_maps(x), grid, patch).cpu()
                                for x, _ in loader[:4]]).mean(0)  # (depth, heads)
    shifts = offset_accuracy(model, patch_size=patch, split="val", num_images=OFFSET_IMAGES, seed=2)
    return found | {"distance_per_block": [round(d, 2) for d in distance.mean(-1).tolist()],
                    "val_offset_worst": round(shifts.min().item(), 4),
                    "val_offset_mean": round(shifts.mean().item(), 4)}


def run(job: tuple[str, dict, int, str, int | None, str | None]) -> dict:
    name, overrides, seed, device, epochs, save_dir = job
    from vitedu.train import fit

    config = variant_config(overrides, seed)
    if epochs is not None:
        config = replace(config, epochs=epochs)
    start = time.perf_counter()
    log = lambda line: None  # noqa: E731
    if save_dir is not None:  # one line per epoch, to follow a long run
        Path(save_dir).mkdir(parents=True, exist_ok=True)
        log_file = open(f"{save_dir}/{name}_seed{seed}.log", "a")
        log = lambda line: print(line, file=log_file, flush=True)  # noqa: E731
    # With --save-dir every epoch is checkpointed there, and a run that was stopped resumes where it was.
    out = None if save_dir is None else Path(save_dir) / f"{name}_seed{seed}"
    result = fit(config, out=out, resume=out is not None, device=device, progress=False, log=log, precision="fp32")
    seconds = time.perf_counter() - start
    model = result.model.eval()
    if save_dir is not None:  # the weights alone (no test accuracy), e.g. to ship the chosen recipe's run
        Path(save_dir).mkdir(parents=True, exist_ok=True)
        weights = {k: v.contiguous() for k, v in model.state_dict().items()}
        save_file(weights, f"{save_dir}/{name}_seed{seed}.safetensors",
                  metadata={"config": json.dumps(asdict(config)), "val_acc": f"{result.history.val_acc[-1]:.4f}"})
    return {"variant": name, "overrides": overrides, "model_kwargs": config.model_kwargs, "seed": seed,
            "epochs": config.epochs, "position_step": config.position_step,
            **score(model, device, config.position_step), "seconds": round(seconds), "device": str(device)}


def shipped(device: str) -> dict:
    """The same numbers for the shipped model (the recipe and seed its file records), a baseline to read variants
    against."""
    import vitedu
    from vitedu.shipped import shipped_metadata

    model = vitedu.create_model("vit_cluttered_digits", pretrained=True)
    config = json.loads(shipped_metadata("vit_cluttered_digits")["config"])
    return {"variant": "shipped", "overrides": {}, "model_kwargs": config["model_kwargs"], "seed": config["seed"],
            "epochs": config["epochs"], "position_step": config.get("position_step", 4),
            **score(model, device, config.get("position_step", 4)), "seconds": 0, "device": str(device)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--variants", nargs="+", default=list(VARIANTS))
    p.add_argument("--seeds", type=int, nargs="+", default=[0])
    p.add_argument("--epochs", type=int, help="override every variant's epochs (for a quick check)")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--device", default="cpu")
    p.add_argument("--out", default="sweep.jsonl", help="JSON lines, appended as runs finish")
    p.add_argument("--save-dir", help="also write each run's final weights here (val accuracy in the metadata)")
    p.add_argument("--shipped", action="store_true", help="score the shipped model instead (no training)")
    p.add_argument("--list", action="store_true")
    args = p.parse_args()
    if args.list:
        for name, overrides in VARIANTS.items():
            print(f"{name:22s} {overrides}")
        return
    unknown = sorted(set(args.variants) - set(VARIANTS))
    if unknown:
        raise SystemExit(f"unknown variants {unknown}; see --list")
    jobs = [(v, VARIANTS[v], s, args.device, args.epochs, args.save_dir) for s in args.seeds for v in args.variants]
    torch.set_num_threads(1)  # here and in every worker: one thread per run
    with open(args.out, "a") as out:
        if args.shipped:
            record(shipped(args.device), out)
            return
        with mp.get_context("spawn").Pool(args.workers, torch.set_num_threads, (1,)) as pool:
            for row in pool.imap_unordered(run, jobs):
                record(row, out)
            pool.close()  # let the workers finish and exit, rather than terminate them
            pool.join()


def record(row: dict, out) -> None:
    out.write(json.dumps(row) + "\n")
    out.flush()
    print(f"{row['variant']:22s} seed {row['seed']}  val {row['val_acc']:.4f}  val10k {row['val10k_acc']:.4f}"
          f"  distance {row['distance_per_block']}  {row['seconds']} s", flush=True)


if __name__ == "__main__":
    main()
