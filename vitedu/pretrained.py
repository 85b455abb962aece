"""``from_pretrained``: load checkpoints made elsewhere: Hugging Face directories and hub ids, timm's hub format,
state_dicts (the weights shipped inside vitedu are ``vitedu.shipped``'s). Every model loaded here carries
``model.pretrained_cfg`` (``vitedu.preprocess``): its input size and normalisation, read from the checkpoint
where it records them (Hugging Face's ``preprocessor_config.json``, timm's ``pretrained_cfg`` in ``config.json``),
and ``None`` where no source says.

timm checkpoints of DeiT-distilled, CaiT and ConViT (``vitedu.timm_configs.TIMM_VARIANTS``) load into vitedu's
models of chapter 9 the same way, from a timm hub directory or from a state_dict file with ``arch=``.

vitedu loads a checkpoint only when it computes exactly what the original model computes (identical logits);
anything else is refused with a ``ValueError`` naming the file and what vitedu lacks. Three sources:

- a Hugging Face ViT (``config.json`` with ``model_type: "vit"`` + ``model.safetensors``/``pytorch_model.bin``),
  as a directory or a hub id such as ``"google/vit-base-patch16-224"``;
- timm's hub format (``config.json`` naming an ``"architecture"`` + ``model.safetensors``), as a directory or a hub
  id such as ``"timm/vit_base_patch16_224.augreg2_in21k_ft_in1k"``; ``vitedu.timm_configs`` lists the
  architectures vitedu implements exactly;
- a bare state_dict file (``.safetensors``, ``.pth``, ``.bin``) from timm or a training script. Its tensors record
  the patch size, width, depth and classes, but not the number of heads, the activation, the pooling or where the
  LayerNorms sit: pass the timm architecture name (``arch="vit_small_patch16_224"``) to pin these down; without
  it vitedu assumes timm's plain ViT (exact GELU, pre-norm, LayerNorm eps 1e-6, heads from the width) and says so
  in a warning.

Resolution: images of another size than the checkpoint's are refused unless asked (``dynamic_img_size=True``, as in
timm), and ``img_size=`` rebuilds the model for one; the position embeddings are resampled bicubically *with
antialiasing*, as timm does. transformers'
``interpolate_pos_encoding`` resamples bicubically without antialiasing, so the two differ, most when a grid
shrinks (book/api.md gives the size of the difference; tests/test_pretrained_files.py pins it).

Loading never runs code from the checkpoint (see ``vitedu.checkpoints``).
"""

from __future__ import annotations

import math
import warnings
from pathlib import Path
from typing import Any

from torch import Tensor, nn

from .checkpoints import read_json, read_state_dict, require_types
from .hf_configs import convert_hf_state_dict, hf_config_to_kwargs, hf_preprocessor_cfg
from .patching import resample_pos_embed
from .preprocess import attach_pretrained_cfg, make_pretrained_cfg, model_input_size
from .state_dicts import KNOWN_HEADS, fold_keys, infer_timm_kwargs, load_checked, model_class_for_state
from .timm_configs import constructor_defaults, key_reasons, split_tag, timm_kwargs, timm_model_class
from .vit import VisionTransformer


def timm_pretrained_cfg(config: dict[str, Any], path: Path, model: nn.Module,
                        labels: list[str] | None) -> dict[str, Any]:
    """The ``pretrained_cfg`` of a timm hub directory, from the ``pretrained_cfg`` of its ``config.json``; what
    it does not state is None."""
    recorded = config.get("pretrained_cfg") or {}
    return make_pretrained_cfg(
        input_size=model_input_size(model), num_classes=model.num_classes, mean=recorded.get("mean"),
        std=recorded.get("std"), interpolation=recorded.get("interpolation"), crop_pct=recorded.get("crop_pct"),
        crop_mode=recorded.get("crop_mode") or "center", label_names=labels, trained=True,
        source=f"{path / 'config.json'} (pretrained_cfg)" if recorded.get("mean") is not None else
        f"{path / 'config.json'} states no mean/std in its pretrained_cfg: the normalisation is unknown",
    )



