"""benchmarks/honest_arms.py, honest_study.py and honest_analysis.py, chapter 9's study on the honest task: one
variable per ablation, the same budget and size for every arm, choices on validation only, the order the planner
schedules (the CNN teacher before the runs that distil it), a stopped job that resumes, and test read once.
Tiny runs: 512 training canvases an epoch, 1-2 epochs."""

import json
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file
from tools_loader import load_benchmark

from vitedu import cluttered as C
from vitedu import train as T
from vitedu.cnn import ConvTeacher, save_conv_teacher
from vitedu.config import PRESETS

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
    ("deit_hard_cls", "deit", {"model"}),  # the [DIST] token
    ("deit_none", "deit_hard_cls", {"teacher_path"}),  # distillation at all
]
TEACHER = "benchmarks/results/honest_study/weights/cnn_f0.1_lr0.004_seed1.safetensors"


@pytest.mark.parametrize("arm, parent, changed", ONE_THING)
def test_every_ablation_changes_one_thing_of_its_parent(arm, parent, changed):
    assert _diff(A.config(arm, 0.1, 4e-3, 1, TEACHER), A.config(parent, 0.1, 4e-3, 1, TEACHER)) == changed


def test_every_arm_and_ablation_is_listed_in_a_one_variable_comparison():
    assert {a for a, *_ in ONE_THING} == set(A.ABLATIONS)


def test_deit_without_a_teacher_is_the_vit_arm_so_it_is_not_trained_twice():
    # they differ only in distillation settings that nothing reads without a teacher
    assert _diff(A.config("deit_none", 0.1, 4e-3, 1, TEACHER), A.config("vit", 0.1, 4e-3, 1)) == {
        "distill_temperature"}
    assert A.SAME_AS == {"deit_none": "vit"}
    assert S.role_job("deit_none", 0.1, {("deit", 0.1): 8e-3}) == A.job_name("vit", 0.1, 8e-3)


def test_the_main_arms_share_the_budget_and_differ_in_model_and_distillation_only():
    vit = A.config("vit", 0.5, 4e-3, 2)
    for arm in A.ARMS:
        assert _diff(A.config(arm, 0.5, 4e-3, 2, TEACHER), vit) <= {"model", "teacher_path", "distill_temperature"}
    assert A.config("deit", 0.5, 4e-3, 2, TEACHER).teacher_path == TEACHER
    assert A.config("vit", 0.5, 4e-3, 2, TEACHER).teacher_path == ""  # only a distilled arm takes a teacher
    assert vit.batch_size == 256 and vit.epochs == A.EPOCHS and vit.position_step == 1
    assert vit.grid_epochs == A.GRID_EPOCHS == A.EPOCHS // 5 and vit.augment == "digits_warp"
    assert vit.teacher_epochs == 0 and vit.train_fraction == 0.5


def test_the_longer_budget_arms_change_the_recipe_only_and_the_same_for_both_models():
    for arm, parent in A.FITTED.items():
        fitted = A.config(arm, A.FITTED_FRACTION, A.FITTED_LR, 1)
        assert A.config(parent, A.FITTED_FRACTION, 4e-3, 1).model == fitted.model
        assert fitted.model_kwargs == {"drop_path_rate": 0.0}  # timm's start and learned positions, as the study's
        recipe_changes = {"model_kwargs.weight_init", "model_kwargs.pos_embed", "train_fraction", "seed"}
        recipe_changes |= {"model"} if parent != "vit" else set()
        assert _diff(fitted, PRESETS["speedrun"]) == recipe_changes
    vit, convit = (A.config(a, 0.1, A.FITTED_LR, 2) for a in A.FITTED)
    assert _diff(vit, convit) == {"model"} and A.FITTED_FRACTION == 0.1 and A.FITTED_LR == 1.6e-2
    assert S.role_job("convit_fitted", 0.5, {}) is None  # at 10 % of the digits only
    assert S.role_job("convit_fitted", 0.1, {}) == "convit_fitted_f0.1_lr0.016"


