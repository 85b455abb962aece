"""Started by tests/test_distributed.py under torchrun (2 CPU processes, Gloo); each process writes what it saw.

    python -m torch.distributed.run --standalone --nproc_per_node=2 tests/ddp_worker.py OUT

Writes, per rank r: OUT/rank{r}.json (the image indices of each epoch, histories, test accuracies, what the
command line printed) and OUT/{one_step,full,resumed}_rank{r}.safetensors (weights).
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
from dataclasses import replace
from pathlib import Path

import torch
from safetensors.torch import save_file

from vitedu import create_model
from vitedu import distributed as DDP
from vitedu import train as T
from vitedu.config import PRESETS
from vitedu.data import make_loaders

TINY = replace(PRESETS["digits"], model="vit_digits_patch2_8", model_kwargs={"embed_dim": 32, "depth": 1},
               epochs=3, batch_size=64, warmup_epochs=0.5, teacher_epochs=0, distill_alpha=0.0)


def save(model: torch.nn.Module, path: Path) -> None:
    save_file({k: v.detach().contiguous() for k, v in model.state_dict().items()}, str(path))


def main(out: Path) -> None:
    torch.set_num_threads(1)
    process, device, started = DDP.setup("cpu")
    rank = process.rank
    record: dict = {"world_size": process.world_size}

    # Which training images each process sees, epoch by epoch.
    loaders = make_loaders(TINY, device)
    record["steps"] = len(loaders["train"])
    record["seen"] = []
    for epoch in range(TINY.epochs):
        loaders["train"].set_epoch(epoch)
        record["seen"].append(torch.cat(loaders["train"].shares()).tolist())

    # One optimisation step from weights that differ on purpose: DDP starts every copy from rank 0's weights
    # and averages the gradients, so the copies agree after the step.
    torch.manual_seed(100 + rank)
    model = create_model(TINY.model, **TINY.model_kwargs)
    record["initial_head_sum"] = model.head.weight.sum().item()
    wrapped = DDP.wrap(model, device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    images, labels = next(iter(loaders["train"]))
    torch.nn.functional.cross_entropy(wrapped(images), labels).backward()
    optimizer.step()
    save(model, out / f"one_step_rank{rank}.safetensors")

    # A whole run, and the same run interrupted after epoch 2 and resumed.
    full = T.fit(TINY, out=out / "full", progress=False, log=lambda _: None, device=device)
    T.fit(TINY, out=out / "split", stop_after=2, progress=False, log=lambda _: None, device=device)
    resumed = T.fit(TINY, out=out / "split", resume=True, progress=False, log=lambda _: None, device=device)
    save(full.model, out / f"full_rank{rank}.safetensors")
    save(resumed.model, out / f"resumed_rank{rank}.safetensors")
    record.update(history=full.history.__dict__, resumed_history=resumed.history.__dict__,
                  test_acc=full.test_acc, resumed_test_acc=resumed.test_acc)

    # The command line, as torchrun starts it: only rank 0 prints.
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        T.main(["--dataset", "digits", "--model", "vit_digits_patch2_8", "--epochs", "1", "--warmup-epochs", "0.5",
                "--batch-size", "128", "--teacher-epochs", "0", "--no-progress", "--out", str(out / "cli"),
                "--device", "cpu"])
    record["printed"] = printed.getvalue()
    (out / f"rank{rank}.json").write_text(json.dumps(record))
    DDP.cleanup(started)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