# Model arguments that fix what the weights compute. An override of one of these that contradicts
# the checkpoint is an error, never silently applied or ignored; img_size is allowed (positions are resampled).
_STRUCTURAL = ("patch_size", "in_chans", "num_classes", "embed_dim", "depth", "num_heads", "mlp_ratio", "qkv_bias",
               "pool", "norm_eps", "init_values", "pos_embed", "depth_token_only", "mlp_ratio_token_only",
               "local_up_to_layer")


def _merge_overrides(recorded: dict[str, Any], overrides: dict[str, Any], source: Path,
                     model_class: type[nn.Module] = VisionTransformer) -> dict[str, Any]:
    accepted = set(constructor_defaults(model_class))
    unknown = sorted(set(overrides) - accepted)
    if unknown:
        raise ValueError(
            f"from_pretrained got unknown argument(s) {unknown}; {model_class.__name__} accepts {sorted(accepted)}"
        )
    conflicts = [
        f"{k}={overrides[k]!r} (the checkpoint has {k}={recorded[k]!r})"
        for k in _STRUCTURAL
        if k in overrides and k in recorded and not _same(overrides[k], recorded[k], k)
    ]
    if conflicts:
        raise ValueError(
            f"{source}: {', '.join(conflicts)}: these weights were trained with the checkpoint's value, so the "
            f"override would change what they compute. Drop the override, or build a fresh model with "
            f"vitedu.create_model/VisionTransformer and copy the weights you want"
        )
    # A structural override that repeats the checkpoint's value keeps the checkpoint's exact value: mlp_ratio=2.01
    # for a 201-wide MLP of width 100 is accepted as the same ratio, but int(100 * 2.01) is 200, not 201.
    return {**recorded, **{k: v for k, v in overrides.items() if k not in _STRUCTURAL or k not in recorded}}


def _same(a: Any, b: Any, key: str) -> bool:
    if key == "init_values":  # LayerScale's starting gamma, replaced by the checkpoint's: only on/off counts
        return (a is None) == (b is None)
    if isinstance(a, float) or isinstance(b, float):
        return a is not None and b is not None and math.isclose(a, b)  # to 1e-9, relatively
    return a == b


def _build(kwargs: dict[str, Any], state: dict[str, Tensor], source: Path, img_size: Any = None,
           model_class: type[nn.Module] = VisionTransformer) -> nn.Module:
    """Build the model at the checkpoint's resolution and load; for another ``img_size``, resample learned positions
    (fixed sin-cos ones are the new grid's own)."""
    if img_size is not None and img_size != kwargs["img_size"]:
        if model_class is not VisionTransformer:
            raise ValueError(
                f"{source}: img_size={img_size!r} differs from the checkpoint's {kwargs['img_size']!r}; vitedu "
                f"resamples position embeddings for its plain ViT only, not for a {model_class.__name__}. Load it "
                f"at img_size={kwargs['img_size']!r}"
            )
        old = VisionTransformer(**{**kwargs, "depth": 0, "num_classes": 0})  # only its grid is needed
        new = VisionTransformer(**{**kwargs, "img_size": img_size, "depth": 0, "num_classes": 0})
        if "pos_embed" in state and kwargs.get("pos_embed") == "sincos":  # fixed, not learned: the new grid's own
            state = {**state, "pos_embed": new.pos_embed.detach()}
        elif "pos_embed" in state:
            state = {**state, "pos_embed": resample_pos_embed(
                state["pos_embed"], new.patch_embed.grid_size, old_grid=old.patch_embed.grid_size,
                num_prefix_tokens=old.num_prefix_tokens)}
        kwargs = {**kwargs, "img_size": img_size}
    try:
        model = model_class(**kwargs)
    except (TypeError, ValueError) as err:  # e.g. num_heads="3", or a width the head count does not divide
        raise ValueError(f"{source}: cannot build a {model_class.__name__} from {kwargs}: {err}") from err
    return load_checked(model, state, source).eval()


