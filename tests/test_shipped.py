"""Trained weights shipped inside vitedu: create_model(name, pretrained=True)."""

from __future__ import annotations

import json

import pytest
import torch

import vitedu
from vitedu import cluttered as C
from vitedu.models import MODEL_CONFIGS, SHIPPED_WEIGHTS, load_shipped_weights, shipped_metadata


def test_every_shipped_name_is_a_registered_model_and_file_is_small():
    from importlib import resources

    for name, filename in SHIPPED_WEIGHTS.items():
        assert name in MODEL_CONFIGS
        path = resources.files("vitedu").joinpath("assets", filename)
        assert path.is_file() and len(path.read_bytes()) < 4_000_000  # a few MB at most, shipped in the wheel


def test_shipped_weights_load_into_the_registered_architecture():
    model = vitedu.create_model("vit_cluttered_digits", pretrained=True)
    fresh = vitedu.create_model("vit_cluttered_digits")
    state = load_shipped_weights("vit_cluttered_digits")
    assert {k: v.shape for k, v in state.items()} == {k: v.shape for k, v in fresh.state_dict().items()}
    assert all(torch.equal(model.state_dict()[k], v) for k, v in state.items())  # the weights, not a fresh init
    assert not torch.equal(model.pos_embed, fresh.pos_embed)
    meta = shipped_metadata("vit_cluttered_digits")
    assert meta["model"] == "vit_cluttered_digits" and json.loads(meta["config"])["dataset"] == "cluttered_digits"


def _shipped_test_accuracy() -> float:
    torch.set_num_threads(min(2, torch.get_num_threads()))
    model = vitedu.create_model("vit_cluttered_digits", pretrained=True).eval()
    images, labels, _ = C.load_cluttered_digits("test")  # (2000, 1, 32, 32), the fixed test canvases
    x = (images - C.CLUTTERED_MEAN[0]) / C.CLUTTERED_STD[0]
    with torch.no_grad():
        acc = (torch.cat([model(b).argmax(-1) for b in x.split(500)]) == labels).float().mean().item()
    return acc


@pytest.mark.slow
def test_shipped_model_reaches_its_stated_test_accuracy():
    stated = float(shipped_metadata("vit_cluttered_digits")["test_acc"])
    assert _shipped_test_accuracy() == pytest.approx(stated, abs=1e-3)  # the file's own claim, re-measured


@pytest.mark.slow
def test_shipped_model_reaches_the_issue_target():
    # issue 31: at least 98.5 % on the fixed test canvases, with the digit at any pixel
    assert C.POSITION_STEP == 1 and json.loads(shipped_metadata("vit_cluttered_digits")["config"])["position_step"] == 1
    assert _shipped_test_accuracy() >= 0.985


@pytest.mark.slow
def test_shipped_model_reads_the_digit_at_every_sub_patch_offset():
    # issue 31: no sub-patch shift of the digit below 97 % (1,000 test canvases an offset, a canvas seed no
    # training or choice used, as benchmarks/shift.py draws them)
    from vitedu.shift import offset_accuracy

    torch.set_num_threads(min(2, torch.get_num_threads()))
    model = vitedu.create_model("vit_cluttered_digits", pretrained=True)
    assert offset_accuracy(model, patch_size=4, split="test", seed=11).min().item() >= 0.97


def test_seed_packs_load_every_seed_with_its_recipe():
    """vitedu.pretrained.load_seed_pack: the packs chapter 8 reads on Colab (package data, not benchmarks/)."""
    from vitedu.cnn import ConvTeacher
    from vitedu.pretrained import load_seed_pack

    def vit(config):
        return vitedu.create_model(config["model"], **config["model_kwargs"])

    models, meta = load_seed_pack("vit_cluttered_digits_3_seeds.safetensors", vit)
    assert meta["seeds"] == [1, 2, 3] and meta["config"]["position_step"] == 1 and len(models) == 3
    # the shipped model is a fourth seed (7) of the same recipe: the pack's recipe but for the seed, other weights
    shipped = vitedu.create_model("vit_cluttered_digits", pretrained=True)
    shipped_config = json.loads(shipped_metadata("vit_cluttered_digits")["config"])
    assert shipped_config == {**meta["config"], "seed": 7} and meta["config"]["seed"] == 1
    assert all(not torch.allclose(m.pos_embed, shipped.pos_embed, atol=1e-2) for m in models)
    assert not torch.equal(models[0].pos_embed, models[1].pos_embed)  # different runs, not one copied
    assert all(not m.training for m in models)
    cnns, meta = load_seed_pack("cnn_grid_3_seeds.safetensors", lambda config: ConvTeacher(1, 10))
    assert meta["seeds"] == [0, 1, 2] and len(cnns) == 3
    with pytest.raises(ValueError, match="no seed pack"):
        load_seed_pack("nothing.safetensors", vit)
    with pytest.raises(ValueError, match="not a seed pack"):
        load_seed_pack("vit_cluttered_digits.safetensors", vit)


@pytest.mark.slow
@pytest.mark.parametrize("pack", ["vit_cluttered_digits_3_seeds.safetensors",
                                  "vit_anywhere_noteacher_3_seeds.safetensors"])
def test_seed_packs_reach_their_recorded_test_accuracy(pack):
    """tools/seed_weights.py records each seed's test accuracy in the pack (read once, after the recipe was chosen
    on val); re-measured on the stored float16 weights it agrees to within a few canvases of 2,000."""
    from vitedu.pretrained import load_seed_pack

    models, meta = load_seed_pack(pack, lambda c: vitedu.create_model(c["model"], **c["model_kwargs"]))
    images, labels, _ = C.load_cluttered_digits("test", position_step=meta["config"]["position_step"])
    x = (images - C.CLUTTERED_MEAN[0]) / C.CLUTTERED_STD[0]
    stated = [float(a) for a in meta["test_acc"].split(",")]
    assert len(stated) == len(models) == 3 and min(stated) >= 0.985
    for model, acc in zip(models, stated):
        with torch.no_grad():
            found = (torch.cat([model(b).argmax(-1) for b in x.split(500)]) == labels).float().mean().item()
        assert found == pytest.approx(acc, abs=2e-3)
