"""vitedu.checks: a correct solution passes on every device; each diagnosed mistake, planted in an
otherwise correct solution, fails with the hint that names it; a stub says it is not implemented.

The "student solutions" below are written independently of vitedu, in plain torch, with switches
that plant one mistake at a time.
"""

from __future__ import annotations

import functools
import math

import pytest
import torch
from torch import nn

import vitedu
from vitedu.checks import (
    CheckFailed,
    check_accuracy,
    check_attention,
    check_attention_weights,
    check_cls_attention,
    check_encoder_block,
    check_evaluate,
    check_masked_attention,
    check_multi_head_attention,
    check_multi_head_merge,
    check_multi_head_split,
    check_patch_embedding,
    check_patchify,
    check_single_head,
    check_train_epoch,
    check_unfold_embedding,
    check_vit_forward,
)
from vitedu.checks.diagnosis import PAGE_WIDTH, passed

# ---------------------------------------------------------------------------------------------------
# A1: attention


def attention_weights(q, k, scale="sqrt_dk", axis=-1, keys_first=False, softmax=True):
    d_k = q.shape[-1]
    factor = {"sqrt_dk": 1 / math.sqrt(d_k), "none": 1.0, "dk": 1 / d_k, "times": math.sqrt(d_k)}[scale]
    logits = (k @ q.transpose(-2, -1) if keys_first else q @ k.transpose(-2, -1)) * factor
    return torch.softmax(logits, dim=axis) if softmax else logits


def attention(q, k, v, transpose_weights=False, **mistake):
    weights = attention_weights(q, k, **mistake)
    return (weights.transpose(-2, -1) if transpose_weights else weights) @ v


def single_head(x, w_q, w_k, w_v, scale_by_width=False, swap_qk=False, v_from=None):
    q, k, v = x @ w_q, x @ w_k, x @ (w_q if v_from == "w_q" else w_v)
    if swap_qk:
        q, k = k, q
    logits = q @ k.transpose(-2, -1) / math.sqrt(x.shape[-1] if scale_by_width else q.shape[-1])
    return torch.softmax(logits, dim=-1) @ v


