"""vitedu.grading: the reference parts agree with vitedu and with the checks, and reference_parts swaps a
notebook's functions for exactly the duration of the block."""

from __future__ import annotations

import pytest
import torch

import vitedu
from vitedu.checks import (
    check_attention,
    check_attention_weights,
    check_masked_attention,
    check_multi_head_merge,
    check_multi_head_split,
    check_patchify,
)
from vitedu.grading import REFERENCE_PARTS, part_is_right, reference_parts, where_run


def test_every_reference_passes_its_own_check(capsys):
    check_attention_weights(REFERENCE_PARTS["attention_weights"], device="cpu")
    check_attention(REFERENCE_PARTS["attention"], device="cpu")
    check_masked_attention(REFERENCE_PARTS["masked_attention"], device="cpu")
    check_multi_head_split(REFERENCE_PARTS["split_heads"], device="cpu")
    check_multi_head_merge(REFERENCE_PARTS["merge_heads"], device="cpu")
    check_patchify(REFERENCE_PARTS["patchify"], device="cpu")
    assert capsys.readouterr().out.count("✓") == 6
    logits = torch.tensor([[2.0, 1.0], [0.0, 3.0], [1.0, 0.0]])
    assert REFERENCE_PARTS["accuracy"](logits, torch.tensor([0, 1, 1])) == pytest.approx(2 / 3)


def test_a_later_part_is_graded_on_the_reference_earlier_part():
    def attention_weights(q, k):  # the student's part 1, with the softmax over the wrong axis
        return torch.softmax(q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5, dim=-2)

    namespace = {"attention_weights": attention_weights}
    exec("def attention(q, k, v):\n    return attention_weights(q, k) @ v", namespace)  # the student's part 2
    q, k, v = (torch.randn(2, 5, 4) for _ in range(3))
    expected, _ = vitedu.scaled_dot_product_attention(q, k, v)
    assert not torch.allclose(namespace["attention"](q, k, v), expected, atol=1e-5)  # the cascade
    with reference_parts(namespace, "attention_weights"):
        assert torch.allclose(namespace["attention"](q, k, v), expected, atol=1e-5)
    assert namespace["attention_weights"] is attention_weights  # the student's version is back


def test_the_student_versions_come_back_after_a_failure_and_missing_names_stay_missing():
    namespace = {"split_heads": "student"}
    with pytest.raises(AssertionError), reference_parts(namespace, "split_heads", "merge_heads"):
        assert namespace["merge_heads"] is REFERENCE_PARTS["merge_heads"]
        raise AssertionError("a failing hidden test")
    assert namespace == {"split_heads": "student"}


def test_an_unknown_part_is_an_error_that_lists_the_known_ones():
    with pytest.raises(ValueError, match=r"no reference implementation for \['softmax'\].*attention_weights"):
        with reference_parts({}, "softmax"):
            pass


def _train_epoch(model, batches, optimizer, zero_grad=True):
    model.train()
    total = 0.0
    for images, labels in batches:
        loss = torch.nn.functional.cross_entropy(model(images), labels)
        if zero_grad:
            optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += loss.item() * len(labels)
    return total / sum(len(labels) for _, labels in batches)


def test_part_is_right_runs_the_check_silently(capsys):
    """A3's Part 4 asks for 85 % only when train_epoch passes its check (a wrong one is charged in Part 2)."""
    assert part_is_right("train_epoch", _train_epoch)
    assert not part_is_right("train_epoch", lambda *args: _train_epoch(*args, zero_grad=False))
    assert capsys.readouterr().out == ""
    with pytest.raises(ValueError, match="no check for 'softmax'"):
        part_is_right("softmax", _train_epoch)


def test_part_is_right_knows_the_cls_attention_part():
    from test_checks import cls_attention  # A3's Part 6 as a student writes it, with the mistakes test_checks plants

    assert part_is_right("cls_attention", cls_attention)
    assert not part_is_right("cls_attention", lambda model, images: cls_attention(model, images, mistake="head_0"))


def test_part_is_right_checks_on_the_cpu_whatever_the_machine_has(monkeypatch):
    """The grader's verdict must not depend on an accelerator being present: every check runs on the CPU."""
    import vitedu.checks

    devices = []
    monkeypatch.setattr(vitedu.checks, "check_train_epoch", lambda fn, device=None: devices.append(device))
    assert part_is_right("train_epoch", _train_epoch)
    assert devices == ["cpu"]


def test_where_run_names_what_decides_a_cpu_runs_last_digits(monkeypatch):
    """A3 prints it so that a student's run and the grader's re-execution can be compared: the processor, then
    PyTorch's CPU kernels (what ATEN_CPU_CAPABILITY switches), the threads and the version."""
    threads = torch.get_num_threads()
    try:
        for n, word in ((1, "1 thread,"), (2, "2 threads,")):
            torch.set_num_threads(n)
            processor, kernels = where_run().split("\n")
            assert processor.startswith("processor: ") and len(processor) > len("processor: ")
            assert kernels == f"CPU kernels {torch.backends.cpu.get_cpu_capability()}, {word} torch {torch.__version__}"
    finally:
        torch.set_num_threads(threads)
    monkeypatch.setattr("platform.processor", lambda: "arm")  # no /proc/cpuinfo (macOS): what platform knows
    monkeypatch.setattr("builtins.open", lambda *a, **k: (_ for _ in ()).throw(FileNotFoundError()))
    assert where_run().startswith("processor: arm\n")

