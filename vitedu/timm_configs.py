"""timm's ViT architecture names: which ones vitedu implements exactly, and why it refuses the others.

A timm checkpoint on the hub is a ``config.json`` naming its ``"architecture"`` (e.g.
``vit_base_patch16_224``; the part after a dot, as in ``vit_base_patch16_224.augreg2_in21k_ft_in1k``,
is a *tag* naming the training run, not the architecture) plus ``model.safetensors``. The name fixes
everything the tensors cannot record: the number of heads, the activation, the pooling and where the
LayerNorms sit. vitedu's ``VisionTransformer`` is timm's plain pre-norm ViT, so it loads exactly the
architectures listed in ``TIMM_ARCHITECTURES``; its successors of chapter 9 (DeiT-distilled, CaiT, ConViT) load
under the timm names listed in ``TIMM_VARIANTS``. Both are views of the one registry (``vitedu.registry.MODELS``,
the entries whose weights come from timm). Every other architecture is refused with the reason.

``tools/checkpoint_table.py`` lists one representative architecture per family with the outcome the tests check
against timm itself.
"""

from __future__ import annotations

import inspect
import re
from typing import Any

from torch import Tensor, nn

from .cait import Cait
from .convit import ConVit
from .deit import VisionTransformerDistilled
from .registry import MODELS, timm_names
from .vit import VisionTransformer

# timm architecture name -> VisionTransformer kwargs (timm's own values, see timm/models/vision_transformer.py).
TIMM_ARCHITECTURES: dict[str, dict[str, Any]] = {
    name: MODELS[name].kwargs for name in timm_names() if MODELS[name].model_class is VisionTransformer
}
# timm's successors of the ViT that vitedu implements (chapter 9), with timm's names, keys and parameter counts.
TIMM_VARIANTS: tuple[str, ...] = tuple(name for name in timm_names() if name not in TIMM_ARCHITECTURES)

# The key only each successor has, so that a state_dict reveals its family: (model class, family, key pattern).
_FAMILY_KEYS = [
    (VisionTransformerDistilled, "DeiT-distilled", r"^dist_token$"),
    (Cait, "CaiT", r"^blocks_token_only\."),
    (ConVit, "ConViT", r"\.attn\.gating_param$"),
]

# What vitedu lacks, recognised from the architecture name (for what the tensors cannot show, e.g. post-norm).
_NAME_REASONS = [
    (r"_rpn_", "post-norm blocks (timm's ResPostBlock: LayerNorm after each residual branch, not before)"),
    (r"relpos|beit", "relative position biases inside attention instead of absolute position embeddings"),
    (r"beit", "separate query and value biases (BEiT's q_bias/v_bias; vitedu's ViT uses one qkv bias)"),
    (r"rope|eva", "rotary position embeddings (RoPE) instead of learned absolute ones"),
    (r"_reg\d", "register tokens (extra learned tokens besides [CLS], Darcet et al. 2024)"),
    (r"siglip(?!.*_gap)|_map_", "an attention-pool head ('map': a learned query attends over the tokens)"),
    (r"_gap_", "average pooling after the final LayerNorm (vitedu's mean pooling normalises after pooling)"),
    (r"clip|_xp_", "a LayerNorm before the first block (norm_pre) and LayerNorm eps 1e-5 (CLIP)"),
    (r"quickgelu", "the QuickGELU activation x * sigmoid(1.702 x) instead of the exact GELU"),
    (r"swiglu|eva02|giant_patch14_dinov2|giant_patch14_reg", "a SwiGLU MLP (gated: two input projections)"),
    (r"deit3", "position embeddings that skip [CLS] (no_embed_class, DeiT III)"),
    (r"distilled|^cait_|^convit_", "a DeiT-distilled, CaiT or ConViT configuration vitedu has no name for (it names "
                                   f"{', '.join(TIMM_VARIANTS)}; for another, build the model of vitedu.deit, "
                                   "vitedu.cait or vitedu.convit with its configuration and use load_state_dict)"),
    (r"_r\d+_|resnet|hybrid", "a CNN stem (hybrid ViT) instead of a linear patch embedding"),
    (r"\d+x\d+_|parallel", "parallel attention and MLP branches in each block"),
]

# What vitedu lacks, recognised from the tensors' names: (regular expression on a key, explanation).
_KEY_REASONS = [
    (r"\.(q_bias|v_bias)$", "'q_bias'/'v_bias' are BEiT-style biases (query and value only); vitedu's ViT uses one "
                            "qkv bias"),
    (r"relative_position|rel_pos", "relative position biases inside attention (BEiT, relpos ViTs)"),
    (r"(^|\.)rope|freqs", "rotary position embeddings (RoPE, e.g. EVA-02)"),
    (r"^reg_token$", "register tokens ('reg_token': extra learned tokens besides [CLS])"),
    (r"^attn_pool\.", "an attention-pool head ('attn_pool', timm's global_pool='map')"),
    (r"\.mlp\.(fc1_g|fc1_x|w1|w2|w3|w12)\.", "a SwiGLU MLP (gated: two input projections)"),
    (r"^norm_pre\.", "a LayerNorm before the first block ('norm_pre', CLIP-style)"),
    (r"\.attn\.(q_norm|k_norm)\.", "normalised queries and keys ('q_norm'/'k_norm', qk_norm=True)"),
    (r"\.(attn|mlp)\.norm\.", "a LayerNorm inside attention or the MLP (scale_attn_norm/scale_mlp_norm)"),
    (r"^dist_token$|^head_dist\.", "a distillation token and head (DeiT-distilled)"),
    (r"^patch_embed\.backbone\.", "a CNN stem (hybrid ViT)"),
    (r"\.gamma_[12]$", "BEiT-style LayerScale names ('gamma_1'/'gamma_2')"),
    (r"^patch_embed\.norm\.", "a LayerNorm after the patch embedding"),
]