def split_heads(x, num_heads, mistake=None):
    batch, tokens, dim = x.shape
    if mistake == "view":
        return x.reshape(batch, num_heads, tokens, dim // num_heads)
    if mistake == "interleave":
        return x.reshape(batch, tokens, dim // num_heads, num_heads).permute(0, 3, 1, 2)
    if mistake == "transpose_first":
        return x.transpose(1, 2).reshape(batch, num_heads, tokens, dim // num_heads)
    x = x.reshape(batch, tokens, num_heads, dim // num_heads)
    return x if mistake == "no_transpose" else x.transpose(1, 2)


def merge_heads(x, mistake=None):
    batch, heads, tokens, d_k = x.shape
    if mistake == "view":
        return x.reshape(batch, tokens, heads * d_k)
    if mistake == "interleave":
        return x.permute(0, 2, 3, 1).reshape(batch, tokens, heads * d_k)
    if mistake == "view_after_transpose":
        return x.transpose(1, 2).view(batch, tokens, heads * d_k)
    return x.transpose(1, 2).reshape(batch, tokens, heads * d_k)


def make_mhsa(scale_by_width=False, merge=None, split=None, no_proj=False):
    class MultiHeadAttention(nn.Module):
        def __init__(self, dim, num_heads):
            super().__init__()
            self.num_heads, self.head_dim = num_heads, dim // num_heads
            self.qkv = nn.Linear(dim, 3 * dim)
            self.proj = nn.Linear(dim, dim)

        def forward(self, x):
            q, k, v = (split_heads(t, self.num_heads, split) for t in self.qkv(x).chunk(3, dim=-1))
            logits = q @ k.transpose(-2, -1) / math.sqrt(x.shape[-1] if scale_by_width else self.head_dim)
            out = merge_heads(torch.softmax(logits, dim=-1) @ v, merge)
            return out if no_proj else self.proj(out)

    return MultiHeadAttention


def not_implemented(*args):
    raise NotImplementedError()


def test_correct_a1_solutions_pass_on_every_device(device, capsys):
    check_attention_weights(attention_weights, device=device)
    check_attention(attention, device=device)
    check_single_head(single_head, device=device)
    check_multi_head_split(split_heads, device=device)
    check_multi_head_merge(merge_heads, device=device)
    check_multi_head_attention(make_mhsa(), device=device)
    out = capsys.readouterr().out
    assert out.count("✓") == 6 and "passed" in out


def test_success_messages_are_wrapped_to_the_page(capsys):
    """A message longer than the book's 76 columns is wrapped, not cut: the first line starts as before, the
    continuation lines are indented under it, no word is broken, and joined again it is the same message."""
    detail = "matches vitedu.scaled_dot_product_attention for (batch, tokens, dim) = (2, 5, 8), pre-norm " * 2
    passed("check_something", detail.strip())
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 4 and max(map(len, lines)) <= PAGE_WIDTH == 76
    assert lines[0].startswith("✓ check_something passed: matches") and all(line.startswith("  ") for line in lines[1:])
    assert " ".join(line.strip() for line in lines) == f"✓ check_something passed: {detail.strip()}"
    passed("check_short", "fits")
    assert capsys.readouterr().out == "✓ check_short passed: fits\n"
    # the real messages: the longest of A1 (check_multi_head_split) and A2 (check_vit_forward) among them
    check_attention(attention)
    check_multi_head_split(split_heads)
    out = capsys.readouterr().out.splitlines()
    assert len(out) > 2 and max(map(len, out)) <= PAGE_WIDTH
    assert [line for line in out if not line.startswith("  ")][1].startswith("✓ check_multi_head_split passed: ")


def test_a_tuple_of_values_and_weights_is_accepted():
    check_attention(lambda q, k, v: (attention(q, k, v), attention_weights(q, k)))


@pytest.mark.parametrize(
    "mistake, hint",
    [
        (dict(axis=-2), r"columns sum to one.*softmax\(dim=-1\)"),
        (dict(softmax=False), r"forget the softmax"),
        (dict(scale="none"), r"scale is missing"),
        (dict(scale="dk"), r"divided by d_k = 8.*1 / sqrt\(d_k\)"),
        (dict(scale="times"), r"multiplied the logits by sqrt\(d_k\)"),
        (dict(keys_first=True), r"compared the keys with the queries \(k @ q\^T\)"),
    ],
)
def test_attention_weights_mistakes_are_diagnosed(mistake, hint):
    with pytest.raises(CheckFailed, match=hint):
        check_attention_weights(functools.partial(attention_weights, **mistake))


def test_attention_weights_reports_the_row_sums():
    with pytest.raises(CheckFailed, match=r"rows of your weights sum to \d\.\d\d\.\.\.\d\.\d\d instead of 1"):
        check_attention_weights(functools.partial(attention_weights, axis=-2))


def test_attention_weights_wrong_shape_names_the_axis():
    with pytest.raises(CheckFailed, match=r"axis 3 \(keys\) has size 1 instead of 6"):
        check_attention_weights(lambda q, k: attention_weights(q, k).sum(-1, keepdim=True))


def test_attention_weights_k_dot_t_on_batched_inputs_gets_the_batch_hint():
    with pytest.raises(CheckFailed, match=r"k.transpose\(-2, -1\) rather than k.T"):
        check_attention_weights(lambda q, k: torch.softmax(q @ k.permute(*range(k.dim() - 1, -1, -1)), -1))


def scaled_by(factor):
    """Attention weights with the logits multiplied by factor(q, k), e.g. 1/sqrt(number of keys)."""
    return lambda q, k: torch.softmax(q @ k.transpose(-2, -1) * factor(q, k), dim=-1)


@pytest.mark.parametrize("check", [check_attention_weights, check_attention])
@pytest.mark.parametrize(
    "factor, hint",
    [
        (lambda q, k: k.shape[-2] ** -0.5, r"matches a scale of 1/sqrt\(6\).*6 is the number of tokens.*d_k = 8"),
        (lambda q, k: 1 / k.shape[-2], r"matches a scale of 1/6 .*6 is the number of tokens.*d_k = 8"),
        (lambda q, k: 0.123, r"matches a scale of 0\.123, none of.*1 / sqrt\(8\)"),
    ],
)
def test_a_wrong_scale_is_fitted_and_named(check, factor, hint):
    weights = scaled_by(factor)
    student = weights if check is check_attention_weights else (lambda q, k, v: weights(q, k) @ v)
    with pytest.raises(CheckFailed, match=hint):
        check(student)


def test_single_head_and_multi_head_scaled_by_the_number_of_tokens_are_named():
    def single_head_by_tokens(x, w_q, w_k, w_v):
        q, k, v = x @ w_q, x @ w_k, x @ w_v
        return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(x.shape[1]), dim=-1) @ v

    with pytest.raises(CheckFailed, match=r"1/sqrt\(6\).*number of tokens.*d_k = 4"):
        check_single_head(single_head_by_tokens)

    class ByTokens(make_mhsa()):
        def forward(self, x):
            q, k, v = (split_heads(t, self.num_heads) for t in self.qkv(x).chunk(3, dim=-1))
            weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(x.shape[1]), dim=-1)
            return self.proj(merge_heads(weights @ v))

    with pytest.raises(CheckFailed, match=r"1/sqrt\(5\).*number of tokens.*d_k = 4"):
        check_multi_head_attention(ByTokens)


@pytest.mark.parametrize(
    "mistake, hint",
    [
        (dict(axis=-2), r"softmax ran over the wrong axis.*rows of your attention weights sum to \d\.\d\d"),
        (dict(keys_first=True), r"transposed keys"),
        (dict(softmax=False), r"softmax is missing"),
        (dict(transpose_weights=True), r"\*transposed\* weights"),
        (dict(scale="none"), r"scale is missing"),
        (dict(scale="dk"), r"divided by d_k"),
    ],
)
def test_attention_mistakes_are_diagnosed(mistake, hint):
    with pytest.raises(CheckFailed, match=hint):
        check_attention(functools.partial(attention, **mistake))


@pytest.mark.parametrize(
    "mistake, hint",
    [
        (dict(scale_by_width=True), r"scaled by sqrt\(D\) = sqrt\(12\).*d_k = 4"),
        (dict(swap_qk=True), r"queries and keys are swapped \(q = x @ w_k"),
        (dict(v_from="w_q"), r"v = x @ w_v"),
    ],
)
def test_single_head_mistakes_are_diagnosed(mistake, hint):
    with pytest.raises(CheckFailed, match=hint):
        check_single_head(functools.partial(single_head, **mistake))


def test_single_head_without_value_projection_is_a_shape_error_with_hint():
    def no_value_projection(x, w_q, w_k, w_v):
        q, k = x @ w_q, x @ w_k
        return torch.softmax(q @ k.transpose(-2, -1) / 2, dim=-1) @ x

    with pytest.raises(CheckFailed, match=r"(?s)axis 2 \(d_k\) has size 12 instead of 4.*v = x @ w_v"):
        check_single_head(no_value_projection)


@pytest.mark.parametrize(
    "mistake, hint",
    [
        ("view", r"reshaped straight to \(batch, heads, tokens, head_dim\).*transpose\(1, 2\)"),
        ("interleave", r"contiguous slice.*'\(d h\)' order"),
        ("transpose_first", r"transposed before the reshape.*Reshape first"),
        ("no_transpose", r"(?s)wrong order.*\.transpose\(1, 2\)"),
    ],
)
def test_split_heads_mistakes_are_diagnosed(mistake, hint):
    with pytest.raises(CheckFailed, match=hint):
        check_multi_head_split(functools.partial(split_heads, mistake=mistake))


@pytest.mark.parametrize(
    "mistake, hint",
    [
        ("view", r"heads merged in the wrong order.*Transpose first"),
        ("interleave", r"heads merged in the wrong order.*interleaved"),
        ("view_after_transpose", r"use \.reshape\(\.\.\.\) instead of \.view"),
    ],
)
def test_merge_heads_mistakes_are_diagnosed(mistake, hint):
    with pytest.raises(CheckFailed, match=hint):
        check_multi_head_merge(functools.partial(merge_heads, mistake=mistake))


@pytest.mark.parametrize(
    "mistake, hint",
    [
        (dict(scale_by_width=True), r"1/sqrt\(D\) = 1/sqrt\(12\).*d_k = D / h = 4"),
        (dict(merge="view"), r"heads merged in the wrong order.*transpose\(1, 2\)"),
        (dict(merge="interleave"), r"heads merged in the wrong order.*interleaved"),
        (dict(split="view"), r"heads are split wrongly"),
        (dict(split="transpose_first"), r"heads are split wrongly: you transposed before the reshape"),
        (dict(no_proj=True), r"output projection is missing"),
    ],
)
def test_multi_head_attention_mistakes_are_diagnosed(mistake, hint):
    with pytest.raises(CheckFailed, match=hint):
        check_multi_head_attention(make_mhsa(**mistake))


def test_multi_head_attention_with_other_layer_names_is_told_to_keep_the_init():
    class Renamed(nn.Module):
        def __init__(self, dim, num_heads):
            super().__init__()
            self.to_qkv = nn.Linear(dim, 3 * dim)

    with pytest.raises(CheckFailed, match="Keep the __init__ you were given"):
        check_multi_head_attention(Renamed)


@pytest.mark.parametrize(
    "check, name",
    [
        (check_attention_weights, "not_implemented"),
        (check_attention, "not_implemented"),
        (check_single_head, "not_implemented"),
        (check_multi_head_split, "not_implemented"),
        (check_multi_head_merge, "not_implemented"),
    ],
)
def test_a_stub_is_reported_as_not_implemented(check, name):
    with pytest.raises(CheckFailed, match=f"you have not implemented `{name}` yet"):
        check(not_implemented)


def test_a_stub_inside_a_method_is_named_by_its_qualified_name():
    class Stub(nn.Module):
        def __init__(self, dim, num_heads):
            super().__init__()
            self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)

        def forward(self, x):
            raise NotImplementedError()

    expected = "Stub.forward" if hasattr(Stub.forward.__code__, "co_qualname") else "forward"
    with pytest.raises(CheckFailed, match=f"not implemented `.*{expected}` yet"):
        check_multi_head_attention(Stub)


def test_checks_leave_the_global_random_state_alone():
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    check_multi_head_attention(make_mhsa())
    check_attention(attention)
    assert torch.equal(torch.rand(3), expected)


# ---------------------------------------------------------------------------------------------------
# A scale by d_v, a softmax over any wrong axis, a mask laid along the queries


def test_a_scale_by_the_width_of_the_values_is_named_and_not_called_hard_coded():
    def by_d_v(q, k, v):
        return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(v.shape[-1]), dim=-1) @ v

    hint = r"1/sqrt\(4\) \(= 0\.5\), and 4 is d_v, the width of the values.*d_k = 8"
    with pytest.raises(CheckFailed, match=hint) as err:
        check_attention(by_d_v)
    assert "hard-coded" not in str(err.value)