def test_parameter_counts_are_within_ten_percent():
    counts = A.parameter_counts()
    assert set(counts) == set(A.ARMS) | set(A.ABLATIONS)
    assert max(counts.values()) <= 1.1 * min(counts.values()), counts


def test_job_names_round_trip_and_a_bad_name_says_what_a_job_is():
    assert A.parse_job(A.job_name("convit_no_local_init", 0.05, 8e-3)) == ("convit_no_local_init", 0.05, 8e-3)
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


def test_the_planner_tunes_the_teacher_first_and_distilled_runs_wait_for_it():
    rates = len(A.LRS)
    assert A.FRACTIONS == (0.1, 0.5) and S.total_runs() == 2 * (5 * (rates + 2) + 4 * 3) + 2 * 3 == 90
    todo, waiting = S.plan([])
    # the longer-budget arms choose nothing: all their runs can start, after the tuning runs of their fraction
    fitted = [(A.job_name(arm, A.FITTED_FRACTION, A.FITTED_LR), s) for arm in A.FITTED for s in A.SEEDS]
    assert [j for j in todo if A.parse_job(j[0])[0] in A.FITTED] == fitted
    assert todo.index(fitted[0]) > todo.index((A.job_name("convit", 0.1, A.LRS[-1]), 0))
    todo = [j for j in todo if j not in fitted]
    # every arm's tuning runs but DeiT's, which waits for the CNN arm's chosen run; the teacher's at every fraction
    # first, then the smallest fraction first
    assert len(todo) == 2 * 4 * rates and all(seed == 0 for _, seed in todo)
    assert todo[:2 * rates] == [(A.job_name("cnn", f, lr), 0) for f in A.FRACTIONS for lr in A.LRS]
    assert not any(n.startswith("deit") for n, _ in todo)
    rest = [A.parse_job(n)[1] for n, _ in todo[2 * rates:]]
    assert rest == sorted(rest)
    assert waiting == 2 * rates + 2 * (5 * 2 + 4 * 3)  # deit's tuning, then every final seed not yet known
    records = _tuned("cnn", 0.1, 4e-3)
    todo, _ = S.plan(records)
    assert [j for j in todo if j[0].startswith("deit")] == [(A.job_name("deit", 0.1, lr), 0) for lr in A.LRS]
    assert todo.index((A.job_name("cnn", 0.1, 4e-3), 1)) < todo.index((A.job_name("vit", 0.1, 2e-3), 0))
    assert S.teacher_file(records, 0.1, 0) == S.WEIGHTS / "cnn_f0.1_lr0.004_seed0.safetensors"
    assert S.teacher_file(records, 0.1, 1) is None and S.teacher_file(records, 0.5, 0) is None
    records += _tuned("deit", 0.1, 2e-3)
    todo, _ = S.plan(records)
    assert (A.job_name("deit", 0.1, 2e-3), 1) not in todo  # its teacher, the CNN's seed 1, is not done
    assert (A.job_name("deit_hard_cls", 0.1, 2e-3), 0) in todo  # seed 0's teacher is
    assert (A.job_name("vit", 0.1, 2e-3), 0) in todo  # deit_none: the vit arm at deit's rate, once
    records.append(_record("cnn", 0.1, 4e-3, 1, 0.9))
    assert (A.job_name("deit", 0.1, 2e-3), 1) in S.plan(records)[0]
    stopped = (A.job_name("convit", 0.5, 8e-3), 0)
    assert S.plan(records, {stopped})[0][0] == stopped  # a stopped job resumes first


