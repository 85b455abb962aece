"""ARCHITECTURE.md is true: its layer table names every module of vitedu once, no import (also one inside a
function) goes to a higher layer or to a later room of its own layer, and its graph is the graph of the layers'
imports. The scripts of tools/ and benchmarks/ keep its folder rule, checked on what they really import and
run."""

from __future__ import annotations

import ast
import functools
import importlib.machinery
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "vitedu"
TEXT = (ROOT / "ARCHITECTURE.md").read_text()


@functools.cache
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


SCRIPT_FOLDERS = ("tools", "benchmarks")
LOADERS = {"spec_from_file_location", "run_path", "SourceFileLoader", "exec", "run", "Popen", "call", "check_call",
           "check_output"}  # what runs another file's code: importlib, runpy, exec and subprocess


def clean_path(folder: Path) -> list[str]:
    """The import path of ``python <folder>/<script>.py``: its folder, then this environment's path without the
    project's folders (which a test process adds, and a script's run does not have)."""
    return [str(folder)] + [p for p in sys.path if p and not Path(p).resolve().is_relative_to(ROOT)]


def where_an_import_goes(top: str, folder: Path) -> Path | None:
    """The file Python would load for ``import top`` in a script of ``folder`` (None: built in, or not here)."""
    if top == "vitedu":
        return PACKAGE / "__init__.py"
    spec = importlib.machinery.PathFinder.find_spec(top, clean_path(folder))
    if spec and spec.origin and spec.origin != "frozen":
        return Path(spec.origin).resolve()
    elsewhere = [p for f in ("tests", *SCRIPT_FOLDERS) for p in [ROOT / f / f"{top}.py"] if p.is_file()]
    return elsewhere[0] if elsewhere else None  # a module of another project folder fails too: it is named


def constants(node: ast.AST, assigned: dict[str, list[ast.AST]], seen: frozenset = frozenset()) -> list[str]:
    """The strings an expression is built from, following the names it uses to the values they are given."""
    found = []
    for sub in ast.walk(node):
        if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
            found.append(sub.value)
        elif isinstance(sub, ast.Attribute) and sub.attr == "parent" and isinstance(sub.value, ast.Attribute) \
                and sub.value.attr == "parent":
            found.append("..")  # Path(__file__).parent.parent: out of the script's folder
        elif isinstance(sub, ast.Subscript) and isinstance(sub.value, ast.Attribute) and sub.value.attr == "parents":
            found.append("..")  # Path(__file__).parents[1]
        elif isinstance(sub, ast.Name) and sub.id in assigned and sub.id not in seen:
            found += [w for value in assigned[sub.id] for w in constants(value, assigned, seen | {sub.id})]
    return found


def folder_rule_breaches(source: str, folder: Path) -> list[str]:
    """What a script of ``folder`` does against ARCHITECTURE.md's rule: an import that Python finds in the
    project but outside vitedu/ and the script's own folder; code of another file run from a path that leaves
    the folder (importlib, runpy, exec, a subprocess running a .py file); any edit of sys.path."""
    tree = ast.parse(source)
    assigned: dict[str, list[ast.AST]] = {}  # every value a name is given, in any function
    for node in ast.walk(tree):
        for t in node.targets if isinstance(node, ast.Assign) else []:
            if isinstance(t, ast.Name):
                assigned.setdefault(t.id, []).append(node.value)
    breaches = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)) and not getattr(node, "level", 0):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            for name in names:
                origin = where_an_import_goes(name.split(".")[0], folder)
                if origin and origin.is_relative_to(ROOT) and not (origin.is_relative_to(PACKAGE)
                                                                  or origin.parent == folder):
                    breaches.append(f"imports {name} from {origin.relative_to(ROOT)}")
        elif isinstance(node, ast.Call):
            func = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            target = node.func.value if isinstance(node.func, ast.Attribute) else None
            if func in {"insert", "append", "extend", "remove"} and isinstance(target, ast.Attribute) \
                    and target.attr == "path" and getattr(target.value, "id", "") == "sys":
                breaches.append(f"edits sys.path (sys.path.{func})")
            elif func in LOADERS:
                words = [w for arg in [*node.args, *(k.value for k in node.keywords if k.arg not in {"cwd", "env"})]
                         for w in constants(arg, assigned)]
                runs_code = func != "run" or any(w.endswith(".py") for w in words) or "sys" in ast.dump(node)
                outside = [w for w in words if w == ".." or w.split("/")[0] in {"tests", "tools", "benchmarks",
                                                                                   "notebooks"} - {folder.name}]
                if runs_code and outside:
                    breaches.append(f"runs code from outside {folder.name}/ ({func} with {', '.join(outside)})")
        elif isinstance(node, (ast.Assign, ast.AugAssign)):
            for t in node.targets if isinstance(node, ast.Assign) else [node.target]:
                base = t.value if isinstance(t, ast.Subscript) else t
                if isinstance(base, ast.Attribute) and base.attr == "path" and getattr(base.value, "id", "") == "sys":
                    breaches.append("edits sys.path (assignment)")
    return breaches