def test_a_size_used_in_the_wrong_place_is_passed_on_by_other_sizes():
    from vitedu.checks.diagnosis import WrongSize, other_sizes

    def wrong_size():
        raise WrongSize("f: your output matches a scale of 1/sqrt(3), and 3 is d_v")

    with pytest.raises(WrongSize) as err:
        other_sizes("first", "second", wrong_size)
    assert str(err.value) == "f: your output matches a scale of 1/sqrt(3), and 3 is d_v"

    def other_mistake():
        raise CheckFailed("f: wrong values")

    with pytest.raises(CheckFailed, match="size is hard-coded"):
        other_sizes("first", "second", other_mistake)


@pytest.mark.parametrize(
    "axis, hint",
    [
        (1, r"weights along axis 1 \(heads\) sum to one: the softmax ran over the heads axis \(dim=1 or -3\)"),
        (0, r"weights along axis 0 \(batch\) sum to one: the softmax ran over the batch axis \(dim=0 or -4\)"),
        (-3, r"softmax ran over the heads axis"),
    ],
)
def test_attention_weights_names_every_wrong_softmax_axis_of_4d_inputs(axis, hint):
    with pytest.raises(CheckFailed, match=hint):
        check_attention_weights(functools.partial(attention_weights, axis=axis))


@pytest.mark.parametrize(
    "axis, hint",
    [
        (-2, r"wrong axis \(dim=-2, the queries\): the rows of your attention weights sum to \d\.\d\d"),
        (1, r"wrong axis \(dim=1 or -3, the heads\): the rows of your attention weights sum to"),
        (0, r"wrong axis \(dim=0 or -4, the batch\)"),
    ],
)
def test_attention_names_every_wrong_softmax_axis_of_4d_inputs(axis, hint):
    with pytest.raises(CheckFailed, match=hint):
        check_attention(functools.partial(attention, axis=axis))


def test_single_head_and_multi_head_name_the_wrong_softmax_axis():
    def over(dim):
        def single(x, w_q, w_k, w_v):
            q, k, v = x @ w_q, x @ w_k, x @ w_v
            return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=dim) @ v

        return single

    with pytest.raises(CheckFailed, match=r"wrong axis \(dim=-2, the queries\)"):
        check_single_head(over(-2))
    with pytest.raises(CheckFailed, match=r"wrong axis \(dim=0 or -3, the batch\)"):
        check_single_head(over(0))

    def mhsa_over(dim):
        class OverAxis(make_mhsa()):
            def forward(self, x):
                q, k, v = (split_heads(t, self.num_heads) for t in self.qkv(x).chunk(3, dim=-1))
                weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(self.head_dim), dim=dim)
                return self.proj(merge_heads(weights @ v))

        return OverAxis

    with pytest.raises(CheckFailed, match=r"wrong axis \(dim=-2, the queries\)"):
        check_multi_head_attention(mhsa_over(-2))
    with pytest.raises(CheckFailed, match=r"wrong axis \(dim=1 or -3, the heads\)"):
        check_multi_head_attention(mhsa_over(1))


def masked_on_queries(q, k, v, mask, how):
    logits = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    rows = mask.transpose(-2, -1)  # the padding mask laid along the queries
    if how == "zeroed queries":
        return torch.softmax((q * rows) @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), -1) @ v
    fill = -1e9 if how == "finite" else float("-inf")
    weights = torch.softmax(logits.masked_fill(~rows, fill), -1)
    return (weights.nan_to_num(0.0) if how == "nan_to_num" else weights) @ v


