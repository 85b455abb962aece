"""Mimetic initialisation of self-attention (Trockman & Kolter, 2023): start attention out local.

A ViT trained on a lot of data (JFT-300M) learns attention heads that look at their neighbours in the
first blocks and at the whole image later (ViT paper, Fig. 7 right). Trained on a small dataset from
timm's random initialisation it may never learn to look nearby: on chapter 8's cluttered digits every
block of such a model attends about uniformly. Trockman & Kolter noticed that in pre-trained ViTs two
products of weights have a simple structure, and initialise them that way:

    W_q^T W_k  ~  alpha_1 Z_1 + beta_1 I
                  (per head; queries match keys that resemble them)
    W_v^T W_o^T ~ alpha_2 Z_2 - beta_2 I
                  (the value path, all heads together)

with Z a random matrix of entries N(0, 1/dim). The paper uses (alpha_1, beta_1) = (0.7, 0.7) and
(alpha_2, beta_2) = (0.4, 0.4). Each product is split back into two factors by an SVD,
U S V^T = A, W_left = U sqrt(S), W_right = sqrt(S) V^T, truncated to the head size for queries and keys.

Why attention starts local: a token's query is then close to its own (normalised) input, so q_i . k_j is
large when tokens i and j are alike. With 2-D sin-cos positions (``pos_embed="learn_sincos"``) neighbouring
patches are alike, so every head starts out weighting its neighbourhood more (on chapter 8's model: a mean
attention distance of 12 to 14 px at the start, against 16.5 px for uniform attention), and training
decides which heads stay local. With timm's random positions neighbours are no more alike than distant
patches, so the start favours each token itself, not its neighbourhood. No parameter is added: it is an
initialisation only, and the state_dict is timm's.
"""

from __future__ import annotations

import torch
from torch import Tensor

from .attention import MultiHeadSelfAttention

# (alpha, beta) of the query-key and of the value-output products, as in the paper.
QK_ALPHA_BETA = (0.7, 0.7)
VO_ALPHA_BETA = (0.4, 0.4)


def _factor(product: Tensor) -> tuple[Tensor, Tensor]:
    """A = L @ R with L = U sqrt(S), R = sqrt(S) V^T (the balanced SVD factors). (d, d) -> (d, d), (d, d)"""
    u, s, vh = torch.linalg.svd(product)
    root = s.sqrt()
    return u * root, root[:, None] * vh


def identity_plus_noise(dim: int, alpha: float, beta: float, generator: torch.Generator | None = None) -> Tensor:
    """alpha Z + beta I, Z with entries N(0, 1/dim): a random matrix with an identity in it. -> (dim, dim)"""
    z = torch.randn(dim, dim, generator=generator, dtype=torch.float64) / dim**0.5
    return alpha * z + beta * torch.eye(dim, dtype=torch.float64)


def mimetic_init_(
    attn: MultiHeadSelfAttention,
    qk: tuple[float, float] = QK_ALPHA_BETA,
    vo: tuple[float, float] = VO_ALPHA_BETA,
    generator: torch.Generator | None = None,
) -> None:
    """Set ``attn.qkv`` and ``attn.proj`` weights in place so that, per head, W_q^T W_k ~ a1 Z + b1 I
    (rank head_dim) and, over all heads, W_v^T W_o^T ~ a2 Z - b2 I. Biases are left as they are."""
    dim, head_dim = attn.proj.in_features, attn.head_dim
    with torch.no_grad():
        w_q, w_k, w_v = attn.qkv.weight.view(3, attn.num_heads, head_dim, dim).unbind(0)  # (heads, head_dim, dim)
        for h in range(attn.num_heads):
            left, right = _factor(identity_plus_noise(dim, *qk, generator))  # left @ right ~ W_q^T W_k
            w_q[h] = left[:, :head_dim].T  # q = x W_q^T with W_q^T = left[:, :head_dim]: (head_dim, dim)
            w_k[h] = right[:head_dim]
        alpha, beta = vo
        left, right = _factor(identity_plus_noise(dim, alpha, -beta, generator))  # left @ right ~ W_v^T W_o^T
        w_v.copy_(left.T.reshape(attn.num_heads, head_dim, dim))
        attn.proj.weight.copy_(right.T)
