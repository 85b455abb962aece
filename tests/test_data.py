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
from tools_loader import load_tool

from vitedu import cifar
from vitedu.augment import (
    AUGMENTATIONS,
    cifar_augment,
    cifar_augment_strong,
    digits_augment,
    digits_warp,
    rand_augment_light,
    random_affine,
    random_crop,
    random_hflip,
)
from vitedu.cifar import CIFAR10_ARCHIVE, CIFAR10_DIR, CIFAR10_FILES, load_cifar10
from vitedu.constants import CIFAR10_CLASSES, CIFAR10_MEAN, CIFAR10_STD, DIGITS_MEAN, DIGITS_STD
from vitedu.digits import (
    DIGITS_MAX,
    DIGITS_SPLIT_SIZES,
    digits_arrays,
    load_digits,
    stratified_split,
    stratified_subset,
)
from vitedu.loaders import DatasetError, TensorLoader, denormalize


# ---------------------------------------------------------------------------------------------- digits
def test_digits_asset_matches_scikit_learn():
    sklearn_datasets = pytest.importorskip("sklearn.datasets")
    ref = sklearn_datasets.load_digits()
    images, labels = digits_arrays()
    assert images.dtype == np.uint8 and images.shape == (1797, 8, 8)
    np.testing.assert_array_equal(images, ref.images)
    np.testing.assert_array_equal(labels, ref.target)


def test_digits_split_sizes_disjoint_and_complete():
    splits = load_digits()
    assert {k: len(v[1]) for k, v in splits.items()} == DIGITS_SPLIT_SIZES
    images, labels = digits_arrays()
    # Every image lands in exactly one split: compare the multiset of (image, label) rows.
    rows = sorted(x.numpy().tobytes() + bytes([int(y)]) for s in splits.values() for x, y in zip(*s))
    assert rows == sorted(x.tobytes() + bytes([int(y)]) for x, y in zip(images, labels))
    assert splits["train"][0].shape[1:] == (1, 8, 8) and splits["train"][0].dtype == torch.uint8


def test_digits_split_is_stratified_and_deterministic():
    splits = load_digits()
    full = np.bincount(digits_arrays()[1]) / 1797
    for name, (_, labels) in splits.items():
        share = np.bincount(labels.numpy(), minlength=10) / len(labels)
        assert np.abs(share - full).max() < 0.01, name  # each class keeps its share (+-1 example)
    again = load_digits()
    assert all(torch.equal(splits[k][0], again[k][0]) for k in splits)
    other = load_digits(seed=1)
    assert not torch.equal(splits["test"][0], other["test"][0])  # the seed does choose the split


def test_digits_normalisation_constants():
    x = load_digits()["train"][0].float() / DIGITS_MAX
    assert abs(x.mean().item() - DIGITS_MEAN[0]) < 1e-3 and abs(x.std().item() - DIGITS_STD[0]) < 1e-3


def test_stratified_split_rejects_bad_fractions():
    with pytest.raises(ValueError, match="sum to 1"):
        stratified_split(np.zeros(10), {"a": 0.5, "b": 0.6})


def test_train_subset_is_drawn_with_the_run_seed_and_fraction_in_range():
    train = load_digits()["train"]
    subset = {seed: stratified_subset(train, 0.5, seed)[1] for seed in (0, 1)}
    again = stratified_subset(train, 0.5, 0)[1]
    assert torch.equal(subset[0], again) and not torch.equal(subset[0], subset[1])
    assert stratified_subset(train, 1.0, 0)[0] is train[0]  # everything, not a copy
    for bad in (1.5, -0.1):
        with pytest.raises(ValueError, match="train_fraction"):
            stratified_subset(train, bad, 0)


# ------------------------------------------------------------------------------------------ augmentation
def test_random_crop_is_a_shift_with_zero_fill():
    g = torch.Generator().manual_seed(0)
    images = torch.rand(32, 3, 8, 8) + 0.1  # no zeros inside, so the fill is visible
    out = random_crop(images, 1, g)
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
    out = random_hflip(images, g)
    flipped = torch.tensor([torch.equal(o, x.flip(-1)) for o, x in zip(out, images)])
    kept = torch.tensor([torch.equal(o, x) for o, x in zip(out, images)])
    assert bool((flipped | kept).all()) and 150 < int(flipped.sum()) < 250


