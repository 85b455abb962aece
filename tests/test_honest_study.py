"""benchmarks/honest_arms.py and honest_study.py, chapter 9's study on the honest task (issue 25): one variable per
ablation, the same budget and size for every arm, choices on validation only, the waves the planner schedules, and
a stopped job that resumes. Tiny runs: 512 training canvases an epoch, 1-2 epochs."""

import json
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from tools_loader import load_benchmark

from vitedu import cluttered as C
from vitedu import train as T
from vitedu.cnn import ConvTeacher

ROOT = Path(__file__).resolve().parents[1]
A = load_benchmark("honest_arms")
S = load_benchmark("honest_study")


def _flat(config):
    out = {k: v for k, v in asdict(config).items() if k != "model_kwargs"}
    return out | {f"model_kwargs.{k}": v for k, v in config.model_kwargs.items()}


def _diff(a, b):
    fa, fb = _flat(a), _flat(b)
    return {k for k in fa.keys() | fb.keys() if fa.get(k) != fb.get(k)}


# Each single-variable comparison the chapter may draw, and the one field it changes.
ONE_THING = [
    ("convit_content_gates", "convit", {"model_kwargs.content_only"}),
    ("convit_no_local_init", "convit", {"model_kwargs.locality_init"}),
    ("cait_no_class_attention", "cait", {"model_kwargs.class_attention"}),
    ("cait_no_layerscale", "cait", {"model_kwargs.layer_scale"}),
    ("cait_no_talking_heads", "cait", {"model_kwargs.talking_heads"}),
    ("deit_hard_cls", "deit", {"model"}),  # the [DIST] token
    ("deit_soft_cls", "deit_hard_cls", {"distill_temperature"}),  # soft against hard
    ("deit_none", "deit_hard_cls", {"teacher_epochs"}),  # distillation at all
]


@pytest.mark.parametrize("arm, parent, changed", ONE_THING)
def test_every_ablation_changes_one_thing_of_its_parent(arm, parent, changed):
    assert _diff(A.config(arm, 0.1, 4e-3, 1), A.config(parent, 0.1, 4e-3, 1)) == changed


def test_every_arm_and_ablation_is_listed_in_a_one_variable_comparison():
    assert {a for a, *_ in ONE_THING} == set(A.ABLATIONS)


def test_the_main_arms_share_the_budget_and_differ_in_model_and_distillation_only():
    vit = A.config("vit", 0.25, 4e-3, 2)
    for arm in A.ARMS:
        assert _diff(A.config(arm, 0.25, 4e-3, 2), vit) <= {"model", "teacher_epochs", "distill_temperature"}
    assert vit.batch_size == 256 and vit.epochs == A.EPOCHS and vit.position_step == 1
    assert vit.grid_epochs == A.GRID_EPOCHS and vit.augment == "digits_warp"


def test_parameter_counts_are_within_ten_percent():
    counts = A.parameter_counts()
    assert set(counts) == set(A.ARMS) | set(A.ABLATIONS)
    assert max(counts.values()) <= 1.1 * min(counts.values()), counts


def test_job_names_round_trip_and_a_bad_name_says_what_a_job_is():
    assert A.parse_job(A.job_name("cait_no_layerscale", 0.05, 8e-3)) == ("cait_no_layerscale", 0.05, 8e-3)
    assert A.job_epochs("convit_f1_lr0.004") == A.EPOCHS and A.job_epochs("nonsense") is None
    with pytest.raises(ValueError, match="ARM_fFRACTION_lrLR.*'resnet_f1_lr0.004'"):
        A.parse_job("resnet_f1_lr0.004")


def _record(arm, f, lr, seed, val_acc, val_loss=0.5, **extra):
    return {"job": A.job_name(arm, f, lr), "arm": arm, "fraction": f, "lr": lr, "seed": seed, "val_acc": val_acc,
            "val_loss": val_loss, **extra}


def _tuned(arm, f, best, test_favours=None):
    """Seed-0 tuning records of (arm, f) where ``best`` has the best val; test numbers that favour another lr."""
    return [_record(arm, f, lr, 0, 0.9 if lr == best else 0.8, test_acc=1.0 if lr == test_favours else 0.1)
            for lr in A.LRS]


