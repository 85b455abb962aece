"""CaiT, "Going deeper with Image Transformers" (Touvron et al., 2021): three changes to the ViT.

1. LayerScale: every residual branch is multiplied per channel by a learned vector that starts tiny
   (1e-5 for 24 layers), so a deep stack begins close to the identity and trains stably.
2. Talking-heads attention (Shazeer et al., 2020): the h attention maps are mixed by two learned h x h
   matrices, once before the softmax and once after, so heads can share what they find.
3. Class attention: the patches are processed by self-attention alone, *without* [CLS]; then a few
   class-attention layers let only [CLS] query the (now fixed) patch tokens and gather the image summary.

    patches + positions -> L LayerScale blocks (talking heads) -> [CLS] attends to them (2 layers) -> head

Same keys and shapes as timm's ``Cait``; see ``_TIMM_NAMES`` for the one name that differs inside.
"""

from __future__ import annotations

import torch
from einops import rearrange
from torch import Tensor, nn

from .attention import AttentionBase, MultiHeadSelfAttention, split_heads
from .blocks import Block
from .patching import PatchEmbedding, learned_pos_embed
from .vit import ClassTokenClassifier, init_linear_layers


class TalkingHeadAttention(MultiHeadSelfAttention):
    """Multi-head self-attention whose heads exchange information through their attention maps.

    (batch, tokens, dim) -> (batch, tokens, dim), weights (batch, heads, tokens, tokens) or None

    ``proj_l`` mixes the heads' logits before the softmax, ``proj_w`` mixes the attention weights after
    it; both are Linear(heads, heads) applied along the head axis. With identity mixing this is ordinary
    multi-head attention. The mixed weights need not sum to one any more; the returned ones are those
    that multiply the values. Only ``attend`` differs from ``MultiHeadSelfAttention`` (the same ``qkv``
    and ``proj``); the weights are always computed, since the fused kernel cannot mix heads.
    """

    def __init__(
        self, dim: int, num_heads: int, qkv_bias: bool = True, attn_drop: float = 0.0, proj_drop: float = 0.0
    ) -> None:
        super().__init__(dim, num_heads, qkv_bias=qkv_bias, attn_drop=attn_drop, proj_drop=proj_drop, fused_attn=False)
        self.proj_l = nn.Linear(num_heads, num_heads)  # mixes the logits of the heads
        self.proj_w = nn.Linear(num_heads, num_heads)  # mixes the attention weights of the heads

    def attend(self, q: Tensor, k: Tensor, v: Tensor, need_weights: bool = False) -> tuple[Tensor, Tensor]:
        logits = (q * self.scale) @ k.transpose(-2, -1)  # (batch, heads, queries, keys)
        weights = _mix_heads(self.proj_l, logits).softmax(dim=-1)
        weights = _mix_heads(self.proj_w, weights)
        return self.attn_drop(weights) @ v, weights  # (batch, heads, queries, head_dim)


def _mix_heads(linear: nn.Linear, maps: Tensor) -> Tensor:
    """Apply ``linear`` across the head axis. (batch, heads, queries, keys) -> same shape."""
    return rearrange(linear(rearrange(maps, "b h q k -> b q k h")), "b q k h -> b h q k")


