"""Attention against independent references: a hand-computed example, PyTorch's fused kernel and
``torch.nn.MultiheadAttention``."""

import math

import pytest
import torch
from torch import nn

from vitedu.attention import MultiHeadSelfAttention, scaled_dot_product_attention


def test_hand_computed_2x2():
    q = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    k = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    v = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    # logits = q k^T / sqrt(2) = I / sqrt(2): each query prefers its own key with weight sigmoid(1/sqrt 2)
    w_self = 1 / (1 + math.exp(-1 / math.sqrt(2)))
    expected_weights = torch.tensor([[w_self, 1 - w_self], [1 - w_self, w_self]])
    expected = torch.tensor(
        [[w_self * 1 + (1 - w_self) * 3, w_self * 2 + (1 - w_self) * 4],
         [(1 - w_self) * 1 + w_self * 3, (1 - w_self) * 2 + w_self * 4]]
    )
    out, weights = scaled_dot_product_attention(q, k, v)
    torch.testing.assert_close(weights, expected_weights)
    torch.testing.assert_close(out, expected)


@pytest.mark.parametrize("shape", [(5, 8), (2, 5, 8), (2, 3, 5, 8), (2, 2, 3, 5, 8)])
def test_fused_matches_explicit_for_any_leading_dims(device, shape):
    q, k, v = (torch.randn(shape, device=device) for _ in range(3))
    explicit, weights = scaled_dot_product_attention(q, k, v, need_weights=True)
    fused, none = scaled_dot_product_attention(q, k, v, need_weights=False)
    assert none is None
    assert weights.shape == shape[:-1] + (shape[-2],)
    torch.testing.assert_close(weights.sum(-1), torch.ones(shape[:-1], device=device))
    torch.testing.assert_close(fused, explicit, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(explicit, torch.nn.functional.scaled_dot_product_attention(q, k, v))


@pytest.mark.parametrize("kind", ["bool", "additive"])
def test_masks_agree_between_paths(device, kind):
    q, k, v = (torch.randn(2, 4, 6, 8, device=device) for _ in range(3))
    allowed = torch.rand(6, 6, device=device) > 0.3
    allowed.fill_diagonal_(True)  # every query may attend to at least itself
    mask = allowed if kind == "bool" else torch.zeros(6, 6, device=device).masked_fill(~allowed, float("-inf"))
    explicit, weights = scaled_dot_product_attention(q, k, v, mask=mask)
    fused, _ = scaled_dot_product_attention(q, k, v, mask=mask, need_weights=False)
    assert torch.all(weights[..., ~allowed] == 0)
    torch.testing.assert_close(fused, explicit, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("kind", ["bool", "additive"])
def test_fully_masked_row_gives_zeros_on_both_paths(device, kind):
    q, k, v = (torch.randn(2, 4, 8, device=device, requires_grad=True) for _ in range(3))
    allowed = torch.tensor([[1, 1, 0, 0], [1, 0, 0, 0], [0, 0, 0, 0], [1, 1, 1, 1]], device=device).bool()
    mask = allowed if kind == "bool" else torch.zeros(4, 4, device=device).masked_fill(~allowed, float("-inf"))
    explicit, weights = scaled_dot_product_attention(q, k, v, mask=mask)
    fused, _ = scaled_dot_product_attention(q, k, v, mask=mask, need_weights=False)
    assert torch.all(weights[:, 2] == 0) and torch.all(explicit[:, 2] == 0)
    torch.testing.assert_close(weights[:, [0, 1, 3]].sum(-1), torch.ones(2, 3, device=device))
    torch.testing.assert_close(fused, explicit, atol=1e-5, rtol=1e-5)
    explicit.sum().backward()
    assert all(torch.isfinite(t.grad).all() for t in (q, k, v))


def test_custom_scale_is_used():
    q, k, v = (torch.randn(3, 4) for _ in range(3))
    _, weights = scaled_dot_product_attention(q, k, v, scale=1.0)
    torch.testing.assert_close(weights, (q @ k.T).softmax(-1))


def test_cross_attention_shapes():
    q, k, v = torch.randn(2, 3, 8), torch.randn(2, 7, 8), torch.randn(2, 7, 5)
    out, weights = scaled_dot_product_attention(q, k, v)
    assert out.shape == (2, 3, 5) and weights.shape == (2, 3, 7)


@pytest.mark.parametrize(
    "shapes, message",
    [
        (((4, 8), (4, 6), (4, 8)), "same feature size d_k"),
        (((4, 8), (4, 8), (5, 8)), "exactly one value"),
        (((8,), (8,), (8,)), "shape \\(..., tokens, features\\)"),
    ],
)
def test_bad_shapes_explain_themselves(shapes, message):
    with pytest.raises(ValueError, match=message):
        scaled_dot_product_attention(*(torch.randn(s) for s in shapes))


def _copy_to_torch_mha(ours: MultiHeadSelfAttention, dim: int, heads: int) -> nn.MultiheadAttention:
    ref = nn.MultiheadAttention(dim, heads, batch_first=True)
    with torch.no_grad():
        ref.in_proj_weight.copy_(ours.qkv.weight)  # same [q | k | v] row layout, heads as (h, d)
        ref.in_proj_bias.copy_(ours.qkv.bias)
        ref.out_proj.weight.copy_(ours.proj.weight)
        ref.out_proj.bias.copy_(ours.proj.bias)
    return ref.eval()


def test_multi_head_matches_torch_multihead_attention(device):
    dim, heads = 48, 6
    ours = MultiHeadSelfAttention(dim, heads).to(device).eval()
    ref = _copy_to_torch_mha(ours, dim, heads).to(device)
    x = torch.randn(3, 10, dim, device=device)
    expected, expected_weights = ref(x, x, x, need_weights=True, average_attn_weights=False)
    out, weights = ours(x, need_weights=True)
    fused, none = ours(x)
    assert none is None
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(fused, expected, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(weights, expected_weights, atol=1e-6, rtol=1e-4)


@pytest.mark.parametrize("fused_attn", [True, False])
def test_the_module_attends_with_its_scale_attribute(fused_attn):
    """``scale`` is the module's knob (timm's name): 0 makes every weight equal, so each query averages the values;
    ``attend`` computes no weights unless asked (or the explicit path, which has them anyway, is on)."""
    torch.manual_seed(0)
    attn = MultiHeadSelfAttention(16, 2, fused_attn=fused_attn).eval()
    q, k, v = attn.project(torch.randn(2, 5, 16))  # each (batch, heads, tokens, head_dim)
    out, weights = attn.attend(q, k, v)
    assert (weights is None) == fused_attn
    torch.testing.assert_close(out, scaled_dot_product_attention(q, k, v, scale=attn.scale)[0])
    attn.scale = 0.0
    out, _ = attn.attend(q, k, v)
    torch.testing.assert_close(out, v.mean(-2, keepdim=True).expand_as(v))


def test_heads_add_no_parameters():
    counts = {h: sum(p.numel() for p in MultiHeadSelfAttention(96, h).parameters()) for h in (1, 2, 4, 8)}
    assert set(counts.values()) == {4 * 96 * 96 + 4 * 96}


def test_explicit_module_path_when_fused_is_off():
    torch.manual_seed(0)
    fused = MultiHeadSelfAttention(32, 4).eval()
    explicit = MultiHeadSelfAttention(32, 4, fused_attn=False).eval()
    explicit.load_state_dict(fused.state_dict())
    x = torch.randn(2, 5, 32)
    torch.testing.assert_close(explicit(x)[0], fused(x)[0], atol=1e-6, rtol=1e-5)


def test_attention_dropout_only_in_training():
    attn = MultiHeadSelfAttention(32, 4, attn_drop=0.5)
    x = torch.randn(2, 5, 32)
    attn.eval()
    torch.testing.assert_close(attn(x)[0], attn(x)[0])
    attn.train()
    assert not torch.allclose(attn(x)[0], attn(x)[0])


def test_dim_not_divisible_by_heads():
    with pytest.raises(ValueError, match=r"not divisible by num_heads=5.*\[1, 2, 3, 4, 6, 8, 12, 16, 24, 48\]"):
        MultiHeadSelfAttention(48, 5)


# ------------------------------------------------------------------ behaviours found by mutation testing
@pytest.mark.parametrize("need_weights", [True, False])
def test_attention_dropout_drops_weights_at_rate_p_and_rescales(need_weights):
    """With v = identity the output *is* the (dropped) weight matrix: a share p of the weights is zeroed, the
    rest scaled by 1 / (1 - p), on both paths; the returned weights are those before dropout."""
    torch.manual_seed(0)
    q, k = torch.randn(2, 64, 16), torch.randn(2, 64, 16)
    v = torch.eye(64).expand(2, 64, 64)
    clean, _ = scaled_dot_product_attention(q, k, v)
    dropped, weights = scaled_dot_product_attention(q, k, v, dropout_p=0.25, need_weights=need_weights)
    zeroed = dropped == 0
    assert abs(zeroed.float().mean().item() - 0.25) < 0.02
    torch.testing.assert_close(dropped[~zeroed], clean[~zeroed] / 0.75)
    if need_weights:
        torch.testing.assert_close(weights, clean)  # dropout does not touch the returned weights


def test_custom_scale_is_used_on_the_fused_path():
    q, k, v = (torch.randn(2, 5, 8) for _ in range(3))
    explicit, _ = scaled_dot_product_attention(q, k, v, scale=0.3)
    fused, _ = scaled_dot_product_attention(q, k, v, scale=0.3, need_weights=False)
    torch.testing.assert_close(fused, explicit, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(explicit, (q @ k.transpose(-2, -1) * 0.3).softmax(-1) @ v)


def test_fused_attn_false_never_calls_the_fused_kernel(monkeypatch):
    """fused_attn=False is the explicit maths only (as timm's switch): e.g. to export, or to inspect every step."""
    attn = MultiHeadSelfAttention(32, 4, fused_attn=False).eval()
    x = torch.randn(2, 5, 32)
    expected = attn(x)[0]

    def fused(*args, **kwargs):
        raise AssertionError("the fused kernel was called")

    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", fused)
    out, weights = attn(x)
    torch.testing.assert_close(out, expected)
    assert weights is None  # the weights were computed, but only returned on request


@pytest.mark.parametrize("one_d", ["q", "k", "v"])
def test_any_one_dimensional_input_is_explained(one_d):
    """Each of q, k, v is checked for its (tokens, features) axes, not only the first."""
    shapes = {"q": (4, 8), "k": (4, 8), "v": (4, 8), one_d: (8,)}
    with pytest.raises(ValueError, match="shape \\(..., tokens, features\\)"):
        scaled_dot_product_attention(*(torch.randn(shapes[name]) for name in "qkv"))


def test_module_uses_the_fused_kernel_when_weights_are_not_needed(fused_calls):
    """The default (fused_attn=True, need_weights=False) runs PyTorch's fused kernel, never the T x T matrix."""
    attn = MultiHeadSelfAttention(32, 4).eval()
    x = torch.randn(2, 5, 32)
    attn(x)
    assert fused_calls == [1]
    attn(x, need_weights=True)  # the explicit maths, which can return the weights
    assert fused_calls == [1]


# ------------------------------------------------------------------ one contract for every attention layer
def _attention_layers() -> dict:
    """Every attention class in vitedu, each built for dim 48 and 4 heads (head_dim 12) on 16 patches."""
    from vitedu.cait import ClassAttention, TalkingHeadAttention
    from vitedu.convit import GatedPositionalSelfAttention

    return {
        "MultiHeadSelfAttention": lambda **kw: MultiHeadSelfAttention(48, 4, **kw),
        "TalkingHeadAttention": lambda **kw: TalkingHeadAttention(48, 4, **kw),
        "ClassAttention": lambda **kw: ClassAttention(48, 4, **kw),
        "GatedPositionalSelfAttention": lambda **kw: GatedPositionalSelfAttention(48, 4, grid_size=4, **kw),
    }


@pytest.mark.parametrize("name", list(_attention_layers()))
def test_every_attention_layer_keeps_the_contract(name):
    """The same attributes everywhere (timm's): num_heads, head_dim, scale, attn_drop and proj_drop as nn.Dropout,
    and forward(x, need_weights) -> (output, weights or None) with weights (batch, heads, queries, keys)."""
    from vitedu.attention import AttentionBase

    layer = _attention_layers()[name](attn_drop=0.25, proj_drop=0.5).eval()
    assert isinstance(layer, AttentionBase)
    assert layer.num_heads == 4 and layer.head_dim == 12 and layer.scale == pytest.approx(12**-0.5)
    assert type(layer.attn_drop) is nn.Dropout and layer.attn_drop.p == 0.25
    assert type(layer.proj_drop) is nn.Dropout and layer.proj_drop.p == 0.5
    assert not any("drop" in key for key in layer.state_dict())  # dropout adds no state
    x = torch.randn(2, 16, 48)
    queries = 1 if name == "ClassAttention" else 16
    out, weights = layer(x)
    assert out.shape == (2, queries, 48) and weights is None
    out_again, weights = layer(x, need_weights=True)
    assert weights.shape == (2, 4, queries, 16)
    torch.testing.assert_close(out_again, out, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("name", list(_attention_layers()))
def test_every_attention_layer_drops_weights_at_attn_drop_p_in_training_only(name):
    x = torch.randn(2, 16, 48)
    torch.manual_seed(0)
    dropping = _attention_layers()[name](attn_drop=0.5).train()
    assert not torch.equal(dropping(x)[0], dropping(x)[0])  # new masks on every call
    dropping.eval()
    assert torch.equal(dropping(x)[0], dropping(x)[0])
    dropping.attn_drop.p = 0.0  # the module's rate is the one used, on the fused path too
    dropping.train()
    assert torch.equal(dropping(x)[0], dropping(x)[0])


def test_class_attention_is_the_cls_row_of_multi_head_attention():
    """ClassAttention overrides only ``project`` (one query): with MultiHeadSelfAttention's weights it gives that
    layer's output and weights for token 0."""
    from vitedu.cait import ClassAttention

    torch.manual_seed(0)
    plain, cls_attn = MultiHeadSelfAttention(48, 4).eval(), ClassAttention(48, 4).eval()
    w_q, w_k, w_v = plain.qkv.weight.chunk(3)
    b_q, b_k, b_v = plain.qkv.bias.chunk(3)
    cls_attn.load_state_dict({"q.weight": w_q, "k.weight": w_k, "v.weight": w_v, "q.bias": b_q, "k.bias": b_k,
                              "v.bias": b_v, "proj.weight": plain.proj.weight, "proj.bias": plain.proj.bias})
    x = torch.randn(2, 17, 48)
    out, weights = plain(x, need_weights=True)
    cls_out, cls_weights = cls_attn(x, need_weights=True)
    torch.testing.assert_close(cls_out, out[:, :1], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(cls_weights, weights[:, :, :1])


def test_gpsa_with_a_closed_gate_is_multi_head_attention():
    """GPSA overrides ``project`` (separate qk and v) and ``attend`` (the gate): with the gate shut
    (sigmoid(lambda) = 0) it is ordinary multi-head attention with the same weights."""
    from vitedu.convit import GatedPositionalSelfAttention

    torch.manual_seed(0)
    plain, gpsa = MultiHeadSelfAttention(48, 4, qkv_bias=False).eval(), GatedPositionalSelfAttention(48, 4, 4).eval()
    with torch.no_grad():
        gpsa.qk.weight.copy_(plain.qkv.weight[:96])
        gpsa.v.weight.copy_(plain.qkv.weight[96:])
        gpsa.proj.load_state_dict(plain.proj.state_dict())
        gpsa.gating_param.fill_(-float("inf"))
    x = torch.randn(2, 16, 48)
    out, weights = plain(x, need_weights=True)
    gpsa_out, gpsa_weights = gpsa(x, need_weights=True)
    torch.testing.assert_close(gpsa_out, out, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(gpsa_weights, weights, atol=1e-6, rtol=1e-5)
