"""vitedu.models: ``create_model`` builds a registered name with overrides on top, with or without the shipped
trained weights, and explains the names and weights it does not have; ``list_models`` lists the names. The
registry itself is in test_registry.py, the shipped weights' accuracy in test_shipped.py."""

from __future__ import annotations

import pytest
import torch

import vitedu
from vitedu import registry
from vitedu.models import MODEL_CONFIGS, VARIANT_CONFIGS, create_model, list_models
from vitedu.shipped import SHIPPED_WEIGHTS


@pytest.mark.parametrize("name", ["vit_digits_patch4_8", "deit_digits_patch2_8", "cait_cluttered_digits",
                                  "convit_digits_patch2_8", "vit_cifar_patch4_32"])
def test_create_model_builds_the_entry_with_overrides_on_top(name):
    entry = registry.MODELS[name]
    model = create_model(name, num_classes=3)
    assert type(model) is entry.model_class and model.num_classes == 3
    assert registry.model_kwargs(name, {"num_classes": 3}) == {**entry.kwargs, "num_classes": 3}
    assert model.pretrained_cfg["label_names"] is None  # ten digit names do not fit three classes


def test_unknown_names_are_refused_with_the_list():
    with pytest.raises(ValueError, match="unknown model 'vit_nonexistent'.*vit_cluttered_digits"):
        create_model("vit_nonexistent")
    with pytest.raises(ValueError, match="unknown model"):
        registry.get_entry(None)
    with pytest.raises(ValueError, match="no trained weights are shipped.*vit_cluttered_digits"):
        create_model("vit_digits_patch4_8", pretrained=True)


def test_unknown_model_lists_the_names():
    with pytest.raises(ValueError, match="unknown model 'vit_gigantic'.*vit_base_patch16_224.*vit_tiny"):
        create_model("vit_gigantic")


def test_pretrained_without_shipped_weights_explains():
    with pytest.raises(ValueError, match="no trained weights are shipped.*vit_cluttered_digits"):
        vitedu.create_model("vit_tiny_patch16_224", pretrained=True)
    with pytest.raises(ValueError, match="does not match"):  # an architecture change cannot take the weights
        vitedu.create_model("vit_cluttered_digits", pretrained=True, depth=2)


def test_list_models_is_the_registry_sorted_and_a_fresh_list():
    names = list_models()
    assert names == sorted(registry.MODELS) and len(names) == len(set(names))
    assert {"vit_digits_patch2_8", "vit_cluttered_digits", "vit_base_patch16_224", "cait_xxs24_224"} <= set(names)
    names.clear()  # the caller's copy: the next call lists them all again
    assert list_models() == sorted(registry.MODELS)


def test_the_config_views_are_the_plain_vits_and_the_rest():
    assert all(registry.MODELS[name].model_class is vitedu.VisionTransformer for name in MODEL_CONFIGS)
    assert VARIANT_CONFIGS["cait_xxs24_224"] == (registry.MODELS["cait_xxs24_224"].model_class,
                                                 registry.MODELS["cait_xxs24_224"].kwargs)
    assert set(SHIPPED_WEIGHTS) <= set(MODEL_CONFIGS)


def test_overrides_build_a_new_model_and_leave_the_registry_as_it_was():
    before = dict(registry.MODELS["vit_digits_patch2_8"].kwargs)
    model = create_model("vit_digits_patch2_8", depth=1, embed_dim=32)
    assert len(model.blocks) == 1 and model.embed_dim == 32
    assert registry.MODELS["vit_digits_patch2_8"].kwargs == before
    assert len(create_model("vit_digits_patch2_8").blocks) == before["depth"]


def test_every_model_carries_the_registry_cfg_for_the_model_as_built():
    """Random weights: the entry's input size, normalisation and classes, marked untrained; an override that
    changes the input (three channels for a one-channel entry) makes the entry's statistics unknown, not wrong."""
    cfg = create_model("vit_digits_patch2_8").pretrained_cfg
    assert cfg["input_size"] == (1, 8, 8) and cfg["trained"] is False and cfg["num_classes"] == 10
    assert cfg["mean"] == registry.MODELS["vit_digits_patch2_8"].mean
    assert cfg["source"] == "vitedu.registry.MODELS['vit_digits_patch2_8'] (the registry entry)"
    rgb = create_model("vit_digits_patch2_8", in_chans=3, img_size=16).pretrained_cfg
    assert rgb["input_size"] == (3, 16, 16) and rgb["mean"] is None and rgb["std"] is None
    assert "3 input channels, the entry's data has 1" in rgb["source"]


def test_pretrained_loads_the_shipped_weights_and_marks_them_trained():
    model = create_model("vit_cluttered_digits", pretrained=True)
    state = vitedu.shipped.load_shipped_weights("vit_cluttered_digits")
    assert all(torch.equal(model.state_dict()[k], v) for k, v in state.items())
    assert model.pretrained_cfg["trained"] is True and model.pretrained_cfg["input_size"] == (1, 32, 32)
    tuned = create_model("vit_cluttered_digits", pretrained=True, drop_path_rate=0.2)  # training options are fine
    assert torch.equal(tuned.pos_embed, model.pos_embed)


def test_pretrained_with_an_unknown_name_says_the_name_is_unknown():
    """The name is checked first: a typo is named as such, not as a model without shipped weights."""
    with pytest.raises(ValueError, match="unknown model 'vit_cluttered_digit'; available models:"):
        create_model("vit_cluttered_digit", pretrained=True)
    with pytest.raises(ValueError, match="Use pretrained=False for a randomly initialised 'vit_tiny_patch16_224', "
                                         r"or vitedu.from_pretrained\(...\)"):
        create_model("vit_tiny_patch16_224", pretrained=True)