def test_rand_augment_light_keeps_range_and_shape():
    g = torch.Generator().manual_seed(0)
    images = torch.rand(16, 3, 32, 32)
    out = cifar_augment_strong(images, g)
    assert out.shape == images.shape and out.min() >= 0 and out.max() <= 1
    assert not torch.allclose(out, images)


def test_tensor_loader_batches_are_normalised_and_reproducible():
    images, labels = load_digits()["train"]
    loader = TensorLoader(images, labels, 100, DIGITS_MEAN, DIGITS_STD, max_value=16, shuffle=True,
                            augment=digits_augment, seed=3)
    assert len(loader) == 13
    loader.set_epoch(2)
    first = [x for x, _ in loader]
    loader.set_epoch(2)
    again = [x for x, _ in loader]
    loader.set_epoch(3)
    other = next(iter(loader))[0]
    assert all(torch.equal(a, b) for a, b in zip(first, again)) and not torch.equal(first[0], other)
    plain = TensorLoader(images, labels, 2000, DIGITS_MEAN, DIGITS_STD, max_value=16)
    x, y = next(iter(plain))
    assert abs(x.mean().item()) < 1e-3 and abs(x.std().item() - 1) < 1e-3 and torch.equal(y, labels)


# ----------------------------------------------------------------------------------------------- CIFAR
def _fake_cifar_archive(path: Path, per_batch: int = 20) -> dict[str, np.ndarray]:
    """Write a tiny archive laid out like cifar-10-python.tar.gz (pickled dicts of uint8 rows)."""
    rng = np.random.default_rng(0)
    batches = {}
    with tarfile.open(path, "w:gz") as tar:
        for name in CIFAR10_FILES:
            n = 0 if name == "batches.meta" else per_batch
            content = {"batch_label": name, "labels": (np.arange(n) % 10).tolist(),
                       "data": rng.integers(0, 256, (n, 3072), dtype=np.uint8),
                       "filenames": [f"{i}.png" for i in range(n)]}
            if name == "batches.meta":
                content = {"label_names": list(CIFAR10_CLASSES), "num_cases_per_batch": per_batch}
            batches[name] = content.get("data")
            raw = pickle.dumps(content, protocol=2)
            info = tarfile.TarInfo(f"{CIFAR10_DIR}/{name}")
            info.size = len(raw)
            tar.addfile(info, io.BytesIO(raw))
    return batches


def _md5(path: Path) -> str:
    return hashlib.md5(path.read_bytes()).hexdigest()


def test_cifar_loads_from_verified_archive(tmp_path):
    archive = tmp_path / "src.tar.gz"
    batches = _fake_cifar_archive(archive)
    root = tmp_path / "root"
    splits = load_cifar10(root, url=archive.as_uri(), md5=_md5(archive), val_size=20)
    assert {k: len(v[1]) for k, v in splits.items()} == {"train": 80, "val": 20, "test": 20}
    x, y = splits["test"]
    assert x.shape == (20, 3, 32, 32) and x.dtype == torch.uint8 and y.tolist() == [i % 10 for i in range(20)]
    # Rows are R, G, B planes of 32x32, row-major: pixel (c, h, w) is element c*1024 + h*32 + w.
    assert int(x[3, 2, 5, 7]) == int(batches["test_batch"][3, 2 * 1024 + 5 * 32 + 7])
    assert sorted(p.name for p in root.iterdir()) == [CIFAR10_DIR]  # download deleted, no temp left
    # Second call: straight from the cache (a wrong URL proves nothing is downloaded).
    again = load_cifar10(root, url="file:///nonexistent", md5="0" * 32, val_size=20)
    assert torch.equal(again["train"][0], splits["train"][0])


def test_cifar_wrong_md5_leaves_nothing(tmp_path):
    archive = tmp_path / "src.tar.gz"
    _fake_cifar_archive(archive)
    root = tmp_path / "root"
    with pytest.raises(DatasetError, match="MD5 mismatch.*nothing was unpacked"):
        load_cifar10(root, url=archive.as_uri(), md5="0" * 32)
    assert list(root.iterdir()) == []


