"""Checkpoint files written by other projects (timm, Hugging Face, DeiT, MAE), read safely.

Safetensors, pickled ``.pth``/``.bin``, JSON configs, training wrappers. (A vitedu run's own files, written to be
resumed, are ``vitedu.run_files``'.)

Every way a file can be wrong (empty, truncated, corrupt, holding Python objects, wrapped by a training
script) ends in one ``CheckpointError`` (a ``ValueError``) that names the file and says what to do. Loading
never runs code from the checkpoint: safetensors files hold only tensors, and pickled files are read with
``torch.load(weights_only=True)``, which refuses anything but tensors and plain containers.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file
from torch import Tensor

# Where training scripts keep the weights inside a checkpoint: timm's train.py ("state_dict",
# "state_dict_ema"), DeiT/MAE ("model", "model_ema"), Lightning-style scripts ("model_state").
WRAPPER_KEYS = ("state_dict", "model", "model_state", "model_ema", "state_dict_ema", "module")
# Prefixes added by torch.nn.parallel.DistributedDataParallel / DataParallel and by torch.compile.
WRAPPER_PREFIXES = ("module.", "_orig_mod.")


class CheckpointError(ValueError):
    """A checkpoint or config file that cannot be read as one; the message names the file and says what to do."""


def read_json(path: Path) -> dict[str, Any]:
    """Read a JSON object (a model's config.json), with an error that names the file when it is broken."""
    try:
        config = json.loads(Path(path).read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise CheckpointError(f"{path} is not a readable JSON file ({err}); re-download or re-save it") from err
    if not isinstance(config, dict):
        raise CheckpointError(f"{path} should hold a JSON object (a model configuration), got a "
                              f"{type(config).__name__}")
    return config


def require_types(config: dict[str, Any], types: dict[str, Any], source: Any) -> None:
    """A ValueError naming every field of a config that has the wrong type (absent fields are not checked)."""
    def ok(value: Any, expected: Any) -> bool:
        if isinstance(value, bool) and expected in (int, float):  # True is an int to Python, not to a config
            return False
        return isinstance(value, (int, float) if expected is float else expected)

    def names(expected: Any) -> str:  # int -> "int", (list, dict) -> "list or dict"
        return " or ".join(t.__name__ for t in (expected if isinstance(expected, tuple) else (expected,)))

    wrong = [f"{k}={config[k]!r} (expected {names(t)})"
             for k, t in types.items() if config.get(k) is not None and not ok(config[k], t)]
    if wrong:
        raise CheckpointError(f"{source} has fields of the wrong type: {', '.join(wrong)}")


def read_state_dict(path: Path, checkpoint_key: str | None = None) -> tuple[dict[str, Tensor], dict[str, Any]]:
    """Read the tensors of a ``.safetensors``, ``.pth``, ``.pt`` or ``.bin`` file.

    Returns (state_dict, extras): a training checkpoint such as ``{"model": ..., "epoch": 3, "arch": ...}`` is
    unwrapped to its weights (``checkpoint_key`` picks the entry when there are several, e.g. ``"model_ema"``),
    and its other plain entries come back in ``extras``. DDP's ``module.`` prefix is removed.
    """
    path = Path(path)
    if path.stat().st_size == 0:
        raise CheckpointError(f"{path} is empty (0 bytes): the download or save was interrupted; fetch or save it "
                              f"again")
    if path.suffix == ".safetensors":
        state: Any = _read_safetensors(path)
    else:
        state = _read_pickle(path)
    state, extras = _unwrap(path, state, checkpoint_key)
    return _strip_prefixes(state), extras


def _read_safetensors(path: Path) -> dict[str, Tensor]:

    try:
        return load_file(str(path))
    except Exception as err:  # safetensors raises its own SafetensorError, or OSError for unreadable files
        raise CheckpointError(
            f"{path} is not a valid safetensors file ({type(err).__name__}: {err}); it may be truncated or "
            f"corrupt: fetch or save it again"
        ) from err


def _read_pickle(path: Path) -> Any:
    try:
        return torch.load(path, map_location="cpu", weights_only=True)  # tensors only: no code can run
    except Exception as err:  # UnpicklingError, RuntimeError (bad zip), EOFError (truncated), ...
        found = re.search(r"Unsupported global: GLOBAL (\S+)", str(err))
        if found:
            raise CheckpointError(
                f"{path} holds Python objects besides tensors (e.g. {found.group(1)}); vitedu refuses to unpickle "
                f"them, because unpickling can run arbitrary code. Re-save only the weights: "
                f"torch.save(model.state_dict(), path) (or use safetensors)"
            ) from err
        # torch's own text may advise weights_only=False, which is wrong for a broken file: keep only the cause.
        detail = str(err).split("WeightsUnpickler error:", 1)[-1].strip().splitlines()[0] if str(err) else ""
        raise CheckpointError(
            f"{path} is not a readable PyTorch checkpoint ({type(err).__name__}: {detail}); it may be truncated or "
            f"corrupt, or not a torch.save file at all: fetch or save it again"
        ) from err


def _is_state_dict(obj: Any) -> bool:
    return isinstance(obj, dict) and bool(obj) and all(isinstance(v, Tensor) for v in obj.values())


def _unwrap(path: Path, state: Any, checkpoint_key: str | None) -> tuple[dict[str, Tensor], dict[str, Any]]:
    if not isinstance(state, dict):
        raise CheckpointError(f"{path} holds a {type(state).__name__}, not a dict of tensors (a state_dict)")
    if checkpoint_key is not None:
        if not _is_state_dict(state.get(checkpoint_key)):
            raise CheckpointError(f"{path} has no state_dict under {checkpoint_key!r}; its entries: {sorted(state)}")
        return state[checkpoint_key], {k: v for k, v in state.items() if k != checkpoint_key}
    if _is_state_dict(state):
        return state, {}
    candidates = [k for k in WRAPPER_KEYS if _is_state_dict(state.get(k))]
    if len(candidates) == 1:
        return state[candidates[0]], {k: v for k, v in state.items() if k != candidates[0]}
    entries = {k: type(v).__name__ for k, v in state.items()}
    if candidates:
        raise CheckpointError(
            f"{path} holds several sets of weights {candidates} (e.g. the model and its EMA); "
            f"pick one with checkpoint_key={candidates[0]!r}"
        )
    raise CheckpointError(
        f"{path} is not a state_dict (a dict of tensors) and has none under {list(WRAPPER_KEYS)}; its entries: "
        f"{entries}. Pass checkpoint_key='<entry holding the weights>'"
    )


def _strip_prefixes(state: dict[str, Tensor]) -> dict[str, Tensor]:
    for prefix in WRAPPER_PREFIXES:
        if all(k.startswith(prefix) for k in state):
            state = {k.removeprefix(prefix): v for k, v in state.items()}
    return state