@pytest.mark.parametrize("how", ["nan_to_num", "nan", "finite", "zeroed queries"])
def test_a_mask_applied_to_the_queries_is_named(how):
    with pytest.raises(CheckFailed, match=r"mask is applied to the queries.*\*keys\* \(columns\).*without transposing"):
        check_masked_attention(functools.partial(masked_on_queries, how=how))


# ---------------------------------------------------------------------------------------------------
# A2: patches to ViT


def patchify(images, patch_size, order="rows", inner="pixel_channel"):
    batch, chans, height, width = images.shape
    p = patch_size
    if order == "reshape":
        return images.reshape(batch, height * width // p**2, -1)
    x = images.reshape(batch, chans, height // p, p, width // p, p)  # b c gh p1 gw p2
    x = x.permute(0, 2, 4, 3, 5, 1)  # b gh gw p1 p2 c
    if order == "columns":
        x = x.transpose(1, 2)
    if inner == "channel_pixel":
        x = x.permute(0, 1, 2, 5, 3, 4)
    elif inner == "column_row":
        x = x.transpose(3, 4)
    return x.reshape(batch, -1, p * p * chans)


def make_patch_embed(**mistake):
    class PatchEmbed(nn.Module):
        def __init__(self, img_size, patch_size, in_chans, embed_dim):
            super().__init__()
            self.patch_size = patch_size
            self.proj = nn.Linear(patch_size * patch_size * in_chans, embed_dim)

        def forward(self, images):
            return self.proj(patchify(images, self.patch_size, **mistake))

    return PatchEmbed


def make_block(mistake=None):
    class EncoderBlock(nn.Module):
        def __init__(self, dim, num_heads):
            super().__init__()
            self.norm1 = nn.LayerNorm(dim, eps=1e-6)
            self.attn = vitedu.MultiHeadSelfAttention(dim, num_heads)
            self.norm2 = nn.LayerNorm(dim, eps=1e-6)
            self.mlp = vitedu.Mlp(dim, 4 * dim)

        def forward(self, x):
            def attn(t):
                return self.attn(t)[0]

            if mistake == "post_norm":
                x = self.norm1(x + attn(x))
                return self.norm2(x + self.mlp(x))
            if mistake in ("norm_after_attn", "norms_after_branches"):
                x = x + self.norm1(attn(x))
                return x + (self.norm2(self.mlp(x)) if mistake == "norms_after_branches" else self.mlp(self.norm2(x)))
            if mistake == "no_attn_residual":
                x = attn(self.norm1(x))
            elif mistake == "normalised_skip":
                x = self.norm1(x) + attn(self.norm1(x))
            elif mistake == "no_norms":
                x = x + attn(x)
                return x + self.mlp(x)
            else:
                x = x + attn(self.norm1(x))
            if mistake == "no_mlp_residual":
                return self.mlp(self.norm2(x))
            if mistake == "norm1_twice":
                return x + self.mlp(self.norm1(x))
            if mistake == "norm_after_mlp":
                return x + self.norm2(self.mlp(x))
            return x + self.mlp(self.norm2(x))

    return EncoderBlock


def make_vit(mistake=None):
    class ViT(nn.Module):
        def __init__(self, img_size, patch_size, in_chans, num_classes, embed_dim, depth, num_heads):
            super().__init__()
            self.patch_embed = vitedu.PatchEmbedding(img_size, patch_size, in_chans, embed_dim)
            num_patches = self.patch_embed.num_patches
            self.cls_token = nn.Parameter(torch.zeros(1, 1, embed_dim))
            self.pos_embed = nn.Parameter(torch.zeros(1, num_patches + 1, embed_dim))
            self.blocks = nn.ModuleList(vitedu.Block(embed_dim, num_heads) for _ in range(depth))
            self.norm = nn.LayerNorm(embed_dim, eps=1e-6)
            self.head = nn.Linear(embed_dim, num_classes)

        def forward(self, images):
            x = self.patch_embed(images)
            cls = self.cls_token.expand(x.shape[0], -1, -1)
            if mistake == "pos_before_cls":  # N patches + N + 1 positions: a RuntimeError
                x = x + self.pos_embed
            if mistake == "pos_shifted":  # rows 0...N-1 for the patches, none for [CLS]
                x = x + self.pos_embed[:, :-1]
            if mistake == "no_cls":
                x = x + self.pos_embed[:, 1:]
            else:
                x = torch.cat([x, cls] if mistake == "cls_last" else [cls, x], dim=1)
            if mistake not in ("no_pos", "pos_shifted", "no_cls"):
                x = x + self.pos_embed
            if mistake == "norm_before_blocks":
                x = self.norm(x)
            for block in [] if mistake == "no_blocks" else self.blocks:
                x, _ = block(x)
            if mistake not in ("no_norm", "norm_before_blocks"):
                x = self.norm(x)
            return self.head(x.mean(dim=1) if mistake == "mean_pool" else x[:, 0])

    return ViT


def test_correct_a2_solutions_pass_on_every_device(device, capsys):
    check_patchify(patchify, device=device)
    check_patch_embedding(make_patch_embed(), device=device)
    check_encoder_block(make_block(), device=device)
    check_vit_forward(make_vit(), device=device)
    assert capsys.readouterr().out.count("✓") == 4


def test_patchify_with_einops_and_unfold_style_solutions():
    from einops import rearrange

    check_patchify(lambda im, p: rearrange(im, "b c (h p1) (w p2) -> b (h w) (p1 p2 c)", p1=p, p2=p))
    unfold = functools.partial(torch.nn.functional.unfold)
    with pytest.raises(CheckFailed, match=r"ordered \(channel, row, column\).*F.unfold"):
        check_patchify(lambda im, p: unfold(im, p, stride=p).transpose(1, 2))


@pytest.mark.parametrize(
    "mistake, hint",
    [
        (dict(order="columns"), r"column-major order.*'\(h w\)'"),
        (dict(inner="channel_pixel"), r"ordered \(channel, row, column\)"),
        (dict(inner="column_row"), r"rows and columns inside each patch are swapped"),
        (dict(order="reshape"), r"plain reshape cuts the image into runs of consecutive pixels"),
    ],
)
def test_patchify_mistakes_are_diagnosed(mistake, hint):
    with pytest.raises(CheckFailed, match=hint):
        check_patchify(functools.partial(patchify, **mistake))


def test_patchify_wrong_shape_names_the_axes():
    with pytest.raises(CheckFailed, match=r"Patches and features are swapped"):
        check_patchify(lambda im, p: patchify(im, p).transpose(1, 2))


@pytest.mark.parametrize(
    "mistake, hint",
    [
        (dict(order="columns"), r"column-major order"),
        (dict(inner="channel_pixel"), r"ordered \(channel, row, column\)"),
    ],
)
def test_patch_embedding_mistakes_are_diagnosed(mistake, hint):
    with pytest.raises(CheckFailed, match=hint):
        check_patch_embedding(make_patch_embed(**mistake))


def test_patch_embedding_stub_in_patchify_is_named():
    class PatchEmbed(make_patch_embed()):
        def forward(self, images):
            return self.proj(not_implemented(images))

    with pytest.raises(CheckFailed, match="not implemented `not_implemented` yet"):
        check_patch_embedding(PatchEmbed)


@pytest.mark.parametrize(
    "mistake, hint",
    [
        ("post_norm", r"post-norm"),
        ("no_attn_residual", r"residual connection around attention is missing"),
        ("no_mlp_residual", r"residual connection around the MLP is missing"),
        ("normalised_skip", r"skip connection carries the normalised tokens"),
        ("norm1_twice", r"used norm1 before the MLP"),
        ("no_norms", r"LayerNorms are missing"),
        ("norm_after_mlp", r"norm2 to the MLP's output, x \+ norm2\(mlp\(x\)\).*x = x \+ mlp\(norm2\(x\)\)"),
        ("norm_after_attn", r"norm1 to the attention's output.*x = x \+ attn\(norm1\(x\)\)"),
        ("norms_after_branches", r"LayerNorms to the outputs of the branches"),
    ],
)
def test_encoder_block_mistakes_are_diagnosed(mistake, hint):
    with pytest.raises(CheckFailed, match=hint):
        check_encoder_block(make_block(mistake))


@pytest.mark.parametrize(
    "mistake, hint",
    [
        ("cls_last", r"\[CLS\] token is at the wrong end.*Prepend it"),
        ("no_pos", r"position embeddings are not added"),
        ("mean_pool", r"averaged all tokens"),
        ("no_norm", r"final LayerNorm is missing"),
        ("no_blocks", r"encoder blocks never run.*for block in self.blocks"),
        ("norm_before_blocks", r"applied the final LayerNorm before the blocks.*after the loop"),
        ("pos_before_cls", r"(?s)differ by one \(9 against 10\).*N = 9 patches.*N \+ 1 = 10 rows.*Prepend"),
        ("pos_shifted", r"positions are off by one: you added rows 0\.\.\.N-1"),
        ("no_cls", r"there is no \[CLS\] token: you classify the first patch"),
    ],
)
def test_vit_forward_mistakes_are_diagnosed(mistake, hint):
    with pytest.raises(CheckFailed, match=hint):
        check_vit_forward(make_vit(mistake))


def test_check_failed_is_an_assertion_error():
    # nbgrader (and pytest) count an AssertionError as a failed test, with the message shown.
    assert issubclass(CheckFailed, AssertionError)
    with pytest.raises(AssertionError, match="not implemented"):
        check_vit_forward(_stub_vit())


def _stub_vit():
    class Stub(make_vit()):
        def forward(self, images):
            raise NotImplementedError()

    return Stub


def test_an_unknown_mistake_gets_the_generic_message_with_the_error_size():
    with pytest.raises(CheckFailed, match=r"right shape but wrong values: the largest difference"):
        check_attention(lambda q, k, v: attention(q, k, v) + 0.1)


# ---------------------------------------------------------------------------------------------------
# The remaining mistakes listed in book/assignments.md


def test_single_head_softmax_over_the_wrong_axis_is_diagnosed():
    def wrong_axis(x, w_q, w_k, w_v):
        q, k, v = x @ w_q, x @ w_k, x @ w_v
        return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-2) @ v

    with pytest.raises(CheckFailed, match=r"softmax ran over the wrong axis"):
        check_single_head(wrong_axis)


def test_merge_heads_without_moving_the_heads_axis_is_a_shape_error_with_hint():
    with pytest.raises(CheckFailed, match=r"(?s)axis 2 \(dim\).*move the heads axis behind the tokens"):
        check_multi_head_merge(lambda x: x.reshape(x.shape[0], x.shape[1], -1))


def test_multi_head_attention_with_the_wrong_qkv_layout_is_diagnosed():
    class InterleavedQKV(make_mhsa()):
        def forward(self, x):
            b, t, d = x.shape
            qkv = self.qkv(x).reshape(b, t, self.num_heads, 3, self.head_dim).permute(3, 0, 2, 1, 4)
            out = torch.softmax(qkv[0] @ qkv[1].transpose(-2, -1) / math.sqrt(self.head_dim), -1) @ qkv[2]
            return self.proj(merge_heads(out))

    with pytest.raises(CheckFailed, match=r"wrong slices of self.qkv\(x\)"):
        check_multi_head_attention(InterleavedQKV)


def test_patch_embedding_without_bias_is_diagnosed():
    class NoBias(make_patch_embed()):
        def forward(self, images):
            return patchify(images, self.patch_size) @ self.proj.weight.T

    with pytest.raises(CheckFailed, match=r"bias of the projection is missing"):
        check_patch_embedding(NoBias)


def test_encoder_block_with_parallel_sub_layers_is_diagnosed():
    class Parallel(make_block()):
        def forward(self, x):
            return x + self.attn(self.norm1(x))[0] + self.mlp(self.norm2(x))

    with pytest.raises(CheckFailed, match=r"MLP sees the block's input"):
        check_encoder_block(Parallel)


def test_vit_forward_without_a_position_for_cls_is_diagnosed():
    class NoClsPosition(make_vit()):
        def forward(self, images):
            x = self.patch_embed(images) + self.pos_embed[:, 1:]
            x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1)
            for block in self.blocks:
                x, _ = block(x)
            return self.head(self.norm(x)[:, 0])

    with pytest.raises(CheckFailed, match=r"\[CLS\] token gets no position"):
        check_vit_forward(NoClsPosition)


