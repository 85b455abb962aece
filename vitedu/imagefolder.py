"""Your own images: a folder with one sub-folder per class, read with Pillow (no torchvision).

    my_images/                    or, with your own split:
        cat/  001.jpg 002.png ...     my_images/train/cat/...
        dog/  a.jpg b.jpg ...         my_images/val/cat/...
                                      my_images/test/cat/...  (optional)

    splits, classes = load_image_folder("my_images", img_size=32)
    # (N, 3, 32, 32) uint8, (N,) int64; classes[label] is its folder
    images, labels = splits["train"]

    python -m vitedu.train --dataset imagefolder --data-root my_images

Classes are the sub-folder names in sorted order. Without ``train/`` and ``val/`` sub-folders the images
are split once, stratified and seeded (80 / 10 / 10 % train / val / test), so every class keeps its share
in every split. With them, ``val/`` is also the test split when there is no ``test/`` (a warning says so).
Each image is converted to RGB, its shorter side resized to ``img_size`` (bicubic) and its centre cropped
to a square, once, when the folder is read; the resized images stay in memory as uint8
(N x 3 x img_size^2 bytes: 10,000 images at 224 pixels are 1.5 GB). Augmentation happens later, per
batch (vitedu.augment.cifar_augment: random crop with padding, horizontal flip).

Unreadable image files fail the load by default, naming the file (``on_error="skip"`` skips them with
one warning that names each). Files whose suffix is not an image type (notes, .DS_Store) are ignored.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import numpy as np
import torch

from .digits import Split, stratified_split
from .loaders import DatasetError

IMAGE_SUFFIXES = (".bmp", ".gif", ".jpeg", ".jpg", ".png", ".ppm", ".tif", ".tiff", ".webp")
SPLIT_FRACTIONS = {"test": 0.1, "val": 0.1, "train": 0.8}


def find_classes(root: str | os.PathLike) -> tuple[list[str], dict[str, list[Path]]]:
    """The class folders of ``root`` and their image files: (sorted class names, {class: sorted paths})."""
    root = Path(root).expanduser()
    if not root.is_dir():
        raise DatasetError(f"image folder {root} does not exist (or is not a folder); pass the folder that holds "
                           "one sub-folder per class, e.g. --data-root my_images with my_images/cat/1.jpg")
    folders = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    if not folders:
        loose = [p.name for p in root.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES][:3]
        hint = f" (found loose images such as {loose}: move each into a folder named after its class)" if loose else ""
        raise DatasetError(f"{root} has no class folders{hint}; expected {root}/<class name>/<image files>, "
                           "one sub-folder per class")
    files = {f.name: sorted(p for p in f.rglob("*") if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES
                            and not p.name.startswith(".")) for f in folders}
    empty = [name for name, paths in files.items() if not paths]
    if empty:
        raise DatasetError(f"class folder(s) {empty} in {root} hold no images (looked for files ending in "
                           f"{', '.join(IMAGE_SUFFIXES)}); add images or remove the folder(s)")
    if len(folders) < 2:
        raise DatasetError(f"{root} has one class folder ({folders[0].name}); a classifier needs at least two")
    return [f.name for f in folders], files


def read_image(path: Path, img_size: int) -> np.ndarray:
    """One image file -> (3, img_size, img_size) uint8: RGB, shorter side resized, centre cropped."""
    from PIL import Image  # Pillow: only needed for your own images

    with Image.open(path) as image:
        image = image.convert("RGB")
        width, height = image.size
        scale = img_size / min(width, height)
        new_w, new_h = max(img_size, round(width * scale)), max(img_size, round(height * scale))
        image = image.resize((new_w, new_h), Image.Resampling.BICUBIC, reducing_gap=3.0)
        left, top = (new_w - img_size) // 2, (new_h - img_size) // 2
        image = image.crop((left, top, left + img_size, top + img_size))
        return np.asarray(image, dtype=np.uint8).transpose(2, 0, 1)  # (H, W, 3) -> (3, H, W)


def read_images(paths: list[Path], labels: list[int], img_size: int, on_error: str = "fail") -> Split:
    """Read and resize ``paths`` -> (images (N, 3, S, S) uint8, labels (N,) int64), failing or skipping bad files."""
    from PIL import UnidentifiedImageError

    if on_error not in ("fail", "skip"):
        raise ValueError(f"on_error must be 'fail' or 'skip', got {on_error!r}")
    images, kept, skipped = [], [], []
    for path, label in zip(paths, labels):
        try:
            images.append(read_image(path, img_size))
        except (UnidentifiedImageError, OSError, ValueError) as err:
            if on_error == "fail":
                raise DatasetError(f"cannot read the image {path} ({type(err).__name__}: {err}). Delete or "
                                   "re-save it, or load with on_error='skip' to leave unreadable files out") from err
            skipped.append(str(path))
            continue
        kept.append(label)
    if skipped:
        warnings.warn(f"skipped {len(skipped)} unreadable image(s): {', '.join(skipped)}", stacklevel=2)
    if not images:
        raise DatasetError(f"none of the {len(paths)} image files could be read")
    return torch.from_numpy(np.stack(images)), torch.tensor(kept, dtype=torch.int64)


def load_image_folder(
    root: str | os.PathLike, img_size: int, seed: int = 0, on_error: str = "fail",
) -> tuple[dict[str, Split], list[str]]:
    """A class-per-folder tree of images as {"train", "val", "test"} -> (uint8 images, labels), plus class names.

    Uses ``root/train`` and ``root/val`` (and ``root/test``) when both of the first two exist; otherwise
    splits ``root`` 80 / 10 / 10 %, stratified and seeded with ``seed``. Images: (N, 3, img_size, img_size).
    """
    root = Path(root).expanduser()
    if (root / "train").is_dir() and (root / "val").is_dir():
        classes, train_files = find_classes(root / "train")
        parts = {"train": train_files}
        for name in ("val", "test"):
            if (root / name).is_dir():
                found, files = find_classes(root / name)
                unknown = sorted(set(found) - set(classes))
                if unknown:
                    raise DatasetError(f"{root / name} has class folder(s) {unknown} that {root / 'train'} lacks; "
                                       "every class needs training images")
                parts[name] = files
        if "test" not in parts:
            warnings.warn(f"{root} has no test/ folder: the val images also serve as the test split", stacklevel=2)
        splits = {}
        for name, files in parts.items():
            paths = [p for c in files for p in files[c]]
            splits[name] = read_images(paths, [classes.index(c) for c in files for _ in files[c]], img_size, on_error)
        splits.setdefault("test", splits["val"])
        return splits, classes
    classes, files = find_classes(root)
    paths = [p for c in classes for p in files[c]]
    labels = np.array([i for i, c in enumerate(classes) for _ in files[c]])
    part = stratified_split(labels, SPLIT_FRACTIONS, seed)
    empty = [name for name in part if len(part[name]) == 0]
    if empty:
        raise DatasetError(f"{root} holds {len(paths)} images, too few for a {SPLIT_FRACTIONS} split: {empty} "
                           "would be empty. Add images (about 10 or more per class), or give your own train/ and "
                           "val/ folders")
    splits = {name: read_images([paths[i] for i in part[name]], labels[part[name]].tolist(), img_size, on_error)
              for name in ("train", "val", "test")}
    return splits, classes


def channel_stats(images: torch.Tensor) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """Per-channel mean and std of uint8 images (N, C, H, W) after scaling to [0, 1] (for normalising)."""
    x = images.double() / 255
    mean, std = x.mean(dim=(0, 2, 3)), x.std(dim=(0, 2, 3)).clamp_min(1e-3)
    return tuple(round(v, 4) for v in mean.tolist()), tuple(round(v, 4) for v in std.tolist())


__all__ = ["IMAGE_SUFFIXES", "SPLIT_FRACTIONS", "channel_stats", "find_classes", "load_image_folder", "read_image",
           "read_images"]
