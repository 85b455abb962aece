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
  output is wider than its box, and at 390 px (a phone) the page itself is not wider than the screen
  (a code block may scroll inside its own box there: a phone shows 38 columns);
Each page is loaded once for all of this. It writes a screenshot of the first screen to
`_build/screenshots/<page>.png` (and checks that something was drawn); with VITEDU_SCREENSHOTS=full
the screenshot is of the whole page, for a person to look through (3-8 s a page, so not by default).

Offline by design: the test aborts every request that is not `file://`, and *any* request to another
host fails it. The Colab badge is a local image (book/_static/colab-badge.svg, swapped in for Colab's
own at build time); every badge must link to a notebook of this repository on Colab (on a chapter
page: to this chapter).

Chromium is Debian's `chromium` package driven by Playwright (`executable_path`; no browser download).
Without it the test is skipped with the reason, except under CI (`CI=true`), where it fails.
"""

from __future__ import annotations

import os
import shutil
import warnings
from pathlib import Path

import nbformat
import pytest
from book_pages import HTML, LOCAL_BADGE_IMAGE, ROOT, Page, colab_url, ensure_built, toc_pages

pytestmark = pytest.mark.book

SCREENSHOTS = ROOT / "_build" / "screenshots"
CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
# External URLs a page may request: none (the book works offline).
EXPECTED_EXTERNAL: dict[str, str] = {}
WIDE, PHONE = 1280, 390
# Pages not yet held to "nothing scrolls sideways", each with its reason (strict: a page that already
# passes fails until its entry is removed).
SCROLL_PENDING: dict[str, str] = {
    # Empty: chapter 8, the last page that scrolled sideways, is wrapped to 76 columns.
}
# Notebook cell tags with which Jupyter Book leaves out a cell's input or output on purpose.
HIDDEN_INPUT = {"remove-cell", "remove-input"}
HIDDEN_OUTPUT = {"remove-cell", "remove-output"}


def _chromium() -> str | None:
    """$CHROMIUM if set (and only it), else Debian's real binary (/usr/bin/chromium is a wrapper script
    around it), else chromium on PATH."""
    if "CHROMIUM" in os.environ:
        candidate = os.environ["CHROMIUM"]
        return candidate if Path(candidate).is_file() and os.access(candidate, os.X_OK) else None
    if os.access("/usr/lib/chromium/chromium", os.X_OK):
        return "/usr/lib/chromium/chromium"
    return shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def browser():
    executable = _chromium()
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
        chromium = playwright.chromium.launch(executable_path=executable, headless=True, args=CHROMIUM_FLAGS)
        yield chromium
        chromium.close()


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


def _open(browser, page: Page):
    """Load one page offline; return its browser context, the page, and what went wrong while loading."""
    context = browser.new_context(viewport={"width": WIDE, "height": 900})
    tab = context.new_page()
    external: list[str] = []
    errors: list[str] = []

    def route(request_route) -> None:
        url = request_route.request.url
        if url.startswith("file://"):
            request_route.continue_()
        else:
            external.append(url)
            request_route.abort()

    def on_console(message) -> None:
        if message.type != "error":
            return
        source = (message.location or {}).get("url", "")
        if source in EXPECTED_EXTERNAL and "ERR_FAILED" in message.text:
            return  # the load error of an expected external resource that we aborted
        errors.append(f"console error: {message.text} ({source})")

    def on_request_failed(request) -> None:
        if request.url.startswith("file://"):
            errors.append(f"failed to load {request.url}: {request.failure}")

    context.route("**/*", route)
    tab.on("console", on_console)
    tab.on("pageerror", lambda error: errors.append(f"uncaught JavaScript error: {error}"))
    tab.on("requestfailed", on_request_failed)
    tab.goto(page.html.as_uri(), wait_until="load")
    tab.wait_for_timeout(300)  # let deferred scripts (theme, copy buttons) run and report errors
    unexpected = sorted(set(external) - set(EXPECTED_EXTERNAL))
    errors += [f"request to an unexpected external URL: {url}" for url in unexpected]
    return context, tab, errors


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


@pytest.mark.parametrize("page", PAGES, ids=[page.docname for page in PAGES])
def test_page_in_headless_chromium(browser, page: Page) -> None:
    ensure_built()
    context, tab, errors = _open(browser, page)
    try:
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

        _assert_nothing_scrolls_sideways(tab, page)

        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        shot = SCREENSHOTS / f"{page.docname.replace('/', '__')}.png"
        tab.screenshot(path=str(shot), full_page=os.environ.get("VITEDU_SCREENSHOTS") == "full")
        assert shot.stat().st_size > 10_000, f"{shot} is suspiciously small: was anything rendered?"
    finally:
        context.close()


# ------------------------------------------------------------------------------- nothing scrolls sideways

# Code blocks that wrap (white-space: pre-wrap, as book/_static/vitedu.css does for docstring
# examples in the API reference) cannot scroll, so they are counted as fitting.
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


def _assert_nothing_scrolls_sideways(tab, page: Page) -> None:
    """At 1280 px no code cell or output scrolls sideways, nor the page; at 390 px (a phone) not the page.
    A page listed in SCROLL_PENDING must still scroll (strict): once it is fixed, its entry goes."""
    wide = tab.evaluate(JS_OVERFLOW)
    problems = [f"at {WIDE} px: code cells that scroll sideways: {wide['inputs']}"] if wide["inputs"] else []
    problems += [f"at {WIDE} px: outputs that scroll sideways: {wide['outputs']}"] if wide["outputs"] else []
    problems += [f"the page scrolls sideways at {WIDE} px by {wide['page']} px"] if wide["page"] > 0 else []
    tab.set_viewport_size({"width": PHONE, "height": 844})
    tab.wait_for_timeout(200)
    phone = tab.evaluate(JS_OVERFLOW)
    if phone["page"] > 0:
        problems.append(f"the page scrolls sideways on a phone ({PHONE} px) by {phone['page']} px")
    tab.set_viewport_size({"width": WIDE, "height": 900})
    if page.docname in SCROLL_PENDING:
        assert problems, f"{page.docname} no longer scrolls sideways: remove it from SCROLL_PENDING"
    else:
        assert not problems, f"{page.docname}: " + "; ".join(problems)
