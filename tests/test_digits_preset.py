"""benchmarks/digits_preset.py, the stored run chapter 7 reads: it is still the preset's recipe, and its stored
weights give the accuracies it records (so the chapter's numbers are those of these weights)."""

import importlib.util
import json
from dataclasses import asdict
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

import vitedu
from vitedu import train as T
from vitedu.cnn import ConvTeacher
from vitedu.config import PRESETS, TrainConfig
from vitedu.data import make_loaders

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("digits_preset", ROOT / "benchmarks" / "digits_preset.py")
P = importlib.util.module_from_spec(spec)
spec.loader.exec_module(P)


@pytest.fixture(scope="module")
def record():
    assert P.RECORD.exists() and P.WEIGHTS.exists(), "run: python benchmarks/digits_preset.py"
    return json.loads(P.RECORD.read_text())


@pytest.fixture(scope="module")
def stored():
    """(ViT, teacher) with the stored weights, in float32 as chapter 7 loads them."""
    weights = load_file(str(P.WEIGHTS))

    def part(prefix):
        return {k.removeprefix(prefix): v.float() for k, v in weights.items() if k.startswith(prefix)}

    config = PRESETS["digits"]
    model = vitedu.create_model(config.model, **config.model_kwargs)
    model.load_state_dict(part("model."))
    teacher = ConvTeacher(in_chans=1, num_classes=10)
    teacher.load_state_dict(part("teacher."))
    return model.eval(), teacher.eval()


def test_stored_run_is_the_preset(record):
    # If the preset changes, the stored run no longer shows it: re-run the script (and chapter 7).
    # Fields the stored run predates take their defaults (teacher_path: ""); a field whose preset value is not its
    # default, or any stored value that differs, still fails.
    assert TrainConfig(**record["config"]) == PRESETS["digits"], (
        "benchmarks/results/digits_preset.json was trained with another recipe than PRESETS['digits']: "
        "run python benchmarks/digits_preset.py, then re-execute notebooks/07_training.ipynb")
    epochs = PRESETS["digits"].epochs
    history = T.History(**record["history"])  # fails on a field History no longer has
    assert history.epoch == list(range(1, epochs + 1))
    assert all(len(getattr(history, name)) == epochs for name in asdict(history))
    assert record["val_acc"] == history.val_acc[-1]


@pytest.mark.parametrize("split", ["val", "test"])
def test_stored_weights_give_the_recorded_accuracies(record, stored, split):
    model, teacher = stored
    loader = make_loaders(PRESETS["digits"], "cpu")[split]
    with torch.no_grad():
        assert T.evaluate(model, loader)[1] == record[f"{split}_acc"]
        assert T.evaluate(teacher, loader)[1] == record[f"teacher_{split}_acc"]


def test_rounding_check(stored):
    # The script refuses float16 weights that predict any val or test image differently from float32.
    model, _ = stored
    loaders = make_loaders(PRESETS["digits"], "cpu")
    P.check_rounding("ViT", model, vitedu.create_model("vit_digits_patch4_8"), loaders)  # already float16
    with pytest.raises(SystemExit, match="changes .* predictions"):
        P.check_rounding("ViT", model, _AlwaysZero(vitedu.create_model("vit_digits_patch4_8")), loaders)


class _AlwaysZero(torch.nn.Module):
    """Loads any ViT weights, then predicts class 0 for every image: a copy whose predictions differ."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def load_state_dict(self, state, strict=True):
        return self.inner.load_state_dict(state, strict)

    def forward(self, x):
        logits = self.inner(x)  # (batch, classes)
        return torch.zeros_like(logits).index_fill_(1, torch.tensor([0]), 1.0)
