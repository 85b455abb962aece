"""Chapter 10's shipped masked autoencoder: the encoder in the registry, the decoder beside it."""

from __future__ import annotations

import json

import pytest
import torch
from tools_loader import load_tool

import vitedu
from vitedu import cluttered as C
from vitedu import mae_pretrain
from vitedu.constants import CLUTTERED_MEAN, CLUTTERED_STD
from vitedu.mae import MaskedAutoencoder, mae_sincos_pos_embed_2d
from vitedu.shipped import load_shipped_weights, shipped_metadata
from vitedu.shipped_mae import load_shipped_mae

NAME = "vit_cluttered_digits_mae"
mae_tool = load_tool("pretrain_mae")


def _val_canvases(n: int) -> torch.Tensor:
    images, _, _ = C.load_cluttered_digits("val")  # the fixed val canvases, the digit at any pixel
    return (images[:n] - CLUTTERED_MEAN[0]) / CLUTTERED_STD[0]


def test_the_registry_gives_the_encoder_alone_with_tokens_out():
    assert "mae" in NAME and NAME in vitedu.list_models()
    encoder = vitedu.create_model(NAME, pretrained=True).eval()
    meta = shipped_metadata(NAME)
    assert encoder.num_classes == 0
    assert json.loads(meta["model_kwargs"]) == vitedu.registry.MODELS[NAME].kwargs  # made for this entry
    with torch.no_grad():
        tokens = encoder.forward_features(_val_canvases(3))
    assert tokens.shape == (3, 1 + 64, 64)  # (batch, [CLS] + 8x8 patches, dim)
    fresh = vitedu.create_model(NAME)
    assert not torch.equal(encoder.blocks[0].attn.qkv.weight, fresh.blocks[0].attn.qkv.weight)
    assert torch.equal(encoder.pos_embed, mae_sincos_pos_embed_2d(64, (8, 8)))  # MAE's fixed table, not learned


def test_the_whole_mae_loads_with_the_same_encoder_and_reconstructs():
    model = load_shipped_mae()
    assert isinstance(model, MaskedAutoencoder) and not model.training
    encoder = vitedu.create_model(NAME, pretrained=True).eval()
    images = _val_canvases(200)
    with torch.no_grad():
        assert torch.equal(model.encoder.forward_features(images[:4]), encoder.forward_features(images[:4]))
        loss, pred, mask = model(images, 0.75, torch.Generator().manual_seed(0))
        zeros = model.forward_loss(images, torch.zeros_like(pred), mask)  # predicting the mean of every patch
    assert loss < 0.85 * zeros
    assert float(shipped_metadata(NAME)["val_recon_loss"]) < 0.85 * zeros


def test_a_name_without_a_decoder_is_explained():
    with pytest.raises(ValueError, match="not a masked autoencoder's.*vit_cluttered_digits_mae.*create_model"):
        load_shipped_mae("vit_cluttered_digits")
    with pytest.raises(ValueError, match="no trained weights are shipped"):
        load_shipped_mae("vit_tiny_patch16_224")


def test_the_file_says_how_it_was_made():
    meta = shipped_metadata(NAME)
    config = json.loads(meta["config"])
    assert config["position_step"] == 1 and int(meta["epochs_done"]) == config["epochs"]  # finished, digit anywhere
    assert set(load_shipped_weights(NAME)) == set(vitedu.create_model(NAME).state_dict())
    probe = json.loads(meta["probe_test_acc"])
    assert meta["probe_n_labelled"] == "1000" and len(probe["mae"]) == len(probe["random"]) == 3


@pytest.mark.slow
def test_the_stated_probe_accuracy_is_remeasured():
    """The file's claim (a linear probe on 1,000 labelled canvases, chosen on val, test once), seed 0, re-run."""
    torch.set_num_threads(min(2, torch.get_num_threads()))
    stated = json.loads(shipped_metadata(NAME)["probe_test_acc"])["mae"][0]
    result = mae_tool.linear_probe(vitedu.create_model(NAME, pretrained=True), 1000, seed=0)
    assert result["test_acc"] == pytest.approx(stated, abs=1e-3)


def test_the_recorded_recipe_rebuilds_the_shipped_architecture():
    """Chapter 10's GPU switch pre-trains MAEConfig(**the file's config): it must build the MAE the files hold."""
    recipe = json.loads(shipped_metadata(NAME)["config"])
    config = mae_pretrain.MAEConfig(**{**recipe, "betas": tuple(recipe["betas"])})
    assert (config.epochs, config.mask_ratio, config.base_lr) == (200, 0.75, 1.5e-3)
    model = mae_pretrain.build_mae(config)
    assert mae_pretrain.mae_kwargs(config) == json.loads(shipped_metadata(NAME)["mae_kwargs"])
    shipped = load_shipped_mae()
    model.load_state_dict(shipped.state_dict())  # strict: every key and shape
    images = _val_canvases(4)
    with torch.no_grad():
        assert torch.equal(model.eval()(images, 0.75, torch.Generator().manual_seed(1))[0],
                           shipped(images, 0.75, torch.Generator().manual_seed(1))[0])


@pytest.mark.parametrize("meta", [{"decoder": "x.safetensors"}, {"mae_kwargs": "{}"}])
def test_a_file_with_half_an_mae_is_refused(monkeypatch, meta):
    monkeypatch.setattr(vitedu.shipped_mae, "shipped_metadata", lambda name: meta)  # a decoder, or the kwargs, alone
    with pytest.raises(ValueError, match="not a masked autoencoder's"):
        load_shipped_mae(NAME)


def test_weights_that_do_not_fit_name_the_shipped_mae(monkeypatch):
    state = load_shipped_weights(NAME)
    state.pop("norm.weight")
    monkeypatch.setattr(vitedu.shipped_mae, "load_shipped_weights", lambda name: state)
    with pytest.raises(ValueError, match=r"does not match the shipped MAE 'vit_cluttered_digits_mae' and its decoder"):
        load_shipped_mae(NAME)