def from_pretrained(
    path_or_hub_id: str | Path, *, arch: str | None = None, checkpoint_key: str | None = None, **overrides: Any
) -> nn.Module:
    """Build a VisionTransformer (or a DeiT-distilled, CaiT or ConViT) from a checkpoint and load its weights.

    Returns the model in eval mode.

    Accepts
    - a Hugging Face ViT directory (``config.json`` + ``model.safetensors`` or ``pytorch_model.bin``), or the
      weights file inside one (its ``config.json`` is read from beside it),
    - a timm hub-format directory (``config.json`` naming an ``"architecture"`` + ``model.safetensors``),
    - a hub id: ``"google/vit-base-patch16-224"`` or ``"timm/vit_base_patch16_224.augreg2_in21k_ft_in1k"``
      (downloaded with huggingface_hub; a string that looks like a local path is never sent to the hub),
    - a timm state_dict file (``.safetensors``, ``.pth``, ``.bin``), also wrapped by a training script
      (``{"model": ...}``, ``{"state_dict": ...}``; ``checkpoint_key="model_ema"`` picks the EMA weights) or saved
      from DDP (``module.`` prefixes). ``arch`` names its timm architecture (tags allowed); without it the
      configuration is read from the shapes and the rest assumed, with a warning. A DeiT-distilled, CaiT or
      ConViT state_dict needs ``arch`` (e.g. ``arch="cait_xxs24_224"``); its tensors decide the classes, depth,
      resolution and input channels, the architecture the rest.

    Keyword arguments are arguments of the model's class (VisionTransformer, Cait, ...). Those the checkpoint
    records (width, depth, heads, classes, ...) may only repeat its values: a contradicting override raises
    instead of being ignored or changing what the weights compute. ``img_size=`` rebuilds the model for another
    resolution and resamples the position embeddings (bicubic with antialiasing, as timm; ViT only);
    ``dynamic_img_size=True``, as in timm, keeps the checkpoint's resolution and accepts images of other sizes
    (otherwise the model refuses them). The model's ``class_names`` holds the checkpoint's label names when it
    has them.
    """
    dynamic_img_size = overrides.pop("dynamic_img_size", False)
    if not isinstance(dynamic_img_size, bool):
        raise TypeError(f"dynamic_img_size is True (accept images of other sizes) or False; got {dynamic_img_size!r}")
    path = _resolve(path_or_hub_id)
    if path.is_file():
        config_file = path.parent / "config.json"
        if path.name in _WEIGHT_NAMES and config_file.is_file():  # the weights file of a hub-style directory
            model = _from_directory(path.parent, arch, overrides, weights=path)
        else:
            model = _from_state_dict_file(path, arch, checkpoint_key, overrides)
    else:
        model = _from_directory(path, arch, overrides)
    model.pretrained_cfg["dynamic_img_size"] = dynamic_img_size
    return model


_WEIGHT_NAMES = ("model.safetensors", "pytorch_model.bin")
_CHECKPOINT_SUFFIXES = {".pth", ".pt", ".bin", ".safetensors", ".ckpt", ".tar", ".json", ".npz", ".h5", ".pkl"}


def _resolve(source: str | Path) -> Path:
    """An existing local path, or the directory a hub id was downloaded to; "no such file" for local-looking paths."""
    path = Path(source).expanduser()
    if path.exists():
        return path
    text = str(source)
    looks_local = (
        isinstance(source, Path)
        or text.startswith(("/", "./", "../", "~", "."))
        or "\\" in text
        or text.count("/") != 1
        or path.suffix.lower() in _CHECKPOINT_SUFFIXES
        or path.parent.is_dir()
    )
    if looks_local:
        raise FileNotFoundError(
            f"no such file or directory: {text!r} (looked in {Path.cwd()}). A hub id has the form "
            f"'owner/name' (e.g. 'google/vit-base-patch16-224'); this looks like a local path, so the hub was "
            f"not asked"
        )
    return _download(text)