class ClassAttention(AttentionBase):
    """Attention in which only [CLS] (token 0) asks; all tokens, [CLS] included, answer.

    (batch, 1 + patches, dim) -> new [CLS] (batch, 1, dim), weights (batch, heads, 1, 1 + patches) or None

    The cost is linear in the number of patches (one query instead of T), and the patch tokens are
    left untouched: summarising the image is separated from processing it. Only ``project`` differs from
    ``MultiHeadSelfAttention`` (separate ``q``, ``k``, ``v`` Linears, as timm, and one query).
    """

    def __init__(
        self, dim: int, num_heads: int, qkv_bias: bool = True, attn_drop: float = 0.0, proj_drop: float = 0.0
    ) -> None:
        super().__init__(dim, num_heads, attn_drop=attn_drop, proj_drop=proj_drop)
        self.q = nn.Linear(dim, dim, bias=qkv_bias)
        self.k = nn.Linear(dim, dim, bias=qkv_bias)
        self.v = nn.Linear(dim, dim, bias=qkv_bias)
        self.proj = nn.Linear(dim, dim)

    def project(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        # x: (batch, 1 + patches, dim), [CLS] first
        q = split_heads(self.q(x[:, :1]), self.num_heads)  # (batch, heads, 1, head_dim): one query
        return q, split_heads(self.k(x), self.num_heads), split_heads(self.v(x), self.num_heads)


# timm's CaiT stores the LayerScale vectors as ``gamma_1``/``gamma_2`` directly on the block; vitedu's
# blocks hold them as ``ls1.gamma``/``ls2.gamma`` (blocks.LayerScale). These two hooks translate at the
# state_dict boundary only, so CaiT checkpoints load as they are and the block code is shared.
_TIMM_NAMES = {"ls1.gamma": "gamma_1", "ls2.gamma": "gamma_2"}


def _to_timm_names(module: nn.Module, state_dict: dict, prefix: str, local_metadata: dict) -> None:
    for ours, theirs in _TIMM_NAMES.items():
        if prefix + ours in state_dict:  # absent without LayerScale (layer_scale=False)
            state_dict[prefix + theirs] = state_dict.pop(prefix + ours)


def _from_timm_names(module: nn.Module, state_dict: dict, prefix: str, *args) -> None:
    for ours, theirs in _TIMM_NAMES.items():
        if prefix + theirs in state_dict:
            state_dict[prefix + ours] = state_dict.pop(prefix + theirs)


class LayerScaleBlock(Block):
    """A pre-norm block with LayerScale and talking-heads attention (CaiT's self-attention stage).

    (batch, patches, dim) -> (batch, patches, dim), weights (batch, heads, patches, patches) or None
    """

    def __init__(
        self, dim: int, num_heads: int, mlp_ratio: float = 4.0, qkv_bias: bool = True, proj_drop: float = 0.0,
        attn_drop: float = 0.0, drop_path: float = 0.0, init_values: float = 1e-4, norm_eps: float = 1e-6,
        attn_class: type[nn.Module] = TalkingHeadAttention, layer_scale: bool = True,
    ) -> None:
        if not init_values:
            raise ValueError(f"CaiT blocks always have LayerScale: init_values must be > 0, got {init_values!r}")
        attn = attn_class(dim, num_heads, qkv_bias=qkv_bias, attn_drop=attn_drop, proj_drop=proj_drop)
        # layer_scale=False is an ablation (chapter 9's study): the residual branches are added unscaled.
        super().__init__(dim, num_heads, mlp_ratio=mlp_ratio, qkv_bias=qkv_bias, proj_drop=proj_drop,
                         attn_drop=attn_drop, drop_path=drop_path, init_values=init_values if layer_scale else None,
                         norm_eps=norm_eps, attn_layer=attn)
        self.register_state_dict_post_hook(_to_timm_names)
        self.register_load_state_dict_pre_hook(_from_timm_names)


class ClassAttentionBlock(LayerScaleBlock):
    """A class-attention layer: [CLS] reads the patches, then passes through the MLP; patches stay as they are.

    patches (batch, patches, dim), cls (batch, 1, dim) -> cls (batch, 1, dim), weights or None
    """

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs, attn_class=ClassAttention)

    def forward(self, x: Tensor, cls: Tensor, need_weights: bool = False) -> tuple[Tensor, Tensor | None]:
        tokens = torch.cat([cls, x], dim=1)  # (batch, 1 + patches, dim)
        attended, weights = self.attn(self.norm1(tokens), need_weights=need_weights)
        cls = cls + self.drop_path1(self.ls1(attended))  # only [CLS] is updated
        cls = cls + self.drop_path2(self.ls2(self.mlp(self.norm2(cls))))
        return cls, weights


