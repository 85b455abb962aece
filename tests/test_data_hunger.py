"""benchmarks/data_hunger.py, chapter 7's controlled comparison: the learning rate is chosen on validation at
every data fraction for the ViT, the CNN and the distilled ViT, the finals use the rate of
their own fraction, --search-only reads no test number, the distilled arm's teachers are scored with the same
draws as inside its runs, and the stored file is what the code computes from its runs. Runs are faked here
(``run_all`` replaced) except one tiny teacher."""

from __future__ import annotations

import json
import sys
from dataclasses import asdict, replace
from pathlib import Path

import pytest
import torch
from tools_loader import load_benchmark

H = load_benchmark("data_hunger")
ROOT = Path(__file__).resolve().parents[1]


def _fake_run_all(best: dict, teacher_scores: bool = False):
    """A run_all that 'trains' instantly: validation prefers the rate ``best[(arm, fraction)]``. With
    ``teacher_scores`` a distilled run carries its teacher's scores, as ``train`` records them."""

    def run_all(jobs, done, workers, job_star, save):
        for arm, config in jobs:
            k = H.key(arm, config)
            if k in done:
                continue
            good = best.get((arm, config.train_fraction)) == config.lr
            done[k] = {"arm": arm, "key": k, "fraction": config.train_fraction, "seed": config.seed,
                       "lr": config.lr, "tau": config.distill_temperature, "alpha": config.distill_alpha,
                       "config": asdict(config), "seconds": 1.0, "val_acc": 0.95 if good else 0.9, "val_loss": 0.1,
                       "test_acc": 0.9 + 0.01 * config.seed, **({"best": {}} if arm == "svm" else {}),
                       **({"teacher_val_acc": 0.9, "teacher_test_acc": 0.9} if teacher_scores and arm == "distill"
                          else {})}
            save()

    return run_all


# the distilled ViT prefers another rate than the ViT at 100 %: it must get its own, not borrow the ViT's
BEST = {("vit", 1.0): 1e-3, ("cnn", 1.0): 4e-3, ("distill", 1.0): 2e-3,
        ("vit", 0.1): 4e-3, ("cnn", 0.1): 2e-3, ("distill", 0.1): 2e-3}


def _main(monkeypatch, tmp_path, *extra, teacher_scores=False):
    out = tmp_path / "dh.json"
    monkeypatch.setattr(H, "run_all", _fake_run_all(BEST, teacher_scores))
    monkeypatch.setattr(sys, "argv", ["data_hunger.py", "--out", str(out), *extra])
    H.main()
    return json.loads(out.read_text())


def test_the_rate_is_chosen_per_fraction_and_the_finals_use_it(monkeypatch, tmp_path):
    stored = _main(monkeypatch, tmp_path)
    summary = stored["summary"]
    assert summary["lr_by_fraction"] == {"1.0": {"vit": 1e-3, "cnn": 4e-3, "distill": 2e-3},
                                         "0.1": {"vit": 4e-3, "cnn": 2e-3, "distill": 2e-3}}
    # the search beyond the 100 % tuning: at 10 % every rate for the three networks, at 100 % every rate for
    # the distilled ViT; seed 0, validation numbers only
    assert sorted((r["arm"], r["fraction"], r["lr"]) for r in summary["search"]) == sorted(
        [(arm, 0.1, lr) for arm in ("vit", "cnn", "distill") for lr in H.LRS]
        + [("distill", 1.0, lr) for lr in H.LRS])
    assert all("test_acc" not in r for r in summary["search"] + summary["tuning"])
    runs = stored["runs"]
    for arm in ("vit", "cnn", "distill", "teacher"):
        for fraction in (1.0, 0.1):
            lr = summary["lr_by_fraction"][str(fraction)]["distill" if arm == "teacher" else arm]
            finals = [r for r in runs if r["arm"] == arm and r["fraction"] == fraction and r["lr"] == lr]
            assert sorted(r["seed"] for r in finals) == [0, 1, 2], (arm, fraction)
            assert summary["test"][arm][str(fraction)]["test_acc"] == [r["test_acc"] for r in
                                                                       sorted(finals, key=lambda r: r["seed"])]
    # no run at a rate that was not chosen, beyond seed 0 (the search)
    assert all(r["seed"] == 0 for r in runs if r["arm"] != "svm"
               and r["lr"] != summary["lr_by_fraction"][str(r["fraction"])].get(r["arm"], r["lr"]))


