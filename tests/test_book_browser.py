"""Open the rendered book in headless Chromium, as a reader would, and look at every page.

For every page of _toc.yml (the intro, the getting-started pages, every chapter as it is added, the
reference pages) the test loads `_build/html/<page>.html` from disk and checks that
- the page loads without console errors, uncaught JavaScript errors or failed local requests;
- the maths is typeset: MathJax is served with the book (sphinx-mathjax-offline, `_static/mathjax/`),
  so offline every formula becomes an `mjx-container`, with no TeX error and no raw TeX delimiter left;
- every local `<img>` has loaded (natural width > 0): figures, logos;
- chapter (notebook) pages show their code cells and the stored outputs, as many as the notebook has,
  and the rocket menu's "Launch on Colab" link and the badge open this notebook on Colab;
- nothing scrolls sideways: at 1280 px (a laptop, with the contents sidebar) no code cell and no
  output is wider than its box (printed outputs keep their columns: they scroll, never wrap), and
  at 390 px (a phone) the page itself is not wider than the screen (a code block may scroll inside
  its own box there: a phone shows 38 columns);
- the menus work (on the first page and the first chapter, MENU_PAGES): the ☰ button opens the table
  of contents on a phone (390 px) and hides and shows the sidebar at 1280 px; on a phone the contents
  button opens the page's outline, which at 1280 px stands beside the text (pydata-sphinx-theme #2451
  broke both buttons; the theme pins avoid it);
- figures read like a textbook's: every image of a notebook's outputs, and every diagram of
  book/diagrams, sits in a <figure> with a numbered caption ("Fig. 4.2" in chapter 4, "Fig. A2.1" in
  Appendix 2) and a non-empty alt text;
- no display equation is wider than the text column at 1280 px, and on a phone one that is wider
  scrolls inside its own box;
- every Colab badge is drawn at its full size (at least 100 px wide) and on screen, at both widths,
  and a name in inline code in a table (`check_attention_weights`) is never broken over two lines;
Each page is loaded once for all of this. It writes a screenshot of the first screen to
`_build/screenshots/<page>.png` (and checks that something was drawn); with VITEDU_SCREENSHOTS=full
the screenshot is of the whole page, for a person to look through (3-8 s a page, so not by default).
Chapters 1-10 show at least MIN_DIAGRAMS of the SVG diagrams of book/diagrams between them.
Figures, equations and exercises carry their chapter's number ("Fig. 10.3", "(4.2)"), and a chapter's title
and sidebar entry read "N. <title>", the number written once (read from the built HTML, no browser).
With VITEDU_BUILD_DIR=DIR the tests read the book built by `jupyter-book build . --path-output DIR`.

Offline by design: the test aborts every request that is not `file://`, and *any* request to another
host fails it. The Colab badge is a local image (book/_static/colab-badge.svg, swapped in for Colab's
own at build time); every badge must link to a notebook of this repository on Colab (on a chapter
page: to this chapter).

Chromium is Debian's `chromium` package driven by Playwright (`executable_path`; no browser download).
Without it the test is skipped with the reason, except under CI (`CI=true`), where it fails.
"""

from __future__ import annotations

import os
import re
from html import unescape

import nbformat
import pytest
from book_pages import (
    BUILD,
    CHROMIUM_FLAGS,
    LOCAL_BADGE_IMAGE,
    NOT_LOCAL,
    ROOT,
    Page,
    colab_url,
    ensure_built,
    headless_chromium,
    toc_pages,
)

pytestmark = pytest.mark.book

