"""Offline link check of the built book: every internal link and every #anchor must resolve.

Every page (`.html` file outside `_static/`) under `_build/html` is parsed; for each `<a href>`,
`<link href>`, `<img src>`, `<script src>`, `<iframe src>` and `<source src>` that is relative (or a
`file:` URL) the target file must exist, and a `#fragment` must be an `id` (or `<a name>`) in the
target page. Links inside a page (`#...`) are checked against the page itself.

Not checked (no network here): external `http(s)://` links, e.g. the GitHub repository button, the
"Launch on Colab" links and badges (tests/test_book_config.py checks that they are derived correctly),
the Colab badge image, MathJax and the thebe script on their CDNs, DOIs and URLs in the bibliography,
and links in the prose such as pytorch.org. `mailto:`, `javascript:` and `data:` URLs are skipped too.
"""

from __future__ import annotations

from collections import defaultdict
from functools import cache
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from book_pages import HTML, ensure_built

pytestmark = pytest.mark.book

LINK_ATTRIBUTES = {"a": "href", "link": "href", "img": "src", "script": "src", "iframe": "src", "source": "src"}
SKIPPED_SCHEMES = {"http", "https", "mailto", "javascript", "data", "tel"}


class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.links: list[str] = []
        self.anchors: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if values.get("id"):
            self.anchors.add(values["id"])
        if tag == "a" and values.get("name"):
            self.anchors.add(values["name"])
        link = values.get(LINK_ATTRIBUTES.get(tag, ""))
        if link is not None:
            self.links.append(link)


@cache
def _parse(path: Path) -> _Page:
    page = _Page()
    page.feed(path.read_text(encoding="utf-8", errors="replace"))
    return page


def _broken_links(html_file: Path) -> list[str]:
    broken = []
    for link in _parse(html_file).links:
        parts = urlsplit(link)
        if parts.scheme in SKIPPED_SCHEMES or parts.netloc:
            continue
        if parts.scheme not in ("", "file"):
            broken.append(f"{link} (unknown scheme)")
            continue
        target = html_file if not parts.path else (html_file.parent / unquote(parts.path)).resolve()
        if target.is_dir():
            target = target / "index.html"
        if not target.is_file():
            broken.append(f"{link} (no file {target})")
        elif parts.fragment and target.suffix == ".html" and unquote(parts.fragment) not in _parse(target).anchors:
            broken.append(f"{link} (no anchor #{parts.fragment} in {target.name})")
    return broken


@pytest.fixture(scope="module")
def html_files() -> list[Path]:
    ensure_built()
    # Pages, not the theme's Jinja fragments that Sphinx copies into _static/ as they are.
    files = sorted(p for p in HTML.resolve().rglob("*.html") if "_static" not in p.relative_to(HTML.resolve()).parts)
    assert files, f"no HTML under {HTML}"
    return files


def test_every_internal_link_and_anchor_resolves(html_files: list[Path]) -> None:
    problems: dict[str, list[str]] = defaultdict(list)
    checked = 0
    for html_file in html_files:
        checked += len(_parse(html_file).links)
        for problem in _broken_links(html_file):
            problems[str(html_file.relative_to(HTML.resolve()))].append(problem)
    report = "\n".join(f"{page}:\n  " + "\n  ".join(sorted(set(links))) for page, links in sorted(problems.items()))
    assert not problems, f"broken links in the built book:\n{report}"
    assert checked > 100, f"only {checked} links found: is the build complete?"


def test_link_checker_catches_broken_links(tmp_path: Path) -> None:
    # The checker itself must be able to fail: a missing file and a missing anchor are both reported.
    (tmp_path / "a.html").write_text('<p id="here"></p><a href="#here">ok</a><a href="#gone">x</a>'
                                     '<a href="b.html#top">ok</a><a href="b.html#nope">x</a>'
                                     '<img src="missing.png"><a href="https://example.org">skipped</a>')
    (tmp_path / "b.html").write_text('<h1 id="top">b</h1>')
    broken = _broken_links(tmp_path / "a.html")
    assert len(broken) == 3 and all(any(k in b for b in broken) for k in ("#gone", "#nope", "missing.png"))
