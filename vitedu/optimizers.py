"""The optimizers of the training recipe: AdamW, or Muon for the blocks' weight matrices with AdamW for the rest.

    # config.optimizer: "adamw" (DeiT's) or "muon"
    optimizer = make_optimizer(model, config)

AdamW (Loshchilov & Hutter, 2019) scales every coordinate of the gradient by its own running size. Muon (Jordan
et al., 2024) treats a weight matrix as a matrix: it keeps a momentum of the gradient, replaces it by the nearest
semi-orthogonal matrix (five Newton-Schulz iterations push all its singular values towards 1) and steps along
that, so no direction of the matrix learns much faster than the others. It is meant for the hidden layers'
matrices only; the patch embedding, positions, [CLS], norms, biases and the head stay with AdamW. vitedu uses
PyTorch's own ``torch.optim.Muon`` with ``adjust_lr_fn="match_rms_adamw"`` (Liu et al., 2025): the update is
scaled to the size of an AdamW update, so one learning rate and one weight decay serve both optimizers, and the
schedule of ``vitedu.train`` sets them together through ``param_groups``.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

OPTIMIZERS = ("adamw", "muon")


def param_groups(model: nn.Module, weight_decay: float) -> list[dict[str, Any]]:
    """Decay weight matrices only. Biases, LayerNorm gains, ``pos_embed`` and ``cls_token`` are not
    pulled towards zero: shrinking a norm's gain or a position code is not regularisation, just damage."""
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        skip = p.ndim < 2 or name.endswith(("pos_embed", "cls_token", "dist_token"))
        (no_decay if skip else decay).append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def hidden_matrices(model: nn.Module) -> list[nn.Parameter]:
    """The 2-D weights inside the encoder blocks (qkv, proj, fc1, fc2): the matrices Muon is for. A ConViT
    block's ``pos_proj`` (heads x 3) reads the three relative-position features, not the tokens: an input layer
    like the patch embedding, so it stays with AdamW (and keeps its local start's scale)."""
    return [p for name, p in model.named_parameters()
            if p.requires_grad and p.ndim == 2 and name.startswith("blocks.") and name.endswith("weight")
            and not name.endswith("pos_proj.weight")]


class MuonAdamW:
    """Muon on the blocks' weight matrices, AdamW on every other parameter, behaving as one optimizer.

    ``param_groups`` lists Muon's group first, then AdamW's two (decay, no decay), so a schedule that sets
    ``group["lr"]`` reaches both; ``state_dict`` numbers the parameters Muon's first, so a checkpoint written by
    ``vitedu.run_files.save_checkpoint`` resumes exactly. Muon's momentum (0.95, Nesterov) is PyTorch's default.
    """

    def __init__(self, model: nn.Module, lr: float, weight_decay: float) -> None:
        hidden = hidden_matrices(model)
        if not hidden:
            raise ValueError(f"{type(model).__name__} has no weight matrices under 'blocks.' for Muon; use "
                             "optimizer='adamw'")
        in_muon = {id(p) for p in hidden}
        rest = [{**group, "params": [p for p in group["params"] if id(p) not in in_muon]}
                for group in param_groups(model, weight_decay)]
        self.muon = torch.optim.Muon(hidden, lr=lr, weight_decay=weight_decay, adjust_lr_fn="match_rms_adamw")
        self.adamw = torch.optim.AdamW(rest, lr=lr)

    @property
    def param_groups(self) -> list[dict[str, Any]]:
        return self.muon.param_groups + self.adamw.param_groups

    def zero_grad(self, set_to_none: bool = True) -> None:
        self.muon.zero_grad(set_to_none=set_to_none)
        self.adamw.zero_grad(set_to_none=set_to_none)

    @torch.no_grad()
    def step(self) -> None:
        self.muon.step()
        self.adamw.step()

    def state_dict(self) -> dict[str, Any]:
        """One state dict in the layout of a single optimizer's: Muon's parameters first, then AdamW's."""
        muon, adamw = self.muon.state_dict(), self.adamw.state_dict()
        shift = sum(len(group["params"]) for group in muon["param_groups"])
        return {
            "state": {**muon["state"], **{i + shift: s for i, s in adamw["state"].items()}},
            "param_groups": muon["param_groups"] + [{**g, "params": [i + shift for i in g["params"]]}
                                                    for g in adamw["param_groups"]],
        }

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        groups = state_dict["param_groups"]
        cut = len(self.muon.param_groups)
        shift = sum(len(group["params"]) for group in groups[:cut])
        state = {int(i): s for i, s in state_dict["state"].items()}
        self.muon.load_state_dict({"state": {i: s for i, s in state.items() if i < shift},
                                   "param_groups": groups[:cut]})
        self.adamw.load_state_dict({"state": {i - shift: s for i, s in state.items() if i >= shift},
                                    "param_groups": [{**g, "params": [i - shift for i in g["params"]]}
                                                     for g in groups[cut:]]})


def make_optimizer(model: nn.Module, name: str, lr: float, weight_decay: float) -> torch.optim.Optimizer | MuonAdamW:
    """The optimizer ``name`` ("adamw" or "muon") over ``model``'s parameters, weight decay on matrices only."""
    if name == "adamw":
        return torch.optim.AdamW(param_groups(model, weight_decay), lr=lr)
    if name == "muon":
        return MuonAdamW(model, lr, weight_decay)
    raise ValueError(f"optimizer must be one of {', '.join(OPTIMIZERS)}; got {name!r}")


__all__ = ["OPTIMIZERS", "MuonAdamW", "hidden_matrices", "make_optimizer", "param_groups"]
