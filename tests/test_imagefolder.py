"""Your own images (vitedu.imagefolder): a tiny folder of generated PNGs is read, split and trained on."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from vitedu import imagefolder as IF
from vitedu import train as T
from vitedu.config import PRESETS
from vitedu.data import make_loaders
from vitedu.loaders import DatasetError

COLOURS = {"blue": (0, 0, 1), "green": (0, 1, 0), "red": (1, 0, 0)}  # one class per dominant colour


def make_folder(root: Path, per_class: int = 20, seed: int = 0) -> Path:
    """Noisy images whose dominant colour is the class; sizes vary, so resizing is exercised."""
    rng = np.random.default_rng(seed)
    for name, colour in COLOURS.items():
        (root / name).mkdir(parents=True)
        for i in range(per_class):
            h, w = rng.integers(10, 24, size=2)
            pixels = rng.uniform(0, 0.5, size=(h, w, 3)) + 0.5 * np.array(colour)
            mode = "L" if i == 0 else "RGB"  # a grayscale file too: read as RGB
            image = Image.fromarray((pixels * 255).astype(np.uint8))
            (image.convert(mode) if mode == "L" else image).save(root / name / f"{i:03d}.png")
        (root / name / "notes.txt").write_text("not an image: ignored")
    return root


def test_folder_is_split_stratified_and_resized(tmp_path):
    root = make_folder(tmp_path / "images")
    splits, classes = IF.load_image_folder(root, img_size=8)
    assert classes == ["blue", "green", "red"]
    assert {k: len(v[1]) for k, v in splits.items()} == {"train": 48, "val": 6, "test": 6}
    for images, labels in splits.values():
        assert images.shape[1:] == (3, 8, 8) and images.dtype == torch.uint8
        assert torch.bincount(labels, minlength=3).tolist() == [len(labels) // 3] * 3  # every class, same share
    again, _ = IF.load_image_folder(root, img_size=8)
    assert torch.equal(again["val"][0], splits["val"][0])  # seeded: the same split every time
    other, _ = IF.load_image_folder(root, img_size=8, seed=1)
    assert not torch.equal(other["val"][0], splits["val"][0])
    red = splits["train"][0][splits["train"][1] == 2].float()  # red images are red
    assert (red[:, 0].mean() > red[:, 1].mean() + 50).item()


def test_train_and_val_subfolders_are_used_when_present(tmp_path):
    make_folder(tmp_path / "train", per_class=6)
    make_folder(tmp_path / "val", per_class=2, seed=1)
    with pytest.warns(UserWarning, match="no test/ folder"):
        splits, classes = IF.load_image_folder(tmp_path, img_size=8)
    assert len(splits["train"][1]) == 18 and len(splits["val"][1]) == 6 and splits["test"] is splits["val"]


@pytest.mark.integration
def test_training_on_a_folder_learns(tmp_path):
    root = make_folder(tmp_path / "images")
    config = replace(PRESETS["imagefolder"], data_root=str(root), model="vit_digits_patch2_8",
                     model_kwargs={"embed_dim": 32, "depth": 1, "img_size": 8}, epochs=6, batch_size=16,
                     warmup_epochs=1)
    result = T.fit(config, out=tmp_path / "run", progress=False, log=lambda _: None, device="cpu")
    assert result.config.model_kwargs["num_classes"] == 3 and result.config.model_kwargs["in_chans"] == 3
    h = result.history
    assert h.train_loss[-1] < h.train_loss[0] and h.val_acc[-1] == 1.0
    model, _ = T.load_trained(tmp_path / "run")  # the checkpoint knows it has 3 classes
    assert model.head.out_features == 3


@pytest.mark.integration
def test_cli_trains_on_a_folder(tmp_path, capsys):
    root = make_folder(tmp_path / "images", per_class=10)
    T.main(["--dataset", "imagefolder", "--data-root", str(root), "--model", "vit_digits_patch2_8", "--epochs", "1",
            "--warmup-epochs", "0.5", "--batch-size", "16", "--no-progress"])
    assert capsys.readouterr().out.strip().splitlines()[-1].startswith("test accuracy: ")


def test_errors_say_what_is_wrong_and_how_to_fix_it(tmp_path):
    with pytest.raises(DatasetError, match="does not exist"):
        IF.load_image_folder(tmp_path / "missing", img_size=8)
    (tmp_path / "empty").mkdir()
    with pytest.raises(DatasetError, match="no class folders"):
        IF.load_image_folder(tmp_path / "empty", img_size=8)
    root = make_folder(tmp_path / "images", per_class=10)
    (root / "cat").mkdir()
    (root / "cat" / "readme.txt").write_text("no pictures yet")
    with pytest.raises(DatasetError, match=r"\['cat'\].*hold no images"):
        IF.load_image_folder(root, img_size=8)
    (root / "cat" / "readme.txt").unlink()
    (root / "cat").rmdir()
    (root / "red" / "broken.png").write_bytes(b"this is not a PNG")
    with pytest.raises(DatasetError, match="broken.png"):  # the default: fail, naming the file
        IF.load_image_folder(root, img_size=8)
    with pytest.warns(UserWarning, match=r"skipped 1 unreadable image\(s\): .*broken.png"):
        splits, _ = IF.load_image_folder(root, img_size=8, on_error="skip")
    assert sum(len(labels) for _, labels in splits.values()) == 30


def test_train_and_val_subfolders_give_the_classes_of_train(tmp_path):
    """With train/ and val/ the classes are the sub-folders of train/ (not "train" and "val"), as the loader reads."""
    make_folder(tmp_path / "train", per_class=2)
    make_folder(tmp_path / "val", per_class=1, seed=1)
    config = T.prepare_config(replace(PRESETS["imagefolder"], data_root=str(tmp_path)))
    assert config.model_kwargs["num_classes"] == 3 and config.model_kwargs["in_chans"] == 3


def test_a_class_named_train_is_a_class_without_a_val_folder(tmp_path):
    """Only train/ *and* val/ mean ready-made splits: a class folder that happens to be called "train" is a class."""
    for name in ("bus", "car", "train"):
        (tmp_path / name).mkdir()
        for i in range(10):
            Image.new("RGB", (6, 6), (20 * i, 0, 0)).save(tmp_path / name / f"{i}.png")
    config = T.prepare_config(replace(PRESETS["imagefolder"], data_root=str(tmp_path)))
    assert config.model_kwargs["num_classes"] == 3
    assert IF.load_image_folder(tmp_path, img_size=4)[1] == ["bus", "car", "train"]


def test_folder_loaders_use_the_run_seed_the_model_size_and_byte_scaling(tmp_path):
    """The split is drawn with the run's seed; images are resized to the model's img_size (224 when its config
    leaves the default); batches are x / 255 normalised with the training images' own channel statistics."""
    root = make_folder(tmp_path / "images", per_class=10)
    config = T.prepare_config(replace(PRESETS["imagefolder"], data_root=str(root), model="vit_tiny_patch16_224",
                                      model_kwargs={}, seed=1, augment="none"))
    loaders = make_loaders(config, torch.device("cpu"))
    splits, _ = IF.load_image_folder(root, img_size=224, seed=1)
    for name in ("train", "val", "test"):
        assert torch.equal(loaders[name].images, splits[name][0]) and torch.equal(loaders[name].labels, splits[name][1])
    mean, std = IF.channel_stats(splits["train"][0])
    images, _ = next(iter(loaders["val"]))
    expected = (splits["val"][0].float() / 255 - torch.tensor(mean)[:, None, None]) / torch.tensor(std)[:, None, None]
    torch.testing.assert_close(images, expected)
