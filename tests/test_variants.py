"""DeiT (distilled), CaiT and ConViT: timm's parameter counts, timm checkpoints give timm's logits,
GPSA's convolution-like initialisation, and helpful errors."""

import pytest
import torch
from tools_loader import load_benchmark

from vitedu import count_parameters, create_model
from vitedu import train as T
from vitedu.cait import Cait
from vitedu.config import PRESETS
from vitedu.convit import ConVit, GatedPositionalSelfAttention, relative_positions
from vitedu.data import make_loaders
from vitedu.deit import VisionTransformerDistilled

timm = load_benchmark("timm_reference").import_timm()  # timm without torchvision
needs_timm = pytest.mark.skipif(timm is None, reason="timm is not installed (pip install --no-deps timm)")


@pytest.mark.parametrize(
    "name, params",
    [  # timm 1.0's models with 1000 classes at 224 px (timm.create_model(name) and count the parameters)
        ("deit_tiny_distilled_patch16_224", 5_910_800),
        ("deit_small_distilled_patch16_224", 22_436_432),
        ("cait_xxs24_224", 11_956_264),
        ("cait_s24_224", 46_916_200),
        ("convit_tiny", 5_710_512),
        ("convit_small", 27_777_322),
    ],
)
def test_parameter_counts_match_timm(name, params):
    with torch.device("meta"):  # the real modules, but no memory for the weights
        model = create_model(name)
    assert count_parameters(model) == params


# The same small configuration for both sides: (vitedu class, vitedu kwargs, timm kwargs).
def _pairs():
    from timm.models.cait import Cait as TimmCait
    from timm.models.convit import ConVit as TimmConVit
    from timm.models.deit import VisionTransformerDistilled as TimmDistilled

    common = dict(img_size=32, patch_size=8, num_classes=7)
    return {
        "deit": (VisionTransformerDistilled, TimmDistilled, dict(**common, embed_dim=48, depth=2, num_heads=3), {}),
        "cait": (Cait, TimmCait, dict(**common, embed_dim=48, depth=2, num_heads=4, init_values=1e-5), {}),
        "convit": (ConVit, TimmConVit, dict(**common, depth=3, num_heads=4, local_up_to_layer=2),
                   dict(embed_dim=12), ),  # timm: width per head; ours: total width 12 * 4 = 48
    }


def _build(family: str):
    ours_class, timm_class, kwargs, timm_only = _pairs()[family]
    ours_kwargs = dict(kwargs, embed_dim=48) if family == "convit" else kwargs
    return ours_class(**ours_kwargs), timm_class(**kwargs, **timm_only)


@needs_timm
@pytest.mark.parametrize("family", ["deit", "cait", "convit"])
def test_state_dict_keys_and_shapes_are_timms(family):
    ours, theirs = _build(family)
    assert {k: v.shape for k, v in ours.state_dict().items()} == {k: v.shape for k, v in theirs.state_dict().items()}


@needs_timm
@pytest.mark.parametrize("family", ["deit", "cait", "convit"])
def test_perturbed_timm_weights_give_timm_logits(family, device):
    ours, theirs = _build(family)
    with torch.no_grad():  # random perturbation: zero/one/identity initialisations must not hide a bug
        for tensor in theirs.state_dict().values():
            if tensor.is_floating_point():
                tensor.add_(0.2 * torch.randn_like(tensor))
    ours.load_state_dict(theirs.state_dict(), strict=True)
    ours, theirs = ours.to(device).eval(), theirs.to(device).eval()
    images = torch.randn(4, 3, 32, 32, device=device)
    with torch.no_grad():
        expected = theirs(images)
        assert expected.abs().max() > 0.1  # the comparison is not between two near-zero outputs
        torch.testing.assert_close(ours(images), expected, atol=1e-4, rtol=1e-4)
        if family == "deit":  # training mode: the two heads separately
            ours.train(), theirs.train(), theirs.set_distilled_training(True)
            for a, b in zip(ours(images), theirs(images), strict=True):
                torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-4)


def test_deit_returns_two_heads_in_training_and_their_average_in_eval():
    model = create_model("deit_digits_patch2_8")
    images = torch.randn(5, 1, 8, 8)
    cls_logits, dist_logits = model.train()(images)
    assert cls_logits.shape == dist_logits.shape == (5, 10) and not torch.allclose(cls_logits, dist_logits)
    torch.testing.assert_close(model.eval()(images), (cls_logits + dist_logits) / 2)
    model.set_distilled_training(False)
    assert model.train()(images).shape == (5, 10)
    assert model.attention_maps(images).shape == (4, 5, 4, 18, 18)  # [CLS], [DIST] and 16 patches


