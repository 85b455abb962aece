"""The trained weights shipped inside the package (vitedu/assets): they work offline and on Colab with the
package alone. ``vitedu.create_model(name, pretrained=True)`` loads one model's file; ``load_seed_pack`` several
training runs of one recipe (chapter 8's seeds). Each file is made by ``make weights`` (the training CLI) or
``tools/seed_weights.py``; its safetensors metadata holds the training config, the measured accuracy and the
``pretrained_cfg`` (input size, mean, std) the model was trained with.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any, Callable

from safetensors import safe_open
from safetensors.torch import load
from torch import Tensor, nn

from .preprocess import PRETRAINED_CFG_KEYS, attach_pretrained_cfg, make_pretrained_cfg, model_input_size
from .registry import MODELS, get_entry, shipped_names
from .state_dicts import load_checked

# name -> file in vitedu/assets: a view of the registry's entries whose weights ship with vitedu. Each file is made
# by ``make weights`` (the training CLI); its safetensors metadata holds the training config, the measured test
# accuracy and the pretrained_cfg (input size, mean, std) the model was trained with.
SHIPPED_WEIGHTS: dict[str, str] = {name: MODELS[name].weights for name in shipped_names()}


def shipped_file(name: str):  # -> importlib.resources Traversable
    """The shipped weights file of ``name``, or a ValueError listing the models that have one."""
    if name not in SHIPPED_WEIGHTS:
        raise ValueError(
            f"no trained weights are shipped with vitedu for {name!r}. Models with shipped weights: "
            f"{', '.join(sorted(SHIPPED_WEIGHTS))}. Use pretrained=False for a randomly initialised {name!r}, "
            "or vitedu.from_pretrained(...) for a checkpoint file or a Hugging Face hub id."
        )
    return resources.files("vitedu").joinpath("assets", SHIPPED_WEIGHTS[name])


def load_shipped_weights(name: str) -> dict[str, Tensor]:
    """The state_dict of a model trained and shipped with vitedu: {parameter name: tensor}."""
    return load(shipped_file(name).read_bytes())


def shipped_metadata(name: str) -> dict[str, str]:
    """What the shipped file says about itself: the training config (JSON) and the measured test accuracy."""
    with resources.as_file(shipped_file(name)) as path, safe_open(str(path), framework="pt") as f:
        return dict(f.metadata() or {})


def load_seed_pack(
    filename: str, build: Callable[[dict[str, Any]], nn.Module]
) -> tuple[list[nn.Module], dict[str, Any]]:
    """The models of a seed pack in vitedu/assets: several training runs of one recipe in one file.

    A pack (written by ``tools/seed_weights.py``) stores run s under the keys ``seed{s}.<state_dict key>``
    (float16, to stay small) and lists its seeds in the metadata, with the recipe ("config", JSON) and, where
    measured, "val_acc" and "test_acc" (comma-separated, one per seed). -> (models in eval mode, in float32, one
    per seed in the metadata's order; the metadata with "config" parsed and "seeds" as a list of ints).
    ``build(config)`` makes an empty model for one run, e.g. for a ViT pack
    ``lambda config: vitedu.create_model(config["model"], **config["model_kwargs"])``, and for the CNNs of the
    shift experiment ``lambda config: vitedu.cnn.ConvTeacher(1, 10)``.
    """
    path = resources.files("vitedu").joinpath("assets", filename)
    if not path.is_file():
        packs = sorted(p.name for p in resources.files("vitedu").joinpath("assets").iterdir()
                       if p.name.endswith("_seeds.safetensors"))
        raise ValueError(f"no seed pack {filename!r} in vitedu/assets; the packs shipped are: {', '.join(packs)}")
    with resources.as_file(path) as local, safe_open(str(local), framework="pt") as f:
        meta: dict[str, Any] = dict(f.metadata() or {})
    if "seeds" not in meta or "config" not in meta:
        raise ValueError(f"{filename} has no 'seeds' or 'config' in its metadata: it is not a seed pack "
                         "(tools/seed_weights.py writes them); for one model use create_model(name, pretrained=True)")
    meta["config"] = json.loads(meta["config"])
    meta["seeds"] = [int(s) for s in meta["seeds"].split(",")]
    tensors = load(path.read_bytes())
    models = []
    for seed in meta["seeds"]:
        prefix = f"seed{seed}."
        state = {k[len(prefix):]: v.float() for k, v in tensors.items() if k.startswith(prefix)}
        model = build(meta["config"])
        load_checked(model, state, f"seed {seed} of {filename}")
        models.append(model.eval())
    return models, meta


def registry_cfg(name: str, model: nn.Module, trained: bool) -> dict[str, Any]:
    """The ``pretrained_cfg`` the registry entry of ``name`` states, for ``model`` as built (its input size and
    classes, which overrides may have changed)."""
    entry = get_entry(name)
    labels = entry.label_names if entry.label_names and len(entry.label_names) == model.num_classes else None
    input_size = model_input_size(model)
    mean, std = entry.mean, entry.std
    why = "the registry entry" if mean is not None else "unknown for a timm name: the checkpoint's tag decides"
    if mean is not None and len(mean) != input_size[0]:  # in_chans overridden: the entry's statistics do not fit
        mean, std, why = None, None, f"unknown: {input_size[0]} input channels, the entry's data has {len(mean)}"
    return make_pretrained_cfg(
        input_size=input_size, num_classes=model.num_classes, mean=mean, std=std,
        interpolation=entry.interpolation, crop_pct=entry.crop_pct, label_names=labels,
        source=f"vitedu.registry.MODELS[{name!r}] ({why})", trained=trained,
    )


def load_shipped(model: nn.Module, name: str) -> nn.Module:
    """Load the weights shipped for ``name`` into ``model`` and attach their ``pretrained_cfg``.

    The cfg comes from the file's metadata (``pretrained_cfg``, written by ``vitedu.run_files.save_weights``) where it
    has one, else from the registry entry."""
    load_checked(model, load_shipped_weights(name), f"the shipped weights of {name!r}")
    cfg = registry_cfg(name, model, trained=True)
    recorded = json.loads(shipped_metadata(name).get("pretrained_cfg", "{}"))
    if recorded:
        kept = {k: recorded[k] for k in PRETRAINED_CFG_KEYS if k in recorded}
        cfg = make_pretrained_cfg(**{**{k: cfg[k] for k in PRETRAINED_CFG_KEYS}, **kept,
                                     "source": f"the metadata of the shipped file of {name!r}", "trained": True})
    return attach_pretrained_cfg(model, cfg)


__all__ = ["SHIPPED_WEIGHTS", "load_seed_pack", "load_shipped", "load_shipped_weights", "registry_cfg", "shipped_file",
           "shipped_metadata"]
