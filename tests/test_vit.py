"""The full model: paper parameter counts, timm's layout and numerics, gradients, resolutions, dtypes."""

import pytest
import torch
from tools_loader import load_benchmark

import vitedu
from vitedu import VisionTransformer, count_parameters, create_model

timm = load_benchmark("timm_reference").import_timm()  # timm without torchvision
needs_timm = pytest.mark.skipif(timm is None, reason="timm is not installed (pip install --no-deps timm)")

SMALL = dict(img_size=32, patch_size=8, embed_dim=48, depth=2, num_heads=3, num_classes=10)


@pytest.mark.parametrize(
    "name, params",
    [  # ViT paper Table 1 / timm / torchvision, 1000 classes, 224 px, [CLS] pooling
        ("vit_tiny_patch16_224", 5_717_416),
        ("vit_small_patch16_224", 22_050_664),
        ("vit_base_patch16_224", 86_567_656),
        ("vit_large_patch16_224", 304_326_632),
    ],
)
def test_parameter_counts_match_the_paper(name, params):
    with torch.device("meta"):  # no memory is allocated for the weights
        model = create_model(name)
    assert count_parameters(model) == params


def _timm_vit(pool: str, **kwargs):
    from timm.models.vision_transformer import VisionTransformer as TimmViT

    extra = dict(class_token=False, global_pool="avg") if pool == "mean" else {}
    return TimmViT(**kwargs, **extra)


@needs_timm
@pytest.mark.parametrize("pool", ["cls", "mean"])
@pytest.mark.parametrize("extras", [{}, {"init_values": 1e-5}, {"qkv_bias": False}])
def test_state_dict_identical_to_timm(pool, extras):
    ours = VisionTransformer(**SMALL, pool=pool, **extras)
    theirs = _timm_vit(pool, **SMALL, **extras)
    ours_sd, theirs_sd = ours.state_dict(), theirs.state_dict()
    assert list(ours_sd) == list(theirs_sd)  # same keys, in the same order
    assert {k: v.shape for k, v in ours_sd.items()} == {k: v.shape for k, v in theirs_sd.items()}


@needs_timm
@pytest.mark.parametrize("pool", ["cls", "mean"])
def test_timm_weights_give_timm_outputs(device, pool):
    theirs = _timm_vit(pool, **SMALL).to(device).eval()
    ours = VisionTransformer(**SMALL, pool=pool).to(device).eval()
    ours.load_state_dict(theirs.state_dict())  # direct load, no conversion
    images = torch.randn(3, 3, 32, 32, device=device)
    torch.testing.assert_close(ours(images), theirs(images), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(ours.forward_features(images), theirs.forward_features(images), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("pool", ["cls", "mean"])
def test_shapes_and_attention_maps(device, pool):
    model = VisionTransformer(**SMALL, pool=pool).to(device).eval()
    images = torch.randn(2, 3, 32, 32, device=device)
    tokens = 16 + (pool == "cls")
    assert model(images).shape == (2, 10)
    assert model.forward_features(images).shape == (2, tokens, 48)
    maps = model.attention_maps(images)
    assert maps.shape == (2, 2, 3, tokens, tokens)  # (depth, batch, heads, tokens, tokens)
    torch.testing.assert_close(maps.sum(-1), torch.ones(2, 2, 3, tokens, device=device))
    # the explicit path (which materialises the weights) computes what the fused path computes
    explicit = model.forward_head(model._encode(images, need_weights=True)[0])
    torch.testing.assert_close(explicit, model(images), atol=1e-5, rtol=1e-5)


def test_gradients_reach_every_parameter(device):
    model = VisionTransformer(**SMALL, init_values=1e-1, drop_path_rate=0.0).to(device)
    model(torch.randn(2, 3, 32, 32, device=device)).logsumexp(-1).sum().backward()
    missing = [name for name, p in model.named_parameters() if p.grad is None or p.grad.abs().sum() == 0]
    assert missing == []


def test_sincos_positions_are_fixed():
    model = VisionTransformer(**SMALL, pos_embed="sincos")
    assert not model.pos_embed.requires_grad
    torch.testing.assert_close(model.pos_embed, vitedu.sincos_pos_embed_2d(48, 4, num_prefix_tokens=1))
    assert list(model.state_dict()) == list(VisionTransformer(**SMALL).state_dict())


def test_learned_positions_can_start_as_sincos():
    model = VisionTransformer(**SMALL, pos_embed="learn_sincos")
    assert model.pos_embed.requires_grad
    torch.testing.assert_close(model.pos_embed, vitedu.sincos_pos_embed_2d(48, 4, num_prefix_tokens=1))
    assert list(model.state_dict()) == list(VisionTransformer(**SMALL).state_dict())


def test_other_resolution_resamples_positions(device):
    model = VisionTransformer(**SMALL).to(device).eval()
    images = torch.randn(2, 3, 48, 64, device=device)  # 6 x 8 patch grid instead of 4 x 4
    wide = VisionTransformer(**{**SMALL, "img_size": (48, 64)}).to(device).eval()
    state = model.state_dict()
    state["pos_embed"] = vitedu.resample_pos_embed(model.pos_embed, (6, 8), (4, 4))
    wide.load_state_dict(state)
    torch.testing.assert_close(model(images), wide(images), atol=1e-5, rtol=1e-5)
    assert model.attention_maps(images).shape == (2, 2, 3, 49, 49)


def test_bf16_autocast_runs():
    model = VisionTransformer(**SMALL).eval()
    images = torch.randn(2, 3, 32, 32)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        logits = model(images)
    assert logits.dtype == torch.bfloat16
    assert (logits.float() - model(images)).abs().max() < 0.1


@pytest.mark.integration
def test_torch_compile_matches_eager():
    if not hasattr(torch, "compile"):
        pytest.skip("this torch has no torch.compile")
    model = VisionTransformer(img_size=8, patch_size=4, embed_dim=16, depth=1, num_heads=2, num_classes=3).eval()
    images = torch.randn(2, 3, 8, 8)
    try:
        compiled = torch.compile(model, backend="aot_eager")  # no C++ toolchain needed
        out = compiled(images)
    except Exception as err:  # pragma: no cover - depends on the platform
        pytest.skip(f"torch.compile is not supported here: {type(err).__name__}: {err}")
    torch.testing.assert_close(out, model(images), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize(
    "kwargs, images, message",
    [
        (SMALL, (2, 3, 30, 32), "not divisible by patch size"),
        (SMALL, (2, 1, 32, 32), "expects 3 channel"),
        (SMALL, (3, 32, 32), "4-D batch"),
    ],
)
def test_bad_images_explain_themselves(kwargs, images, message):
    with pytest.raises(ValueError, match=message):
        VisionTransformer(**kwargs)(torch.randn(images))


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"num_heads": 5}, "embed_dim=48 is not divisible by num_heads=5"),
        ({"pool": "max"}, "pool must be 'cls'"),
        ({"pos_embed": "sincos_learn"}, "pos_embed must be 'learn' .random start., 'learn_sincos'"),
        ({"weight_init": "jax"}, "weight_init must be '' .timm's default. or 'mimetic'"),
        ({"img_size": 30}, "not divisible by patch_size"),
    ],
)
def test_bad_configurations_explain_themselves(overrides, message):
    with pytest.raises(ValueError, match=message):
        VisionTransformer(**{**SMALL, **overrides})


