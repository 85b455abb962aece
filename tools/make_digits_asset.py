"""Write vitedu/assets/digits.npz from scikit-learn's copy of the UCI digits (how the shipped asset was made, once).

    python tools/make_digits_asset.py vitedu/assets/digits.npz

vitedu itself never imports scikit-learn: the 45 kB file ships with the package (``vitedu.digits``).
"""

from __future__ import annotations

import os
import sys

import numpy as np


def make_digits_asset(path: str | os.PathLike) -> None:
    """The 1,797 8x8 digits as uint8 arrays: images (1797, 8, 8) in [0, 16], labels (1797,)."""
    from sklearn.datasets import load_digits as sklearn_load_digits  # optional: only this tool needs sklearn

    digits = sklearn_load_digits()
    np.savez_compressed(path, images=digits.images.astype(np.uint8), labels=digits.target.astype(np.uint8))


if __name__ == "__main__":
    make_digits_asset(sys.argv[1] if len(sys.argv) > 1 else "digits.npz")
