"""benchmarks/mae_transfer.py: fine-tuning an MAE encoder against its own random start with one recipe,
and probes of where its tokens carry the digit; validation only."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from tools_loader import load_benchmark
from train_recipes import MAE_TINY

import vitedu
from vitedu import cluttered as C
from vitedu.constants import CLUTTERED_MEAN, CLUTTERED_STD
from vitedu.shipped import shipped_metadata

ROOT = Path(__file__).resolve().parent.parent
TINY = {**MAE_TINY, "epochs": 1}

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def transfer():
    return load_benchmark("mae_transfer")


@pytest.fixture(scope="module")
def encoder_file(transfer, tmp_path_factory):
    """A tiny pre-trained encoder, saved as tools/pretrain_mae.py saves one (seed 3: not the default)."""
    mae = transfer.mae_pretrain
    config = mae.MAEConfig(**TINY, seed=3)
    model, history, _ = mae.pretrain(config, log=lambda _: None, val_images=torch.zeros(4, 1, 32, 32))
    path = tmp_path_factory.mktemp("mae") / "encoder.safetensors"
    mae.save_encoder(path, model, config, history)
    return path


def test_both_arms_are_the_same_architecture_from_the_encoder_and_from_its_random_start(transfer, encoder_file):
    state, kwargs, config = transfer.read_encoder(encoder_file)
    start = transfer.random_start(config)
    assert config["seed"] == 3 and kwargs["embed_dim"] == 16 and set(start) == set(state)
    again = transfer.mae_pretrain.build_mae(transfer.mae_pretrain.MAEConfig(**TINY, seed=3)).encoder.state_dict()
    assert all(torch.equal(start[k], again[k]) for k in start)  # the MAE's own seed-3 start
    assert not torch.equal(start["blocks.0.attn.qkv.weight"], state["blocks.0.attn.qkv.weight"])  # it trained
    heads = []
    for weights in (state, start):
        model = transfer.classifier(weights, kwargs, seed=5)
        assert model.head.out_features == 10
        loaded = model.state_dict()
        assert all(torch.equal(loaded[k], weights[k]) for k in weights)
        heads.append(model.head.weight)
    assert torch.equal(*heads)  # the head is drawn from the seed alone: the arms differ in the encoder only
    with pytest.raises(ValueError, match=r"^the encoder does not fit vit_cluttered_digits.*missing \['blocks"):
        transfer.classifier({k: v for k, v in state.items() if k != "blocks.0.norm1.weight"}, kwargs, seed=0)


def test_box_mask_marks_every_patch_the_digit_s_box_touches(transfer):
    boxes = torch.tensor([[5, 0, 8, 3], [0, 28, 4, 4], [13, 13, 1, 1]])  # (top, left, height, width)
    mask = transfer.box_mask(boxes).view(3, 8, 8)
    expected = torch.zeros(3, 8, 8)
    expected[0, 1:4, 0] = 1  # rows 5..12 -> patches 1..3; columns 0..2 -> patch 0
    expected[1, 0, 7] = 1
    expected[2, 3, 3] = 1
    assert torch.equal(mask, expected)


def test_finetune_trains_both_arms_with_one_recipe_and_never_reports_test(transfer, encoder_file, tmp_path,
                                                                         monkeypatch, capsys):
    monkeypatch.setitem(C.CLUTTERED_SIZES, "train", 64)  # a tiny epoch, the same code
    monkeypatch.setitem(C.CLUTTERED_SIZES, "val", 50)
    configs = []
    fit = transfer.T.fit
    monkeypatch.setattr(transfer.T, "fit", lambda config, **kw: configs.append(config) or fit(config, **kw))
    out = tmp_path / "rows.jsonl"
    transfer.main(["finetune", "--encoder", str(encoder_file), "--fraction", "0.5", "--epochs", "2",
                   "--lrs", "1e-3", "--seeds", "4", "--out", str(out)])
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["arm"] for r in rows] == ["mae", "random"]
    assert capsys.readouterr().out.splitlines() == out.read_text().splitlines()
    assert configs[0] == configs[1] and configs[0].train_fraction == 0.5 and configs[0].lr == 1e-3
    assert (configs[0].teacher_epochs, configs[0].grid_epochs, configs[0].seed) == (0, 0, 4)
    for row in rows:
        assert len(row["val_curve"]) == 2 and row["val_acc"] == row["val_curve"][-1]
        assert row["mae_epochs"] == 1 and not any("test" in key for key in row)


def test_where_probes_the_box_the_rest_and_all_for_both_arms(transfer, encoder_file, monkeypatch, capsys):
    monkeypatch.setitem(C.CLUTTERED_SIZES, "val", 60)
    transfer.main(["where", "--encoder", str(encoder_file), "--n-labelled", "40"])
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["arm"] for r in rows] == ["mae", "random"] and rows[0]["n_labelled"] == 40
    for row in rows:
        accs = [row[f"val_acc {name}"] for name in ("box", "not box", "all")]
        assert all(0 <= a <= 1 and abs(a * 60 - round(a * 60)) < 0.01 for a in accs)  # of 60 canvases


def test_benchmarks_readme_reports_the_stored_mae_runs():
    """benchmarks/README.md's MAE tables are what results/mae_sweep.jsonl and mae_transfer.jsonl hold."""
    import statistics

    readme = (ROOT / "benchmarks" / "README.md").read_text()
    sweep = [json.loads(line) for line in (ROOT / "benchmarks" / "results" / "mae_sweep.jsonl").open()]
    probe = {(r["variant"], r["epochs_done"]): r["val_acc"] for r in sweep}
    assert f"| random start | | {100 * probe['lr1.5e-3', 0]:.2f} % |" in readme
    final = {r["variant"]: r for r in sweep if r["epochs_done"] == 200}
    minutes = {v: round(final[v]["seconds"] / 60) for v in final}  # pre-training time, probes left out
    assert "36 minutes for\nmasking ratio 0.75, 48 for 0.5, 24 for 0.9" in readme
    assert "57 for 0.25\nand 73 for 0.75 with a four-block decoder" in readme
    assert minutes == {"lr1.5e-3": 36, "mask50": 48, "mask90": 24, "mask25": 57, "dec4": 73}
    for variant, ratio in (("mask50", "0.5"), ("mask90", "0.9"), ("mask25", "0.25")):
        row = " / ".join(f"{100 * probe[variant, e]:.2f}" for e in (50, 100, 150, 200))
        assert f"| {ratio} | {final[variant]['val_recon_loss']} | {row} % |" in readme
    assert f"– / – / {100 * probe['lr1.5e-3', 150]:.2f} / {100 * probe['lr1.5e-3', 200]:.2f} % |" in readme
    rows = [json.loads(line) for line in (ROOT / "benchmarks" / "results" / "mae_transfer.jsonl").open()]
    tuned = [r for r in rows if r["command"] == "finetune" and r["encoder"] == "lr1.5e-3_seed0.safetensors"
             and r["fraction"] == 0.1]
    for arm, label in (("random", "from the random start"), ("mae", "from the MAE encoder (masking 0.75)")):
        by_lr = {r["lr"]: r["val_acc"] for r in tuned if r["arm"] == arm and r["seed"] == 0}
        chosen = max(by_lr, key=by_lr.get)
        assert chosen == 1e-3  # chosen on val with seed 0, per arm
        seeds = [next(r["val_acc"] for r in tuned if r["arm"] == arm and r["lr"] == chosen and r["seed"] == s)
                 for s in (0, 1, 2)]
        accs = [100 * a for a in seeds]
        cells = " | ".join(f"{100 * by_lr[lr]:.2f} %" for lr in (3e-4, 1e-3, 4e-3))
        mean, std = statistics.mean(accs), statistics.stdev(accs)
        spread = f"{' / '.join(f'{a:.2f}' for a in accs)} %: {mean:.2f} ± {std:.2f} %"
        assert f"| {label} | {cells} | {spread} |" in readme, label
    for fraction, name in ((0.01, "1 %"), (1.0, "100 %")):
        runs = [r for r in rows if r["command"] == "finetune" and r["fraction"] == fraction
                and r["encoder"] == "lr1.5e-3_seed0.safetensors"]
        for arm, label in (("random", "from the random start"), ("mae", "from the MAE encoder")):
            by_lr = {r["lr"]: r["val_acc"] for r in runs if r["arm"] == arm and r["seed"] == 0}
            chosen = max(by_lr, key=by_lr.get)
            accs = [100 * next(r["val_acc"] for r in runs if r["arm"] == arm and r["lr"] == chosen and r["seed"] == s)
                    for s in (0, 1, 2)]
            cells = " | ".join(f"{100 * by_lr[lr]:.2f} %" for lr in (3e-4, 1e-3, 4e-3))
            spread = (f"{chosen:.0e}".replace("e-0", "e-") + ": " + " / ".join(f"{a:.2f}" for a in accs)
                      + f" %: {statistics.mean(accs):.2f} ± {statistics.stdev(accs):.2f} %")
            assert f"| {name}, {label} | {cells} | {spread} |" in readme, (name, label)
    minutes = [r["seconds"] / 60 for r in rows  # the experiment's runs: the shipped encoder and its random start
               if r["command"] == "finetune" and r["encoder"] == "lr1.5e-3_seed0.safetensors"]
    assert "6 to 11 minutes a run" in readme and (round(min(minutes)), round(max(minutes))) == (6, 11)
    other = next(r for r in rows if r["command"] == "finetune" and r["mae_mask_ratio"] == 0.5)
    assert f"not tuned again for this one): {100 * other['val_acc']:.2f} %" in readme
    grid = {(r["mae_mask_ratio"], r["lr"]): r["val_acc"] for r in rows if r["command"] == "finetune"
            and r["fraction"] == 0.1 and r["arm"] == "mae" and r["seed"] == 0
            and r["encoder"] != "dec4_seed0.safetensors"}  # the masking ratios, shipped decoder
    for ratio in (0.25, 0.5, 0.75, 0.9):  # every ratio fine-tuned with the same three rates
        assert f"{ratio}: {' / '.join(f'{100 * grid[ratio, lr]:.2f}' for lr in (3e-4, 1e-3, 4e-3))} %" in readme
    decoders = {"lr1.5e-3": "1 block of 48 (shipped)", "dec4": "4 blocks of 64"}
    for variant, name in decoders.items():
        probes = " / ".join("–" if (variant, e) not in probe else f"{100 * probe[variant, e]:.2f}"
                            for e in (0, 50, 100, 150, 200))
        tuned = " / ".join(f"{100 * r['val_acc']:.2f}" for r in sorted(
            (r for r in rows if r["command"] == "finetune" and r["encoder"] == f"{variant}_seed0.safetensors"
             and r["fraction"] == 0.1 and r["arm"] == "mae" and r["seed"] == 0), key=lambda r: r["lr"]))
        assert f"| {name} | {probes} % | {tuned} % | {round(final[variant]['seconds'] / 60)} |" in readme, name
    for r in (r for r in rows if r["command"] == "lenses"):
        name = {"mae": "MAE, masking 0.75", "random": "random start"}[r["arm"]]
        cells = " | ".join(f"{100 * r[f'val_acc {k}']:.2f} %" for k in (
            "mean", "max", "block means", "quadrant means", "all tokens"))
        assert f"| {name} | {cells} |" in readme
    probes = [r for r in rows if r["command"] == "probe"]
    for fraction, name in ((0.01, "1 %"), (0.1, "10 %"), (1.0, "100 %")):
        cells = " | ".join(" / ".join(f"{100 * r['val_acc']:.2f}" for r in sorted(
            (r for r in probes if r["fraction"] == fraction and r["arm"] == arm), key=lambda r: r["seed"])) + " %"
            for arm in ("random", "mae"))
        assert f"| {name} | {cells} |" in readme, name
    assert next(r["val_acc"] for r in probes if (r["fraction"], r["arm"], r["seed"]) == (1.0, "mae", 0)) == probe[
        "lr1.5e-3", 200]  # the sweep's probe of the same encoder on the same canvases
    test = json.loads(shipped_metadata("vit_cluttered_digits_mae")["probe_test_acc"])
    assert (f"{' / '.join(f'{100 * a:.2f}' for a in test['mae'])} %, against "
            f"{' / '.join(f'{100 * a:.2f}' for a in test['random'])} % for the random\nstart") in readme
    label = {("mae", "lr1.5e-3_seed0.safetensors"): "MAE, masking 0.75", ("mae", "mask50_seed0.safetensors"):
             "MAE, masking 0.5", ("random", "lr1.5e-3_seed0.safetensors"): "random start"}
    for r in (r for r in rows if r["command"] == "where"):
        cells = " | ".join(f"{100 * r[f'val_acc {k}']:.2f} %" for k in ("box", "not box", "all"))
        if (r["arm"], r["encoder"]) in label:
            assert f"| {label[r['arm'], r['encoder']]} | {cells} |" in readme


