"""Preprocessing travels with the model: ``pretrained_cfg``, ``create_transform`` and a guard against raw inputs.

A trained model expects its inputs prepared exactly as in training: this size, scaled to [0, 1], then normalised
with this mean and std. timm records that in ``model.pretrained_cfg``; vitedu does the same, with timm's keys, for
every model built by ``vitedu.create_model`` or ``vitedu.from_pretrained``:

    model = vitedu.create_model("vit_cluttered_digits", pretrained=True).eval()
    # (N, 1, 32, 32) in [0, 1]
    images, labels, _ = vitedu.load_cluttered_digits("test")
    # resize to input_size, normalise with mean/std
    x = vitedu.create_transform(model)(images)
    print((model(x).argmax(-1) == labels).float().mean())

``pretrained_cfg`` keys: ``input_size`` (C, H, W), ``mean`` and ``std`` (one value per channel), ``interpolation``
("bilinear", "bicubic", "nearest"), ``crop_pct`` and ``crop_mode`` (how an image of another size is brought to
``input_size``), ``num_classes``, ``label_names`` and ``source`` (where the values come from). A value that no
source states is ``None``, never guessed: the transform then refuses with a ``ValueError`` saying what to pass.

The guard: a model with trained weights and a known normalisation checks that its input is not a
batch of raw [0, 1] images: normalised with a positive mean, an image's dark background is negative, so a batch
whose every pixel is >= 0 has not been normalised. The check is one ``amin`` over the input, on the patch
embedding (so ``model(x)``, ``forward_features`` and ``attention_maps`` are all covered); it adds no parameter or
buffer (the state_dict stays timm's), runs in training mode too (fine-tuning trained weights on raw images
is the same mistake), is skipped under ``torch.compile``, and ``model.pretrained_cfg["check_inputs"] = False``
switches it off for inputs that are non-negative by design. ``vitedu.train.fit`` marks the models it builds as
untrained until their run ends, so a training run from scratch is never checked.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Optional, Union

import torch
import torch.nn.functional as F
from torch import Tensor, nn

INTERPOLATIONS = ("nearest", "bilinear", "bicubic")
CROP_MODES = ("center", "squash")
# PIL's resampling codes, as Hugging Face's preprocessor_config.json writes them ("resample": 2).
PIL_RESAMPLE = {0: "nearest", 2: "bilinear", 3: "bicubic"}
# The keys of a pretrained_cfg that make_pretrained_cfg takes back (what a weights file records and restores).
PRETRAINED_CFG_KEYS = ("input_size", "num_classes", "mean", "std", "interpolation", "crop_pct", "crop_mode",
                       "label_names")


def make_pretrained_cfg(
    *, input_size: Sequence[int], num_classes: int, mean: Optional[Sequence[float]] = None,
    std: Optional[Sequence[float]] = None, interpolation: Optional[str] = None, crop_pct: Optional[float] = 1.0,
    crop_mode: str = "center", label_names: Optional[Sequence[str]] = None, source: str = "",
    trained: bool = False,
) -> dict[str, Any]:
    """A ``pretrained_cfg`` dict with timm's keys, checked: mean and std have one value per channel, std > 0.

    ``trained``: whether the weights were trained (from a checkpoint or shipped): only then does the model check
    its inputs (random weights give meaningless outputs on any input).
    """
    channels = int(input_size[0])
    for key, value in (("mean", mean), ("std", std)):
        if value is not None and len(value) != channels:
            raise ValueError(f"{key} needs one value per input channel ({channels}), got {list(value)} ({source})")
    if std is not None and any(s <= 0 for s in std):
        raise ValueError(f"std must be positive, got {list(std)} ({source})")
    if interpolation is not None and interpolation not in INTERPOLATIONS:
        raise ValueError(f"interpolation must be one of {INTERPOLATIONS}, got {interpolation!r} ({source})")
    if crop_mode not in CROP_MODES:
        raise ValueError(f"crop_mode must be one of {CROP_MODES}, got {crop_mode!r} ({source})")
    return {
        "input_size": tuple(int(n) for n in input_size),
        "mean": None if mean is None else tuple(float(m) for m in mean),
        "std": None if std is None else tuple(float(s) for s in std),
        "interpolation": interpolation,
        "crop_pct": crop_pct,
        "crop_mode": crop_mode,
        "num_classes": int(num_classes),
        "label_names": None if label_names is None else tuple(str(n) for n in label_names),
        "source": source,
        "trained": trained,
        "check_inputs": True,
    }


def model_input_size(model: nn.Module) -> tuple[int, int, int]:
    """(channels, height, width) that a vitedu model's patch embedding was built for."""
    embed = model.patch_embed
    return (embed.proj.in_channels, *embed.img_size)