SCREENSHOTS = BUILD / "screenshots"
# Every URL that is not a local file: the requests the tests abort (the book works offline).
# External URLs a page may request: none (the book works offline).
EXPECTED_EXTERNAL: dict[str, str] = {}
WIDE, PHONE = 1280, 390
# Pages not yet held to "nothing scrolls sideways", each with its reason (strict: a page that already
# passes fails until its entry is removed).
SCROLL_PENDING: dict[str, str] = {
    # Empty: chapter 8, the last page that scrolled sideways, is wrapped to 76 columns.
}
# The chapters (notebooks/01_... to 10_...): held to the figure, equation and diagram checks below.
CHAPTER = re.compile(r"notebooks/(0[1-9]|10)_")
# Pages whose figures are not yet all numbered, captioned and described (alt text), each with its
# reason (strict: a page that passes fails until its entry is removed). The chapter owners caption
# their output figures with the cell metadata mystnb.figure / mystnb.image (GUIDE.md).
FIGURE_PENDING: dict[str, str] = {
    # Empty: chapter 5, the last with uncaptioned output figures, has its captions.
}
# Pages with a display equation wider than the text column at 1280 px (strict, as above): the
# chapter owners break them with `aligned`.
EQUATION_PENDING: dict[str, str] = {
    # Empty: chapters 2, 3 and 9, the last with an equation too wide at 1280 px, break theirs with aligned.
}
# The SVG diagrams of book/diagrams that chapters 1-10 show between them, at least; while fewer are
# inserted, DIAGRAMS_PENDING says why (strict: with enough diagrams it must be None).
MIN_DIAGRAMS = 8
DIAGRAMS_PENDING: str | None = None
DIAGRAMS = ROOT / "book" / "diagrams"
# Notebook cell tags with which Jupyter Book leaves out a cell's input or output on purpose.
HIDDEN_INPUT = {"remove-cell", "remove-input"}
HIDDEN_OUTPUT = {"remove-cell", "remove-output"}


@pytest.fixture(scope="module")
def browser():
    with headless_chromium(CHROMIUM_FLAGS) as chromium:
        yield chromium


def _expected_cells(page: Page) -> tuple[int, int]:
    """(code cells shown, code cells with an output shown) for a notebook page, from the .ipynb."""
    nb = nbformat.read(page.source, as_version=4)
    inputs = outputs = 0
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        tags = set(cell.metadata.get("tags", []))
        inputs += not tags & HIDDEN_INPUT
        outputs += bool(cell.outputs) and not tags & HIDDEN_OUTPUT
    return inputs, outputs


class Reader:
    """One browser tab that reads the book page after page, as a reader does: each page is a fresh load (a new
    document) in the same tab, which Chromium serves from the same renderer, with the theme's and MathJax's
    scripts already compiled (a new context per page cost about 1.3 s more CPU a page).

    ``open(page)`` loads a page offline at 1280 px and returns what goes wrong on it (console errors, uncaught
    JavaScript errors, failed local requests, requests to another host): a list that keeps filling while the
    page is checked, so that check_page sees what happens after the load too."""

    def __init__(self, browser) -> None:
        self.context = browser.new_context(viewport={"width": WIDE, "height": 900})
        self.tab = self.context.new_page()
        self.errors: list[str] = []
        # Only requests that are not file:// are routed (matched in Playwright's driver, so that the ~35 local
        # requests of a page do not each make a round trip to Python): each is aborted, and reported.
        self.context.route(NOT_LOCAL, self._route)
        self.tab.on("console", self._on_console)
        self.tab.on("pageerror", lambda error: self.errors.append(f"uncaught JavaScript error: {error}"))
        self.tab.on("requestfailed", self._on_request_failed)

    def _route(self, request_route) -> None:
        url = request_route.request.url
        if url.startswith("file://"):  # not routed (NOT_LOCAL): kept in case a pattern ever lets one through
            request_route.continue_()
        else:
            if url not in EXPECTED_EXTERNAL:
                self.errors.append(f"request to an unexpected external URL: {url}")
            request_route.abort()

    def _on_console(self, message) -> None:
        if message.type != "error":
            return
        source = (message.location or {}).get("url", "")
        if source in EXPECTED_EXTERNAL and "ERR_FAILED" in message.text:
            return  # the load error of an expected external resource that we aborted
        self.errors.append(f"console error: {message.text} ({source})")

    def _on_request_failed(self, request) -> None:
        if request.url.startswith("file://"):
            self.errors.append(f"failed to load {request.url}: {request.failure}")

    def open(self, page: Page) -> list[str]:
        if self.tab.viewport_size != {"width": WIDE, "height": 900}:  # check_page left it at a phone's width
            # leave the last page first: resizing it would lay it out once more, for nothing (0.3-0.5 CPU-s)
            self.tab.goto("about:blank")
            self.tab.set_viewport_size({"width": WIDE, "height": 900})
        self.errors = []
        self.tab.goto(page.html.as_uri(), wait_until="load")
        # let deferred scripts (theme, copy buttons) run and report errors: until the tab is idle (check_page
        # looks at the errors again at its end, after all its checks)
        self.tab.evaluate(JS_SETTLED)
        return self.errors

    def close(self) -> None:
        self.context.close()


# Resolves when the page has drawn two frames and its main thread has nothing left to do (tasks that the
# load queued, resize handlers after a viewport change): waiting for that instead of a fixed time.
JS_SETTLED = """() => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(
    () => requestIdleCallback(done, {timeout: 2000}))))"""


