"""How much of each chapter's page is code, as a reader at a laptop sees it.

A chapter derives a mechanism in its own cells and checks it against vitedu; the plumbing around that
(setup, loading files and checkpoints, plotting, timing and memory harnesses, tables of stored results) is
folded with the cell tag `hide-input`, so that its output stays on the page and the reader can open the
code. This test holds every chapter to it: in headless Chromium, offline, at 1280 px,

    visible code / page height <= MAX_CODE_SHARE

where *visible code* is the summed height of the code cells' input areas that are shown (a folded cell
counts only its "Show code cell source" line; a cell inside a closed dropdown, such as an exercise's
solution, counts nothing) and of the code blocks in the prose, and *page height* is the height of the
article (the chapter's text, code and outputs). The table of every chapter's share is printed first
(`pytest -s` shows it), then the chapters over the limit are listed together.

A chapter over the limit has plumbing to fold or to move into vitedu, or derivation code to shorten; a
derivation, a measurement or a check is never folded to pass.
"""

from __future__ import annotations

import re
import time

import pytest
from book_pages import Page, ensure_built, notebook_pages, offline_tab

pytestmark = pytest.mark.book

MAX_CODE_SHARE = 0.35
WIDE = 1280
# The chapters: notebooks/01_... to 10_..., and the appendices A1, A2.
CHAPTER = re.compile(r"notebooks/(\d\d|A\d)_")
CHAPTERS = [page for page in notebook_pages() if CHAPTER.match(page.docname)]

# Heights in CSS pixels of what is drawn: checkVisibility() is false for the code of a closed <details>
# (a folded cell) and for a cell in a collapsed dropdown (visibility: hidden), whose box may still have a height.
JS_CODE_SHARE = """() => {
    const article = document.querySelector("article.bd-article");
    const shown = (e) => e.checkVisibility({visibilityProperty: true, opacityProperty: true});
    const height = (e) => (shown(e) ? e.getBoundingClientRect().height : 0);
    let code = 0, cells = 0, folded = 0;
    for (const cell of article.querySelectorAll("div.cell")) {
        const fold = cell.querySelector("details.above-input:not([open])");
        const input = cell.querySelector("div.cell_input");
        if (fold) folded += 1;
        if (input) cells += 1;
        code += fold ? height(fold) : input ? height(input) : 0;
    }
    for (const block of article.querySelectorAll("div[class^='highlight-']")) {
        if (!block.closest("div.cell")) code += height(block);
    }
    return {code, page: article.getBoundingClientRect().height, cells, folded};
}"""
# Resolves when the page has drawn two frames and its main thread is idle (deferred scripts have run).
JS_SETTLED = """() => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(
    () => requestIdleCallback(done, {timeout: 2000}))))"""


def measure(tab, page: Page) -> dict:
    """Visible code and page height (px) of a chapter, loaded offline at 1280 px once it is laid out: fonts
    loaded and the maths typeset (MathJax changes the height of the text around it)."""
    tab.goto(page.html.as_uri(), wait_until="load")
    tab.evaluate("() => document.fonts.ready.then(() => true)")
    if tab.locator("script[src*='mathjax']").count():
        tab.wait_for_function("() => window.MathJax && MathJax.startup && MathJax.startup.promise", timeout=15_000)
        tab.evaluate("() => MathJax.startup.promise.then(() => true)")
    tab.evaluate(JS_SETTLED)
    return tab.evaluate(JS_CODE_SHARE)


def over_the_limit(shares: dict[str, float]) -> list[str]:
    """What fails: every chapter whose share is over MAX_CODE_SHARE, one line each."""
    return [
        f"{docname}: {share:.1%} of the page is visible code (at most {MAX_CODE_SHARE:.0%})"
        for docname, share in shares.items()
        if share > MAX_CODE_SHARE
    ]


def test_the_chapter_list_is_complete() -> None:
    assert len(CHAPTERS) >= 12, [page.docname for page in CHAPTERS]


def test_over_the_limit_is_reported() -> None:
    shares = {"a": 0.2, "b": 0.5, "c": 0.36, "d": 0.35}
    assert over_the_limit(shares) == [
        "b: 50.0% of the page is visible code (at most 35%)",
        "c: 36.0% of the page is visible code (at most 35%)",
    ]


def test_visible_code_is_at_most_a_third_of_each_chapter() -> None:
    ensure_built()
    start = time.perf_counter()
    rows = {}
    with offline_tab(WIDE) as tab:
        for page in CHAPTERS:
            rows[page.docname] = measure(tab, page)
    print(f"\nvisible code at {WIDE} px ({time.perf_counter() - start:.0f} s)")
    print(f"{'chapter':38} {'code px':>8} {'page px':>8} {'share':>6}  folded cells")
    shares = {}
    for docname, row in rows.items():
        assert row["page"] > 0 and row["cells"] > 0, f"{docname}: no article or no code cells measured"
        shares[docname] = row["code"] / row["page"]
        print(
            f"{docname:38} {row['code']:8.0f} {row['page']:8.0f} {shares[docname]:6.1%}"
            f"  {row['folded']} of {row['cells']}"
        )
    failures = over_the_limit(shares)
    assert not failures, "\n".join(failures)
