"""pretrained_cfg, create_transform and the input guard (vitedu.preprocess), for every source of weights:
shipped with vitedu, timm's hub layout, Hugging Face's layout, a bare state_dict, random weights."""

import json

import pytest
import torch
from safetensors.torch import save_file

import vitedu
from vitedu.constants import CLUTTERED_MEAN, CLUTTERED_STD, DIGITS_MEAN, DIGITS_STD
from vitedu.preprocess import create_transform, make_pretrained_cfg
from vitedu.pretrained import timm_pretrained_cfg

MEAN, STD = (0.4, 0.5, 0.6), (0.2, 0.25, 0.3)  # deliberately not a standard set, so a default cannot pass


def _raw(n=2, channels=3, size=32, seed=0):
    """Raw images in [0, 1], as a user has them before any preprocessing."""
    return torch.rand(n, channels, size, size, generator=torch.Generator().manual_seed(seed))


def _normalised(images, mean, std):
    return (images - torch.tensor(mean)[:, None, None]) / torch.tensor(std)[:, None, None]


# ---- shipped weights: the plain three lines give the documented accuracy; the plainer call stops ----

@pytest.mark.integration
def test_shipped_model_plain_use_gives_its_accuracy_and_raw_canvases_are_refused():
    model = vitedu.create_model("vit_cluttered_digits", pretrained=True).eval()
    cfg = model.pretrained_cfg
    assert cfg["input_size"] == (1, 32, 32) and cfg["mean"] == CLUTTERED_MEAN and cfg["std"] == CLUTTERED_STD
    assert cfg["num_classes"] == 10 and cfg["label_names"] == tuple("0123456789")
    images, labels, _ = vitedu.load_cluttered_digits("test", 500)
    with torch.no_grad():
        x = vitedu.create_transform(model)(images)
        assert torch.allclose(x, (images - CLUTTERED_MEAN[0]) / CLUTTERED_STD[0])
        accuracy = (model(x).argmax(-1) == labels).float().mean().item()
        assert accuracy > 0.9
        with pytest.raises(ValueError, match=r"vitedu\.create_transform\(model\)"):
            model(images)
        with pytest.raises(ValueError, match="normalised inputs"):
            model.attention_maps(images)  # the guard sits on the patch embedding: every path is covered
        model.train()  # fine-tuning on raw canvases is the same mistake: training mode checks too
        with pytest.raises(ValueError, match=r"vitedu\.create_transform\(model\)"):
            model(images)
        model.eval()
        model.pretrained_cfg["check_inputs"] = False  # non-negative by design: the documented switch
        assert (model(images).argmax(-1) == labels).float().mean().item() < 0.5  # ... and why the guard exists


@pytest.mark.integration
@pytest.mark.parametrize("mode", ["as returned", "train"])
def test_the_plainest_call_on_raw_canvases_is_refused_in_either_mode(mode):
    """README's model, without .eval() and without create_transform: a refusal that names the fix, never the
    10 % that raw canvases give silently."""
    model = vitedu.create_model("vit_cluttered_digits", pretrained=True)
    assert not model.training  # like from_pretrained: trained weights come ready to use
    if mode == "train":
        model.train()
    images, _, _ = vitedu.load_cluttered_digits("test", 20)  # the accuracy with the transform: the test above
    with torch.no_grad(), pytest.raises(ValueError, match=r"vitedu\.create_transform\(model\)"):
        model(images)


def test_random_weights_carry_the_registry_cfg_and_are_never_checked():
    model = vitedu.create_model("vit_digits_patch4_8").eval()
    assert model.pretrained_cfg["mean"] == DIGITS_MEAN and model.pretrained_cfg["std"] == DIGITS_STD
    assert model.pretrained_cfg["trained"] is False
    model(_raw(2, 1, 8))  # random weights: no answer to protect
    timm_named = vitedu.create_model("vit_tiny_patch16_224", depth=1)
    cfg = timm_named.pretrained_cfg
    assert cfg["mean"] is None and cfg["std"] is None and "tag decides" in cfg["source"]
    with pytest.raises(ValueError, match="mean and std are None"):
        create_transform(timm_named)
    other = vitedu.create_model("vit_digits_patch2_8", in_chans=3)  # the digits' statistics are for one channel
    assert other.pretrained_cfg["mean"] is None and other.pretrained_cfg["input_size"] == (3, 8, 8)


