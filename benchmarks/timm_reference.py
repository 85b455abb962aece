"""Import timm's real VisionTransformer as a test reference, on machines without torchvision.

timm imports torchvision at start-up for image transforms and detection ops that a ViT never uses, and
torchvision has no CPU wheel matching our pinned torch. When torchvision is missing, we register an
empty stand-in package whose attributes are dummy classes, so that ``import timm`` succeeds; the code
under comparison (``timm.models.vision_transformer``) is timm's own and does not touch the stand-in.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types


class _DummyMeta(type):  # class attributes (e.g. InterpolationMode.NEAREST) are dummies too
    def __getattr__(cls, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        return _DummyMeta(name, (_Dummy,), {})


class _Dummy(metaclass=_DummyMeta):  # whatever timm imports from torchvision (never called by a ViT)
    def __init__(self, *args, **kwargs):
        raise RuntimeError("torchvision stand-in: this torchvision feature is not available in the tests")


class _StubModule(types.ModuleType):
    __path__: list[str] = []

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        return _DummyMeta(name, (_Dummy,), {})


class _StubFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path, target=None):
        if fullname == "torchvision" or fullname.startswith("torchvision."):
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        return _StubModule(spec.name)

    def exec_module(self, module):
        module.__version__ = "0.0.0+stub"


def import_timm():
    """Return the ``timm`` module, or None if timm is not installed."""
    if importlib.util.find_spec("timm") is None:
        return None
    if importlib.util.find_spec("torchvision") is not None or "timm" in sys.modules:
        import timm

        return timm
    finder = _StubFinder()
    sys.meta_path.append(finder)
    try:
        import timm
    finally:
        # timm keeps the dummies it imported; nothing else may find the stand-in afterwards (transformers asks
        # importlib whether torchvision is installed, and would route its image processors through the dummies).
        sys.meta_path.remove(finder)
        for name in [n for n in sys.modules if n == "torchvision" or n.startswith("torchvision.")]:
            del sys.modules[name]
    return timm