def split_tag(name: str) -> tuple[str, str | None]:
    """Split a timm name into architecture and tag.

    ``"timm/vit_base_patch16_224.augreg2_in21k_ft_in1k"`` -> ``("vit_base_patch16_224", "augreg2_in21k_ft_in1k")``
    """
    name = name.removeprefix("timm/").removeprefix("hf-hub:timm/").removeprefix("hf_hub:timm/")
    arch, _, tag = name.partition(".")
    return arch, tag or None


def timm_model_class(arch_or_tagged: str) -> type[nn.Module]:
    """The vitedu class of a timm architecture vitedu loads: ``VisionTransformer`` or one of its successors."""
    arch, _ = split_tag(arch_or_tagged)
    return MODELS[arch].model_class if arch in TIMM_VARIANTS else VisionTransformer


def constructor_defaults(model_class: type[nn.Module]) -> dict[str, Any]:
    """Every argument of a model class with its default, following ``**kwargs`` to the parent class."""
    defaults: dict[str, Any] = {}
    for cls in model_class.__mro__[:-1]:  # the last is object
        if cls is nn.Module:
            break
        params = inspect.signature(cls.__init__).parameters.values()
        defaults = {p.name: p.default for p in params if p.default is not p.empty} | defaults
        if not any(p.kind is p.VAR_KEYWORD for p in params):
            break
    return defaults


def state_family(state: dict[str, Tensor]) -> tuple[type[nn.Module], str, str]:
    """(class, family, key) of the ViT successor a timm state_dict's keys reveal; (VisionTransformer, "ViT", "")
    when they reveal none."""
    for model_class, family, pattern in _FAMILY_KEYS:
        key = next((k for k in state if re.search(pattern, k)), None)
        if key is not None:
            return model_class, family, key
    return VisionTransformer, "ViT", ""


def family_archs(model_class: type[nn.Module]) -> list[str]:
    """The timm names vitedu loads for a model class, e.g. ``Cait`` -> ``["cait_xxs24_224", "cait_s24_224"]``."""
    return [name for name in (*TIMM_ARCHITECTURES, *TIMM_VARIANTS) if timm_model_class(name) is model_class]


def name_reasons(arch: str) -> list[str]:
    """What a timm architecture has that vitedu lacks, recognised from its name."""
    return [reason for pattern, reason in _NAME_REASONS if re.search(pattern, arch)]


def key_reasons(state: dict[str, Tensor]) -> list[str]:
    """What a timm state_dict holds that vitedu's ViT lacks, recognised from its keys and shapes."""
    reasons = [reason for pattern, reason in _KEY_REASONS if any(re.search(pattern, k) for k in state)]
    fc1, fc2 = state.get("blocks.0.mlp.fc1.weight"), state.get("blocks.0.mlp.fc2.weight")
    if fc1 is not None and fc2 is not None and fc1.dim() == fc2.dim() == 2 and fc1.shape[0] == 2 * fc2.shape[1]:
        reasons.append("a packed gated MLP (SwiGLU/GeGLU: fc1 is twice as wide as fc2's input)")
    if "patch_embed.proj.weight" in state and "pos_embed" not in state:
        reasons.append("no learned absolute position embedding ('pos_embed' is missing: rotary or no positions)")
    if "patch_embed.proj.weight" in state and "patch_embed.proj.bias" not in state:
        reasons.append("a patch embedding without bias (CLIP-style)")
    if "pos_embed" in state and state["pos_embed"].dim() == 3 and "patch_embed.proj.weight" in state:
        tokens = state["pos_embed"].shape[1]
        if "cls_token" in state and _is_square(tokens) and not _is_square(tokens - 1):
            reasons.append("position embeddings that skip [CLS] ('pos_embed' has no slot for it: no_embed_class)")
    has_pool_head = any(k.startswith("attn_pool.") for k in state)
    pooled_by_norm = "pos_embed" in state and "norm.weight" in state and not has_pool_head
    if "cls_token" not in state and pooled_by_norm and "fc_norm.weight" not in state:
        reasons.append("average pooling after the final LayerNorm ('norm' but no 'fc_norm'; vitedu normalises "
                       "after pooling)")
    if "cls_token" in state and "fc_norm.weight" in state:
        reasons.append("a [CLS] token together with average pooling ('fc_norm'); vitedu's mean pooling has no [CLS]")
    return reasons


