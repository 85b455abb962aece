"""timm checkpoints, checked against timm itself: each family of ``FAMILIES`` (tools/checkpoint_table.py) is
built with timm (small width and depth), saved in timm's hub format (config.json + model.safetensors, by timm's own
``save_for_hf``) and as a bare state_dict, and must load with identical logits or be refused with its reason."""

import json
import warnings

import pytest
import torch
from safetensors.torch import save_file
from tools_loader import load_benchmark, load_tool

from vitedu.pretrained import from_pretrained
from vitedu.timm_configs import split_tag, timm_kwargs

pytestmark = pytest.mark.hub  # builds every checkpoint family with timm: not in `make unit`

timm = load_benchmark("timm_reference").import_timm()  # timm without torchvision
if timm is None:
    pytest.skip("timm is not installed", allow_module_level=True)
from timm.models._hub import save_for_hf  # noqa: E402

FAMILIES = load_tool("checkpoint_table").FAMILIES  # one timm architecture per family, with vitedu's outcome

SMALL = dict(img_size=32, patch_size=8, depth=2, embed_dim=48, num_heads=3, num_classes=5)
# ConViT's local heads tile a square kernel (4 heads: 2x2), timm's ConViT takes the width per head (12 x 4 = 48),
# and [CLS] joins after the GPSA blocks, so at least one ordinary block must follow them.
FAMILY_SMALL = {"convit_tiny": dict(embed_dim=12, num_heads=4, local_up_to_layer=1)}
IMAGES = torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(1))


def _timm_model(name: str, **kwargs):
    torch.manual_seed(0)
    family = FAMILY_SMALL.get(split_tag(name)[0], {})
    model = timm.create_model(name, pretrained=False, **{**SMALL, **family, **kwargs}).eval()
    with torch.no_grad():  # timm initialises LayerNorms to (1, 0) and LayerScale to 1e-5: randomise everything
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    return model


def _hub_dir(model, path):
    save_for_hf(model, path, safe_serialization=True)  # what timm's push_to_hub uploads
    return path


def _assert_identical(ours, theirs, images=IMAGES):
    with torch.no_grad():
        diff = (ours(images) - theirs(images)).abs().max().item()
    assert diff <= 1e-5, f"max abs logit difference {diff:.2e}"


@pytest.mark.parametrize("family, arch, exact, lacks", FAMILIES, ids=[f[1] for f in FAMILIES])
def test_timm_hub_directory(tmp_path, family, arch, exact, lacks):
    theirs = _timm_model(arch)
    path = _hub_dir(theirs, tmp_path)
    assert json.loads((path / "config.json").read_text())["architecture"] == arch
    if exact:
        _assert_identical(from_pretrained(path), theirs)
    else:
        with pytest.raises(ValueError, match=lacks) as err:
            from_pretrained(path)
        assert arch in str(err.value) and str(path) in str(err.value)


@pytest.mark.parametrize("family, arch, exact, lacks", [
    pytest.param(*f, marks=pytest.mark.slow) if "giant" in f[1] else f for f in FAMILIES  # builds a 1408-wide block
], ids=[f[1] for f in FAMILIES])
def test_bare_state_dict_pinned_by_arch(tmp_path, family, arch, exact, lacks):
    path = tmp_path / "weights.safetensors"
    if exact:  # the architecture's own width and patch size (arch= checks them), one block, a 2x2 patch grid
        patch = timm_kwargs(arch)["patch_size"]
        blocks = dict(depth=2, local_up_to_layer=1) if arch.startswith("convit") else dict(depth=1)  # GPSA, then SA
        theirs = timm.create_model(arch, pretrained=False, img_size=2 * patch, num_classes=5, **blocks).eval()
        save_file(theirs.state_dict(), path)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # arch= pins everything: no assumption, no warning
            ours = from_pretrained(path, arch=arch)
        _assert_identical(ours, theirs, torch.randn(2, 3, 2 * patch, 2 * patch))
    else:
        save_file(_timm_model(arch).state_dict(), path)
        with pytest.raises(ValueError, match=lacks):
            from_pretrained(path, arch=arch)


def test_post_norm_cannot_be_seen_in_the_tensors(tmp_path):
    """A post-norm ViT has the same keys as a pre-norm one: unpinned, vitedu must say what it assumed."""
    theirs = _timm_model("vit_base_patch16_rpn_224")
    path = tmp_path / "rpn.safetensors"
    save_file(theirs.state_dict(), path)
    with pytest.warns(UserWarning, match="pre-norm blocks") as record:
        ours = from_pretrained(path, num_heads=3)
    assert "arch=" in str(record[0].message)
    with torch.no_grad():
        assert (ours(IMAGES) - theirs(IMAGES)).abs().max() > 1e-3  # exactly why the warning is needed
    with pytest.raises(ValueError, match="post-norm"):
        from_pretrained(path, arch="vit_base_patch16_rpn_224")


