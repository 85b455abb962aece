"""vitedu.optimizers: Muon takes the blocks' weight matrices and AdamW the rest, one learning rate reaches both,
and a run with Muon resumes from its checkpoint exactly as if it had not stopped."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
from train_recipes import SMALL, quiet

import vitedu
from vitedu import optimizers as O
from vitedu import train as T
from vitedu.config import ConfigError


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return vitedu.create_model("vit_digits_patch2_8", embed_dim=16, depth=2)


def test_muon_takes_the_blocks_matrices_and_adamw_everything_else():
    model = _model()
    opt = O.make_optimizer(model, "muon", lr=1e-3, weight_decay=0.05)
    names = {id(p): n for n, p in model.named_parameters()}
    muon = [names[id(p)] for g in opt.muon.param_groups for p in g["params"]]
    adamw = [names[id(p)] for g in opt.adamw.param_groups for p in g["params"]]
    assert sorted(muon) == sorted(f"blocks.{i}.{layer}.weight" for i in range(2)
                                  for layer in ("attn.qkv", "attn.proj", "mlp.fc1", "mlp.fc2"))
    assert sorted(muon + adamw) == sorted(names.values()) and not set(muon) & set(adamw)
    assert "head.weight" in adamw and "patch_embed.proj.weight" in adamw and "pos_embed" in adamw
    decayed = {names[id(p)] for p in opt.adamw.param_groups[0]["params"]}
    assert decayed == {"head.weight", "patch_embed.proj.weight"}  # no decay on norms, biases, positions, [CLS]
    for group in opt.param_groups:  # what the schedule of fit does every step
        group["lr"] = 0.5
    assert opt.muon.param_groups[0]["lr"] == 0.5 and opt.adamw.param_groups[1]["lr"] == 0.5


def test_a_convit_keeps_its_position_projection_with_adamw():
    torch.manual_seed(0)
    model = vitedu.create_model("convit_cluttered_digits", depth=2, local_up_to_layer=1)
    names = {id(p): n for n, p in model.named_parameters()}
    muon = {names[id(p)] for g in O.make_optimizer(model, "muon", lr=1e-3, weight_decay=0.05).muon.param_groups
            for p in g["params"]}
    assert "blocks.0.attn.qk.weight" in muon and "blocks.0.mlp.fc2.weight" in muon
    assert not any(n.endswith("pos_proj.weight") for n in muon)  # heads x (dx, dy, d^2): an input layer


def test_a_muon_step_is_an_orthogonalised_step_whose_size_does_not_follow_the_gradient():
    """Muon's update of a matrix has more even singular values than the gradient (five Newton-Schulz steps push
    them towards one value), and its size is set by the learning rate, not by the gradient's scale (the gradient
    is normalised first): a loss 1,000 times larger takes the same step, smaller than lr in RMS, as AdamW's."""
    images, labels = torch.randn(8, 1, 8, 8), torch.arange(8)
    updates = []
    for scale in (1.0, 1000.0):
        model = _model()
        opt = O.make_optimizer(model, "muon", lr=1e-2, weight_decay=0.0)
        weight = model.blocks[0].mlp.fc1.weight  # (32, 16)
        before = weight.detach().clone()
        (scale * torch.nn.functional.cross_entropy(model(images), labels)).backward()
        gradient = weight.grad.clone()
        opt.step()
        updates.append(before - weight.detach())  # (32, 16)
    spread = lambda m: (lambda s: (s[0] / s[len(s) // 2]).item())(torch.linalg.svdvals(m))  # noqa: E731
    assert spread(updates[1]) < 0.5 * spread(gradient), (spread(updates[1]), spread(gradient))
    rms = [u.square().mean().sqrt().item() for u in updates]  # (PyTorch's Newton-Schulz runs in bfloat16, so the
    assert 0.8 < rms[0] / rms[1] < 1.25 and 0.0 < rms[1] < 1e-2, rms  # two steps agree in size, not in every digit)


def test_a_run_with_muon_resumes_exactly(tmp_path):
    config = replace(SMALL, epochs=2, optimizer="muon")
    whole = T.fit(config, device="cpu", progress=False, log=quiet)
    T.fit(config, out=tmp_path, device="cpu", progress=False, log=quiet, stop_after=1)
    resumed = T.fit(config, out=tmp_path, resume=True, device="cpu", progress=False, log=quiet)
    for a, b in zip(whole.model.state_dict().values(), resumed.model.state_dict().values()):
        assert torch.equal(a, b)
    assert isinstance(whole.optimizer, O.MuonAdamW) and whole.history.val_acc == resumed.history.val_acc


def test_an_unknown_optimizer_is_refused_naming_the_choices():
    with pytest.raises(ConfigError, match="optimizer must be one of adamw, muon; got 'lion'"):
        replace(SMALL, optimizer="lion")
    with pytest.raises(ValueError, match="one of adamw, muon; got 'sgd'"):
        O.make_optimizer(_model(), "sgd", 1e-3, 0.0)
    with pytest.raises(ValueError, match="no weight matrices under 'blocks.'"):
        O.MuonAdamW(torch.nn.Linear(3, 3), 1e-3, 0.0)
