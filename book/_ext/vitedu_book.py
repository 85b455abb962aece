"""The book's own Sphinx extension: the API reference directive, fixes for a clean build, chapter titles.

A one-line way to document a vitedu module in the book's API reference:

    ```{vitedu-module} vitedu.attention
    ```

expands to the module's docstring, an autosummary table of its public classes and functions (in
source order), and the autodoc entry of each one. A new module needs only that one directive in
book/api.md; its public names are found by importing it, so the page never lists them by hand.
"""

from __future__ import annotations

import importlib
import inspect
import posixpath
import re
from pathlib import Path

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.application import Sphinx
from sphinx.transforms import SphinxTransform
from sphinx.util.docutils import SphinxDirective
from sphinx.util.nodes import nested_parse_with_titles
from sphinx.util.osutil import relative_uri

# A line of a plain-text docstring that states shapes, e.g. "(batch, tokens, dim) -> (batch, tokens, dim)",
# "-> output (..., queries, d_v)" or "q: (..., queries, d_k)   k: (..., keys, d_k)".
_SHAPE_START = re.compile(r"^(\(|->|\w+: \()")
_NAMED_SHAPE = re.compile(r"^\w+: \(")  # "q: (...)", "images: (...)": shapes even without an arrow
_BULLET = re.compile(r"^([-*]|\d+\.) ")  # "- item", "* item" or "1. item"
_SENTENCE_END = (".", ":", "!", "?")
_CLOSED = (".", ")", ":", "!", "?", "None")  # a line ending so leaves nothing open for the next one


def _is_shape_line(line: str, first: bool, after_break: bool) -> bool:
    """A line that states shapes: it starts a paragraph (or follows another shape line or a finished
    sentence, such as the summary) and reads "(...) -> ...", "-> ..." or "name: (...)". A line that merely starts with
    "(" in the middle of a wrapped sentence ("... the first grid_epochs epochs put the digit on the patch
    grid / (position_step=GRID_STEP), the easy case ...") is prose."""
    if first or not _SHAPE_START.match(line) or not after_break:
        return False
    return "->" in line or bool(_NAMED_SHAPE.match(line))


def plain_to_rst(lines: list[str]) -> list[str]:
    """Make a plain-text docstring (the house style: no reST markup) render as written.

    - Shape lines keep their line breaks: they become a reST line block instead of being run into the
      surrounding sentence. A sentence that goes on after a shape line ("-> (N, 4) int64; an empty image
      gets (0, 0, 0, 0), and") goes on in the same line of the block, not in a paragraph of its own.
    - A bullet or numbered list gets the blank lines reST requires around it.
    - An indented block after a blank line (a formula, a code example, a small table) is shown
      verbatim, as a literal block, instead of as a re-flowed quotation.
    The first line is the summary and is left alone. Real reST passes through unchanged: text after a
    line ending in "::" (literal blocks, directives) and indented directive content are not touched.
    """
    out: list[str] = []
    prev = None  # the kind of the last non-blank line: "shape", "bullet", "literal" or None (prose)
    last = ""  # the last non-blank line
    gap = False  # a blank line since the last non-blank one
    open_shape = False  # the last shape line's sentence goes on in the next line
    for i, line in enumerate(lines):
        if not line.strip():
            out.append(line)
            gap, open_shape = True, False
            continue
        kind = None
        if line[0].isspace():
            if prev == "bullet" and not gap:
                kind = "bullet"  # a list item's continuation line
            elif prev == "literal":
                kind = "literal"
            elif gap and prev != "bullet" and not last[:1].isspace() and not last.rstrip().endswith("::"):
                kind = "literal"
                out += ["::", ""]  # a paragraph of its own: the next indented block is literal
        elif open_shape:
            out.append(f"  {line}")  # goes on in the line block's last line
            open_shape = not line.rstrip().endswith(_SENTENCE_END)
            last = line
            continue
        elif _is_shape_line(line, i == 0, gap or prev == "shape" or last.rstrip().endswith(_SENTENCE_END)):
            kind = "shape"
            open_shape = not line.rstrip().endswith(_CLOSED)
        elif _BULLET.match(line):
            kind = "bullet"
        if kind != prev and not gap and out:
            out.append("")  # a block starts or ends: reST needs a blank line between them
        out.append(f"| {line}" if kind == "shape" else line)
        prev, last, gap = kind, line, False
    return out