def test_the_learning_rate_is_chosen_on_validation_only():
    records = _tuned("convit", 0.1, 2e-3, test_favours=8e-3)
    assert S.chosen_lrs(records) == {("convit", 0.1): 2e-3}
    no_test = [{k: v for k, v in r.items() if k != "test_acc"} for r in records]
    assert S.chosen_lrs(no_test) == {("convit", 0.1): 2e-3}  # it never needed a test number
    tie = [dict(r, val_acc=0.9, val_loss=0.2 if r["lr"] == 8e-3 else 0.5) for r in records]
    assert S.chosen_lrs(tie) == {("convit", 0.1): 8e-3}  # ties go to the lower val loss
    assert S.chosen_lrs(records[:2]) == {}  # not every lr tried yet: no choice


def test_the_planner_tunes_first_then_seeds_then_ablations():
    assert S.total_runs() == 5 * 4 * (3 + 2) + 8 * 2 * 3 == 148
    todo, waiting = S.plan([])
    assert len(todo) == 60 and waiting == 88 and all(seed == 0 for _, seed in todo)
    assert todo[0] == (A.job_name("vit", 1.0, 2e-3), 0)  # all the data first
    records = _tuned("cait", 1.0, 8e-3)
    todo, waiting = S.plan(records)
    # the other 57 tuning runs, cait's seeds 1 and 2, and cait's three ablations x three seeds
    assert len(todo) == 57 + 2 + 3 * 3 and waiting == 148 - 3 - len(todo)
    assert (A.job_name("cait", 1.0, 8e-3), 1) in todo and (A.job_name("cait", 1.0, 8e-3), 2) in todo
    assert (A.job_name("cait", 1.0, 8e-3), 0) not in todo  # its seed 0 is the tuning run, done
    assert (A.job_name("cait_no_layerscale", 1.0, 8e-3), 0) in todo  # at the parent's choice
    assert not any(name.startswith("cait_no") and "_f0.1_" in name for name, _ in todo)  # cait not tuned at 0.1
    stopped = (A.job_name("cait_no_talking_heads", 1.0, 8e-3), 2)
    assert S.plan(records, {stopped})[0][0] == stopped  # a stopped job resumes first
    assert len(S.plan(records, {stopped})[0]) == len(todo)


def test_the_planner_is_done_when_every_final_run_is_in():
    records = [r for arm in A.ARMS for f in A.FRACTIONS for r in _tuned(arm, f, 4e-3)]
    chosen = S.chosen_lrs(records)
    records += [_record(*A.parse_job(n), s, 0.9) for n, s in S.final_jobs(chosen) if s > 0 or n.count("_") > 2]
    assert S.plan(records) == ([], 0)


@pytest.fixture
def tiny(monkeypatch):
    monkeypatch.setitem(C.CLUTTERED_SIZES, "train", 512)  # canvases an epoch
    monkeypatch.setitem(C.CLUTTERED_SIZES, "val", 256)  # and scored after it
    monkeypatch.setitem(C.CLUTTERED_SIZES, "test", 256)
    torch.set_num_threads(1)


@pytest.mark.slow  # a few seconds: three short CNN runs
def test_a_stopped_cnn_run_resumes_where_it_stopped(tmp_path, tiny, monkeypatch):
    monkeypatch.setitem(C.CLUTTERED_SIZES, "train", 128)  # bit-exact resume does not need more (the CNN is slow)
    monkeypatch.setitem(C.CLUTTERED_SIZES, "val", 64)
    c = A.config("cnn", 0.1, 4e-3, 0)
    c = type(c)(**{**asdict(c), "epochs": 2, "grid_epochs": 1})
    run = dict(device="cpu", progress=False, precision="fp32", build=A.build)  # fit trains a model off the registry
    whole = T.fit(c, out=tmp_path / "whole", log=lambda line: None, **run).model
    T.fit(c, out=tmp_path / "split", stop_after=1, log=lambda line: None, **run)
    lines = []
    result = T.fit(c, out=tmp_path / "split", resume=True, log=lines.append, **run)
    resumed, history = result.model, result.history
    assert lines[0].startswith("resuming") and len(history.val_acc) == 2
    assert isinstance(resumed, ConvTeacher) and not hasattr(resumed, "pretrained_cfg")
    for name, tensor in whole.state_dict().items():
        assert torch.equal(tensor, resumed.state_dict()[name]), name