def test_every_final_distilled_run_gets_its_teacher_scored_alone(monkeypatch, tmp_path):
    """Distilled runs that carry their teacher's scores (as ``train`` records them) still get the teacher
    arm the table reads, at the chosen rate of every fraction."""
    stored = _main(monkeypatch, tmp_path, teacher_scores=True)
    lrs = stored["summary"]["lr_by_fraction"]
    for fraction in (1.0, 0.1):
        teachers = [r for r in stored["runs"] if r["arm"] == "teacher" and r["fraction"] == fraction]
        assert sorted(r["seed"] for r in teachers if r["lr"] == lrs[str(fraction)]["distill"]) == [0, 1, 2]


def test_search_only_stops_before_any_final_and_reads_no_test(monkeypatch, tmp_path):
    stored = _main(monkeypatch, tmp_path, "--search-only")
    assert "test" not in stored["summary"] and "lr_by_fraction" in stored["summary"]
    assert {r["seed"] for r in stored["runs"]} == {0}
    # the networks' search, and the teachers of its distilled runs (scored alone: these fakes lack the score)
    assert {r["arm"] for r in stored["runs"]} == {"vit", "cnn", "distill", "teacher"}


def test_no_network_borrows_a_rate():
    assert all(H.searched(arm, f) for arm in ("vit", "cnn", "distill") for f in (1.0, 0.1))
    assert not H.searched("svm", 1.0)  # C and gamma by cross-validation instead


def test_every_network_run_has_the_same_budget_at_every_fraction():
    for arm in ("vit", "cnn", "distill"):
        for fraction in (1.0, 0.1):
            _, config = H.recipe(arm, 2e-3, fraction, 1)
            steps = config.epochs * -(-len(H.subset(fraction, 1)) // config.batch_size)
            assert abs(steps - H.STEPS) <= 0.01 * H.STEPS, (arm, fraction, steps)
            assert config.lr == 2e-3 and config.seed == 1 and config.train_fraction == fraction
            assert (config.teacher_epochs > 0) == (arm == "distill")


def test_the_teacher_arm_is_the_distilled_runs_teacher(monkeypatch):
    """A tiny distilled run and its "teacher" run train the very same teacher (the ViT is built first in both)."""
    torch.set_num_threads(1)
    seen = []
    train_teacher = H.T.train_teacher

    def spy(*args, **kwargs):
        teacher = train_teacher(*args, **kwargs)
        seen.append([p.detach().clone() for p in teacher.parameters()])
        return teacher

    monkeypatch.setattr(H.T, "train_teacher", spy)
    _, config = H.recipe("distill", 2e-3, 0.1, 0)
    config = replace(config, epochs=1, warmup_epochs=0.5, teacher_epochs=2)
    alone, inside = H.train("teacher", config), H.train("distill", config)
    assert len(seen) == 2 and all(torch.equal(a, b) for a, b in zip(*seen))
    assert alone["val_acc"] == inside["teacher_val_acc"] and alone["test_acc"] == inside["teacher_test_acc"]


@pytest.mark.parametrize("fraction", ["1.0", "0.1"])
def test_the_stored_summary_is_what_the_code_computes_from_the_stored_runs(fraction):
    stored = json.loads((ROOT / "benchmarks" / "results" / "data_hunger.json").read_text())
    runs = H.rekeyed({r["key"]: r for r in stored["runs"]})
    assert len(runs) == len(stored["runs"])
    summary = stored["summary"]
    lrs = summary["lr_by_fraction"][fraction]
    f = float(fraction)
    for arm in ("vit", "cnn", "distill"):
        if not H.searched(arm, f):
            continue
        candidates = [runs[H.key(*H.recipe(arm, lr, f, 0))] for lr in H.LRS]
        assert lrs[arm] == H.pick(candidates)["lr"], (arm, fraction)
    if "test" in summary:
        for arm in ("vit", "cnn", "distill"):
            accs = [runs[H.key(*H.recipe(arm, lrs[arm], f, seed))]["test_acc"] for seed in stored["seeds"]]
            assert summary["test"][arm][fraction]["test_acc"] == accs
