"""vitedu.timm_configs: timm's architecture names, which ones vitedu computes exactly, the arguments it builds them
with, and the reasons it gives for refusing the others (from the name, and from a state_dict's keys and shapes).
Everything here runs without timm, except the last test, which checks every supported name against timm itself."""

from __future__ import annotations

import pytest
import torch
from tools_loader import load_benchmark

from vitedu import VisionTransformer
from vitedu.cait import Cait
from vitedu.convit import ConVit
from vitedu.deit import VisionTransformerDistilled
from vitedu.timm_configs import (
    TIMM_ARCHITECTURES,
    TIMM_VARIANTS,
    constructor_defaults,
    family_archs,
    key_reasons,
    name_reasons,
    split_tag,
    state_family,
    timm_kwargs,
    timm_model_class,
)

timm = load_benchmark("timm_reference").import_timm()  # timm without torchvision
needs_timm = pytest.mark.skipif(timm is None, reason="timm is not installed (pip install --no-deps timm)")

D = 48  # a width for the hand-made state_dicts below: only their keys and shapes matter


def _vit_state(**extra: torch.Tensor) -> dict[str, torch.Tensor]:
    """The keys and shapes of a plain timm ViT with a 2x2 patch grid (one block), plus ``extra``."""
    state = {"cls_token": torch.zeros(1, 1, D), "pos_embed": torch.zeros(1, 5, D),
             "patch_embed.proj.weight": torch.zeros(D, 3, 16, 16), "patch_embed.proj.bias": torch.zeros(D),
             "blocks.0.mlp.fc1.weight": torch.zeros(4 * D, D), "blocks.0.mlp.fc2.weight": torch.zeros(D, 4 * D),
             "norm.weight": torch.zeros(D), "head.weight": torch.zeros(10, D)}
    return {**state, **extra}


def test_split_tag_separates_the_architecture_from_the_training_run():
    assert split_tag("timm/vit_base_patch16_224.augreg2_in21k_ft_in1k") == ("vit_base_patch16_224",
                                                                             "augreg2_in21k_ft_in1k")
    for prefix in ("", "timm/", "hf-hub:timm/", "hf_hub:timm/"):  # the spellings of a hub id timm accepts
        assert split_tag(f"{prefix}vit_small_patch16_224.dino") == ("vit_small_patch16_224", "dino")
    assert split_tag("vit_small_patch16_224") == ("vit_small_patch16_224", None)  # no tag: None, not ""
    assert split_tag("vit_small_patch16_224.") == ("vit_small_patch16_224", None)


def test_names_partition_into_plain_vits_and_their_successors_each_with_its_class():
    assert not set(TIMM_ARCHITECTURES) & set(TIMM_VARIANTS)
    assert "vit_base_patch16_224" in TIMM_ARCHITECTURES and "cait_xxs24_224" in TIMM_VARIANTS
    assert all(timm_model_class(name) is VisionTransformer for name in TIMM_ARCHITECTURES)
    assert timm_model_class("timm/deit_small_distilled_patch16_224.fb_in1k") is VisionTransformerDistilled
    assert timm_model_class("cait_xxs24_224") is Cait and timm_model_class("convit_tiny") is ConVit
    assert family_archs(VisionTransformer) == list(TIMM_ARCHITECTURES)
    assert family_archs(Cait) == ["cait_xxs24_224", "cait_s24_224"]
    assert family_archs(ConVit) == ["convit_tiny", "convit_small"]
    assert family_archs(VisionTransformerDistilled) == ["deit_tiny_distilled_patch16_224",
                                                        "deit_small_distilled_patch16_224"]


def test_constructor_defaults_follow_kwargs_to_the_parent_class():
    """VisionTransformerDistilled takes ``**kwargs`` and passes them to VisionTransformer: its defaults are both
    classes' (its own first); a class without ``**kwargs`` stops there."""
    vit = constructor_defaults(VisionTransformer)
    assert vit["embed_dim"] == 768 and vit["depth"] == 12 and vit["img_size"] == 224
    deit = constructor_defaults(VisionTransformerDistilled)
    assert deit["distilled_training"] is True and set(vit) < set(deit)
    assert {k: deit[k] for k in vit} == vit

    class Small(torch.nn.Module):
        def __init__(self, width: int = 3, depth: int = 1) -> None:
            super().__init__()

    class Wider(Small):
        def __init__(self, width: int = 5) -> None:
            super().__init__(width)

    assert constructor_defaults(Small) == {"width": 3, "depth": 1}  # nn.Module's own arguments are not followed
    assert constructor_defaults(Wider) == {"width": 5}  # no **kwargs: the parent's depth is not Wider's to take