def test_pretrained_tag_in_hub_config_and_arch(tmp_path):
    theirs = _timm_model("vit_base_patch16_224.augreg2_in21k_ft_in1k")
    path = _hub_dir(theirs, tmp_path / "hub")
    config = json.loads((path / "config.json").read_text())
    assert config["pretrained_cfg"]["tag"] == "augreg2_in21k_ft_in1k"
    _assert_identical(from_pretrained(path), theirs)
    _assert_identical(from_pretrained(path, arch="vit_base_patch16_224.augreg2_in21k_ft_in1k"), theirs)
    with pytest.raises(ValueError, match="contradicts the architecture"):
        from_pretrained(path, arch="vit_small_patch16_224")
    small = timm.create_model("vit_base_patch16_224", depth=1, img_size=32, num_classes=5).eval()
    save_file(small.state_dict(), tmp_path / "bare.safetensors")
    ours = from_pretrained(tmp_path / "bare.safetensors", arch="timm/vit_base_patch16_224.augreg2_in21k_ft_in1k")
    _assert_identical(ours, small)


def test_hub_label_names_become_class_names(tmp_path):
    theirs = _timm_model("vit_small_patch16_224")
    names = ["cat", "dog", "owl", "fox", "elk"]
    save_for_hf(theirs, tmp_path, model_config={"label_names": names}, safe_serialization=True)
    assert from_pretrained(tmp_path).class_names == names


def test_model_args_vitedu_lacks_are_refused(tmp_path):
    path = _hub_dir(_timm_model("vit_small_patch16_224"), tmp_path)
    config = json.loads((path / "config.json").read_text())
    config["model_args"]["qk_norm"] = True
    (path / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="qk_norm=True"):
        from_pretrained(path)


@pytest.mark.slow  # the full 12-block ViT-Ti: the architecture's own depth and width
def test_hub_directory_without_model_args_uses_the_architecture(tmp_path):
    """Configs published before timm recorded model_args: the architecture name and input_size say it all."""
    theirs = _timm_model("vit_tiny_patch16_224", img_size=32, patch_size=16, embed_dim=192, depth=12, num_heads=3)
    path = _hub_dir(theirs, tmp_path)
    config = json.loads((path / "config.json").read_text())
    del config["model_args"]
    config["num_classes"] = 5
    (path / "config.json").write_text(json.dumps(config))
    _assert_identical(from_pretrained(path), theirs)


@pytest.mark.parametrize("layer", ["swiglu", "qk_norm", "no_embed_class", "reg_tokens", "map", "pre_norm"])
def test_bare_state_dict_features_are_named(tmp_path, layer):
    from timm.layers import SwiGLU
    from timm.models.vision_transformer import VisionTransformer as TimmViT

    extra = {"swiglu": dict(mlp_layer=SwiGLU), "qk_norm": dict(qk_norm=True),
             "no_embed_class": dict(no_embed_class=True), "reg_tokens": dict(reg_tokens=4),
             "map": dict(global_pool="map"), "pre_norm": dict(pre_norm=True)}[layer]
    expected = {"swiglu": "SwiGLU", "qk_norm": "q_norm", "no_embed_class": "no_embed_class",
                "reg_tokens": "register tokens", "map": "attention-pool", "pre_norm": "norm_pre"}[layer]
    path = tmp_path / "w.pth"
    torch.save(TimmViT(**SMALL, **extra).state_dict(), path)
    with pytest.raises(ValueError, match=expected) as err:
        from_pretrained(path, num_heads=3)
    assert str(path) in str(err.value)