# ---- timm's hub layout: config.json's pretrained_cfg ----

def _timm_dir(tmp_path, pretrained_cfg):
    model = vitedu.VisionTransformer(img_size=32, patch_size=16, embed_dim=192, depth=1, num_heads=3, num_classes=5)
    save_file(model.state_dict(), tmp_path / "model.safetensors")
    config = {"architecture": "vit_tiny_patch16_224", "num_classes": 5, "label_names": list("abcde"),
              "model_args": {"img_size": 32, "depth": 1}, "pretrained_cfg": pretrained_cfg}
    (tmp_path / "config.json").write_text(json.dumps(config))
    return model.eval()


def test_timm_layout_cfg_comes_from_its_config_json(tmp_path):
    reference = _timm_dir(tmp_path, {"input_size": [3, 32, 32], "mean": list(MEAN), "std": list(STD),
                                     "interpolation": "bilinear", "crop_pct": 0.875})
    model = vitedu.from_pretrained(tmp_path)
    cfg = model.pretrained_cfg
    assert cfg["mean"] == MEAN and cfg["std"] == STD and cfg["interpolation"] == "bilinear"
    assert cfg["crop_pct"] == 0.875 and cfg["input_size"] == (3, 32, 32) and cfg["label_names"] == tuple("abcde")
    images = _raw()
    x = create_transform(model)(images)
    assert torch.allclose(x, _normalised(images, MEAN, STD), atol=1e-6)
    with torch.no_grad():
        assert torch.allclose(model(x), reference(x), atol=1e-5)
        with pytest.raises(ValueError, match=r"vitedu\.create_transform\(model\)"):
            model(images)


def test_timm_layout_without_mean_says_unknown(tmp_path):
    _timm_dir(tmp_path, {"input_size": [3, 32, 32]})
    model = vitedu.from_pretrained(tmp_path)
    assert model.pretrained_cfg["mean"] is None and "no mean/std" in model.pretrained_cfg["source"]
    with torch.no_grad():
        model(_raw())  # nothing states the normalisation, so nothing is enforced
    with pytest.raises(ValueError, match="not known"):
        create_transform(model)
    x = create_transform(model, mean=MEAN, std=STD)(_raw())  # the values from the model card, passed explicitly
    assert torch.allclose(x, _normalised(_raw(), MEAN, STD), atol=1e-6)


def _tiny_vit():
    return vitedu.VisionTransformer(img_size=32, patch_size=16, embed_dim=48, depth=1, num_heads=3, num_classes=5)


def test_timm_pretrained_cfg_carries_every_field_config_json_records(tmp_path):
    """vitedu.pretrained.timm_pretrained_cfg: each field of config.json's pretrained_cfg reaches the model's cfg
    (values none of them takes by default: squash, crop_pct 0.9), with the label names; the source names the file."""
    recorded = {"mean": list(MEAN), "std": list(STD), "interpolation": "bilinear", "crop_pct": 0.9,
                "crop_mode": "squash", "input_size": [3, 32, 32]}
    cfg = timm_pretrained_cfg({"pretrained_cfg": recorded}, tmp_path, _tiny_vit(), list("abcde"))
    assert cfg == make_pretrained_cfg(
        input_size=(3, 32, 32), num_classes=5, mean=MEAN, std=STD, interpolation="bilinear", crop_pct=0.9,
        crop_mode="squash", label_names=list("abcde"), source=f"{tmp_path / 'config.json'} (pretrained_cfg)",
        trained=True)
    assert cfg["trained"] is True and cfg["label_names"] == tuple("abcde")