@pytest.fixture(scope="module")
def reader(browser):
    opened = Reader(browser)
    yield opened
    opened.close()


def _assert_typeset(tab, page: Page) -> None:
    """Every formula on the page is typeset by the MathJax served with the book (no CDN, so offline too)."""
    scripts = tab.eval_on_selector_all("script[src*='mathjax']", "els => els.map(e => e.src)")
    assert scripts and all(src.startswith("file://") for src in scripts), (
        f"{page.docname}: MathJax is not served with the book (sphinx-mathjax-offline): {scripts}"
    )
    tab.wait_for_function("() => window.MathJax && MathJax.startup && MathJax.startup.promise", timeout=15_000)
    tab.evaluate("() => MathJax.startup.promise")  # resolves when the first typesetting pass is done
    formulas, typeset = tab.locator(".math").count(), tab.locator(".math mjx-container").count()
    assert typeset >= formulas, f"{page.docname}: {formulas} formulas, only {typeset} typeset by MathJax"
    tex_errors = tab.eval_on_selector_all("mjx-merror", "els => els.map(e => e.getAttribute('data-mjx-error'))")
    assert not tex_errors, f"{page.docname}: MathJax could not typeset: {tex_errors}"
    # A TeX delimiter left in the text is a formula MathJax never saw (code listings may hold any text).
    raw = tab.evaluate(
        r"""() => {
            const main = document.querySelector("main").cloneNode(true);
            main.querySelectorAll("pre, code, mjx-container, script").forEach(e => e.remove());
            return main.textContent.split("\n").filter(l => /\\[([]/.test(l)).map(l => l.trim());
        }"""
    )
    assert not raw, f"{page.docname}: raw TeX left on the page: {raw[:5]}"


PAGES = toc_pages()
# The menus are the theme's, the same on every page: they are tried on the first page and on the first
# chapter (a notebook page, whose header has more buttons), 3-8 s each under load, not on all 19.
MENU_PAGES = [PAGES[0], *[page for page in PAGES if page.is_notebook][:1]]


# Pages that another test module opens anyway, with this module's checks run on that load (check_page), so
# that no page is opened twice: docname -> the test that checks it (test_every_page_is_checked_once keeps this
# honest). The attention explorer: tests/test_explorer_browser.py loads it at 1280 px for its own tests.
CHECKED_ELSEWHERE = {
    "book/explorer": "tests/test_explorer_browser.py::test_the_explorer_passes_every_page_check",
}
OWN_PAGES = [page for page in PAGES if page.docname not in CHECKED_ELSEWHERE]


def page_entry(docname: str) -> Page:
    """The table of contents' entry of ``docname`` (for a module that checks a page on its own load)."""
    return next(page for page in PAGES if page.docname == docname)


def test_every_page_is_checked_once() -> None:
    """Every page of _toc.yml is checked here or, on its own load, by the test CHECKED_ELSEWHERE names, which
    must exist and call check_page: a page left out here is never left out altogether."""
    assert set(CHECKED_ELSEWHERE) <= {page.docname for page in PAGES}, "CHECKED_ELSEWHERE names a page not in _toc.yml"
    for docname, test in CHECKED_ELSEWHERE.items():
        path, name = test.split("::")
        source = (ROOT / path).read_text()
        body = source.split(f"def {name}(", 1)
        assert len(body) == 2, f"{docname} is to be checked by {test}, which does not exist"
        assert "check_page(" in body[1].split("\ndef ", 1)[0], f"{test} does not call check_page on {docname}"


@pytest.mark.parametrize("page", OWN_PAGES, ids=[page.docname for page in OWN_PAGES])
def test_page_in_headless_chromium(reader, page: Page) -> None:
    ensure_built()
    check_page(reader.tab, page, reader.open(page))