def test_a_distilled_run_whose_teacher_is_no_longer_the_cnn_arms_choice_runs_again():
    cnn = _tuned("cnn", 0.1, 4e-3)[:-1]  # the CNN's tuning without its last rate: no choice yet
    old = [dict(r, teacher="cnn_f0.1_lr0.004_seed0") for r in _tuned("deit", 0.1, 2e-3)]
    assert S.current(cnn + old) == cnn  # no chosen teacher: a distilled record is not current
    last = _record("cnn", 0.1, A.LRS[-1], 0, 0.8)
    assert S.current(cnn + old + [last]) == cnn + old + [last]  # the choice is the old teacher: they stand
    better = _record("cnn", 0.1, A.LRS[-1], 0, 0.95)  # the new rate wins: the teacher moved
    assert S.current(cnn + old + [better]) == cnn + [better]
    todo, _ = S.plan(S.current(cnn + old + [better]))
    assert (A.job_name("deit", 0.1, 2e-3), 0) in todo
    new = dict(old[0], val_acc=0.5, teacher=f"cnn_f0.1_lr{A.LRS[-1]:g}_seed0")
    assert S.current(cnn + old + [better, new]) == cnn + [better, new]  # the newer record is read


def test_the_planner_is_done_when_every_final_run_is_in(tmp_path, monkeypatch):
    monkeypatch.setattr(S, "WEIGHTS", tmp_path)
    records = [r for arm in A.ARMS for f in A.FRACTIONS for r in _tuned(arm, f, 4e-3)]
    chosen = S.chosen_lrs(records)
    done = {(r["job"], r["seed"]) for r in records}
    records += [_record(*A.parse_job(n), s, 0.9) for n, s in S.final_jobs(chosen) if (n, s) not in done]
    for n, s in S.final_jobs(chosen):
        (tmp_path / f"{n}_seed{s}.safetensors").write_bytes(b"w")
    assert S.plan(records) == ([], 0)
    # deit_none reuses the vit arm's runs at the same rate; the two longer-budget arms, three seeds each
    assert len(records) == 2 * (5 * (len(A.LRS) + 2) + 3 * 3) + 2 * 3


def test_prune_drops_the_weights_of_tuning_runs_that_were_not_chosen(tmp_path, monkeypatch):
    monkeypatch.setattr(S, "WEIGHTS", tmp_path)
    records = _tuned("convit", 0.1, 2e-3) + _tuned("vit", 0.1, 4e-3)[:2]  # vit's tuning is not complete
    for r in records:
        (tmp_path / f"{r['job']}_seed0.safetensors").write_bytes(b"w")
    removed = S.prune(records)
    assert sorted(p.name for p in removed) == sorted(f"convit_f0.1_lr{lr:g}_seed0.safetensors" for lr in A.LRS
                                                     if lr != 2e-3)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["convit_f0.1_lr0.002_seed0.safetensors", "vit_f0.1_lr0.002_seed0.safetensors",
         "vit_f0.1_lr0.004_seed0.safetensors"])


def test_a_distilled_job_without_its_teacher_is_refused_with_the_order():
    with pytest.raises(ValueError, match="distils the CNN arm's run of fraction 0.1, seed 2.*teacher_path"):
        A.run_job(A.job_name("deit", 0.1, 4e-3), 2, "cpu", "unused")


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
    c = type(c)(**{**asdict(c), "epochs": 2, "warmup_epochs": 1.0, "grid_epochs": 1})
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
    run = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu_sweep.py"), "--runner",
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
    monkeypatch.setattr(S, "WEIGHTS", tmp_path / "weights")
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
    assert (tmp_path / "weights" / "vit_f1_lr0.004_seed0.safetensors").exists()