class InputCheck:
    """A forward pre-hook on the patch embedding of a model with trained weights: refuse a raw [0, 1] batch
    where normalised inputs are expected, and an image size other than the one it was trained at.

    A ViT runs at any size divisible by its patch (its positions are resampled), but running is not reading:
    the shipped digit model falls from 99 % to 37 % on canvases upsampled to 48 pixels (chapter 4). As timm does,
    vitedu refuses another size unless asked: ``create_model(..., dynamic_img_size=True)`` (or
    ``model.pretrained_cfg["dynamic_img_size"] = True``) allows it. The hook holds the model's ``pretrained_cfg``
    dict itself, so ``model.pretrained_cfg["check_inputs"] = False`` switches both checks off.
    """

    def __init__(self, cfg: dict[str, Any]) -> None:
        self.cfg = cfg

    def __call__(self, module: nn.Module, args: tuple[Any, ...]) -> None:
        cfg = self.cfg
        if not cfg.get("check_inputs", True) or not (cfg.get("trained") and cfg.get("input_size")):
            return
        if torch.compiler.is_compiling() or torch.jit.is_tracing() or not args:
            return
        images = args[0]
        if not isinstance(images, Tensor) or not images.is_floating_point() or images.numel() == 0:
            return
        trained_at = tuple(cfg["input_size"][-2:])
        if tuple(images.shape[-2:]) != trained_at and not cfg.get("dynamic_img_size", False):
            raise ValueError(
                f"this model was trained on {trained_at[0]}x{trained_at[1]} images ({cfg['source']}), but this "
                f"batch is {images.shape[-2]}x{images.shape[-1]}. Resize the images with "
                f"x = vitedu.create_transform(model)(images) (it resizes to input_size and normalises). To run at "
                f"another size on purpose (positions resampled, accuracy not guaranteed: fine-tune at that size), "
                f"create the model with dynamic_img_size=True, as in timm"
            )
        if expects_negative_background(cfg) and bool(images.amin() >= 0):
            low, high = images.amin().item(), images.amax().item()
            raise ValueError(
                f"this model expects normalised inputs (mean {list(cfg['mean'])}, std {list(cfg['std'])}: "
                f"{cfg['source']}), but every value of this batch is >= 0 (range {low:.3g} to {high:.3g}), as in "
                f"raw images: normalised, a dark background is negative. Prepare the images with "
                f"x = vitedu.create_transform(model)(images) (images in [0, 1]), then call model(x). If your "
                f"inputs are already normalised and non-negative by design, set "
                f"model.pretrained_cfg['check_inputs'] = False"
            )


def expects_negative_background(cfg: dict[str, Any]) -> bool:
    """Whether a normalised black pixel is negative for this cfg: trained weights, a known mean > 0 and std."""
    mean, std = cfg.get("mean"), cfg.get("std")
    return bool(cfg.get("trained")) and mean is not None and std is not None and any(m > 0 for m in mean)


def attach_pretrained_cfg(model: nn.Module, cfg: dict[str, Any]) -> nn.Module:
    """Set ``model.pretrained_cfg`` and (once) the input check on its patch embedding; returns the model."""
    model.pretrained_cfg = cfg
    check = getattr(model, "_input_check", None)
    if check is not None:
        check.remove()
    model._input_check = model.patch_embed.register_forward_pre_hook(InputCheck(cfg))
    return model