def test_stochastic_depth_grows_linearly_with_depth():
    """drop_path_rate is the drop probability of the *last* block; the first never drops, deeper blocks drop more
    (timm / DeiT: torch.linspace(0, drop_path_rate, depth))."""
    model = VisionTransformer(**{**SMALL, "depth": 5}, drop_path_rate=0.2)
    # both branches of a block share its rate; a rate of 0 is an nn.Identity (no DropPath at all)
    rates = [getattr(block.drop_path1, "drop_prob", 0.0) for block in model.blocks]
    assert rates == [getattr(block.drop_path2, "drop_prob", 0.0) for block in model.blocks]
    assert rates == pytest.approx(torch.linspace(0, 0.2, 5).tolist())


@pytest.mark.parametrize("family", ["vit", "convit"])
def test_every_model_takes_its_stochastic_depth_from_the_one_schedule(family, monkeypatch):
    """ViT and ConViT ask blocks.drop_path_rates for their rates (CaiT keeps one rate in every block, as its paper)."""
    from vitedu import convit, vit
    from vitedu.convit import ConVit

    module, build = {"vit": (vit, lambda: VisionTransformer(**SMALL, drop_path_rate=0.3)),
                     "convit": (convit, lambda: ConVit(img_size=16, patch_size=4, embed_dim=16, depth=3,
                                                        num_heads=4, local_up_to_layer=1, drop_path_rate=0.3))}[family]
    asked = []
    monkeypatch.setattr(module, "drop_path_rates", lambda rate, depth: asked.append((rate, depth)) or [0.5] * depth)
    model = build()
    assert asked == [(0.3, len(model.blocks))]
    assert all(block.drop_path1.drop_prob == block.drop_path2.drop_prob == 0.5 for block in model.blocks)


@pytest.mark.parametrize("pool", ["cls", "mean"])
def test_vit_classifies_through_the_shared_head(pool):
    """VisionTransformer is a ClassTokenClassifier (like CaiT and ConViT): only the pooling is its own, and the
    head keeps timm's names (head.weight, head.bias, norm.* or fc_norm.*)."""
    from vitedu.vit import ClassTokenClassifier

    model = VisionTransformer(**SMALL, pool=pool).eval()
    assert isinstance(model, ClassTokenClassifier)
    assert type(model).forward_head is ClassTokenClassifier.forward_head
    norm = "norm" if pool == "cls" else "fc_norm"
    assert {"head.weight", "head.bias", f"{norm}.weight", f"{norm}.bias"} <= set(model.state_dict())
    images = torch.randn(2, 3, 32, 32)
    features = model.forward_features(images)
    pooled = features[:, 0] if pool == "cls" else model.fc_norm(features.mean(1))  # mean: no prefix token
    torch.testing.assert_close(model.forward_head(features, pre_logits=True), pooled)
    torch.testing.assert_close(model(images), model.head(pooled))


