"""Data for training a ViT: handwritten digits shipped with the package, and CIFAR-10 from its archive.

Two datasets, one shape of answer. Both loaders return a dict of splits, each a pair of tensors:

    splits = load_digits()                    # offline, 1,797 real 8x8 digits shipped inside vitedu
    images, labels = splits["train"]          # (1259, 1, 8, 8) uint8 in [0, 16], (1259,) int64
    splits = load_cifar10("~/data")           # downloads 163 MB once, verifies the MD5, then caches
    images, labels = splits["train"]          # (45000, 3, 32, 32) uint8 in [0, 255], (45000,) int64

Images stay uint8 in memory (CIFAR-10's 60,000 images are 184 MB that way); a :class:`TensorLoader`
turns them into shuffled float batches on the device and applies the augmentation there, a whole batch
at a time. Everything is plain torch: torchvision is not needed.

Splits (fixed, stratified: every class keeps its share in every split; seed 0)

    digits    train 1259 / val 179 / test 359   (70 / 10 / 20 %; train + val is the usual 80 % split)
    cifar10   train 45000 / val 5000 / test 10000   (val held out of the official training set)
"""

from __future__ import annotations

import hashlib
import math
import os
import pickle
import shutil
import tarfile
import tempfile
import urllib.error
import urllib.request
import zlib
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Callable, Optional

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

Split = tuple[Tensor, Tensor]  # (images (N, C, H, W) uint8, labels (N,) int64)

# ----------------------------------------------------------------------------------------------------
# Digits: 1,797 8x8 grayscale digits (UCI / scikit-learn's load_digits), shipped in vitedu/assets.
# ----------------------------------------------------------------------------------------------------

DIGITS_FILE = "digits.npz"
DIGITS_MAX = 16  # pixel values are counts 0..16 (each pixel summarises a 4x4 block of a 32x32 bitmap)
DIGITS_SPLIT_SIZES = {"train": 1259, "val": 179, "test": 359}
# Mean and std of the training split after scaling to [0, 1] (a test checks them).
DIGITS_MEAN, DIGITS_STD = (0.3057,), (0.3763,)


def make_digits_asset(path: str | os.PathLike) -> None:
    """Write the digits asset from scikit-learn (how ``vitedu/assets/digits.npz`` was made, once).

    vitedu itself never imports scikit-learn: the 45 kB file ships with the package.
    """
    from sklearn.datasets import load_digits as sklearn_load_digits

    digits = sklearn_load_digits()
    np.savez_compressed(path, images=digits.images.astype(np.uint8), labels=digits.target.astype(np.uint8))


def digits_arrays() -> tuple[np.ndarray, np.ndarray]:
    """All 1,797 digits as NumPy arrays: images (1797, 8, 8) uint8 in [0, 16], labels (1797,) uint8."""
    with resources.files("vitedu").joinpath("assets", DIGITS_FILE).open("rb") as f:
        with np.load(f) as data:
            return data["images"], data["labels"]


def stratified_split(
    labels: np.ndarray, fractions: dict[str, float], seed: int = 0
) -> dict[str, np.ndarray]:
    """Split indices so that every class is shared out in the same proportions.

    labels (N,) -> {name: indices}. Within each class the examples are shuffled with ``seed`` and cut
    in the order given by ``fractions`` (the last split takes the remainder); the same labels and seed
    always give the same split. Each returned index array is sorted.
    """
    if not math.isclose(sum(fractions.values()), 1.0):
        raise ValueError(f"split fractions must sum to 1, got {fractions} (sum {sum(fractions.values())})")
    rng = np.random.default_rng(seed)
    names = list(fractions)
    parts: dict[str, list[np.ndarray]] = {name: [] for name in names}
    for cls in np.unique(labels):
        idx = rng.permutation(np.flatnonzero(labels == cls))
        start = 0
        for name in names[:-1]:
            stop = start + round(fractions[name] * len(idx))
            parts[name].append(idx[start:stop])
            start = stop
        parts[names[-1]].append(idx[start:])
    return {name: np.sort(np.concatenate(parts[name])) for name in names}


