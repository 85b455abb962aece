"""ARCHITECTURE.md is true: its layer table names every module of vitedu once, no import (also one inside a
function) goes to a higher layer or to a later room of its own layer, and its graph is the graph of the layers'
imports. The scripts of tools/ and benchmarks/ do not edit sys.path."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "vitedu"
TEXT = (ROOT / "ARCHITECTURE.md").read_text()


def modules() -> dict[str, Path]:
    """Module name relative to the package (``checks.diagnosis``; the package itself is ``vitedu``) -> file."""
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        name = ".".join(parts).removesuffix("__init__").rstrip(".") or "vitedu"
        found[name] = path
    return found


def imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The vitedu modules that ``name`` imports anywhere in its file."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    package = "" if package == "vitedu" else package
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: max(0, len(package.split(".")) - node.level + 1)] if package else []
                target = ".".join(base + ([node.module] if node.module else []))
            elif (node.module or "").startswith("vitedu."):
                target = node.module.removeprefix("vitedu.")
            else:
                continue
            for alias in node.names:
                full = f"{target}.{alias.name}" if target else alias.name
                found.add(full if full in known else target)
        elif isinstance(node, ast.Import):
            found |= {a.name.removeprefix("vitedu.") for a in node.names if a.name.startswith("vitedu.")}
    return {m for m in found if m in known and m != name}


def layer_table() -> list[tuple[str, list[str]]]:
    """(layer, rooms in order) per row of the table."""
    rows = re.findall(r"^\| ([a-z][a-z ]*) \| ([^|]+) \|", TEXT, re.M)
    return [(layer, re.findall(r"`([\w.]+)`", rooms)) for layer, rooms in rows if layer != "layer"]


def rank() -> dict[str, tuple[int, int]]:
    return {room: (i, j) for i, (_, rooms) in enumerate(layer_table()) for j, room in enumerate(rooms)}


def test_the_layer_table_names_every_module_once():
    named = [room for _, rooms in layer_table() for room in rooms]
    assert len(named) == len(set(named)), "a room stands in two places"
    assert set(named) == set(modules()) - {"vitedu"}, set(named) ^ (set(modules()) - {"vitedu"})


def test_no_import_goes_upwards():
    known, order = set(modules()), rank()
    upward = [f"{name} imports {other}" for name, path in modules().items() if name != "vitedu"
              for other in sorted(imports(name, path, known)) if order[other] >= order[name]]
    assert not upward, upward


def test_the_package_door_imports_the_core_and_the_vit():
    door = imports("vitedu", PACKAGE / "__init__.py", set(modules()))
    layer = dict(layer_table())
    assert door <= set(layer["core"]) | {"vit"}, door


def test_the_graph_is_the_graph_of_the_layers_imports():
    known, order, names = set(modules()), rank(), [layer for layer, _ in layer_table()]
    actual = {(names[order[other][0]], names[order[name][0]]) for name, path in modules().items() if name != "vitedu"
              for other in imports(name, path, known) if order[other][0] != order[name][0]}
    graph = re.search(r"```mermaid\n(.*?)```", TEXT, re.S)[1]
    drawn = {(a.replace("_", " "), b.replace("_", " ")) for a, b in re.findall(r"^\s*(\w+) --> (\w+)$", graph, re.M)}
    assert drawn == actual, f"drawn but not imported: {drawn - actual}; imported but not drawn: {actual - drawn}"


def test_scripts_do_not_edit_the_import_path():
    scripts = sorted((ROOT / "tools").glob("*.py")) + sorted((ROOT / "benchmarks").glob("*.py"))
    editing = [str(p.relative_to(ROOT)) for p in scripts if "sys.path.insert" in p.read_text()
               or "sys.path.append" in p.read_text()]
    # the one exception ARCHITECTURE.md names: gpu_sweep loads a runner of another folder (benchmarks/honest_study.py)
    # that imports its own neighbours
    assert editing == ["tools/gpu_sweep.py"] and "tools/gpu_sweep.py" in TEXT, editing