def test_vit_forward_with_cls_appended_and_read_from_the_end_is_diagnosed():
    class ClsLast(make_vit()):
        def forward(self, images):
            x = self.patch_embed(images)
            x = torch.cat([x, self.cls_token.expand(x.shape[0], -1, -1)], dim=1) + self.pos_embed
            for block in self.blocks:
                x, _ = block(x)
            return self.head(self.norm(x)[:, -1])

    with pytest.raises(CheckFailed, match=r"\[CLS\] token is at the wrong end"):
        check_vit_forward(ClsLast)


# ---------------------------------------------------------------------------------------------------
# Unstable softmax, hard-coded sizes, head width, masking, unfold, the training step


def naive_softmax(logits):
    return logits.exp() / logits.exp().sum(dim=-1, keepdim=True)


def naive_attention_weights(q, k):
    return naive_softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]))


def hardcoded_attention_weights(q, k):
    return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(8), dim=-1)


def test_a_naive_softmax_passes_small_logits_but_is_named_unstable():
    q, k = torch.randn(2, 5, 8), torch.randn(2, 7, 8)
    assert torch.allclose(naive_attention_weights(q, k), attention_weights(q, k), atol=1e-6)
    with pytest.raises(CheckFailed, match=r"numerically unstable.*overflows"):
        check_attention_weights(naive_attention_weights)
    with pytest.raises(CheckFailed, match=r"numerically unstable"):
        check_attention(lambda q, k, v: naive_attention_weights(q, k) @ v)


