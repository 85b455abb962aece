"""Write the data of the attention explorer (book/explorer.md): the shipped weights and a few canvases.

    python tools/make_explorer_data.py       # -> book/_static/explorer/explorer_data.js

The page computes everything it shows (predictions, the attention of every layer and head, the
rollout) with its own forward pass of the ViT in plain JavaScript (book/_static/explorer/vit.js),
from the weights in this file:
- **trained**: the weights shipped with the package, `vitedu.create_model("vit_cluttered_digits",
  pretrained=True)`, stored exactly (float32, little-endian, base64), so that the page's logits
  equal vitedu's (tests/test_explorer_browser.py checks them to 1e-4 in headless Chromium);
- **untrained**: the recipe's initialisation (`vitedu.seed_everything(0)`, then the model with
  `PRESETS["cluttered_digits"].model_kwargs`), stored as float16: random weights need no more digits
  (the page says so; the test measures how far its maps are from vitedu's float32 ones).
The canvases are the first test canvas of each digit and the first `NUM_MISTAKES` test canvases
(in the test set's order) that the trained model gets wrong, each pixel stored as its level 0-16
(the canvases are made of 8x8 digits whose pixels are sixteenths, so this is exact).

The file is plain JavaScript that sets one global (`window.VITEDU_EXPLORER`), so the page works
from file:// (no fetch). Re-run it whenever the shipped weights change: tests/test_explorer_data.py
compares the file with whatever weights are shipped.
"""

from __future__ import annotations

import argparse
import base64
import json
from pathlib import Path

import numpy as np
import torch
from torch import nn

import vitedu
import vitedu.cluttered
import vitedu.config
from vitedu.digits import DIGITS_MAX
from vitedu.vit import VisionTransformer

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "book" / "_static" / "explorer" / "explorer_data.js"
MODEL = "vit_cluttered_digits"
RECIPE = "cluttered_digits"
NUM_MISTAKES = 3  # the first test canvases the trained model gets wrong, in the test set's order
GLOBAL = "VITEDU_EXPLORER"
LEVELS = "0123456789abcdefg"  # a pixel's level k in 0..16 (value k / 16) as one character
DTYPES = {"trained": np.float32, "untrained": np.float16}


def models() -> dict[str, VisionTransformer]:
    """The shipped model and the untrained one (the recipe's initialisation, seed 0)."""
    trained = vitedu.create_model(MODEL, pretrained=True).eval()
    vitedu.seed_everything(0)
    kwargs = vitedu.config.PRESETS[RECIPE].model_kwargs
    untrained = vitedu.create_model(MODEL, **kwargs).eval()
    return {"trained": trained, "untrained": untrained}


def check_architecture(model: nn.Module) -> None:
    """Fail loudly if the model stops being what vit.js computes: a [CLS]-pooled pre-norm ViT with exact
    (erf) GELU, one fused qkv Linear with bias, no LayerScale, no fc_norm."""
    problems = []
    if not isinstance(model, VisionTransformer) or model.pool != "cls":
        problems.append("not a VisionTransformer with pool='cls'")
    if not isinstance(model.fc_norm, nn.Identity):
        problems.append("an fc_norm")
    for i, block in enumerate(model.blocks):
        if not (isinstance(block.ls1, nn.Identity) and isinstance(block.ls2, nn.Identity)):
            problems.append(f"LayerScale in block {i}")
        if not isinstance(block.mlp.act, nn.GELU) or block.mlp.act.approximate != "none":
            problems.append(f"block {i}'s activation is not the exact GELU")
        if block.attn.qkv.bias is None:
            problems.append(f"block {i} has no qkv bias")
        if {type(block.norm1), type(block.norm2)} != {nn.LayerNorm} or block.norm1.eps != model.norm.eps:
            problems.append(f"block {i}'s norms differ from the final norm")
    if problems:
        raise ValueError(f"book/_static/explorer/vit.js does not compute this model: {'; '.join(problems)}")


def config(model: VisionTransformer) -> dict:
    """What vit.js needs to know besides the weights."""
    cfg = model.pretrained_cfg
    return {
        "img_size": int(model.patch_embed.img_size[0]),
        "patch_size": int(model.patch_embed.patch_size[0]),
        "in_chans": int(model.patch_embed.in_chans),
        "grid": int(model.patch_embed.grid_size[0]),
        "embed_dim": int(model.embed_dim),
        "depth": len(model.blocks),
        "heads": int(model.blocks[0].attn.num_heads),
        "mlp_hidden": int(model.blocks[0].mlp.fc1.out_features),
        "tokens": int(model.pos_embed.shape[1]),
        "num_classes": int(model.num_classes),
        "norm_eps": float(model.norm.eps),
        "mean": [float(m) for m in cfg["mean"]],
        "std": [float(s) for s in cfg["std"]],
        "label_names": list(cfg["label_names"]),
    }


