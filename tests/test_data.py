"""vitedu.data: the shipped digits, their split, augmentation, and the CIFAR-10 archive loader (offline,
on a small archive built here in the official format)."""

from __future__ import annotations

import hashlib
import io
import os
import pickle
import tarfile
from pathlib import Path

import numpy as np
import pytest
import torch

from vitedu import data as D


# ---------------------------------------------------------------------------------------------- digits
def test_digits_asset_matches_scikit_learn():
    sklearn_datasets = pytest.importorskip("sklearn.datasets")
    ref = sklearn_datasets.load_digits()
    images, labels = D.digits_arrays()
    assert images.dtype == np.uint8 and images.shape == (1797, 8, 8)
    np.testing.assert_array_equal(images, ref.images)
    np.testing.assert_array_equal(labels, ref.target)


def test_digits_split_sizes_disjoint_and_complete():
    splits = D.load_digits()
    assert {k: len(v[1]) for k, v in splits.items()} == D.DIGITS_SPLIT_SIZES
    images, labels = D.digits_arrays()
    # Every image lands in exactly one split: compare the multiset of (image, label) rows.
    rows = sorted(x.numpy().tobytes() + bytes([int(y)]) for s in splits.values() for x, y in zip(*s))
    assert rows == sorted(x.tobytes() + bytes([int(y)]) for x, y in zip(images, labels))
    assert splits["train"][0].shape[1:] == (1, 8, 8) and splits["train"][0].dtype == torch.uint8


def test_digits_split_is_stratified_and_deterministic():
    splits = D.load_digits()
    full = np.bincount(D.digits_arrays()[1]) / 1797
    for name, (_, labels) in splits.items():
        share = np.bincount(labels.numpy(), minlength=10) / len(labels)
        assert np.abs(share - full).max() < 0.01, name  # each class keeps its share (+-1 example)
    again = D.load_digits()
    assert all(torch.equal(splits[k][0], again[k][0]) for k in splits)
    other = D.load_digits(seed=1)
    assert not torch.equal(splits["test"][0], other["test"][0])  # the seed does choose the split


def test_digits_normalisation_constants():
    x = D.load_digits()["train"][0].float() / D.DIGITS_MAX
    assert abs(x.mean().item() - D.DIGITS_MEAN[0]) < 1e-3 and abs(x.std().item() - D.DIGITS_STD[0]) < 1e-3


def test_stratified_split_rejects_bad_fractions():
    with pytest.raises(ValueError, match="sum to 1"):
        D.stratified_split(np.zeros(10), {"a": 0.5, "b": 0.6})


# ------------------------------------------------------------------------------------------ augmentation
def test_random_crop_is_a_shift_with_zero_fill():
    g = torch.Generator().manual_seed(0)
    images = torch.rand(32, 3, 8, 8) + 0.1  # no zeros inside, so the fill is visible
    out = D.random_crop(images, 1, g)
    assert out.shape == images.shape
    for x, y in zip(images, out):
        # Find the shift by brute force: exactly one (dy, dx) in [-1, 1]^2 must explain the output.
        padded = torch.nn.functional.pad(x, (1, 1, 1, 1))
        matches = [(dy, dx) for dy in range(3) for dx in range(3) if torch.equal(padded[:, dy:dy + 8, dx:dx + 8], y)]
        assert len(matches) == 1
    assert len({tuple(o.flatten()[:5].tolist()) for o in out}) > 1  # not the same shift for all


def test_hflip_flips_about_half():
    g = torch.Generator().manual_seed(0)
    images = torch.rand(400, 1, 4, 4)
    out = D.random_hflip(images, g)
    flipped = torch.tensor([torch.equal(o, x.flip(-1)) for o, x in zip(out, images)])
    kept = torch.tensor([torch.equal(o, x) for o, x in zip(out, images)])
    assert bool((flipped | kept).all()) and 150 < int(flipped.sum()) < 250


def test_rand_augment_light_keeps_range_and_shape():
    g = torch.Generator().manual_seed(0)
    images = torch.rand(16, 3, 32, 32)
    out = D.cifar_augment_strong(images, g)
    assert out.shape == images.shape and out.min() >= 0 and out.max() <= 1
    assert not torch.allclose(out, images)


def test_tensor_loader_batches_are_normalised_and_reproducible():
    images, labels = D.load_digits()["train"]
    loader = D.TensorLoader(images, labels, 100, D.DIGITS_MEAN, D.DIGITS_STD, max_value=16, shuffle=True,
                            augment=D.digits_augment, seed=3)
    assert len(loader) == 13
    loader.set_epoch(2)
    first = [x for x, _ in loader]
    loader.set_epoch(2)
    again = [x for x, _ in loader]
    loader.set_epoch(3)
    other = next(iter(loader))[0]
    assert all(torch.equal(a, b) for a, b in zip(first, again)) and not torch.equal(first[0], other)
    plain = D.TensorLoader(images, labels, 2000, D.DIGITS_MEAN, D.DIGITS_STD, max_value=16)
    x, y = next(iter(plain))
    assert abs(x.mean().item()) < 1e-3 and abs(x.std().item() - 1) < 1e-3 and torch.equal(y, labels)