@pytest.mark.parametrize("config", [{}, {"pretrained_cfg": None}, {"pretrained_cfg": {}}],
                         ids=["no-pretrained_cfg", "null", "empty"])
def test_timm_pretrained_cfg_states_nothing_it_was_not_told(tmp_path, config):
    """Without a recorded pretrained_cfg: None for what a checkpoint alone decides (normalisation, interpolation,
    crop_pct), the centre crop, and a source that says the normalisation is unknown; still trained weights."""
    cfg = timm_pretrained_cfg(config, tmp_path, _tiny_vit(), None)
    assert (cfg["mean"], cfg["std"], cfg["interpolation"], cfg["crop_pct"]) == (None, None, None, None)
    assert cfg["crop_mode"] == "center" and cfg["label_names"] is None and cfg["trained"] is True
    assert cfg["input_size"] == (3, 32, 32) and cfg["num_classes"] == 5
    assert cfg["source"] == f"{tmp_path / 'config.json'} states no mean/std in its pretrained_cfg: the normalisation " \
                            "is unknown"


def test_timm_pretrained_cfg_without_crop_mode_crops_the_centre_and_without_mean_says_so(tmp_path):
    """timm's older configs record no crop_mode (timm's default is the centre crop); a std without a mean is no
    normalisation vitedu can apply, and the source says the mean is missing."""
    cfg = timm_pretrained_cfg({"pretrained_cfg": {"mean": list(MEAN), "std": list(STD)}}, tmp_path, _tiny_vit(), None)
    assert cfg["crop_mode"] == "center" and cfg["source"].endswith("config.json (pretrained_cfg)")
    cfg = timm_pretrained_cfg({"pretrained_cfg": {"std": list(STD), "crop_pct": 0.9}}, tmp_path, _tiny_vit(), None)
    assert cfg["mean"] is None and cfg["crop_pct"] == 0.9 and "states no mean/std" in cfg["source"]


# ---- Hugging Face's layout: preprocessor_config.json ----

def test_hugging_face_cfg_comes_from_its_preprocessor_config(tmp_path):
    transformers = pytest.importorskip("transformers", reason="transformers is a test dependency")
    torch.manual_seed(0)
    config = transformers.ViTConfig(image_size=32, patch_size=8, hidden_size=48, num_hidden_layers=1,
                                    num_attention_heads=3, intermediate_size=96, num_labels=4)
    theirs = transformers.ViTForImageClassification(config).eval()
    theirs.save_pretrained(tmp_path)
    model = vitedu.from_pretrained(tmp_path)
    assert model.pretrained_cfg["mean"] is None  # no preprocessor_config.json yet: unknown, not guessed
    assert "no preprocessor_config.json" in model.pretrained_cfg["source"]

    processor = transformers.ViTImageProcessor(image_mean=list(MEAN), image_std=list(STD),
                                               size={"height": 32, "width": 32}, resample=3)
    processor.save_pretrained(tmp_path)
    model = vitedu.from_pretrained(tmp_path)
    cfg = model.pretrained_cfg
    assert cfg["mean"] == MEAN and cfg["std"] == STD and cfg["interpolation"] == "bicubic"
    assert cfg["crop_mode"] == "squash" and cfg["input_size"] == (3, 32, 32) and cfg["num_classes"] == 4
    # Pixels on the 8-bit grid: Hugging Face resizes through PIL (uint8), which then changes nothing.
    images = torch.randint(0, 256, (2, 3, 32, 32), generator=torch.Generator().manual_seed(3)) / 255
    ours = create_transform(model)(images)
    reference = processor(images=list(images), return_tensors="pt", do_rescale=False)["pixel_values"]
    assert torch.allclose(ours, reference, atol=1e-5)
    with torch.no_grad():
        assert torch.allclose(model(ours), theirs(reference).logits, atol=1e-4)
        with pytest.raises(ValueError, match=r"vitedu\.create_transform\(model\)"):
            model(images)


