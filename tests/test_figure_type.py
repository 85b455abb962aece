"""Type that reads: the labels of every figure, measured as the reader sees them in headless Chromium.

An output figure of a notebook is a PNG: its text cannot be found in the page, but its size can be known.
matplotlib draws a label of ``pt`` points at ``pt * dpi / 72`` image pixels (the chapter's
``figure.dpi``), and the page shows the image at ``clientWidth / naturalWidth`` of its pixels. The
smallest label of a figure is read from the notebook's code (``figure_fonts``): the chapter's
``font.size`` (matplotlib's default 10 pt unless ``rcParams`` sets it, with the named sizes of
``rcParams`` such as ``legend.fontsize = "small"``), and every explicit ``fontsize=``, ``size=`` or
``labelsize=`` in the cell that draws it or in a function of the notebook that the cell calls.

- At 1280 px (a laptop, with the contents sidebar) every label of every output figure is at least
  MIN_LABEL_PX pixels high on the page (its em size, as for the text around it), and so is every label of
  the SVG diagrams of book/diagrams: each diagram is opened in Chromium, which reports the computed font
  size of every piece of text in it (subscripts included), scaled by the diagram's size on the page.
- On a phone (390 px) a figure is shown smaller than that, so every figure, output or diagram, is a link
  to its full-size file, which a phone shows at its own size, to zoom and scroll. The diagrams' smallest
  labels are held to at least MIN_PHONE_SVG_PX pixels at 390 px even before the link is followed.

VITEDU_FIGURE_TYPE_REPORT=1 prints the smallest label of every chapter at both widths.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

import nbformat
import pytest
from book_pages import ROOT, Page, ensure_built, notebook_pages, offline_tab

pytestmark = pytest.mark.book

WIDE, PHONE = 1280, 390
MIN_LABEL_PX = 9.0  # at 1280 px: the smallest label of every figure
# At 390 px, before the link to the full-size file is followed: the diagrams' smallest text, a subscript (0.72 of
# a 15-px side note) in a 640-px drawing shown 342 px wide, is 5.8 px; followed, the link shows it at 10.8 px.
MIN_PHONE_SVG_PX = 5.5
DIAGRAMS = ROOT / "book" / "diagrams"

# matplotlib's defaults (matplotlib.rcParams) and its named sizes, relative to font.size.
DEFAULT_DPI, DEFAULT_FONT = 100.0, 10.0
NAMED = {"xx-small": 0.579, "x-small": 0.694, "small": 0.833, "medium": 1.0, "large": 1.2, "x-large": 1.44,
         "xx-large": 1.728, "smaller": 0.833, "larger": 1.2}
# The text of a figure and the rcParams key of its size: tick labels, axis labels, legends, titles.
ROLE_SIZES = {"xtick.labelsize": "medium", "ytick.labelsize": "medium", "axes.labelsize": "medium",
              "legend.fontsize": "medium", "axes.titlesize": "large", "figure.titlesize": "large"}
RC_ASSIGN = re.compile(r"""rcParams\[\s*["']([\w.]+)["']\s*\]\s*=\s*([^#\n]+)""")
# fontsize=8, size="small", labelsize=9, title_fontsize=7 ("batch_size=" and "kernel_size=" are not sizes).
EXPLICIT = re.compile(r"""(?<![\w.])(?:fontsize|size|labelsize|title_fontsize)\s*=\s*([\d.]+|["'][a-z-]+["'])""")
IMAGE_TYPES = {"image/png", "image/jpeg"}  # what matplotlib's inline backend stores (a photo may be a JPEG)
CALL = re.compile(r"(?<![\w.])([A-Za-z_]\w*)\s*\(")
DEF = re.compile(r"^\s*def\s+([A-Za-z_]\w*)\s*\(", re.M)


def _size(value: str, font_size: float) -> float | None:
    """Points of a size written in code: a number, or one of matplotlib's names (relative to font.size)."""
    value = value.strip().strip("'\"")
    if value in NAMED:
        return NAMED[value] * font_size
    try:
        return float(value)
    except ValueError:
        return None


def _source(cell) -> str:
    """The cell's Python, without its IPython magics (so that a comment or string is not read as code)."""
    return "\n".join(line for line in cell.source.splitlines() if not line.lstrip().startswith(("%", "!")))


@dataclass(frozen=True)
class Figure:
    """One PNG output of a notebook: the cell that draws it and the smallest label in image pixels."""

    cell: int
    dpi: float
    min_pt: float

    @property
    def image_px(self) -> float:
        return self.min_pt * self.dpi / 72


def figure_fonts(path: Path) -> list[Figure]:
    """Every PNG output of the notebook at ``path``, in order, with the smallest font it is drawn with: the
    rcParams set by the cells before it (dpi, font.size, the sizes of tick labels, legends, titles) and the
    explicit sizes in its cell and in the notebook's functions that the cell calls."""
    cells = nbformat.read(path, as_version=4).cells
    functions: dict[str, str] = {}  # name -> source of the cell that defines it
    for cell in cells:
        if cell.cell_type == "code":
            for name in DEF.findall(_source(cell)):
                functions[name] = _source(cell)
    rc: dict[str, str] = {}
    figures = []
    for index, cell in enumerate(cells):
        if cell.cell_type != "code":
            continue
        source = _source(cell)
        for key, value in RC_ASSIGN.findall(source):
            rc[key] = value.strip()
        data = [output.get("data", {}) for output in cell.get("outputs", [])]
        pngs = sum(bool(IMAGE_TYPES & set(types)) for types in data)
        if not pngs:
            continue
        font = _size(rc.get("font.size", str(DEFAULT_FONT)), DEFAULT_FONT) or DEFAULT_FONT
        dpi = _size(rc.get("figure.dpi", str(DEFAULT_DPI)), DEFAULT_DPI) or DEFAULT_DPI
        sizes = [_size(rc.get(key, default), font) for key, default in ROLE_SIZES.items()]
        reached, todo = {index}, [source]
        while todo:  # the cell, and the functions it calls, and the functions they call
            text = todo.pop()
            sizes += [_size(value, font) for value in EXPLICIT.findall(text)]
            for name in CALL.findall(text):
                if name in functions and id(functions[name]) not in reached:
                    reached.add(id(functions[name]))
                    todo.append(functions[name])
        smallest = min(size for size in sizes if size)
        figures += [Figure(index, dpi, smallest)] * pngs
    return figures


def test_figure_fonts_reads_the_code(tmp_path) -> None:
    """The static reading of a notebook finds rcParams, named and explicit sizes, and sizes in a helper."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell('plt.rcParams["figure.dpi"] = 80\nplt.rcParams["font.size"] = 12'),
        nbformat.v4.new_code_cell('def panel(ax):\n    ax.legend(fontsize="small")\n'),
        nbformat.v4.new_code_cell("fig, ax = plt.subplots()\nplt.show()", outputs=[_png()]),
        nbformat.v4.new_code_cell("panel(ax)\nbatch_size=2\nplt.show()", outputs=[_png(), _png()]),
        nbformat.v4.new_code_cell('ax.text(0, 0, "7", fontsize=7)'),  # no figure: not counted
    ]
    path = tmp_path / "nb.ipynb"
    nbformat.write(nb, path)
    figures = figure_fonts(path)
    assert [(f.cell, f.dpi) for f in figures] == [(2, 80.0), (3, 80.0), (3, 80.0)]
    assert [round(f.min_pt, 2) for f in figures] == [12.0, 10.0, 10.0]  # "small" of 12 pt
    assert figures[0].image_px == pytest.approx(12 * 80 / 72)


def _png() -> dict:
    return nbformat.v4.new_output("display_data", data={"image/png": "", "text/plain": "<Figure>"})


# ------------------------------------------------------------------------------------------ in Chromium

JS_OUTPUT_FIGURES = """() => Array.from(document.querySelectorAll("main div.cell_output img")).map((img) => {
  const link = img.closest("a");
  return {src: img.currentSrc || img.src, natural: img.naturalWidth, shown: img.clientWidth,
          href: link ? link.href : null};
})"""

JS_DIAGRAMS = """() => Array.from(document.querySelectorAll("main img"))
  .filter((img) => /\\.svg$/.test((img.currentSrc || img.src).split("?")[0]) && img.closest("figure"))
  .map((img) => {
    const link = img.closest("a");
    return {src: img.currentSrc || img.src, shown: img.getBoundingClientRect().width,
            href: link ? link.href : null};
  })"""

# Opened on its own, a diagram reports its viewBox width and the smallest computed font size of any piece of
# text in it (a <text> or <tspan> with characters of its own), in the viewBox's units.
JS_SVG_FONT = """() => {
  const svg = document.documentElement;
  const sizes = Array.from(svg.querySelectorAll("text, tspan"))
    .filter((el) => Array.from(el.childNodes).some((n) => n.nodeType === 3 && n.textContent.trim()))
    .map((el) => ({size: parseFloat(getComputedStyle(el).fontSize), text: el.textContent.trim()}));
  sizes.sort((a, b) => a.size - b.size);
  return {width: svg.viewBox.baseVal.width, smallest: sizes[0] || null, count: sizes.length};
}"""


@pytest.fixture(scope="module")
def tab():
    with offline_tab(WIDE) as tab:
        yield tab


def _svg_fonts(tab) -> dict[str, dict]:
    """diagram file name -> its viewBox width and smallest font (in viewBox units), measured in Chromium."""
    fonts = {}
    for path in sorted(DIAGRAMS.glob("*.svg")):
        tab.goto(path.as_uri(), wait_until="load")
        fonts[path.name] = tab.evaluate(JS_SVG_FONT)
        assert fonts[path.name]["count"] > 0, f"{path.name}: no text found in the diagram"
    return fonts


def _diagram_file(src: str) -> str:
    """Sphinx copies book/diagrams/vit.svg to _images/vit.svg (vit1.svg if another vit.svg came first)."""
    name = src.split("?")[0].rsplit("/", 1)[-1]
    return re.sub(r"\d+(?=\.svg$)", "", name) if not (DIAGRAMS / name).is_file() else name


def _open(tab, page: Page, width: int) -> None:
    tab.set_viewport_size({"width": width, "height": 900})
    tab.goto(page.html.as_uri(), wait_until="load")
    tab.wait_for_function("() => Array.from(document.images).every((img) => img.complete)")


def _measure(tab, pages: list[Page], width: int) -> dict[str, dict]:
    """page -> its output figures (with the smallest label in page pixels) and its diagrams, at ``width``."""
    svg_fonts = _svg_fonts(tab)
    measured = {}
    for page in pages:
        figures = figure_fonts(page.source) if page.is_notebook else []
        _open(tab, page, width)
        shown = tab.evaluate(JS_OUTPUT_FIGURES)
        assert len(shown) == len(figures), (
            f"{page.docname}: {len(figures)} PNG outputs in the notebook, {len(shown)} output images on the page"
        )
        outputs = []
        for figure, image in zip(figures, shown, strict=True):
            scale = image["shown"] / image["natural"]
            outputs.append({**image, "cell": figure.cell, "min_pt": figure.min_pt, "scale": scale,
                            "label_px": figure.image_px * scale})
        diagrams = []
        for image in tab.evaluate(JS_DIAGRAMS):
            font = svg_fonts.get(_diagram_file(image["src"]))
            if font is None:
                continue  # an SVG that is not one of the diagrams (the Colab badge is not in a figure)
            scale = image["shown"] / font["width"]
            diagrams.append({**image, "file": _diagram_file(image["src"]), "text": font["smallest"]["text"],
                             "label_px": font["smallest"]["size"] * scale})
        if outputs or diagrams:
            measured[page.docname] = {"outputs": outputs, "diagrams": diagrams}
    return measured


def _report(measured: dict[str, dict], width: int) -> None:
    if not os.environ.get("VITEDU_FIGURE_TYPE_REPORT"):
        return
    for docname, found in measured.items():
        outputs = min((o["label_px"] for o in found["outputs"]), default=None)
        diagrams = min((d["label_px"] for d in found["diagrams"]), default=None)
        print(f"{width} px {docname}: output figures {outputs and round(outputs, 1)} px, "
              f"diagrams {diagrams and round(diagrams, 1)} px")


def _pages() -> list[Page]:
    pages = ensure_built()
    return [page for page in pages if page.is_notebook or page.docname == "book/intro"]


def test_labels_are_at_least_9_px_at_1280(tab) -> None:
    """At 1280 px, every label of every output figure and every diagram is at least MIN_LABEL_PX high."""
    measured = _measure(tab, _pages(), WIDE)
    _report(measured, WIDE)
    small = []
    for docname, found in measured.items():
        for output in found["outputs"]:
            if output["label_px"] < MIN_LABEL_PX:
                small.append(f"{docname}, cell {output['cell']}: {output['min_pt']:g} pt shown at "
                             f"{output['label_px']:.1f} px (the image at {output['scale']:.0%})")
        for diagram in found["diagrams"]:
            if diagram["label_px"] < MIN_LABEL_PX:
                small.append(f"{docname}, {diagram['file']}: {diagram['text']!r} at {diagram['label_px']:.1f} px")
    assert not small, (
        f"labels under {MIN_LABEL_PX:g} px at {WIDE} px (a larger font, or a narrower figure):\n" + "\n".join(small)
    )


def test_figures_link_to_their_full_size_file_on_a_phone(tab) -> None:
    """At 390 px, every output figure and every diagram links to its own file, shown full size when followed,
    and the diagrams' smallest labels are at least MIN_PHONE_SVG_PX high on the page itself."""
    measured = _measure(tab, _pages(), PHONE)
    _report(measured, PHONE)
    problems = []
    for docname, found in measured.items():
        for image in found["outputs"] + found["diagrams"]:
            if image["href"] != image["src"].split("?")[0]:
                name = image["src"].rsplit("/", 1)[-1][:24]
                problems.append(f"{docname}: {name} links to {image['href']}, not to its own file")
        for diagram in found["diagrams"]:
            if diagram["label_px"] < MIN_PHONE_SVG_PX:
                problems.append(f"{docname}, {diagram['file']}: {diagram['text']!r} at {diagram['label_px']:.1f} px")
    assert not problems, "\n".join(problems)


def test_measurement_sees_the_rendered_book() -> None:
    """The measurement covers every chapter: each notebook with PNG outputs has figures read from its code."""
    pages = notebook_pages()
    with_figures = [page for page in pages if figure_fonts(page.source)]
    assert len(with_figures) >= 10, [page.docname for page in with_figures]