def test_a_hard_coded_d_k_is_named():
    with pytest.raises(CheckFailed, match=r"(?s)size is hard-coded.*1 / sqrt\(8\) although d_k = 5"):
        check_attention_weights(hardcoded_attention_weights)
    with pytest.raises(CheckFailed, match=r"(?s)size is hard-coded.*although d_k = 5"):
        check_attention(lambda q, k, v: hardcoded_attention_weights(q, k) @ v)

    def single_head_sqrt4(x, w_q, w_k, w_v):
        q, k, v = x @ w_q, x @ w_k, x @ w_v
        return torch.softmax(q @ k.transpose(-2, -1) / 2.0, dim=-1) @ v

    with pytest.raises(CheckFailed, match=r"(?s)size is hard-coded.*D=12, d_k=4.*D=10, d_k=5.*1 / sqrt\(4\)"):
        check_single_head(single_head_sqrt4)


def test_hard_coded_numbers_of_heads_are_named():
    with pytest.raises(CheckFailed, match=r"size is hard-coded.*3 heads of width 4.*2 heads of width 5"):
        check_multi_head_split(lambda x, num_heads: split_heads(x, 3))
    with pytest.raises(CheckFailed, match=r"size is hard-coded"):
        check_multi_head_merge(lambda x: x.transpose(1, 2).reshape(x.shape[0], x.shape[2], 12))

    class ThreeHeads(make_mhsa()):
        def __init__(self, dim, num_heads):
            super().__init__(dim, 3)

    with pytest.raises(CheckFailed, match=r"size is hard-coded.*dim=12, heads=3.*dim=16, heads=2"):
        check_multi_head_attention(ThreeHeads)


def test_a_wrong_head_width_is_named():
    def width_h(x, num_heads):  # heads of width num_heads: the (head_dim, heads) reshape, not transposed back
        b, t, d = x.shape
        return x.reshape(b, t, d // num_heads, num_heads).transpose(1, 2)

    with pytest.raises(CheckFailed, match=r"head width is wrong: you made heads of width num_heads"):
        check_multi_head_split(width_h)

    class SplitByHeadDim(make_mhsa()):
        def forward(self, x):
            q, k, v = (split_heads(t, self.head_dim) for t in self.qkv(x).chunk(3, dim=-1))
            return self.proj(merge_heads(attention(q, k, v)))

    with pytest.raises(CheckFailed, match=r"head width is wrong: you split into self.head_dim = 4 heads"):
        check_multi_head_attention(SplitByHeadDim)

    class ScaleByHeads(make_mhsa()):
        def forward(self, x):
            q, k, v = (split_heads(t, self.num_heads) for t in self.qkv(x).chunk(3, dim=-1))
            weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(self.num_heads), dim=-1)
            return self.proj(merge_heads(weights @ v))

    with pytest.raises(CheckFailed, match=r"1/sqrt\(h\) = 1/sqrt\(3\), the number of heads"):
        check_multi_head_attention(ScaleByHeads)

    class OneHead(make_mhsa()):
        def forward(self, x):
            q, k, v = self.qkv(x).chunk(3, dim=-1)
            return self.proj(attention(q, k, v))

    with pytest.raises(CheckFailed, match=r"whole width went into one head"):
        check_multi_head_attention(OneHead)


def masked_attention(q, k, v, mask, mistake=None):
    logits = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mistake == "ignored":
        return torch.softmax(logits, -1) @ v
    if mistake == "after_softmax":
        return (torch.softmax(logits, -1) * mask) @ v
    if mistake == "multiplied":
        return torch.softmax(logits * mask, -1) @ v
    if mistake == "finite":
        return torch.softmax(logits.masked_fill(~mask, -1e9), -1) @ v
    weights = torch.softmax(logits.masked_fill(mask if mistake == "inverted" else ~mask, float("-inf")), -1)
    return (weights if mistake == "nan" else weights.nan_to_num(0.0)) @ v


def test_correct_masked_attention_passes_on_every_device(device, capsys):
    check_masked_attention(masked_attention, device=device)
    assert "✓ check_masked_attention passed" in capsys.readouterr().out


@pytest.mark.parametrize(
    "mistake, hint",
    [
        ("ignored", r"mask is ignored"),
        ("inverted", r"mask is inverted"),
        ("after_softmax", r"zeroed the masked weights \*after\* the softmax"),
        ("multiplied", r"multiplied the logits by the mask"),
        ("nan", r"every key is masked gets NaN"),
        ("finite", r"every key is masked got uniform weights"),
    ],
)
def test_masked_attention_mistakes_are_diagnosed(mistake, hint):
    with pytest.raises(CheckFailed, match=hint):
        check_masked_attention(functools.partial(masked_attention, mistake=mistake))


