"""Chapter 9's study on the honest task, sized to this 2-core CPU: the arms, the ablations, the budget, one job.

The task is chapter 8's: one digit at any pixel of a 32x32 canvas of clutter (``position_step=1``). Every run,
whatever its arm, has the same budget (``BASE``): ``EPOCHS`` epochs of 10,000 fresh canvases in batches of 256
(``EPOCHS * 40`` AdamW steps), the first ``GRID_EPOCHS`` with the digit on the patch grid as a curriculum, each
digit warped about its centre, chapter 8's warm-up, cosine, weight decay, label smoothing, clipping and
stochastic depth 0.1. That is ``PRESETS["cluttered_digits"]`` shortened from 300 to ``EPOCHS`` epochs (the grid
share kept at a fifth) so that the study fits about 15 thread-hours of this CPU (benchmarks/README.md has the plan
and its price), with changes that are the same for every arm: no teacher unless the arm is about distillation,
and timm's initialisation with learned positions (the shipped ViT's mimetic start and sin-cos positions are left
out: DeiT, CaiT and ConViT do not take them, so the ViT arm is *not* the shipped model). A run with
``train_fraction`` f draws its canvases from the same stratified f of the training digits for every arm: fewer
distinct digits, not fewer canvases or steps.

Arms (``ARMS``; 139-141k parameters each, ``parameter_counts``): ViT, DeiT ([DIST] token, hard distillation),
CaiT, ConViT and a CNN (``ConvTeacher`` of width 40 with a strided stem: the same parameters as at stride 1, as
fast per canvas as the transformers on a CPU; trained alone with the same loop and recipe). DeiT's teacher is the
CNN arm itself: the CNN run of the same fraction and seed at the CNN's chosen learning rate (the paper distils a
convnet trained beforehand on the same data), so a distilled run waits for its teacher (``needs_teacher``).
Ablations (``ABLATIONS``) each change ONE thing of their parent and train at the learning rate chosen for the
parent arm at that fraction.

A job is (arm, fraction, lr) plus a seed, named ``job_name`` (e.g. ``convit_f0.1_lr0.004``): it checkpoints every
epoch into its save dir and resumes, logs one line an epoch, and writes one JSON line of validation numbers and
its weights. No test number is computed here: ``honest_analysis.py`` reads test once, for the final runs only.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import asdict, replace
from pathlib import Path

import torch
from safetensors.torch import save_file

from vitedu import cluttered as C
from vitedu import train as T
from vitedu.cnn import ConvTeacher, save_conv_teacher
from vitedu.config import PRESETS, TrainConfig
from vitedu.data import make_loaders
from vitedu.models import create_model

EPOCHS, GRID_EPOCHS = 30, 6
BASE = replace(PRESETS["cluttered_digits"], epochs=EPOCHS, grid_epochs=GRID_EPOCHS, teacher_epochs=0, seed=0,
               model_kwargs={"drop_path_rate": 0.1})
TEACHER = "cnn"  # the arm whose runs teach the distilled arms
HARD = dict(distill_temperature=0.0, distill_alpha=0.5, teacher=TEACHER)  # DeiT's hard distillation
CNN_WIDTH, CNN_STRIDE = 40, 2  # 139,930 parameters, like the transformers' 139-141k
ARMS: dict[str, dict] = {  # arm -> what differs from BASE
    "vit": dict(model="vit_cluttered_digits"),
    "deit": dict(model="deit_cluttered_digits", **HARD),  # [DIST] learns the teacher, [CLS] the labels
    "cait": dict(model="cait_cluttered_digits"),
    "convit": dict(model="convit_cluttered_digits"),
    "cnn": dict(model="cnn"),  # not a registry name: ConvTeacher(width=CNN_WIDTH, stride=CNN_STRIDE), see build
}
# ablation -> (parent arm, the one change, what it tests). DeiT's own ablation (Touvron et al., 2021, table 8) has
# two more rows: soft distillation on [CLS], and no teacher at all. Without a teacher a DeiT run is the vit arm at
# deit's learning rate (``SAME_AS``), so it is not trained twice; soft distillation is cut to fit the CPU.
# CaiT's ablations (class attention, LayerScale, talking heads) are cut too: its ideas are about deep stacks,
# which chapter 9's 24-block LayerScale experiment shows, not about this 4-block model.
ABLATIONS: dict[str, tuple[str, dict, str]] = {
    "convit_content_gates": ("convit", {"model_kwargs": {"content_only": True}}, "GPSA gates frozen to content"),
    "convit_no_local_init": ("convit", {"model_kwargs": {"locality_init": False}}, "no locality initialisation"),
    "deit_hard_cls": ("deit", {"model": "vit_cluttered_digits"}, "no [DIST] token: hard distillation on [CLS]"),
    "deit_none": ("deit", {"model": "vit_cluttered_digits", "teacher": None}, "no [DIST] token, no teacher"),
}
# The longer budget: can the ViT catch up once it has fitted? The same two models (timm's start, learned
# positions) trained with the CPU speedrun's recipe (``PRESETS["speedrun"]``: 50 epochs, 15 on the grid, Muon at
# 1.6e-2, no stochastic depth or label smoothing), which was chosen on validation for the ViT (benchmarks/README.md,
# "The CPU speedrun"): if ConViT still leads on a recipe tuned for its rival, its lead is a prior, not a head start.
LONGER = replace(PRESETS["speedrun"], model_kwargs={"drop_path_rate": 0.0}, seed=0)
FITTED = {"vit_fitted": "vit", "convit_fitted": "convit"}  # arm -> the main arm whose model it trains longer
FITTED_FRACTION, FITTED_LR = 0.1, LONGER.lr
SAME_AS = {"deit_none": "vit"}  # an ablation whose runs are another arm's at the parent's learning rate
LRS = (2e-3, 4e-3, 8e-3, 1.6e-2)  # per arm and fraction, on validation; 4e-3 is the shipped recipe's; 1.6e-2
# was added when the CNN and the ViT both chose 8e-3, the top of the first grid, at 10 % (benchmarks/README.md)
FRACTIONS = (0.1, 0.5)  # of the 1,259 training digits: 126 and 630 digits
ABLATION_FRACTIONS = FRACTIONS
SEEDS = (0, 1, 2)
_NAME = re.compile(r"^(?P<arm>[a-z_]+)_f(?P<fraction>[0-9.]+)_lr(?P<lr>[0-9.e-]+)$")


def arm_overrides(arm: str) -> dict:
    """What ``arm`` (a main arm or an ablation) changes in BASE; an ablation's change goes on top of its parent's."""
    if arm in ARMS:
        return dict(ARMS[arm])
    if arm in FITTED:
        return dict(ARMS[FITTED[arm]])
    if arm in ABLATIONS:
        parent, change, _ = ABLATIONS[arm]
        merged = {**ARMS[parent], **change}
        merged["model_kwargs"] = {**ARMS[parent].get("model_kwargs", {}), **change.get("model_kwargs", {})}
        return merged
    raise ValueError(f"unknown arm {arm!r}: the arms are {sorted(ARMS)}, the ablations {sorted(ABLATIONS)} and the "
                     f"longer-budget arms {sorted(FITTED)}")


def needs_teacher(arm: str) -> bool:
    """Whether ``arm``'s runs distil the CNN arm's run of the same fraction and seed."""
    return arm_overrides(arm).get("teacher") == TEACHER


def config(arm: str, fraction: float, lr: float, seed: int = 0, teacher_path: str = "") -> TrainConfig:
    """The TrainConfig of one run: BASE (LONGER for a longer-budget arm) with the arm's changes, at this
    fraction, learning rate and seed; ``teacher_path``: the CNN run it distils (an arm that ``needs_teacher``),
    else ignored."""
    base = LONGER if arm in FITTED else BASE
    changes = arm_overrides(arm)
    model_kwargs = {**base.model_kwargs, **changes.pop("model_kwargs", {})}
    distils = changes.pop("teacher", None) == TEACHER
    return replace(base, **changes, model_kwargs=model_kwargs, train_fraction=fraction, lr=lr, seed=seed,
                   teacher_path=teacher_path if distils else "")


def job_name(arm: str, fraction: float, lr: float) -> str:
    return f"{arm}_f{fraction:g}_lr{lr:g}"


def parse_job(name: str) -> tuple[str, float, float]:
    """``job_name``'s inverse: 'convit_f0.1_lr0.004' -> ('convit', 0.1, 0.004); a clear error otherwise."""
    match = _NAME.match(name)
    if match is None or match["arm"] not in {*ARMS, *ABLATIONS, *FITTED}:
        arms = sorted(ARMS) + sorted(ABLATIONS) + sorted(FITTED)
        raise ValueError(f"a job is ARM_fFRACTION_lrLR with ARM one of {arms}, "
                         f"e.g. {job_name('convit', 0.1, 4e-3)}; got {name!r}")
    return match["arm"], float(match["fraction"]), float(match["lr"])


