"""vitedu.cost: the instruments of chapter 3 (time of a call, peak memory of attention, saved tensors)."""

from __future__ import annotations

import pytest
import torch

from vitedu.attention import scaled_dot_product_attention as sdpa
from vitedu.cost import peak_memory_mib, saved_for_backward, time_ms


def test_time_ms_averages_over_the_calls_that_fill_min_s():
    calls = []
    x = torch.randn(64, 64)

    def work():
        calls.append(1)
        x @ x

    ms = time_ms(work, min_s=0.01)
    assert calls and ms > 0
    # the calls together fill at least min_s of this thread's CPU time
    assert ms * len(calls) >= 10


def test_saved_for_backward_counts_each_saved_tensor_once():
    a, b = torch.randn(3, requires_grad=True), torch.randn(3, requires_grad=True)
    saved, node = saved_for_backward(lambda: (a * b * a).sum())
    assert node == "SumBackward0"
    assert {t.data_ptr() for t in saved} >= {a.data_ptr(), b.data_ptr()}
    assert len({t.data_ptr() for t in saved}) == len(saved)


def test_the_explicit_path_saves_a_t_by_t_tensor_and_the_fused_kernel_none():
    q, k, v = (torch.randn(1, 2, 32, 8, requires_grad=True) for _ in range(3))
    for need_weights, squares in ((True, 1), (False, 0)):
        saved, _ = saved_for_backward(lambda need_weights=need_weights: sdpa(q, k, v, need_weights=need_weights)[0])
        assert sum(t.shape[-2:] == (32, 32) for t in saved) == squares, need_weights


def test_saved_for_backward_wants_a_tracked_output():
    with pytest.raises(ValueError, match="requires_grad=True"):
        saved_for_backward(lambda: torch.randn(3).sum())


def test_peak_memory_of_the_explicit_path_holds_the_weights_and_grows_with_t():
    peaks = peak_memory_mib([256, 1024], heads=4)
    weights_mib = {n: 4 * n * n * 4 / 2**20 for n in peaks}  # one (heads, T, T) float32 tensor
    assert set(peaks) == {256, 1024}
    assert peaks[1024][0] >= weights_mib[1024] > peaks[1024][1]
    assert peaks[1024][0] > 4 * peaks[256][0]


def test_peak_memory_refuses_lengths_below_the_warm_up():
    with pytest.raises(ValueError, match="at least 16"):
        peak_memory_mib([8])
