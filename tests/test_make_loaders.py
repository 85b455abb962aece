"""vitedu.data.make_loaders (as vitedu.train uses it): the train, val and test loaders of a training run for each
data set, the train subset and train_on_val, the device, and each process's share under torchrun."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
from train_recipes import TINY

from vitedu import train as T
from vitedu.config import PRESETS
from vitedu.constants import CIFAR10_MEAN, CIFAR10_STD, CLUTTERED_MEAN, CLUTTERED_STD
from vitedu.data import make_loaders
from vitedu.digits import DIGITS_MAX, load_digits

pytestmark = pytest.mark.usefixtures("one_thread")


def test_train_fraction_keeps_a_stratified_subset():
    loaders = make_loaders(replace(TINY, train_fraction=0.2), torch.device("cpu"))
    labels = loaders["train"].labels
    assert abs(len(labels) - 0.2 * 1259) <= 10 and torch.bincount(labels).min() >= 24
    with pytest.raises(ValueError, match="train_fraction"):
        make_loaders(replace(TINY, train_fraction=0.0), torch.device("cpu"))


def _rows(images: torch.Tensor, labels: torch.Tensor) -> list[bytes]:
    """Each example as bytes (pixels + label), so splits can be compared as multisets."""
    return sorted(x.numpy().tobytes() + bytes([int(y)]) for x, y in zip(images, labels))


@pytest.mark.parametrize("dataset", ["digits", "cluttered_digits"])
def test_train_on_val_adds_the_val_split_and_never_test(dataset):
    """train_on_val fits on train + val (the recipe is already chosen); test stays untouched for the final number."""

    splits = load_digits()
    config = replace(TINY, dataset=dataset, augment="none", train_on_val=True)
    loaders = make_loaders(config, torch.device("cpu"))
    train = loaders["train"]
    # TensorLoader keeps the uint8 images; ClutteredLoader keeps the digits it draws canvases from, scaled to [0, 1].
    images = train.images if dataset == "digits" else (train.digits * DIGITS_MAX).round().to(torch.uint8)
    (train_x, train_y), (val_x, val_y) = splits["train"], splits["val"]
    expected = _rows(torch.cat([train_x, val_x]), torch.cat([train_y, val_y]))
    assert _rows(images, train.labels) == expected  # every train and val example once, no test example


def test_loaders_hold_this_process_share_of_every_batch(monkeypatch):
    """Under torchrun (here: as if process 1 of 2) each loader yields its half of every batch, and the two halves
    of an epoch are disjoint; cluttered digits too (their canvases drawn alike in every process)."""
    from vitedu import distributed as DDP

    config = replace(TINY, augment="none")
    alone = make_loaders(config, torch.device("cpu"))
    shares = {}
    for rank in (0, 1):
        monkeypatch.setattr(T.distributed, "current", lambda rank=rank: DDP.Process(rank=rank, world_size=2))
        shares[rank] = make_loaders(config, torch.device("cpu"))
    for split in ("train", "val", "test"):
        whole = [len(labels) for _, labels in alone[split]]
        halves = [[len(labels) for _, labels in shares[rank][split]] for rank in (0, 1)]
        assert [a + b for a, b in zip(*halves)] == whole and max(halves[1]) < max(whole)
    together = torch.cat([next(iter(shares[rank]["train"]))[1] for rank in (0, 1)])
    assert torch.equal(together.sort().values, next(iter(alone["train"]))[1].sort().values)  # the batch, shared
    cluttered = make_loaders(replace(TINY, dataset="cluttered_digits", augment="none"), torch.device("cpu"))
    assert (cluttered["train"].rank, cluttered["train"].world_size) == (1, 2)
    assert (cluttered["val"].rank, cluttered["val"].world_size) == (1, 2)
    first = next(iter(cluttered["train"]))[1]
    assert len(first) == TINY.batch_size // 2


def test_loaders_put_batches_on_the_device_they_are_given():
    """The "meta" device stands in for a GPU: batches that stayed on the CPU would show."""
    meta = torch.device("meta")
    for dataset in ("digits", "cluttered_digits"):
        loaders = make_loaders(replace(TINY, dataset=dataset, augment="none"), meta)
        for split in ("train", "val", "test"):
            images, labels = next(iter(loaders[split]))
            assert images.device == meta and labels.device == meta, (dataset, split)


def test_cifar10_loaders_scale_bytes_and_normalise_with_the_cifar_statistics(monkeypatch, tmp_path):
    """CIFAR-10 comes from load_cifar10(data_root) as uint8; batches are x / 255 normalised per channel."""
    from vitedu import data as D

    roots = []
    generator = torch.Generator().manual_seed(0)

    def fake_cifar10(root):
        roots.append(root)
        split = lambda n: (torch.randint(0, 256, (n, 3, 32, 32), dtype=torch.uint8, generator=generator),  # noqa: E731
                           torch.arange(n) % 10)
        return {"train": split(40), "val": split(20), "test": split(20)}

    monkeypatch.setattr(D, "load_cifar10", fake_cifar10)
    config = replace(PRESETS["cifar10"], data_root=str(tmp_path), augment="none")
    loaders = make_loaders(config, torch.device("cpu"))
    assert roots == [str(tmp_path)]
    images, labels = next(iter(loaders["val"]))
    raw = loaders["val"].images
    mean, std = torch.tensor(CIFAR10_MEAN)[:, None, None], torch.tensor(CIFAR10_STD)[:, None, None]
    torch.testing.assert_close(images, (raw.float() / 255 - mean) / std)
    assert torch.equal(labels, loaders["val"].labels)


def test_cluttered_val_and_test_are_the_fixed_canvases_in_batches_of_500():
    from vitedu import cluttered as C

    loaders = make_loaders(replace(TINY, dataset="cluttered_digits", augment="none"), torch.device("cpu"))
    for split in ("val", "test"):
        canvases, labels = C.load_cluttered_digits(split)[:2]  # floats in [0, 1]
        batches = list(loaders[split])
        assert [len(y) for _, y in batches] == [500] * (len(labels) // 500)
        torch.testing.assert_close(batches[0][0], (canvases[:500] - CLUTTERED_MEAN[0]) / CLUTTERED_STD[0])
        assert torch.equal(torch.cat([y for _, y in batches]), labels)
