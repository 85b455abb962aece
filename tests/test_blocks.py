"""The encoder block: pre-norm wiring, parameter count, regularisers that cost nothing when off."""

import pytest
import torch
import torch.nn.functional as F

from vitedu.attention import MultiHeadSelfAttention
from vitedu.blocks import Block, DropPath, LayerScale, Mlp, drop_path_rates


def test_block_is_pre_norm_attention_then_mlp():
    dim, heads = 32, 4
    block = Block(dim, heads).eval()
    x = x_in = torch.randn(2, 7, dim)
    # from scratch, with the block's own weights
    h = F.layer_norm(x, (dim,), block.norm1.weight, block.norm1.bias, eps=1e-6)
    q, k, v = (h @ block.attn.qkv.weight.T + block.attn.qkv.bias).split(dim, dim=-1)
    split = lambda t: t.reshape(2, 7, heads, dim // heads).transpose(1, 2)  # noqa: E731
    a = torch.softmax(split(q) @ split(k).transpose(-2, -1) / (dim // heads) ** 0.5, dim=-1) @ split(v)
    x = x + a.transpose(1, 2).reshape(2, 7, dim) @ block.attn.proj.weight.T + block.attn.proj.bias
    h = F.layer_norm(x, (dim,), block.norm2.weight, block.norm2.bias, eps=1e-6)
    expected = x + block.mlp.fc2(F.gelu(block.mlp.fc1(h)))
    out, weights = block(x_in, need_weights=False)
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)
    assert weights is None


def test_parameter_count_is_12d2_plus_13d():
    for dim in (64, 192, 768):
        block = Block(dim, num_heads=4)
        assert sum(p.numel() for p in block.parameters()) == 12 * dim**2 + 13 * dim


def test_layer_scale_and_drop_path_add_nothing_when_off():
    plain = Block(64, 4)
    assert isinstance(plain.ls1, torch.nn.Identity) and isinstance(plain.drop_path1, torch.nn.Identity)
    scaled = Block(64, 4, init_values=1e-5, drop_path=0.1)
    extra = sum(p.numel() for p in scaled.parameters()) - sum(p.numel() for p in plain.parameters())
    assert extra == 2 * 64  # two LayerScale vectors; DropPath has no parameters
    assert isinstance(scaled.ls1, LayerScale) and isinstance(scaled.drop_path1, DropPath)


def test_drop_path_drops_whole_samples_and_keeps_the_mean():
    drop = DropPath(0.25)
    x = torch.ones(20000, 3, 4)
    drop.eval()
    assert torch.equal(drop(x), x)
    drop.train()
    y = drop(x)
    per_sample = y.flatten(1)
    assert torch.all((per_sample == 0).all(1) | (per_sample == 1 / 0.75).all(1))  # all or nothing
    assert abs(y.mean().item() - 1.0) < 0.02
    assert abs((per_sample[:, 0] == 0).float().mean().item() - 0.25) < 0.02


def test_block_returns_attention_weights_on_request():
    block = Block(32, 4).eval()
    x = torch.randn(2, 5, 32)
    out, weights = block(x, need_weights=True)
    assert weights.shape == (2, 4, 5, 5)
    torch.testing.assert_close(out, block(x)[0], atol=1e-5, rtol=1e-5)


def test_layer_scale_starts_each_residual_branch_at_init_values():
    """CaiT's point: with LayerScale a new block starts as (almost) the identity, its branches scaled by init_values."""
    x = torch.randn(2, 5, 32)
    torch.testing.assert_close(LayerScale(32, init_values=0.1)(x), 0.1 * x)
    assert torch.all(LayerScale(32).gamma == 1e-5)  # the default of the paper's deep models
    plain = Block(32, 4).eval()
    scaled = Block(32, 4, init_values=1e-5).eval()
    scaled.load_state_dict(plain.state_dict(), strict=False)  # same weights, plus the two gamma vectors
    plain_change = (plain(x)[0] - x).abs().mean().item()
    scaled_change = (scaled(x)[0] - x).abs().mean().item()
    assert plain_change > 0.1  # an ordinary block moves the tokens a lot, a scaled one about 1e-5 times as much
    assert 0.3e-5 < scaled_change / plain_change < 3e-5


class _NoAttention(torch.nn.Module):
    """An attention layer that contributes nothing, so that any randomness left in a Block comes from its MLP."""

    def forward(self, x, need_weights=False):
        return torch.zeros_like(x), None


def test_without_dropout_training_mode_computes_what_eval_computes():
    """No dropout, drop-path or attention dropout asked for: train() must not add any (only eval numbers differ)."""
    x = torch.randn(2, 5, 32)
    for module in (Block(32, 4), Mlp(32, 64), MultiHeadSelfAttention(32, 4)):
        torch.testing.assert_close(module.train()(x), module.eval()(x))


def test_block_mlp_dropout_is_proj_drop():
    """proj_drop also drops inside the MLP (timm's Block), in training only."""
    block = Block(32, 4, proj_drop=0.5, attn_layer=_NoAttention())
    x = torch.randn(2, 5, 32)
    block.train()
    assert not torch.allclose(block(x)[0], block(x)[0])
    block.eval()
    torch.testing.assert_close(block(x)[0], block(x)[0])


def test_layer_norm_eps_is_the_configured_one():
    """eps 1e-6 by default (timm, Hugging Face ViT); it matters for tokens of small variance."""
    x = 1e-3 * torch.randn(2, 5, 32)  # variance 1e-6: eps 1e-5 instead of 1e-6 changes the result by a lot
    for eps in (1e-6, 1e-5):
        block = Block(32, 4, norm_eps=eps) if eps != 1e-6 else Block(32, 4)
        for norm in (block.norm1, block.norm2):
            torch.testing.assert_close(norm(x), F.layer_norm(x, (32,), norm.weight, norm.bias, eps=eps))


def test_drop_path_keeps_dtype_and_device(device):
    """The per-sample coins are drawn in the tokens' dtype and on their device (no float32 upcast under bf16)."""
    drop = DropPath(0.5).train()
    for dtype in (torch.float64, torch.bfloat16):
        x = torch.ones(64, 3, 4, device=device, dtype=dtype)
        y = drop(x)
        assert y.dtype == dtype and y.device == x.device


def test_block_returns_no_weights_unless_asked():
    """By default the fused kernel runs and no T x T matrix is returned (or materialised)."""
    block = Block(32, 4).eval()
    assert block(torch.randn(2, 5, 32))[1] is None


class _NoMlp(torch.nn.Module):
    def forward(self, x):
        return torch.zeros_like(x)


def _random_in_training(block: Block, x: torch.Tensor) -> bool:
    block.train()
    return not torch.allclose(block(x)[0], block(x)[0])


def test_block_passes_its_dropout_rates_to_attention():
    """attn_drop drops attention weights, proj_drop the attention's output; each reaches the attention layer."""
    x = torch.randn(2, 5, 32)
    assert _random_in_training(Block(32, 4, attn_drop=0.5), x)
    block = Block(32, 4, proj_drop=0.5)
    block.mlp = _NoMlp()  # the randomness left must come from the attention's output dropout
    assert _random_in_training(block, x)


def test_block_layer_scale_uses_init_values_and_both_branches_are_plain_when_off():
    block = Block(32, 4, init_values=0.1)
    assert torch.all(block.ls1.gamma == 0.1) and torch.all(block.ls2.gamma == 0.1)
    plain = Block(32, 4)
    assert all(isinstance(m, torch.nn.Identity) for m in (plain.ls1, plain.ls2, plain.drop_path1, plain.drop_path2))


def test_modules_are_built_with_keyword_arguments():
    """Inside the package, blocks, attention layers and the patch embedding are built with at most (dim, num_heads)
    by position: nine positional arguments (or a positional None) break silently when a signature changes."""
    import ast
    from pathlib import Path

    import vitedu

    built = {"Block", "LayerScaleBlock", "ClassAttentionBlock", "MultiHeadSelfAttention", "TalkingHeadAttention",
             "ClassAttention", "GatedPositionalSelfAttention", "PatchEmbedding", "attn_class"}
    calls = []
    for path in Path(vitedu.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) in built:
                calls.append((path.name, node.lineno, node.func.id, len(node.args)))
    assert len(calls) >= 8  # the scan finds the calls it is meant to check
    assert [call for call in calls if call[3] > 2] == []


@pytest.mark.parametrize("rate, depth", [(0.1, 12), (0.3, 4), (0.2, 1), (0.0, 3)])
def test_drop_path_rates_grow_linearly_as_timms(rate, depth):
    """0 in the first block, ``rate`` in the last, evenly spaced: timm's torch.linspace(0, rate, depth)."""
    rates = drop_path_rates(rate, depth)
    assert len(rates) == depth and rates[0] == 0.0
    assert rates == pytest.approx(torch.linspace(0, rate, depth).tolist())


def test_drop_path_rates_outside_zero_one_are_explained():
    with pytest.raises(ValueError, match=r"must be in \[0, 1\); got 1.5"):
        drop_path_rates(1.5, 4)
    with pytest.raises(ValueError, match="got -0.1"):
        drop_path_rates(-0.1, 4)
