"""ConViT (d'Ascoli et al., 2021): a ViT whose first layers can start out as convolutions.

Gated positional self-attention (GPSA) gives every head two attention maps and a learned gate:

    A_h = (1 - sigmoid(lambda_h)) * softmax(Q K^T / sqrt(d_k))
          +  sigmoid(lambda_h) * softmax(r_ij . v_h)

The content map is ordinary attention. The positional map depends only on where key j sits relative to
query i, through r_ij = (dx, dy, dx^2 + dy^2). Initialised with v_h = alpha * (2 Delta_x, 2 Delta_y, -1),
its logit is -alpha * [(dx - Delta_x)^2 + (dy - Delta_y)^2] + const: a Gaussian blob centred at the
offset Delta_h, one offset per head on a k x k grid (k = sqrt(h)) - together the heads cover a k x k
neighbourhood, like a convolution, but each blob is a soft, learnable positional attention: at alpha = 1 a head
puts 32 % on the patch at Delta_h and 96 % within one patch of it (9 heads); with 4 heads the centres fall between
patches, 19 % on each of the 4 around Delta_h. Only a large alpha with integer offsets (k odd) approaches one tap of
a convolution per head; with k even it tends to an average over a 2 x 2 block (chapter 9 prints these numbers).
Each head learns how far to trust position (lambda_h up) or content (lambda_h down).

    patches + positions -> GPSA blocks -> insert [CLS]
                        -> ordinary self-attention blocks -> head([CLS])

Same keys and shapes as timm's ``ConVit`` (``attn.qk``, ``attn.v``, ``attn.pos_proj``, ``attn.gating_param``).
"""

from __future__ import annotations

import math

import torch
from einops import rearrange
from torch import Tensor, nn

from .attention import AttentionBase, split_heads
from .blocks import Block, drop_path_rates
from .patching import PatchEmbedding, learned_pos_embed, pair
from .vit import ClassTokenClassifier, init_linear_layers


def relative_positions(grid_size: int | tuple[int, int]) -> Tensor:
    """Offsets between every pair of patches on a grid, as GPSA's positional attention reads them.

    -> (patches, patches, 3): entry [i, j] = (dx, dy, dx^2 + dy^2), where (dx, dy) = position of key j
    minus position of query i in (column, row) units; patches are numbered row by row.
    """
    rows, cols = torch.meshgrid(*(torch.arange(n) for n in pair(grid_size)), indexing="ij")
    rows, cols = rows.flatten(), cols.flatten()
    dx = cols[None, :] - cols[:, None]  # (queries, keys)
    dy = rows[None, :] - rows[:, None]
    return torch.stack([dx, dy, dx**2 + dy**2], dim=-1).float()


