"""vitedu.mae_pretrain: MAE pre-training learns, resumes exactly, never reads a label; vitedu.linear_probe chooses
on val; tools/pretrain_mae.py ships a finished run and refuses anything else."""

from __future__ import annotations

import json
from dataclasses import asdict

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file
from tools_loader import load_tool
from torch import nn
from train_recipes import MAE_TINY

import vitedu
from vitedu import linear_probe as LP
from vitedu import mae_pretrain as MP
from vitedu.mae import MaskedAutoencoder
from vitedu.patching import patchify

mae_tool = load_tool("pretrain_mae")  # the command line and --ship

TINY = MAE_TINY


@pytest.fixture(scope="module")
def val_images():
    return MP.unlabelled_canvases("val", 32, seed=5)


def test_training_steps_reduce_the_reconstruction_loss(val_images):
    config = MP.MAEConfig(**TINY)
    before = MP.reconstruction_loss(MP.build_mae(config), val_images, config.mask_ratio)
    model, history, step = MP.pretrain(config, val_images=val_images, log=lambda _: None)
    assert step == 2 * 2  # 64 canvases in batches of 32, two epochs
    assert history.val_loss[-1] == MP.reconstruction_loss(model, val_images, config.mask_ratio)
    assert history.val_loss[-1] < 0.9 * before


def test_a_resumed_run_equals_an_uninterrupted_one(tmp_path, val_images):
    config = MP.MAEConfig(**TINY)
    quiet = dict(val_images=val_images, log=lambda _: None)
    whole, whole_history, whole_steps = MP.pretrain(config, **quiet)
    _, _, steps = MP.pretrain(config, out=tmp_path, stop_after=1, **quiet)
    assert steps == 2 and json.loads((tmp_path / "train_state.json").read_text())["epoch"] == 1
    lines = []
    other = MP.MAEConfig(**{**TINY, "base_lr": 1.0})  # ignored: a resumed run keeps the saved config
    resumed, history, steps = MP.pretrain(other, out=tmp_path, val_images=val_images, log=lines.append)
    assert lines[0].startswith("resuming") and steps == whole_steps == 4
    assert history.epoch == [1, 2] and history.train_loss == whole_history.train_loss
    for (name, a), (_, b) in zip(whole.state_dict().items(), resumed.state_dict().items(), strict=True):
        assert torch.equal(a, b), name

    MP.save_encoder(tmp_path / "encoder.safetensors", resumed, config, history)
    with safe_open(str(tmp_path / "encoder.safetensors"), "pt") as f:
        meta = f.metadata()
    encoder = vitedu.create_model(meta["model"], **json.loads(meta["model_kwargs"]))
    encoder.load_state_dict(load_file(str(tmp_path / "encoder.safetensors")))  # strict: every key, every shape
    images = val_images[:4]
    assert torch.equal(encoder.eval().forward_features(images), resumed.encoder.eval().forward_features(images))
    assert meta["epochs_done"] == "2" and json.loads(meta["config"])["base_lr"] == TINY["base_lr"]


class NoLabels:
    """Stands in for the digits' labels: any use of them fails the test."""

    def __getattr__(self, name):
        raise AssertionError(f"pre-training read the labels ({name})")

    def __len__(self):
        raise AssertionError("pre-training read the labels (len)")

    def __getitem__(self, index):
        raise AssertionError("pre-training read the labels (indexing)")


def test_pretraining_never_reads_a_label(monkeypatch):
    digits = vitedu.digits.load_digits()
    without_labels = {k: (x, NoLabels()) for k, (x, _) in digits.items()}
    monkeypatch.setattr(vitedu.mae_pretrain, "load_digits", lambda: without_labels)
    config = MP.MAEConfig(**{**TINY, "epochs": 1})
    _, history, _ = MP.pretrain(config, log=lambda _: None)  # its own val canvases too
    assert len(history.val_loss) == 1


class PixelEncoder(nn.Module):
    """A stub encoder: [CLS] is all zeros (no information), the patch tokens are the patches' pixels."""

    def __init__(self):
        super().__init__()
        self.dummy = nn.Parameter(torch.zeros(1))
        self.calls = []

    def forward_features(self, images):
        self.calls.append(images.data_ptr())
        patches = patchify(images, 4)  # (batch, 64, 16)
        return torch.cat([torch.zeros(len(images), 1, 16), patches], dim=1)  # (batch, 65, 16)


def _probe_file(path, config, epochs_done, test=True):
    rows = [{"encoder": arm, "seed": 0, "n_labelled": 10, **({"test_acc": acc} if test else {})}
            for arm, acc in (("mae", 0.5), ("random", 0.25))]
    path.write_text(json.dumps({"config": json.loads(json.dumps(asdict(config))), "epochs_done": epochs_done,
                                "probe": rows}))
    return path


