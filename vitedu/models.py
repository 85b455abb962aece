"""``create_model`` and ``list_models``, as in timm: build a named model, optionally with trained weights.

The names and their configurations live in one table, ``vitedu.registry.MODELS``; ``MODEL_CONFIGS`` (plain ViTs:
name -> VisionTransformer kwargs) and ``VARIANT_CONFIGS`` (chapter 9's successors: name -> (class, kwargs)) are
views of it. Every model built here carries ``model.pretrained_cfg`` (``vitedu.preprocess``): its input size
and the normalisation its data uses, so that ``vitedu.create_transform(model)`` prepares images for it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Optional

from torch import nn

from .checkpoints import read_state_dict
from .preprocess import attach_pretrained_cfg
from .registry import MODELS, get_entry
from .shipped import load_shipped, registry_cfg, shipped_file
from .state_dicts import load_checked
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


def create_model(name: str, pretrained: bool = False, checkpoint_path: Optional[str | os.PathLike] = None,
                 **overrides: Any) -> nn.Module:
    """Build a named model; keyword arguments override the preset (e.g. ``num_classes=10``).

    ``pretrained=True`` loads the trained weights shipped with vitedu for that name (``vitedu.shipped``);
    overrides must then leave the architecture unchanged (e.g. ``drop_path_rate`` is fine, ``depth`` is not).
    ``checkpoint_path``, as in timm, loads the state_dict of a file (``.safetensors``, ``.pth``, ``.bin``) into the
    model as built, strictly (every key and shape must match). For checkpoints from the Hugging Face hub or timm
    hub directories, use ``vitedu.from_pretrained`` instead.
    The model carries ``model.pretrained_cfg``. With trained weights it comes in eval mode, as from
    ``from_pretrained`` (call ``.train()`` to fine-tune it), and refuses un-normalised inputs and images of
    another size than it was trained at in either mode (see ``vitedu.preprocess``); ``dynamic_img_size=True``,
    timm's keyword, accepts other sizes (the positions are resampled).
    """
    entry = get_entry(name)  # an unknown name is named as such first
    check_weights_source(name, pretrained, checkpoint_path)
    dynamic_img_size = overrides.pop("dynamic_img_size", False)
    if not isinstance(dynamic_img_size, bool):
        raise TypeError(f"dynamic_img_size is True (accept images of other sizes) or False; got {dynamic_img_size!r}")
    if pretrained:
        shipped_file(name)  # a name without shipped weights is refused before anything is built
    model = entry.model_class(**{**entry.kwargs, **overrides})
    if pretrained:
        model = load_shipped(model, name).eval()
    elif checkpoint_path is not None:
        state, _ = read_state_dict(Path(checkpoint_path))
        load_checked(model, state, checkpoint_path)
        model = attach_pretrained_cfg(model, registry_cfg(name, model, trained=True)).eval()
    else:
        model = attach_pretrained_cfg(model, registry_cfg(name, model, trained=False))
    model.pretrained_cfg["dynamic_img_size"] = dynamic_img_size
    return model


def check_weights_source(name: str, pretrained: Any, checkpoint_path: Any) -> None:
    """Refuse, before anything is built, a ``pretrained`` that is not True/False (a path there would otherwise read
    as True and load the shipped weights), both sources at once, and a ``checkpoint_path`` that is no file."""
    if not isinstance(pretrained, bool):
        hint = (f"to load the file, pass checkpoint_path={pretrained!r} (a state_dict, as in timm) or use "
                f"vitedu.from_pretrained({pretrained!r})" if isinstance(pretrained, (str, os.PathLike))
                else "pass True or False")
        raise TypeError(f"pretrained must be True (the weights shipped with vitedu for {name!r}) or False (random "
                        f"weights); got {pretrained!r}: {hint}")
    if pretrained and checkpoint_path is not None:
        raise ValueError(f"pretrained=True and checkpoint_path={checkpoint_path!r} name two sources of weights for "
                         f"{name!r}; pass only one (pretrained=True: the shipped weights; checkpoint_path: your file)")
    if checkpoint_path is not None and not Path(checkpoint_path).is_file():
        raise FileNotFoundError(f"checkpoint_path must be an existing state_dict file (.safetensors, .pth, .bin); "
                                f"got {str(checkpoint_path)!r}, which is not a file. Check the path, or use "
                                f"pretrained=True for the weights shipped with vitedu")


__all__ = ["MODEL_CONFIGS", "VARIANT_CONFIGS", "create_model", "list_models"]