def load_digits(seed: int = 0) -> dict[str, Split]:
    """The digits in a fixed stratified train/val/test split (1259 / 179 / 359 with ``seed=0``).

    Returns {"train", "val", "test"} -> (images (N, 1, 8, 8) uint8 in [0, 16], labels (N,) int64).
    Divide by ``DIGITS_MAX`` to get [0, 1]; :class:`TensorLoader` does that for you.
    """
    images, labels = digits_arrays()
    split = stratified_split(labels, {"test": 0.2, "val": 0.1, "train": 0.7}, seed)
    images_t = torch.from_numpy(images).unsqueeze(1)  # (1797, 1, 8, 8)
    labels_t = torch.from_numpy(labels.astype(np.int64))
    return {name: (images_t[split[name]], labels_t[split[name]]) for name in ("train", "val", "test")}


# ----------------------------------------------------------------------------------------------------
# CIFAR-10: the official python archive, verified before anything is unpacked or unpickled.
# ----------------------------------------------------------------------------------------------------

CIFAR10_URL = "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz"
CIFAR10_MD5 = "c58f30108f718f92721af3b95e74349a"  # published on https://www.cs.toronto.edu/~kriz/cifar.html
CIFAR10_ARCHIVE = "cifar-10-python.tar.gz"
CIFAR10_DIR = "cifar-10-batches-py"
CIFAR10_FILES = [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch", "batches.meta"]
CIFAR10_CLASSES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")
CIFAR10_MEAN = (0.4914, 0.4822, 0.4465)  # per channel, over the 50,000 training images
CIFAR10_STD = (0.2470, 0.2435, 0.2616)


class DatasetError(RuntimeError):
    """A dataset could not be downloaded, verified or read; the message says why and what to do."""


def md5sum(path: str | os.PathLike, chunk_size: int = 1 << 20) -> str:
    """Hex MD5 of a file, read in chunks (a 163 MB archive never sits in memory)."""
    digest = hashlib.md5()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(chunk_size), b""):
            digest.update(chunk)
    return digest.hexdigest()


