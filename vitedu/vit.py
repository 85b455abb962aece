"""The Vision Transformer (Dosovitskiy et al., 2021), with timm's parameter names.

    image -> patches -> linear embedding -> [CLS] + positions
          -> L encoder blocks -> LayerNorm -> head

The state_dict has the same keys and shapes as ``timm.models.vision_transformer.VisionTransformer``
for the same configuration, so timm checkpoints load directly (and ``vitedu.from_pretrained`` converts
Hugging Face ones).
"""

from __future__ import annotations

from typing import Optional

import torch
from einops import repeat
from torch import Tensor, nn

from .blocks import Block, drop_path_rates
from .mimetic import mimetic_init_
from .patching import PatchEmbedding, learned_pos_embed, resample_pos_embed, sincos_pos_embed_2d


def init_linear_layers(model: nn.Module) -> None:
    """timm's default initialisation: truncated normal (std 0.02) for every Linear weight, zero biases."""
    for module in model.modules():
        if isinstance(module, nn.Linear):
            nn.init.trunc_normal_(module.weight, std=0.02)
            if module.bias is not None:
                nn.init.zeros_(module.bias)


def on_model_tokens(weights: Tensor, num_tokens: int) -> Tensor:
    """Place one layer's attention weights on the model's tokens, with zeros where a token takes no part.

    (..., queries, keys) -> (..., num_tokens, num_tokens)

    The rule every vitedu model keeps: a layer's keys are the model's *last* ``keys`` tokens (a layer that runs
    before [CLS] joins sees the patches only), and its queries are the first ``queries`` of those keys (all of them
    in self-attention; [CLS] alone in CaiT's class attention). A layer over every token is returned as it is.
    """
    queries, keys = weights.shape[-2:]
    if queries == keys == num_tokens:
        return weights
    if keys > num_tokens or queries > keys:
        raise ValueError(
            f"a layer with {queries} queries and {keys} keys does not fit on {num_tokens} tokens: the keys must be "
            f"some of the model's tokens and the queries some of the keys"
        )
    full = weights.new_zeros(*weights.shape[:-2], num_tokens, num_tokens)
    first = num_tokens - keys  # tokens before the layer's first key took no part in it
    full[..., first : first + queries, first:] = weights
    return full


class ClassTokenClassifier(nn.Module):
    """The outer shape of every vitedu classifier (ViT, DeiT, CaiT, ConViT): ``_encode`` the image into tokens
    ([CLS] first, after the final norm), pool them into one vector per image, then ``head_drop`` and ``head``.

    Subclasses build ``head_drop`` and ``head`` and define ``_encode``; the pooling is [CLS] (token 0) unless they
    override ``pool_features`` (ViT with pool="mean"). DeiT overrides ``forward_head`` for its second head.
    """

    head_drop: nn.Module
    head: nn.Module

    def _encode(self, images: Tensor, need_weights: bool = False) -> tuple[Tensor, list[Tensor]]:
        raise NotImplementedError(f"{type(self).__name__} must define _encode(images, need_weights)")

    def forward_features(self, images: Tensor) -> Tensor:
        """(batch, in_chans, height, width) -> (batch, tokens, embed_dim), after the final norm; the prefix tokens
        ([CLS], and DeiT's [DIST]) come first, then the patches row by row."""
        return self._encode(images)[0]

    def pool_features(self, features: Tensor) -> Tensor:
        """(batch, tokens, embed_dim) -> (batch, embed_dim): the [CLS] token."""
        return features[:, 0]

    def forward_head(self, features: Tensor, pre_logits: bool = False) -> Tensor:
        """(batch, tokens, embed_dim) -> (batch, num_classes); pre_logits=True stops before the head."""
        pooled = self.head_drop(self.pool_features(features))  # (batch, embed_dim)
        return pooled if pre_logits else self.head(pooled)

    def forward(self, images: Tensor) -> Tensor:
        return self.forward_head(self.forward_features(images))

    @torch.no_grad()
    def attention_maps(self, images: Tensor) -> Tensor:
        """The attention weights of every attention layer, on the tokens that ``forward_features`` returns.

        (batch, in_chans, height, width) -> (layers, batch, heads, tokens, tokens)

        The same type for every model (ViT, DeiT, CaiT, ConViT). Row i of a layer's map is how token i spreads its
        attention over the tokens (columns); the tokens are the prefix tokens ([CLS]; DeiT's [DIST]) and then the
        patches, row by row. ``layers`` counts every attention layer (CaiT: depth + depth_token_only). A layer that
        does not see every token keeps the same axes, with zero weight where a token takes no part: in ConViT's
        GPSA layers and CaiT's self-attention layers [CLS] has not joined yet (row 0 and column 0 are zero); in
        CaiT's class-attention layers only [CLS] asks (every patch row is zero). Such a zero row is a token the
        layer leaves unchanged, which is what ``vitedu.interpret.attention_rollout`` then models (see
        :func:`on_model_tokens`).
        """
        features, maps = self._encode(images, need_weights=True)
        return torch.stack([on_model_tokens(weights, features.shape[1]) for weights in maps])


