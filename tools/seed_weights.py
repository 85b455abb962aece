"""Three seeds of the cluttered-digits recipe, packed into one small file for chapter 8's seed check.

    python tools/seed_weights.py                        # train seeds 0, 1, 2 with the preset's recipe, then pack
    python tools/seed_weights.py --epochs 3             # a shorter version of the recipe (quick look)
    python tools/seed_weights.py --pack a.st b.st c.st  # pack files written by `python -m vitedu.train
                                                        #   --dataset cluttered_digits --seed N --save-weights ...`
                                                        #   (how the shipped file was made: seed 0 is the
                                                        #   shipped model, seeds 1 and 2 used --threads 1)

The shipped vit_cluttered_digits weights are one seed of the recipe; chapter 8 checks which of its
observations also hold for the other seeds. Training three runs is too slow for a notebook on a CPU, so the
chapter loads these. Weights are stored in float16 under "seed{N}." prefixes, about 0.8 MB for all three, in
vitedu/assets so that they also work on Colab. The metadata records the recipe.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict, replace

import torch
from safetensors.torch import load_file, save_file

from vitedu.train import PRESETS, fit

OUT = "vitedu/assets/vit_cluttered_digits_3_seeds.safetensors"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, help="epochs per seed (default: the preset's)")
    p.add_argument("--pack", nargs=3, metavar="FILE", help="pack these seed 0, 1, 2 weight files instead of training")
    p.add_argument("--out", default=OUT)
    args = p.parse_args()
    config = PRESETS["cluttered_digits"]
    config = replace(config, epochs=args.epochs or config.epochs)
    if args.pack:
        states = [load_file(path) for path in args.pack]
    else:
        torch.set_num_threads(1)
        states = [fit(replace(config, seed=seed), progress=False).model.state_dict() for seed in range(3)]
    packed = {f"seed{seed}.{k}": v.detach().cpu().half().contiguous() for seed, s in enumerate(states)
              for k, v in s.items()}
    meta = {"config": json.dumps(asdict(config)), "seeds": "0,1,2", "dtype": "float16"}
    save_file(packed, args.out, metadata=meta)
    print(f"wrote {args.out}: {len(packed)} tensors")


if __name__ == "__main__":
    main()
