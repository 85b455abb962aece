"""The book's configuration: Colab badges and install cells, the references, the API reference, chapter numbers.

`repository.url` in _config.yml is the one place the repository's address lives. Every notebook in the
table of contents, and every student notebook under notebooks/assignments/release/, must point its
"Open in Colab" badge and its Colab install cell at that address, so moving the repository is a
one-line change that this test then enforces everywhere. Fast: needs no build.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
import sys
from pathlib import Path

import nbformat
import pytest
import yaml
from book_pages import COLAB_BADGE_IMAGE, ROOT, book_config, colab_url, notebook_pages, toc_pages

import vitedu

RELEASE = ROOT / "notebooks" / "assignments" / "release"
COLAB_LINK = re.compile(r"https://colab\.research\.google\.com/github/[^\s)\"'>]+")
GUARD = 'if "google.colab" in sys.modules:'
PIP_INSTALL = re.compile(r"^(\s*)[%!]\s*pip install\b(.*)$")


def _repo_path(path: Path) -> str:
    return path.resolve().relative_to(ROOT).as_posix()


def _notebooks() -> list[str]:
    """Repo paths of the TOC notebooks, every chapter notebook in notebooks/ (readers open them from GitHub
    too, listed or not) and the released assignment notebooks, without duplicates."""
    paths = [_repo_path(page.source) for page in notebook_pages()]
    paths += [_repo_path(p) for p in sorted((ROOT / "notebooks").glob("*.ipynb"))]
    paths += [_repo_path(p) for p in sorted(RELEASE.rglob("*.ipynb")) if ".ipynb_checkpoints" not in p.parts]
    return list(dict.fromkeys(paths))


def test_config_has_one_repository_and_colab_launch() -> None:
    config = book_config()
    repository = config["repository"]
    assert re.fullmatch(r"https://github\.com/[\w.-]+/[\w.-]+", repository["url"]), repository["url"]
    assert repository["branch"] == "main"
    assert config["launch_buttons"]["colab_url"] == "https://colab.research.google.com"
    assert config["execute"]["execute_notebooks"] == "off", "the book renders stored outputs; nbval checks them"
    assert colab_url("notebooks/x.ipynb").startswith(
        "https://colab.research.google.com/github/" + repository["url"].removeprefix("https://github.com/")
    )


def test_there_are_notebooks_to_check() -> None:
    # Guards the parametrisation below: a TOC that lost its chapters must not pass by checking nothing.
    # (Before the first chapter lands this is the one test that says so.)
    assert _notebooks(), "no notebook in _toc.yml or notebooks/assignments/release/"


@pytest.mark.parametrize("path", _notebooks())
def test_notebook_colab_badge_derives_from_repository_url(path: str) -> None:
    nb = nbformat.read(ROOT / path, as_version=4)
    markdown = "\n".join(cell.source for cell in nb.cells if cell.cell_type == "markdown")
    expected = colab_url(path)
    badge = f"[![Open In Colab]({COLAB_BADGE_IMAGE})]({expected})"
    assert badge in nb.cells[0].source, f"{path}: the first cell needs the Colab badge\n  {badge}"
    wrong = sorted({url for url in COLAB_LINK.findall(markdown) if url != expected})
    assert not wrong, f"{path}: Colab links that do not open this notebook from {expected}: {wrong}"


@pytest.mark.parametrize("path", _notebooks())
def test_notebook_installs_vitedu_only_on_colab_from_repository_url(path: str) -> None:
    nb = nbformat.read(ROOT / path, as_version=4)
    code = [cell for cell in nb.cells if cell.cell_type == "code"]
    assert code, f"{path} has no code cell"
    lines = code[0].source.splitlines()
    guards = [i for i, line in enumerate(lines) if line.lstrip().startswith(GUARD)]
    assert "import sys" in lines and guards, (
        f"{path}: the first code cell must be the Colab install cell, guarded by `{GUARD}`"
    )
    guard = guards[0]
    guard_indent = len(lines[guard]) - len(lines[guard].lstrip())
    installs = [(i, m) for i, line in enumerate(lines) if (m := PIP_INSTALL.match(line))]
    assert installs, f"{path}: the Colab install cell installs nothing"
    url = book_config()["repository"]["url"]
    for i, match in installs:
        assert i > guard and len(match.group(1)) > guard_indent, (
            f"{path}: `{lines[i].strip()}` must be inside the `{GUARD}` block"
        )
        assert f"git+{url}" in match.group(2).replace('"', " ").replace("'", " ").split(), (
            f"{path}: the install cell must install the package from git+{url}, got `{lines[i].strip()}`"
        )
    # No other cell may install anything: outside Colab the reader's environment is left alone.
    for cell in code[1:]:
        assert not any(PIP_INSTALL.match(line) for line in cell.source.splitlines()), (
            f"{path}: only the first, Colab-guarded cell may pip install:\n{cell.source}"
        )


def test_colab_links_on_prose_pages_open_existing_notebooks() -> None:
    # e.g. the Assignments page links each student notebook: the link must derive from repository.url
    # and name a notebook that exists, or a reader gets Colab's "notebook not found".
    prefix = colab_url("")
    assignments = ROOT / "book" / "assignments.md"
    pages = {page.source for page in toc_pages() if not page.is_notebook} | {assignments}
    for source in sorted(p for p in pages if p.is_file()):
        urls = COLAB_LINK.findall(source.read_text())
        assert urls or source != assignments, "the Assignments page links no notebook"
        for url in urls:
            assert url.startswith(prefix), f"{source.name}: {url} does not start with {prefix}"
            path = url.removeprefix(prefix)
            assert path.endswith(".ipynb") and (ROOT / path).is_file(), (
                f"{source.name}: {url} opens {path}, which is not a notebook in the repository"
            )


def test_chapters_are_numbered_as_their_notebooks_are() -> None:
    # Sphinx numbers the pages of the `numbered` parts of _toc.yml in order, and book/_ext/vitedu_book.py drops
    # a chapter notebook's own "N. " from its title in the book: the two numbers must be the same. So the numbered
    # parts hold exactly the chapters, notebooks/01_... to 10_..., in that order, each titled "# N. ...", and
    # nothing else (not How to run, not the explorer, not the appendix); numbers carry the chapter (Fig. 10.3).
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    numbered = [entry["file"] for part in toc["parts"] if part.get("numbered") for entry in part["chapters"]]
    chapters = sorted(p.stem for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    assert numbered == [f"notebooks/{name}" for name in chapters], f"the numbered parts of _toc.yml hold {numbered}"
    assert [int(name[:2]) for name in chapters] == list(range(1, len(chapters) + 1))
    assert all(part.get("numbered") in (None, 1) for part in toc["parts"]), "numbered: 1 numbers titles only"
    for number, name in enumerate(chapters, 1):
        nb = nbformat.read(ROOT / "notebooks" / f"{name}.ipynb", as_version=4)
        title = next(line for cell in nb.cells if cell.cell_type == "markdown"
                     for line in cell.source.splitlines() if line.startswith("# "))
        assert title.startswith(f"# {number}. "), f"{name}: the title {title!r} does not start with {number}."
    config = book_config()["sphinx"]["config"]
    assert config["numfig"] and config["numfig_secnum_depth"] == 1 and config["math_numfig"]


REQUIRED_REFERENCES = {
    "vaswani2017attention": "Vaswani",
    "dosovitskiy2021vit": "Dosovitskiy",
    "ba2016layernorm": "Ba, Jimmy",
    "hendrycks2016gelu": "Hendrycks",
    "he2016resnet": "He, Kaiming",
    "huang2016stochastic": "Huang, Gao",
    "touvron2021deit": "Touvron",
    "touvron2021cait": "Touvron",
    "dascoli2021convit": "d'Ascoli",
    "steiner2021augreg": "Steiner",
    "abnar2020rollout": "Abnar",
}


def test_bibliography_has_the_required_references() -> None:
    bib = (ROOT / "book" / "references.bib").read_text()
    entries = dict(re.findall(r"@\w+\{([^,\s]+),(.*?)\n\}", bib, flags=re.S))
    for key, author in REQUIRED_REFERENCES.items():
        assert key in entries, f"book/references.bib lacks {key}"
        assert author in entries[key], f"{key} should be by {author}"
    keys = re.findall(r"@\w+\{([^,\s]+),", bib)
    duplicates = sorted({k for k in keys if keys.count(k) > 1})
    assert not duplicates, f"duplicate keys in references.bib: {duplicates}"


def test_api_reference_documents_every_vitedu_module() -> None:
    api = (ROOT / "book" / "api.md").read_text()
    documented = set(re.findall(r"^```\{vitedu-module\} (\S+)\s*$", api, flags=re.M))
    modules = {"vitedu"} | {f"vitedu.{m.name}" for m in pkgutil.iter_modules(vitedu.__path__)}
    missing = sorted(modules - documented)
    assert not missing, (
        "book/api.md does not document " + ", ".join(missing) + ". Add a section with\n"
        + "\n".join(f"```{{vitedu-module}} {m}\n```" for m in missing)
    )
    for name in documented:  # and everything it documents exists
        importlib.import_module(name)


def test_plain_docstrings_render_as_written() -> None:
    # book/_ext/vitedu_book.py turns the house-style plain-text docstrings into valid reST.
    sys.path.insert(0, str(ROOT / "book" / "_ext"))
    try:
        from vitedu_book import plain_to_rst, public_members
    finally:
        sys.path.remove(str(ROOT / "book" / "_ext"))
    doc = [
        "Summary line (kept as it is) -> fine.",
        "",
        "q: (..., queries, d_k)   k: (..., keys, d_k)",
        "-> output (..., queries, d_v)",
        "Accepts",
        "- a directory,",
        "- a file; its configuration is read from the",
        "  tensor shapes.",
        "The model's names:",
        "",
        "    x = x + Attention(LayerNorm(x))",
        "",
        "    x = x + MLP(LayerNorm(x))",
        "after the block.",
        "",
        ".. math::",
        "",
        "   y = x",
    ]
    assert plain_to_rst(doc) == [
        "Summary line (kept as it is) -> fine.",
        "",
        "| q: (..., queries, d_k)   k: (..., keys, d_k)",
        "| -> output (..., queries, d_v)",
        "",
        "Accepts",
        "",
        "- a directory,",
        "- a file; its configuration is read from the",
        "  tensor shapes.",
        "",
        "The model's names:",
        "",
        "::",
        "",
        "    x = x + Attention(LayerNorm(x))",
        "",
        "    x = x + MLP(LayerNorm(x))",
        "",
        "after the block.",
        "",
        ".. math::",
        "",
        "   y = x",
    ]
    # A sentence wrapped so that a line starts with "(" stays one paragraph; a sentence that goes on
    # after a shape line goes on in that line (otherwise one sentence renders as three paragraphs).
    doc = [
        "The outer shape of every classifier (ViT, DeiT): encode the image into tokens",
        "([CLS] first, after the final norm), then pool them.",
        "",
        "(batch, in_chans, H, W) -> (batch, num_classes). Three convolutions (width, 2 width",
        "channels), one max-pool; the first grid_epochs epochs put the digit on the grid",
        "(position_step=GRID_STEP) -> the easy case.",
        "Subclasses build the head:",
        "(batch, tokens, dim) -> (batch, classes)",
    ]
    assert plain_to_rst(doc) == [
        "The outer shape of every classifier (ViT, DeiT): encode the image into tokens",
        "([CLS] first, after the final norm), then pool them.",
        "",
        "| (batch, in_chans, H, W) -> (batch, num_classes). Three convolutions (width, 2 width",
        "  channels), one max-pool; the first grid_epochs epochs put the digit on the grid",
        "  (position_step=GRID_STEP) -> the easy case.",
        "",
        "Subclasses build the head:",
        "",
        "| (batch, tokens, dim) -> (batch, classes)",
    ]
    names = [name for name, _ in public_members("vitedu.attention")]
    assert names == ["scaled_dot_product_attention", "check_num_heads", "split_heads", "merge_heads",
                     "AttentionBase", "MultiHeadSelfAttention"]


def test_docstrings_typeset_maths_and_link_citations_on_the_api_page() -> None:
    sys.path.insert(0, str(ROOT / "book" / "_ext"))
    try:
        from vitedu_book import CITATIONS, MODULE_CITATIONS, typeset
    finally:
        sys.path.remove(str(ROOT / "book" / "_ext"))
    doc = ["Attention (Vaswani et al., 2017): $N = HW/P^2$ tokens, a cost of $5 (not maths).",
           "Stochastic depth (DropPath, Huang et al., 2016).", "::", "", "    $x$ (Vaswani et al., 2017)",
           "| (batch, tokens) -> $y$", "CaiT (Touvron et al., 2021)."]
    assert typeset(doc, "vitedu.cait") == [
        "Attention :cite:p:`vaswani2017attention`: :math:`N = HW/P^2` tokens, a cost of $5 (not maths).",
        "Stochastic depth (DropPath, :cite:t:`huang2016stochastic`).", "::", "", "    $x$ (Vaswani et al., 2017)",
        "| (batch, tokens) -> $y$", "CaiT :cite:p:`touvron2021cait`."]
    assert typeset(["(Touvron et al., 2021)"], "vitedu.deit") == [":cite:p:`touvron2021deit`"]
    # every key is in the bibliography
    bib = (ROOT / "book" / "references.bib").read_text()
    keys = set(CITATIONS.values()) | {k for table in MODULE_CITATIONS.values() for k in table.values()}
    assert all(re.search(rf"@\w+\{{{key},", bib) for key in keys), keys


# `pytest --nbval` from the repository root, with no other flag, is the project's notebook check: it must
# re-execute every chapter and every assignment source (never the student releases), in this environment's
# kernel, with the sanitiser, and still run the tests in tests/ (pyproject.toml's testpaths, conftest.py).
# The plugin records the test modules pytest collects without importing them: importing all of tests/ was
# most of this test's time, and the suite imports (and runs) each of them anyway. The notebooks are
# collected as usual, cell by cell.
NBVAL_OPTIONS_PLUGIN = '''
import json, os

import pytest

test_modules = []

@pytest.hookimpl(wrapper=True)
def pytest_collect_file(file_path, parent):
    nodes = yield
    test_modules.extend(node.nodeid for node in nodes if isinstance(node, pytest.Module))
    return [node for node in nodes if not isinstance(node, pytest.Module)]

def pytest_collection_finish(session):
    option = session.config.option
    with open(os.environ["NBVAL_OPTIONS_OUT"], "w") as out:
        json.dump({"current_env": option.nbval_current_env, "sanitize_with": option.nbval_sanitize_with,
                   "startup_timeout": int(option.nbval_kernel_startup_timeout),
                   "nodeids": [item.nodeid for item in session.items] + test_modules}, out)
'''


@pytest.mark.slow
def test_plain_pytest_nbval_from_root_checks_every_notebook_with_the_sanitiser(tmp_path: Path, monkeypatch) -> None:
    import json

    (tmp_path / "report_nbval_options.py").write_text(NBVAL_OPTIONS_PLUGIN)
    monkeypatch.setenv("NBVAL_OPTIONS_OUT", str(tmp_path / "options.json"))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(ROOT)
    # In this process (pytest.main, a session of its own, from the root): a second Python would import torch
    # again for tests/conftest.py, and pytest, nbval and their plugins (about 4 s of CPU).
    code = pytest.main(["--nbval", "--collect-only", "-q", "-p", "no:cacheprovider", "-p", "report_nbval_options"])
    assert code == pytest.ExitCode.OK, f"`pytest --nbval --collect-only` failed: {code!r} (its output is above)"
    report = json.loads((tmp_path / "options.json").read_text())

    collected = {nodeid.split("::")[0] for nodeid in report["nodeids"]}
    chapters = ROOT.glob("notebooks/*.ipynb")
    sources = ROOT.glob("notebooks/assignments/source/**/*.ipynb")
    expected = {_repo_path(p) for p in [*chapters, *sources] if ".ipynb_checkpoints" not in p.parts}
    assert expected, "no notebooks found to check"
    notebooks = {path for path in collected if path.endswith(".ipynb")}
    assert notebooks == expected, (
        f"`pytest --nbval` from the root misses {sorted(expected - notebooks)} "
        f"and runs {sorted(notebooks - expected)} (the student releases must not be run)"
    )
    unit_tests = {_repo_path(p) for p in (ROOT / "tests").glob("test_*.py")}
    assert unit_tests <= collected, f"`pytest --nbval` no longer runs {sorted(unit_tests - collected)}"
    assert report["current_env"] is True, "nbval must use this environment's kernel (--nbval-current-env)"
    sanitizer = report["sanitize_with"]
    assert sanitizer and Path(sanitizer).resolve() == ROOT / "tests" / "nbval_sanitize.cfg", (
        f"nbval must mask addresses and figure sizes with tests/nbval_sanitize.cfg, got {sanitizer!r}"
    )
    # On a busy machine (two xdist processes, other work) a kernel can take over nbval's default 60 s.
    assert report["startup_timeout"] == 300, "a kernel gets 5 minutes to start (conftest.py)"