def job_epochs(name: str) -> int | None:
    """Epochs a job logs (benchmarks/gpu_sweep.py's progress); None for a name that is not a job."""
    try:
        arm, fraction, lr = parse_job(name)
    except ValueError:
        return None
    return config(arm, fraction, lr).epochs


def build(config: TrainConfig) -> torch.nn.Module:
    if config.model == "cnn":
        return ConvTeacher(1, 10, width=CNN_WIDTH, stride=CNN_STRIDE)
    return create_model(config.model, **config.model_kwargs)


def parameter_counts() -> dict[str, int]:
    """Parameters of every arm and ablation, as trained (a check that they are within 10 % of each other)."""
    return {arm: sum(p.numel() for p in build(config(arm, 1.0, 4e-3)).parameters())
            for arm in [*ARMS, *ABLATIONS]}


def run_job(name: str, seed: int, device: str, save_dir: str, epochs: int | None = None,
            teacher_path: str = "") -> dict:
    """Train one job (resuming from ``save_dir/NAME_seedS`` if it was stopped); write its weights and log there.
    A distilled arm needs ``teacher_path``, the CNN run it learns from.

    -> the JSON record: validation numbers only (the last epoch's, and the curve), parameters, seconds, device."""
    arm, fraction, lr = parse_job(name)
    if needs_teacher(arm) and not teacher_path:
        raise ValueError(f"{name} distils the CNN arm's run of fraction {fraction:g}, seed {seed}: pass its weights "
                         "file as teacher_path (honest_study.py finds it once that run is done)")
    c = config(arm, fraction, lr, seed, teacher_path)
    if epochs is not None:  # a quick check (tests, a pilot): fewer epochs, the curriculum scaled with them
        c = replace(c, epochs=epochs, grid_epochs=round(c.grid_epochs * epochs / c.epochs),
                    warmup_epochs=c.warmup_epochs * epochs / c.epochs)
    Path(save_dir).mkdir(parents=True, exist_ok=True)
    stem = f"{save_dir}/{name}_seed{seed}"
    log_file = open(f"{stem}.log", "a")
    start = time.perf_counter()

    def log(line: str) -> None:
        print(line, file=log_file, flush=True)

    # fit also scores the test canvases; that number is dropped here, unread
    result = T.fit(c, out=stem, resume=True, device=device, progress=False, log=log, precision="fp32", build=build)
    model, history, teacher = result.model, result.history, result.teacher
    seconds = time.perf_counter() - start
    resumed = "resuming" in Path(f"{stem}.log").read_text()  # then "seconds" is this process's share only
    record = {"job": name, "arm": arm, "fraction": fraction, "lr": lr, "seed": seed, "epochs": c.epochs,
              "val_acc": history.val_acc[-1], "val_loss": history.val_loss[-1],
              "val_curve": [round(a, 4) for a in history.val_acc],
              "parameters": sum(p.numel() for p in model.parameters()), "seconds": round(seconds, 1),
              "resumed": resumed,
              # a distilled arm's teacher is the CNN arm's run: its cost is that run's seconds
              "teacher": Path(c.teacher_path).stem if c.teacher_path else None,
              # training time alone, summed over every epoch even across a resume (not teacher, not validation)
              "train_seconds": round(sum(C.CLUTTERED_SIZES["train"] / speed for speed in history.images_per_s), 1),
              "device": str(device), "config": asdict(c)}
    if teacher is not None:
        loaders = make_loaders(c, torch.device(device))
        record["teacher_val_acc"] = T.evaluate(teacher, loaders["val"])[1]
    # float16 (as variants_seed0.safetensors): half the size; a CNN's file can teach a distilled run
    if isinstance(model, ConvTeacher):
        save_conv_teacher(f"{stem}.safetensors", model, half=True)
    else:
        weights = {k: (v.half() if v.is_floating_point() else v).detach().cpu().contiguous()
                   for k, v in model.state_dict().items()}
        save_file(weights, f"{stem}.safetensors",
                  metadata={"job": name, "seed": str(seed), "config": json.dumps(asdict(c))})
    return record
