"""timm checkpoints of DeiT-distilled, CaiT and ConViT through ``vitedu.from_pretrained``: a timm hub directory and
a bare state_dict with ``arch=`` give timm's logits for randomly perturbed weights; the values the checkpoint
records (classes, depth, resolution) are honoured, contradicting overrides raise, and a file without ``arch=``
says which one to pass."""

import json

import pytest
import torch
from safetensors.torch import save_file
from tools_loader import load_benchmark

from vitedu.cait import Cait
from vitedu.convit import ConVit
from vitedu.deit import VisionTransformerDistilled
from vitedu.pretrained import from_pretrained

timm = load_benchmark("timm_reference").import_timm()  # timm without torchvision
if timm is None:
    pytest.skip("timm is not installed", allow_module_level=True)
from timm.models._hub import save_for_hf  # noqa: E402

# family -> (timm name, vitedu class, timm arguments of a small model: width 48, 2x2-head ConViT kernel).
FAMILIES = {
    "deit": ("deit_small_distilled_patch16_224", VisionTransformerDistilled, dict(embed_dim=48, num_heads=3)),
    "cait": ("cait_xxs24_224.fb_dist_in1k", Cait, dict(embed_dim=48, num_heads=4)),
    "convit": ("convit_tiny", ConVit, dict(embed_dim=12, num_heads=4, local_up_to_layer=1)),  # timm: width per head
}
# Enough blocks for each family at the architecture's own width: ConViT needs an ordinary block after its GPSA one.
FULL_WIDTH_BLOCKS = {"deit": dict(depth=1), "cait": dict(depth=1), "convit": dict(depth=2, local_up_to_layer=1)}


def _perturbed(model):
    """timm's model in eval mode with every weight moved at random: zero, one and identity initialisations (LayerNorm,
    LayerScale's 1e-5, GPSA's identity values) must not hide a bug."""
    with torch.no_grad():
        for tensor in model.state_dict().values():
            if tensor.is_floating_point():
                tensor.add_(0.2 * torch.randn_like(tensor))
    return model.eval()


def _small(family, **kwargs):
    arch, _, small = FAMILIES[family]
    return _perturbed(timm.create_model(arch, img_size=32, patch_size=8, depth=2, num_classes=7, **{**small, **kwargs}))


def _full_width(family):
    """The architecture's own width, heads and patch size (arch= pins them), a 2x2 patch grid and 7 classes."""
    arch = FAMILIES[family][0]
    return _perturbed(timm.create_model(arch, img_size=32, num_classes=7, **FULL_WIDTH_BLOCKS[family]))


def _assert_timms_logits(ours, theirs, device="cpu"):
    images = torch.randn(3, 3, 32, 32, device=device)
    ours, theirs = ours.to(device), theirs.to(device)
    with torch.no_grad():
        expected = theirs(images)
        assert expected.abs().max() > 0.1  # not a comparison of two near-zero outputs
        torch.testing.assert_close(ours(images), expected, atol=1e-4, rtol=1e-4)


def _hub_dir(theirs, path, architecture=None):
    """timm's hub format (what push_to_hub uploads), with label names; optionally a tagged architecture name."""
    labels = [f"class {i}" for i in range(7)]
    save_for_hf(theirs, path, model_config={"label_names": labels}, safe_serialization=True)
    if architecture is not None:
        config = json.loads((path / "config.json").read_text())
        (path / "config.json").write_text(json.dumps({**config, "architecture": architecture}))
    return path


@pytest.mark.parametrize("family", FAMILIES)
def test_hub_directory_gives_timms_logits(tmp_path, family, device):
    arch, model_class, _ = FAMILIES[family]
    theirs = _small(family)
    ours = from_pretrained(_hub_dir(theirs, tmp_path, architecture=arch))  # "cait_xxs24_224.fb_dist_in1k": a tag
    assert type(ours) is model_class and not ours.training
    assert ours.num_classes == 7 and ours.class_names == [f"class {i}" for i in range(7)]
    _assert_timms_logits(ours, theirs, device)


@pytest.mark.integration
@pytest.mark.parametrize("suffix", [".safetensors", ".pth"])
@pytest.mark.parametrize("family", FAMILIES)
def test_state_dict_file_with_arch_gives_timms_logits(tmp_path, family, suffix):
    arch, model_class, _ = FAMILIES[family]
    theirs = _full_width(family)
    path = tmp_path / f"weights{suffix}"
    save_file(theirs.state_dict(), path) if suffix == ".safetensors" else torch.save(theirs.state_dict(), path)
    ours = from_pretrained(path, arch=arch)
    # The tensors decide what they record (classes, depth, resolution), as timm.create_model(arch, num_classes=7).
    assert type(ours) is model_class and ours.num_classes == 7 and len(ours.blocks) == len(theirs.blocks)
    _assert_timms_logits(ours, theirs)


