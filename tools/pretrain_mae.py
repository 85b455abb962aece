"""MAE pre-training on unlabelled cluttered canvases, the linear probe that measures what it learned, and shipping.

    python tools/pretrain_mae.py --out runs/mae --epochs 400                  # pre-train (resumes if stopped)
    python tools/pretrain_mae.py --out runs/mae --epochs 400 --device cuda    # the same on a GPU (Colab)
    python tools/pretrain_mae.py --out runs/mae --probe 1000 --seeds 0 1 2    # probe runs/mae vs a random encoder

Pre-training is ``vitedu.mae_pretrain.pretrain`` (the recipe, the loop, the checkpoints; its docstring says what
it does): every epoch is checkpointed into ``--out``, and a run started again with the same ``--out`` resumes after
its last complete epoch. At the end the encoder alone goes to ``<out>/encoder.safetensors``, its config in the
metadata (``create_model(metadata["model"], **json.loads(metadata["model_kwargs"]))`` rebuilds it); ``--ship``
writes a finished run into vitedu/assets as the registry's ``vit_cluttered_digits_mae``.

The probe is ``vitedu.linear_probe.linear_probe`` (its docstring says how it chooses and scores); the baseline is
the same probe on the randomly initialised encoder the MAE starts from.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict
from pathlib import Path
from typing import Optional

import torch
from safetensors.torch import save_file

from vitedu.config import ConfigError
from vitedu.linear_probe import linear_probe
from vitedu.mae_pretrain import (
    ENCODER_FILE,
    SHIPPED_NAME,
    MAEConfig,
    build_mae,
    encoder_metadata,
    mae_kwargs,
    pretrain,
    save_encoder,
)
from vitedu.run_files import STATE_FILE, atomic_write, save_state_dict
from vitedu.train import one_line
from vitedu.utils import DeviceError, check_device

ASSETS = Path(__file__).resolve().parent.parent / "vitedu" / "assets"


def ship(out: Path, probe: Path, assets: Path = ASSETS, name: str = SHIPPED_NAME) -> tuple[Path, Path]:
    """Ship the finished run in ``out`` with vitedu: its encoder as the registry weights of ``name`` (what
    ``create_model(name, pretrained=True)`` loads) and its decoder beside it (``vitedu.shipped_mae.load_shipped_mae``).

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


def checked_config(args: argparse.Namespace) -> Optional[MAEConfig]:
    """The pre-training run the options ask for (None with --probe or --ship), refused before any work when an
    option cannot be used: a ConfigError whose message is one line per problem."""
    if args.threads < 1:
        raise ConfigError(f"--threads must be a whole number >= 1 (torch's CPU threads); got {args.threads}")
    check_device(args.device)
    if Path(args.out).exists() and not Path(args.out).is_dir():
        raise ConfigError(f"--out must be the run's folder; got {args.out!r}, which is a file: pick another path")
    if args.probe is not None and args.probe < 1:
        raise ConfigError(f"--probe must be a number of labelled canvases >= 1; got {args.probe}")
    if args.stop_after is not None and args.stop_after < 1:
        raise ConfigError(f"--stop-after must be an epoch >= 1 (the run stops after it); got {args.stop_after}")
    if args.probe or args.ship:
        return None
    return MAEConfig(epochs=args.epochs, batch_size=args.batch_size, base_lr=args.base_lr,
                     warmup_epochs=args.warmup_epochs, mask_ratio=args.mask_ratio, seed=args.seed,
                     norm_pix_loss=not args.pixel_loss)


def main(argv: Optional[list[str]] = None) -> None:
    p = argparse.ArgumentParser(prog="python tools/pretrain_mae.py", description=__doc__.splitlines()[0])
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
    try:
        config = checked_config(args)
    except (ConfigError, DeviceError) as err:
        p.error(one_line(err))  # before any work
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