class _CifarUnpickler(pickle.Unpickler):
    """Unpickle a CIFAR batch and nothing else.

    Pickle can call any importable function while loading, so a tampered file could run code. This
    unpickler resolves only the NumPy names a pickled array needs (and ``_codecs.encode``, which
    protocol-2 pickles use to rebuild bytes); anything else is refused.
    (The MD5 check comes first anyway; this is the second lock on the door.)
    """

    ALLOWED = {
        ("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
        ("numpy", "ndarray"), ("numpy", "dtype"), ("_codecs", "encode"),
    }

    def find_class(self, module: str, name: str):  # noqa: ANN201 (pickle's signature)
        if (module, name) not in self.ALLOWED:
            raise pickle.UnpicklingError(f"refusing to load {module}.{name}: a CIFAR batch holds only arrays")
        if module == "_codecs":
            import codecs

            return codecs.encode
        if name == "_reconstruct":
            return np.ndarray.__reduce__(np.zeros(0))[0]  # numpy's own _reconstruct, wherever it lives
        return getattr(np, name)


def _read_cifar_batch(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """One pickled batch -> images (N, 3, 32, 32) uint8, labels (N,) int64."""
    with open(path, "rb") as f:
        try:
            batch = _CifarUnpickler(f, encoding="latin1").load()  # written by Python 2: str -> latin1
        except (pickle.UnpicklingError, EOFError, ValueError, TypeError) as err:
            raise DatasetError(f"{path} is not a readable CIFAR-10 batch ({err}); delete {path.parent} "
                               "and run again to unpack a fresh copy") from err
    data, labels = (batch.get("data"), batch.get("labels")) if isinstance(batch, dict) else (None, None)
    if not isinstance(data, np.ndarray) or data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != 3072 \
            or not isinstance(labels, list) or len(labels) != len(data):
        raise DatasetError(f"{path} does not have the CIFAR-10 layout (a dict with 'data': uint8 (N, 3072) "
                           f"and 'labels': N ints); delete {path.parent} and run again")
    # Each row is 1024 red, then 1024 green, then 1024 blue values, row-major: reshape, no transpose.
    return data.reshape(-1, 3, 32, 32), np.asarray(labels, dtype=np.int64)


def _download(url: str, dest: Path, timeout: float) -> None:
    """Stream ``url`` into ``dest``; raise DatasetError if the connection fails or ends early."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response, open(dest, "wb") as out:
            expected = response.headers.get("Content-Length")
            shutil.copyfileobj(response, out, length=1 << 20)
            written = out.tell()
    except (urllib.error.URLError, OSError) as err:
        raise DatasetError(
            f"could not download {url} ({err}). CIFAR-10 needs the internet once; offline, train on the "
            "digits shipped with vitedu (dataset='digits'), or download the archive by hand and put it "
            f"in {dest.parent} as {CIFAR10_ARCHIVE}"
        ) from err
    if expected is not None and written != int(expected):
        raise DatasetError(f"the download of {url} stopped after {written:,} of {int(expected):,} bytes; "
                           "nothing was kept, run again")


def _extract_cifar(archive: Path, root: Path) -> None:
    """Unpack the expected files into a temporary folder, then move it into place in one rename.

    Only regular files named cifar-10-batches-py/<known name> are written, so a crafted archive cannot
    write outside ``root`` (no absolute paths, no "..", no links). If anything fails, the temporary
    folder is removed and ``root/cifar-10-batches-py`` never exists half-written.
    """
    wanted = {f"{CIFAR10_DIR}/{name}" for name in CIFAR10_FILES}
    tmp = Path(tempfile.mkdtemp(prefix=".cifar-extract-", dir=root))
    try:
        (tmp / CIFAR10_DIR).mkdir()
        try:
            with tarfile.open(archive, "r:gz") as tar:
                for member in tar:
                    if member.name in wanted and member.isfile():
                        with tar.extractfile(member) as src, open(tmp / member.name, "wb") as dst:
                            shutil.copyfileobj(src, dst)
        except (tarfile.TarError, EOFError, OSError, zlib.error) as err:
            raise DatasetError(f"{archive} is damaged or truncated ({type(err).__name__}: {err}); "
                               "nothing was unpacked. Delete it and run again to download a fresh copy") from err
        missing = sorted(wanted - {f"{CIFAR10_DIR}/{p.name}" for p in (tmp / CIFAR10_DIR).iterdir()})
        if missing:
            raise DatasetError(f"{archive} lacks {missing}: it is not the CIFAR-10 python archive")
        os.replace(tmp / CIFAR10_DIR, root / CIFAR10_DIR)  # atomic on one filesystem
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def load_cifar10(
    root: str | os.PathLike,
    download: bool = True,
    url: str = CIFAR10_URL,
    md5: str = CIFAR10_MD5,
    val_size: int = 5000,
    seed: int = 0,
    timeout: float = 60.0,
) -> dict[str, Split]:
    """CIFAR-10 from the official python archive, cached under ``root``.

    Returns {"train", "val", "test"} -> (images (N, 3, 32, 32) uint8, labels (N,) int64); ``val`` is a
    stratified hold-out of ``val_size`` images from the official 50,000 training images (0 disables it).

    What happens on the first call, and why it is safe:
    1. the archive is downloaded to a temporary file in ``root`` (or taken from ``root`` if you put it
       there by hand);
    2. its MD5 is compared with the published one *before* anything is unpacked or unpickled; a
       mismatch deletes the download and raises, saying so;
    3. the seven batch files are unpacked into a temporary folder and renamed into place in one step;
    4. the batches are read with an unpickler that only accepts NumPy arrays.
    Later calls find ``root/cifar-10-batches-py`` and skip straight to step 4.
    """
    root = Path(root).expanduser()
    root.mkdir(parents=True, exist_ok=True)
    folder = root / CIFAR10_DIR
    if not folder.is_dir():
        archive = root / CIFAR10_ARCHIVE
        downloaded = not archive.exists()
        if downloaded:
            if not download:
                raise DatasetError(f"CIFAR-10 is not in {root}; pass download=True or put {CIFAR10_ARCHIVE} there")
            fd, name = tempfile.mkstemp(prefix=".cifar-download-", suffix=".part", dir=root)
            os.close(fd)
            archive = Path(name)
        try:
            if downloaded:
                _download(url, archive, timeout)
            actual = md5sum(archive)
            if actual != md5:
                what = "the download" if downloaded else f"{archive}"
                advice = "it was deleted; run again" if downloaded else "delete it and run again"
                raise DatasetError(f"MD5 mismatch: {what} has MD5 {actual}, expected {md5}. The file is "
                                   f"corrupt, truncated or not the CIFAR-10 archive; nothing was unpacked, {advice}")
            _extract_cifar(archive, root)
        finally:
            if downloaded:
                archive.unlink(missing_ok=True)  # keep only the unpacked batches
    missing = [name for name in CIFAR10_FILES if not (folder / name).is_file()]
    if missing:
        raise DatasetError(f"{folder} lacks {missing}; delete the folder and run again")
    train = [_read_cifar_batch(folder / f"data_batch_{i}") for i in range(1, 6)]
    train_x, train_y = np.concatenate([x for x, _ in train]), np.concatenate([y for _, y in train])
    test_x, test_y = _read_cifar_batch(folder / "test_batch")
    splits = {"test": (torch.from_numpy(test_x), torch.from_numpy(test_y))}
    if val_size:
        part = stratified_split(train_y, {"val": val_size / len(train_y), "train": 1 - val_size / len(train_y)}, seed)
        splits["val"] = (torch.from_numpy(train_x[part["val"]]), torch.from_numpy(train_y[part["val"]]))
        train_x, train_y = train_x[part["train"]], train_y[part["train"]]
    splits["train"] = (torch.from_numpy(train_x), torch.from_numpy(train_y))
    return {name: splits[name] for name in ("train", "val", "test") if name in splits}


# ----------------------------------------------------------------------------------------------------
# Augmentation: whole batches at once, on the batch's device. Randomness comes from a CPU generator, so
# a seed gives the same augmentations on CPU, CUDA and MPS.
# ----------------------------------------------------------------------------------------------------

Augment = Callable[[Tensor, torch.Generator], Tensor]  # (batch, C, H, W) in [0, 1] -> same shape


def _rand(shape: tuple[int, ...], generator: torch.Generator, like: Tensor) -> Tensor:
    return torch.rand(shape, generator=generator).to(like.device)


def random_crop(images: Tensor, padding: int, generator: torch.Generator) -> Tensor:
    """Pad with zeros, then cut a random H x W window per image: a shift by up to ``padding`` pixels.

    (batch, C, H, W) -> (batch, C, H, W). The standard CIFAR augmentation (padding 4); with padding 1 on
    8x8 digits it moves each digit by at most one pixel.
    """
    batch, _, height, width = images.shape
    padded = F.pad(images, (padding, padding, padding, padding))  # (batch, C, H + 2p, W + 2p)
    dy = torch.randint(0, 2 * padding + 1, (batch,), generator=generator).to(images.device)
    dx = torch.randint(0, 2 * padding + 1, (batch,), generator=generator).to(images.device)
    rows = (dy[:, None] + torch.arange(height, device=images.device))[:, None, :, None]  # (batch, 1, H, 1)
    cols = (dx[:, None] + torch.arange(width, device=images.device))[:, None, None, :]  # (batch, 1, 1, W)
    b = torch.arange(batch, device=images.device)[:, None, None, None]
    c = torch.arange(images.shape[1], device=images.device)[None, :, None, None]
    return padded[b, c, rows, cols]


def random_hflip(images: Tensor, generator: torch.Generator) -> Tensor:
    """Mirror each image left-right with probability 1/2 (never for digits: a mirrored 3 is no digit)."""
    flip = _rand((images.shape[0],), generator, images) < 0.5
    return torch.where(flip[:, None, None, None], images.flip(-1), images)


def random_affine(
    images: Tensor, generator: torch.Generator, degrees: float = 0.0, scale: float = 0.0,
    translate: float = 0.0, shear: float = 0.0,
) -> Tensor:
    """A random rotation (+-degrees), zoom (1 +- scale), shift (+- translate, as a fraction of the
    size) and shear (+-shear degrees) per image, resampled bilinearly with zero padding.

    (batch, C, H, W) -> (batch, C, H, W)
    """
    n = images.shape[0]
    u = _rand((5, n), generator, images) * 2 - 1  # five uniform numbers in [-1, 1] per image
    angle, zoom = u[0] * math.radians(degrees), 1 + u[1] * scale
    shift_x, shift_y, sh = u[2] * 2 * translate, u[3] * 2 * translate, u[4] * math.radians(shear)
    cos, sin = torch.cos(angle) / zoom, torch.sin(angle) / zoom
    # affine_grid maps output coordinates (in [-1, 1]) to input ones: the inverse transform.
    theta = torch.stack([
        torch.stack([cos, -sin + torch.tan(sh) * cos, shift_x], dim=1),
        torch.stack([sin, cos, shift_y], dim=1),
    ], dim=1)  # (batch, 2, 3)
    grid = F.affine_grid(theta.to(images.dtype), list(images.shape), align_corners=False)
    return F.grid_sample(images, grid, mode="bilinear", padding_mode="zeros", align_corners=False)


def rand_augment_light(images: Tensor, generator: torch.Generator, magnitude: float = 0.3) -> Tensor:
    """A light RandAugment-style policy (Cubuk et al., 2020): each image gets one random photometric
    operation (brightness, contrast, saturation, solarize, equalise-like autocontrast, or nothing) and
    a random small affine warp, with strength ``magnitude`` in [0, 1].

    (batch, 3, H, W) in [0, 1] -> same shape
    """
    n = images.shape[0]
    op = (torch.rand(n, generator=generator) * 6).long().to(images.device)[:, None, None, None]
    m = (magnitude * (_rand((n,), generator, images) * 2 - 1))[:, None, None, None]  # signed strength
    gray = images.mean(dim=1, keepdim=True)  # (batch, 1, H, W)
    mean = gray.mean(dim=(2, 3), keepdim=True)  # (batch, 1, 1, 1)
    lo, hi = images.amin(dim=(1, 2, 3), keepdim=True), images.amax(dim=(1, 2, 3), keepdim=True)
    candidates = torch.stack([
        images,
        images * (1 + m),  # brightness
        mean + (images - mean) * (1 + m),  # contrast
        gray + (images - gray) * (1 + m),  # saturation
        torch.where(images > 1 - m.abs(), 1 - images, images),  # solarize the brightest pixels
        (images - lo) / (hi - lo).clamp_min(1e-3),  # autocontrast
    ])  # (ops, batch, C, H, W)
    out = candidates.gather(0, op.expand_as(images)[None]).squeeze(0).clamp(0, 1)
    return random_affine(out, generator, degrees=30 * magnitude, shear=15 * magnitude)


def digits_augment(images: Tensor, generator: torch.Generator) -> Tensor:
    """Shift each digit by up to one pixel (digits are small, 8x8, and their position varies a little)."""
    return random_crop(images, 1, generator)


def digits_warp(images: Tensor, generator: torch.Generator) -> Tensor:
    """Warp each digit a little about its centre, without moving it: rotate by up to 10 degrees, zoom by
    up to 10 %, shear by up to 10 degrees. New handwriting from the same digits, for cluttered digits, where
    a shift (``digits_augment``) would move ink across the 4-pixel patch grid the digit is placed on."""
    return random_affine(images, generator, degrees=10.0, scale=0.1, shear=10.0)


def cifar_augment(images: Tensor, generator: torch.Generator) -> Tensor:
    """The standard CIFAR recipe: random crop with 4 pixels of padding, then a horizontal flip."""
    return random_hflip(random_crop(images, 4, generator), generator)


def cifar_augment_strong(images: Tensor, generator: torch.Generator) -> Tensor:
    """Crop + flip, then the light RandAugment-style policy."""
    return rand_augment_light(cifar_augment(images, generator), generator)


AUGMENTATIONS: dict[str, Optional[Augment]] = {
    "none": None, "digits": digits_augment, "digits_warp": digits_warp, "cifar": cifar_augment,
    "cifar_strong": cifar_augment_strong,
}


# ----------------------------------------------------------------------------------------------------
# Batches on the device.
# ----------------------------------------------------------------------------------------------------


class TensorLoader:
    """Shuffled mini-batches of in-memory uint8 images, as normalised floats on ``device``.

    for images, labels in loader:   # images (batch, C, H, W) float32, labels (batch,) int64

    Each batch is scaled to [0, 1] (dividing by ``max_value``), augmented (training only), then
    normalised per channel with ``mean``/``std``. Call ``set_epoch(e)`` before each epoch: the order
    and the augmentations then depend only on (seed, epoch), so a resumed run sees the same batches
    as an uninterrupted one.

    Several processes (``world_size`` > 1, see vitedu.distributed): every process draws the same order,
    cuts each batch of ``batch_size`` images into ``world_size`` disjoint shares and keeps share ``rank``
    (images rank, rank + world_size, ...), so in one epoch every image is seen exactly once, by one process.
    A last batch too small to give every process an image is folded into the batch before it.
    """

    def __init__(
        self, images: Tensor, labels: Tensor, batch_size: int, mean: tuple[float, ...], std: tuple[float, ...],
        max_value: float = 255.0, shuffle: bool = False, augment: Optional[Augment] = None,
        device: torch.device | str = "cpu", seed: int = 0, drop_last: bool = False, rank: int = 0,
        world_size: int = 1,
    ) -> None:
        if images.dim() != 4 or len(images) != len(labels):
            raise ValueError(f"expected images (N, C, H, W) and labels (N,), got {tuple(images.shape)} and "
                             f"{tuple(labels.shape)}")
        if len(mean) != images.shape[1] or len(std) != images.shape[1]:
            raise ValueError(f"mean/std need one value per channel ({images.shape[1]}), got {mean} and {std}")
        if not 0 <= rank < world_size:
            raise ValueError(f"rank must be in [0, world_size) = [0, {world_size}), got rank {rank}")
        if world_size > 1 and min(batch_size, len(images)) < world_size:
            raise ValueError(f"{world_size} processes cannot share batches of {min(batch_size, len(images))} "
                             f"images ({len(images)} in all): every process needs at least one image per step. "
                             f"Use a batch size of at least {world_size}, or fewer processes")
        self.images, self.labels = images, labels
        self.batch_size, self.shuffle, self.augment, self.drop_last = batch_size, shuffle, augment, drop_last
        self.device, self.max_value, self.seed, self.epoch = torch.device(device), max_value, seed, 0
        self.rank, self.world_size = rank, world_size
        self.mean = torch.tensor(mean, device=self.device)[None, :, None, None]  # (1, C, 1, 1)
        self.std = torch.tensor(std, device=self.device)[None, :, None, None]

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        n = len(self.images)
        if self.drop_last:
            return n // self.batch_size
        batches = math.ceil(n / self.batch_size)
        if self.world_size > 1 and batches > 1 and 0 < n % self.batch_size < self.world_size:
            batches -= 1  # the small tail joins the batch before it
        return batches

    def shares(self, generator: Optional[torch.Generator] = None) -> list[Tensor]:
        """This process's image indices, batch by batch, for the current epoch: [(share,) int64, ...]."""
        if generator is None:
            generator = torch.Generator().manual_seed(self.seed * 100_003 + self.epoch)
        n = len(self.images)
        order = torch.randperm(n, generator=generator) if self.shuffle else torch.arange(n)
        starts = [i * self.batch_size for i in range(len(self))]
        ends = starts[1:] + [len(self) * self.batch_size if self.drop_last else n]
        return [order[a:b][self.rank :: self.world_size] for a, b in zip(starts, ends)]

    def __iter__(self) -> Iterator[tuple[Tensor, Tensor]]:
        generator = torch.Generator().manual_seed(self.seed * 100_003 + self.epoch)
        shares = self.shares(generator)
        if self.world_size > 1:  # same order on every process; augmentations drawn per process
            generator = torch.Generator().manual_seed((self.seed * 100_003 + self.epoch) * 1_009 + 1 + self.rank)
        for idx in shares:
            x = self.images[idx].to(self.device, non_blocking=True).float() / self.max_value  # (batch, C, H, W)
            if self.augment is not None:
                x = self.augment(x, generator)
            yield (x - self.mean) / self.std, self.labels[idx].to(self.device, non_blocking=True)


def denormalize(images: Tensor, mean: tuple[float, ...], std: tuple[float, ...]) -> Tensor:
    """Undo the normalisation, for plotting: (batch, C, H, W) -> same, back in [0, 1]."""
    m = torch.tensor(mean, device=images.device)[None, :, None, None]
    s = torch.tensor(std, device=images.device)[None, :, None, None]
    return (images * s + m).clamp(0, 1)


__all__ = [
    "AUGMENTATIONS", "CIFAR10_CLASSES", "CIFAR10_MD5", "CIFAR10_MEAN", "CIFAR10_STD", "CIFAR10_URL",
    "DIGITS_MAX", "DIGITS_MEAN", "DIGITS_SPLIT_SIZES", "DIGITS_STD", "DatasetError", "TensorLoader",
    "cifar_augment", "cifar_augment_strong", "denormalize", "digits_arrays", "digits_augment",
    "load_cifar10", "load_digits", "md5sum", "rand_augment_light", "random_affine", "random_crop",
    "random_hflip", "stratified_split",
]


# ----------------------------------------------------------------------------------------------------
# Cluttered digits: one shipped digit on a 32x32 canvas among fragments of others (vitedu/cluttered.py,
# its own concept and file; re-exported here so that all datasets load from vitedu.data).
# ----------------------------------------------------------------------------------------------------

from .cluttered import load_cluttered_digits  # noqa: E402  (cluttered.py imports the digits from above)

__all__ += ["load_cluttered_digits"]
