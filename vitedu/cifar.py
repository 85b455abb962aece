"""CIFAR-10 from its official python archive, verified before anything is unpacked or unpickled.

    # downloads 163 MB once, verifies the MD5, then caches
    splits = load_cifar10("~/data")
    # (45000, 3, 32, 32) uint8 in [0, 255], (45000,) int64
    images, labels = splits["train"]

Splits: train 45000 / val 5000 (held out of the official training set, stratified) / test 10000.
Images stay uint8 in memory (the 60,000 images are 184 MB that way); a :class:`vitedu.loaders.TensorLoader`
turns them into float batches.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import shutil
import tarfile
import tempfile
import urllib.error
import urllib.request
import zlib
from pathlib import Path

import numpy as np
import torch

from .digits import Split, stratified_split
from .loaders import DatasetError

CIFAR10_URL = "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz"
CIFAR10_MD5 = "c58f30108f718f92721af3b95e74349a"  # published on https://www.cs.toronto.edu/~kriz/cifar.html
CIFAR10_ARCHIVE = "cifar-10-python.tar.gz"
CIFAR10_DIR = "cifar-10-batches-py"
CIFAR10_FILES = [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch", "batches.meta"]


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
