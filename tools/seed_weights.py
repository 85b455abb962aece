"""Three seeds of the cluttered-digits recipe, packed into one small file for chapter 8's seed checks.

    python tools/seed_weights.py                          # train seeds 1, 2, 3 with the preset's recipe, then pack
    python tools/seed_weights.py --pack a.st b.st c.st    # pack weight files written by benchmarks/sweep_cluttered.py
                                                          #   --save-dir or `python -m vitedu.train --save-weights`
    python tools/seed_weights.py --pack a.st b.st c.st --ship  # ... and ship the first as vit_cluttered_digits

Chapter 8 reads the shipped vit_cluttered_digits (a fourth seed of the recipe, seed 7, written by `make
weights`) and checks which of its observations also hold for these three seeds. Training three runs is too slow
for a notebook on a CPU, so the chapter loads these. Weights are stored in float16 under "seed{N}." prefixes,
about 0.8 MB for all three, in vitedu/assets so that they also work on Colab. The metadata records the recipe,
the seeds, and each seed's val accuracy and test accuracy on the 2,000 stored test canvases: packing is where
the chosen recipe's test accuracy is read, once, after the recipe was chosen on validation
(benchmarks/README.md).

How the packs were made: the three runs of the variant anywhere_b256_e300_grid60_warp of
benchmarks/sweep_cluttered.py (identical to the preset but for the seed), on a GPU, packed (the same for the
variants ..._noteacher and ..._randompos, with --out). --ship wrote the earlier shipped model (seed 1); the
shipped file is now `make weights`'s own output, seed 7 (benchmarks/README.md, "A seed no choice used").
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict, replace

import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

import vitedu
from vitedu.config import PRESETS
from vitedu.run_files import save_state_dict
from vitedu.train import evaluate, fit

OUT = "vitedu/assets/vit_cluttered_digits_3_seeds.safetensors"
SHIPPED = "vitedu/assets/vit_cluttered_digits.safetensors"


def test_accuracy(model: torch.nn.Module, position_step: int) -> float:
    """Accuracy on the 2,000 stored test canvases, drawn with the digit's cell at multiples of position_step."""
    from vitedu import cluttered as C

    images, labels, _ = C.load_cluttered_digits("test", position_step=position_step)
    images = C.normalise_canvases(images)
    return evaluate(model.eval(), [(images[i:i + 500], labels[i:i + 500]) for i in range(0, len(labels), 500)])[1]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, nargs=3, default=[1, 2, 3])
    p.add_argument("--pack", nargs=3, metavar="FILE", help="pack these weight files (one per seed) instead of training")
    p.add_argument("--ship", action="store_true", help=f"also write the first seed, in float32, to {SHIPPED}")
    p.add_argument("--out", default=OUT)
    args = p.parse_args()
    torch.set_num_threads(1)
    if args.pack:
        configs = [json.loads(safe_open(path, "pt").metadata()["config"]) for path in args.pack]
        val = [safe_open(path, "pt").metadata()["val_acc"] for path in args.pack]
        states = [load_file(path) for path in args.pack]
        if [c["seed"] for c in configs] != args.seeds:
            raise SystemExit(f"the files were trained with seeds {[c['seed'] for c in configs]}, not --seeds "
                             f"{args.seeds}: give the files in the order of --seeds")
        config = configs[0]
    else:
        results = [fit(replace(PRESETS["cluttered_digits"], seed=seed), progress=False) for seed in args.seeds]
        states = [r.model.state_dict() for r in results]
        val = [f"{r.history.val_acc[-1]:.4f}" for r in results]
        config = asdict(results[0].config)
    models = []
    for state in states:
        model = vitedu.create_model(config["model"], **config["model_kwargs"])
        model.load_state_dict(state)
        models.append(model)
    test = [f"{test_accuracy(m, config['position_step']):.4f}" for m in models]
    print("seeds", args.seeds, "val", val, "test", test)
    packed = {f"seed{seed}.{k}": v.detach().cpu().half().contiguous() for seed, s in zip(args.seeds, states)
              for k, v in s.items()}
    meta = {"config": json.dumps({**config, "seed": args.seeds[0]}), "seeds": ",".join(map(str, args.seeds)),
            "dtype": "float16", "val_acc": ",".join(val), "test_acc": ",".join(test)}
    save_file(packed, args.out, metadata=meta)
    print(f"wrote {args.out}: {len(packed)} tensors")
    if args.ship:  # the same metadata as vitedu.run_files.save_weights writes
        model = models[0]
        meta = {"model": config["model"], "config": json.dumps(config), "val_acc": val[0], "test_acc": test[0]}
        cfg = getattr(model, "pretrained_cfg", None)
        if cfg is not None:
            meta["pretrained_cfg"] = json.dumps({k: v for k, v in cfg.items() if k not in ("source", "trained")})
        save_state_dict(SHIPPED, model, meta)
        print(f"wrote {SHIPPED}: seed {args.seeds[0]}")


if __name__ == "__main__":
    main()