def check_page(tab, page: Page, errors: list[str]) -> None:
    """Every check of the module docstring on one loaded page (``tab``, at 1280 px); ``errors``: what went wrong
    while it loaded (console errors, uncaught errors, failed local requests, requests to another host).
    Leaves the page at 1280 px if it tries the menus (MENU_PAGES), else at a phone's width: the next page is
    opened at 1280 px anyway (Reader.open), and laying this one out again at 1280 px would cost CPU for nothing."""
    assert tab.locator("main h1").count() >= 1, f"{page.docname}: no title on the page"
    assert not errors, f"{page.docname}:\n" + "\n".join(errors)

    images = tab.eval_on_selector_all(
        "img", "els => els.map(e => ({src: e.currentSrc || e.src, ok: e.complete && e.naturalWidth > 0}))"
    )
    external = [img["src"] for img in images if not img["src"].startswith("file://")]
    broken = [img["src"] for img in images if img["src"].startswith("file://") and not img["ok"]]
    assert not broken, f"{page.docname}: images that did not load: {broken}"
    assert not external, f"{page.docname}: external images (offline they are broken): {external}"

    if page.is_notebook:
        inputs, outputs = _expected_cells(page)
        assert inputs > 0 and outputs > 0, f"{page.docname}: the notebook has no code or no stored outputs"
        assert tab.locator("div.cell div.cell_input").count() == inputs, f"{page.docname}: code cells missing"
        assert tab.locator("div.cell div.cell_output").count() == outputs, f"{page.docname}: outputs missing"
        expected = colab_url(page.source.relative_to(ROOT).as_posix())
        # The rocket menu's entry (Bootstrap moves its title into a tooltip, so match the label).
        launch = tab.locator(".dropdown-launch-buttons a", has_text="Colab")
        assert launch.count() == 1, f"{page.docname}: no 'Launch on Colab' button"
        assert launch.get_attribute("href") == expected
    # Every Colab badge (a chapter's own, or the Assignments page's list) is the local image and
    # opens a notebook of this repository on Colab; on a chapter page, that chapter.
    badges = tab.locator(f"a:has(img[src$='{LOCAL_BADGE_IMAGE}'])")
    targets = {badges.nth(i).get_attribute("href") for i in range(badges.count())}
    if page.is_notebook:
        assert targets == {expected}, f"{page.docname}: badge links {targets}, expected {expected}"
    for url in targets:
        path = url.removeprefix(colab_url(""))
        assert path != url and (ROOT / path).is_file(), f"{page.docname}: badge opens {url}: no such notebook"
    colab_links = tab.locator("article a[href^='https://colab.research.google.com/github/']:has(img)")
    assert colab_links.count() == badges.count(), f"{page.docname}: a Colab link whose image is not the badge"

    if tab.locator("script[src*='mathjax']").count():  # maths is on the page for MathJax to typeset
        assert tab.locator(".math").count() > 0, f"{page.docname}: loads MathJax but has no maths"
    if tab.locator(".math").count():
        _assert_typeset(tab, page)
    # The checks below report every failure of the page together, so that one does not hide another.
    failures: list[str] = []
    if page.is_notebook or CHAPTER.match(page.docname):
        failures += _figure_failures(tab, page)

    # The first screen at 1280 px, before _cut_off_failures goes to a phone's width (and, unless the menus are
    # tried next, stays there).
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    shot = SCREENSHOTS / f"{page.docname.replace('/', '__')}.png"
    tab.screenshot(path=str(shot), full_page=os.environ.get("VITEDU_SCREENSHOTS") == "full")
    if shot.stat().st_size <= 10_000:
        failures.append(f"{shot} is suspiciously small: was anything rendered?")
    failures += _cut_off_failures(tab, page, back_to_wide=page in MENU_PAGES)

    if page in MENU_PAGES:
        try:
            _assert_menus_work(tab, page)  # last: it opens and closes the sidebars
        except AssertionError as error:
            failures.append(str(error))
    if errors:  # what went wrong after the load, while the page was looked at, resized and its menus tried
        failures.append(f"{page.docname}, after loading:\n" + "\n".join(errors))
    assert not failures, "\n".join(failures)


# ------------------------------------------------------------------------------------------ figures

JS_FIGURES = r"""([diagrams, numbered]) => {
  const file = (img) => (img.currentSrc || img.src).split("?")[0].split("/").pop();
  // Sphinx copies book/diagrams/vit.svg to _images/vit.svg (vit1.svg if another vit.svg came first).
  const isDiagram = (img) => diagrams.some((d) => new RegExp(`^${d}\\d*\\.svg$`).test(file(img)));
  const images = Array.from(document.querySelectorAll("main .cell_output img, main img"))
      .filter((img, i, all) => all.indexOf(img) === i && (img.closest(".cell_output") || isDiagram(img)));
  return images.map((img) => {
    const figure = img.closest("figure");
    const caption = figure && figure.querySelector("figcaption");
    const number = caption && caption.querySelector(".caption-number");
    const text = caption && caption.querySelector(".caption-text");
    const alt = (img.getAttribute("alt") || "").trim();
    const problems = [];
    if (!figure) problems.push("not in a <figure>");
    else if (!number || !new RegExp(numbered).test(number.textContent.trim())) problems.push("no number");
    if (figure && !(text && text.textContent.trim())) problems.push("no caption");
    // myst-nb writes the file's path as the alt text of an output image that has none.
    if (!alt || /\.(png|jpe?g|gif|svg)$/i.test(alt)) problems.push("no alt text");
    return {file: file(img), diagram: isDiagram(img), problems};
  });
}"""


