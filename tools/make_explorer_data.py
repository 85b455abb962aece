"""Precompute the data of the attention explorer (book/explorer.md) from the shipped weights.

    python tools/make_explorer_data.py       # -> book/_static/explorer/explorer_data.js

For a few test canvases of cluttered digits, the attention of the shipped `vit_cluttered_digits`
(trained) and of the same architecture before training (the recipe's initialisation after
`vitedu.seed_everything(0)`) in every layer and head, and their attention rollout
(`vitedu.interpret.attention_rollout`). Re-run it whenever the shipped weights change:
tests/test_explorer_data.py recomputes entries of the file from whatever weights are shipped.

The file is plain JavaScript that sets one global (`window.VITEDU_EXPLORER`), so the page works
from file:// (no fetch). Weights are stored as integers in thousandths: a weight w is
round(1000 * w), the three decimals the page shows, written as two characters of a 64-letter
alphabet (`CODE`): 0 is "AA", 1000 is "Po". That keeps the file under 3 MB for 10 canvases.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

import vitedu
import vitedu.data
import vitedu.train
from vitedu import cluttered
from vitedu.interpret import attention_rollout

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "book" / "_static" / "explorer" / "explorer_data.js"
MODEL = "vit_cluttered_digits"
RECIPE = "cluttered_digits"
NUM_CANVASES = 10  # the first test canvas of each digit
SCALE = 1000  # weights stored as round(SCALE * w)
GLOBAL = "VITEDU_EXPLORER"
CODE = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"


def pick_canvases(labels: torch.Tensor, n: int = NUM_CANVASES) -> list[int]:
    """The first test canvas of each digit, then the next ones in order, n in all (sorted)."""
    first = [int((labels == d).nonzero()[0]) for d in range(10)]
    rest = [i for i in range(len(labels)) if i not in first]
    return sorted((first + rest)[:n])


def models() -> dict[str, torch.nn.Module]:
    """The shipped model and the untrained one (the recipe's initialisation, seed 0)."""
    trained = vitedu.create_model(MODEL, pretrained=True).eval()
    vitedu.seed_everything(0)
    kwargs = vitedu.train.PRESETS[RECIPE].model_kwargs
    untrained = vitedu.create_model(MODEL, **kwargs).eval()
    return {"trained": trained, "untrained": untrained}


def normalise(images: torch.Tensor) -> torch.Tensor:
    """As chapter 8: the training mean and std of the cluttered canvases."""
    mean, std = cluttered.CLUTTERED_MEAN[0], cluttered.CLUTTERED_STD[0]
    return (images - mean) / std


@torch.no_grad()
def attention_and_rollout(model, images):
    """(depth, batch, heads, T, T) attention maps and (batch, T, T) rollout."""
    maps = model.attention_maps(normalise(images))
    return maps, attention_rollout(maps)


def encode(numbers: list[int]) -> str:
    """Integers 0 ... 4095 -> two characters each (see CODE)."""
    return "".join(CODE[n // 64] + CODE[n % 64] for n in numbers)


def decode(text: str) -> list[int]:
    index = {c: i for i, c in enumerate(CODE)}
    return [index[a] * 64 + index[b] for a, b in zip(text[::2], text[1::2])]


def quantise(values: torch.Tensor) -> str:
    """Weights in [0, 1] -> the encoded thousandths, flattened row by row."""
    return encode((values * SCALE).round().to(torch.int64).flatten().tolist())


@torch.no_grad()
def explorer_data() -> dict:
    images, labels, boxes = vitedu.data.load_cluttered_digits("test")
    chosen = pick_canvases(labels)
    picked = images[chosen]
    nets = models()
    trained = nets["trained"]
    data = {
        "model": MODEL,
        "split": "test",
        "scale": SCALE,
        "code": CODE,
        "img_size": int(picked.shape[-1]),
        "patch_size": int(trained.patch_embed.patch_size[0]),
        "grid": int(trained.patch_embed.grid_size[0]),
        "depth": len(trained.blocks),
        "heads": int(trained.blocks[0].attn.num_heads),
        "tokens": int(trained.pos_embed.shape[1]),
        "canvases": [],
    }
    per_model = {}
    for name, net in nets.items():
        maps, rollout = attention_and_rollout(net, picked)
        probs = net(normalise(picked)).softmax(dim=-1)
        per_model[name] = maps, rollout, probs
    for k, index in enumerate(chosen):
        canvas = {
            "index": index,
            "label": int(labels[index]),
            "box": [int(v) for v in boxes[index]],
            # grey levels 0-255 of the canvas, row by row, encoded
            "pixels": encode((picked[k, 0] * 255).round().to(torch.int64).flatten().tolist()),
        }
        for name, (maps, rollout, probs) in per_model.items():
            canvas[name] = {
                "prediction": int(probs[k].argmax()),
                "confidence": round(float(probs[k].max()), 3),
                # (depth, heads, queries, keys), encoded (see CODE)
                "attention": quantise(maps[:, k]),
                # (queries, keys), encoded
                "rollout": quantise(rollout[k]),
            }
        data["canvases"].append(canvas)
    return data


def read_data(path: Path = OUT) -> dict:
    """The data of a written file (for the tests)."""
    text = path.read_text()
    start, end = text.index("{"), text.rindex("}") + 1
    return json.loads(text[start:end])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)  # small: one thread is enough, and fair on shared CPUs
    data = explorer_data()
    body = json.dumps(data, separators=(",", ":"))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        "// Generated by tools/make_explorer_data.py from the shipped weights: do not edit.\n"
        f"window.{GLOBAL} = {body};\n"
    )
    size = args.out.stat().st_size / 2**20
    print(f"wrote {args.out.relative_to(ROOT)} ({size:.2f} MiB, {len(data['canvases'])} canvases)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
