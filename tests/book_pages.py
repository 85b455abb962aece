"""What the book tests share: the pages listed in _toc.yml, the Colab URL of a notebook, the built HTML.

Nothing here names a chapter: the pages are read from _toc.yml, so the tests cover every chapter as
soon as it is added to the table of contents.
"""

from __future__ import annotations

import os
import posixpath
import re
import shutil
import subprocess
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
# The book the tests read: <ROOT>/_build/html, as `make book` builds it, or the build written with
# `jupyter-book build . --path-output DIR` when VITEDU_BUILD_DIR=DIR (a build of one's own, so that
# checking it does not touch, or wait for, the shared _build/).
BUILD_DIR = Path(os.environ.get("VITEDU_BUILD_DIR") or ROOT).resolve()
BUILD = BUILD_DIR / "_build"
HTML = BUILD / "html"
# The official badge image, as the notebooks show it (on GitHub, in Jupyter). The book shows a local
# copy instead (book/_static/colab-badge.svg, swapped in by book/_ext/vitedu_book.py), which Sphinx
# serves as _images/colab-badge.svg: the book requests nothing from another host.
COLAB_BADGE_IMAGE = "https://colab.research.google.com/assets/colab-badge.svg"
LOCAL_BADGE_IMAGE = "_images/colab-badge.svg"


def book_config() -> dict:
    return yaml.safe_load((ROOT / "_config.yml").read_text())


@dataclass(frozen=True)
class Page:
    """One entry of the table of contents: ``docname`` as in _toc.yml, e.g. "notebooks/01_self_attention"."""

    docname: str
    source: Path  # the .md or .ipynb file it is built from

    @property
    def is_notebook(self) -> bool:
        return self.source.suffix == ".ipynb"

    @property
    def html(self) -> Path:
        return HTML / f"{self.docname}.html"


def _toc_entries(node: object) -> list[str]:
    """Every `file:` of the table of contents, in reading order (parts, chapters, nested sections)."""
    files: list[str] = []
    if isinstance(node, dict):
        if "file" in node:
            files.append(str(node["file"]))
        for key in ("parts", "chapters", "sections"):
            for child in node.get(key) or []:
                files += _toc_entries(child)
    return files


def toc_pages() -> list[Page]:
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    pages = []
    for docname in [str(toc["root"]), *_toc_entries(toc)]:
        docname = docname.removesuffix(".md").removesuffix(".ipynb")
        sources = [ROOT / f"{docname}{ext}" for ext in (".md", ".ipynb") if (ROOT / f"{docname}{ext}").is_file()]
        if len(sources) != 1:
            raise AssertionError(f"_toc.yml lists {docname!r}, but {len(sources)} of {docname}.md/.ipynb exist")
        pages.append(Page(docname, sources[0]))
    return pages


def notebook_pages() -> list[Page]:
    return [page for page in toc_pages() if page.is_notebook]


def colab_url(repo_path: str) -> str:
    """The Colab URL of a notebook, derived from `repository` and `launch_buttons` in _config.yml
    exactly as Jupyter Book derives its launch button: <colab>/github/<owner>/<repo>/blob/<branch>/<path>."""
    config = book_config()
    repository = config["repository"]
    owner_repo = repository["url"].removeprefix("https://github.com/").rstrip("/")
    path = posixpath.join(repository.get("path_to_book") or "", repo_path)
    colab = config["launch_buttons"]["colab_url"].rstrip("/")
    return f"{colab}/github/{owner_repo}/blob/{repository['branch']}/{path}"


def build_book() -> None:
    """Build the book as `make book` does (strict, stored outputs), failing the test with the log."""
    jupyter_book = Path(sys.executable).parent / "jupyter-book"
    command = [str(jupyter_book), "build", str(ROOT), "-W", "-n", "--keep-going"]
    if BUILD_DIR != ROOT.resolve():
        command += ["--path-output", str(BUILD_DIR)]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    if result.returncode != 0:
        log = (result.stdout + result.stderr)[-6000:]
        pytest.fail(f"the book does not build (run `make book` to see why):\n{log}", pytrace=False)


def ensure_built() -> list[Page]:
    """The TOC pages, after building the book if any of them has no HTML yet or its source is newer than
    its HTML (`make test` runs `make book` first, so this only builds when a test file is run alone)."""
    pages = toc_pages()
    stale = [p for p in pages if not p.html.is_file() or p.source.stat().st_mtime > p.html.stat().st_mtime]
    if stale:
        build_book()
        still_missing = [page.docname for page in pages if not page.html.is_file()]
        assert not still_missing, f"the build did not write HTML for {still_missing}"
    return pages


def chromium_path() -> str | None:
    """$CHROMIUM if set (and only it), else Debian's real binary (/usr/bin/chromium is a wrapper script
    around it), else chromium on PATH."""
    if "CHROMIUM" in os.environ:
        candidate = os.environ["CHROMIUM"]
        return candidate if Path(candidate).is_file() and os.access(candidate, os.X_OK) else None
    if os.access("/usr/lib/chromium/chromium", os.X_OK):
        return "/usr/lib/chromium/chromium"
    return shutil.which("chromium") or shutil.which("chromium-browser")


CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--in-process-gpu",  # no separate GPU process to talk to: about 15 % less CPU a page here
    # V8 without its top tier (TurboFan): the pages' scripts (MathJax, the theme, the explorer's ViT) run for
    # about a second a load, too short for TurboFan's compiles on background threads to pay for themselves.
    # The same JavaScript semantics (every tier computes the same doubles). Measured (CPU of the process tree):
    # 4 explorer + 3 book loads 14.7 -> 11.2 s (2 runs each); whole modules, 2 A/B pairs: explorer -7.7 and
    # -2.7 s, the page module +2.6 and -1.8 s (within the noise of a shared machine).
    "--js-flags=--max-opt=2",
]
NOT_LOCAL = re.compile(r"^(?!file://)")  # what the book, read offline, must not need


@contextmanager
def offline_tab(width: int, height: int = 900) -> Iterator:
    """A tab of headless Chromium ``width`` CSS pixels wide in which every request that is not a local file is
    aborted: the book as a reader without a network sees it."""
    with headless_chromium(CHROMIUM_FLAGS) as chromium:
        context = chromium.new_context(viewport={"width": width, "height": height})
        context.route(NOT_LOCAL, lambda route: route.abort())
        try:
            yield context.new_page()
        finally:
            context.close()


@contextmanager
def headless_chromium(args: list[str]) -> Iterator:
    """Playwright's Chromium (Debian's binary, no browser download), launched headless with ``args``.
    Without Chromium or Playwright the calling test is skipped with the reason, except under CI
    (``CI=true``), where it fails."""
    executable = chromium_path()
    if executable is None:
        reason = "headless Chromium not found: `apt-get install chromium` (Debian's package) or set CHROMIUM"
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true but {reason} (.ci/run installs it)", pytrace=False)
        warnings.warn(f"rendered-book browser test skipped: {reason}", stacklevel=1)  # shown without -rs
        pytest.skip(reason)
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:  # requirements-dev.txt installs it; say so rather than erroring obscurely
        if os.environ.get("CI") == "true":
            raise
        pytest.skip("the playwright Python package is not installed (pip install -r requirements-dev.txt)")
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=executable, headless=True, args=args)
        try:
            yield chromium
        finally:
            chromium.close()
