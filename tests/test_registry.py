"""The one model registry (vitedu.registry.MODELS) and the views the rest of the package reads from it."""

import pytest

import vitedu
from vitedu import registry
from vitedu.models import MODEL_CONFIGS, VARIANT_CONFIGS, list_models
from vitedu.shipped import SHIPPED_WEIGHTS
from vitedu.timm_configs import TIMM_ARCHITECTURES, TIMM_VARIANTS, constructor_defaults, timm_kwargs
from vitedu.vit import VisionTransformer


def test_the_views_partition_the_registry_without_copying_it():
    assert set(MODEL_CONFIGS) | set(VARIANT_CONFIGS) == set(registry.MODELS) == set(list_models())
    assert not set(MODEL_CONFIGS) & set(VARIANT_CONFIGS)
    for name, kwargs in MODEL_CONFIGS.items():
        assert registry.MODELS[name].model_class is VisionTransformer and kwargs is registry.MODELS[name].kwargs
    for name, (cls, kwargs) in VARIANT_CONFIGS.items():
        assert cls is registry.MODELS[name].model_class and kwargs is registry.MODELS[name].kwargs
    assert set(TIMM_ARCHITECTURES) | set(TIMM_VARIANTS) == set(registry.timm_names())
    assert set(TIMM_ARCHITECTURES) <= set(MODEL_CONFIGS) and set(TIMM_VARIANTS) <= set(VARIANT_CONFIGS)
    assert SHIPPED_WEIGHTS == {"vit_cluttered_digits": "vit_cluttered_digits.safetensors",
                               "vit_cluttered_digits_mae": "vit_cluttered_digits_mae.safetensors"}
    assert registry.shipped_names() == ["vit_cluttered_digits", "vit_cluttered_digits_mae"]


@pytest.mark.parametrize("name", sorted(registry.MODELS))
def test_every_entry_names_only_arguments_its_class_takes(name):
    entry = registry.MODELS[name]
    unknown = set(entry.kwargs) - set(constructor_defaults(entry.model_class))
    assert not unknown, f"{name}: {entry.model_class.__name__} takes no {sorted(unknown)}"
    assert entry.pretrained in (None, "vitedu", "timm")
    assert (entry.weights is not None) == (entry.pretrained == "vitedu")
    if entry.mean is not None:
        channels = entry.kwargs.get("in_chans", 3)
        assert len(entry.mean) == len(entry.std) == channels
    if entry.pretrained == "timm":  # timm's checkpoints decide the normalisation, not the name
        assert entry.mean is None and timm_kwargs(name)["embed_dim"] > 0


@pytest.mark.integration
def test_import_vitedu_is_light_and_names_load_on_first_use():
    import subprocess
    import sys

    code = ("import sys, vitedu; print(sorted(m for m in sys.modules if m.startswith('vitedu.')));"
            "vitedu.create_transform; print('vitedu.preprocess' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split("\n")
    assert eval(out[0]) == ["vitedu.attention", "vitedu.blocks", "vitedu.mimetic", "vitedu.patching",
                            "vitedu.utils", "vitedu.vit"]
    assert out[1] == "True"
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        vitedu.nothing_here  # noqa: B018
