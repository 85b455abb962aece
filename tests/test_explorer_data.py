"""The attention explorer's data (book/_static/explorer/explorer_data.js) is what vitedu computes.

tools/make_explorer_data.py precomputes, from the shipped weights, the attention of every layer and
head and the attention rollout of `vit_cluttered_digits` (trained, and untrained with the recipe's
initialisation) on a few test canvases. Here a few entries of the committed file are recomputed with
`vitedu` (`model.attention_maps`, `vitedu.interpret.attention_rollout` and `cls_attention`) from
whatever weights are shipped now: after new weights land, re-run the tool, or this test fails.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

import vitedu
from vitedu.interpret import attention_rollout, cls_attention

ROOT = Path(__file__).resolve().parents[1]
TOOL = ROOT / "tools" / "make_explorer_data.py"
TOLERANCE = 0.5e-3 + 1e-6  # the file stores thousandths: rounding moves a weight by at most half of one


def _load_tool():
    spec = importlib.util.spec_from_file_location("make_explorer_data", TOOL)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


tool = _load_tool()


@pytest.fixture(scope="module")
def data() -> dict:
    assert tool.OUT.is_file(), "no explorer data: run python tools/make_explorer_data.py"
    return tool.read_data(tool.OUT)


@pytest.fixture(scope="module")
def recomputed(data):
    """Canvases, attention maps and rollouts recomputed with vitedu for three of the stored canvases."""
    images, labels, _ = vitedu.data.load_cluttered_digits("test")
    stored = data["canvases"][::4]  # 3 of 10: first, middle, last
    index = [canvas["index"] for canvas in stored]
    x = (images[index] - vitedu.cluttered.CLUTTERED_MEAN[0]) / vitedu.cluttered.CLUTTERED_STD[0]
    trained = vitedu.create_model("vit_cluttered_digits", pretrained=True).eval()
    vitedu.seed_everything(0)
    kwargs = vitedu.train.PRESETS["cluttered_digits"].model_kwargs
    untrained = vitedu.create_model("vit_cluttered_digits", **kwargs).eval()
    with torch.no_grad():
        maps = {"trained": trained.attention_maps(x), "untrained": untrained.attention_maps(x)}
    return stored, images[index], labels[index], maps


def _decoded(data: dict, text: str) -> torch.Tensor:
    return torch.tensor(tool.decode(text), dtype=torch.float64) / data["scale"]


def test_codec_round_trips() -> None:
    numbers = [0, 1, 63, 64, 999, 1000, 4095]
    assert tool.decode(tool.encode(numbers)) == numbers
    assert tool.encode([0, 1000]) == "AAPo"


def test_the_file_is_small_and_loads_without_fetch() -> None:
    text = tool.OUT.read_text()
    assert text.lstrip("/ \n").startswith(("Generated", "window.")) and f"window.{tool.GLOBAL} = {{" in text
    assert tool.OUT.stat().st_size < 4 * 2**20, "the explorer's data should stay a few MB at most"


def test_shapes_canvases_and_labels(data, recomputed) -> None:
    stored, images, labels, _ = recomputed
    assert 8 <= len(data["canvases"]) <= 16
    assert len({c["label"] for c in data["canvases"]}) == 10, "every digit should be there"
    tokens, depth, heads = data["tokens"], data["depth"], data["heads"]
    assert tokens == 1 + data["grid"] ** 2
    for canvas, image, label in zip(stored, images, labels):
        assert canvas["label"] == int(label)
        pixels = torch.tensor(tool.decode(canvas["pixels"]), dtype=torch.float32).reshape(image.shape[-2:])
        assert torch.equal(pixels, (image[0] * 255).round())
        for name in ("trained", "untrained"):
            assert len(canvas[name]["attention"]) == 2 * depth * heads * tokens * tokens
            assert len(canvas[name]["rollout"]) == 2 * tokens * tokens


@pytest.mark.parametrize("name", ["trained", "untrained"])
def test_attention_matches_vitedu(data, recomputed, name) -> None:
    stored, _, _, maps = recomputed
    shape = (data["depth"], data["heads"], data["tokens"], data["tokens"])
    for k, canvas in enumerate(stored):
        attention = _decoded(data, canvas[name]["attention"]).reshape(shape)
        expected = maps[name][:, k].double()  # (depth, heads, tokens, tokens)
        assert (attention - expected).abs().max() <= TOLERANCE
        # the [CLS] row of the last layer, as vitedu.interpret.cls_attention reads it
        ours = cls_attention(attention[-1])
        assert (ours - cls_attention(expected[-1])).abs().max() <= 2 * TOLERANCE * data["tokens"]


@pytest.mark.parametrize("name", ["trained", "untrained"])
def test_rollout_matches_vitedu(data, recomputed, name) -> None:
    stored, _, _, maps = recomputed
    tokens = data["tokens"]
    rollout = attention_rollout(maps[name]).double()  # (batch, tokens, tokens)
    for k, canvas in enumerate(stored):
        ours = _decoded(data, canvas[name]["rollout"]).reshape(tokens, tokens)
        assert (ours - rollout[k]).abs().max() <= TOLERANCE


def test_trained_and_untrained_differ(data) -> None:
    # Guards against writing one model twice: the untrained model's maps are not the trained ones.
    canvas = data["canvases"][0]
    assert canvas["trained"]["attention"] != canvas["untrained"]["attention"]
