"""vitedu.hf_configs: what a Hugging Face ViT directory's preprocessor_config.json tells vitedu's transform.

ViTImageProcessor resizes both sides to ``size`` ("squash"), rescales by 1/255 and normalises with image_mean /
image_std; ``hf_preprocessor_cfg`` turns that record into the model's ``pretrained_cfg``. (Loading whole
directories, config.json and the state dict is specified in test_pretrained_files.py.)
"""

from __future__ import annotations

import json

import pytest

from vitedu import VisionTransformer
from vitedu.hf_configs import hf_preprocessor_cfg

LABELS = ["zero", "one", "two"]


@pytest.fixture
def model():
    return VisionTransformer(img_size=8, patch_size=4, in_chans=1, num_classes=3, embed_dim=8, depth=1, num_heads=1)


def _write(tmp_path, **record):
    (tmp_path / "preprocessor_config.json").write_text(json.dumps(record))
    return tmp_path / "preprocessor_config.json"


def test_without_the_file_the_normalisation_is_unknown(tmp_path, model):
    cfg = hf_preprocessor_cfg(tmp_path, model, LABELS)
    assert cfg["mean"] is None and cfg["std"] is None and cfg["interpolation"] is None and cfg["crop_pct"] is None
    assert cfg["source"] == f"{tmp_path} has no preprocessor_config.json: the normalisation is unknown"
    assert cfg["input_size"] == (1, 8, 8) and cfg["num_classes"] == 3 and cfg["label_names"] == tuple(LABELS)
    assert cfg["trained"] is True


def test_the_processor_s_record_becomes_the_pretrained_cfg(tmp_path, model):
    file = _write(tmp_path, image_mean=[0.25], image_std=[0.5], resample=3, do_normalize=True, do_rescale=True,
                  rescale_factor=1 / 255, do_resize=True)
    cfg = hf_preprocessor_cfg(tmp_path, model, LABELS)
    assert cfg["mean"] == (0.25,) and cfg["std"] == (0.5,) and cfg["interpolation"] == "bicubic"
    assert cfg["crop_pct"] == 1.0 and cfg["crop_mode"] == "squash" and cfg["source"] == str(file)
    assert cfg["label_names"] == tuple(LABELS) and cfg["trained"] is True
    # the defaults of ViTImageProcessor when a field is absent: resize (squash), rescale by 1/255, normalise
    _write(tmp_path, image_mean=[0.25], image_std=[0.5])
    cfg = hf_preprocessor_cfg(tmp_path, model, None)
    assert cfg["crop_mode"] == "squash" and cfg["mean"] == (0.25,) and cfg["interpolation"] is None
    assert cfg["label_names"] is None


def test_no_resize_means_a_centre_crop_and_no_normalisation_means_mean_0_std_1(tmp_path, model):
    _write(tmp_path, image_mean=[0.25], image_std=[0.5], do_resize=False, do_normalize=False, resample=2)
    cfg = hf_preprocessor_cfg(tmp_path, model, LABELS)
    assert cfg["crop_mode"] == "center" and cfg["interpolation"] == "bilinear"
    assert cfg["mean"] == (0.0,) and cfg["std"] == (1.0,)  # one value per channel of the model's input
    rgb = VisionTransformer(img_size=8, patch_size=4, in_chans=3, num_classes=3, embed_dim=8, depth=1, num_heads=1)
    _write(tmp_path, do_normalize=False)
    cfg = hf_preprocessor_cfg(tmp_path, rgb, LABELS)
    assert cfg["mean"] == (0.0, 0.0, 0.0) and cfg["std"] == (1.0, 1.0, 1.0)


@pytest.mark.parametrize("record", [{"rescale_factor": 1 / 256}, {"do_rescale": True, "rescale_factor": 2 / 255}])
def test_a_rescale_other_than_1_255_is_refused(tmp_path, model, record):
    _write(tmp_path, image_mean=[0.5], image_std=[0.5], **record)
    with pytest.raises(ValueError, match=r"preprocessor_config\.json: rescale_factor 0\.00\d+ is not 1/255"):
        hf_preprocessor_cfg(tmp_path, model, LABELS)


def test_any_rescale_is_fine_when_rescaling_is_off(tmp_path, model):
    _write(tmp_path, image_mean=[0.5], image_std=[0.5], do_rescale=False, rescale_factor=1.0)
    assert hf_preprocessor_cfg(tmp_path, model, LABELS)["mean"] == (0.5,)


@pytest.mark.parametrize("key, value", [("image_mean", "0.5"), ("image_std", 0.5), ("resample", "bicubic"),
                                        ("do_normalize", "yes"), ("do_rescale", 1), ("rescale_factor", "1/255")])
def test_a_field_of_the_wrong_type_is_named(tmp_path, model, key, value):
    _write(tmp_path, **{"image_mean": [0.5], "image_std": [0.5], key: value})
    with pytest.raises(ValueError, match=rf"{key}="):
        hf_preprocessor_cfg(tmp_path, model, LABELS)


def test_a_resample_filter_the_transform_lacks_is_refused(tmp_path, model):
    _write(tmp_path, image_mean=[0.5], image_std=[0.5], resample=1)  # PIL's LANCZOS
    with pytest.raises(ValueError, match=r"resample=1 is not one vitedu.s transform implements \(PIL codes"):
        hf_preprocessor_cfg(tmp_path, model, LABELS)