def test_cifar_truncated_archive_is_a_clear_error(tmp_path):
    archive = tmp_path / "src.tar.gz"
    _fake_cifar_archive(archive, per_batch=200)
    archive.write_bytes(archive.read_bytes()[: archive.stat().st_size // 2])  # as if the download stopped
    root = tmp_path / "root"
    with pytest.raises(DatasetError, match="damaged or truncated"):
        load_cifar10(root, url=archive.as_uri(), md5=_md5(archive))  # MD5 of the broken file itself
    assert list(root.iterdir()) == []
    with pytest.raises(DatasetError, match="MD5 mismatch"):  # with the real MD5, caught even earlier
        load_cifar10(root, url=archive.as_uri())
    assert list(root.iterdir()) == []


def test_cifar_user_archive_with_wrong_md5_is_kept_but_not_unpacked(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    _fake_cifar_archive(root / CIFAR10_ARCHIVE)
    with pytest.raises(DatasetError, match="delete it"):
        load_cifar10(root, md5="0" * 32)
    assert [p.name for p in root.iterdir()] == [CIFAR10_ARCHIVE]


def test_cifar_offline_download_explains(tmp_path):
    with pytest.raises(DatasetError, match="needs the internet"):
        load_cifar10(tmp_path, url=(tmp_path / "missing.tar.gz").as_uri())
    assert list(tmp_path.iterdir()) == []


def test_cifar_unpickler_refuses_code(tmp_path):
    class Evil:
        def __reduce__(self):
            return (os.system, ("echo pwned",))

    path = tmp_path / "data_batch_1"
    path.write_bytes(pickle.dumps({"data": Evil(), "labels": []}))
    with pytest.raises(DatasetError, match="refusing to load"):
        cifar._read_cifar_batch(path)


# ------------------------------------------------------------------------ behaviours (found by mutants)
def _shift_of(x: torch.Tensor, y: torch.Tensor, padding: int) -> list[tuple[int, int]]:
    """Every (dy, dx) in [-padding, padding]^2 for which y is x shifted that far, with zeros coming in."""
    size = x.shape[-1]
    padded = torch.nn.functional.pad(x, (padding,) * 4)
    return [(dy - padding, dx - padding) for dy in range(2 * padding + 1) for dx in range(2 * padding + 1)
            if torch.equal(padded[:, dy:dy + size, dx:dx + size], y)]


def test_random_crop_draws_every_shift_within_padding():
    g = torch.Generator().manual_seed(0)
    images = torch.rand(300, 2, 6, 6) + 0.1
    out = random_crop(images, 2, g)
    shifts = [_shift_of(x, y, 2) for x, y in zip(images, out)]
    assert all(len(s) == 1 for s in shifts)
    assert {s[0] for s in shifts} == {(dy, dx) for dy in range(-2, 3) for dx in range(-2, 3)}  # all 25 occur


@pytest.mark.parametrize("name", ["digits", "digits_warp", "cifar", "cifar_strong"])
def test_augmentations_depend_only_on_their_generator(name):
    augment = AUGMENTATIONS[name]
    images = torch.rand(64, 3 if not name.startswith("digits") else 1, 12, 12)
    torch.manual_seed(1)
    a = augment(images, torch.Generator().manual_seed(5))
    torch.manual_seed(2)  # the global RNG must not matter
    b = augment(images, torch.Generator().manual_seed(5))
    c = augment(images, torch.Generator().manual_seed(6))
    assert torch.equal(a, b) and not torch.equal(a, c)
    assert a.shape == images.shape and a.dtype == images.dtype


def test_digits_warp_reshapes_digits_without_moving_them():
    # For cluttered digits: new handwriting, but the ink stays where it was (a shift would cross the patch grid).
    digits = load_digits()["train"][0][:500].float() / DIGITS_MAX  # (500, 1, 8, 8)
    warped = digits_warp(digits, torch.Generator().manual_seed(0))
    assert warped.shape == digits.shape and warped.min() >= 0 and warped.max() <= 1

    def centre(x):  # (N, 1, 8, 8) -> (N, 2) centre of the ink, in pixels
        r = torch.arange(8.0)
        mass = x.sum(dim=(1, 2, 3))
        return torch.stack([(x.sum(-1)[:, 0] * r).sum(-1), (x.sum(-2)[:, 0] * r).sum(-1)], -1) / mass[:, None]

    moved = (centre(warped) - centre(digits)).norm(dim=-1)  # (500,) pixels
    changed = (warped - digits).abs().amax(dim=(1, 2, 3))  # (500,) largest change of a pixel
    assert moved.max() < 0.75 and moved.mean() < 0.3  # a digit's ink stays centred in its cell
    assert (changed > 0.1).float().mean() > 0.95  # and nearly every digit's strokes change visibly
    assert torch.allclose(warped.sum(dim=(1, 2, 3)), digits.sum(dim=(1, 2, 3)), rtol=0.25)  # as much ink
    # The amounts its docstring states: rotation, zoom and shear of up to 10 degrees, 10 %, 10 degrees, no shift.
    documented = random_affine(digits, torch.Generator().manual_seed(0), degrees=10, scale=0.1, shear=10)
    assert torch.equal(warped, documented)


def test_random_hflip_and_affine_depend_only_on_their_generator():
    images = torch.rand(64, 3, 12, 12)
    for fn in (random_hflip, lambda x, g: random_affine(x, g, degrees=20, scale=0.2, translate=0.1, shear=5)):
        torch.manual_seed(1)
        a = fn(images, torch.Generator().manual_seed(5))
        torch.manual_seed(2)
        assert torch.equal(a, fn(images, torch.Generator().manual_seed(5)))


def test_cifar_augment_is_crop_by_four_then_flip():
    g = torch.Generator().manual_seed(0)
    images = torch.rand(200, 3, 12, 12) + 0.1
    out = cifar_augment(images, g)
    shifts = set()
    for x, y in zip(images, out):
        found = _shift_of(x, y, 4) + [(dy, -dx) for dy, dx in _shift_of(x.flip(-1), y, 4)]
        assert len(found) == 1
        shifts.add(found[0])
    assert max(abs(dx) for _, dx in shifts) == 4 and max(abs(dy) for dy, _ in shifts) == 4


def test_random_affine_defaults_and_zero_strength_are_the_identity():
    g = torch.Generator().manual_seed(0)
    images = torch.rand(8, 3, 10, 10)
    torch.testing.assert_close(random_affine(images, g), images, atol=1e-5, rtol=0)
    torch.testing.assert_close(random_affine(images, g, 0.0, 0.0, 0.0, 0.0), images, atol=1e-5, rtol=0)


def _centroid(images: torch.Tensor) -> torch.Tensor:
    """(batch, 1, H, W) -> (batch, 2) centre of mass (x, y) in pixels, relative to the image centre."""
    h, w = images.shape[-2:]
    ys, xs = torch.meshgrid(torch.arange(h) - (h - 1) / 2, torch.arange(w) - (w - 1) / 2, indexing="ij")
    mass = images.sum(dim=(1, 2, 3))
    return torch.stack([(images[:, 0] * xs).sum(dim=(1, 2)), (images[:, 0] * ys).sum(dim=(1, 2))], 1) / mass[:, None]


def _blob(n: int, size: int, x: int, y: int) -> torch.Tensor:
    images = torch.zeros(n, 1, size, size)
    images[:, :, y - 1:y + 2, x - 1:x + 2] = 1.0  # a 3x3 square, smooth enough for bilinear resampling
    return images


def test_random_affine_translate_is_a_fraction_of_the_size_both_ways():
    g = torch.Generator().manual_seed(0)
    size, translate = 40, 0.2
    images = _blob(400, size, size // 2, size // 2)
    shift = _centroid(random_affine(images, g, translate=translate)) - _centroid(images)
    limit = translate * size
    assert shift.abs().max() <= limit + 0.5  # at most +-translate of the size
    for axis in (0, 1):  # each axis reaches both ends of the range, independently of the other
        assert shift[:, axis].max() > 0.8 * limit and shift[:, axis].min() < -0.8 * limit
    assert abs(torch.corrcoef(shift.T)[0, 1]) < 0.2


def test_random_affine_rotation_keeps_the_radius_and_turns_both_ways():
    g = torch.Generator().manual_seed(0)
    images = _blob(400, 41, 30, 20)  # 10 pixels right of the centre
    before, after = _centroid(images), _centroid(random_affine(images, g, degrees=40))
    radius = after.norm(dim=1) / before.norm(dim=1)
    assert (radius - 1).abs().max() < 0.05
    angle = torch.rad2deg(torch.atan2(after[:, 1], after[:, 0]) - torch.atan2(before[:, 1], before[:, 0]))
    assert angle.abs().max() <= 41 and angle.max() > 35 and angle.min() < -35


def test_random_affine_zoom_scales_the_radius_within_one_plus_minus_scale():
    g = torch.Generator().manual_seed(0)
    images = _blob(400, 41, 30, 20)
    before, after = _centroid(images), _centroid(random_affine(images, g, scale=0.3))
    ratio = after.norm(dim=1) / before.norm(dim=1)
    assert ratio.min() > 0.7 - 0.03 and ratio.max() < 1.3 + 0.03
    assert ratio.min() < 0.75 and ratio.max() > 1.25
    direction = torch.atan2(after[:, 1], after[:, 0]) - torch.atan2(before[:, 1], before[:, 0])
    assert direction.abs().max() < 0.02  # a zoom alone does not turn


def test_rand_augment_light_at_zero_magnitude_only_autocontrasts():
    """Magnitude 0: brightness, contrast, saturation and solarize do nothing, the warp is the identity;
    autocontrast (one image in six) stretches each image to the full range [0, 1]."""
    g = torch.Generator().manual_seed(0)
    images = torch.rand(240, 3, 9, 9) * 0.5 + 0.2
    images[:, 0, 0, 0] = 0.99  # a pixel near white; solarize at magnitude 0 must not touch it
    out = rand_augment_light(images, g, magnitude=0.0)
    lo, hi = images.amin(dim=(1, 2, 3), keepdim=True), images.amax(dim=(1, 2, 3), keepdim=True)
    kept = ((out - images).abs().amax(dim=(1, 2, 3)) < 1e-5)
    stretched = ((out - (images - lo) / (hi - lo)).abs().amax(dim=(1, 2, 3)) < 1e-5)
    assert bool((kept | stretched).all())
    assert 20 < int(stretched.sum()) < 60  # about one in six


def test_rand_augment_light_keeps_dtype_range_and_is_seeded():
    images = torch.rand(32, 3, 16, 16)
    a = rand_augment_light(images, torch.Generator().manual_seed(1), magnitude=1.0)
    b = rand_augment_light(images, torch.Generator().manual_seed(1), magnitude=1.0)
    assert torch.equal(a, b) and a.dtype == images.dtype and a.shape == images.shape
    assert a.min() >= 0 and a.max() <= 1 and a.max() > 0.9


def test_denormalize_inverts_the_loaders_normalisation():
    images = torch.randint(0, 256, (6, 3, 5, 5), dtype=torch.uint8)
    loader = TensorLoader(images, torch.zeros(6, dtype=torch.long), 6, CIFAR10_MEAN, CIFAR10_STD)
    x, _ = next(iter(loader))
    torch.testing.assert_close(denormalize(x, CIFAR10_MEAN, CIFAR10_STD), images.float() / 255)


def test_denormalize_clamps_to_the_unit_range():
    out = denormalize(torch.tensor([-10.0, 0.0, 10.0]).view(1, 3, 1, 1), (0.5, 0.5, 0.5), (0.2, 0.2, 0.2))
    assert out.flatten().tolist() == pytest.approx([0.0, 0.5, 1.0])


# ------------------------------------------------------------------------ CIFAR archive, more behaviours
def test_cifar_labels_are_int64_and_val_size_zero_keeps_all_for_training(tmp_path):
    archive = tmp_path / "src.tar.gz"
    _fake_cifar_archive(archive)
    root = tmp_path / "deep" / "er" / "root"  # parents are made as needed
    splits = load_cifar10(root, url=archive.as_uri(), md5=_md5(archive), val_size=0)
    assert sorted(splits) == ["test", "train"] and len(splits["train"][1]) == 100
    assert splits["train"][1].dtype == torch.int64 and splits["test"][1].dtype == torch.int64


def test_cifar_extracts_only_the_known_files(tmp_path):
    archive = tmp_path / "src.tar.gz"
    _fake_cifar_archive(archive)
    with tarfile.open(archive, "r:gz") as tar:
        members = [(m, tar.extractfile(m).read()) for m in tar]
    with tarfile.open(archive, "w:gz") as tar:
        for info, raw in members:
            tar.addfile(info, io.BytesIO(raw))
        extra = tarfile.TarInfo(f"{CIFAR10_DIR}/readme.html")
        extra.size = 3
        tar.addfile(extra, io.BytesIO(b"hi!"))
        link = tarfile.TarInfo(f"{CIFAR10_DIR}/data_batch_9")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tar.addfile(link)
    root = tmp_path / "root"
    load_cifar10(root, url=archive.as_uri(), md5=_md5(archive), val_size=0)
    assert sorted(p.name for p in (root / CIFAR10_DIR).iterdir()) == sorted(CIFAR10_FILES)


def test_cifar_archive_missing_a_batch_is_refused(tmp_path):
    archive = tmp_path / "src.tar.gz"
    _fake_cifar_archive(archive)
    with tarfile.open(archive, "r:gz") as tar:
        members = [(m, tar.extractfile(m).read()) for m in tar if not m.name.endswith("test_batch")]
    with tarfile.open(archive, "w:gz") as tar:
        for info, raw in members:
            tar.addfile(info, io.BytesIO(raw))
    root = tmp_path / "root"
    with pytest.raises(DatasetError, match="not the CIFAR-10 python archive"):
        load_cifar10(root, url=archive.as_uri(), md5=_md5(archive))
    assert list(root.iterdir()) == []


@pytest.mark.parametrize("batch", [
    ["not", "a", "dict"],
    {"labels": [0]},
    {"data": np.zeros((1, 3072), dtype=np.float32), "labels": [0]},
    {"data": np.zeros(3072, dtype=np.uint8), "labels": [0]},
    {"data": np.zeros((1, 3071), dtype=np.uint8), "labels": [0]},
    {"data": np.zeros((1, 3072), dtype=np.uint8), "labels": (0,)},
    {"data": np.zeros((2, 3072), dtype=np.uint8), "labels": [0]},
], ids=["list", "no-data", "float", "1-d", "short-rows", "tuple-labels", "too-few-labels"])
def test_cifar_batch_with_the_wrong_layout_is_a_clear_error(tmp_path, batch):
    path = tmp_path / "data_batch_1"
    path.write_bytes(pickle.dumps(batch, protocol=2))
    with pytest.raises(DatasetError, match="CIFAR-10 layout"):
        cifar._read_cifar_batch(path)


@pytest.mark.parametrize("magnitude", [None, 0.4])
def test_rand_augment_light_strength_is_plus_minus_magnitude(magnitude):
    """On a flat grey image only brightness changes the centre pixel (contrast and saturation keep a flat
    image, autocontrast maps it to 0, solarize needs a strength over 0.5, and the warp turns about the centre
    of an odd-sized image): it becomes 0.5 * (1 + m) with m drawn from [-magnitude, magnitude]."""
    g = torch.Generator().manual_seed(0)
    images = torch.full((600, 3, 33, 33), 0.5)
    out = rand_augment_light(images, g) if magnitude is None else rand_augment_light(images, g, magnitude)
    mag = 0.3 if magnitude is None else magnitude  # the documented default
    centre = out[:, :, 16, 16]
    assert torch.equal(centre, centre[:, :1].expand_as(centre))  # the same op on every channel
    centre = centre[:, 0]
    bright = centre[(centre - 0.5).abs() > 1e-4]
    bright = bright[bright > 1e-4]
    assert bool(((centre.abs() < 1e-4) | ((centre - 0.5).abs() <= 0.5 * mag + 1e-4)).all())
    assert bright.min() < 0.5 * (1 - 0.9 * mag) and bright.max() > 0.5 * (1 + 0.9 * mag)


def test_cifar_md5_message_says_what_happened_to_the_file(tmp_path):
    archive = tmp_path / "src.tar.gz"
    _fake_cifar_archive(archive)
    with pytest.raises(DatasetError, match="the download has MD5 .*it was deleted; run again"):
        load_cifar10(tmp_path / "a", url=archive.as_uri(), md5="0" * 32)
    root = tmp_path / "b"
    root.mkdir()
    _fake_cifar_archive(root / CIFAR10_ARCHIVE)
    with pytest.raises(DatasetError, match=f"{CIFAR10_ARCHIVE} has MD5 .*delete it and run again"):
        load_cifar10(root, md5="0" * 32)


def test_cifar_seed_chooses_the_validation_split_and_a_damaged_cache_is_refused(tmp_path):
    archive = tmp_path / "src.tar.gz"
    _fake_cifar_archive(archive)
    root = tmp_path / "root"
    a = load_cifar10(root, url=archive.as_uri(), md5=_md5(archive), val_size=20, seed=0)
    b = load_cifar10(root, val_size=20, seed=1)
    assert not torch.equal(a["val"][0], b["val"][0])
    (root / CIFAR10_DIR / "data_batch_3").unlink()
    with pytest.raises(DatasetError, match="lacks"):
        load_cifar10(root, download=False)


# ------------------------------------------------------------------------------ TensorLoader, several processes
def _loader(n: int, batch_size: int, **kwargs) -> TensorLoader:
    images = torch.arange(n, dtype=torch.uint8).view(n, 1, 1, 1)
    return TensorLoader(images, torch.arange(n), batch_size, (0.0,), (1.0,), max_value=1.0, **kwargs)


@pytest.mark.parametrize("n, batch_size, world_size, steps", [(10, 4, 2, 3), (9, 4, 2, 2), (13, 4, 3, 3),
                                                              (8, 4, 2, 2), (5, 8, 2, 1), (4, 4, 1, 1)])
def test_tensor_loader_shares_every_image_once_among_processes(n, batch_size, world_size, steps):
    """One epoch: every image is seen exactly once, by one process; a tail too small to give every
    process an image joins the batch before it, so all processes take the same number of steps."""
    seen = []
    for rank in range(world_size):
        loader = _loader(n, batch_size, shuffle=True, seed=4, rank=rank, world_size=world_size)
        loader.set_epoch(1)
        batches = [labels.tolist() for _, labels in loader]
        assert len(loader) == len(batches) == steps and all(batches)
        assert batches == [s.tolist() for s in loader.shares()]  # shares() is the order the loader uses
        seen += [i for b in batches for i in b]
    assert sorted(seen) == list(range(n))


def test_tensor_loader_order_depends_on_seed_and_epoch_and_drop_last_drops_the_tail():
    a = _loader(50, 10, shuffle=True, seed=1)
    first = torch.cat(a.shares())
    assert not torch.equal(first, torch.arange(50)) and sorted(first.tolist()) == list(range(50))
    a.set_epoch(1)
    assert not torch.equal(torch.cat(a.shares()), first)
    assert not torch.equal(torch.cat(_loader(50, 10, shuffle=True, seed=2).shares()), first)
    default_seed = torch.cat(_loader(50, 10, shuffle=True).shares())
    assert torch.equal(default_seed, torch.cat(_loader(50, 10, shuffle=True, seed=0).shares()))
    dropped = _loader(25, 10, drop_last=True)
    assert len(dropped) == 2 and [len(s) for s in dropped.shares()] == [10, 10]
    assert [len(s) for s in _loader(25, 10).shares()] == [10, 10, 5]


def test_tensor_loader_rejects_what_it_cannot_share():
    with pytest.raises(ValueError, match="rank"):
        _loader(8, 4, rank=2, world_size=2)
    with pytest.raises(ValueError, match="cannot share"):
        _loader(8, 2, world_size=3)
    with pytest.raises(ValueError, match="cannot share"):
        _loader(2, 8, world_size=3)
    _loader(3, 3, world_size=3, rank=2)  # exactly one image each is enough
    with pytest.raises(ValueError, match="expected images"):
        TensorLoader(torch.zeros(4, 1, 2, 2), torch.zeros(3), 2, (0.0,), (1.0,))
    with pytest.raises(ValueError, match="expected images"):
        TensorLoader(torch.zeros(4, 2, 2), torch.zeros(4), 2, (0.0,), (1.0,))
    with pytest.raises(ValueError, match="one value per channel"):
        TensorLoader(torch.zeros(4, 1, 2, 2), torch.zeros(4), 2, (0.0,), (1.0, 1.0))


def test_make_digits_asset_rebuilds_the_shipped_file(tmp_path):
    pytest.importorskip("sklearn.datasets")
    path = tmp_path / "digits.npz"
    load_tool("make_digits_asset").make_digits_asset(path)
    images, labels = digits_arrays()
    with np.load(path) as rebuilt:
        assert rebuilt["images"].dtype == np.uint8 and rebuilt["labels"].dtype == np.uint8
        np.testing.assert_array_equal(rebuilt["images"], images)
        np.testing.assert_array_equal(rebuilt["labels"], labels)
