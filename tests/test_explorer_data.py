"""The attention explorer's data (book/_static/explorer/explorer_data.js) is what vitedu ships.

tools/make_explorer_data.py writes the weights the page runs (the shipped trained model exactly, the
recipe's untrained initialisation as float16) and a few test canvases (the first of each digit and
the first ones the model gets wrong). Here the committed file is compared with whatever vitedu ships
now: after new weights land, re-run the tool, or this test fails. That the page's JavaScript forward
pass computes vitedu's logits from these weights is tests/test_explorer_browser.py's job.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

import vitedu

ROOT = Path(__file__).resolve().parents[1]
TOOL = ROOT / "tools" / "make_explorer_data.py"
OLD_SIZE = 2_895_819  # bytes: the file when it stored precomputed attention maps (what the page no longer needs)


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
def nets():
    return tool.models()


@pytest.fixture(scope="module")
def test_set():
    return vitedu.cluttered.load_cluttered_digits("test")


def test_pixel_codec_round_trips() -> None:
    image = torch.arange(17, dtype=torch.float32).repeat(4)[:64].view(1, 8, 8) / 16
    assert tool.decode_pixels(tool.encode_pixels(image)).view(1, 8, 8).equal(image)
    with pytest.raises(ValueError, match="sixteenths"):
        tool.encode_pixels(torch.full((1, 2, 2), 0.3))


def test_the_file_is_small_and_loads_without_fetch() -> None:
    text = tool.OUT.read_text()
    assert text.lstrip("/ \n").startswith(("Generated", "window.")) and f"window.{tool.GLOBAL} = {{" in text
    size = tool.OUT.stat().st_size
    assert size < 1.2 * 2**20, f"the explorer's data is {size / 2**20:.2f} MiB; it was 2.8 MiB before weights"
    assert size < OLD_SIZE / 2


def test_config_is_the_models(data, nets) -> None:
    trained = nets["trained"]
    assert data["config"] == tool.config(trained)
    assert data["config"]["norm_eps"] == trained.norm.eps == 1e-6
    assert data["config"]["mean"] == list(trained.pretrained_cfg["mean"])
    assert data["parameters"] == sum(p.numel() for p in trained.parameters())
    assert [key for key, _ in data["tensors"]] == list(trained.state_dict())


def test_trained_weights_are_the_shipped_ones_exactly(data, nets) -> None:
    stored = tool.unpack(data, "trained")
    shipped = nets["trained"].state_dict()
    assert data["weights"]["trained"]["dtype"] == "float32"
    for key, tensor in shipped.items():
        assert torch.equal(stored[key], tensor), key


def test_untrained_weights_are_the_recipes_initialisation_in_float16(data, nets) -> None:
    stored = tool.unpack(data, "untrained")
    init = nets["untrained"].state_dict()
    assert data["weights"]["untrained"]["dtype"] == "float16"
    # The initialisation's last float32 bits depend on the CPU's kernels (the file was written with AVX2 ones;
    # with ATen's generic kernels 39 of the 140,000 values round to the neighbouring float16): every value is
    # the rounded initialisation or one float16 step from it, and almost all are exactly it.
    for key, tensor in init.items():
        rounded = tensor.half()
        step = (torch.nextafter(rounded, torch.full_like(rounded, float("inf"))).float() - rounded.float()).abs()
        assert ((stored[key] - rounded.float()).abs() <= step).all(), key
        assert (stored[key] != rounded.float()).float().mean() < 1e-3, key
    # guards against writing one model twice
    assert not torch.equal(stored["blocks.0.attn.qkv.weight"], tool.unpack(data, "trained")["blocks.0.attn.qkv.weight"])


def test_canvases_are_test_canvases_chosen_by_the_rule(data, nets, test_set) -> None:
    images, labels, boxes = test_set
    trained = nets["trained"]
    with torch.no_grad():
        predictions = trained(tool.normalise(images, trained)).argmax(dim=-1)
    chosen = [c["index"] for c in data["canvases"]]
    assert chosen == tool.pick_canvases(labels, predictions)
    assert {c["label"] for c in data["canvases"]} == set(range(10)), "every digit should be there"
    assert data["test"] == {"canvases": len(labels), "wrong": int((predictions != labels).sum())}
    for canvas in data["canvases"]:
        i = canvas["index"]
        assert canvas["label"] == int(labels[i]) and canvas["box"] == boxes[i].tolist()
        assert tool.decode_pixels(canvas["pixels"]).view(images[i].shape).equal(images[i])
        assert canvas["mistake"] == bool(predictions[i] != labels[i])
        assert canvas["trained"]["prediction"] == int(predictions[i])


def test_at_least_one_canvas_is_a_mistake_the_first_ones_in_order(data, test_set) -> None:
    _, labels, _ = test_set
    mistakes = [c for c in data["canvases"] if c["mistake"]]
    assert len(mistakes) == tool.NUM_MISTAKES
    for canvas in mistakes:
        assert canvas["trained"]["prediction"] != canvas["label"]
    # honest choice: no mistake earlier in the test set was left out
    indices = [c["index"] for c in mistakes]
    assert indices == sorted(indices)


def test_the_pages_size_numbers_are_chapter_8s_measurement():
    """The draw pad's paragraph on what the model has not learned quotes chapter 8's stored measurement of the
    shipped model on digits of 6, 8, 10 and 12 pixels (400 canvases each); a new run of the chapter must not
    leave the page quoting old numbers."""
    import json
    import re

    cells = json.loads((ROOT / "notebooks" / "08_inside_a_vit.ipynb").read_text())["cells"]
    printed = "".join("".join(out.get("text", "")) for cell in cells if cell["cell_type"] == "code"
                      for out in cell.get("outputs", []))
    sizes = re.search(r"by the digit's side: \(6, 8, 10, 12\) pixels\n\s+shipped ViT, anywhere\s+([\d. ]+)\n", printed)
    assert sizes, "chapter 8 no longer prints the shipped model's accuracy by digit size"
    at6, at8, at10, at12 = sizes[1].split()
    assert "size_accuracy(trained, s, 400, 1)" in "".join("".join(c["source"]) for c in cells)
    page = " ".join((ROOT / "book" / "explorer.md").read_text().split())
    quoted = f"it reads {at8} % of 400 test canvases right at 8 pixels, {at10} % at 10, {at6} % at 6 and {at12} % at 12"
    assert quoted in page, f"book/explorer.md should say: {quoted}"