def test_bare_state_dict_records_no_normalisation(tmp_path):
    """What a bare state_dict's pretrained_cfg says: no mean, std, interpolation or crop_pct (nothing records them;
    make_pretrained_cfg's default crop_pct is 1.0), trained weights (so inputs are checked), the file in its source;
    and no class names (not even "")."""
    vit = vitedu.VisionTransformer(img_size=32, patch_size=8, embed_dim=48, depth=1, num_heads=3, num_classes=5)
    path = tmp_path / "weights.safetensors"
    save_file(vit.state_dict(), path)
    with pytest.warns(UserWarning, match="bare state_dict"):
        model = vitedu.from_pretrained(path, num_heads=3)
    cfg = model.pretrained_cfg
    assert cfg["mean"] is None and cfg["interpolation"] is None and cfg["input_size"] == (3, 32, 32)
    with pytest.raises(ValueError, match="not known"):
        create_transform(model)
    assert cfg["trained"] is True and cfg["crop_pct"] is None and cfg["num_classes"] == 5
    assert cfg["source"] == f"{path} is a bare state_dict: it records no input normalisation (mean/std unknown)"
    assert model.class_names is None


# ---- the transform itself ----

def test_transform_resizes_the_shorter_side_and_crops_the_centre_like_timm():
    cfg = make_pretrained_cfg(input_size=(1, 8, 8), num_classes=2, mean=(0.0,), std=(1.0,),
                              interpolation="nearest", crop_pct=0.5)
    image = torch.arange(32 * 48, dtype=torch.float32).reshape(1, 32, 48) / (32 * 48)
    out = create_transform(cfg)(image)  # shorter side 32 -> 8 / 0.5 = 16, i.e. 16 x 24, then the centre 8 x 8
    resized = torch.nn.functional.interpolate(image[None], size=(16, 24), mode="nearest")[0]
    assert out.shape == (1, 8, 8) and torch.equal(out, resized[:, 4:12, 8:16])
    uneven = create_transform(cfg, crop_pct=0.8)(image)  # 32 x 48 -> 10 x 15: margins of 1 and 3, then 8 x 8
    resized = torch.nn.functional.interpolate(image[None], size=(10, 15), mode="nearest")[0]
    assert uneven.shape == (1, 8, 8) and torch.equal(uneven, resized[:, 1:9, 3:11])
    squash = create_transform(cfg, crop_mode="squash")(image)  # Hugging Face: both sides straight to the target
    assert torch.equal(squash, torch.nn.functional.interpolate(image[None], size=(8, 8), mode="nearest")[0])


def test_transform_takes_pil_images_and_lists_of_them():
    pil = pytest.importorskip("PIL.Image")
    cfg = make_pretrained_cfg(input_size=(3, 4, 4), num_classes=2, mean=(0.5,) * 3, std=(0.5,) * 3)
    array = (torch.arange(48, dtype=torch.uint8) * 5).reshape(4, 4, 3)
    image = pil.fromarray(array.numpy(), mode="RGB")
    one = create_transform(cfg)(image)
    expected = (array.permute(2, 0, 1).float() / 255 - 0.5) / 0.5
    assert one.shape == (3, 4, 4) and torch.allclose(one, expected)
    assert torch.allclose(create_transform(cfg)([image, image]), torch.stack([expected, expected]))
    grey = create_transform(make_pretrained_cfg(input_size=(1, 4, 4), num_classes=2, mean=(0.0,), std=(1.0,)))
    assert grey(image).shape == (1, 4, 4)