def test_deit_trains_with_hard_distillation_through_its_token():
    from dataclasses import replace

    torch.set_num_threads(1)
    config = replace(PRESETS["digits"], model="deit_digits_patch2_8", model_kwargs={"embed_dim": 32, "depth": 1},
                     epochs=1, batch_size=128, warmup_epochs=0.5, teacher_epochs=1, distill_alpha=0.5,
                     distill_temperature=0.0)
    result = T.fit(config, progress=False, log=lambda _: None, device="cpu")
    assert result.model.distilled_training and result.model.head_dist.weight.grad is not None
    loader = make_loaders(config, torch.device("cpu"))["train"]
    optimizer = torch.optim.SGD(result.model.parameters(), lr=0.0)
    with pytest.raises(ValueError, match="no teacher"):  # two outputs but nothing to distil from
        T.train_one_epoch(result.model, loader, optimizer, torch.amp.GradScaler("cpu", enabled=False), config, 0, 1)


def test_relative_positions_are_key_minus_query():
    rel = relative_positions(3)  # a 3 x 3 grid, patches numbered row by row
    assert rel.shape == (9, 9, 3)
    assert rel[4, 5].tolist() == [1, 0, 1]  # key right of the centre: dx = 1
    assert rel[4, 1].tolist() == [0, -1, 1]  # key above the centre: dy = -1
    assert rel[0, 8].tolist() == [2, 2, 8]


@pytest.mark.parametrize("num_heads, strength", [(9, 1.0), (4, 1.0), (9, 3.0)])
def test_gpsa_starts_local_at_the_prescribed_offsets(num_heads, strength):
    gpsa = GatedPositionalSelfAttention(4 * num_heads, num_heads, grid_size=9, locality_strength=strength)
    torch.nn.init.normal_(gpsa.pos_proj.weight)  # forget anything, then apply the paper's initialisation
    gpsa.local_init()
    position = gpsa.positional_attention()  # (heads, 81, 81)
    query = 40  # the centre of the 9 x 9 grid: no border within reach
    rel = relative_positions(9)[query, :, :2]  # (keys, 2): (dx, dy) of every key
    centre_of_mass = position[:, query] @ rel  # (heads, 2)
    centres = gpsa.attention_centres()
    torch.testing.assert_close(centre_of_mass, centres, atol=1e-3, rtol=0)
    kernel = int(num_heads**0.5)
    assert centres.unique().numel() == kernel  # the heads tile a kernel x kernel neighbourhood
    if kernel % 2:  # odd kernels: each head's strongest key is exactly at its offset
        peak = position[:, query].argmax(-1)
        assert torch.equal(rel[peak], centres)
    spread = (position[:, query] * ((rel - centre_of_mass[:, None]) ** 2).sum(-1)).sum(-1)
    # A blob of variance about 1 / (2 alpha) per axis (a Gaussian sampled on the grid), not a spread-out map.
    assert spread.max() < 1.1 / strength
    # Values start as the identity and the gate at sigmoid(1): mostly positional.
    assert torch.equal(gpsa.v.weight, torch.eye(4 * num_heads))
    torch.testing.assert_close(torch.sigmoid(gpsa.gating_param), torch.full((num_heads,), 0.7311), atol=1e-4, rtol=0)


def test_gpsa_head_order_is_the_papers():
    # Head h = i + k * j of a k x k kernel sits at (dx, dy) = (j - c, i - c) (ConViT's local_init).
    gpsa = GatedPositionalSelfAttention(16, 4, grid_size=4)
    assert gpsa.attention_centres().tolist() == [[-0.5, -0.5], [-0.5, 0.5], [0.5, -0.5], [0.5, 0.5]]


@needs_timm
def test_gpsa_local_init_is_timms():
    ours, theirs = _build("convit")
    for name in ("blocks.0.attn.pos_proj.weight", "blocks.1.attn.v.weight"):
        torch.testing.assert_close(ours.state_dict()[name], theirs.state_dict()[name], atol=0, rtol=0)


