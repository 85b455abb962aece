"""A dict that refuses changes, for settings that everyone who reads them shares (the training presets' model
overrides, the model registry's keyword arguments): an edit would silently change every later run or model."""

from __future__ import annotations

from typing import Any


class FrozenDict(dict):
    """A dict whose every mutating method raises ``TypeError(self.refusal)``; subclasses say how to build a variant
    instead. ``copy``, ``deepcopy`` and ``pickle`` rebuild it whole, and ``dict(frozen)`` is a mutable copy."""

    refusal = "these settings are shared and cannot change; copy them first: settings = dict(frozen)"

    def _refuse(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError(self.refusal)

    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = __ior__ = _refuse

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (dict(self),))


__all__ = ["FrozenDict"]
