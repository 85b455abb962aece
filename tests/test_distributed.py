"""Multi-process training (vitedu.distributed): torchrun starts 2 CPU processes on the digits (Gloo).

The processes run tests/ddp_worker.py and write what they saw; the checks happen here. About 20 s on 2 cores.
"""

from __future__ import annotations

import json
import os
import signal
import threading
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from vitedu import run_files as RF
from vitedu import train as T
from vitedu.digits import load_digits
from vitedu.loaders import TensorLoader

ROOT = Path(__file__).resolve().parents[1]
WORKER = Path(__file__).with_name("ddp_worker.py")


@pytest.fixture(scope="module")
def ranks(tmp_path_factory) -> tuple[Path, list[dict]]:
    """torchrun starts the two workers. The launcher runs in this process: `torchrun` is the console script of
    torch.distributed.run's main, and calling it here spares a third Python its import of torch (about 3 s of
    CPU). What the launcher changes in its process (the environment, handlers of SIGTERM, SIGINT, SIGHUP and
    SIGQUIT) is put back afterwards."""
    from torch.distributed.run import main as torchrun

    out = tmp_path_factory.mktemp("ddp")
    path = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    environ = dict(os.environ)
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT)}
    os.environ.update(OMP_NUM_THREADS="1", PYTHONPATH=path)
    # 300 s at most, as the subprocess's timeout was: SIGTERM makes the launcher stop its workers and raise
    watchdog = threading.Timer(300, os.kill, (os.getpid(), signal.SIGTERM))
    watchdog.start()
    try:
        torchrun(["--standalone", "--nproc_per_node=2", str(WORKER), str(out)])  # raises if a worker failed
    finally:
        watchdog.cancel()
        os.environ.clear()
        os.environ.update(environ)
        for sig, handler in handlers.items():
            if handler is not None and signal.getsignal(sig) is not handler:
                signal.signal(sig, handler)
    return out, [json.loads((out / f"rank{r}.json").read_text()) for r in range(2)]


def weights(path: Path) -> dict[str, torch.Tensor]:
    return load_file(str(path))


@pytest.mark.integration  # the two-process run of the ranks fixture takes half a minute
def test_every_training_image_is_seen_once_per_epoch(ranks):
    _, (r0, r1) = ranks
    n = len(load_digits()["train"][1])
    assert r0["world_size"] == r1["world_size"] == 2 and r0["steps"] == r1["steps"]
    for epoch, (a, b) in enumerate(zip(r0["seen"], r1["seen"])):
        assert not set(a) & set(b), f"epoch {epoch}: an image went to both processes"
        assert sorted(a + b) == list(range(n)), f"epoch {epoch}: not every image was seen exactly once"
        assert abs(len(a) - len(b)) <= r0["steps"]  # shares differ by at most one image per batch
    assert r0["seen"][0] != r0["seen"][1]  # a new order every epoch


@pytest.mark.integration  # the two-process run of the ranks fixture takes half a minute
def test_copies_are_identical_after_a_step(ranks):
    out, (r0, r1) = ranks
    assert r0["initial_head_sum"] != r1["initial_head_sum"]  # they started apart on purpose
    for name in ("one_step", "full", "resumed"):
        a, b = weights(out / f"{name}_rank0.safetensors"), weights(out / f"{name}_rank1.safetensors")
        for key in a:
            assert torch.equal(a[key], b[key]), (name, key)


@pytest.mark.integration  # the two-process run of the ranks fixture takes half a minute
def test_loss_goes_down_and_metrics_agree(ranks):
    _, (r0, r1) = ranks
    h = r0["history"]
    assert h["epoch"] == [1, 2, 3] and h["train_loss"][-1] < h["train_loss"][0] and h["val_loss"][-1] < h["val_loss"][0]
    assert r0["history"]["val_acc"] == r1["history"]["val_acc"]  # summed over both processes' shares
    assert r0["history"]["train_loss"] == r1["history"]["train_loss"] and r0["test_acc"] == r1["test_acc"]


@pytest.mark.integration  # the two-process run of the ranks fixture takes half a minute
def test_checkpoint_from_rank_0_resumes_exactly(ranks):
    out, (r0, _) = ranks
    timing = {"images_per_s"}  # a measurement, not a result
    for key in set(r0["history"]) - timing:
        assert r0["resumed_history"][key] == r0["history"][key], key
    assert r0["resumed_test_acc"] == r0["test_acc"]
    full, resumed = weights(out / "full_rank0.safetensors"), weights(out / "resumed_rank0.safetensors")
    assert all(torch.equal(full[k], resumed[k]) for k in full)
    model, config = T.load_trained(out / "split")  # an ordinary checkpoint, loadable in one process
    assert config.epochs == 3 and not any(p.name.endswith(".tmp") for p in (out / "split").iterdir())
    assert all(torch.equal(v, full[k]) for k, v in model.state_dict().items())


@pytest.mark.integration  # the two-process run of the ranks fixture takes half a minute
def test_only_rank_0_prints(ranks):
    out, (r0, r1) = ranks
    assert r1["printed"] == ""
    lines = r0["printed"].strip().splitlines()
    assert lines[0].startswith("2 processes (Gloo)") and lines[-1].startswith("test accuracy: ")
    assert (out / "cli" / RF.MODEL_FILE).exists()


def test_batches_are_shared_without_overlap_and_tails_fold_in():
    images, labels = torch.zeros(11, 1, 2, 2, dtype=torch.uint8), torch.arange(11)
    loaders = [TensorLoader(images, labels, 5, (0.0,), (1.0,), shuffle=True, rank=r, world_size=2) for r in (0, 1)]
    shares = [loader.shares() for loader in loaders]
    assert len(loaders[0]) == len(loaders[1]) == 2  # 5 + 6: the one left over joins the last batch
    for a, b in zip(*shares):
        assert len(a) and len(b) and not set(a.tolist()) & set(b.tolist())
    assert sorted(torch.cat(shares[0] + shares[1]).tolist()) == list(range(11))
    alone = TensorLoader(images, labels, 5, (0.0,), (1.0,), shuffle=True)
    assert len(alone) == 3 and [len(s) for s in alone.shares()] == [5, 5, 1]  # one process: as before
    with pytest.raises(ValueError, match="at least one image per step"):
        TensorLoader(images, labels, 1, (0.0,), (1.0,), rank=0, world_size=2)