def _from_directory(path: Path, arch: str | None, overrides: dict[str, Any], weights: Path | None = None):
    config_file = path / "config.json"
    if not config_file.is_file():
        raise ValueError(f"{path} is not a model directory: it has no config.json (Hugging Face or timm hub format)")
    config = read_json(config_file)
    if weights is None:
        found = [path / n for n in _WEIGHT_NAMES if (path / n).is_file()]
        if not found:
            raise ValueError(f"{path} has a config.json but no {' or '.join(_WEIGHT_NAMES)}")
        weights = found[0]
    state, _ = read_state_dict(weights)
    if "architecture" in config:  # timm's hub format
        return _from_timm_config(config, state, weights, arch, overrides)
    if "hidden_size" not in config and "model_type" not in config:
        raise ValueError(
            f"{config_file} is neither a Hugging Face config (with 'model_type'/'hidden_size') nor timm's hub "
            f"format (with 'architecture'); its keys: {sorted(config)}"
        )
    if arch is not None:
        raise ValueError(f"arch={arch!r} applies to timm checkpoints; {config_file} is a Hugging Face config")
    recorded = hf_config_to_kwargs(config)
    try:
        state = convert_hf_state_dict(state)
    except ValueError as err:
        raise ValueError(f"{weights}: {err}") from err
    img_size = overrides.pop("img_size", None)
    model = _build(_merge_overrides(recorded, overrides, weights), state, weights, img_size)
    labels = config.get("id2label") or {}
    model.class_names = [labels[k] for k in sorted(labels, key=int)] if labels else None
    return attach_pretrained_cfg(model, hf_preprocessor_cfg(path, model, model.class_names))


def _from_timm_config(config: dict[str, Any], state: dict[str, Tensor], weights: Path, arch: str | None,
                      overrides: dict[str, Any]) -> nn.Module:
    require_types(config, {"architecture": str, "model_args": dict, "pretrained_cfg": dict, "num_classes": int,
                            "label_names": (list, dict)}, weights.parent / "config.json")
    input_size = (config.get("pretrained_cfg") or {}).get("input_size")
    if input_size is not None and not (isinstance(input_size, list) and len(input_size) == 3
                                       and all(isinstance(n, int) for n in input_size)):
        raise ValueError(f"{weights.parent / 'config.json'}: pretrained_cfg.input_size should be [channels, "
                         f"height, width], got {input_size!r}")
    recorded_arch = config["architecture"]
    if arch is not None and split_tag(arch)[0] != split_tag(recorded_arch)[0]:
        raise ValueError(f"arch={arch!r} contradicts the architecture {recorded_arch!r} recorded in {weights.parent}")
    model_args = dict(config.get("model_args") or {})
    model_args.setdefault("num_classes", config.get("num_classes", 1000))
    try:
        recorded = timm_kwargs(recorded_arch, model_args, config.get("pretrained_cfg"), state)
    except ValueError as err:
        raise ValueError(f"{weights.parent}: {err}") from err
    model_class = timm_model_class(recorded_arch)
    img_size = overrides.pop("img_size", None)
    model = _build(_merge_overrides(recorded, overrides, weights, model_class), state, weights, img_size, model_class)
    labels = config.get("label_names") or (config.get("pretrained_cfg") or {}).get("label_names")
    if isinstance(labels, dict):
        labels = [labels[k] for k in sorted(labels, key=int)]
    model.class_names = list(labels) if labels and len(labels) == model.num_classes else None
    return attach_pretrained_cfg(model, timm_pretrained_cfg(config, weights.parent, model, model.class_names))