def _diagram_names() -> list[str]:
    return sorted(path.stem for path in DIAGRAMS.glob("*.svg")) if DIAGRAMS.is_dir() else []


def _figure_failures(tab, page: Page) -> list[str]:
    """Every image of a cell's output, and every diagram, sits in a <figure> with a numbered caption ("Fig. 4.2"
    in chapter 4, "Fig. A2.1" in Appendix 2: number_prefix) and has an alt text. A page listed in FIGURE_PENDING
    must still fail (strict)."""
    numbered = rf"^Fig\.\s*{re.escape(number_prefix(page))}\d+$"
    figures = tab.evaluate(JS_FIGURES, [_diagram_names(), numbered])
    problems = [f"{f['file'][:24]}: {', '.join(f['problems'])}" for f in figures if f["problems"]]
    if page.docname in FIGURE_PENDING:
        if problems:
            return []
        return [f"{page.docname}: every figure is numbered and captioned: remove it from FIGURE_PENDING"]
    if not problems:
        return []
    return [
        f"{page.docname}: {len(problems)} of {len(figures)} figures lack a number, caption or alt text "
        f"(cell metadata mystnb.figure.caption/name and mystnb.image.alt): {problems[:8]}"
    ]


def test_chapters_show_the_diagrams() -> None:
    """Chapters 1-10 show at least MIN_DIAGRAMS of the SVG diagrams in book/diagrams between them (each one
    is loaded and checked in Chromium by the page test above: it loaded, it is a numbered figure)."""
    pages = [page for page in ensure_built() if CHAPTER.match(page.docname)]
    names = _diagram_names()
    shown: dict[str, list[str]] = {}
    for page in pages:
        sources = re.findall(r"<img\b[^>]*\bsrc=\"([^\"]+\.svg)\"", page.html.read_text())
        files = [src.rsplit("/", 1)[-1] for src in sources]
        found = [f for f in files if any(re.fullmatch(rf"{re.escape(n)}\d*\.svg", f) for n in names)]
        if found:
            shown[page.docname] = found
    total = sum(len(found) for found in shown.values())
    summary = f"{total} diagrams in chapters 1-10 ({MIN_DIAGRAMS} wanted): {shown}"
    if DIAGRAMS_PENDING:
        assert total < MIN_DIAGRAMS, f"{summary}: set DIAGRAMS_PENDING to None"
    else:
        assert total >= MIN_DIAGRAMS, summary


# ------------------------------------------------------------------------------------------ numbers

APPENDIX = re.compile(r"notebooks/A(\d)_")


def number_prefix(page: Page) -> str:
    """What the numbers of a page's figures, equations and exercises start with: "4." in chapter 4 (Sphinx's
    number of the chapter: _toc.yml numbers the parts that hold chapters 1-10), "A2." in Appendix 2 (counted by
    book/_ext/vitedu_book.py), nothing on the other pages (a plain count: the intro's figure is Fig. 1)."""
    if chapter := CHAPTER.match(page.docname):
        return f"{int(chapter.group(1))}."
    if appendix := APPENDIX.match(page.docname):
        return f"A{appendix.group(1)}."
    return ""


def _text(html: str) -> str:
    return re.sub(r"\s+", " ", unescape(re.sub(r"<[^>]+>", "", html))).strip()


def _notebook_title(page: Page) -> str:
    """The notebook's own title: its first "# " line ("4. Patches and positions")."""
    cells = nbformat.read(page.source, as_version=4).cells
    lines = [line for cell in cells if cell.cell_type == "markdown" for line in cell.source.splitlines()]
    return next(line.removeprefix("# ").strip() for line in lines if line.startswith("# "))