def _is_square(n: int) -> bool:
    return n > 0 and int(n**0.5) ** 2 == n


# timm model_args that vitedu implements, and the value of every other timm argument that it can accept.
_ARG_NAMES = {"img_size", "patch_size", "in_chans", "num_classes", "embed_dim", "depth", "num_heads", "mlp_ratio",
              "qkv_bias", "init_values"}
_TIMM_DEFAULTS = {"class_token": True, "no_embed_class": False, "reg_tokens": 0, "pre_norm": False,
                  "final_norm": True, "fc_norm": None, "qk_norm": False, "proj_bias": True, "pos_embed": "learn",
                  "act_layer": None, "norm_layer": None, "mlp_layer": None, "block_fn": None, "embed_layer": None,
                  "dynamic_img_size": False, "dynamic_img_pad": False, "patch_bias": True, "weight_init": "",
                  "global_pool": "token", "scale_attn_norm": False, "scale_mlp_norm": False, "attn_layer": None}
# timm model_args of CaiT and ConViT that vitedu implements, and their other arguments at their defaults.
_VARIANT_ARG_NAMES = {"depth_token_only", "mlp_ratio_token_only", "local_up_to_layer", "locality_strength"}
_TIMM_DEFAULTS |= {"use_pos_embed": True, "hybrid_backbone": None}
# Arguments that change nothing in the forward pass of an eval-mode model with the recorded image size.
_HARMLESS = {"drop_rate", "pos_drop_rate", "patch_drop_rate", "proj_drop_rate", "attn_drop_rate", "drop_path_rate",
             "dynamic_img_size", "weight_init", "fix_init"}


def timm_kwargs(arch_or_tagged: str, model_args: dict[str, Any] | None = None,
                pretrained_cfg: dict[str, Any] | None = None, state: dict[str, Tensor] | None = None) -> dict[str, Any]:
    """Keyword arguments of ``timm_model_class(arch)`` for a timm architecture, refusing what vitedu lacks.

    Every argument of the class is given (the architecture's value, else the class default), so that an override
    can be checked against each one. ``model_args`` and ``pretrained_cfg`` are the fields of the same name in
    timm's hub ``config.json``: ``model_args`` holds the arguments given to ``timm.create_model`` (they override
    the architecture's), ``pretrained_cfg["input_size"]`` the resolution the weights were trained at. ``state``
    (the weights), when given, adds what its keys reveal to the reasons of a refusal.
    """
    if not isinstance(arch_or_tagged, str):
        raise ValueError(
            f"arch should be a timm architecture name such as 'vit_base_patch16_224', got {arch_or_tagged!r}"
        )
    arch, _ = split_tag(arch_or_tagged)
    if arch not in TIMM_ARCHITECTURES and arch not in TIMM_VARIANTS:
        reasons = name_reasons(arch) or ["an architecture vitedu has no exact counterpart for"]
        seen = key_reasons(state or {})
        raise ValueError(
            f"timm architecture {arch!r} is not supported: it has {'; '.join(reasons)}"
            + (f". Its weights show {'; '.join(seen)}" if seen else "")
            + f". vitedu loads only the {len(TIMM_ARCHITECTURES) + len(TIMM_VARIANTS)} timm architectures it "
            f"computes exactly (identical logits), listed in vitedu.timm_configs.TIMM_ARCHITECTURES and "
            f"TIMM_VARIANTS, e.g. 'vit_base_patch16_224'"
        )
    model_class = timm_model_class(arch)
    config = MODELS[arch].kwargs
    kwargs = {**constructor_defaults(model_class), **config}
    input_size = (pretrained_cfg or {}).get("input_size")
    if input_size:
        kwargs["img_size"] = tuple(input_size[1:])
    accepted = (_ARG_NAMES | _VARIANT_ARG_NAMES) & set(kwargs)
    unsupported = []
    for key, value in (model_args or {}).items():
        if key in accepted:
            kwargs[key] = tuple(value) if isinstance(value, list) else value
        elif key == "global_pool" and value in ("token", ""):
            continue
        elif key not in _HARMLESS and _TIMM_DEFAULTS.get(key, object()) != value:
            unsupported.append(f"{key}={value!r}")
    if unsupported:
        raise ValueError(
            f"timm architecture {arch!r} was built with model_args that vitedu does not implement: "
            f"{', '.join(unsupported)}; vitedu's {model_class.__name__} is timm's with [CLS] pooling and these "
            f"arguments at their defaults"
        )
    if model_class is ConVit:  # timm's ConVit takes the width per head: ours is the full width D
        per_head = (model_args or {}).get("embed_dim", config["embed_dim"] // config["num_heads"])
        kwargs["embed_dim"] = per_head * kwargs["num_heads"]
    if isinstance(kwargs["img_size"], tuple) and kwargs["img_size"][0] == kwargs["img_size"][1]:
        kwargs["img_size"] = kwargs["img_size"][0]
    return kwargs
