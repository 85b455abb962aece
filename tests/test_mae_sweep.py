"""benchmarks/mae_sweep.py, the MAE's recipe search on validation: every variant is a valid recipe, a job
probes its random start and every stage on val without ever loading a test canvas, and a stopped job resumes
without repeating a stage."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
import torch
from safetensors.torch import load_file
from tools_loader import load_benchmark
from train_recipes import MAE_TINY

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def sweep():
    return load_benchmark("mae_sweep")


def test_every_variant_is_the_base_recipe_with_named_fields_changed(sweep):
    base = sweep.variant_config("lr1.5e-3")
    assert (base.base_lr, base.mask_ratio, base.norm_pix_loss, base.epochs) == (1.5e-3, 0.75, True, 200)
    for name, fields in sweep.VARIANTS.items():
        config = sweep.variant_config(name, seed=3)
        assert config.seed == 3 and sweep.job_epochs(name) == config.epochs
        assert config == replace(base, **{k: v for k, v in fields.items()}, seed=3), name
        assert (config == replace(base, seed=3)) == (name == "lr1.5e-3"), name
        sweep.mae_pretrain.build_mae(config)  # builds
    assert sweep.variant_config("mask90").mask_ratio == 0.9 and sweep.job_epochs("not a variant") is None
    with pytest.raises(ValueError, match=r"unknown MAE variant 'mask95': choose one of \['dec4', "):
        sweep.variant_config("mask95")


def test_a_job_probes_its_start_and_each_stage_on_val_only_and_resumes(sweep, tmp_path, monkeypatch):
    loaded = []

    def canvases(split, num_images=None, seed=0, position_step=1):  # small labelled canvases, and who asked
        loaded.append(split)
        generator = torch.Generator().manual_seed(seed + len(split))
        n = num_images or 40
        return torch.rand(n, 1, 32, 32, generator=generator), torch.arange(n) % 10, None

    monkeypatch.setattr(sweep.probe, "load_cluttered_digits", canvases)
    monkeypatch.setitem(sweep.VARIANTS, "tiny", MAE_TINY)
    monkeypatch.setattr(sweep, "PROBE_EVERY", 1)
    monkeypatch.setattr(sweep, "N_LABELLED", 30)
    out = tmp_path / "rows.jsonl"
    sweep.main(["--variants", "tiny", "--seeds", "1", "--save-dir", str(tmp_path), "--out", str(out)])
    assert "test" not in loaded and {"train", "val"} <= set(loaded)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["epochs_done"] for r in rows] == [0, 1, 2]  # the random start, then every stage
    assert all(r["variant"] == "tiny" and r["seed"] == 1 and r["n_labelled"] == 30 for r in rows)
    assert all("test_acc" not in r and r["val_acc"] == max(r["val_grid"].values()) for r in rows)
    assert rows[-1]["steps"] == 4 and rows[-1]["config"]["seed"] == 1
    log = (tmp_path / "tiny_seed1.log").read_text().splitlines()
    assert [line.split()[1] for line in log if line.startswith("epoch")] == ["1/2", "2/2"]
    assert load_benchmark("gpu_sweep").epochs_logged(str(tmp_path), ("tiny", 1)) == 2  # what the GPU sweep counts
    encoder = load_file(tmp_path / "tiny_seed1.safetensors")  # the final encoder alone
    assert set(encoder) == set(sweep.mae_pretrain.build_mae(sweep.variant_config("tiny")).encoder.state_dict())

    # a job started again after it ended repeats nothing
    sweep.main(["--variants", "tiny", "--seeds", "1", "--save-dir", str(tmp_path), "--out", str(out)])
    assert len(out.read_text().splitlines()) == 3

    # a job stopped after its first stage goes on from there: no second random-start probe, no stage twice
    sweep.mae_pretrain.pretrain(sweep.variant_config("tiny", seed=2), tmp_path / "tiny_seed2", stop_after=1,
                       log=lambda _: None)
    sweep.main(["--variants", "tiny", "--seeds", "2", "--save-dir", str(tmp_path), "--out", str(out)])
    resumed = [json.loads(line) for line in out.read_text().splitlines()[3:]]
    assert [r["epochs_done"] for r in resumed] == [2] and resumed[0]["seed"] == 2