def test_boolean_indexing_with_a_broadcast_mask_gets_the_masked_fill_hint():
    def indexed(q, k, v, mask):
        logits = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        logits[~mask] = float("-inf")  # an IndexError: t[mask] does not broadcast the mask
        return torch.softmax(logits, dim=-1).nan_to_num(0.0) @ v

    with pytest.raises(CheckFailed, match=r"(?s)IndexError.*does not broadcast.*masked_fill") as err:
        check_masked_attention(indexed)
    assert "k.T" not in str(err.value)



def embed_with_unfold(images, conv, mistake=None):
    kernel, stride = conv.kernel_size, (conv.kernel_size if mistake == "stride" else conv.stride)
    windows = torch.nn.functional.unfold(images, kernel, stride=stride)  # (batch, C*P*P, windows)
    weight = conv.weight.flatten(1)
    if mistake == "kernel_order":
        weight = conv.weight.permute(0, 2, 3, 1).flatten(1)
    if mistake == "no_transpose":
        return weight @ windows + conv.bias[:, None]
    out = windows.transpose(1, 2) @ weight.T
    return out if mistake == "no_bias" else out + conv.bias


def test_correct_unfold_embedding_passes_on_every_device(device, capsys):
    check_unfold_embedding(embed_with_unfold, device=device)
    assert "✓ check_unfold_embedding passed" in capsys.readouterr().out


@pytest.mark.parametrize(
    "mistake, hint",
    [
        ("kernel_order", r"reordered the kernel to \(row, column, channel\)"),
        ("no_bias", r"bias is missing"),
        ("no_transpose", r"Tokens and features are swapped"),
        ("stride", r"(?s)size is hard-coded.*pass stride=conv.stride"),
    ],
)
def test_unfold_embedding_mistakes_are_diagnosed(mistake, hint):
    with pytest.raises(CheckFailed, match=hint):
        check_unfold_embedding(functools.partial(embed_with_unfold, mistake=mistake))


def train_epoch(model, batches, optimizer, mistake=None):
    if mistake != "no_train":
        model.train()
    losses, sizes = [], []
    for images, labels in batches:
        logits = model(images)
        if mistake == "softmax":  # probabilities handed to cross_entropy, which takes logits
            logits = logits.softmax(dim=-1)
        loss_fn = nn.functional.nll_loss if mistake == "nll" else nn.functional.cross_entropy
        loss = loss_fn(logits, labels, reduction="sum" if mistake == "sum" else "mean")
        if mistake not in ("no_zero_grad", "zero_grad_before_step"):
            optimizer.zero_grad()
        loss.backward()
        if mistake == "zero_grad_before_step":
            optimizer.zero_grad()
        if mistake != "no_step":
            optimizer.step()
        losses.append(loss.detach())
        sizes.append(len(labels))
    if mistake == "tensor":
        return sum(loss * n for loss, n in zip(losses, sizes)) / sum(sizes)
    if mistake == "batch_mean":
        return torch.stack(losses).mean().item()
    return sum(loss.item() * n for loss, n in zip(losses, sizes)) / sum(sizes)


def test_correct_train_epoch_passes_on_every_device(device, capsys):
    check_train_epoch(train_epoch, device=device)
    assert "✓ check_train_epoch passed" in capsys.readouterr().out


@pytest.mark.parametrize(
    "mistake, hint",
    [
        ("no_train", r"left the model in eval mode: call model.train\(\)"),
        ("no_step", r"did not change the weights: call optimizer.step\(\)"),
        ("no_zero_grad", r"gradients accumulate.*optimizer.zero_grad\(\)"),
        ("zero_grad_before_step", r"found no gradients.*cleared before the step used them"),
        ("tensor", r"returned a tensor; return a Python float"),
        ("batch_mean", r"mean of the batch losses.*weight each batch by its size"),
        ("sum", r"summed over the batch \(reduction='sum'\).*mean over the batch"),
        ("softmax", r"softmax before F.cross_entropy.*raw logits"),
        ("nll", r"F.nll_loss on the model's raw logits"),
    ],
)
def test_train_epoch_mistakes_are_diagnosed(mistake, hint):
    with pytest.raises(CheckFailed, match=hint):
        check_train_epoch(functools.partial(train_epoch, mistake=mistake))


def cls_attention(model, images, mistake=None):
    maps = model.attention_maps(images)  # (depth, batch, heads, tokens, tokens)
    block = maps[0] if mistake == "first_block" else maps[-1]
    if mistake == "head_0":
        rows = block[:, 0, 0, 1:]
    elif mistake == "cls_column_kept":
        rows = block[:, :, 0, :-1].mean(dim=1)
    elif mistake == "column_to_cls":
        rows = block[:, :, 1:, 0].mean(dim=1)
    else:
        rows = block[:, :, 0, 1:].mean(dim=1)
    if mistake == "renormalised":
        rows = rows / rows.sum(dim=-1, keepdim=True)
    if mistake == "hard_coded_grid":
        return rows.reshape(len(images), 4, 4)
    grid = rows.reshape(len(images), *model.patch_embed.grid_size)
    return grid.transpose(-2, -1) if mistake == "transposed" else grid


def test_correct_cls_attention_passes_on_every_device(device, capsys):
    check_cls_attention(cls_attention, device=device)
    assert "✓ check_cls_attention passed" in capsys.readouterr().out


@pytest.mark.parametrize(
    "mistake, hint",
    [
        ("first_block", r"first block's attention; take the last block's"),
        ("head_0", r"head 0 only; average the \[CLS\] row over all the heads"),
        ("transposed", r"the grid is transposed"),
        ("cls_column_kept", r"kept the \[CLS\] column"),
        ("column_to_cls", r"attention \*to\* \[CLS\]"),
        ("hard_coded_grid", r"size is hard-coded"),
        ("renormalised", r"renormalised over the patches \(as vitedu.interpret.cls_attention.*not renormalised"),
    ],
)
def test_cls_attention_mistakes_are_diagnosed(mistake, hint):
    with pytest.raises(CheckFailed, match=hint):
        check_cls_attention(functools.partial(cls_attention, mistake=mistake))