def test_convit_gpsa_layers_are_local_before_any_training():
    model = create_model("convit_digits_patch2_8").eval()
    maps = model.attention_maps(torch.randn(2, 1, 8, 8))
    assert maps.shape == (4, 2, 4, 17, 17)  # [CLS] first in every layer, though it joins after the two GPSA layers
    assert maps[:2, ..., 0, :].abs().max() == 0 and maps[:2, ..., :, 0].abs().max() == 0  # ... so it is zero there
    torch.testing.assert_close(maps[..., 1:, :].sum(-1), torch.ones(4, 2, 4, 16))  # every patch row a distribution
    rel = relative_positions(4)[:, :, :2]
    distance = lambda m: (m[..., 1:, 1:] * rel.norm(dim=-1)).sum(-1).mean()  # noqa: E731
    uniform = rel.norm(dim=-1).mean()  # what a head that ignores position would give
    assert distance(maps[0]) < 0.9 * uniform  # gated GPSA: nearer than uniform attention
    assert model.gates().shape == (2, 4)


def test_cait_keeps_patches_out_of_class_attention():
    model = create_model("cait_digits_patch2_8").eval()
    images = torch.randn(3, 1, 8, 8)
    maps = model.attention_maps(images)
    assert maps.shape == (6, 3, 4, 17, 17)  # 4 self-attention layers, then 2 class-attention layers; [CLS] first
    assert maps[:4, ..., 0, :].abs().max() == 0 and maps[:4, ..., :, 0].abs().max() == 0  # patches only, no [CLS]
    assert maps[:4, ..., 1:, 1:].abs().min() > 0
    assert maps[4:, ..., 1:, :].abs().max() == 0  # one query: [CLS]
    torch.testing.assert_close(maps[4:, ..., 0, :].sum(-1), torch.ones(2, 3, 4))  # over [CLS] and the patches
    features = model.forward_features(images)
    with torch.no_grad():  # the patch tokens leave the class-attention layers unchanged
        x = model.patch_embed(images) + model.pos_embed
        for block in model.blocks:
            x = block(x)[0]
    torch.testing.assert_close(features[:, 1:], model.norm(x))
    keys = model.state_dict().keys()
    assert "blocks.0.gamma_1" in keys and "blocks_token_only.1.gamma_2" in keys
    assert not any(".ls1." in k or ".ls2." in k for k in keys)


def test_talking_heads_with_identity_mixing_is_multi_head_attention():
    from vitedu.attention import MultiHeadSelfAttention
    from vitedu.cait import TalkingHeadAttention

    talking, plain = TalkingHeadAttention(32, 4), MultiHeadSelfAttention(32, 4)
    plain.load_state_dict({k: v for k, v in talking.state_dict().items() if not k.startswith(("proj_l", "proj_w"))})
    with torch.no_grad():
        for mix in (talking.proj_l, talking.proj_w):
            mix.weight.copy_(torch.eye(4))
            mix.bias.zero_()
    x = torch.randn(2, 5, 32)
    torch.testing.assert_close(talking(x)[0], plain(x)[0], atol=1e-5, rtol=1e-5)


@needs_timm
def test_talking_heads_mixing_starts_as_timms_cait_does():
    # timm's Cait._init_weights reaches proj_l and proj_w too (std 0.02, zero bias), while a lone TalkingHeadAttn
    # keeps nn.Linear's default; chapter 9's talking-heads demonstration states both.
    from timm.models.cait import Cait as TimmCait
    from timm.models.cait import TalkingHeadAttn

    from vitedu.cait import TalkingHeadAttention

    torch.manual_seed(0)
    kwargs = dict(img_size=32, patch_size=8, num_classes=7, embed_dim=48, depth=24, num_heads=4)
    for model in (Cait(**kwargs), TimmCait(**kwargs)):
        mixing = [module for name, module in model.named_modules() if name.endswith(("proj_l", "proj_w"))]
        assert len(mixing) == 2 * 24
        assert not any(module.bias.any() for module in mixing)
        assert 0.018 < torch.cat([module.weight.flatten() for module in mixing]).std() < 0.022
    bound = 4**-0.5  # nn.Linear(4, 4)'s default: uniform within +-1/sqrt(in_features), weights and biases
    for lone in (TalkingHeadAttention(48, 4), TalkingHeadAttn(48, 4)):
        for module in (lone.proj_l, lone.proj_w):
            assert module.weight.abs().max() <= bound and module.bias.abs().max() <= bound
            assert module.weight.std() > 0.1 and module.bias.abs().max() > 0


