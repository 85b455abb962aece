"""benchmarks/pretrain_pays.py, chapter 10's comparison: the two arms differ in their starting weights only, the
MAE arm starts from exactly the shipped encoder, choices are made on validation, the planner's order, and a
gpu_sweep save dir is merged once with the unchosen weights pruned. One tiny run (512 canvases an epoch)."""

import json
from dataclasses import asdict

import pytest
import torch
from tools_loader import load_benchmark

from vitedu import cluttered as C
from vitedu.shipped import load_shipped_weights

P = load_benchmark("pretrain_pays")


def test_job_names_round_trip_and_a_bad_name_says_what_a_job_is():
    assert P.parse_job(P.job_name("mae", 0.01, 20, 1e-3)) == ("mae", 0.01, 20, 1e-3)
    assert P.job_epochs("sup_f0.1_e220_lr0.004") == 220 and P.job_epochs("vit_f0.1_lr0.004") is None
    with pytest.raises(ValueError, match="ARM_fFRACTION_eEPOCHS_lrLR.*'cnn_f1_e20_lr0.004'"):
        P.parse_job("cnn_f1_e20_lr0.004")


def test_one_recipe_for_both_arms_the_books_start_and_the_budgets_curriculum():
    sup, mae = P.config("sup", 0.1, 100, 4e-3, 2), P.config("mae", 0.1, 100, 4e-3, 2)
    assert asdict(sup) == asdict(mae)  # the arms differ in their starting weights only (``build_for``)
    assert sup.model_kwargs["weight_init"] == "mimetic" and sup.model_kwargs["pos_embed"] == "learn_sincos"
    assert sup.teacher_epochs == 0 and sup.grid_epochs == 20 and sup.warmup_epochs == 5
    assert P.config("sup", 1.0, 20, 1e-3).grid_epochs == 4 and P.config("sup", 1.0, 20, 1e-3).warmup_epochs == 2
    assert (sup.train_fraction, sup.seed, sup.batch_size, sup.augment) == (0.1, 2, 256, "digits_warp")


def test_the_mae_arm_starts_from_the_shipped_encoder_and_the_head_is_drawn_alike():
    c = P.config("mae", 0.1, 20, 4e-3)
    torch.manual_seed(0)
    mae = P.build_for("mae")(c)
    torch.manual_seed(0)
    sup = P.build_for("sup")(c)
    encoder = load_shipped_weights(P.ENCODER)
    state = mae.state_dict()
    assert set(state) - set(encoder) == {"head.weight", "head.bias"}
    assert all(torch.equal(state[k], v) for k, v in encoder.items())
    assert torch.equal(mae.head.weight, sup.head.weight)
    assert not torch.equal(mae.blocks[0].attn.qkv.weight, sup.blocks[0].attn.qkv.weight)


def _record(arm, f, e, lr, seed, val_acc, val_loss=0.5, **extra):
    return {"job": P.job_name(arm, f, e, lr), "arm": arm, "fraction": f, "budget": e, "lr": lr, "seed": seed,
            "val_acc": val_acc, "val_loss": val_loss, **extra}


def _tuned(arm, f, e, best):
    return [_record(arm, f, e, lr, 0, 0.9 if lr == best else 0.8, test_acc=1.0 if lr != best else 0.1)
            for lr in P.LRS]


def test_the_rate_is_chosen_on_validation_only_per_arm_fraction_and_budget():
    records = _tuned("mae", 0.1, 20, 1e-3) + _tuned("mae", 0.1, 100, 4e-3) + _tuned("sup", 1.0, 20, 4e-3)[:1]
    assert P.chosen_lrs(records) == {("mae", 0.1, 20): 1e-3, ("mae", 0.1, 100): 4e-3}


def test_the_planner_runs_the_long_and_deciding_jobs_first_then_seeds_of_each_choice():
    todo = P.plan([])
    matched = [(P.job_name("sup", 0.1, 220, lr), 0) for lr in P.LRS]
    assert todo[:2] == matched  # the longest job, at every rate until its rate is chosen
    assert todo[2:4] == [(P.job_name("sup", 1.0, 100, lr), 0) for lr in P.LRS]  # does 100 % beat 10 %?
    assert len(todo) == 2 + len(P.ARMS) * len(P.FRACTIONS) * len(P.BUDGETS) * len(P.LRS)
    assert all(seed == 0 for _, seed in todo)
    budgets = [P.parse_job(n)[2] for n, _ in todo[2:]]
    assert budgets == sorted(budgets, reverse=True)
    records = _tuned("sup", 0.1, 20, 1e-3) + _tuned("mae", 1.0, 100, 4e-3)
    todo = P.plan(records)
    # the matched arm takes its parent's rate, three seeds
    assert {(P.job_name("sup", 0.1, 220, 1e-3), s) for s in P.SEEDS} <= set(todo)
    assert not any(P.job_name("sup", 0.1, 220, 4e-3) == n for n, _ in todo)
    assert {(P.job_name("mae", 1.0, 100, 4e-3), s) for s in (1, 2)} <= set(todo)
    assert not {(r["job"], r["seed"]) for r in records} & set(todo)


