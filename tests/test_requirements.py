"""requirements.txt is what a reader installs to run the notebooks: it must name everything they import.

`make check-newest` proves it the slow way (a fresh environment from requirements.txt, every notebook re-run
by nbval); this is the fast check that CI runs on every change: every module imported by a chapter, an
assignment or the package is in the standard library, is vitedu itself, or comes from a distribution that
requirements.txt names. And the package must not print a warning on import inside a notebook without
ipywidgets (tqdm.auto does), which nbval would count as an output.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
import textwrap

import pytest
from book_pages import ROOT

# Import names that differ from the distribution that provides them (normalised distribution names).
DISTRIBUTION = {"sklearn": "scikit-learn", "PIL": "pillow", "yaml": "pyyaml", "cv2": "opencv-python"}
# vitedu imports these only inside the function that needs them, and says what to install when they are missing.
OPTIONAL_FOR_THE_PACKAGE = {"huggingface_hub", "matplotlib", "sklearn"}


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirements(path) -> set[str]:
    names = set()
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line and not line.startswith("-"):
            names.add(_normalise(re.match(r"[A-Za-z0-9_.-]+", line).group(0)))
    return names


def _top_level_imports(source: str) -> set[str]:
    # IPython magics and shell escapes (%pip, !ls) are not Python; keep their indentation so blocks stay valid.
    source = "\n".join(re.sub(r"^(\s*)[%!].*$", r"\1pass", line) for line in source.splitlines())
    modules = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            modules |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            modules.add(node.module.split(".")[0])
    return modules


def _notebooks() -> list:
    return sorted(p for p in (ROOT / "notebooks").rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)


def _notebook_imports(path) -> set[str]:
    cells = json.loads(path.read_text())["cells"]
    return set().union(*(_top_level_imports("".join(c["source"])) for c in cells if c["cell_type"] == "code"))


def _missing(modules: set[str], required: set[str]) -> set[str]:
    local = {"vitedu", "__future__"}
    return {m for m in modules if m not in sys.stdlib_module_names and m not in local
            and _normalise(DISTRIBUTION.get(m, m)) not in required}


def test_there_are_notebooks_and_imports_to_check():
    notebooks = _notebooks()
    assert len(notebooks) >= 10, notebooks
    assert {"torch", "vitedu", "matplotlib"} <= _notebook_imports(ROOT / "notebooks" / "01_self_attention.ipynb")


@pytest.mark.parametrize("path", _notebooks(), ids=lambda p: p.relative_to(ROOT / "notebooks").as_posix())
def test_requirements_cover_every_notebook_import(path):
    missing = _missing(_notebook_imports(path), _requirements(ROOT / "requirements.txt"))
    assert not missing, f"{path.name} imports {sorted(missing)}, which requirements.txt does not install"


def test_requirements_cover_every_import_of_the_package():
    modules = set().union(*(_top_level_imports(p.read_text()) for p in (ROOT / "vitedu").rglob("*.py")))
    assert {"torch", "einops", "safetensors"} <= modules
    missing = _missing(modules, _requirements(ROOT / "requirements.txt"))
    assert not missing, f"vitedu imports {sorted(missing)}, which requirements.txt does not install"
    # pip install vitedu (pyproject.toml) brings what the package imports at module level.
    import tomllib

    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    installed = {_normalise(re.match(r"[A-Za-z0-9_.-]+", d).group(0)) for d in dependencies}
    missing = _missing(modules - OPTIONAL_FOR_THE_PACKAGE, installed)
    assert not missing, f"vitedu imports {sorted(missing)}, which pyproject.toml's dependencies do not install"


def test_the_check_finds_a_missing_requirement_and_reads_magics_and_mappings():
    source = "import sys\nif 'google.colab' in sys.modules:\n    %pip install -q x\nimport sklearn.svm\nimport PIL\n"
    assert _top_level_imports(source) == {"sys", "sklearn", "PIL"}
    assert _missing({"sklearn", "PIL", "os", "vitedu"}, {"scikit-learn", "pillow"}) == set()
    assert _missing({"sklearn", "transformers"}, {"scikit-learn"}) == {"transformers"}


def test_torch_floor_is_the_same_in_requirements_and_pyproject():
    import tomllib

    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    torch_pyproject = next(d for d in dependencies if re.match(r"torch\b", d)).split("#")[0].strip()
    torch_requirements = next(line for line in (ROOT / "requirements.txt").read_text().splitlines()
                              if re.match(r"torch\b", line)).split("#")[0].strip()
    assert torch_pyproject == torch_requirements == "torch>=2.6"  # book/testing.md says why
    assert "torch 2.6 or newer" in (ROOT / "book" / "testing.md").read_text()


@pytest.mark.integration
def test_importing_vitedu_train_in_a_notebook_without_ipywidgets_prints_no_warning():
    """In a Jupyter kernel without ipywidgets, tqdm.auto warns on import ("IProgress not found"): nbval
    sees that as an output of the cell, and a reader sees noise. The import must stay silent there."""
    code = textwrap.dedent("""
        import sys, types, warnings
        sys.modules["ipywidgets"] = None            # not installed
        sys.modules["ipykernel.zmqshell"] = types.ModuleType("ipykernel.zmqshell")  # inside a Jupyter kernel
        class ZMQInteractiveShell: pass
        ipython = types.ModuleType("IPython")
        ipython.get_ipython = lambda: ZMQInteractiveShell()
        sys.modules["IPython"] = ipython
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            import tqdm.autonotebook                # what the kernel would show with tqdm.auto: the warning
            assert any("IProgress" in str(w.message) for w in caught), "the simulated kernel is not one"
            for name in [m for m in sys.modules if m.startswith("tqdm")]:
                del sys.modules[name]
            caught.clear()
            import vitedu.train
        print([str(w.message) for w in caught])
    """)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]", result.stdout


def test_nbformat_imports_no_grammar_builder() -> None:
    """Every test process, nbconvert, nbgrader and the book build import nbformat, and with it jsonschema. From
    jsonschema 4.24 its format checker imports rfc3987-syntax, which compiles a lark grammar at import: seconds
    of CPU per process. constraints.txt pins jsonschema to 4.23.0, which does not; this keeps that pin honest."""
    code = "import sys, nbformat; print(sorted(m for m in ('rfc3987_syntax', 'lark') if m in sys.modules))"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert loaded == "[]", (
        f"importing nbformat loads {loaded}: jsonschema >= 4.24 imports rfc3987-syntax (a lark grammar built at "
        "import, seconds per process). Install with -c constraints.txt (jsonschema==4.23.0)."
    )