def test_ship_writes_the_encoder_for_the_registry_and_the_decoder_beside_it(tmp_path, val_images):
    config = MP.MAEConfig(**TINY)
    model, _, _ = MP.pretrain(config, out=tmp_path / "run", val_images=val_images, log=lambda _: None)
    assets = tmp_path / "assets"
    assets.mkdir()
    encoder_file, decoder_file = mae_tool.ship(tmp_path / "run", _probe_file(tmp_path / "p.json", config, 2),
                                               assets, name="tiny_mae")
    assert (encoder_file.name, decoder_file.name) == ("tiny_mae.safetensors", "tiny_mae_decoder.safetensors")
    with safe_open(str(encoder_file), "pt") as f:
        meta = f.metadata()
    encoder = vitedu.create_model("vit_cluttered_digits", **json.loads(meta["model_kwargs"]))
    encoder.load_state_dict(load_file(str(encoder_file)))  # strict: the encoder alone, timm's keys
    assert meta["decoder"] == decoder_file.name and json.loads(meta["probe_test_acc"]) == {"mae": [0.5],
                                                                                          "random": [0.25]}
    whole = MaskedAutoencoder(**json.loads(meta["mae_kwargs"]))
    whole.load_state_dict({**load_file(str(encoder_file)), **load_file(str(decoder_file))})  # strict, together
    images, g = val_images[:4], [torch.Generator().manual_seed(3) for _ in range(2)]
    with torch.no_grad():
        assert torch.equal(whole.eval()(images, 0.75, g[0])[1], model.eval()(images, 0.75, g[1])[1])
        assert torch.equal(encoder.eval().forward_features(images), model.encoder.forward_features(images))


def test_ship_refuses_an_unfinished_run_and_a_probe_of_another(tmp_path, val_images):
    config = MP.MAEConfig(**TINY)
    quiet = dict(val_images=val_images, log=lambda _: None)
    MP.pretrain(config, out=tmp_path / "run", stop_after=1, **quiet)
    assets = tmp_path / "assets"
    assets.mkdir()
    with pytest.raises(SystemExit, match="stopped after epoch 1 of 2: finish it first"):
        mae_tool.ship(tmp_path / "run", _probe_file(tmp_path / "p.json", config, 2), assets)
    MP.pretrain(config, out=tmp_path / "run", **quiet)
    other = MP.MAEConfig(**{**TINY, "mask_ratio": 0.5})
    for probe in (_probe_file(tmp_path / "a.json", other, 2), _probe_file(tmp_path / "b.json", config, 1),
                  _probe_file(tmp_path / "c.json", config, 2, test=False)):
        with pytest.raises(SystemExit, match="is not the finished run .* probed on test"):
            mae_tool.ship(tmp_path / "run", probe, assets)
    assert not list(assets.iterdir())  # nothing written


def synthetic(n, generator):
    """Canvases that tile one 4x4 pattern per class: the mean patch token tells the class, [CLS] cannot."""
    tiles = torch.randn(10, 1, 4, 4, generator=torch.Generator().manual_seed(0))
    labels = torch.randint(0, 10, (n,), generator=generator)
    images = tiles[labels].repeat(1, 1, 8, 8) + 0.5 * torch.randn(n, 1, 32, 32, generator=generator)
    return images, labels


def test_the_probe_chooses_on_val_and_reads_test_once():
    g = torch.Generator().manual_seed(1)
    data = {"train": synthetic(200, g), "val": synthetic(100, g), "test": synthetic(100, g)}
    encoder = PixelEncoder()
    result = LP.linear_probe(encoder, 200, seed=0, data=data)
    assert result["pool"] == "mean"  # [CLS] carries nothing here; the choice saw it on val
    assert max(v for k, v in result["val_grid"].items() if k.startswith("cls/")) <= 0.25
    assert result["val_acc"] == max(result["val_grid"].values()) > 0.9
    assert result["val_grid"][f"mean/{result['weight_decay']:g}"] == result["val_acc"]
    test_ptr = data["test"][0].data_ptr()
    assert encoder.calls.count(test_ptr) == 1 and encoder.calls[-1] == test_ptr  # test once, after every choice
    assert result["test_acc"] > 0.9


def test_features_refuse_an_unknown_pooling():
    with pytest.raises(ValueError, match="pool must be one of"):
        LP.features(PixelEncoder(), torch.zeros(2, 1, 32, 32), "max")


def test_the_probe_refuses_a_folder_without_a_run(tmp_path):
    threads = torch.get_num_threads()
    try:
        with pytest.raises(SystemExit, match="pre-train first"):
            mae_tool.main(["--out", str(tmp_path), "--probe", "10"])
    finally:
        torch.set_num_threads(threads)  # main sets the thread count for its run