def test_collect_merges_a_save_dir_once_and_prunes_the_weights_not_chosen(tmp_path, monkeypatch):
    monkeypatch.setattr(P, "RUNS", tmp_path / "results" / "runs.jsonl")
    monkeypatch.setattr(P, "WEIGHTS", tmp_path / "results" / "weights")
    P.RUNS.parent.mkdir()
    save = tmp_path / "save"
    save.mkdir()
    rows = _tuned("sup", 1.0, 20, 4e-3) + [_record("mae", 1.0, 20, 1e-3, 0, 0.7)]
    with open(save / "sweep.jsonl", "w") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")
            (save / f"{row['job']}_seed0.safetensors").write_bytes(b"w")
    P.collect(save)
    P.collect(save)  # a second time adds nothing
    assert [r["job"] for r in P.read_runs()] == [r["job"] for r in rows]
    assert sorted(p.name for p in P.WEIGHTS.iterdir()) == [  # sup's tuning is complete: 1e-3 was not chosen
        "mae_f1_e20_lr0.001_seed0.safetensors", "sup_f1_e20_lr0.004_seed0.safetensors"]


@pytest.mark.slow  # two one-epoch runs of 512 canvases
def test_a_job_writes_val_numbers_and_weights_and_resumes(tmp_path, monkeypatch):
    monkeypatch.setitem(C.CLUTTERED_SIZES, "train", 512)
    monkeypatch.setitem(C.CLUTTERED_SIZES, "val", 256)
    monkeypatch.setitem(C.CLUTTERED_SIZES, "test", 256)
    torch.set_num_threads(1)
    record = P.run_job("mae_f0.1_e20_lr0.004", 0, "cpu", str(tmp_path), epochs=1)
    assert record["epochs"] == 1 and len(record["val_curve"]) == 1 and "test_acc" not in record
    assert (tmp_path / "mae_f0.1_e20_lr0.004_seed0.safetensors").exists()
    assert (tmp_path / "mae_f0.1_e20_lr0.004_seed0.log").read_text().startswith("epoch")
    again = P.run_job("mae_f0.1_e20_lr0.004", 0, "cpu", str(tmp_path), epochs=1)  # resumes: nothing left
    assert again["val_acc"] == record["val_acc"] and again["resumed"]


def _complete_study():
    """Seed 0 at every rate of every (arm, fraction, budget) and of the compute-matched arm, then seeds 1 and 2
    of every choice: the rate 4e-3 wins at 100 epochs, 1e-3 at 20 (and so for the matched arm)."""
    records = []
    for arm, f, e in P.tuning_keys():
        best = 4e-3 if e == 100 else 1e-3
        records += [_record(arm, f, e, lr, 0, 0.9 if lr == best else 0.8, train_seconds=60.0) for lr in P.LRS]
        records += [_record(arm, f, e, best, s, 0.85, train_seconds=60.0) for s in (1, 2)]
    arm, f, _, e = P.MATCHED
    records += [_record(arm, f, e, lr, 0, 0.95 - lr, train_seconds=600.0) for lr in P.LRS]
    records += [_record(arm, f, e, 1e-3, s, 0.93, train_seconds=600.0) for s in (1, 2)]
    return records


@pytest.fixture
def summary_file(tmp_path, monkeypatch):
    monkeypatch.setattr(P, "SUMMARY", tmp_path / "pretrain_pays.json")
    return P.SUMMARY