def test_layer_scale_reaches_every_block():
    """init_values=1e-5 gives every block's two branches LayerScale factors of 1e-5 (and none without it)."""
    scaled = VisionTransformer(**SMALL, init_values=1e-5)
    gammas = [p for name, p in scaled.named_parameters() if name.endswith("gamma")]
    assert len(gammas) == 2 * SMALL["depth"] and all(torch.all(g == 1e-5) for g in gammas)
    assert not any(name.endswith("gamma") for name, _ in VisionTransformer(**SMALL).named_parameters())


def test_defaults_are_vit_base_16_at_224():
    with torch.device("meta"):
        model = VisionTransformer()
    assert count_parameters(model) == 86_567_656 and len(model.blocks) == 12 and model.blocks[0].attn.num_heads == 12


@pytest.mark.parametrize("num_classes, out", [(0, 48), (1, 1)])
def test_num_classes_zero_gives_features_one_gives_a_logit(num_classes, out):
    model = VisionTransformer(**{**SMALL, "num_classes": num_classes}).eval()
    assert model(torch.randn(2, 3, 32, 32)).shape == (2, out)
    assert isinstance(model.head, torch.nn.Identity) == (num_classes == 0)


@pytest.mark.parametrize("name", ["vit_digits_patch2_8", "cait_digits_patch2_8", "convit_digits_patch2_8"])
def test_pre_logits_stops_before_the_head(name):
    model = create_model(name).eval()
    features = model.forward_features(torch.randn(2, 1, 8, 8))
    assert model.forward_head(features, pre_logits=True).shape == (2, 64)


def test_norm_eps_and_tiny_cls_token_reach_the_model():
    model = VisionTransformer(**SMALL, norm_eps=1e-5)
    assert {m.eps for m in model.modules() if isinstance(m, torch.nn.LayerNorm)} == {1e-5}
    assert model.cls_token.abs().max() < 1e-4  # initialised with std 1e-6, as timm


@pytest.mark.parametrize("pool", ["cls", "mean"])
def test_non_square_grid_resamples_at_another_resolution(pool):
    model = VisionTransformer(**{**SMALL, "img_size": (32, 48)}, pool=pool).eval()  # a 4 x 6 grid
    images = torch.randn(2, 3, 48, 64)  # 6 x 8
    wide = VisionTransformer(**{**SMALL, "img_size": (48, 64)}, pool=pool).eval()
    state = model.state_dict()
    state["pos_embed"] = vitedu.resample_pos_embed(model.pos_embed, (6, 8), (4, 6), model.num_prefix_tokens)
    wide.load_state_dict(state)
    torch.testing.assert_close(model(images), wide(images), atol=1e-5, rtol=1e-5)


def test_two_blocks_drop_path_at_zero_and_the_full_rate():
    model = VisionTransformer(**SMALL, drop_path_rate=0.2)  # depth 2
    assert [getattr(b.drop_path1, "drop_prob", 0.0) for b in model.blocks] == pytest.approx([0.0, 0.2])


def test_forward_uses_the_fused_kernel_in_every_block(fused_calls):
    VisionTransformer(**SMALL).eval()(torch.randn(1, 3, 32, 32))
    assert len(fused_calls) == SMALL["depth"]


def test_kept_patches_are_all_that_the_blocks_see_each_at_its_own_position():
    """forward(images, keep=...): keeping every patch is the plain forward; the order of the kept patches does not
    matter ([CLS] attends to a set); only the kept patches' positions (and pixels) reach the output."""
    torch.manual_seed(0)
    model = VisionTransformer(img_size=16, patch_size=4, in_chans=1, num_classes=3, embed_dim=16, depth=2,
                              num_heads=2).eval()
    images = torch.randn(2, 1, 16, 16)
    every = torch.arange(16).expand(2, 16)
    with torch.no_grad():
        assert torch.allclose(model(images, keep=every), model(images), atol=1e-6)
        keep = torch.tensor([[0, 1, 4, 5], [10, 11, 14, 15]])  # a 2 x 2 window of the 4 x 4 grid per image
        out = model(images, keep=keep)
        assert torch.allclose(model(images, keep=keep.flip(1)), out, atol=1e-6)
        changed = images.clone()
        changed[0, :, 8:, :] = 0  # pixels outside image 0's window
        assert torch.allclose(model(changed, keep=keep), out, atol=1e-6)
        assert not torch.allclose(model(changed), model(images), atol=1e-6)
    model.pos_embed.requires_grad_(True)
    model(images, keep=keep).sum().backward()
    rows_with_grad = (model.pos_embed.grad[0].abs().sum(-1) > 0).nonzero().flatten().tolist()
    assert rows_with_grad == [0, 1, 2, 5, 6, 11, 12, 15, 16]  # [CLS] and the eight kept patches (1 + index)