def test_transform_refuses_what_would_silently_go_wrong():
    cfg = make_pretrained_cfg(input_size=(1, 8, 8), num_classes=2, mean=(0.5,), std=(0.5,))
    transform = create_transform(cfg)
    with pytest.raises(TypeError, match="divide by the largest pixel value"):
        transform(torch.zeros(1, 1, 8, 8, dtype=torch.uint8))
    with pytest.raises(ValueError, match="already normalised"):
        transform(transform(_raw(1, 1, 8)))  # normalising twice
    with pytest.raises(ValueError, match="1-channel"):
        transform(_raw(1, 3, 8))
    with pytest.raises(ValueError, match="does not say how"):
        create_transform({**cfg, "interpolation": None})(_raw(1, 1, 16))
    with pytest.raises(ValueError, match=r"mean needs one value per input channel \(3\), got \[0.5\]"):
        make_pretrained_cfg(input_size=(3, 8, 8), num_classes=2, mean=(0.5,), std=(0.5,) * 3)
    with pytest.raises(ValueError, match=r"std needs one value per input channel \(3\), got \[0.5, 0.5\]"):
        make_pretrained_cfg(input_size=(3, 8, 8), num_classes=2, mean=(0.5,) * 3, std=(0.5,) * 2)
    with pytest.raises(ValueError, match=r"std must be positive, got \[0.5, 0.0\]"):  # dividing by 0
        make_pretrained_cfg(input_size=(2, 8, 8), num_classes=2, mean=(0.5,) * 2, std=(0.5, 0.0))
    with pytest.raises(ValueError, match="has no pretrained_cfg"):
        create_transform(torch.nn.Linear(2, 2))


def test_fit_result_carries_the_statistics_of_its_training_data():
    from dataclasses import replace

    config = replace(vitedu.PRESETS["digits"], epochs=1, warmup_epochs=0.5, teacher_epochs=0,
                     model="vit_digits_patch2_8", model_kwargs={"embed_dim": 16, "depth": 1, "num_heads": 2},
                     train_fraction=0.1)
    result = vitedu.fit(config, device="cpu", log=lambda _: None, progress=False)
    cfg = result.model.pretrained_cfg
    assert cfg["trained"] and cfg["mean"] == pytest.approx(DIGITS_MEAN) and cfg["std"] == pytest.approx(DIGITS_STD)
    assert "vitedu.train.fit" in cfg["source"] and "(digits)" in cfg["source"]
    assert cfg["input_size"] == (1, 8, 8) and cfg["label_names"] == tuple("0123456789")
    assert cfg["interpolation"] == "bicubic" and cfg["crop_pct"] == 1.0


def test_a_trained_model_keeps_its_interpolation_or_gets_bicubic():
    """data_cfg: the training data's statistics as short decimals, and the registry's interpolation, or timm's
    bicubic where the registry names none."""
    from types import SimpleNamespace

    from vitedu.train import data_cfg

    model = vitedu.create_model("vit_digits_patch2_8")
    loader = SimpleNamespace(mean=torch.tensor([0.1]), std=torch.tensor([0.3]))  # float32, as loaders keep them
    config = vitedu.PRESETS["digits"]
    for named, expected in [(None, "bicubic"), ("bilinear", "bilinear")]:
        model.pretrained_cfg = {**model.pretrained_cfg, "interpolation": named}
        cfg = data_cfg(model, config, loader, trained=True)
        assert cfg["interpolation"] == expected and cfg["mean"] == (0.1,) and cfg["std"] == (0.3,)


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
def test_shrinking_averages_over_the_pixels_it_drops(mode):
    """Antialiased, like PIL (which timm resizes with): a lone bright pixel shrunk 4x per side spreads over the
    output and keeps about its share of the light (1/16); plain sampling keeps far more of it or none."""
    cfg = make_pretrained_cfg(input_size=(1, 4, 4), num_classes=2, mean=(0.0,), std=(1.0,), interpolation=mode,
                              crop_mode="squash")
    image = torch.zeros(1, 16, 16)
    image[0, 6, 6] = 1.0
    out = create_transform(cfg)(image)
    assert out.shape == (1, 4, 4)
    assert out.sum().item() == pytest.approx(1 / 16, abs=0.01) and out.max().item() < 0.06  # sampling: 0.25-0.35