def resolve_data_config(model_or_cfg: Union[nn.Module, dict[str, Any]], **overrides: Any) -> dict[str, Any]:
    """The preprocessing config of a model (its ``pretrained_cfg``) or of a cfg dict, with ``overrides`` on top."""
    if isinstance(model_or_cfg, nn.Module):
        cfg = getattr(model_or_cfg, "pretrained_cfg", None)
        if cfg is None:
            raise ValueError(
                f"this {type(model_or_cfg).__name__} has no pretrained_cfg: build it with vitedu.create_model(...) "
                "or vitedu.from_pretrained(...), or pass a dict with input_size, mean and std to create_transform"
            )
    elif isinstance(model_or_cfg, dict):
        cfg = model_or_cfg
    else:
        raise TypeError(f"expected a model or a pretrained_cfg dict, got {type(model_or_cfg).__name__}")
    unknown = sorted(set(overrides) - {"input_size", "mean", "std", "interpolation", "crop_pct", "crop_mode"})
    if unknown:
        raise TypeError(f"create_transform got unknown argument(s) {unknown}; it accepts input_size, mean, std, "
                        "interpolation, crop_pct and crop_mode")
    return {**cfg, **overrides}


class Transform:
    """Images in [0, 1] -> model inputs: resize (and crop) to ``input_size``, then normalise with ``mean``/``std``.

    Accepts a float tensor (C, H, W) or (B, C, H, W) with values in [0, 1], a PIL image, or a list of PIL images;
    returns a float tensor (C, H, W) for one image, (B, C, H, W) for a batch or a list.
    """

    def __init__(self, cfg: dict[str, Any]) -> None:
        missing = [k for k in ("mean", "std") if cfg.get(k) is None]
        if missing:
            raise ValueError(
                f"the normalisation of this model is not known: {' and '.join(missing)} "
                f"{'is' if len(missing) == 1 else 'are'} None in its pretrained_cfg "
                f"({cfg.get('source') or 'no source'})."
                " Pass the values its weights were trained with, e.g. create_transform(model, mean=(0.5, 0.5, 0.5), "
                "std=(0.5, 0.5, 0.5)) for timm's augreg ViTs or mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, "
                "0.225) for ImageNet statistics: see the checkpoint's model card"
            )
        self.input_size = tuple(cfg["input_size"])
        self.mean, self.std = tuple(cfg["mean"]), tuple(cfg["std"])
        self.interpolation, self.crop_pct = cfg.get("interpolation"), cfg.get("crop_pct")
        self.crop_mode = cfg.get("crop_mode") or "center"

    def __repr__(self) -> str:
        return (f"Transform(input_size={self.input_size}, interpolation={self.interpolation!r}, "
                f"crop_pct={self.crop_pct}, crop_mode={self.crop_mode!r}, mean={self.mean}, std={self.std})")

    def __call__(self, images: Any) -> Tensor:
        if isinstance(images, (list, tuple)):
            return torch.stack([self(image) for image in images])
        if not isinstance(images, Tensor):
            images = pil_to_tensor(images, self.input_size[0])
        if images.dim() == 3:
            return self(images[None])[0]
        if images.dim() != 4:
            raise ValueError(f"expected an image (C, H, W) or a batch (B, C, H, W), got shape {tuple(images.shape)}")
        if not images.is_floating_point():
            raise TypeError(
                f"expected float images in [0, 1], got {images.dtype}: divide by the largest pixel value first "
                "(255 for 8-bit photos, vitedu.digits.DIGITS_MAX for the 8x8 digits)"
            )
        if images.shape[1] != self.input_size[0]:
            raise ValueError(f"the model takes {self.input_size[0]}-channel images, got {images.shape[1]} channels "
                             f"(shape {tuple(images.shape)})")
        low, high = images.amin().item(), images.amax().item()
        if low < -1e-6 or high > 1 + 1e-6:
            raise ValueError(
                f"expected images in [0, 1], got values from {low:.3g} to {high:.3g}: the transform scales nothing "
                "and normalises once. Pass raw images scaled to [0, 1] (e.g. uint8 / 255), not already normalised ones"
            )
        images = self.resize(images)
        mean = torch.tensor(self.mean, dtype=images.dtype, device=images.device)[None, :, None, None]
        std = torch.tensor(self.std, dtype=images.dtype, device=images.device)[None, :, None, None]
        return (images - mean) / std

    def resize(self, images: Tensor) -> Tensor:
        """(B, C, H, W) -> (B, C, H_in, W_in), ``(H_in, W_in) = input_size[1:]``; images of that size pass unchanged."""
        height, width = self.input_size[1:]
        if tuple(images.shape[-2:]) == (height, width):
            return images
        if self.interpolation is None or self.crop_pct is None:
            raise ValueError(
                f"images of {tuple(images.shape[-2:])} need resizing to {(height, width)}, but this model's "
                f"pretrained_cfg does not say how (interpolation={self.interpolation!r}, crop_pct={self.crop_pct!r}): "
                "pass them, e.g. create_transform(model, interpolation='bicubic', crop_pct=1.0), or resize yourself"
            )
        if self.crop_mode == "squash":  # both sides straight to the target (Hugging Face's ViTImageProcessor)
            return _interpolate(images, (height, width), self.interpolation)
        # timm's eval transform: scale the shorter side to size / crop_pct, then take the centre crop.
        scale = max(height, width) / self.crop_pct
        h_in, w_in = images.shape[-2:]
        ratio = scale / min(h_in, w_in)
        resized = _interpolate(images, (max(height, round(h_in * ratio)), max(width, round(w_in * ratio))),
                               self.interpolation)
        top, left = (resized.shape[-2] - height) // 2, (resized.shape[-1] - width) // 2
        return resized[..., top:top + height, left:left + width]