def test_state_family_reads_the_successor_from_its_one_key():
    assert state_family(_vit_state()) == (VisionTransformer, "ViT", "")
    assert state_family(_vit_state(dist_token=torch.zeros(1, 1, D))) == (VisionTransformerDistilled,
                                                                         "DeiT-distilled", "dist_token")
    cait = _vit_state(**{"blocks_token_only.0.attn.q.weight": torch.zeros(D, D)})
    assert state_family(cait) == (Cait, "CaiT", "blocks_token_only.0.attn.q.weight")
    convit = _vit_state(**{"blocks.3.attn.gating_param": torch.zeros(4)})
    assert state_family(convit) == (ConVit, "ConViT", "blocks.3.attn.gating_param")
    # the patterns are anchored: a key that only contains the words does not count
    assert state_family(_vit_state(**{"head.dist_token": torch.zeros(1)}))[1] == "ViT"


def test_name_reasons_say_what_an_architecture_has_that_vitedu_lacks():
    assert name_reasons("vit_base_patch16_224") == []
    assert name_reasons("vit_medium_patch16_rpn_224") == [
        "post-norm blocks (timm's ResPostBlock: LayerNorm after each residual branch, not before)"]
    beit = name_reasons("beit_base_patch16_224")
    assert len(beit) == 2 and "relative position biases" in beit[0] and "q_bias/v_bias" in beit[1]
    assert any("register tokens" in r for r in name_reasons("vit_base_patch14_reg4_dinov2"))
    assert any("vitedu has no name for" in r and "convit_tiny" in r for r in name_reasons("convit_base"))


def test_key_reasons_read_what_the_tensors_show():
    assert key_reasons(_vit_state()) == []  # a plain ViT shows nothing vitedu lacks
    assert key_reasons({}) == []
    beit = key_reasons(_vit_state(**{"blocks.0.attn.q_bias": torch.zeros(D)}))
    assert beit == ["'q_bias'/'v_bias' are BEiT-style biases (query and value only); vitedu's ViT uses one qkv bias"]
    gated = _vit_state(**{"blocks.0.mlp.fc1.weight": torch.zeros(4 * D, D), "blocks.0.mlp.fc2.weight":
                          torch.zeros(D, 2 * D)})  # fc1 computes two halves, multiplied into fc2's input
    assert any("packed gated MLP" in r for r in key_reasons(gated))
    no_positions = {k: v for k, v in _vit_state().items() if k != "pos_embed"}
    assert any("'pos_embed' is missing" in r for r in key_reasons(no_positions))
    no_bias = {k: v for k, v in _vit_state().items() if k != "patch_embed.proj.bias"}
    assert key_reasons(no_bias) == ["a patch embedding without bias (CLIP-style)"]
    skips_cls = _vit_state(pos_embed=torch.zeros(1, 4, D))  # 4 = the 2x2 patches: no slot for [CLS]
    assert any("no_embed_class" in r for r in key_reasons(skips_cls))
    gap = {k: v for k, v in _vit_state().items() if k != "cls_token"}  # pooled, normalised before pooling
    assert any("average pooling after the final LayerNorm" in r for r in key_reasons(gap))
    assert key_reasons({**gap, "fc_norm.weight": torch.zeros(D)}) == []  # vitedu's mean pooling: norm after
    both = _vit_state(**{"fc_norm.weight": torch.zeros(D)})
    assert any("[CLS] token together with average pooling" in r for r in key_reasons(both))


def test_timm_kwargs_give_every_argument_of_the_class():
    kwargs = timm_kwargs("timm/vit_small_patch16_224.augreg_in21k_ft_in1k")
    assert set(kwargs) == set(constructor_defaults(VisionTransformer))
    assert (kwargs["embed_dim"], kwargs["depth"], kwargs["num_heads"], kwargs["img_size"]) == (384, 12, 6, 224)
    assert timm_kwargs("cait_xxs24_224")["depth_token_only"] == 2