@pytest.mark.slow  # about 10 s
def test_a_job_resumes_its_checkpoint_and_writes_val_numbers_and_weights(tmp_path, tiny):
    name = A.job_name("convit", 0.1, 4e-3)
    c = A.config("convit", 0.1, 4e-3, 1)
    c = type(c)(**{**asdict(c), "epochs": 2, "grid_epochs": 1, "warmup_epochs": 0.1})
    T.fit(c, out=tmp_path / f"{name}_seed1", stop_after=1, device="cpu", progress=False, log=lambda line: None)
    record = A.run_job(name, 1, "cpu", str(tmp_path), epochs=2)
    assert "resuming" in (tmp_path / f"{name}_seed1.log").read_text()
    assert record["epochs"] == 2 and len(record["val_curve"]) == 2 and 0 <= record["val_acc"] <= 1
    assert record["resumed"] and record["train_seconds"] > 0
    assert not any("test" in k for k in record)  # validation numbers only
    weights = load_file(str(tmp_path / f"{name}_seed1.safetensors"))
    assert set(weights) == set(A.build(c).state_dict())


def test_gpu_sweep_takes_the_study_as_its_runner_and_refuses_a_bad_job(tmp_path):
    run = subprocess.run([sys.executable, str(ROOT / "tools" / "gpu_sweep.py"), "--runner",
                          str(ROOT / "benchmarks" / "honest_study.py"), "--jobs", "resnet_f1_lr0.004:0",
                          "--deadline", "1", "--device", "cpu", "--save-dir", str(tmp_path / "runs"),
                          "--pack-dir", str(tmp_path / "out")], capture_output=True, text=True,
                         env={"PYTHONPATH": str(ROOT), "PATH": ""})
    assert run.returncode != 0 and "VARIANT:SEED" in run.stderr and "honest_study.py" in run.stderr
    assert not (tmp_path / "runs").exists()


def test_collect_merges_a_wave_once(tmp_path, monkeypatch):
    import tarfile

    monkeypatch.setattr(S, "RUNS", tmp_path / "runs.jsonl")
    monkeypatch.setattr(S, "WORK", tmp_path / "work")
    monkeypatch.setattr(S, "SAVE", tmp_path / "work" / "save")
    wave = tmp_path / "wave"
    wave.mkdir()
    row = _record("vit", 1.0, 4e-3, 0, 0.5)
    (wave / "sweep.jsonl").write_text(json.dumps(row) + "\n")
    (wave / "vit_f1_lr0.004_seed0.safetensors").write_bytes(b"weights")
    with tarfile.open(wave / "results.tgz", "w:gz") as tar:
        for path in wave.iterdir():
            tar.add(path, arcname=path.name)
    S.collect(wave)
    S.collect(wave)  # a second time adds nothing
    assert S.read_runs(tmp_path / "runs.jsonl") == [row]
    assert (tmp_path / "work" / "weights" / "vit_f1_lr0.004_seed0.safetensors").exists()


def test_analyse_reads_test_once_for_the_final_runs_only(tmp_path, monkeypatch):
    H = load_benchmark("honest_analysis")
    monkeypatch.setattr(H, "SUMMARY", tmp_path / "summary.json")
    scored = []
    monkeypatch.setattr(H, "load", lambda name, seed, device: None if name.startswith("deit") else (name, seed))
    monkeypatch.setattr(H, "score", lambda model, device: scored.append(model) or
                        {"test_acc": 0.5, "offset_worst": 0.4, "offset_mean": 0.45, "offsets": []})
    records = _tuned("convit", 1.0, 2e-3) + _tuned("deit", 1.0, 4e-3)
    records += [_record("convit", 1.0, 2e-3, s, 0.9, train_seconds=60.0) for s in (1, 2)]
    summary = H.analyse(records)
    assert sorted(scored) == [(A.job_name("convit", 1.0, 2e-3), s) for s in A.SEEDS]  # not the other lrs
    row = summary["final"]["convit"]["1.0"]
    assert row["lr"] == 2e-3 and row["test_acc"] == {"mean": 0.5, "std": 0.0, "n": 3}
    assert "deit_f1_lr0.004:1" in summary["missing"]  # not run yet, and said so
    assert "convit_no_local_init_f1_lr0.002:0" in summary["missing"]  # ablations at the parent's choice
    assert json.loads((tmp_path / "summary.json").read_text())["chosen_lr"] == {"convit@1.0": 2e-3, "deit@1.0": 4e-3}