# ----------------------------------------------------------------------------------------------- CIFAR
def _fake_cifar_archive(path: Path, per_batch: int = 20) -> dict[str, np.ndarray]:
    """Write a tiny archive laid out like cifar-10-python.tar.gz (pickled dicts of uint8 rows)."""
    rng = np.random.default_rng(0)
    batches = {}
    with tarfile.open(path, "w:gz") as tar:
        for name in D.CIFAR10_FILES:
            n = 0 if name == "batches.meta" else per_batch
            content = {"batch_label": name, "labels": (np.arange(n) % 10).tolist(),
                       "data": rng.integers(0, 256, (n, 3072), dtype=np.uint8),
                       "filenames": [f"{i}.png" for i in range(n)]}
            if name == "batches.meta":
                content = {"label_names": list(D.CIFAR10_CLASSES), "num_cases_per_batch": per_batch}
            batches[name] = content.get("data")
            raw = pickle.dumps(content, protocol=2)
            info = tarfile.TarInfo(f"{D.CIFAR10_DIR}/{name}")
            info.size = len(raw)
            tar.addfile(info, io.BytesIO(raw))
    return batches


def _md5(path: Path) -> str:
    return hashlib.md5(path.read_bytes()).hexdigest()


def test_cifar_loads_from_verified_archive(tmp_path):
    archive = tmp_path / "src.tar.gz"
    batches = _fake_cifar_archive(archive)
    root = tmp_path / "root"
    splits = D.load_cifar10(root, url=archive.as_uri(), md5=_md5(archive), val_size=20)
    assert {k: len(v[1]) for k, v in splits.items()} == {"train": 80, "val": 20, "test": 20}
    x, y = splits["test"]
    assert x.shape == (20, 3, 32, 32) and x.dtype == torch.uint8 and y.tolist() == [i % 10 for i in range(20)]
    # Rows are R, G, B planes of 32x32, row-major: pixel (c, h, w) is element c*1024 + h*32 + w.
    assert int(x[3, 2, 5, 7]) == int(batches["test_batch"][3, 2 * 1024 + 5 * 32 + 7])
    assert sorted(p.name for p in root.iterdir()) == [D.CIFAR10_DIR]  # download deleted, no temp left
    # Second call: straight from the cache (a wrong URL proves nothing is downloaded).
    again = D.load_cifar10(root, url="file:///nonexistent", md5="0" * 32, val_size=20)
    assert torch.equal(again["train"][0], splits["train"][0])


def test_cifar_wrong_md5_leaves_nothing(tmp_path):
    archive = tmp_path / "src.tar.gz"
    _fake_cifar_archive(archive)
    root = tmp_path / "root"
    with pytest.raises(D.DatasetError, match="MD5 mismatch.*nothing was unpacked"):
        D.load_cifar10(root, url=archive.as_uri(), md5="0" * 32)
    assert list(root.iterdir()) == []


def test_cifar_truncated_archive_is_a_clear_error(tmp_path):
    archive = tmp_path / "src.tar.gz"
    _fake_cifar_archive(archive, per_batch=200)
    archive.write_bytes(archive.read_bytes()[: archive.stat().st_size // 2])  # as if the download stopped
    root = tmp_path / "root"
    with pytest.raises(D.DatasetError, match="damaged or truncated"):
        D.load_cifar10(root, url=archive.as_uri(), md5=_md5(archive))  # MD5 of the broken file itself
    assert list(root.iterdir()) == []
    with pytest.raises(D.DatasetError, match="MD5 mismatch"):  # with the real MD5, caught even earlier
        D.load_cifar10(root, url=archive.as_uri())
    assert list(root.iterdir()) == []


def test_cifar_user_archive_with_wrong_md5_is_kept_but_not_unpacked(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    _fake_cifar_archive(root / D.CIFAR10_ARCHIVE)
    with pytest.raises(D.DatasetError, match="delete it"):
        D.load_cifar10(root, md5="0" * 32)
    assert [p.name for p in root.iterdir()] == [D.CIFAR10_ARCHIVE]


def test_cifar_offline_download_explains(tmp_path):
    with pytest.raises(D.DatasetError, match="needs the internet"):
        D.load_cifar10(tmp_path, url=(tmp_path / "missing.tar.gz").as_uri())
    assert list(tmp_path.iterdir()) == []


def test_cifar_unpickler_refuses_code(tmp_path):
    class Evil:
        def __reduce__(self):
            return (os.system, ("echo pwned",))

    path = tmp_path / "data_batch_1"
    path.write_bytes(pickle.dumps({"data": Evil(), "labels": []}))
    with pytest.raises(D.DatasetError, match="refusing to load"):
        D._read_cifar_batch(path)
