"""The examples and diagrams of the API reference fit the page.

book/api.md documents each module with the `vitedu-module` directive (book/_ext/vitedu_book.py): the
module's docstring, then every public class (with its public members) and function defined in it. An
indented block in a docstring is shown verbatim, as a literal block, and like a notebook's code it must fit
the 77 monospace characters the rendered book shows on a line at 1280 px with the contents sidebar: a
longer line is wrapped there, which breaks the columns an example is written in. (The package's own code
may use 120 columns; only what the book shows is held to 77.)

The fast test reads the docstrings the way the directive does and finds the literal blocks with docutils,
with no book built; the book-marked test reads the same blocks from the built page.
"""

from __future__ import annotations

import importlib
import inspect
import re
import sys
from html import unescape
from pathlib import Path

import pytest
from book_pages import ensure_built
from docutils import nodes
from docutils.core import publish_doctree

ROOT = Path(__file__).resolve().parents[1]
MAX_EXAMPLE_LINE = 77
DIRECTIVE = re.compile(r"^```\{vitedu-module\}\s+(\S+)", flags=re.M)


def _book_extension():
    sys.path.insert(0, str(ROOT / "book" / "_ext"))
    try:
        import vitedu_book
    finally:
        sys.path.remove(str(ROOT / "book" / "_ext"))
    return vitedu_book


def documented_modules() -> list[str]:
    """Every module a page of the book documents with the `vitedu-module` directive, in page order."""
    return [name for page in sorted((ROOT / "book").glob("*.md")) for name in DIRECTIVE.findall(page.read_text())]


def rendered_docstrings(modname: str) -> list[tuple[str, str]]:
    """(name, docstring) for what the directive shows of ``modname``: the module's docstring as written, and
    the docstrings of its public classes, their public members, and its public functions, as autodoc cleans
    them (``inspect.cleandoc``; only a class's own docstring, and no inherited one)."""
    module = importlib.import_module(modname)
    found = [(modname, module.__doc__ or "")]
    for name, kind in _book_extension().public_members(modname):
        obj = getattr(module, name)
        found.append((f"{modname}.{name}", inspect.cleandoc(obj.__doc__ or "")))
        if kind != "autoclass":
            continue
        for member, value in vars(obj).items():
            if member.startswith("_"):
                continue
            if isinstance(value, (staticmethod, classmethod)):
                value = value.__func__
            if inspect.isfunction(value) or isinstance(value, property) or inspect.isclass(value):
                found.append((f"{modname}.{name}.{member}", inspect.cleandoc(value.__doc__ or "")))
    return [(name, doc) for name, doc in found if doc.strip()]


def literal_blocks(docstring: str, module: str = "vitedu", is_module: bool = False) -> list[str]:
    """The literal blocks (examples, diagrams, tables) a docstring becomes on the API page: converted as
    book/_ext/vitedu_book.py converts it, then parsed as reStructuredText."""
    book = _book_extension()
    lines = docstring.expandtabs().strip("\n").splitlines()
    if is_module:  # as the extension does: the module's docstring as written, its first line stripped
        lines = [lines[0].strip(), *lines[1:]]
    text = "\n".join(book.typeset(book.plain_to_rst(lines), module))
    # Sphinx's roles (:cite:p:) are unknown to plain docutils: the messages about them are not wanted.
    tree = publish_doctree(text, settings_overrides={"report_level": 5, "halt_level": 5, "warning_stream": False})
    return [
        block.astext() for block in tree.findall(nodes.literal_block)
        if not any(isinstance(parent, nodes.system_message) for parent in _parents(block))
    ]


def _parents(node: nodes.Node):
    while node.parent is not None:
        node = node.parent
        yield node


def long_example_lines(modname: str, limit: int = MAX_EXAMPLE_LINE) -> list[str]:
    found = []
    for name, doc in rendered_docstrings(modname):
        for block in literal_blocks(doc, modname, is_module=name == modname):
            found += [f"{name} ({len(line)} chars): {line}" for line in block.splitlines() if len(line) > limit]
    return found


def test_literal_blocks_are_found() -> None:
    doc = "\n".join([
        "Summary (Vaswani et al., 2017).",
        "",
        "    x = model(images)   " + "#" * 60,
        "    y = x",
        "",
        "Prose is not a block, however long it is: " + "w" * 100,
        "(batch, tokens, dim) -> (batch, tokens, dim)",
        "",
        "Text::",
        "",
        "    z = 1",
    ])
    assert literal_blocks(doc, is_module=True) == ["x = model(images)   " + "#" * 60 + "\ny = x", "z = 1"]
    assert literal_blocks("Only prose.\n\nNo example.") == []


def test_every_documented_module_is_read() -> None:
    modules = documented_modules()
    assert "vitedu" in modules and "vitedu.vit" in modules, modules
    # Not vacuous: the top-level module's examples, and the docstrings of a class's methods, are read.
    assert any("create_transform" in block for block in literal_blocks(importlib.import_module("vitedu").__doc__,
                                                                       is_module=True))
    assert "vitedu.vit.ClassTokenClassifier.attention_maps" in dict(rendered_docstrings("vitedu.vit"))


@pytest.mark.parametrize("modname", documented_modules())
def test_api_examples_fit_the_page(modname: str) -> None:
    found = long_example_lines(modname)
    assert not found, (
        f"{modname}: {len(found)} line(s) of the API page's examples longer than {MAX_EXAMPLE_LINE} characters "
        "(the book wraps them); put a long comment on its own line, break the call, or shorten the padding:\n"
        + "\n".join(found)
    )


# --------------------------------------------------------------------------- the built page

def _pre_lines(html: str) -> list[str]:
    """The text lines of every <pre> block of an HTML page."""
    return [line for pre in re.findall(r"<pre[^>]*>(.*?)</pre>", html, flags=re.S)
            for line in unescape(re.sub(r"<[^>]+>", "", pre)).splitlines()]


def test_pre_lines_are_read_from_html() -> None:
    html = '<p>prose</p><pre><span class="n">x</span> = 1 &lt; 2\n<span>y</span></pre><pre>z</pre>'
    assert _pre_lines(html) == ["x = 1 < 2", "y", "z"]


@pytest.mark.book
def test_built_api_page_examples_fit_the_page() -> None:
    pages = [page for page in ensure_built() if page.docname == "book/api"]
    assert pages, "_toc.yml lists no book/api page"
    found = [f"({len(line)} chars): {line}" for line in _pre_lines(pages[0].html.read_text())
             if len(line) > MAX_EXAMPLE_LINE]
    assert not found, f"book/api.html: {len(found)} line(s) in code blocks longer than {MAX_EXAMPLE_LINE}:\n" + (
        "\n".join(found))