def _interpolate(images: Tensor, size: tuple[int, int], mode: str) -> Tensor:
    if mode == "nearest":
        return F.interpolate(images, size=size, mode="nearest")
    out = F.interpolate(images, size=size, mode=mode, align_corners=False, antialias=True)
    return out.clamp(0, 1)  # bicubic overshoots; PIL, which timm resizes with, clips to the pixel range


def pil_to_tensor(image: Any, channels: int) -> Tensor:
    """A PIL image -> float tensor (C, H, W) in [0, 1], converted to grey ("L") or "RGB" as the model needs."""
    try:
        from PIL import Image
    except ImportError as err:  # pillow is a dependency of vitedu; this only helps a broken environment
        raise ImportError("reading PIL images needs pillow: pip install pillow") from err
    if not isinstance(image, Image.Image):
        raise TypeError(f"expected a tensor, a PIL image or a list of them, got {type(image).__name__}")
    mode = {1: "L", 3: "RGB"}.get(channels)
    if mode is None:
        raise ValueError(f"a PIL image can be converted to 1 or 3 channels; the model takes {channels}")
    array = torch.frombuffer(bytearray(image.convert(mode).tobytes()), dtype=torch.uint8)
    return array.reshape(image.height, image.width, channels).permute(2, 0, 1).float() / 255


def create_transform(model_or_cfg: Union[nn.Module, dict[str, Any]], **overrides: Any) -> Transform:
    """The transform that turns images into inputs for this model: ``create_transform(model)(images)``.

    ``model_or_cfg``: a model built by ``vitedu.create_model`` / ``vitedu.from_pretrained`` (it carries a
    ``pretrained_cfg``) or such a dict. Keyword arguments override the cfg (``mean``, ``std``, ``input_size``,
    ``interpolation``, ``crop_pct``, ``crop_mode``). Images: a float tensor (C, H, W) or (B, C, H, W) in [0, 1],
    a PIL image or a list of PIL images. Raises ``ValueError`` when the mean or std are not known.
    """
    return Transform(resolve_data_config(model_or_cfg, **overrides))


__all__ = ["PRETRAINED_CFG_KEYS", "InputCheck", "Transform", "attach_pretrained_cfg", "create_transform",
           "make_pretrained_cfg", "model_input_size", "pil_to_tensor", "resolve_data_config"]