class Cait(ClassTokenClassifier):
    """Class-Attention in Image Transformers.

    (batch, in_chans, height, width) -> logits (batch, num_classes)

    ``depth`` LayerScale blocks on the patches (no [CLS], positions added to patches only), then
    ``depth_token_only`` class-attention blocks, the final LayerNorm on [CLS] + patches, and the head
    on [CLS]. Drop-path is the same in every block, as in the paper.
    ``attention_maps(images)`` -> (depth + depth_token_only, batch, heads, 1 + patches, 1 + patches), [CLS] first:
    the self-attention layers fill the patch rows and columns (row and column 0 stay zero: [CLS] has not joined),
    the class-attention layers fill row 0 only. Talking heads mix the heads after the softmax, so the self-attention
    rows need not sum to one.
    Three switches take one of CaiT's ideas out, for ablations (all on by default, as in the paper):
    ``talking_heads=False`` (ordinary multi-head attention in the self-attention stage), ``layer_scale=False``
    (no LayerScale anywhere) and ``class_attention=False`` ([CLS] still joins late, but as one more token of
    ordinary self-attention blocks that update the patches too).
    """

    def __init__(
        self,
        img_size: int | tuple[int, int] = 224,
        patch_size: int = 16,
        in_chans: int = 3,
        num_classes: int = 1000,
        embed_dim: int = 768,
        depth: int = 12,
        num_heads: int = 12,
        mlp_ratio: float = 4.0,
        qkv_bias: bool = True,
        drop_rate: float = 0.0,
        attn_drop_rate: float = 0.0,
        drop_path_rate: float = 0.0,
        init_values: float = 1e-4,
        depth_token_only: int = 2,
        mlp_ratio_token_only: float = 4.0,
        norm_eps: float = 1e-6,
        talking_heads: bool = True,
        layer_scale: bool = True,
        class_attention: bool = True,
    ) -> None:
        super().__init__()
        if depth_token_only < 1:
            raise ValueError(
                f"CaiT needs at least one class-attention layer to read the image into [CLS]; got "
                f"depth_token_only={depth_token_only}. The paper uses 2."
            )
        self.num_classes = num_classes
        self.embed_dim = embed_dim
        self.patch_embed = PatchEmbedding(
            img_size=img_size, patch_size=patch_size, in_chans=in_chans, embed_dim=embed_dim
        )
        self.cls_token = nn.Parameter(nn.init.trunc_normal_(torch.zeros(1, 1, embed_dim), std=0.02))
        self.pos_embed = learned_pos_embed(self.patch_embed.num_patches, embed_dim)  # patches only
        self.pos_drop = nn.Dropout(drop_rate)
        common = dict(dim=embed_dim, num_heads=num_heads, qkv_bias=qkv_bias, init_values=init_values,
                      norm_eps=norm_eps, layer_scale=layer_scale)
        self.blocks = nn.ModuleList(
            LayerScaleBlock(mlp_ratio=mlp_ratio, proj_drop=drop_rate, attn_drop=attn_drop_rate,
                            drop_path=drop_path_rate, **common,
                            attn_class=TalkingHeadAttention if talking_heads else MultiHeadSelfAttention)
            for _ in range(depth)
        )
        # class_attention=False (an ablation): the last layers are ordinary self-attention over [CLS] and the
        # patches, [CLS] still joining late, so the patches are updated too; no talking heads there either.
        self.class_attention = class_attention
        self.blocks_token_only = nn.ModuleList(
            ClassAttentionBlock(mlp_ratio=mlp_ratio_token_only, **common) if class_attention else
            LayerScaleBlock(mlp_ratio=mlp_ratio_token_only, **common, attn_class=MultiHeadSelfAttention)
            for _ in range(depth_token_only)
        )
        self.norm = nn.LayerNorm(embed_dim, eps=norm_eps)
        self.head_drop = nn.Dropout(drop_rate)
        self.head = nn.Linear(embed_dim, num_classes) if num_classes > 0 else nn.Identity()
        init_linear_layers(self)

    def _encode(self, images: Tensor, need_weights: bool = False) -> tuple[Tensor, list[Tensor]]:
        x = self.pos_drop(self.patch_embed(images) + self.pos_embed)  # (batch, patches, dim)
        maps = []
        for block in self.blocks:
            x, weights = block(x, need_weights=need_weights)
            maps.append(weights)
        cls = self.cls_token.expand(x.shape[0], -1, -1)  # (batch, 1, dim): [CLS] enters only now
        if not self.class_attention:  # the ablation: [CLS] joins as one more token of self-attention
            x = torch.cat([cls, x], dim=1)  # (batch, 1 + patches, dim)
            for block in self.blocks_token_only:
                x, weights = block(x, need_weights=need_weights)
                maps.append(weights)
            return self.norm(x), maps
        for block in self.blocks_token_only:
            cls, weights = block(x, cls, need_weights=need_weights)
            maps.append(weights)
        return self.norm(torch.cat([cls, x], dim=1)), maps  # (batch, 1 + patches, dim)