@pytest.mark.parametrize("family, override, recorded", [
    ("deit", dict(num_heads=6), "num_heads=3"),
    ("cait", dict(depth_token_only=1), "depth_token_only=2"),
    ("convit", dict(local_up_to_layer=2), "local_up_to_layer=1"),
    ("convit", dict(embed_dim=12), "embed_dim=48"),  # vitedu's embed_dim is the full width, timm's one head's
])
def test_contradicting_override_raises(tmp_path, family, override, recorded):
    path = _hub_dir(_small(family), tmp_path)
    with pytest.raises(ValueError, match=f"the checkpoint has {recorded}"):
        from_pretrained(path, **override)


@pytest.mark.parametrize("family", FAMILIES)
def test_overrides_that_repeat_the_checkpoint_or_only_train_are_accepted(tmp_path, family):
    theirs = _small(family)
    path = _hub_dir(theirs, tmp_path)
    _assert_timms_logits(from_pretrained(path, num_classes=7, drop_path_rate=0.1), theirs)
    with pytest.raises(ValueError, match="unknown argument.*accepts"):  # e.g. CaiT has no pool=
        from_pretrained(path, pool="mean", stride=2)
    with pytest.raises(ValueError, match="plain ViT only"):  # positions are not resampled for the variants
        from_pretrained(path, img_size=48)


@pytest.mark.parametrize("family, arch", [
    ("deit", "deit_small_distilled_patch16_224"), ("cait", "cait_xxs24_224"), ("convit", "convit_tiny"),
])
def test_file_without_arch_says_which_arch_to_pass(tmp_path, family, arch):
    path = tmp_path / "weights.safetensors"
    save_file(_full_width(family).state_dict(), path)
    with pytest.raises(ValueError, match=f"pass arch='{arch}'") as err:
        from_pretrained(path)
    assert str(path) in str(err.value)
    small = tmp_path / "small.safetensors"  # a width vitedu has no name for: say so, and what to do instead
    save_file(_small(family).state_dict(), small)
    with pytest.raises(ValueError, match="of width 48.*load_state_dict"):
        from_pretrained(small)


def test_arch_of_another_family_is_refused(tmp_path):
    path = tmp_path / "cait.safetensors"
    save_file(_full_width("cait").state_dict(), path)
    with pytest.raises(ValueError, match="not a convit_tiny: its keys are those of a CaiT.*arch='cait_xxs24_224'"):
        from_pretrained(path, arch="convit_tiny")
    with pytest.raises(ValueError, match="not a vit_tiny_patch16_224: its keys are those of a CaiT"):
        from_pretrained(path, arch="vit_tiny_patch16_224")
    with pytest.raises(ValueError, match="CaiT or ConViT configuration vitedu has no name for"):
        from_pretrained(path, arch="cait_s36_384")
    vit = tmp_path / "vit.safetensors"
    save_file(timm.create_model("vit_tiny_patch16_224", depth=1, img_size=32).state_dict(), vit)
    with pytest.raises(ValueError, match="its keys are those of a ViT.*arch='vit_tiny_patch16_224'"):
        from_pretrained(vit, arch="cait_xxs24_224")


def test_variant_model_args_vitedu_lacks_are_refused(tmp_path):
    path = _hub_dir(_small("convit"), tmp_path)
    config = json.loads((path / "config.json").read_text())
    config["model_args"]["use_pos_embed"] = False  # ConViT without position embeddings: not implemented
    (path / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="use_pos_embed=False"):
        from_pretrained(path)


@pytest.mark.slow  # the architectures' full depth and width: about 10 seconds each
@pytest.mark.parametrize("arch", ["cait_xxs24_224", "convit_tiny"])
def test_hub_directory_without_model_args_uses_the_named_configuration(tmp_path, arch):
    """Configs published before timm recorded model_args: the name alone must give timm's whole architecture
    (CaiT's 24 + 2 blocks and LayerScale, ConViT's 10 GPSA blocks and width per head), here on a 2x2 patch grid."""
    theirs = _perturbed(timm.create_model(arch, img_size=32, num_classes=5))
    path = _hub_dir(theirs, tmp_path)
    config = json.loads((path / "config.json").read_text())
    del config["model_args"]
    (path / "config.json").write_text(json.dumps({**config, "num_classes": 5, "label_names": None}))
    _assert_timms_logits(from_pretrained(path), theirs)