def test_figures_equations_and_exercises_carry_the_chapter_number() -> None:
    """In chapter N the figures, display equations and exercises are numbered N.1, N.2, ... in reading order
    ("Fig. 10.3", "(4.2)", "Exercise 7.1"), in Appendix n An.1, An.2, ...; elsewhere they are plain counts. A
    chapter's title reads "N. <title>" with the number written once (Sphinx's), the same as the notebook's own
    title, and so does its entry in the sidebar; no other page carries a section number."""
    pages = ensure_built()
    counts: dict[str, dict[str, int]] = {}
    for page in pages:
        html = page.html.read_text()
        prefix = number_prefix(page)
        numbers: dict[str, list[str]] = {}
        for caption in re.findall(r'<span class="caption-number">(.*?)</span>', html, re.S):
            kind, _, number = _text(caption).rpartition(" ")
            numbers.setdefault(kind, []).append(number)
        numbers["equation"] = [_text(n).strip("()") for n in re.findall(r'<span class="eqno">(.*?)<a', html, re.S)]
        for kind, found in numbers.items():
            if prefix:
                expected = [f"{prefix}{k}" for k in range(1, len(found) + 1)]
                assert found == expected, f"{page.docname}: {kind} numbers {found}, expected {expected}"
            else:
                assert all(n.isdigit() for n in found), f"{page.docname}: {kind} numbers {found}"
        counts[page.docname] = {kind: len(found) for kind, found in numbers.items()}

        # the article's title (the one with a link to itself), not the print-only header's
        heading = re.search(r'<h1>((?:(?!</h1>).)*)<a class="headerlink"', html, re.S)
        assert heading, f"{page.docname}: no title"
        secnumber = re.findall(r'<span class="section-number">(.*?)</span>', heading.group(1))
        if CHAPTER.match(page.docname):
            assert secnumber == [prefix + " "], f"{page.docname}: the title's section number is {secnumber}"
            assert _text(heading.group(1)) == _notebook_title(page), (
                f"{page.docname}: the book's title {_text(heading.group(1))!r} is not the notebook's "
                f"{_notebook_title(page)!r} (the chapter's place in _toc.yml and its number disagree?)"
            )
        else:
            assert not secnumber, f"{page.docname} is not a chapter, but its title is numbered {secnumber}"

    # The sidebar (the same on every page; read on the intro): chapters "N. <title>", every other page unnumbered.
    sidebar = pages[0].html.read_text().split('<nav class="bd-links bd-docs-nav"', 1)[1].split("</nav>", 1)[0]
    entries = dict(re.findall(r'<li class="toctree-l1[^"]*"><a class="reference internal" href="([^"]+)">(.*?)</a>',
                              sidebar, re.S))
    for page in pages[1:]:
        href = os.path.relpath(page.html, pages[0].html.parent)
        assert href in entries, f"{page.docname} is not in the sidebar"
        label = _text(entries[href])
        expected = _notebook_title(page) if CHAPTER.match(page.docname) else None
        if expected:
            assert label == expected, f"{page.docname}: the sidebar says {label!r}, expected {expected!r}"
        else:
            assert not re.match(r"\d+\.", label), f"{page.docname} is not a chapter, but the sidebar numbers it"

    # Not vacuous: there are figures in chapter 10, equations in chapter 4, a figure in an appendix.
    for docname, kind in [("notebooks/10_", "Fig."), ("notebooks/04_", "equation"), ("notebooks/A2_", "Fig.")]:
        assert any(d.startswith(docname) and n.get(kind) for d, n in counts.items()), f"no {kind} in {docname}"


# ------------------------------------------------------------------------------- nothing cut off

# Code blocks that wrap (white-space: pre-wrap, as book/_static/vitedu.css does for docstring
# examples in the API reference) cannot scroll, so they are counted as fitting. Printed outputs do
# not wrap (they keep their columns), so an output line longer than the box counts.
JS_OVERFLOW = r"""() => {
  const wide = (e) => e.scrollWidth > e.clientWidth + 2;
  const all = Array.from(document.querySelectorAll("main div.highlight pre, main .cell_output pre, main .output pre"));
  const describe = (e) => `${e.scrollWidth - e.clientWidth}px: ${(e.textContent.split("\n")
      .reduce((a, b) => (b.length > a.length ? b : a), "")).slice(0, 90)}`;
  const isOutput = (e) => !!e.closest(".cell_output, .output");
  return {
    inputs: all.filter((e) => !isOutput(e) && wide(e)).map(describe),
    outputs: all.filter((e) => isOutput(e) && wide(e)).map(describe),
    page: document.documentElement.scrollWidth - window.innerWidth,
  };
}"""