@pytest.mark.parametrize(
    "build, message",
    [
        (lambda: ConVit(img_size=32, patch_size=8, embed_dim=48, num_heads=6, depth=3, local_up_to_layer=2),
         "perfect square"),
        (lambda: ConVit(img_size=32, patch_size=8, embed_dim=48, num_heads=4, depth=3, local_up_to_layer=3),
         "local_up_to_layer"),
        (lambda: Cait(img_size=32, patch_size=8, embed_dim=48, num_heads=4, depth=2, depth_token_only=0),
         "class-attention"),
        (lambda: Cait(img_size=32, patch_size=8, embed_dim=48, num_heads=5, depth=2), "not divisible"),
        (lambda: VisionTransformerDistilled(img_size=32, patch_size=8, embed_dim=48, num_heads=3, pool="mean"),
         "DIST"),
    ],
)
def test_bad_configurations_explain_themselves(build, message):
    with pytest.raises(ValueError, match=message):
        build()


def test_gpsa_rejects_a_cls_token():
    gpsa = GatedPositionalSelfAttention(16, 4, grid_size=4)
    with pytest.raises(ValueError, match="insert \\[CLS\\] after"):
        gpsa(torch.randn(2, 17, 16))


@pytest.mark.parametrize("name", ["deit_cluttered_digits", "cait_cluttered_digits", "convit_cluttered_digits"])
def test_cluttered_presets_match_the_vit_they_are_compared_with(name):
    # Chapter 9's comparison is controlled for size: the same grid, width, heads and number of blocks as
    # vit_cluttered_digits, and within 1 % of its parameters.
    vit, model = create_model("vit_cluttered_digits"), create_model(name).eval()
    assert model.patch_embed.grid_size == vit.patch_embed.grid_size == (8, 8)
    assert model.embed_dim == vit.embed_dim
    blocks = len(model.blocks) + len(getattr(model, "blocks_token_only", []))
    assert blocks == len(vit.blocks) == 4
    assert abs(count_parameters(model) / count_parameters(vit) - 1) < 0.01
    assert model(torch.zeros(2, 1, 32, 32)).shape == (2, 10)


# ------------------------------------------------------------------ behaviours found by mutation testing
def test_cait_options_reach_every_layer():
    """Every option of Cait lands in the layers it names: dropout, stochastic depth, biases, LayerScale and norms in
    the patch blocks; the class-attention blocks take biases, LayerScale, norms and their own MLP ratio, no dropout."""
    from vitedu.cait import ClassAttentionBlock

    model = Cait(img_size=16, patch_size=4, num_classes=0, embed_dim=16, depth=2, num_heads=2, mlp_ratio=2.0,
                 qkv_bias=False, drop_rate=0.1, attn_drop_rate=0.2, drop_path_rate=0.3, init_values=0.5,
                 depth_token_only=1, mlp_ratio_token_only=3.0, norm_eps=1e-3)
    half = torch.full((16,), 0.5)
    for block in model.blocks:
        attn = block.attn
        assert attn.qkv.bias is None and attn.attn_drop.p == 0.2 and attn.proj_drop.p == 0.1
        assert block.mlp.fc1.out_features == 32 and block.mlp.drop1.p == 0.1 and block.drop_path1.drop_prob == 0.3
        assert torch.equal(block.ls1.gamma, half) and torch.equal(block.ls2.gamma, half)
        assert block.norm1.eps == block.norm2.eps == 1e-3
    for block in model.blocks_token_only:
        attn = block.attn
        assert attn.q.bias is None and attn.k.bias is None and attn.v.bias is None
        assert attn.attn_drop.p == 0.0 and attn.proj_drop.p == 0.0 and isinstance(block.drop_path1, torch.nn.Identity)
        assert block.mlp.fc1.out_features == 48 and block.mlp.drop1.p == 0.0
        assert torch.equal(block.ls1.gamma, half) and block.norm1.eps == block.norm2.eps == 1e-3
    assert model.norm.eps == 1e-3
    assert isinstance(model.head, torch.nn.Identity) and model.cls_token.abs().max() < 0.1  # trunc-normal, std 0.02
    assert isinstance(Cait(img_size=16, patch_size=4, embed_dim=16, depth=1, num_heads=2, num_classes=1).head,
                      torch.nn.Linear)
    positional = ClassAttentionBlock(16, 2)  # dim and heads may be given by position too
    assert positional.attn.num_heads == 2 and positional.norm1.normalized_shape == (16,)


