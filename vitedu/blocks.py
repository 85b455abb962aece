"""The Transformer encoder block, pre-norm as in ViT:

    x = x + Attention(LayerNorm(x))
    x = x + MLP(LayerNorm(x))

plus the two regularisers later ViTs add: stochastic depth (DropPath, Huang et al., 2016) and
LayerScale (Touvron et al., 2021, CaiT). Both are ``nn.Identity`` - no parameters, no cost - when off.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from .attention import MultiHeadSelfAttention


class Mlp(nn.Module):
    """Two Linear layers with a GELU between: dim -> hidden_dim -> dim, applied to every token alone.

    (batch, tokens, dim) -> (batch, tokens, dim)
    """

    def __init__(self, dim: int, hidden_dim: int, drop: float = 0.0) -> None:
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden_dim)
        self.act = nn.GELU()  # exact (erf) GELU, as in the ViT paper and Hugging Face's "gelu"
        self.drop1 = nn.Dropout(drop)
        self.fc2 = nn.Linear(hidden_dim, dim)
        self.drop2 = nn.Dropout(drop)

    def forward(self, x: Tensor) -> Tensor:
        return self.drop2(self.fc2(self.drop1(self.act(self.fc1(x)))))


class DropPath(nn.Module):
    """Stochastic depth: during training, skip the whole residual branch for a random subset of samples.

    (batch, ...) -> (batch, ...). Kept samples are scaled by 1 / (1 - drop_prob), so the expected
    output is unchanged and evaluation needs no rescaling.
    """

    def __init__(self, drop_prob: float) -> None:
        super().__init__()
        self.drop_prob = drop_prob

    def forward(self, x: Tensor) -> Tensor:
        if not self.training or self.drop_prob == 0.0:
            return x
        keep_prob = 1.0 - self.drop_prob
        keep = torch.empty((x.shape[0],) + (1,) * (x.dim() - 1), dtype=x.dtype, device=x.device)
        return x * keep.bernoulli_(keep_prob) / keep_prob  # one coin per sample, broadcast over tokens

    def extra_repr(self) -> str:
        return f"drop_prob={self.drop_prob}"


class LayerScale(nn.Module):
    """Multiply each channel of a residual branch by a learned factor that starts small (CaiT).

    (batch, tokens, dim) -> (batch, tokens, dim)
    """

    def __init__(self, dim: int, init_values: float = 1e-5) -> None:
        super().__init__()
        self.gamma = nn.Parameter(init_values * torch.ones(dim))

    def forward(self, x: Tensor) -> Tensor:
        return x * self.gamma


def drop_path_rates(drop_path_rate: float, depth: int) -> list[float]:
    """Stochastic depth's linear schedule, one rate per block: block i of ``depth`` drops its residual branches
    with probability drop_path_rate * i / (depth - 1), from 0 in the first block to ``drop_path_rate`` in the last
    (Huang et al., 2016; timm's and DeiT's ``torch.linspace(0, drop_path_rate, depth)``). Deeper blocks drop more:
    the early ones compute features every later block relies on."""
    if not 0.0 <= drop_path_rate < 1.0:
        raise ValueError(
            f"drop_path_rate is the probability of skipping the last block's residual branches, so it must be in "
            f"[0, 1); got {drop_path_rate}. Small values such as 0.1 are usual; 0 switches stochastic depth off."
        )
    return [drop_path_rate * i / max(depth - 1, 1) for i in range(depth)]


class Block(nn.Module):
    """One pre-norm Transformer encoder block (timm's names: norm1, attn, norm2, mlp, ls1/ls2).

    (batch, tokens, dim) -> (batch, tokens, dim), attention weights (batch, heads, tokens, tokens) or None
    """

    def __init__(
        self,
        dim: int,
        num_heads: int,
        mlp_ratio: float = 4.0,
        qkv_bias: bool = True,
        proj_drop: float = 0.0,
        attn_drop: float = 0.0,
        drop_path: float = 0.0,
        init_values: float | None = None,
        norm_eps: float = 1e-6,
        attn_layer: nn.Module | None = None,
    ) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=norm_eps)
        # Later ViTs change only how tokens attend (CaiT's talking heads, ConViT's gated positional
        # attention): they pass their own module, called like MultiHeadSelfAttention, and reuse the rest.
        if attn_layer is None:
            attn_layer = MultiHeadSelfAttention(
                dim, num_heads, qkv_bias=qkv_bias, attn_drop=attn_drop, proj_drop=proj_drop
            )
        self.attn = attn_layer
        self.ls1 = LayerScale(dim, init_values) if init_values else nn.Identity()
        self.drop_path1 = DropPath(drop_path) if drop_path > 0 else nn.Identity()
        self.norm2 = nn.LayerNorm(dim, eps=norm_eps)
        self.mlp = Mlp(dim, int(dim * mlp_ratio), drop=proj_drop)
        self.ls2 = LayerScale(dim, init_values) if init_values else nn.Identity()
        self.drop_path2 = DropPath(drop_path) if drop_path > 0 else nn.Identity()

    def forward(self, x: Tensor, need_weights: bool = False) -> tuple[Tensor, Tensor | None]:
        attended, weights = self.attn(self.norm1(x), need_weights=need_weights)
        x = x + self.drop_path1(self.ls1(attended))  # tokens exchange information
        x = x + self.drop_path2(self.ls2(self.mlp(self.norm2(x))))  # each token is processed alone
        return x, weights