def test_analyse_reads_test_once_for_the_final_runs_only(tmp_path, monkeypatch):
    H = load_benchmark("honest_analysis")
    monkeypatch.setattr(H, "SUMMARY", tmp_path / "summary.json")
    monkeypatch.setattr(H, "WEIGHTS", tmp_path / "weights")
    monkeypatch.setattr(H, "SEED0_FILE", tmp_path / "seed0.safetensors")
    scored, looked_inside = [], []
    monkeypatch.setattr(H, "load", lambda name, seed, device: None if name.startswith("deit") else (name, seed))
    monkeypatch.setattr(H, "score", lambda model, device: scored.append(model) or
                        {"test_acc": 0.5, "grid_acc": 0.52, "offset_worst": 0.4, "offset_mean": 0.45, "offsets": []})
    monkeypatch.setattr(H, "inside", lambda model, teacher, device: looked_inside.append(model) or {"cls_box": 3.0})
    fitted = []
    monkeypatch.setattr(H, "own_digits_accuracy", lambda model, f, seed, device: fitted.append(model) or 0.9)
    records = _tuned("convit", 0.5, 2e-3) + _tuned("deit", 0.5, 4e-3) + _tuned("vit", 0.5, 4e-3)
    records += [_record("convit", 0.5, 2e-3, s, 0.9, train_seconds=60.0) for s in (1, 2)]
    records = [dict(r, train_seconds=r.get("train_seconds", 50.0)) for r in records]
    summary = H.analyse(records)
    # not the other learning rates; the vit run at deit's rate is scored once, for vit and for deit_none
    assert sorted(scored) == sorted([(A.job_name("convit", 0.5, 2e-3), s) for s in A.SEEDS]
                                    + [(A.job_name("vit", 0.5, 4e-3), 0)])
    row = summary["final"]["convit"]["0.5"]
    assert row["lr"] == 2e-3 and row["test_acc"] == {"mean": 0.5, "std": 0.0, "n": 3}
    assert row["grid_acc"]["mean"] == 0.52 and row["train_seconds"]["mean"] == pytest.approx(170 / 3)
    assert summary["final"]["deit_none"]["0.5"]["seeds"] == summary["final"]["vit"]["0.5"]["seeds"]
    assert "deit_f0.5_lr0.004:1" in summary["missing"]  # not run yet, and said so
    assert "convit_no_local_init_f0.5_lr0.002:0" in summary["missing"]  # ablations at the parent's choice
    assert "cnn@0.1: its learning rate is not chosen yet" in summary["missing"]
    assert "vit_fitted_f0.1_lr0.016:2" in summary["missing"]  # the longer budget needs no choice, only its runs
    assert not any(m.startswith("vit_fitted_f0.5") for m in summary["missing"])
    assert summary["fitted"]["convit_fitted"] == {"parent": "convit", "recipe": "speedrun", "epochs": 50,
                                                   "optimizer": "muon"}
    assert json.loads((tmp_path / "summary.json").read_text())["chosen_lr"] == {
        "vit@0.5": 4e-3, "deit@0.5": 4e-3, "convit@0.5": 2e-3}
    assert sorted(looked_inside) == sorted(scored) and row["seeds"][0]["inside"] == {"cls_box": 3.0}
    # the fit to their own training digits: for the ViT and ConViT runs only
    assert sorted(fitted) == sorted([(A.job_name("convit", 0.5, 2e-3), s) for s in A.SEEDS]
                                    + [(A.job_name("vit", 0.5, 4e-3), 0)])
    assert row["own_digits_acc"]["mean"] == 0.9
    assert not (tmp_path / "seed0.safetensors").exists()  # not every arm's seed-0 model is there
    # a second analysis, after one more run finished, scores only that run: test is read once per run
    records.append(dict(_record("vit", 0.5, 4e-3, 1, 0.9), train_seconds=50.0))
    scored.clear()
    again = H.analyse(records)
    assert scored == [(A.job_name("vit", 0.5, 4e-3), 1)]
    assert again["final"]["convit"]["0.5"] == summary["final"]["convit"]["0.5"]