def test_scripts_keep_the_folder_rule():
    """Every script of tools/ and benchmarks/ imports only the standard library, installed packages, vitedu and
    its own neighbours, runs no code of another project folder, and leaves sys.path alone."""
    scripts = [p for folder in SCRIPT_FOLDERS for p in sorted((ROOT / folder).glob("*.py"))]
    breaches = {str(p.relative_to(ROOT)): found for p in scripts if (found := folder_rule_breaches(p.read_text(),
                                                                                                  p.parent))}
    assert not breaches, breaches


def test_the_folder_rule_check_finds_each_kind_of_breach():
    """The check above on a script that breaks the rule each way it looks for (so its silence means something)."""
    bad = """
import sys
from pathlib import Path
import importlib.util
import subprocess
from tools_loader import load_tool          # a helper of tests/
import honest_arms                           # a neighbour: allowed
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path = ["x"]
spec = importlib.util.spec_from_file_location("ref", ROOT / "tests" / "timm_reference.py")
def gpu():
    tool = ROOT / "tools" / "gpu_sweep.py"
    cmd = [sys.executable, str(tool), "--jobs"]
    subprocess.run(cmd, check=True)
subprocess.run(["split", "-b", "15M", "a", "b"])  # not Python code
"""
    found = folder_rule_breaches(bad, ROOT / "benchmarks")
    assert sorted(found) == ["edits sys.path (assignment)", "edits sys.path (sys.path.insert)",
                             "imports tools_loader from tests/tools_loader.py",
                             "runs code from outside benchmarks/ (run with .., tools)",
                             "runs code from outside benchmarks/ (spec_from_file_location with .., tests)"], found


def test_the_measuring_scripts_live_in_benchmarks():
    """tools/ writes the shipped assets; what sweeps, compares or times runs lives in benchmarks/ (its results in
    benchmarks/results/), so nothing in tools/ writes there."""
    writing = [p.name for p in sorted((ROOT / "tools").glob("*.py"))
               if any("results" in w.split("/") for node in ast.walk(ast.parse(p.read_text()))
                      if isinstance(node, ast.Constant) and isinstance(node.value, str) for w in [node.value])]
    assert not writing, writing
    assert {"sweep_cluttered.py", "compare_cluttered.py", "gpu_sweep.py"} <= {p.name for p in
                                                                            (ROOT / "benchmarks").glob("*.py")}


@functools.cache
def defined_names(module: str) -> set[str] | None:
    """What ``vitedu.<module>`` itself defines (def, class, assignment); None for a package, whose names are
    its door (``vitedu.create_model``, ``vitedu.checks.check_attention``)."""
    path = modules().get(module)
    if path is None or path.name == "__init__.py":
        return None
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.col_offset == 0:
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.col_offset == 0:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return names