def test_other_read_outs_pool_the_frozen_tokens_and_leave_no_hook(transfer, encoder_file):
    state, model_kwargs, _ = transfer.read_encoder(encoder_file)
    encoder = vitedu.create_model("vit_cluttered_digits", **model_kwargs)
    encoder.load_state_dict(state)
    images = torch.randn(5, 1, 32, 32, generator=torch.Generator().manual_seed(0))
    outs = transfer.pooled_by_block(encoder, images)
    tokens = encoder.forward_features(images)[:, 1:]  # (5, 64, dim)
    assert torch.equal(outs["mean"], transfer.probe.features(encoder, images, "mean"))  # the probe's own "mean"
    assert torch.equal(outs["max"], tokens.amax(1))
    dim, depth = model_kwargs["embed_dim"], model_kwargs["depth"]
    assert outs["block means"].shape == (5, depth * dim)
    assert torch.equal(outs["block means"][:, -dim:], outs["mean"])  # the last block's, after the final norm
    grid = tokens.reshape(5, 8, 8, dim)  # (batch, rows, columns, dim)
    quarters = [grid[:, :4, :4], grid[:, :4, 4:], grid[:, 4:, :4], grid[:, 4:, 4:]]  # top left first, row by row
    assert torch.allclose(outs["quadrant means"], torch.cat([q.mean((1, 2)) for q in quarters], 1), atol=1e-6)
    assert torch.equal(outs["all tokens"], tokens.flatten(1))
    assert torch.equal(outs["all tokens"][:, 9 * dim:10 * dim], grid[:, 1, 1])  # patch 9: row 1, column 1
    assert all(not block._forward_hooks for block in encoder.blocks)


