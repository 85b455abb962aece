"""What a state_dict says about its model: a strict load that names every mismatch, and the configuration of a
timm ViT (or DeiT-distilled, CaiT, ConViT) read off its tensors' shapes.

A bare state_dict records the patch size, width, depth and classes in its shapes, and its keys reveal the family
(``dist_token``: DeiT-distilled, ``blocks_token_only``: CaiT, ``gating_param``: ConViT); it does not record the
number of heads, the activation, the pooling or where the LayerNorms sit (``vitedu.pretrained.from_pretrained``
asks for the architecture's name, ``arch=``, or assumes timm's plain ViT and says so).
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

from torch import Tensor, nn

from .cait import Cait
from .convit import ConVit
from .deit import VisionTransformerDistilled
from .hf_configs import exact_mlp_ratio
from .timm_configs import family_archs, key_reasons, split_tag, state_family, timm_kwargs, timm_model_class
from .vit import VisionTransformer


def load_checked(model: nn.Module, state: dict[str, Tensor], source: str | Path | None = None) -> nn.Module:
    """``load_state_dict`` that names every missing key, unexpected key and shape mismatch at once.

    When the keys reveal a feature vitedu's ViT lacks (e.g. BEiT's ``q_bias``), the error says so.
    """
    expected = model.state_dict()
    missing = sorted(set(expected) - set(state))
    unexpected = sorted(set(state) - set(expected))
    shapes = [
        f"{k}: checkpoint {tuple(state[k].shape)} vs model {tuple(expected[k].shape)}"
        for k in expected
        if k in state and state[k].shape != expected[k].shape
    ]
    if missing or unexpected or shapes:
        lines = [f"the model does not match {source or 'the checkpoint'}:"]
        lines += [f"  missing from checkpoint: {fold_keys(missing)}"] if missing else []
        lines += [f"  unexpected in checkpoint: {fold_keys(unexpected)}"] if unexpected else []
        lines += [f"  shape mismatch: {s}" for s in shapes[:8]]
        if type(model) is VisionTransformer:  # the reasons name what a plain ViT lacks
            lines += [f"  it has {r}, which vitedu's ViT does not implement" for r in key_reasons(state)]
        lines.append("Build the model with the checkpoint's configuration (patch size, width, depth, heads, classes).")
        raise ValueError("\n".join(lines))
    model.load_state_dict(state)
    return model


def fold_keys(keys: list[str]) -> list[str]:
    """Key names with block numbers folded (``blocks.N.attn.q_bias``), so 12 blocks make one entry."""
    return sorted({re.sub(r"^blocks\.\d+\.", "blocks.N.", k) for k in keys})


KNOWN_HEADS = {192: 3, 384: 6, 768: 12, 1024: 16, 1280: 16}  # timm's Ti/S/B/L/H: 64-wide heads, 80 for H


def infer_timm_kwargs(state: dict[str, Tensor], source: Path,
                       model_class: type[nn.Module] = VisionTransformer) -> dict[str, Any]:
    """Read a ViT's configuration off the shapes in a timm state_dict (everything but the number of heads).

    For CaiT and ConViT: what their tensors record (width, patch, channels, resolution, classes, depths).
    """
    required = ["patch_embed.proj.weight", "pos_embed", "blocks.0.mlp.fc1.weight"]
    missing = [k for k in required if k not in state]
    if missing:
        raise ValueError(
            f"{source} is not a timm ViT state_dict: it lacks {missing}. Its keys: {fold_keys(list(state))[:12]}"
        )
    dims = {"patch_embed.proj.weight": 4, "pos_embed": 3, "blocks.0.mlp.fc1.weight": 2, "head.weight": 2}
    wrong = [f"{k} {tuple(state[k].shape)} (expected {n} axes)" for k, n in dims.items() if k in state
             and state[k].dim() != n]
    if wrong:
        raise ValueError(f"{source} is not a timm ViT state_dict: {', '.join(wrong)}")
    embed_dim, in_chans, patch, _ = state["patch_embed.proj.weight"].shape
    # Tokens with a position besides the patches: [CLS] (and DeiT's [DIST]); CaiT's and ConViT's [CLS] has none.
    prefix = {VisionTransformer: int("cls_token" in state), VisionTransformerDistilled: 2}.get(model_class, 0)
    grid = math.isqrt(state["pos_embed"].shape[1] - prefix)
    shapes = dict(
        img_size=grid * patch, patch_size=patch, in_chans=in_chans, embed_dim=embed_dim,
        depth=count_blocks(state, "blocks"),
        num_classes=state["head.weight"].shape[0] if "head.weight" in state else 0,
        mlp_ratio=exact_mlp_ratio(state["blocks.0.mlp.fc1.weight"].shape[0], embed_dim),
    )
    if model_class is Cait:
        return shapes | dict(depth_token_only=count_blocks(state, "blocks_token_only"))
    if model_class is ConVit:
        return shapes | dict(local_up_to_layer=sum(k.endswith(".attn.gating_param") for k in state))
    return shapes | dict(
        pool="cls" if prefix else "mean",
        qkv_bias="blocks.0.attn.qkv.bias" in state,
        init_values=1e-5 if "blocks.0.ls1.gamma" in state else None,  # LayerScale on; the file's gammas replace 1e-5
    )


def count_blocks(state: dict[str, Tensor], stage: str) -> int:
    """How many blocks a stage holds: ``blocks.0.*`` ... ``blocks.11.*`` -> 12."""
    return len({k.split(".")[1] for k in state if k.startswith(f"{stage}.")})


def model_class_for_state(state: dict[str, Tensor], arch: str | None, source: Path) -> type[nn.Module]:
    """The vitedu class for a state_dict: the ViT successor its keys reveal, which ``arch`` must then name."""
    found, family, key = state_family(state)
    expected = timm_model_class(arch) if arch is not None else VisionTransformer
    if found is expected:
        return found
    width = state["patch_embed.proj.weight"].shape[0] if "patch_embed.proj.weight" in state else None
    names = [n for n in family_archs(found) if timm_kwargs(n)["embed_dim"] == width]
    hint = (f"pass arch={names[0]!r}" if names else f"vitedu names no {family} of width {width} (it names "
            f"{', '.join(family_archs(found))}): build a {found.__name__} with its configuration and load_state_dict")
    if arch is None:
        raise ValueError(f"{source} holds a {family} state_dict (it has {key!r}); its tensors do not record the "
                         f"number of heads and the rest of its architecture: {hint}")
    has = f"it has {key!r}" if key else "it has none of 'dist_token', 'blocks_token_only', 'gating_param'"
    raise ValueError(f"{source} is not a {split_tag(arch)[0]}: its keys are those of a {family} ({has}): {hint}")


__all__ = ["KNOWN_HEADS", "count_blocks", "fold_keys", "infer_timm_kwargs", "load_checked", "model_class_for_state"]