@functools.cache
def bound_modules(module: str) -> set[str]:
    """The names ``vitedu.<module>`` binds to modules (``import torch``, ``from . import distributed``): a test may
    reach through them (``monkeypatch.setattr(T.distributed, ...)``) without taking a name the long way."""
    tree = ast.parse(modules()[module].read_text())
    found = {(a.asname or a.name).split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    return found | {a.asname or a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
                    and n.level and not n.module for a in n.names}


def long_way_names(source: str, where: str, package: str = "") -> list[str]:
    """Names a source takes from a vitedu module that does not define them (``from vitedu.train import PRESETS``,
    ``T.PRESETS`` with ``from vitedu import train as T``, ``vitedu.data.load_digits``). ``package`` resolves the
    relative imports of a module inside vitedu."""
    tree, known = ast.parse(source), set(modules())
    stored = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    aliases, found = {}, []

    def take(module: str, name: str, how: str) -> None:
        names = defined_names(module)
        if names is not None and name not in names and f"{module}.{name}" not in known \
                and name not in bound_modules(module):
            found.append(f"{where}: {how} (vitedu.{module} does not define {name})")

    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".") if package else []
                base = parts[: len(parts) - node.level + 1] if node.level > 1 else parts
                module = ".".join([*base, node.module] if node.module else base)
            elif (node.module or "") == "vitedu" or (node.module or "").startswith("vitedu."):
                module = node.module.removeprefix("vitedu").lstrip(".")
            else:
                continue
            for alias in node.names:
                full = f"{module}.{alias.name}".lstrip(".")
                if full in known:
                    aliases[alias.asname or alias.name] = full
                elif module:
                    take(module, alias.name, f"from vitedu.{module} import {alias.name}")
        elif isinstance(node, ast.Import):
            aliases |= {a.asname: a.name.removeprefix("vitedu.") for a in node.names
                        if a.asname and a.name.startswith("vitedu.")}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        if isinstance(node.value, ast.Name) and node.value.id in aliases and node.value.id not in stored:
            take(aliases[node.value.id], node.attr, f"{node.value.id}.{node.attr}")
        chain, inner = [node.attr], node.value
        while isinstance(inner, ast.Attribute):
            chain, inner = [inner.attr, *chain], inner.value
        if isinstance(inner, ast.Name) and inner.id == "vitedu" and len(chain) == 2 and chain[0] in known:
            take(chain[0], chain[1], f"vitedu.{'.'.join(chain)}")
    return found


@functools.cache
def sources() -> list[tuple[str, str, str]]:
    """(where, source, package) of every Python source: the package, tests, tools, benchmarks, and each notebook's
    code cells joined in order (an alias imported in one cell is used in the next)."""
    found = []
    for name, path in modules().items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found.append((f"vitedu/{path.relative_to(PACKAGE)}", path.read_text(), "" if package == "vitedu" else package))
    for folder in ("tests", *SCRIPT_FOLDERS):
        found += [(str(p.relative_to(ROOT)), p.read_text(), "") for p in sorted((ROOT / folder).glob("*.py"))]
    for path in sorted((ROOT / "notebooks").rglob("*.ipynb")):
        lines = [line for cell in json.loads(path.read_text())["cells"] if cell["cell_type"] == "code"
                 for line in "".join(cell["source"]).splitlines()]
        code = "\n".join(line[: len(line) - len(line.lstrip())] + "pass" if line.lstrip().startswith(("%", "!"))
                         else line for line in lines)  # IPython's magics and shell lines: no names
        found.append((str(path.relative_to(ROOT)), code, ""))
    return found


def test_each_name_comes_from_the_module_that_defines_it():
    """The package, its tests, scripts and chapters import each name from where it is defined, not through a
    module that happens to import it (the packages `vitedu` and `vitedu.checks` are doors, and may)."""
    assert len(sources()) > 150  # the package, tests, scripts and every notebook
    found = [line for where, source, package in sources() for line in long_way_names(source, where, package)]
    assert not found, found


def test_a_name_taken_the_long_way_is_found():
    bad = """
import vitedu
from vitedu import train as T
from vitedu.data import load_digits, make_loaders
from vitedu.models import create_model
config = T.PRESETS["digits"]
images = vitedu.data.load_cluttered_digits("test")
T.fit(config)
"""
    assert long_way_names(bad, "bad.py") == [
        "bad.py: from vitedu.data import load_digits (vitedu.data does not define load_digits)",
        "bad.py: T.PRESETS (vitedu.train does not define PRESETS)",
        "bad.py: vitedu.data.load_cluttered_digits (vitedu.data does not define load_cluttered_digits)"]