def test_the_cls_attention_model_is_peaked_in_its_last_block():
    """What check_cls_attention's pass message says of its model: in the last block, [CLS]'s strongest patch
    gets 2 to 5 times the uniform share (with every weight at std 0.3 it got at most 1.1 times)."""
    from vitedu.checks.a3_training import _peaked_vit
    from vitedu.checks.diagnosis import randn

    gen, cpu = torch.Generator().manual_seed(17), torch.device("cpu")  # as the check draws its first model
    model = _peaked_vit(gen, cpu)
    with torch.no_grad():
        rows = model.attention_maps(randn(gen, 6, 1, 8, 8, device=cpu))[-1, :, :, 0, 1:].mean(dim=1)
    strongest = rows.max(dim=-1).values * 17  # in units of the uniform share 1/17
    assert (strongest > 1.9).all() and (strongest < 5.1).all() and strongest.max() > 4.5, strongest


def test_the_docstring_lists_every_check():
    import vitedu.checks as checks

    for name in checks.__all__:
        if name.startswith("check_"):
            assert f"{name}" in checks.__doc__, f"{name} is missing from the list of diagnosed mistakes"


# ---------------------------------------------------------------------------------------------------
# Accuracy and evaluate have checks; every check grades aspects (only=) for partial credit


def accuracy(logits, labels):
    return (logits.argmax(dim=-1) == labels).float().mean().item()


def make_evaluate(device, ignore_split=False):
    """A3's evaluate as a student writes it, reading the digits through a loader on ``device``."""
    from vitedu.constants import DIGITS_MEAN, DIGITS_STD
    from vitedu.digits import DIGITS_MAX, load_digits
    from vitedu.loaders import TensorLoader

    splits = load_digits()

    @torch.no_grad()
    def evaluate(model, split):
        images, labels = splits["train" if ignore_split else split]
        batches = TensorLoader(images, labels, 500, mean=DIGITS_MEAN, std=DIGITS_STD, max_value=DIGITS_MAX,
                               device=device)
        model.eval()
        logits, ys = zip(*[(model(x), y) for x, y in batches])
        logits, ys = torch.cat(logits), torch.cat(ys)
        return nn.functional.cross_entropy(logits, ys).item(), accuracy(logits, ys)

    return evaluate


def test_correct_accuracy_and_evaluate_pass_on_every_device(device, capsys):
    check_accuracy(accuracy, device=device)
    check_evaluate(make_evaluate(device), device=device)
    out = capsys.readouterr().out
    assert "✓ check_accuracy passed" in out and "✓ check_evaluate passed" in out


def test_an_evaluate_that_ignores_its_split_is_named():
    with pytest.raises(CheckFailed, match=r"scored the training images, not the validation images.*split argument"):
        check_evaluate(make_evaluate("cpu", ignore_split=True), device="cpu", only="split")


ASPECTS = [
    (check_attention_weights, attention_weights, "values"),
    (check_attention, attention, "values"),
    (check_masked_attention, masked_attention, "padding"),
    (check_single_head, single_head, "values"),
    (check_multi_head_split, split_heads, "values"),
    (check_multi_head_merge, merge_heads, "values"),
    (check_multi_head_attention, make_mhsa(), "values"),
    (check_patchify, patchify, "values"),
    (check_patch_embedding, make_patch_embed(), "values"),
    (check_unfold_embedding, embed_with_unfold, "patches"),
    (check_encoder_block, make_block(), "attention branch"),
    (check_encoder_block, make_block(), "MLP branch"),
    (check_accuracy, accuracy, "values"),
    (check_train_epoch, train_epoch, "update"),
    (check_train_epoch, train_epoch, "training mode"),
    (check_train_epoch, train_epoch, "mean loss"),
    (check_cls_attention, cls_attention, "weights"),
    (check_cls_attention, cls_attention, "raw weights"),
]


@pytest.mark.parametrize("check, solution, only", ASPECTS, ids=lambda x: x if isinstance(x, str) else None)
def test_every_aspect_passes_a_right_solution_and_says_which(check, solution, only, capsys):
    check(solution, only=only)
    out = capsys.readouterr().out
    assert out.startswith(f"✓ {check.__name__} passed") and max(map(len, out.splitlines())) <= PAGE_WIDTH


def test_an_unknown_aspect_is_an_error_that_lists_the_known_ones():
    with pytest.raises(ValueError, match=r"unknown only='values'; choose one of 'padding'"):
        check_masked_attention(masked_attention, only="values")


@pytest.mark.parametrize(
    "check, slip, only",
    [
        (check_masked_attention, functools.partial(masked_attention, mistake="finite"), "padding"),
        (check_masked_attention, functools.partial(masked_attention, mistake="nan"), "padding"),
        (check_attention_weights, naive_attention_weights, "values"),
        (check_attention_weights, hardcoded_attention_weights, "values"),
        (check_unfold_embedding, functools.partial(embed_with_unfold, mistake="stride"), "patches"),
        (check_train_epoch, functools.partial(train_epoch, mistake="batch_mean"), "update"),
        (check_train_epoch, functools.partial(train_epoch, mistake="batch_mean"), "training mode"),
        (check_train_epoch, functools.partial(train_epoch, mistake="no_train"), "mean loss"),
        (check_cls_attention, functools.partial(cls_attention, mistake="renormalised"), "weights"),
        (check_cls_attention, functools.partial(cls_attention, mistake="hard_coded_grid"), "raw weights"),
        (check_encoder_block, make_block("norm1_twice"), "attention branch"),
    ],
)
def test_a_slip_passes_the_core_aspects_and_fails_the_whole_check(check, slip, only, capsys):
    check(slip, only=only)
    with pytest.raises(CheckFailed):
        check(slip)


@pytest.mark.parametrize(
    "check, broken, only",
    [
        (check_masked_attention, functools.partial(masked_attention, mistake="inverted"), "padding"),
        (check_train_epoch, functools.partial(train_epoch, mistake="no_step"), "training mode"),
        (check_train_epoch, functools.partial(train_epoch, mistake="zero_grad_before_step"), "mean loss"),
        (check_cls_attention, functools.partial(cls_attention, mistake="head_0"), "raw weights"),
        (check_encoder_block, make_block("post_norm"), "MLP branch"),
        (check_attention_weights, functools.partial(attention_weights, axis=-2), "values"),
    ],
)
def test_a_broken_mechanism_fails_every_aspect(check, broken, only):
    with pytest.raises(CheckFailed):
        check(broken, only=only)
