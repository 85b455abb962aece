"""DeiT's distilled ViT (Touvron et al., 2021): a second learned token, [DIST], beside [CLS].

    [CLS] [DIST] patch_1 ... patch_N  -> L encoder blocks
                                      -> head([CLS]) and head_dist([DIST])

The two tokens go through the same blocks and attend to everything, but they are trained towards
different targets: [CLS] towards the true labels, [DIST] towards a teacher's predictions (a convnet in
the paper). At test time the two heads' logits are averaged. The losses of both kinds of distillation live here
too: ``distillation_loss`` (a teacher's targets for one head, Hinton et al.) and ``distillation_token_loss``
(DeiT's two heads); the teacher is ``vitedu.cnn.ConvTeacher``. Same keys and shapes as timm's
``VisionTransformerDistilled`` (``dist_token``, ``head_dist``), so its checkpoints load directly.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .patching import learned_pos_embed
from .vit import VisionTransformer


class VisionTransformerDistilled(VisionTransformer):
    """A ViT with a distillation token and a second head.

    (batch, in_chans, height, width) -> logits (batch, num_classes), the average of the two heads;
    in training mode with ``distilled_training`` on: a tuple (cls_logits, dist_logits), one per head, so
    that the loss can give each its own target (``distillation_token_loss``).
    Accepts VisionTransformer's arguments; pooling is always by token ([CLS] and [DIST]).
    ``attention_maps(images)`` -> (depth, batch, heads, 2 + patches, 2 + patches): token 0 is [CLS], token 1 [DIST].
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


def distillation_loss(logits: Tensor, teacher_logits: Tensor, temperature: float = 0.0) -> Tensor:
    """Hard (temperature 0): cross-entropy with the teacher's argmax as the label, as in DeiT. Soft: the
    KL divergence between the softened distributions, times T^2 so gradients keep their scale (Hinton).

    Used on a plain ViT's single head this is the Hinton-style baseline: the same head is pulled towards
    the labels and towards the teacher. DeiT gives the teacher its own token: see distillation_token_loss.
    Logits are (batch, classes); returns a scalar."""
    if temperature <= 0:
        return F.cross_entropy(logits, teacher_logits.argmax(-1))
    student = F.log_softmax(logits / temperature, dim=-1)  # (batch, classes)
    teacher = F.log_softmax(teacher_logits / temperature, dim=-1)
    return F.kl_div(student, teacher, reduction="batchmean", log_target=True) * temperature**2


def distillation_token_loss(
    cls_logits: Tensor, dist_logits: Tensor, labels: Tensor, teacher_logits: Tensor, alpha: float = 0.5,
    temperature: float = 0.0, label_smoothing: float = 0.0,
) -> Tensor:
    """DeiT's distillation through attention: each of the two heads has its own target.

    (1 - alpha) * CE([CLS] head, labels) + alpha * distillation_loss([DIST] head, teacher, temperature).
    With alpha = 0.5 and temperature 0 this is DeiT's hard distillation,
    1/2 CE(cls_logits, y) + 1/2 CE(dist_logits, argmax teacher). All logits are (batch, classes).
    """
    label_loss = F.cross_entropy(cls_logits, labels, label_smoothing=label_smoothing)
    return (1 - alpha) * label_loss + alpha * distillation_loss(dist_logits, teacher_logits, temperature)
