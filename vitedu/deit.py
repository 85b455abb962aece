"""DeiT's distilled ViT (Touvron et al., 2021): a second learned token, [DIST], beside [CLS].

    [CLS] [DIST] patch_1 ... patch_N  -> L encoder blocks -> head([CLS]) and head_dist([DIST])

The two tokens go through the same blocks and attend to everything, but they are trained towards
different targets: [CLS] towards the true labels, [DIST] towards a teacher's predictions (a convnet in
the paper). At test time the two heads' logits are averaged. Same keys and shapes as timm's
``VisionTransformerDistilled`` (``dist_token``, ``head_dist``), so its checkpoints load directly.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from .patching import learned_pos_embed
from .vit import VisionTransformer


class VisionTransformerDistilled(VisionTransformer):
    """A ViT with a distillation token and a second head.

    (batch, in_chans, height, width) -> logits (batch, num_classes), the average of the two heads;
    in training mode with ``distilled_training`` on: a tuple (cls_logits, dist_logits), one per head, so
    that the loss can give each its own target (``vitedu.train.distillation_token_loss``).
    Accepts VisionTransformer's arguments; pooling is always by token ([CLS] and [DIST]).
    """

    def __init__(self, *args, distilled_training: bool = True, **kwargs) -> None:
        if kwargs.get("pool", "cls") != "cls" or kwargs.get("pos_embed", "learn") != "learn":
            raise ValueError(
                f"a distilled ViT classifies from its [CLS] and [DIST] tokens with learned positions; got "
                f"pool={kwargs.get('pool')!r}, pos_embed={kwargs.get('pos_embed')!r}. Leave pool='cls' and "
                "pos_embed='learn' (or use VisionTransformer for mean pooling)."
            )
        super().__init__(*args, **kwargs)
        self.num_prefix_tokens = 2  # [CLS] and [DIST]: both get a position, neither is a patch
        self.dist_token = nn.Parameter(nn.init.trunc_normal_(torch.zeros(1, 1, self.embed_dim), std=0.02))
        self.pos_embed = learned_pos_embed(self.num_prefix_tokens + self.patch_embed.num_patches, self.embed_dim)
        self.head_dist = nn.Linear(self.embed_dim, self.num_classes) if self.num_classes > 0 else nn.Identity()
        self.distilled_training = distilled_training
        self._init_weights()  # the new head gets timm's initialisation too

    def _prefix_tokens(self) -> list[Tensor]:
        return [self.cls_token, self.dist_token]  # token 0 is [CLS], token 1 is [DIST]

    def set_distilled_training(self, enable: bool = True) -> None:
        """On: training-mode forward returns (cls_logits, dist_logits). Off: the average, as in eval."""
        self.distilled_training = enable

    def forward_head(self, features: Tensor, pre_logits: bool = False) -> Tensor | tuple[Tensor, Tensor]:
        """(batch, tokens, embed_dim) -> (batch, num_classes), or the pair of head outputs (see the class)."""
        cls, dist = self.head_drop(features[:, 0]), self.head_drop(features[:, 1])  # each (batch, embed_dim)
        if pre_logits:
            return (cls + dist) / 2
        cls_logits, dist_logits = self.head(cls), self.head_dist(dist)  # each (batch, num_classes)
        if self.distilled_training and self.training:
            return cls_logits, dist_logits
        return (cls_logits + dist_logits) / 2
