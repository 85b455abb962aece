"""The run chapter 7 reads: the digits preset, trained once, exactly as ``vitedu.config.PRESETS["digits"]`` says.

Training the preset (a 20-epoch convnet teacher, then 100 epochs of the ViT) takes about two minutes on a CPU, too
long for a chapter that should run in under one, and too long for ``make test``, which re-executes every chapter.
So this script trains it once (seed 0, CPU, fp32, one thread, as the chapter would) and stores what the chapter
reads; the chapter loads the files, re-checks them, and shows the loop running on a few epochs only.

    python benchmarks/digits_preset.py      # about 2 CPU-minutes on one thread

It writes, next to the other stored runs in ``benchmarks/results/``:

- ``digits_preset.safetensors``: the trained ViT (``model.*``) and its convnet teacher (``teacher.*``), in float16
  (1.3 MB instead of 2.5). Before writing, the script checks that the rounded weights predict every validation and
  test image exactly as the float32 model did, so the accuracies below are also the stored weights' accuracies.
- ``digits_preset.json``: the config (``asdict`` of the preset), the per-epoch ``History``, the final validation
  and test accuracy of the ViT, the teacher's, the wall time, the device, the thread count and the versions.

``tests/test_digits_preset.py`` checks that the stored config is still the preset's and that the stored weights
give the recorded accuracies. A run is deterministic on one machine but not across CPUs (``benchmarks/README.md``):
re-running this elsewhere trains slightly different weights.
"""

from __future__ import annotations

import json
import platform
import time
from dataclasses import asdict
from pathlib import Path

import torch
from safetensors.torch import save_file

import vitedu
from vitedu import train as T
from vitedu.cnn import ConvTeacher
from vitedu.config import PRESETS
from vitedu.data import make_loaders

CONFIG = PRESETS["digits"]
RESULTS = Path(__file__).parent / "results"
WEIGHTS = RESULTS / "digits_preset.safetensors"
RECORD = RESULTS / "digits_preset.json"
THREADS = 1  # as in chapter 7 (tiny models: one thread is nearly as fast on a busy CPU)


def predictions(model: torch.nn.Module, loader: vitedu.loaders.TensorLoader) -> torch.Tensor:
    """The predicted class of every image of ``loader``, in order."""
    with torch.no_grad():
        return torch.cat([model.eval()(x).argmax(-1) for x, _ in loader])


def rounded(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The model's weights as stored: float16, contiguous, on the CPU."""
    return {k: v.detach().cpu().half().contiguous() for k, v in model.state_dict().items()}


def cpu_name() -> str:
    """The CPU model, as /proc/cpuinfo names it (platform.processor() is often empty on Linux)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def check_rounding(name: str, model: torch.nn.Module, fresh: torch.nn.Module, loaders: dict) -> None:
    """Fail unless ``fresh``, loaded with the float16 weights, predicts every val and test image as ``model``."""
    fresh.load_state_dict({k: v.float() for k, v in rounded(model).items()})
    for split in ("val", "test"):
        changed = int((predictions(model, loaders[split]) != predictions(fresh, loaders[split])).sum())
        if changed:
            raise SystemExit(f"rounding the {name}'s weights to float16 changes {changed} {split} predictions: "
                             f"store them in float32 instead (drop .half() in rounded())")


def main() -> None:
    torch.set_num_threads(THREADS)
    start = time.perf_counter()
    result = T.fit(CONFIG, device="cpu", precision="fp32", progress=False, log_every=10)
    wall = time.perf_counter() - start
    loaders = make_loaders(CONFIG, "cpu")
    teacher_val, teacher_test = (T.evaluate(result.teacher, loaders[s])[1] for s in ("val", "test"))
    check_rounding("ViT", result.model, vitedu.create_model(CONFIG.model, **CONFIG.model_kwargs), loaders)
    check_rounding("teacher", result.teacher, ConvTeacher(in_chans=1, num_classes=10), loaders)
    weights = {f"model.{k}": v for k, v in rounded(result.model).items()}
    weights |= {f"teacher.{k}": v for k, v in rounded(result.teacher).items()}
    RESULTS.mkdir(exist_ok=True)
    save_file(weights, str(WEIGHTS), metadata={"dtype": "float16", "record": RECORD.name})
    record = {
        "command": "python benchmarks/digits_preset.py",
        "config": asdict(CONFIG),
        "history": asdict(result.history),
        "val_acc": result.history.val_acc[-1],
        "test_acc": result.test_acc,
        "teacher_val_acc": teacher_val,
        "teacher_test_acc": teacher_test,
        "weights": WEIGHTS.name,
        "weights_dtype": "float16",
        "wall_time_s": round(wall, 1),
        "device": f"cpu ({cpu_name()})",
        "threads": THREADS,
        "precision": "fp32",
        "torch": torch.__version__,
        "python": platform.python_version(),
    }
    RECORD.write_text(json.dumps(record, indent=1) + "\n")
    print(f"{wall:.0f} s; ViT val {record['val_acc']:.4f} test {result.test_acc:.4f}; teacher val "
          f"{teacher_val:.4f} test {teacher_test:.4f}; wrote {WEIGHTS} ({WEIGHTS.stat().st_size:,} bytes), {RECORD}")


if __name__ == "__main__":
    main()