def test_the_shipped_summary_is_what_the_stored_runs_say():
    """vitedu/assets/mae_results.json (what chapter 10 reads) is summarise() of results/ and the shipped file."""
    def rows(name):
        return [json.loads(line) for line in (ROOT / "benchmarks" / "results" / name).open() if line.strip()]

    transfer_rows = rows("mae_transfer.jsonl")
    summary = load_benchmark("mae_transfer").summarise(
        transfer_rows, rows("mae_sweep.jsonl"), shipped_metadata("vit_cluttered_digits_mae"))
    assert json.loads((ROOT / "vitedu" / "assets" / "mae_results.json").read_text()) == summary
    for fraction, arms in summary["finetune"].items():
        for arm, result in arms.items():
            seed0 = {r["lr"]: r["val_acc"] for r in transfer_rows if r["command"] == "finetune"
                     and r["encoder"] == "lr1.5e-3_seed0.safetensors" and r["arm"] == arm
                     and f"{r['fraction']:g}" == fraction and r["seed"] == 0}
            assert result["val_acc"][0] == max(seed0.values()) == seed0[result["lr"]]  # chosen on seed 0's val
            assert result["seeds"][0] == 0


def test_probe_canvases_come_from_the_fraction_of_the_digits_that_fine_tuning_uses(transfer, monkeypatch):
    images, labels = transfer.labelled_canvases(1.0, 20, seed=3)
    ref_images, ref_labels, _ = C.load_cluttered_digits("train", num_images=20, seed=3)
    assert torch.equal(labels, ref_labels) and torch.allclose(images, (ref_images - CLUTTERED_MEAN[0])
                                                               / CLUTTERED_STD[0])
    seen = []
    real = C.make_cluttered

    def spy(digits, *args, **kwargs):
        seen.append(digits)
        return real(digits, *args, **kwargs)

    monkeypatch.setattr(C, "make_cluttered", spy)
    transfer.labelled_canvases(0.1, 30, seed=2)
    subset, _ = vitedu.digits.stratified_subset(vitedu.digits.load_digits()["train"], 0.1, 2)  # as fit() draws it
    assert torch.equal(seen[0], subset.float() / vitedu.digits.DIGITS_MAX)


def test_the_probe_at_label_fractions_reports_val_only_for_both_arms(transfer, encoder_file, tmp_path, monkeypatch,
                                                                    capsys):
    monkeypatch.setitem(C.CLUTTERED_SIZES, "val", 60)
    out = tmp_path / "probe.jsonl"
    transfer.main(["probe", "--encoder", str(encoder_file), "--n-labelled", "40", "--fractions", "0.1", "1.0",
                   "--seeds", "0", "--out", str(out)])
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["fraction"], r["arm"]) for r in rows] == [(0.1, "mae"), (0.1, "random"), (1.0, "mae"), (1.0, "random")]
    assert all("test_acc" not in r and 0 <= r["val_acc"] <= 1 for r in rows)
    assert [json.loads(line) for line in out.read_text().splitlines()] == rows
