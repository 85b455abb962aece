"""Device choice, seeding, and the stored results the chapters read."""

from pathlib import Path

import torch

import vitedu


def test_get_device_prefers_accelerators_and_can_be_forced(monkeypatch):
    monkeypatch.delenv("VITEDU_DEVICE", raising=False)
    expected = "cuda" if torch.cuda.is_available() else "mps" if torch.backends.mps.is_available() else "cpu"
    assert vitedu.get_device().type == expected
    assert vitedu.get_device("cpu") == torch.device("cpu")
    monkeypatch.setenv("VITEDU_DEVICE", "cpu")
    assert vitedu.get_device() == torch.device("cpu")


def test_seed_everything_makes_runs_repeatable():
    def draw():
        vitedu.seed_everything(123)
        import random

        import numpy as np

        return random.random(), np.random.rand(), torch.rand(3)  # noqa: NPY002

    first, second = draw(), draw()
    assert first[:2] == second[:2] and torch.equal(first[2], second[2])
    vitedu.seed_everything(124)
    assert not torch.equal(torch.rand(3), first[2])


def test_stored_result_reads_the_clone_and_downloads_once_elsewhere(tmp_path, monkeypatch):
    from vitedu import utils

    assert utils.stored_result("speedrun/summary.json").is_file()  # this clone's benchmarks/results
    fetched = []

    def fake_urlretrieve(url, local):
        fetched.append(url)
        Path(local).write_text("{}")

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(utils.urllib.request, "urlretrieve", fake_urlretrieve)
    name = "nowhere/in_this_clone.json"
    assert utils.stored_result(name) == Path("nowhere_in_this_clone.json")
    assert utils.stored_result(name).read_text() == "{}"  # read from the working folder the second time
    assert fetched == [utils.RESULTS_URL + name]