def test_before_the_study_is_complete_the_summary_reads_no_test_and_lists_what_is_missing(summary_file,
                                                                                           monkeypatch):
    def no_test(*args, **kwargs):
        raise AssertionError("test read before every choice and seed is in")
    monkeypatch.setattr(P, "test_accuracy", no_test)
    monkeypatch.setattr(P, "load", no_test)
    study = _complete_study()
    records = [r for r in study if r["job"] != P.job_name("mae", 0.01, 20, 4e-3)]  # one tuning run out
    records = [r for r in records if (r["job"], r["seed"]) != (P.job_name("sup", 1.0, 100, 4e-3), 2)]  # one seed
    monkeypatch.setattr(P, "read_runs", lambda: records)
    P.summary()
    s = json.loads(summary_file.read_text())
    assert s["test"] is None and "not read" in s["test_note"] and s["test_scores"] is None and not s["complete"]
    assert all(row["test_acc"] is None and row["test"] is None for row in s["final"])
    assert s["missing"]["tuning"] == [P.job_name("mae", 0.01, 20, 4e-3) + ":0"]
    assert s["missing"]["choices"] == ["mae@0.01@20"]
    assert s["missing"]["seeds"] == [P.job_name("sup", 1.0, 100, 4e-3) + ":2"]
    assert s["missing"]["runs_left"] == 1 + 2 + 1  # the tuning run, its choice's two seeds, the seed
    # every choice that is in, with the val numbers of each of its seeds; the matched arm at its parent's rate
    assert len(s["final"]) == len(P.tuning_keys()) - 1 + 1
    row = next(r for r in s["final"] if r["job"] == P.job_name("sup", 1.0, 100, 4e-3))
    assert row["val_acc"] == {"0": 0.9, "1": 0.85} and row["val"]["n"] == 2 and row["lr"] == 4e-3
    matched = next(r for r in s["final"] if r["matched"])
    assert (matched["budget"], matched["lr"], matched["val"]["n"]) == (P.MATCHED[3], 1e-3, 3)
    assert len(s["tuning"]) == 2 * len(P.tuning_keys()) - 1 + 2 and all(r["val_acc"] for r in s["tuning"])
    assert "test_acc" not in json.dumps(s["tuning"])  # the fake records carry a test number: it is not copied
    stored = json.loads(P.BASELINES.read_text())["baselines"][P.BAG]
    assert (s["bag_of_patches"]["val_acc"], s["bag_of_patches"]["test_acc"]) == (
        stored["val_accuracy"], stored["test_accuracy"])


def test_when_the_study_is_complete_test_is_read_once_per_final_run(summary_file, monkeypatch):
    study = _complete_study()
    monkeypatch.setattr(P, "read_runs", lambda: study)
    read = []
    monkeypatch.setattr(P, "load", lambda name, seed, device="cpu": (name, seed))
    monkeypatch.setattr(P, "test_accuracy", lambda model, device="cpu": read.append(model) or 0.5 + model[1] / 10)
    P.summary()
    P.summary()  # a second summary reuses the stored numbers: test is not read again
    finals = P.final_jobs(P.chosen_lrs(study))
    assert len(finals) == len(P.tuning_keys()) * 3 + 3
    assert sorted(read) == sorted(finals)  # each final run once, and nothing else (no unchosen tuning run)
    s = json.loads(summary_file.read_text())
    assert s["complete"] and s["test"] and s["test_note"] is None and s["missing"]["runs_left"] == 0
    assert all(row["test_acc"] == {"0": 0.5, "1": 0.6, "2": 0.7} for row in s["final"])
    assert all(row["test"]["n"] == 3 and row["test"]["mean"] == pytest.approx(0.6) for row in s["final"])


def test_a_stored_run_loads_back_exactly(tmp_path, monkeypatch):
    monkeypatch.setattr(P, "WEIGHTS", tmp_path)
    name = P.job_name("mae", 0.1, 20, 4e-3)
    model = P.build_for("sup")(P.config("mae", 0.1, 20, 4e-3, 1))
    P.save_file({k: v.half().contiguous() for k, v in model.state_dict().items()},
                str(tmp_path / f"{name}_seed1.safetensors"))
    loaded = P.load(name, 1)
    assert not loaded.training
    assert all(torch.equal(v, model.state_dict()[k].half().float()) for k, v in loaded.state_dict().items())


def test_the_shipped_summary_is_the_summary_of_the_stored_runs(monkeypatch):
    """Chapter 10 prints the asset: it must say what the stored runs say (run ``summary`` after ``collect``).
    A complete study's test numbers come from the asset itself (read once), never read again here."""
    def no_test(*args, **kwargs):
        raise AssertionError("test read again")
    monkeypatch.setattr(P, "test_accuracy", no_test)
    shipped = json.loads(P.SUMMARY.read_text())
    assert json.loads(json.dumps(P.summarise(P.read_runs()))) == shipped
    assert shipped["complete"] or (shipped["test"] is None and shipped["test_scores"] is None)