def test_bicubic_overshoot_is_clipped_to_the_pixel_range():
    """Bicubic rings at an edge (-0.07 and 1.07 here); PIL clips to the pixel range, and so does the transform."""
    cfg = make_pretrained_cfg(input_size=(1, 8, 8), num_classes=2, mean=(0.0,), std=(1.0,), interpolation="bicubic",
                              crop_mode="squash")
    edge = torch.zeros(1, 4, 4)
    edge[:, :, 2:] = 1.0
    out = create_transform(cfg)(edge)
    assert out.min().item() == 0.0 and out.max().item() == 1.0


def test_the_range_check_allows_rounding_and_names_anything_beyond_it():
    cfg = make_pretrained_cfg(input_size=(1, 4, 4), num_classes=2, mean=(0.5,), std=(0.5,))
    transform = create_transform(cfg)
    almost = torch.full((1, 1, 4, 4), 1 + 5e-7)
    almost[..., 0, 0] = -5e-7  # float rounding of a [0, 1] image
    assert transform(almost).shape == (1, 1, 4, 4)
    edges = torch.full((1, 1, 4, 4), 1 + 1e-6, dtype=torch.float64)
    edges[..., 0, 0] = -1e-6  # the tolerance itself is still allowed
    assert transform(edges).shape == (1, 1, 4, 4)
    for bad in (1.5, 1.01, -0.01):
        with pytest.raises(ValueError, match="expected images in \\[0, 1\\]"):
            transform(torch.full((1, 1, 4, 4), bad))


def test_a_cfg_without_crop_mode_crops_the_centre_and_overrides_are_named():
    from vitedu.preprocess import Transform, resolve_data_config

    cfg = make_pretrained_cfg(input_size=(1, 4, 4), num_classes=2, mean=(0.5,), std=(0.5,))
    assert Transform({k: v for k, v in cfg.items() if k != "crop_mode"}).crop_mode == "center"
    for key, value in [("input_size", (1, 8, 8)), ("interpolation", "bilinear"), ("crop_pct", 0.5),
                       ("crop_mode", "squash"), ("mean", (0.1,)), ("std", (0.2,))]:
        assert resolve_data_config(cfg, **{key: value})[key] == value
    with pytest.raises(TypeError, match=r"unknown argument\(s\) \['size'\]"):
        resolve_data_config(cfg, size=8)


def test_the_transform_works_on_the_images_device(device):
    cfg = make_pretrained_cfg(input_size=(1, 4, 4), num_classes=2, mean=(0.5,), std=(0.5,))
    images = _raw(2, 1, 4).to(device)
    out = create_transform(cfg)(images)
    assert out.device == images.device
    torch.testing.assert_close(out, (images - 0.5) / 0.5)