def test_timm_kwargs_take_the_resolution_and_model_args_of_the_config():
    assert timm_kwargs("vit_base_patch16_224", pretrained_cfg={"input_size": [3, 384, 384]})["img_size"] == 384
    assert timm_kwargs("vit_base_patch16_224", pretrained_cfg={"input_size": [3, 384, 256]})["img_size"] == (384, 256)
    args = {"num_classes": 10, "img_size": [96, 96], "global_pool": "token", "drop_rate": 0.1, "class_token": True}
    kwargs = timm_kwargs("vit_base_patch16_224", args, {"input_size": [3, 224, 224]})
    assert kwargs["num_classes"] == 10 and kwargs["img_size"] == 96  # model_args win over the recorded resolution
    assert kwargs["drop_rate"] == 0.0  # harmless arguments are accepted, not applied
    # timm's ConViT takes the width per head; vitedu's the full width
    assert timm_kwargs("convit_tiny")["embed_dim"] == 192
    assert timm_kwargs("convit_tiny", {"embed_dim": 12, "num_heads": 4})["embed_dim"] == 48


def test_timm_kwargs_refuse_with_the_reason_and_the_way_out():
    with pytest.raises(ValueError, match="arch should be a timm architecture name such as 'vit_base_patch16_224', "
                                         "got None"):
        timm_kwargs(None)
    with pytest.raises(ValueError, match=r"'vit_medium_patch16_rpn_224' is not supported: it has post-norm blocks"
                                         r".*TIMM_ARCHITECTURES"):
        timm_kwargs("vit_medium_patch16_rpn_224")
    count = len(TIMM_ARCHITECTURES) + len(TIMM_VARIANTS)
    with pytest.raises(ValueError, match=f"no exact counterpart for. vitedu loads only the {count} timm architectures"):
        timm_kwargs("totally_new_net")
    with pytest.raises(ValueError, match="Its weights show a patch embedding without bias"):
        timm_kwargs("totally_new_net", state={k: v for k, v in _vit_state().items() if k != "patch_embed.proj.bias"})
    with pytest.raises(ValueError, match=r"model_args that vitedu does not implement: qk_norm=True, "
                                         r"global_pool='avg'; vitedu's VisionTransformer is timm's"):
        timm_kwargs("vit_base_patch16_224", {"qk_norm": True, "global_pool": "avg", "qkv_bias": True})
    timm_kwargs("vit_base_patch16_224", {"qk_norm": False, "global_pool": ""})  # timm's defaults are fine


def _assert_identical(ours, theirs, images):
    with torch.no_grad():
        diff = (ours(images) - theirs(images)).abs().max().item()
    assert diff <= 1e-5, f"max abs logit difference {diff:.2e}"


@pytest.mark.hub
@pytest.mark.slow
@needs_timm
@pytest.mark.parametrize("arch", sorted(TIMM_ARCHITECTURES))
def test_every_supported_architecture_matches_timm(arch):
    """The names and numbers in TIMM_ARCHITECTURES are timm's: widths, heads, MLP width, biases, LayerScale,
    resolution (one block at the full width, a 2x2 patch grid, so even ViT-gigantic builds in a second)."""
    ours_kwargs = TIMM_ARCHITECTURES[arch]
    assert tuple(timm.get_pretrained_cfg(arch).input_size[1:]) == (ours_kwargs["img_size"],) * 2
    patch = ours_kwargs["patch_size"]
    theirs = timm.create_model(arch, pretrained=False, depth=1, img_size=2 * patch, num_classes=3).eval()
    from vitedu import VisionTransformer
    from vitedu.state_dicts import load_checked

    # Built without initialising its weights (timm's are loaded over every one of them: 4.2 s of CPU for the 30
    # architectures saved); no tensor of the model is left out of its state dict, so none stays uninitialised.
    with torch.device("meta"):
        ours = VisionTransformer(**{**ours_kwargs, "depth": 1, "img_size": 2 * patch, "num_classes": 3})
    ours.to_empty(device="cpu")
    assert {name for name, _ in ours.named_buffers()} | {name for name, _ in ours.named_parameters()} <= set(
        ours.state_dict())
    load_checked(ours, theirs.state_dict())
    assert ours.blocks[0].attn.num_heads == theirs.blocks[0].attn.num_heads
    _assert_identical(ours.eval(), theirs, torch.randn(1, 3, 2 * patch, 2 * patch))