def test_cait_attention_returns_weights_only_when_asked_and_drops_them_only_in_training():
    model = Cait(img_size=16, patch_size=4, num_classes=3, embed_dim=16, depth=1, num_heads=2, depth_token_only=1)
    x = torch.randn(2, 3, 16, 16)
    tokens = torch.randn(2, 17, 16)
    assert model.blocks[0].attn(tokens[:, 1:])[1] is None and model.blocks_token_only[0].attn(tokens)[1] is None
    assert model.blocks_token_only[0](tokens[:, 1:], tokens[:, :1])[1] is None
    assert all(m is None for m in model._encode(x)[1])
    layer_maps = model._encode(x, need_weights=True)[1]
    assert [m.shape for m in layer_maps] == [(2, 2, 16, 16), (2, 2, 1, 17)]
    maps = model.attention_maps(x)  # the same weights, on the model's 17 tokens
    torch.testing.assert_close(maps[0, ..., 1:, 1:], layer_maps[0])
    torch.testing.assert_close(maps[1, ..., :1, :], layer_maps[1])
    from vitedu.cait import ClassAttention

    attn = ClassAttention(16, 2, attn_drop=0.5)
    torch.manual_seed(0)
    first, second = attn.train()(tokens)[0], attn(tokens)[0]
    assert not torch.equal(first, second)  # attention dropout draws new masks in training
    assert torch.equal(attn.eval()(tokens)[0], attn(tokens)[0])  # and is off in eval


def test_convit_options_reach_every_layer():
    """GPSA layers first, then ordinary ones; qkv bias, dropout, locality strength and norms reach both kinds;
    stochastic depth grows linearly from 0 to drop_path_rate."""
    from vitedu.blocks import DropPath

    model = ConVit(img_size=16, patch_size=4, num_classes=0, embed_dim=16, depth=4, num_heads=4, qkv_bias=True,
                   drop_rate=0.1, attn_drop_rate=0.2, drop_path_rate=0.3, local_up_to_layer=2, locality_strength=2.0,
                   norm_eps=1e-3)
    for block in model.blocks[:2]:
        gpsa = block.attn
        assert isinstance(gpsa, GatedPositionalSelfAttention) and gpsa.locality_strength == 2.0
        assert gpsa.qk.bias is not None and gpsa.v.bias is not None
        assert gpsa.attn_drop.p == 0.2 and gpsa.proj_drop.p == 0.1
    for block in model.blocks[2:]:
        assert block.attn.qkv.bias is not None and block.attn.attn_drop.p == 0.2 and block.attn.proj_drop.p == 0.1
    assert all(block.norm1.eps == block.norm2.eps == 1e-3 and block.mlp.drop1.p == 0.1 for block in model.blocks)
    rates = [b.drop_path1.drop_prob if isinstance(b.drop_path1, DropPath) else 0.0 for b in model.blocks]
    assert rates == pytest.approx([0.0, 0.1, 0.2, 0.3])
    assert isinstance(model.head, torch.nn.Identity) and model.cls_token.abs().max() < 0.1  # trunc-normal, std 0.02
    one = ConVit(img_size=16, patch_size=4, embed_dim=16, depth=2, num_heads=4, local_up_to_layer=1, num_classes=1,
                 drop_path_rate=0.3)
    assert isinstance(one.head, torch.nn.Linear)
    assert model.norm.eps == 1e-3 and one.blocks[1].drop_path1.drop_prob == pytest.approx(0.3)  # the last: all
    plain = ConVit(img_size=16, patch_size=4, embed_dim=16, depth=2, num_heads=4, local_up_to_layer=0)
    assert plain.gates().shape == (0, 0)  # no GPSA layer: a plain ViT, and no gates to show
    assert plain(torch.randn(2, 3, 16, 16)).shape == (2, 1000)


def test_gpsa_defaults_are_timms_and_weights_come_only_when_asked():
    gpsa = GatedPositionalSelfAttention(16, 4, grid_size=4)  # timm's GPSA: no qkv bias, no dropout, strength 1
    assert gpsa.qk.bias is None and gpsa.v.bias is None and gpsa.attn_drop.p == 0.0 and gpsa.proj_drop.p == 0.0
    assert gpsa.locality_strength == 1.0
    assert gpsa(torch.randn(2, 16, 16))[1] is None
    model = ConVit(img_size=16, patch_size=4, embed_dim=16, depth=2, num_heads=4, local_up_to_layer=1)
    assert all(m is None for m in model._encode(torch.randn(2, 3, 16, 16))[1])
    with pytest.raises(ValueError, match=r"Use one of \[1, 4, 9, 16, 25\]"):
        GatedPositionalSelfAttention(12, 3, grid_size=4)


