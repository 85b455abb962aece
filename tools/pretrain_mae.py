"""MAE pre-training on unlabelled cluttered canvases, and the linear probe that measures what it learned (issue 29).

    python tools/pretrain_mae.py --out runs/mae --epochs 400                  # pre-train (resumes if stopped)
    python tools/pretrain_mae.py --out runs/mae --epochs 400 --device cuda    # the same on a GPU (Colab)
    python tools/pretrain_mae.py --out runs/mae --probe 1000 --seeds 0 1 2    # probe runs/mae vs a random encoder

Pre-training is ``vitedu.mae_pretrain.pretrain`` (the recipe, the loop, the checkpoints; its docstring says what
it does): every epoch is checkpointed into ``--out``, and a run started again with the same ``--out`` resumes after
its last complete epoch. At the end the encoder alone goes to ``<out>/encoder.safetensors``, its config in the
metadata (``create_model(metadata["model"], **json.loads(metadata["model_kwargs"]))`` rebuilds it); ``--ship``
writes a finished run into vitedu/assets as the registry's ``vit_cluttered_digits_mae``.

The probe (``linear_probe``): frozen encoder features of n labelled *training* canvases, [CLS] or the mean of the
patch tokens (both after the encoder's final norm), standardised, into a logistic regression (full-batch L-BFGS);
the pooling and the L2 penalty are chosen on the 2,000 val canvases, and only the chosen probe reads the test
canvases, once. The baseline is the same probe on the randomly initialised encoder the MAE starts from.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict
from pathlib import Path
from typing import Optional

import torch
import torch.nn.functional as F
from safetensors.torch import save_file
from torch import Tensor, nn

from vitedu.checkpoints import STATE_FILE, atomic_write, save_state_dict
from vitedu.cluttered import CLUTTERED_MEAN, CLUTTERED_STD, load_cluttered_digits
from vitedu.mae import MaskedAutoencoder
from vitedu.mae_pretrain import (  # noqa: F401  (re-exported: the scripts and tests call them through this tool)
    MAEConfig,
    MAEHistory,
    build_mae,
    epoch_canvases,
    mae_kwargs,
    pretrain,
    reconstruction_loss,
    unlabelled_canvases,
)

ENCODER_FILE = "encoder.safetensors"
SHIPPED_NAME = "vit_cluttered_digits_mae"  # the registry name of the shipped encoder (vitedu.registry.MODELS)
ASSETS = Path(__file__).resolve().parent.parent / "vitedu" / "assets"
POOLS = ("cls", "mean")  # the probe's two feature choices
PROBE_WEIGHT_DECAYS = (0.0, 1e-4, 1e-3, 1e-2, 1e-1)  # the L2 penalties the probe chooses from on val


def encoder_metadata(config: MAEConfig, history: MAEHistory, model: str) -> dict[str, str]:
    """What an encoder file says about itself: how to rebuild it (``create_model(model, **model_kwargs)``) and how
    it was made (the pre-training config, epochs done, final val reconstruction loss, its inputs' normalisation)."""
    kwargs = dict(img_size=32, patch_size=4, in_chans=1, num_classes=0, pos_embed="sincos", **config.encoder)
    return {
        "model": model, "model_kwargs": json.dumps(kwargs), "config": json.dumps(asdict(config)),
        "epochs_done": str(len(history.epoch)),
        "val_recon_loss": f"{history.val_loss[-1]:.4f}" if history.val_loss else "",
        "pretrained_cfg": json.dumps({"input_size": [1, 32, 32], "mean": CLUTTERED_MEAN, "std": CLUTTERED_STD}),
    }


def save_encoder(path: str | Path, model: MaskedAutoencoder, config: MAEConfig, history: MAEHistory) -> None:
    """The encoder alone as safetensors, with ``encoder_metadata`` (``vit_cluttered_digits`` rebuilds it)."""
    save_state_dict(Path(path), model.encoder, encoder_metadata(config, history, "vit_cluttered_digits"))


def ship(out: Path, probe: Path, assets: Path = ASSETS, name: str = SHIPPED_NAME) -> tuple[Path, Path]:
    """Ship the finished run in ``out`` with vitedu: its encoder as the registry weights of ``name`` (what
    ``create_model(name, pretrained=True)`` loads) and its decoder beside it (``vitedu.mae.load_shipped_mae``).

    ``probe`` is the ``--probe --json`` file of this very run: its test rows go into the metadata, the numbers the
    shipped file claims. -> (encoder file, decoder file)
    """
    state = json.loads((out / STATE_FILE).read_text())
    config = MAEConfig(**{**state["config"], "betas": tuple(state["config"]["betas"])})
    if state["epoch"] != config.epochs:
        raise SystemExit(f"{out} stopped after epoch {state['epoch']} of {config.epochs}: finish it first "
                         f"(python tools/pretrain_mae.py --out {out}), then ship it")
    probed = json.loads(probe.read_text())
    if probed["config"] != state["config"] or probed["epochs_done"] != config.epochs or any(
            "test_acc" not in row for row in probed["probe"]):
        raise SystemExit(f"{probe} is not the finished run in {out} probed on test (its config or epochs differ): "
                         f"make it with python tools/pretrain_mae.py --out {out} --probe 1000 --seeds 0 1 2 "
                         f"--json {probe}")
    model, history, _ = pretrain(config, out, stop_after=0, log=lambda _: None)
    encoder_keys = set(model.encoder.state_dict())
    decoder = {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items() if k not in encoder_keys}
    encoder_file, decoder_file = assets / f"{name}.safetensors", assets / f"{name}_decoder.safetensors"
    test = {arm: [row["test_acc"] for row in probed["probe"] if row["encoder"] == arm] for arm in ("mae", "random")}
    save_state_dict(encoder_file, model.encoder, {
        **encoder_metadata(config, history, name), "mae_kwargs": json.dumps(mae_kwargs(config)),
        "decoder": decoder_file.name, "probe_n_labelled": str(probed["probe"][0]["n_labelled"]),
        "probe_test_acc": json.dumps(test),
    })
    atomic_write(decoder_file, lambda p: save_file(decoder, str(p), metadata={"model": name, "part": "decoder"}))
    return encoder_file, decoder_file


# ----------------------------------------------------------------------------------------------------
# The linear probe
# ----------------------------------------------------------------------------------------------------


@torch.no_grad()
def features(encoder: nn.Module, images: Tensor, pool: str) -> Tensor:
    """Frozen features: (N, 1, 32, 32) -> (N, embed_dim), [CLS] ("cls") or the mean of the patch tokens ("mean"),
    both after the encoder's final norm."""
    if pool not in POOLS:
        raise ValueError(f"pool must be one of {POOLS}, got {pool!r}")
    encoder.eval()
    device = next(encoder.parameters()).device
    out = []
    for i in range(0, len(images), 500):
        tokens = encoder.forward_features(images[i:i + 500].to(device))  # (batch, 1 + patches, dim)
        out.append((tokens[:, 0] if pool == "cls" else tokens[:, 1:].mean(1)).cpu())
    return torch.cat(out)


def fit_logistic(x: Tensor, y: Tensor, weight_decay: float, num_classes: int = 10) -> nn.Linear:
    """Multinomial logistic regression on (N, dim) features by full-batch L-BFGS; L2 penalty ``weight_decay``."""
    torch.manual_seed(0)
    head = nn.Linear(x.shape[1], num_classes)
    optimizer = torch.optim.LBFGS(head.parameters(), lr=1.0, max_iter=200, line_search_fn="strong_wolfe")

    def closure() -> Tensor:
        optimizer.zero_grad()
        loss = F.cross_entropy(head(x), y) + weight_decay * head.weight.pow(2).sum()
        loss.backward()
        return loss

    optimizer.step(closure)
    return head


def probe_data(n_labelled: int, seed: int, position_step: int = 1, test: bool = True,
               ) -> dict[str, tuple[Tensor, Tensor]]:
    """Labelled canvases for the probe: n training canvases (drawn with ``seed``), the fixed val and test ones.
    ``test=False`` leaves test out: a recipe search (benchmarks/mae_sweep.py) never has it to read."""
    def normed(split: str, **kw) -> tuple[Tensor, Tensor]:
        images, labels, _ = load_cluttered_digits(split, position_step=position_step, **kw)
        return (images - CLUTTERED_MEAN[0]) / CLUTTERED_STD[0], labels

    data = {"train": normed("train", num_images=n_labelled, seed=seed), "val": normed("val")}
    return data | {"test": normed("test")} if test else data


def probe_each_l2(f_train: Tensor, y_train: Tensor, f_val: Tensor, y_val: Tensor) -> list[tuple]:
    """One logistic regression per L2 penalty of ``PROBE_WEIGHT_DECAYS`` on features standardised with the
    training statistics. -> [(weight_decay, val_acc, head, mean, std)], in that order."""
    mean, std = f_train.mean(0), f_train.std(0).clamp(min=1e-6)
    fits = []
    for wd in PROBE_WEIGHT_DECAYS:
        head = fit_logistic((f_train - mean) / std, y_train, wd)
        with torch.no_grad():
            acc = (head((f_val - mean) / std).argmax(1) == y_val).float().mean().item()
        fits.append((wd, acc, head, mean, std))
    return fits


def linear_probe(encoder: nn.Module, n_labelled: int, seed: int,
                 data: Optional[dict[str, tuple[Tensor, Tensor]]] = None) -> dict:
    """Probe a frozen encoder: choose pooling and L2 penalty on val, then score the chosen probe on test once.

    Returns {"pool", "weight_decay", "val_acc", "test_acc", "val_grid": {"cls/0.001": acc, ...}}. ``data``
    (``probe_data``'s layout) defaults to ``probe_data(n_labelled, seed)``; ``data`` without "test" gives no
    "test_acc" (a choice among recipes is made on val alone).
    """
    data = probe_data(n_labelled, seed) if data is None else data
    (x_train, y_train), (x_val, y_val) = data["train"], data["val"]
    grid, best = {}, None
    for pool in POOLS:
        f_train, f_val = features(encoder, x_train, pool), features(encoder, x_val, pool)
        for wd, acc, head, mean, std in probe_each_l2(f_train, y_train, f_val, y_val):
            grid[f"{pool}/{wd:g}"] = round(acc, 4)
            if best is None or acc > best[0]:  # the first of equal scores is kept
                best = (acc, pool, wd, head, mean, std)
    acc, pool, wd, head, mean, std = best
    chosen = {"pool": pool, "weight_decay": wd, "val_acc": round(acc, 4), "val_grid": grid}
    if "test" not in data:
        return chosen
    x_test, y_test = data["test"]
    with torch.no_grad():
        test_acc = (head((features(encoder, x_test, pool) - mean) / std).argmax(1) == y_test).float().mean().item()
    return chosen | {"test_acc": round(test_acc, 4)}


def main(argv: Optional[list[str]] = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, help="the run's folder: checkpoints, log, encoder.safetensors")
    p.add_argument("--epochs", type=int, default=MAEConfig.epochs)
    p.add_argument("--batch-size", type=int, default=MAEConfig.batch_size)
    p.add_argument("--base-lr", type=float, default=MAEConfig.base_lr)
    p.add_argument("--warmup-epochs", type=float, default=MAEConfig.warmup_epochs)
    p.add_argument("--mask-ratio", type=float, default=MAEConfig.mask_ratio)
    p.add_argument("--pixel-loss", action="store_true", help="raw (normalised-canvas) pixels as the target, not "
                   "each patch normalised by its own mean and std (norm_pix_loss, the default)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--stop-after", type=int, help="stop after this epoch, as if interrupted")
    p.add_argument("--device", default="cpu", help="cpu, or cuda where there is a GPU (e.g. on Colab)")
    p.add_argument("--threads", type=int, default=1, help="torch threads (default one, like vitedu.train's runs)")
    p.add_argument("--probe", type=int, metavar="N", help="instead of training: probe <out>'s encoder and a random "
                   "one on N labelled canvases")
    p.add_argument("--seeds", type=int, nargs="+", default=[0], help="the probe's seeds (its labelled subsets)")
    p.add_argument("--json", help="with --probe: also write the run's config, loss curve and the probe rows here")
    p.add_argument("--ship", metavar="PROBE_JSON", help=f"instead of training: write <out>'s encoder and decoder "
                   f"into vitedu/assets as {SHIPPED_NAME}, with the test probe of PROBE_JSON (--probe --json)")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    out = Path(args.out)
    if args.ship:
        for path in ship(out, Path(args.ship)):
            print(f"wrote {path} ({path.stat().st_size:,} bytes)")
        return
    if args.probe:
        if not (out / STATE_FILE).exists():
            raise SystemExit(f"--probe reads the pre-training run in {out}, but {out / STATE_FILE} does not exist: "
                             f"pre-train first (python tools/pretrain_mae.py --out {out}), or point --out at a run")
        trained, history, steps = pretrain(MAEConfig(), out, args.device, stop_after=0, log=lambda _: None)
        state = json.loads((out / STATE_FILE).read_text())
        config = MAEConfig(**{**state["config"], "betas": tuple(state["config"]["betas"])})
        random = build_mae(config).to(args.device)  # the MAE's own starting point, untrained
        rows = []
        for seed in args.seeds:
            for name, model in (("mae", trained), ("random", random)):
                began = time.perf_counter()
                rows.append({"encoder": name, "seed": seed, "n_labelled": args.probe,
                             **linear_probe(model.encoder, args.probe, seed),
                             "seconds": round(time.perf_counter() - began, 1)})
                print(json.dumps(rows[-1]), flush=True)
        if args.json:
            Path(args.json).write_text(json.dumps({
                "config": asdict(config), "epochs_done": len(history.epoch), "steps": steps,
                "history": asdict(history), "probe": rows, "threads": args.threads, "device": args.device}, indent=1))
        return
    config = MAEConfig(epochs=args.epochs, batch_size=args.batch_size, base_lr=args.base_lr,
                       warmup_epochs=args.warmup_epochs, mask_ratio=args.mask_ratio, seed=args.seed,
                       norm_pix_loss=not args.pixel_loss)
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "log.txt", "a") as log_file:
        def log(line: str) -> None:
            print(line, flush=True)
            print(line, file=log_file, flush=True)

        model, history, _ = pretrain(config, out, args.device, args.stop_after, log)
    if len(history.epoch) == config.epochs:
        save_encoder(out / ENCODER_FILE, model, config, history)


if __name__ == "__main__":
    main()