def pack(model: nn.Module, dtype: type) -> str:
    """Every tensor of the state_dict, in its order, flattened row-major, as little-endian bytes in base64."""
    flat = np.concatenate([t.detach().cpu().numpy().ravel() for t in model.state_dict().values()])
    return base64.b64encode(flat.astype(np.dtype(dtype).newbyteorder("<")).tobytes()).decode("ascii")


def unpack(data: dict, name: str) -> dict[str, torch.Tensor]:
    """The inverse of :func:`pack`: the state_dict a data file stores for ``name`` (float32 tensors)."""
    entry = data["weights"][name]
    flat = np.frombuffer(base64.b64decode(entry["base64"]), dtype=np.dtype(entry["dtype"]).newbyteorder("<"))
    out, start = {}, 0
    for key, shape in data["tensors"]:
        size = int(np.prod(shape))
        out[key] = torch.from_numpy(flat[start : start + size].astype(np.float32).reshape(shape))
        start += size
    assert start == len(flat), f"{len(flat) - start} numbers left over"
    return out


def encode_pixels(image: torch.Tensor) -> str:
    """A (1, H, W) canvas with values k / 16 -> one character per pixel, row by row."""
    levels = (image * DIGITS_MAX).round().to(torch.int64)
    if not torch.equal(levels.float() / DIGITS_MAX, image):
        raise ValueError("the canvas has values that are not sixteenths")
    return "".join(LEVELS[k] for k in levels.flatten().tolist())


def decode_pixels(text: str) -> torch.Tensor:
    """The inverse of :func:`encode_pixels`, flattened: (H * W,) values in [0, 1]."""
    return torch.tensor([LEVELS.index(c) for c in text], dtype=torch.float32) / DIGITS_MAX


def normalise(images: torch.Tensor, model: nn.Module) -> torch.Tensor:
    """As the model's pretrained_cfg says (the training mean and std of the cluttered canvases)."""
    cfg = model.pretrained_cfg
    mean = torch.tensor(cfg["mean"]).view(1, -1, 1, 1)
    std = torch.tensor(cfg["std"]).view(1, -1, 1, 1)
    return (images - mean) / std


def pick_canvases(labels: torch.Tensor, predictions: torch.Tensor, mistakes: int = NUM_MISTAKES) -> list[int]:
    """The first test canvas of each digit, then the first ``mistakes`` canvases the model gets wrong."""
    first = [int((labels == d).nonzero()[0]) for d in range(10)]
    wrong = [int(i) for i in (predictions != labels).nonzero().flatten()[:mistakes]]
    return first + [i for i in wrong if i not in first]


@torch.no_grad()
def explorer_data() -> dict:
    images, labels, boxes = vitedu.cluttered.load_cluttered_digits("test")
    nets = models()
    trained = nets["trained"]
    for net in nets.values():
        check_architecture(net)
    predictions = trained(normalise(images, trained)).argmax(dim=-1)
    chosen = pick_canvases(labels, predictions)
    wrong = int((predictions != labels).sum())
    data = {
        "model": MODEL,
        "parameters": sum(p.numel() for p in trained.parameters()),
        "config": config(trained),
        "tensors": [[key, list(t.shape)] for key, t in trained.state_dict().items()],
        "weights": {name: {"dtype": np.dtype(DTYPES[name]).name, "base64": pack(net, DTYPES[name])}
                    for name, net in nets.items()},
        "test": {"canvases": len(labels), "wrong": wrong},
        "canvases": [],
    }
    probs = {name: net(normalise(images[chosen], net)).softmax(dim=-1) for name, net in nets.items()}
    for k, index in enumerate(chosen):
        canvas = {
            "index": index,
            "label": int(labels[index]),
            "box": [int(v) for v in boxes[index]],  # top, left, height, width
            "pixels": encode_pixels(images[index]),
            "mistake": bool(predictions[index] != labels[index]),
        }
        for name in nets:  # vitedu's answers, for the tests (the page computes its own)
            canvas[name] = {"prediction": int(probs[name][k].argmax()),
                            "probability": round(float(probs[name][k].max()), 4)}
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
    mistakes = sum(c["mistake"] for c in data["canvases"])
    print(f"wrote {args.out.relative_to(ROOT)} ({size:.2f} MiB, {len(data['canvases'])} canvases, "
          f"{mistakes} of them mistakes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