class VisionTransformer(ClassTokenClassifier):
    """A plain ViT classifier.

    (batch, in_chans, height, width) -> logits (batch, num_classes)

    pool="cls" classifies from a learned [CLS] token prepended to the patches (ViT paper); pool="mean"
    has no [CLS] token, averages the patch tokens and applies the final LayerNorm after pooling
    (``fc_norm``, as timm/BEiT/MAE). pos_embed="sincos" uses fixed 2-D sin-cos positions instead of
    learned ones (same parameter, frozen); "learn_sincos" learns them, starting from sin-cos.
    weight_init="mimetic" starts every attention layer out local (``vitedu.mimetic``). Images of another
    size than ``img_size`` are accepted: the position embeddings are resampled to the new patch grid on
    the fly. ``attention_maps(images)`` -> (depth, batch, heads, tokens, tokens), every block over every token.
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
        pool: str = "cls",
        drop_rate: float = 0.0,
        attn_drop_rate: float = 0.0,
        drop_path_rate: float = 0.0,
        norm_eps: float = 1e-6,
        init_values: float | None = None,
        pos_embed: str = "learn",
        weight_init: str = "",
    ) -> None:
        super().__init__()
        if pool not in ("cls", "mean"):
            raise ValueError(f"pool must be 'cls' (a [CLS] token) or 'mean' (average of patch tokens), got {pool!r}")
        if pos_embed not in ("learn", "sincos", "learn_sincos"):
            raise ValueError(f"pos_embed must be 'learn' (random start), 'learn_sincos' (learned, starting at 2-D "
                             f"sin-cos) or 'sincos' (fixed 2-D sin-cos), got {pos_embed!r}")
        if weight_init not in ("", "mimetic"):
            raise ValueError(f"weight_init must be '' (timm's default) or 'mimetic' (attention starts local, "
                             f"see vitedu.mimetic), got {weight_init!r}")
        self.pool = pool
        self.num_classes = num_classes
        self.embed_dim = embed_dim
        self.num_prefix_tokens = 1 if pool == "cls" else 0

        self.patch_embed = PatchEmbedding(
            img_size=img_size, patch_size=patch_size, in_chans=in_chans, embed_dim=embed_dim
        )
        self.cls_token = nn.Parameter(torch.zeros(1, 1, embed_dim)) if pool == "cls" else None
        num_tokens = self.num_prefix_tokens + self.patch_embed.num_patches
        if pos_embed == "learn":
            self.pos_embed = learned_pos_embed(num_tokens, embed_dim)
        else:
            grid = self.patch_embed.grid_size
            sincos = sincos_pos_embed_2d(embed_dim, grid, num_prefix_tokens=self.num_prefix_tokens)
            self.pos_embed = nn.Parameter(sincos, requires_grad=pos_embed == "learn_sincos")
        self.pos_drop = nn.Dropout(drop_rate)

        self.blocks = nn.ModuleList(
            Block(embed_dim, num_heads, mlp_ratio=mlp_ratio, qkv_bias=qkv_bias, proj_drop=drop_rate,
                  attn_drop=attn_drop_rate, drop_path=dp, init_values=init_values, norm_eps=norm_eps)
            for dp in drop_path_rates(drop_path_rate, depth)  # deeper blocks drop more
        )
        # Final LayerNorm: on every token before [CLS] pooling, or on the average after mean pooling.
        self.norm = nn.LayerNorm(embed_dim, eps=norm_eps) if pool == "cls" else nn.Identity()
        self.fc_norm = nn.LayerNorm(embed_dim, eps=norm_eps) if pool == "mean" else nn.Identity()
        self.head_drop = nn.Dropout(drop_rate)
        self.head = nn.Linear(embed_dim, num_classes) if num_classes > 0 else nn.Identity()
        self.weight_init = weight_init
        self._init_weights()

    def _init_weights(self) -> None:
        if self.cls_token is not None:
            nn.init.normal_(self.cls_token, std=1e-6)  # a tiny [CLS], as timm
        init_linear_layers(self)
        if self.weight_init == "mimetic":
            for block in self.blocks:
                mimetic_init_(block.attn)

    def _pos_embed(self, x: Tensor, grid_size: tuple[int, int]) -> Tensor:
        """Prepend [CLS] and add positions. (batch, patches, dim) -> (batch, tokens, dim)"""
        pos_embed = self.pos_embed
        if grid_size != self.patch_embed.grid_size:  # another resolution: resample the position grid
            pos_embed = resample_pos_embed(
                pos_embed, grid_size, old_grid=self.patch_embed.grid_size, num_prefix_tokens=self.num_prefix_tokens
            )
        prefix = [token.expand(x.shape[0], -1, -1) for token in self._prefix_tokens()]
        x = torch.cat([*prefix, x], dim=1)
        return self.pos_drop(x + pos_embed)

    def _prefix_tokens(self) -> list[Tensor]:
        """The learned tokens put in front of the patches, each (1, 1, dim): [CLS], or none with mean pooling."""
        return [self.cls_token] if self.cls_token is not None else []

    def forward(self, images: Tensor, keep: Optional[Tensor] = None) -> Tensor:
        """(batch, in_chans, height, width) -> logits (batch, num_classes).

        ``keep`` (batch, kept) int64, optional: the patches that go on into the blocks, as row-major indices into
        the patch grid, each with its own position embedding; the others are dropped right after the patch
        embedding (token dropping). The blocks' cost grows with the tokens, so a window of 4 x 4 of the 8 x 8
        patches costs about a quarter of the whole image (``vitedu.cluttered.window_patches``). None keeps all."""
        return self.forward_head(self._encode(images, keep=keep)[0])

    def _encode(self, images: Tensor, need_weights: bool = False,
                keep: Optional[Tensor] = None) -> tuple[Tensor, list[Tensor]]:
        x = self.patch_embed(images)  # (batch, patches, dim)
        patch = self.patch_embed.patch_size
        x = self._pos_embed(x, (images.shape[-2] // patch[0], images.shape[-1] // patch[1]))
        if keep is not None:  # positions are added first, so every kept patch knows where it came from
            prefix, patches = x[:, : self.num_prefix_tokens], x[:, self.num_prefix_tokens :]
            kept = torch.gather(patches, 1, repeat(keep, "b n -> b n d", d=x.shape[-1]))  # (batch, kept, dim)
            x = torch.cat([prefix, kept], dim=1)  # (batch, prefix + kept, dim)
        maps = []
        for block in self.blocks:
            x, weights = block(x, need_weights=need_weights)
            maps.append(weights)
        return self.norm(x), maps  # (batch, tokens, dim)

    def pool_features(self, features: Tensor) -> Tensor:
        """(batch, tokens, embed_dim) -> (batch, embed_dim): [CLS], or the mean of the patch tokens then fc_norm."""
        pooled = features[:, 0] if self.pool == "cls" else features[:, self.num_prefix_tokens :].mean(dim=1)
        return self.fc_norm(pooled)  # an Identity with pool="cls": the tokens were normed in _encode
