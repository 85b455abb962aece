"""benchmarks/train_step.py: its FLOP count holds the attention that the fused kernel hides, its timing compares
like with like, and its profile accounts for the whole step."""

from __future__ import annotations

import pytest
import torch
from tools_loader import load_benchmark

B = load_benchmark("train_step")


def test_the_count_adds_the_attention_products_the_fused_kernel_hides():
    """Written out, attention adds Q K^T and A V: 2 products of 2 * T * T * d FLOPs per block forward (d = 64 over
    all heads, T = 65 tokens), three times that with the backward pass, for each of the 4 blocks."""
    written_out, through_kernel = B.step_flops(batch=2)
    tokens, dim, depth = 65, 64, 4
    attention = 3 * depth * 2 * (2 * tokens * tokens * dim)  # per canvas
    assert written_out - through_kernel == 2 * attention
    # The rest grows with the batch by the blocks' and the head's products, 51.4 MFLOP a canvas; what does not
    # grow is Muon's Newton-Schulz iterations on the weight matrices, once a step.
    per_canvas = (B.step_flops(batch=4)[1] - through_kernel) / 2
    assert per_canvas == pytest.approx(51.4e6, rel=0.01)


def test_the_step_trains_and_the_written_out_step_computes_the_same():
    torch.manual_seed(0)
    model = B.build()
    before = [p.detach().clone() for p in model.parameters()]
    B.make_step(model, batch=4)()
    assert all(not torch.equal(a, p) for a, p in zip(before, model.parameters()) if p.requires_grad and p.ndim == 2)
    images = torch.randn(3, 1, 32, 32)
    model.eval()
    with torch.no_grad():
        fused = model(images)
        with B.attention_written_out(model):
            written = model(images)
    torch.testing.assert_close(fused, written, atol=1e-5, rtol=1e-5)
    assert all(m.fused_attn for m in model.modules() if hasattr(m, "fused_attn"))  # put back afterwards


def test_the_profile_shares_add_up_to_the_whole_step():
    model = B.build()
    shares = B.profile_step(B.make_step(model, batch=4), steps=1)
    assert set(shares) == {name for name, _ in B.CATEGORIES} | {"outside the kernels (autograd, Python)"}
    assert all(0.0 <= v <= 1.0 for v in shares.values())
    assert sum(shares.values()) == pytest.approx(1.0, abs=0.05) and shares["matrix products"] > 0