# Docstrings cite papers as "(Author et al., YEAR)", which reads well in help(); on the API page each becomes a
# citation linked to the bibliography. DeiT and CaiT share authors and year: the module decides.
CITATIONS = {
    "Vaswani et al., 2017": "vaswani2017attention", "Dosovitskiy et al., 2021": "dosovitskiy2021vit",
    "Touvron et al., 2021": "touvron2021deit", "d'Ascoli et al., 2021": "dascoli2021convit",
    "He et al., 2022": "he2022mae", "Huang et al., 2016": "huang2016stochastic",
    "Cubuk et al., 2020": "cubuk2020randaugment", "Shazeer et al., 2020": "shazeer2020talkingheads",
    "Darcet et al., 2024": "darcet2024registers", "Liu et al., 2025": "liu2025muonscalable",
    "Jordan et al., 2024": "jordan2024muon", "Loshchilov & Hutter, 2019": "loshchilov2019adamw",
}
MODULE_CITATIONS = {"vitedu.cait": {"Touvron et al., 2021": "touvron2021cait"}}
_INLINE_MATH = re.compile(r"(?<![\\$\w])\$([^$\n]+?)\$(?![\w$])")  # $N = HW/P^2$, not a $$ block


def typeset(lines: list[str], module: str) -> list[str]:
    """Prose lines of a converted docstring: ``$...$`` -> inline maths, "(Author et al., YEAR)" -> a linked
    citation (alone in its brackets: ``:cite:p:``; beside other words: ``:cite:t:``). Literal blocks, shape
    line blocks and directives are left alone."""
    table = {**CITATIONS, **MODULE_CITATIONS.get(module, {})}
    out, literal = [], False
    for line in lines:
        if line.rstrip().endswith("::"):
            literal = True  # what follows, indented, is a literal block or a directive's content
        elif line.strip() and not line[0].isspace():
            literal = False
        if literal or line.startswith("| ") or line.startswith(".. "):
            out.append(line)
            continue
        line = _INLINE_MATH.sub(lambda m: f":math:`{m.group(1)}`", line)
        for text, key in table.items():
            line = line.replace(f"({text})", f":cite:p:`{key}`").replace(text, f":cite:t:`{key}`")
        out.append(line)
    return out


def _process_docstring(app, what, name, obj, options, lines: list[str]) -> None:
    if not name.startswith("vitedu"):
        return
    if what == "module" and obj.__doc__:
        # autodoc removes the common indentation of all lines after the first, which for a module
        # docstring that is summary + indented example would un-indent the example into prose.
        # A module's docstring is not indented by any enclosing block, so use it as written.
        raw = obj.__doc__.expandtabs().strip("\n").splitlines()
        lines[:] = [raw[0].strip(), *raw[1:], ""]
    module = name if what == "module" else getattr(obj, "__module__", "") or ""
    lines[:] = typeset(plain_to_rst(lines), module)


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
        # Examples in docstrings fit the page's 77 columns (tests/test_api_examples.py), though the package's
        # code may use 120: should one not fit, book/_static/vitedu.css wraps it rather than scroll.
        for block in container.findall(nodes.literal_block):
            block["classes"].append("vitedu-docstring")
        return container.children


def _tuples_for_nitpick_ignore(app: Sphinx, config) -> None:
    # _config.yml can only write YAML lists, but Sphinx looks up (type, target) *tuples* in
    # nitpick_ignore(_regex), so a [type, target] list would never match.
    config.nitpick_ignore = [tuple(entry) for entry in config.nitpick_ignore]
    config.nitpick_ignore_regex = [tuple(entry) for entry in config.nitpick_ignore_regex]


def _drop_duplicate_scripts(app: Sphinx, pagename, templatename, context, doctree) -> None:
    # sphinx-thebe adds its inline configuration script (`const THEBE_JS_URL = ...`) once to the
    # registry and once to the already-initialised HTML builder, so every page declared the constant
    # twice and the browser reported "Identifier 'THEBE_JS_URL' has already been declared"
    # (tests/test_book_browser.py caught it). A script included twice is never wanted: keep the first.
    seen, unique = set(), []
    for script in context.get("script_files", []):
        # The copy in the builder has filename '' and the one from the registry None: the same script.
        filename = getattr(script, "filename", script) or ""
        key = (str(filename), tuple(sorted((k, str(v)) for k, v in getattr(script, "attributes", {}).items())))
        if key not in seen:
            seen.add(key)
            unique.append(script)
    context["script_files"] = unique


# The notebooks show Colab's official badge, which loads from Colab's site: right for a notebook read on
# GitHub or in Jupyter, but the book must work offline and request nothing from another host. The book
# shows a hand-drawn copy with the same look, served with the book; the link (to Colab) is unchanged.
COLAB_BADGE_URL = "https://colab.research.google.com/assets/colab-badge.svg"
STATIC = Path(__file__).resolve().parent.parent / "_static"  # book/_static
LOCAL_BADGE = "/book/_static/colab-badge.svg"  # "/..." is relative to the book's root for Sphinx