def test_float64_images_are_normalised_in_float64():
    """mean and std take the images' dtype: float64 images are not rounded through float32 constants."""
    cfg = make_pretrained_cfg(input_size=(1, 4, 4), num_classes=2, mean=DIGITS_MEAN, std=DIGITS_STD)
    images = torch.rand(2, 1, 4, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    out = create_transform(cfg)(images)
    assert out.dtype == torch.float64
    assert torch.equal(out, (images - DIGITS_MEAN[0]) / DIGITS_STD[0])


# ---- the input check: a forward pre-hook on the patch embedding ----

def _trained_cfg(**changes):
    cfg = make_pretrained_cfg(input_size=(1, 4, 4), num_classes=2, mean=(0.5,), std=(0.5,), trained=True)
    return {**cfg, **changes}


def test_input_check_is_on_unless_the_cfg_switches_it_off():
    from vitedu.preprocess import InputCheck

    module = torch.nn.Identity().eval()
    raw = (_raw(1, 1, 4),)
    older = {k: v for k, v in _trained_cfg().items() if k != "check_inputs"}  # a cfg saved before the switch
    for cfg in (_trained_cfg(), older):
        with pytest.raises(ValueError, match="expects normalised inputs"):
            InputCheck(cfg)(module, raw)
    assert InputCheck(_trained_cfg(check_inputs=False))(module, raw) is None
    with pytest.raises(ValueError, match="expects normalised inputs"):  # training batches are checked too
        InputCheck(_trained_cfg())(module.train(), raw)


def test_a_trained_model_refuses_another_image_size_unless_asked_as_in_timm():
    model = vitedu.create_model("vit_cluttered_digits", pretrained=True)
    canvases = vitedu.load_cluttered_digits("test", num_images=4)[0]  # (4, 1, 32, 32)
    big = torch.nn.functional.interpolate(canvases, size=(48, 48), mode="bilinear")
    x = vitedu.create_transform(model)(canvases)
    assert model(x).shape == (4, 10)  # the size it was trained at
    with pytest.raises(ValueError, match=r"trained on 32x32 images.*this batch is 48x48.*dynamic_img_size=True"):
        model(vitedu.create_transform(model, input_size=(1, 48, 48))(big))
    free = vitedu.create_model("vit_cluttered_digits", pretrained=True, dynamic_img_size=True)
    assert free.pretrained_cfg["dynamic_img_size"] and free(x[..., :28, :28]).shape == (4, 10)
    assert vitedu.create_model("vit_cluttered_digits")(torch.randn(2, 1, 48, 48)).shape == (2, 10)  # untrained
    with pytest.raises(TypeError, match="dynamic_img_size is True"):
        vitedu.create_model("vit_cluttered_digits", dynamic_img_size="yes")


def test_input_check_leaves_alone_what_it_cannot_judge(monkeypatch):
    """No positional tensor (a keyword call), integer or empty tensors, anything not a tensor, and tracing."""
    from vitedu.preprocess import InputCheck

    check, module = InputCheck(_trained_cfg()), torch.nn.Identity().eval()
    for args in [(), ([0.5, 0.5],), (torch.ones(1, 1, 4, 4, dtype=torch.uint8),), (torch.empty(0, 1, 4, 4),)]:
        assert check(module, args) is None
    monkeypatch.setattr(torch.jit, "is_tracing", lambda: True)  # torch.jit.trace records the graph, not the data
    assert check(module, (_raw(1, 1, 4),)) is None


def test_only_a_positive_mean_makes_a_black_background_negative():
    from vitedu.preprocess import expects_negative_background

    assert expects_negative_background(_trained_cfg())
    assert not expects_negative_background(_trained_cfg(mean=(0.0,)))  # black stays 0: raw and normalised agree
    assert not expects_negative_background(_trained_cfg(trained=False))
    assert not expects_negative_background(_trained_cfg(std=None))


def test_a_cfg_states_nothing_it_was_not_told():
    """make_pretrained_cfg's defaults: no statistics or interpolation known, no crop, centre crop mode, untrained
    (so never checked), and the check switched on for when it is trained."""
    cfg = make_pretrained_cfg(input_size=[1, 8, 8], num_classes=3.0)
    assert cfg == {"input_size": (1, 8, 8), "mean": None, "std": None, "interpolation": None, "crop_pct": 1.0,
                   "crop_mode": "center", "num_classes": 3, "label_names": None, "source": "", "trained": False,
                   "check_inputs": True}


def test_attaching_a_new_cfg_replaces_the_old_check():
    """One input check per model: the cfg attached last decides (an old hook left behind would still refuse)."""
    from vitedu.preprocess import attach_pretrained_cfg

    model = vitedu.create_model("vit_digits_patch2_8").eval()
    raw = torch.rand(2, 1, 8, 8)
    attach_pretrained_cfg(model, make_pretrained_cfg(input_size=(1, 8, 8), num_classes=10, mean=(0.5,), std=(0.5,),
                                                     trained=True))
    with pytest.raises(ValueError, match="expects normalised inputs"):
        model(raw)
    attach_pretrained_cfg(model, make_pretrained_cfg(input_size=(1, 8, 8), num_classes=10, mean=(0.0,), std=(1.0,),
                                                     trained=True))  # a zero mean: raw and normalised agree
    assert model(raw).shape == (2, 10) and len(model.patch_embed._forward_pre_hooks) == 1