class GatedPositionalSelfAttention(AttentionBase):
    """GPSA: per head, a gated mix of content attention and a learned positional attention map.

    (batch, patches, dim) -> (batch, patches, dim), weights (batch, heads, patches, patches) or None

    Works on patch tokens only (no [CLS]: it has no position). ``gating_param`` holds lambda_h (1 at
    initialisation, i.e. sigmoid(1) = 73 % positional). ``local_init`` sets the convolution-like start.
    """

    def __init__(
        self,
        dim: int,
        num_heads: int,
        grid_size: int | tuple[int, int],
        qkv_bias: bool = False,
        attn_drop: float = 0.0,
        proj_drop: float = 0.0,
        locality_strength: float = 1.0,
        content_only: bool = False,
    ) -> None:
        super().__init__(dim, num_heads, attn_drop=attn_drop, proj_drop=proj_drop, fused_attn=False)
        kernel = math.isqrt(num_heads)
        if kernel * kernel != num_heads:
            squares = [n * n for n in range(1, 6)]
            raise ValueError(
                f"GPSA's local initialisation puts one head at each offset of a k x k kernel, so num_heads "
                f"must be a perfect square; got {num_heads}. Use one of {squares} (and a matching embed_dim)."
            )
        self.locality_strength = locality_strength
        self.qk = nn.Linear(dim, 2 * dim, bias=qkv_bias)
        self.v = nn.Linear(dim, dim, bias=qkv_bias)
        self.proj = nn.Linear(dim, dim)
        self.pos_proj = nn.Linear(3, num_heads)  # v_h: one row per head, read against r_ij = (dx, dy, d^2)
        self.gating_param = nn.Parameter(torch.ones(num_heads))  # lambda_h
        # content_only=True (an ablation): every gate frozen shut, sigmoid(lambda_h) = 0, content attention alone.
        self.content_only = content_only
        if content_only:
            self.gating_param.requires_grad_(False)
        # A function of the grid only: a buffer that follows .to(device), not saved in checkpoints.
        self.register_buffer("rel_indices", relative_positions(grid_size), persistent=False)

    def attention_centres(self) -> Tensor:
        """The offsets Delta_h = (dx, dy) the local initialisation gives each head. -> (heads, 2)

        Head h = i + k * j sits at (j - c, i - c) on a k x k kernel with centre c, as in the paper's code.
        """
        kernel = math.isqrt(self.num_heads)
        centre = (kernel - 1) / 2
        head = torch.arange(self.num_heads)
        return torch.stack([head // kernel - centre, head % kernel - centre], dim=-1).float()

    @torch.no_grad()
    def local_init(self) -> None:
        """Start convolution-like: v_h = alpha * (2 Delta_x, 2 Delta_y, -1), and values = the identity."""
        self.v.weight.copy_(torch.eye(self.v.weight.shape[0]))
        centres = self.attention_centres().to(self.pos_proj.weight)
        self.pos_proj.weight[:, :2] = 2 * centres
        self.pos_proj.weight[:, 2] = -1
        self.pos_proj.weight.mul_(self.locality_strength)

    def positional_attention(self) -> Tensor:
        """Each head's attention from position alone, the same for every image. -> (heads, patches, patches)"""
        return rearrange(self.pos_proj(self.rel_indices), "q k h -> h q k").softmax(dim=-1)

    def project(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        # x: (batch, patches, dim)
        if x.shape[1] != self.rel_indices.shape[0]:
            raise ValueError(
                f"GPSA was built for {self.rel_indices.shape[0]} patches and got {x.shape[1]} tokens: it "
                "attends over patches only (insert [CLS] after the GPSA layers) at the model's image size."
            )
        q, k = (split_heads(part, self.num_heads) for part in self.qk(x).chunk(2, dim=-1))  # [q | k]
        return q, k, split_heads(self.v(x), self.num_heads)

    def attend(self, q: Tensor, k: Tensor, v: Tensor, need_weights: bool = False) -> tuple[Tensor, Tensor]:
        content = ((q @ k.transpose(-2, -1)) * self.scale).softmax(dim=-1)  # (batch, heads, queries, keys)
        if self.content_only:
            return self.attn_drop(content) @ v, content
        gate = torch.sigmoid(self.gating_param).view(-1, 1, 1)  # (heads, 1, 1): share of position
        weights = (1 - gate) * content + gate * self.positional_attention()  # rows still sum to one
        return self.attn_drop(weights) @ v, weights  # (batch, heads, patches, head_dim)


class ConVit(ClassTokenClassifier):
    """The ConViT classifier.

    (batch, in_chans, height, width) -> logits (batch, num_classes)

    ``local_up_to_layer`` GPSA blocks on the patches, then [CLS] is inserted and the remaining blocks are
    ordinary multi-head self-attention; final LayerNorm and a head on [CLS]. ``embed_dim`` is the full
    width D (timm's ConVit takes the width per head and multiplies it by num_heads).
    ``attention_maps(images)`` -> (depth, batch, heads, 1 + patches, 1 + patches), [CLS] first; in the GPSA layers
    row 0 and column 0 are zero ([CLS] joins after them), so a patch query's row is ``maps[layer][:, :, 1 + i, 1:]``.
    Two switches for ablations (defaults as in the paper): ``locality_init=False`` leaves GPSA with timm's random
    start instead of the convolution-like one; ``content_only=True`` freezes every gate shut (content attention
    alone; the positional parameters stay, unused).
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
        qkv_bias: bool = False,
        drop_rate: float = 0.0,
        attn_drop_rate: float = 0.0,
        drop_path_rate: float = 0.0,
        local_up_to_layer: int = 3,
        locality_strength: float = 1.0,
        norm_eps: float = 1e-6,
        locality_init: bool = True,
        content_only: bool = False,
    ) -> None:
        super().__init__()
        if not 0 <= local_up_to_layer < depth:
            raise ValueError(
                f"local_up_to_layer={local_up_to_layer} must be in [0, depth={depth}): [CLS] joins after the "
                f"GPSA layers, and at least one ordinary layer must follow so it can gather the image. "
                f"The paper uses 10 GPSA layers out of 12."
            )
        self.num_classes = num_classes
        self.embed_dim = embed_dim
        self.local_up_to_layer = local_up_to_layer
        self.patch_embed = PatchEmbedding(
            img_size=img_size, patch_size=patch_size, in_chans=in_chans, embed_dim=embed_dim
        )
        self.cls_token = nn.Parameter(nn.init.trunc_normal_(torch.zeros(1, 1, embed_dim), std=0.02))
        self.pos_embed = learned_pos_embed(self.patch_embed.num_patches, embed_dim)  # patches only
        self.pos_drop = nn.Dropout(drop_rate)
        grid = self.patch_embed.grid_size
        self.blocks = nn.ModuleList(
            Block(
                embed_dim, num_heads, mlp_ratio=mlp_ratio, qkv_bias=qkv_bias, proj_drop=drop_rate,
                attn_drop=attn_drop_rate, drop_path=dp, norm_eps=norm_eps,
                attn_layer=GatedPositionalSelfAttention(
                    embed_dim, num_heads, grid_size=grid, qkv_bias=qkv_bias, attn_drop=attn_drop_rate,
                    proj_drop=drop_rate, locality_strength=locality_strength, content_only=content_only,
                ) if i < local_up_to_layer else None,  # None: the block's ordinary multi-head attention
            )
            for i, dp in enumerate(drop_path_rates(drop_path_rate, depth))
        )
        self.norm = nn.LayerNorm(embed_dim, eps=norm_eps)
        self.head_drop = nn.Dropout(drop_rate)
        self.head = nn.Linear(embed_dim, num_classes) if num_classes > 0 else nn.Identity()
        init_linear_layers(self)  # timm's initialisation, then the convolution-like start of GPSA
        for block in self.blocks[:local_up_to_layer] if locality_init else []:
            block.attn.local_init()

    def _encode(self, images: Tensor, need_weights: bool = False) -> tuple[Tensor, list[Tensor]]:
        x = self.pos_drop(self.patch_embed(images) + self.pos_embed)  # (batch, patches, dim)
        maps = []
        for i, block in enumerate(self.blocks):
            if i == self.local_up_to_layer:  # the local stage is over: [CLS] joins the patches
                x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1)
            x, weights = block(x, need_weights=need_weights)
            maps.append(weights)
        return self.norm(x), maps  # (batch, 1 + patches, dim)

    def gates(self) -> Tensor:
        """sigmoid(lambda) of every GPSA layer: the share of positional attention. -> (gpsa_layers, heads)"""
        lambdas = [block.attn.gating_param.detach() for block in self.blocks[: self.local_up_to_layer]]
        if lambdas and self.blocks[0].attn.content_only:  # the ablation's gates are shut
            return torch.zeros(len(lambdas), len(lambdas[0]))
        return torch.sigmoid(torch.stack(lambdas)) if lambdas else self.cls_token.new_zeros(0, 0)