class LocalColabBadge(SphinxTransform):
    """Replace every image of the official Colab badge by the local copy in book/_static."""

    default_priority = 400  # while reading, before the image collector copies images into _images/

    def apply(self, **kwargs) -> None:
        for image in self.document.findall(nodes.image):
            if image.get("uri") == COLAB_BADGE_URL:
                image["uri"] = LOCAL_BADGE
                if "candidates" in image:
                    del image["candidates"]


# A chapter notebook's title carries its number ("# 4. Patches and positions"), for a reader in Jupyter or
# on Colab. In the book, Sphinx numbers chapters 1-10 itself (the numbered parts of _toc.yml), in the title, the
# sidebar and the figure and equation numbers: the title's own number is dropped here so that it is not written
# twice ("4. 4. Patches and positions"). tests/test_book_config.py and test_book_browser.py check that they agree.
CHAPTER_NOTEBOOK = re.compile(r"notebooks/(\d\d)_[^/]+")


class ChapterTitleNumber(SphinxTransform):
    """Drop the leading "N. " from the title of chapter notebook N (notebooks/NN_name)."""

    default_priority = 400  # while reading, before the collectors record the title for the sidebar

    def apply(self, **kwargs) -> None:
        chapter = CHAPTER_NOTEBOOK.fullmatch(self.env.docname)
        title = next(iter(self.document.findall(nodes.title)), None)
        if chapter is None or title is None or not isinstance(title.children[0], nodes.Text):
            return
        prefix = f"{int(chapter.group(1))}. "
        if title.children[0].astext().startswith(prefix):
            title.replace(title.children[0], nodes.Text(title.children[0].astext().removeprefix(prefix)))


# The appendix is not numbered in _toc.yml (it is not chapters 11 and 12), so Sphinx would count its figures,
# equations and exercises on from the other unnumbered pages (after the intro's figure, Appendix 2's first would be
# "Fig. 2"). Here each appendix page counts its own, with its number in front: "Fig. A2.1", "Exercise A1.3".
APPENDIX_NOTEBOOK = re.compile(r"notebooks/A(\d)_[^/]+")


def _number_appendix_figures(app: Sphinx, env) -> list[str]:
    """After Sphinx has numbered the figures (env-get-updated, at a later priority than its collector), give
    those of an unnumbered appendix page (notebooks/A<n>_name) the numbers (f"A{n}", 1), (f"A{n}", 2), ...
    in the order Sphinx counted them, per kind (figure, equation, exercise). Returns the pages renumbered,
    which Sphinx then writes again."""
    renumbered = []
    for docname, kinds in env.toc_fignumbers.items():
        appendix = APPENDIX_NOTEBOOK.fullmatch(docname)
        if appendix is None or env.toc_secnumbers.get(docname):
            continue
        for kind, numbers in kinds.items():
            in_order = sorted(numbers, key=numbers.__getitem__)
            kinds[kind] = {node_id: (f"A{appendix.group(1)}", k) for k, node_id in enumerate(in_order, 1)}
        renumbered.append(docname)
    return renumbered


def _link_figures_to_their_files(app: Sphinx, doctree: nodes.document, docname: str) -> None:
    """Make every figure's image a link to its own file. A figure wider than the text column is shown
    smaller than it was drawn (on a phone, to a third), and its labels with it; followed, the link shows
    the file at its full size, to zoom and scroll. Sphinx links an image this way only when the page
    gives it a width (the diagrams' ``:width: 100%``); a notebook's output figures have none."""
    if app.builder.format != "html":
        return
    images = relative_uri(app.builder.get_target_uri(docname), "_images")
    for figure in doctree.findall(nodes.figure):
        for image in figure.findall(nodes.image):
            if isinstance(image.parent, nodes.reference):
                continue
            candidate = image.get("candidates", {}).get("*", image["uri"])
            if candidate not in app.env.images:
                continue  # not a file of the book (Sphinx reports it)
            link = nodes.reference("", "", internal=True)
            link["refuri"] = posixpath.join(images, app.env.images[candidate][1])
            image.replace_self(link)
            link.append(image)


def _add_static(app: Sphinx) -> None:
    # book/_static holds the style sheet and the explorer's script and data; the theme's and the
    # extensions' own static folders stay first on the path.
    app.config.html_static_path.append(str(STATIC))


def setup(app: Sphinx) -> dict[str, object]:
    app.add_directive("vitedu-module", VitEduModule)
    app.add_transform(LocalColabBadge)
    app.add_transform(ChapterTitleNumber)
    app.connect("builder-inited", _add_static)
    app.add_css_file("vitedu.css")
    app.connect("autodoc-process-docstring", _process_docstring)
    app.connect("config-inited", _tuples_for_nitpick_ignore)
    app.connect("html-page-context", _drop_duplicate_scripts)
    app.connect("env-get-updated", _number_appendix_figures, priority=900)
    app.connect("doctree-resolved", _link_figures_to_their_files)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