# Display equations wider than their box (the text column), whether that box scrolls; the Colab
# badges' size and place; names in inline code that a table breaks over two lines.
JS_LAYOUT = r"""() => {
  const tex = (e) => {
    try { return MathJax.startup.document.getMathItemsWithin(e)[0].math.trim().replace(/\s+/g, " "); }
    catch (error) { return e.id || e.textContent.trim(); }
  };
  // The box of a display equation: the div Sphinx writes, or MathJax's container inside it (the
  // theme lets that one scroll): whichever overflows is the one the reader has to scroll.
  const equations = Array.from(document.querySelectorAll("main div.math, main div.amsmath")).map((e) => {
    const boxes = [e, ...e.querySelectorAll("mjx-container")].filter((b) => b.scrollWidth > b.clientWidth + 1);
    return boxes.length ? {over: Math.max(...boxes.map((b) => b.scrollWidth - b.clientWidth)), tex: tex(e).slice(0, 70),
        scrolls: boxes.some((b) => ["auto", "scroll"].includes(getComputedStyle(b).overflowX))} : null;
  }).filter((e) => e);
  const badges = Array.from(document.querySelectorAll("main img[src$='colab-badge.svg']")).map((img) => {
    const box = img.getBoundingClientRect();
    return {width: Math.round(box.width * 10) / 10, left: Math.round(box.left), right: Math.round(box.right),
            shown: img.checkVisibility({visibilityProperty: true, opacityProperty: true})};
  });
  const broken = Array.from(document.querySelectorAll("main table code"))
    .filter((c) => !/\s/.test(c.textContent.trim()) && c.getClientRects().length > 1).map((c) => c.textContent);
  return {equations, badges, broken};
}"""
BADGE_MIN_WIDTH = 100  # px: the badge is drawn 117 x 20


def _badge_problems(badges: list[dict], width: int) -> list[str]:
    return [
        f"at {width} px a Colab badge is {b['width']} px wide, at x = {b['left']}..{b['right']}"
        for b in badges
        if not b["shown"] or b["width"] < BADGE_MIN_WIDTH or b["left"] < 0 or b["right"] > width
    ]


def _cut_off_failures(tab, page: Page, back_to_wide: bool) -> list[str]:
    """At 1280 px no code cell or output scrolls sideways, nor the page, and no display equation is wider
    than the text column; at 390 px (a phone) the page does not scroll sideways and an equation wider
    than the screen scrolls inside its own box. The Colab badges are drawn whole at both widths.
    A page listed in SCROLL_PENDING (or EQUATION_PENDING) must still fail that check (strict).
    Returns what fails. Leaves the page at 390 px, or at 1280 px with ``back_to_wide``."""
    wide, wide_maths = tab.evaluate(JS_OVERFLOW), tab.evaluate(JS_LAYOUT)
    problems = [f"at {WIDE} px: code cells that scroll sideways: {wide['inputs']}"] if wide["inputs"] else []
    problems += [f"at {WIDE} px: outputs that scroll sideways: {wide['outputs']}"] if wide["outputs"] else []
    problems += [f"the page scrolls sideways at {WIDE} px by {wide['page']} px"] if wide["page"] > 0 else []
    tab.set_viewport_size({"width": PHONE, "height": 844})
    tab.wait_for_function(f"() => window.innerWidth === {PHONE}")
    tab.evaluate(JS_SETTLED)  # the page's resize handlers have run
    phone, phone_maths = tab.evaluate(JS_OVERFLOW), tab.evaluate(JS_LAYOUT)
    if phone["page"] > 0:
        problems.append(f"the page scrolls sideways on a phone ({PHONE} px) by {phone['page']} px")
    if back_to_wide:
        tab.set_viewport_size({"width": WIDE, "height": 900})
    failures = []
    if page.docname in SCROLL_PENDING and not problems:
        failures.append(f"{page.docname} no longer scrolls sideways: remove it from SCROLL_PENDING")
    if page.docname not in SCROLL_PENDING and problems:
        failures.append(f"{page.docname}: " + "; ".join(problems))

    clipped = [e["tex"] for e in phone_maths["equations"] if not e["scrolls"]]
    if clipped:
        failures.append(f"{page.docname}: at {PHONE} px these equations are cut off, not scrolled: {clipped}")
    too_wide = [f"{e['over']} px too wide: {e['tex']}" for e in wide_maths["equations"]]
    if page.docname in EQUATION_PENDING and not too_wide:
        failures.append(f"{page.docname}: every equation fits at {WIDE} px: remove it from EQUATION_PENDING")
    if page.docname not in EQUATION_PENDING and too_wide:
        failures.append(f"{page.docname}: display equations wider than the text at {WIDE} px: {too_wide}")
    badges = _badge_problems(wide_maths["badges"], WIDE) + _badge_problems(phone_maths["badges"], PHONE)
    if badges:
        failures.append(f"{page.docname}: Colab badges not shown whole: {badges}")
    broken = {f"{name} (at {w} px)" for w, m in [(WIDE, wide_maths), (PHONE, phone_maths)] for name in m["broken"]}
    if broken:
        failures.append(f"{page.docname}: names in inline code that a table breaks in two: {sorted(broken)}")
    return failures


