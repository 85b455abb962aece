"""``create_model`` and ``list_models``, as in timm: build a named model, optionally with trained weights.

The names and their configurations live in one table, ``vitedu.registry.MODELS``; ``MODEL_CONFIGS`` (plain ViTs:
name -> VisionTransformer kwargs) and ``VARIANT_CONFIGS`` (chapter 9's successors: name -> (class, kwargs)) are
views of it. Every model built here carries ``model.pretrained_cfg`` (``vitedu.preprocess``): its input size
and the normalisation its data uses, so that ``vitedu.create_transform(model)`` prepares images for it.
"""

from __future__ import annotations

from typing import Any

from torch import nn

from .preprocess import attach_pretrained_cfg
from .registry import MODELS, get_entry
from .shipped import load_shipped, registry_cfg, shipped_file
from .vit import VisionTransformer

# name -> keyword arguments of VisionTransformer (the plain ViTs of the registry).
MODEL_CONFIGS: dict[str, dict[str, Any]] = {
    name: entry.kwargs for name, entry in MODELS.items() if entry.model_class is VisionTransformer
}
# After ViT (chapter 9): name -> (model class, keyword arguments), with timm's names and parameter counts.
VARIANT_CONFIGS: dict[str, tuple[type[nn.Module], dict[str, Any]]] = {
    name: (entry.model_class, entry.kwargs) for name, entry in MODELS.items() if name not in MODEL_CONFIGS
}


def list_models() -> list[str]:
    """Names accepted by :func:`create_model`, sorted."""
    return sorted(MODELS)


def create_model(name: str, pretrained: bool = False, **overrides: Any) -> nn.Module:
    """Build a named model; keyword arguments override the preset (e.g. ``num_classes=10``).

    ``pretrained=True`` loads the trained weights shipped with vitedu for that name (``vitedu.shipped``);
    overrides must then leave the architecture unchanged (e.g. ``drop_path_rate`` is fine, ``depth`` is not).
    For checkpoints from the Hugging Face hub or timm files, use ``vitedu.from_pretrained`` instead.
    The model carries ``model.pretrained_cfg``. With trained weights it comes in eval mode, as from
    ``from_pretrained`` (call ``.train()`` to fine-tune it), and refuses un-normalised inputs in either mode
    (see ``vitedu.preprocess``).
    """
    entry = get_entry(name)  # an unknown name is named as such first
    if pretrained:
        shipped_file(name)  # a name without shipped weights is refused before anything is built
    model = entry.model_class(**{**entry.kwargs, **overrides})
    if pretrained:
        return load_shipped(model, name).eval()
    return attach_pretrained_cfg(model, registry_cfg(name, model, trained=False))


__all__ = ["MODEL_CONFIGS", "VARIANT_CONFIGS", "create_model", "list_models"]
