"""The MAE's pre-training recipe, chosen on validation: named variants, each pre-trained and probed on
val only, along the way.

    python benchmarks/mae_sweep.py --variants lr1.5e-3 mask50 --seeds 0 --save-dir runs/mae_sweep \\
        --out runs/mae_sweep/sweep.jsonl
    python benchmarks/gpu_sweep.py --runner benchmarks/mae_sweep.py --jobs lr1.5e-3:0 mask50:0 mask90:0 \\
        --deadline 530 --device cuda --save-dir /tmp/mae --pack-dir "$OUT"          # many at once on one GPU

A variant is ``vitedu.mae_pretrain.MAEConfig`` with some fields changed (``VARIANTS``). A job pre-trains
it into ``<save-dir>/<name>_seed<s>/`` (a checkpoint every epoch: a stopped job resumes when started again) and
logs one line an epoch to ``<name>_seed<s>.log`` (what ``benchmarks/gpu_sweep.py`` counts). Every ``PROBE_EVERY``
epochs, and at the end, it probes the encoder on val: the linear probe of ``vitedu.linear_probe.linear_probe`` on
``N_LABELLED`` training canvases, pooling and L2 chosen on the val canvases, **no test canvas loaded** (a recipe
is chosen here; test is read once, for the chosen recipe, by ``tools/pretrain_mae.py --probe``). Seed 0's random
encoder, the baseline every probe is compared with, is probed the same way once per job. Each probe is one JSON
line in ``--out``; the final encoder goes to ``<name>_seed<s>.safetensors``.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict, replace
from pathlib import Path

import torch

from vitedu import linear_probe as probe
from vitedu import mae_pretrain
from vitedu.run_files import STATE_FILE

N_LABELLED = 1_000  # the probe: 1,000 labelled canvases
PROBE_EVERY = 50  # epochs between probes, to see whether longer pre-training still pays
# The CPU runs of benchmarks/README.md ("MAE pre-training"): 10x the paper's rule's rate, a short warm-up.
BASE = dict(base_lr=1.5e-3, warmup_epochs=10.0, epochs=200)
VARIANTS: dict[str, dict] = {
    "lr1.5e-3": BASE,
    "lr5e-4": {**BASE, "base_lr": 5e-4},
    "lr3e-3": {**BASE, "base_lr": 3e-3},
    # the masking-ratio sweep (the paper's figure 5 in miniature); 0.75 is the base. On the CPU 0.5 put more of
    # the digit into the tokens under it than 0.75 (benchmarks/README.md): lower ratios are worth a look here
    "mask25": {**BASE, "mask_ratio": 0.25},
    "mask50": {**BASE, "mask_ratio": 0.5},
    "mask60": {**BASE, "mask_ratio": 0.6},
    "mask90": {**BASE, "mask_ratio": 0.9},
    "pixels": {**BASE, "norm_pix_loss": False},
    # a deeper, wider decoder (the paper's table 1a: a deeper decoder lifts the linear probe most)
    "dec4": {**BASE, "decoder": dict(decoder_embed_dim=64, decoder_depth=4, decoder_num_heads=4)},
    "mask50_dec4": {**BASE, "mask_ratio": 0.5,
                    "decoder": dict(decoder_embed_dim=64, decoder_depth=4, decoder_num_heads=4)},
    # longer: the paper's probe still rose from 800 to 1,600 epochs
    "e800": {**BASE, "epochs": 800, "warmup_epochs": 40.0},
}


def variant_config(name: str, seed: int = 0):
    """``MAEConfig`` with the variant's fields; ``name`` must be a key of ``VARIANTS``."""
    if name not in VARIANTS:
        raise ValueError(f"unknown MAE variant {name!r}: choose one of {sorted(VARIANTS)}")
    return replace(mae_pretrain.MAEConfig(), **VARIANTS[name], seed=seed)


def job_epochs(name: str) -> int | None:
    """The epochs a variant logs (benchmarks/gpu_sweep.py's progress); None for a name that is not a variant."""
    return variant_config(name).epochs if name in VARIANTS else None


def probe_row(encoder: torch.nn.Module, data: dict, **about) -> dict:
    began = time.perf_counter()
    return {**about, **probe.linear_probe(encoder, N_LABELLED, 0, data), "n_labelled": N_LABELLED,
            "probe_seconds": round(time.perf_counter() - began, 1)}


def run(name: str, seed: int, device: str, save_dir: Path, out: Path, epochs: int | None = None) -> None:
    """Pre-train one variant in stages of PROBE_EVERY epochs, probing on val after each (and the random start)."""
    config = variant_config(name, seed)
    if epochs is not None:  # a quick check of the machinery
        config = replace(config, epochs=epochs)
    folder, data = save_dir / f"{name}_seed{seed}", probe.probe_data(N_LABELLED, 0, test=False)
    with open(save_dir / f"{name}_seed{seed}.log", "a") as log_file, open(out, "a") as rows:
        def log(line: str) -> None:
            print(line, file=log_file, flush=True)

        def record(row: dict) -> None:
            print(json.dumps(row), file=rows, flush=True)

        about = dict(variant=name, seed=seed, device=device)
        if not (folder / STATE_FILE).exists():
            record(probe_row(mae_pretrain.build_mae(config).encoder.to(device), data, **about, epochs_done=0))
        model = history = None
        for stop in [*range(PROBE_EVERY, config.epochs, PROBE_EVERY), config.epochs]:
            state = folder / STATE_FILE
            if state.exists() and json.loads(state.read_text())["epoch"] >= stop:
                continue  # a stage a stopped job already did (and probed)
            model, history, steps = mae_pretrain.pretrain(config, folder, device, stop_after=stop, log=log)
            record(probe_row(model.encoder, data, **about, epochs_done=stop, steps=steps,
                             val_recon_loss=round(history.val_loss[-1], 4),
                             seconds=round(sum(history.seconds), 1), config=asdict(config)))
        if model is not None:
            mae_pretrain.save_encoder(save_dir / f"{name}_seed{seed}.safetensors", model, config, history)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--variants", nargs="+", required=True, choices=sorted(VARIANTS))
    p.add_argument("--seeds", type=int, nargs="+", default=[0])
    p.add_argument("--workers", type=int, default=1, help="ignored: one job a process (benchmarks/gpu_sweep.py's call)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--save-dir", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True, help="JSON lines: one a probe")
    p.add_argument("--epochs", type=int, help="fewer epochs, for a quick check")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    args.save_dir.mkdir(parents=True, exist_ok=True)
    for name in args.variants:
        for seed in args.seeds:
            run(name, seed, args.device, args.save_dir, args.out, args.epochs)


if __name__ == "__main__":
    main()