# ------------------------------------------------------------------------------------------- menus

JS_SHOWN = r"""(selector) => {
  // Links of `selector` that a reader can see: laid out, not hidden, and on the screen.
  return Array.from(document.querySelectorAll(selector)).filter((a) => {
    const box = a.getBoundingClientRect();
    return box.width > 0 && box.right > 0 && box.left < window.innerWidth
        && a.checkVisibility({visibilityProperty: true, opacityProperty: true});
  }).length;
}"""
TOC_LINKS = "#pst-primary-sidebar nav.bd-docs-nav a, #pst-primary-sidebar-modal nav.bd-docs-nav a"
OUTLINE_LINKS = "#pst-secondary-sidebar .page-toc a, #pst-secondary-sidebar-modal .page-toc a"


def _visible_button(tab, selector: str):
    buttons = tab.locator(selector)
    shown = [buttons.nth(i) for i in range(buttons.count()) if buttons.nth(i).is_visible()]
    return shown


def _wait_shown(tab, selector: str, shown: bool, what: str) -> None:
    test = "n => n > 0" if shown else "n => n === 0"
    try:
        tab.wait_for_function(f"() => ({test})(({JS_SHOWN})({selector!r}))", timeout=3000)
    except Exception:  # Playwright's TimeoutError: say what the reader would have seen
        state = "shown" if shown else "hidden"
        raise AssertionError(f"{what}: not {state} ({tab.evaluate(JS_SHOWN, selector)} links visible)") from None


def _assert_menus_work(tab, page: Page) -> None:
    """The ☰ button hides and shows the table of contents at 1280 px and opens it at 390 px; the page's
    outline stands beside the text at 1280 px and the contents button opens it at 390 px."""
    name = page.docname
    has_outline = tab.locator("#pst-secondary-sidebar .page-toc a").count() > 0
    menu = _visible_button(tab, "button.primary-toggle")
    assert len(menu) == 1, f"{name}: at {WIDE} px {len(menu)} ☰ buttons are visible, not one"
    _wait_shown(tab, TOC_LINKS, True, f"{name}: at {WIDE} px the table of contents")
    menu[0].click()
    _wait_shown(tab, TOC_LINKS, False, f"{name}: at {WIDE} px after a click on ☰, the table of contents")
    menu[0].click()
    _wait_shown(tab, TOC_LINKS, True, f"{name}: at {WIDE} px after a second click on ☰, the table of contents")
    if has_outline:
        _wait_shown(tab, OUTLINE_LINKS, True, f"{name}: at {WIDE} px the page's outline")

    tab.set_viewport_size({"width": PHONE, "height": 844})
    _wait_shown(tab, TOC_LINKS, False, f"{name}: at {PHONE} px, before ☰ is pressed, the table of contents")
    menu = _visible_button(tab, "button.primary-toggle")
    assert len(menu) == 1, f"{name}: at {PHONE} px {len(menu)} ☰ buttons are visible, not one"
    menu[0].click()
    _wait_shown(tab, TOC_LINKS, True, f"{name}: at {PHONE} px after a click on ☰, the table of contents")
    tab.keyboard.press("Escape")
    _wait_shown(tab, TOC_LINKS, False, f"{name}: at {PHONE} px after Escape, the table of contents")
    if has_outline:
        contents = _visible_button(tab, "button.secondary-toggle")
        assert len(contents) == 1, f"{name}: at {PHONE} px {len(contents)} contents buttons are visible, not one"
        _wait_shown(tab, OUTLINE_LINKS, False, f"{name}: at {PHONE} px, before it is pressed, the outline")
        contents[0].click()
        after = f"{name}: at {PHONE} px after a click on the contents button, the outline"
        _wait_shown(tab, OUTLINE_LINKS, True, after)
        tab.keyboard.press("Escape")
    tab.set_viewport_size({"width": WIDE, "height": 900})