def test_the_seed0_models_go_to_one_file_keyed_by_arm_with_the_cnn_as_teacher(tmp_path, monkeypatch):
    H = load_benchmark("honest_analysis")
    monkeypatch.setattr(H, "WEIGHTS", tmp_path)
    monkeypatch.setattr(H, "SEED0_FILE", tmp_path / "seed0.safetensors")
    records = [r for arm in A.ARMS for r in _tuned(arm, H.SEED0_FRACTION, 4e-3)]
    chosen = S.chosen_lrs(records)
    for arm in A.ARMS:
        model = A.build(A.config(arm, H.SEED0_FRACTION, 4e-3))
        path = tmp_path / f"{A.job_name(arm, H.SEED0_FRACTION, 4e-3)}_seed0.safetensors"
        if isinstance(model, ConvTeacher):
            save_conv_teacher(path, model, half=True)
        else:
            save_file({k: v.half().contiguous() for k, v in model.state_dict().items()}, str(path))
        if arm == "convit":
            assert not H.write_seed0(chosen)  # cnn's weights are not there yet
    assert H.write_seed0(chosen)
    weights = load_file(str(tmp_path / "seed0.safetensors"))
    assert {k.split(".")[0] for k in weights} == {"vit", "deit", "cait", "convit", "teacher"}
    with safe_open(str(tmp_path / "seed0.safetensors"), framework="pt") as f:
        assert json.loads(f.metadata()["teacher_kwargs"]) == {"width": A.CNN_WIDTH, "stride": A.CNN_STRIDE}
    cnn = ConvTeacher(1, 10, width=A.CNN_WIDTH, stride=A.CNN_STRIDE)
    cnn.load_state_dict({k[len("teacher."):]: v.float() for k, v in weights.items() if k.startswith("teacher.")})


def test_inside_reads_attention_gates_and_the_two_heads_agreement():
    H = load_benchmark("honest_analysis")
    torch.manual_seed(0)
    teacher = A.build(A.config("cnn", 0.5, 4e-3))
    deit = H.inside(A.build(A.config("deit", 0.5, 4e-3)), teacher, "cpu")
    assert len(deit["attention_distance"]) == 4 and deit["cls_box"] > 0 and deit["dist_box"] > 0
    assert set(deit["agreement"]) >= {"cls~labels", "dist~teacher", "dist~cls"}
    convit = H.inside(A.build(A.config("convit", 0.5, 4e-3)), None, "cpu")
    assert len(convit["gates"]) == 2 and "agreement" not in convit


def test_a_stand_in_arm_keeps_its_weights_until_the_ablation_it_stands_for_has_chosen(tmp_path, monkeypatch):
    monkeypatch.setattr(S, "WEIGHTS", tmp_path)
    records = _tuned("vit", 0.1, 8e-3)  # deit_none stands on the vit arm at deit's rate, not chosen yet
    for r in records:
        (tmp_path / f"{r['job']}_seed0.safetensors").write_bytes(b"w")
    assert S.prune(records) == []
    records += _tuned("deit", 0.1, 4e-3)
    assert sorted(p.name for p in S.prune(records)) == sorted(
        f"vit_f0.1_lr{lr:g}_seed0.safetensors" for lr in A.LRS if lr not in (4e-3, 8e-3))


def test_a_final_run_whose_weights_are_gone_runs_again(tmp_path, monkeypatch):
    monkeypatch.setattr(S, "WEIGHTS", tmp_path)
    records = _tuned("cnn", 0.1, 8e-3) + _tuned("vit", 0.1, 8e-3) + _tuned("deit", 0.1, 4e-3)
    for r in records:
        if r["lr"] == 8e-3 or r["arm"] == "deit":
            (tmp_path / f"{r['job']}_seed0.safetensors").write_bytes(b"w")
    todo, _ = S.plan(records)
    assert (A.job_name("vit", 0.1, 4e-3), 0) in todo  # final (deit_none), its record in, its weights not
    assert (A.job_name("vit", 0.1, 2e-3), 0) not in todo  # not final: its record is enough
