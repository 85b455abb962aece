"""A one-line way to document a vitedu module in the book's API reference.

    ```{vitedu-module} vitedu.attention
    ```

expands to the module's docstring, an autosummary table of its public classes and functions (in
source order), and the autodoc entry of each one. A new module needs only that one directive in
book/api.md; its public names are found by importing it, so the page never lists them by hand.
"""

from __future__ import annotations

import importlib
import inspect
import re

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.application import Sphinx
from sphinx.util.docutils import SphinxDirective
from sphinx.util.nodes import nested_parse_with_titles


# A line of a plain-text docstring that states shapes, e.g. "(batch, tokens, dim) -> (batch, tokens, dim)",
# "-> output (..., queries, d_v)" or "q: (..., queries, d_k)   k: (..., keys, d_k)".
_SHAPE_LINE = re.compile(r"^(\(|->|\w+: \()")
_BULLET = re.compile(r"^[-*] ")


def plain_to_rst(lines: list[str]) -> list[str]:
    """Make a plain-text docstring (the house style: no reST markup) render as written.

    Shape lines keep their line breaks (they become a reST line block instead of being run into the
    surrounding sentence), and a bullet list gets the blank lines reST requires around it. The first
    line is the summary and is left alone. Only whole unindented lines are touched, so real reST
    (directives, literal blocks, indented maths) passes through unchanged.
    """
    out: list[str] = []
    run = None  # the kind of block the previous line belonged to: "shape", "bullet" or None
    for i, line in enumerate(lines):
        kind = None
        if i > 0 and _SHAPE_LINE.match(line):
            kind = "shape"
        elif _BULLET.match(line) or (run == "bullet" and line.startswith("  ") and line.strip()):
            kind = "bullet"
        if kind != run and out and out[-1].strip():
            out.append("")  # a block starts or ends: reST needs a blank line between them
        out.append(f"| {line}" if kind == "shape" else line)
        run = kind if line.strip() else None
    return out


def _process_docstring(app, what, name, obj, options, lines: list[str]) -> None:
    if name.startswith("vitedu"):
        lines[:] = plain_to_rst(lines)


def public_members(modname: str) -> list[tuple[str, str]]:
    """(name, autodoc directive) for every public class and function *defined* in ``modname``,
    in source order; names re-exported from other modules are documented where they are defined."""
    module = importlib.import_module(modname)
    members = []
    for name, obj in vars(module).items():
        if name.startswith("_") or getattr(obj, "__module__", None) != modname:
            continue
        if inspect.isclass(obj):
            members.append((name, "autoclass"))
        elif inspect.isfunction(obj):
            members.append((name, "autofunction"))
    return members


class VitEduModule(SphinxDirective):
    required_arguments = 1
    has_content = False

    def run(self) -> list[nodes.Node]:
        modname = self.arguments[0]
        members = public_members(modname)
        lines = [f".. automodule:: {modname}", ""]
        if members:
            lines += [".. autosummary::", "   :nosignatures:", ""]
            lines += [f"   {name}" for name, _ in members] + [""]  # relative to the automodule
        lines += [f".. currentmodule:: {modname}", ""]
        for name, directive in members:
            lines += [f".. {directive}:: {name}"]
            lines += ["   :members:", ""] if directive == "autoclass" else [""]
        # The generated text is reStructuredText; the book's pages are MyST, which runs it via eval-rst.
        lines = ["```{eval-rst}", *lines, "```"]
        container = nodes.container()
        nested_parse_with_titles(self.state, StringList(lines, source=f"<vitedu-module {modname}>"), container)
        return container.children


def _tuples_for_nitpick_ignore(app: Sphinx, config) -> None:
    # _config.yml can only write YAML lists, but Sphinx looks up (type, target) *tuples* in
    # nitpick_ignore, so a [type, target] list would never match.
    config.nitpick_ignore = [tuple(entry) for entry in config.nitpick_ignore]


def setup(app: Sphinx) -> dict[str, object]:
    app.add_directive("vitedu-module", VitEduModule)
    app.connect("autodoc-process-docstring", _process_docstring)
    app.connect("config-inited", _tuples_for_nitpick_ignore)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
