"""Mimetic initialisation: the weight products it promises, and attention that starts local."""

import pytest
import torch

import vitedu
from vitedu import MultiHeadSelfAttention, VisionTransformer
from vitedu import cluttered as C
from vitedu import interpret as I
from vitedu.constants import CLUTTERED_MEAN, CLUTTERED_STD
from vitedu.deit import VisionTransformerDistilled
from vitedu.mimetic import identity_plus_noise, mimetic_init_

DIM, HEADS = 24, 3


def qk_product(attn, h):
    """W_q^T W_k of head h: q_i . k_j = x_i (W_q^T W_k) x_j^T. -> (dim, dim)"""
    w_q, w_k, _ = attn.qkv.weight.view(3, attn.num_heads, attn.head_dim, -1).double().unbind(0)
    return w_q[h].T @ w_k[h]


def vo_product(attn):
    """W_v^T W_o^T: the value path of all heads together, x -> x W_v^T W_o^T. -> (dim, dim)"""
    w_v = attn.qkv.weight[2 * attn.proj.in_features:].double()
    return w_v.T @ attn.proj.weight.double().T


def test_without_noise_the_products_are_identities():
    attn = MultiHeadSelfAttention(DIM, HEADS)
    mimetic_init_(attn, qk=(0.0, 0.7), vo=(0.0, 0.4))
    for h in range(HEADS):  # 0.7 times a projection onto head_dim = 8 of the 24 directions
        p = qk_product(attn, h)
        torch.testing.assert_close(p, p.T)
        torch.testing.assert_close(p @ p, 0.7 * p)
        assert torch.trace(p).item() == pytest.approx(0.7 * 8)
    torch.testing.assert_close(vo_product(attn), -0.4 * torch.eye(DIM, dtype=torch.float64))


def test_products_are_the_best_low_rank_fit_of_the_noisy_identity():
    attn = MultiHeadSelfAttention(DIM, HEADS)
    mimetic_init_(attn, generator=torch.Generator().manual_seed(3))
    g = torch.Generator().manual_seed(3)  # the same draws, in the same order: one per head, then the value path
    for h in range(HEADS):
        a = identity_plus_noise(DIM, 0.7, 0.7, g)
        u, s, vh = torch.linalg.svd(a)
        best_rank_8 = u[:, :8] @ torch.diag(s[:8]) @ vh[:8]  # Eckart-Young
        torch.testing.assert_close(qk_product(attn, h), best_rank_8, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(vo_product(attn), identity_plus_noise(DIM, 0.4, -0.4, g), atol=1e-5, rtol=1e-4)


def test_noise_has_the_promised_scale():
    a = identity_plus_noise(400, 0.7, 0.5, torch.Generator().manual_seed(0))
    noise = a - 0.5 * torch.eye(400, dtype=torch.float64)
    assert noise.mean().item() == pytest.approx(0.0, abs=0.01)
    assert noise.std().item() == pytest.approx(0.7 / 400**0.5, rel=0.02)
    assert torch.linalg.matrix_rank(noise) == 400  # every entry drawn on its own, not one row repeated


def test_without_noise_it_is_exactly_beta_times_the_identity_in_float64():
    exact = identity_plus_noise(5, 0.0, 0.7)
    assert exact.dtype == torch.float64 and torch.equal(exact, 0.7 * torch.eye(5, dtype=torch.float64))


def test_vit_option_reaches_every_block_and_keeps_timm_layout():
    plain = VisionTransformer(img_size=32, patch_size=8, embed_dim=DIM, depth=2, num_heads=HEADS)
    model = VisionTransformer(img_size=32, patch_size=8, embed_dim=DIM, depth=2, num_heads=HEADS,
                              weight_init="mimetic")
    assert list(model.state_dict()) == list(plain.state_dict())
    for block in model.blocks:  # W_v^T W_o^T ~ -0.4 I: the diagonal of the value path is negative
        assert torch.diagonal(vo_product(block.attn)).mean().item() == pytest.approx(-0.4, abs=0.1)
    # the MLPs and the head keep timm's initialisation
    assert model.blocks[0].mlp.fc1.weight.std().item() == pytest.approx(0.02, rel=0.1)


def test_deit_keeps_mimetic_attention_after_adding_its_head():
    model = VisionTransformerDistilled(img_size=32, patch_size=8, embed_dim=DIM, depth=1, num_heads=HEADS,
                                       weight_init="mimetic")
    assert torch.diagonal(vo_product(model.blocks[0].attn)).mean().item() == pytest.approx(-0.4, abs=0.1)


def test_attention_starts_local_with_mimetic_init_and_sincos_positions():
    images, _, _ = C.load_cluttered_digits("val", num_images=64)
    images = (images - CLUTTERED_MEAN[0]) / CLUTTERED_STD[0]
    distance = {}
    for name, kwargs in {"timm": {}, "mimetic": {"weight_init": "mimetic", "pos_embed": "learn_sincos"}}.items():
        torch.manual_seed(0)
        model = vitedu.create_model("vit_cluttered_digits", **kwargs).eval()
        distance[name] = I.mean_attention_distance(model.attention_maps(images), 8, 4).mean(-1)  # (depth,)
    # timm's random start attends about uniformly (16.5 px on this grid); mimetic starts nearer in every block
    torch.testing.assert_close(distance["timm"], torch.full((4,), 16.5), atol=0.2, rtol=0)
    assert (distance["mimetic"] < 14.5).all(), distance["mimetic"]