def test_overrides_are_never_silently_ignored(tmp_path):
    theirs = _timm_model("vit_small_patch16_224")
    path = _hub_dir(theirs, tmp_path / "hub")
    with pytest.raises(ValueError, match=r"num_heads=6 \(the checkpoint has num_heads=3\)"):
        from_pretrained(path, num_heads=6)
    with pytest.raises(ValueError, match="unknown argument"):
        from_pretrained(path, heads=6)
    ours = from_pretrained(path, num_heads=3, drop_path_rate=0.1)  # repeating a value, or a training-only option
    assert ours.blocks[1].drop_path1.drop_prob == pytest.approx(0.1)
    _assert_identical(ours, theirs)
    bare = tmp_path / "bare.safetensors"
    save_file(theirs.state_dict(), bare)
    with pytest.raises(ValueError, match="pass num_heads"):  # width 48 is no standard ViT: no guess at all
        from_pretrained(bare)
    with pytest.raises(ValueError, match="is not a vit_small_patch16_224: its tensors have embed_dim 48"):
        from_pretrained(bare, arch="vit_small_patch16_224")
    real_width = tmp_path / "small.safetensors"
    save_file(timm.create_model("vit_small_patch16_224", depth=1, img_size=32).state_dict(), real_width)
    with pytest.raises(ValueError, match=r"num_heads=12 \(the checkpoint has num_heads=6\)"):
        from_pretrained(real_width, arch="vit_small_patch16_224", num_heads=12)
    with pytest.warns(UserWarning, match="exact GELU") as record:
        _assert_identical(from_pretrained(bare, num_heads=3), theirs)  # the explicit head count is used
    assert "num_heads=" not in str(record[0].message).split("assumed", 1)[1].split("as in timm")[0]


def test_img_size_override_resamples_positions_as_timm(tmp_path):
    from timm.layers import resample_abs_pos_embed

    theirs = _timm_model("vit_small_patch16_224")
    path = _hub_dir(theirs, tmp_path)
    ours = from_pretrained(path, img_size=48)
    state = theirs.state_dict()
    state["pos_embed"] = resample_abs_pos_embed(state["pos_embed"], (6, 6), num_prefix_tokens=1)
    bigger = timm.create_model("vit_small_patch16_224", pretrained=False, **{**SMALL, "img_size": 48}).eval()
    bigger.load_state_dict(state)
    _assert_identical(ours, bigger, torch.randn(2, 3, 48, 48))


@pytest.mark.parametrize("tagged", ["vit_base_patch16_224.mae", "vit_small_patch16_224.dino"])
def test_headless_tags_load(tmp_path, tagged):
    """MAE and DINO weights are published without a classifier (num_classes=0): features, not logits."""
    theirs = _timm_model(tagged, num_classes=0)
    path = _hub_dir(theirs, tmp_path)
    assert json.loads((path / "config.json").read_text())["num_classes"] == 0
    ours = from_pretrained(path)
    assert ours(IMAGES).shape == (2, 48)
    _assert_identical(ours, theirs)


def test_timm_hub_id_loads_what_the_hub_serves(tmp_path, monkeypatch):
    """A hub id goes through the same path as the directory the hub download produces (no network here)."""
    from vitedu import pretrained

    theirs = _timm_model("vit_small_patch16_224.augreg_in21k_ft_in1k")
    served = _hub_dir(theirs, tmp_path / "snapshot")
    monkeypatch.setattr(pretrained, "_download", lambda hub_id: served)
    _assert_identical(from_pretrained("timm/vit_small_patch16_224.augreg_in21k_ft_in1k"), theirs)


def test_hub_config_fields_outside_model_args_are_read(tmp_path):
    """Older timm configs keep the classes at the top level, the resolution in ``pretrained_cfg.input_size`` and
    the label names in ``pretrained_cfg``; each is honoured (11 classes, so the names follow the numeric order of
    their keys: "10" after "9"), a config without classes means timm's 1000, and mistyped fields are named."""
    theirs = _timm_model("vit_small_patch16_224", num_classes=11)
    path = _hub_dir(theirs, tmp_path)
    config = json.loads((path / "config.json").read_text())
    for field in ("num_classes", "img_size"):
        config["model_args"].pop(field, None)
    config.pop("label_names", None)
    config["num_classes"] = 11
    config["pretrained_cfg"]["input_size"] = [3, 32, 32]
    config["pretrained_cfg"]["label_names"] = {str(i): f"class {i}" for i in reversed(range(11))}

    def load(**changes):
        (path / "config.json").write_text(json.dumps({**config, **changes}))
        return from_pretrained(path)

    ours = load()
    _assert_identical(ours, theirs)
    assert ours.class_names == [f"class {i}" for i in range(11)]
    del config["num_classes"]
    with pytest.raises(ValueError, match=r"head.weight: checkpoint \(11, 48\) vs model \(1000, 48\)"):  # timm's default
        load()
    for field, wrong, expected in (("num_classes", "11", "int"), ("num_classes", True, "int"),
                                   ("pretrained_cfg", [3, 32, 32], "dict"), ("label_names", "cat", "list or dict")):
        with pytest.raises(ValueError, match=rf"{field}={wrong!r} \(expected {expected}\)".replace("[", r"\[")):
            load(**{field: wrong})