def test_deit_options_and_heads():
    """Arguments by position or keyword as for VisionTransformer; learned positions only; [DIST] initialised like
    [CLS] (std 0.02); a second head only when there are classes; pre-logits are the mean of the two tokens."""
    small = dict(img_size=16, patch_size=4, in_chans=3, num_classes=5, embed_dim=16)
    by_position = VisionTransformerDistilled(16, 4, 3, 5, 16, depth=1, num_heads=2)
    assert by_position.num_classes == 5 and by_position.embed_dim == 16 and by_position.head_dist.out_features == 5
    with pytest.raises(ValueError, match="learned positions"):
        VisionTransformerDistilled(**small, depth=1, num_heads=2, pos_embed="sincos")
    model = VisionTransformerDistilled(**small, depth=1, num_heads=2).eval()
    assert model.dist_token.abs().max() < 0.1
    assert isinstance(VisionTransformerDistilled(**{**small, "num_classes": 0}, depth=1, num_heads=2).head_dist,
                      torch.nn.Identity)
    assert isinstance(VisionTransformerDistilled(**{**small, "num_classes": 1}, depth=1, num_heads=2).head_dist,
                      torch.nn.Linear)
    features = torch.randn(2, 18, 16)  # [CLS], [DIST], 16 patches
    torch.testing.assert_close(model.forward_head(features, pre_logits=True), (features[:, 0] + features[:, 1]) / 2)
    model.set_distilled_training(False)
    model.set_distilled_training()
    assert model.distilled_training is True  # switching on is the default


# ------------------------------------------------------------------ one attention_maps type for every model
@pytest.mark.parametrize("name", ["vit_cluttered_digits", "deit_cluttered_digits", "cait_cluttered_digits",
                                  "convit_cluttered_digits"])
def test_attention_maps_is_one_tensor_on_the_models_tokens_for_every_model(name):
    """(layers, batch, heads, tokens, tokens) with the tokens of forward_features; each layer's own weights sit on
    the tokens it sees (keys: the last ones; queries: the first of those) and zeros elsewhere; vitedu.interpret
    takes the result as it is."""
    from vitedu import interpret as I
    from vitedu.vit import on_model_tokens

    torch.manual_seed(0)
    model = create_model(name).eval()
    images = torch.randn(2, 1, 32, 32)
    maps = model.attention_maps(images)
    tokens = model.forward_features(images).shape[1]
    layer_maps = model._encode(images, need_weights=True)[1]
    assert isinstance(maps, torch.Tensor) and maps.shape == (len(layer_maps), 2, 4, tokens, tokens)
    for full, own in zip(maps, layer_maps):
        queries, keys = own.shape[-2:]
        first = tokens - keys
        torch.testing.assert_close(full[..., first : first + queries, first:], own)
        assert full.abs().sum() == pytest.approx(own.abs().sum().item(), rel=1e-5)  # nothing else is non-zero
        torch.testing.assert_close(on_model_tokens(own, tokens), full)
    rollout = I.attention_rollout(maps)  # (batch, tokens, tokens): a layer's zero rows leave their tokens as they are
    assert rollout.shape == (2, tokens, tokens) and torch.isfinite(rollout).all()
    torch.testing.assert_close(rollout.sum(-1), torch.ones(2, tokens))
    assert I.cls_attention(maps[-1], tokens - 64).shape == (2, 4, 64)


def test_on_model_tokens_keeps_any_leading_axes():
    """(..., queries, keys): one sample's (heads, queries, keys) and a stack's (layers, batch, heads, ...) alike."""
    from vitedu.vit import on_model_tokens

    for lead in [(4,), (3, 2, 4)]:
        cls_row = torch.rand(*lead, 1, 6)  # class attention: [CLS] queries the last 6 tokens
        full = on_model_tokens(cls_row, 9)
        assert full.shape == (*lead, 9, 9)
        assert torch.equal(full[..., 3:4, 3:], cls_row) and full.sum() == cls_row.sum()


def test_on_model_tokens_explains_a_layer_that_does_not_fit():
    from vitedu.vit import on_model_tokens

    with pytest.raises(ValueError, match="does not fit on 17 tokens"):
        on_model_tokens(torch.rand(2, 4, 18, 18), 17)
    with pytest.raises(ValueError, match="queries some of the keys"):
        on_model_tokens(torch.rand(2, 4, 5, 3), 17)