def _from_state_dict_file(path: Path, arch: str | None, checkpoint_key: str | None,
                          overrides: dict[str, Any]) -> nn.Module:
    state, extras = read_state_dict(path, checkpoint_key)
    if any(k.startswith(("embeddings.", "vit.embeddings.", "encoder.layer.")) for k in state):
        raise ValueError(
            f"{path} holds a Hugging Face ViT state_dict; its configuration (heads, image size, labels) lives in "
            f"a config.json beside it. Pass the directory holding both, saved with model.save_pretrained(dir)"
        )
    if arch is None and isinstance(extras.get("arch"), str):  # timm's train.py records the architecture
        arch = extras["arch"]
    if arch is not None:  # a refused architecture is named as such, with what its name and its keys reveal
        try:
            pinned = timm_kwargs(arch, state=state)
        except ValueError as err:
            raise ValueError(f"{path}: {err}") from err
    model_class = model_class_for_state(state, arch, path)
    reasons = key_reasons(state) if model_class is VisionTransformer else []
    if reasons:
        raise ValueError(
            f"{path} cannot be loaded exactly: it has {'; '.join(reasons)}, which vitedu's ViT does not implement. "
            f"Its keys: {fold_keys(list(state))[:16]}"
        )
    shapes = infer_timm_kwargs(state, path, model_class)
    img_size = overrides.pop("img_size", None)
    if arch is not None:
        wrong = [f"{k} {shapes[k]} (a {split_tag(arch)[0]} has {pinned[k]})" for k in ("embed_dim", "patch_size")
                 if shapes[k] != pinned[k]]
        if wrong:
            instead = ("leave arch out and pass num_heads=" if model_class is VisionTransformer
                       else f"build a {model_class.__name__} and use load_state_dict")
            raise ValueError(f"{path} is not a {split_tag(arch)[0]}: its tensors have {', '.join(wrong)}. Pass the "
                             f"right arch=, or {instead}")
        # The tensors decide what they record (depth, classes, resolution may differ from the architecture's
        # defaults, as with timm.create_model(arch, num_classes=...)); the architecture decides the rest.
        recorded = {**pinned, **shapes}
    else:
        recorded = dict(shapes)
        assumed = ["exact GELU", "pre-norm blocks", "LayerNorm eps 1e-6",
                   "[CLS] pooling" if shapes["pool"] == "cls" else "mean pooling with the final LayerNorm after it"]
        if "num_heads" not in overrides:
            if shapes["embed_dim"] not in KNOWN_HEADS:
                raise ValueError(
                    f"{path} does not record the number of heads, and width {shapes['embed_dim']} is not one of "
                    f"timm's standard ViTs; pass num_heads=... or the timm architecture, arch='...'"
                )
            recorded["num_heads"] = KNOWN_HEADS[shapes["embed_dim"]]
            assumed.insert(0, f"num_heads={recorded['num_heads']} (timm's usual count for width {shapes['embed_dim']})")
        warnings.warn(
            f"{path} is a bare state_dict: it does not record the number of heads, the activation, the pooling or "
            f"where the LayerNorms sit. vitedu assumed {', '.join(assumed)}, as in timm's plain ViT. If the model "
            f"differs, the logits will too: pass arch='<timm architecture>' (e.g. arch='vit_small_patch16_224') "
            f"to pin these down and silence this warning",
            stacklevel=3,  # a UserWarning pointing at the caller's from_pretrained line
        )
    model = _build(_merge_overrides(recorded, overrides, path, model_class), state, path, img_size, model_class)
    model.class_names = None
    return attach_pretrained_cfg(model, make_pretrained_cfg(
        input_size=model_input_size(model), num_classes=model.num_classes, interpolation=None, crop_pct=None,
        source=f"{path} is a bare state_dict: it records no input normalisation (mean/std unknown)", trained=True))


def _download(hub_id: str) -> Path:
    """Fetch config.json and one weights file of a hub model (needs the internet and huggingface_hub).

    safetensors is preferred; the pickled ``pytorch_model.bin`` is fetched only when a repository has no
    ``model.safetensors`` (many ship both: downloading both would double the size).
    """
    try:
        from huggingface_hub import hf_hub_download, list_repo_files
    except ImportError as err:
        raise ImportError("downloading from the hub needs huggingface_hub: pip install huggingface_hub") from err
    try:
        available = set(list_repo_files(hub_id))
        weights = next((n for n in _WEIGHT_NAMES if n in available), None)
        if "config.json" not in available or weights is None:
            raise ValueError(f"hub repository {hub_id!r} has no config.json with model.safetensors/pytorch_model.bin")
        hf_hub_download(hub_id, weights)
        if "preprocessor_config.json" in available:  # Hugging Face's record of the input normalisation
            hf_hub_download(hub_id, "preprocessor_config.json")
        return Path(hf_hub_download(hub_id, "config.json")).parent
    except ValueError:
        raise
    except Exception as err:  # no connection, no such repository, a gated model, ...
        raise OSError(f"could not fetch {hub_id!r} from the Hugging Face hub ({type(err).__name__}: {err})") from err


__all__ = ["from_pretrained", "timm_pretrained_cfg"]
