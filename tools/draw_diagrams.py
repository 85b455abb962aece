"""Draw the book's diagrams: ten SVG files in book/diagrams/ (nine architectures, one chapter map), one style.

    python tools/draw_diagrams.py           # (re)write book/diagrams/*.svg
    python tools/draw_diagrams.py --check   # exit 1 if a committed SVG differs from what this script draws

Plain string templating, no dependency: every diagram is a function that places boxes, tokens, arrows and
labels with the helpers below, so the style is defined once:
- colours: queries blue, keys orange, values green, attention weights purple; [CLS] vermilion, [DIST] pink,
  patch tokens slate, mask tokens grey (dashed), position embeddings yellow; operations white boxes;
- tokens are boxes; tensor shapes are written beside the arrows in the book's notation (book/notation.md);
- one font (the reader's sans-serif; maths in serif italic), one stroke width, one arrowhead;
- every drawing sits on its own light, rounded card, so its dark text stays readable in the dark theme;
  all share one viewBox width (640), so they appear at one scale in the text column.
The labels follow vitedu's code (vitedu/attention.py, blocks.py, vit.py, deit.py, cait.py, convit.py, mae.py).
tests/test_diagrams.py checks that the committed files equal this script's output.
"""

from __future__ import annotations

import argparse
import math
import sys
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT_DIR = ROOT / "book" / "diagrams"

WIDTH = 640  # every diagram: one viewBox width, hence one scale in the book
FONT = 17  # labels inside boxes
SHAPE_FONT = 16  # tensor shapes beside arrows
NOTE_FONT = 15  # side notes
TEXT = "#1f2328"
MUTED = "#4a5058"
CARD = "#fcfbf8"
EDGE = "#3d4752"

# kind -> (fill, stroke). Okabe-Ito hues (colour-blind safe) for the strokes, light tints for the fills.
KINDS = {
    "q": ("#d4e6f4", "#0072b2"),  # queries
    "k": ("#fce9c4", "#c98a00"),  # keys
    "v": ("#ccede2", "#009e73"),  # values
    "attn": ("#e7ddf0", "#7a4e9a"),  # attention scores / weights
    "cls": ("#f9dccb", "#d55e00"),  # [CLS]
    "dist": ("#f4dcea", "#b0508a"),  # [DIST]
    "patch": ("#e3e8ee", "#56687a"),  # patch tokens
    "mask": ("#d0d0d0", "#5f5f5f"),  # MAE's mask tokens
    "pos": ("#faf3c0", "#9a8700"),  # position embeddings
    "op": ("#ffffff", EDGE),  # an operation: Linear, softmax, MLP, ...
    "ln": ("#eef1f5", EDGE),  # LayerNorm
    "stage": ("#f4f2ec", "#8a8476"),  # a frame around a stack of blocks
    "loss": ("#fbe3e3", "#b2182b"),  # a loss
    "teacher": ("#efe5d6", "#8c6d46"),  # DeiT's teacher
    "out": ("#ffffff", EDGE),  # an output tensor
}

STYLE = f"""
    text {{ font-family: "DejaVu Sans", "Helvetica Neue", Helvetica, Arial, sans-serif; font-size: {FONT}px;
            fill: {TEXT}; }}
    .m {{ font-family: "DejaVu Serif", "Times New Roman", Times, serif; }}
    .it {{ font-style: italic; }}
    .shape {{ font-size: {SHAPE_FONT}px; fill: {MUTED}; }}
    .note {{ font-size: {NOTE_FONT}px; fill: {MUTED}; }}
    .head {{ font-weight: bold; }}
    .halo {{ paint-order: stroke; stroke: {CARD}; stroke-width: 5px; stroke-linejoin: round; }}
    .edge {{ fill: none; stroke: {EDGE}; stroke-width: 1.6px; }}
    .dash {{ stroke-dasharray: 5 4; }}
    .box {{ stroke-width: 1.6px; }}
    .stream {{ fill: none; stroke: {EDGE}; stroke-width: 3px; }}
""" + "".join(
    f"    .{kind} {{ fill: {fill}; stroke: {stroke}; }}\n" for kind, (fill, stroke) in KINDS.items()
)


# ---------------------------------------------------------------- text with a little maths markup

def _char_width(ch: str, serif: bool) -> float:
    """A rough advance width in em (DejaVu, the widest common font), to size boxes and place labels."""
    if ch == " ":
        return 0.32
    if ch in "il.,:;'|!()[]{}⋯…":
        return 0.34 if ch not in "⋯…" else 0.9
    if ch.isdigit():
        return 0.64
    if ch.isupper():
        return 0.70 if not serif else 0.68
    if ch.isalpha():
        return 0.58 if not serif else 0.52
    return 0.75  # ×, √, +, =, ...


def _parse_math(src: str) -> list[tuple[str, str, bool]]:
    """Math markup -> runs (text, level, italic): `_x` / `_{..}` subscript, `^x` / `^{..}` superscript,
    `\\rm{..}` upright; letters are italic, digits and symbols upright."""
    runs: list[tuple[str, str, bool]] = []
    src = src.replace("\\,", "\u2009")  # \, is a thin space, as in LaTeX
    i = 0

    def take_group(j: int) -> tuple[str, int]:
        if src.startswith("{\\rm{", j):  # _{\rm{pos}}
            end = src.index("}}", j)
            return src[j + 1 : end + 1], end + 2
        if src[j] == "{":
            end = src.index("}", j)
            return src[j + 1 : end], end + 1
        return src[j], j + 1

    def add(text: str, level: str, upright: bool = False) -> None:
        for ch in text:
            italic = ch.isalpha() and not upright
            if runs and runs[-1][1] == level and runs[-1][2] == italic:
                runs[-1] = (runs[-1][0] + ch, level, italic)
            else:
                runs.append((ch, level, italic))

    while i < len(src):
        ch = src[i]
        if ch in "_^":
            group, i = take_group(i + 1)
            level = "sub" if ch == "_" else "sup"
            if group.startswith("\\rm{"):
                add(group[4:-1], level, upright=True)
            else:
                add(group, level)
        elif src.startswith("\\rm{", i):
            end = src.index("}", i)
            add(src[i + 4 : end], "base", upright=True)
            i = end + 1
        else:
            add(ch, "base")
            i += 1
    return runs


def _runs(markup: str) -> list[tuple[str, str, bool, bool]]:
    """Markup -> runs (text, level, italic, serif). Text between $...$ is maths."""
    out = []
    for n, part in enumerate(markup.split("$")):
        if not part:
            continue
        if n % 2:
            out += [(t, level, it, True) for t, level, it in _parse_math(part)]
        else:
            out.append((part, "base", False, False))
    return out


def text_width(markup: str, size: float = FONT) -> float:
    """Estimated width of a label in px."""
    width = 0.0
    for text, level, _, serif in _runs(markup):
        scale = 0.72 if level != "base" else 1.0
        width += sum(_char_width(c, serif) for c in text) * scale
    return width * size


def _escape(s: str) -> str:
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def rich(markup: str, size: float) -> str:
    """The tspans of a label: maths in serif (letters italic), sub- and superscripts shifted with dy."""
    shift = {"base": 0.0, "sub": 0.3 * size, "sup": -0.42 * size}
    current = 0.0
    pieces = []
    for text, level, italic, serif in _runs(markup):
        attrs = []
        classes = (["m"] if serif else []) + (["it"] if italic else [])
        if classes:
            attrs.append(f'class="{" ".join(classes)}"')
        if level != "base":
            attrs.append(f'font-size="{size * 0.72:.4g}"')
        dy = shift[level] - current
        if dy:
            attrs.append(f'dy="{dy:.4g}"')
        current = shift[level]
        pieces.append(f"<tspan {' '.join(attrs)}>{_escape(text)}</tspan>" if attrs else _escape(text))
    return "".join(pieces)


# ---------------------------------------------------------------- the drawing helpers

def _f(x: float) -> str:
    return f"{x:.1f}".rstrip("0").rstrip(".")


class Diagram:
    """One SVG: elements are appended with the helpers, grouped and commented, then ``svg()`` writes them."""

    def __init__(self, height: float, title: str, desc: str) -> None:
        self.height, self.title, self.desc = height, title, desc
        self.lines: list[str] = []
        self.depth = 2

    def add(self, element: str) -> None:
        self.lines.append("  " * self.depth + element)

    @contextmanager
    def group(self, comment: str):
        self.add(f"<!-- {comment} -->")
        self.add("<g>")
        self.depth += 1
        yield
        self.depth -= 1
        self.add("</g>")

    # --- primitives
    def text(self, x: float, y: float, markup: str, size: float = FONT, anchor: str = "middle",
             cls: str = "", bold: bool = False) -> None:
        """A label whose baseline is at y."""
        classes = " ".join(c for c in (cls, "head" if bold else "") if c)
        attrs = f'x="{_f(x)}" y="{_f(y)}"'
        if anchor != "start":
            attrs += f' text-anchor="{anchor}"'
        if classes:
            attrs += f' class="{classes}"'
        if size not in (FONT, SHAPE_FONT if "shape" in cls else None, NOTE_FONT if "note" in cls else None):
            attrs += f' font-size="{_f(size)}"'
        self.add(f"<text {attrs}>{rich(markup, size)}</text>")

    def ctext(self, x: float, cy: float, markup: str, size: float = FONT, **kw) -> None:
        """A label centred vertically on cy."""
        self.text(x, cy + 0.35 * size, markup, size, **kw)

    def shape(self, x: float, cy: float, markup: str, anchor: str = "start") -> None:
        """A tensor shape (or operation) written beside an arrow, with a halo that keeps it readable."""
        self.ctext(x, cy, markup, SHAPE_FONT, anchor=anchor, cls="shape halo")

    def note(self, x: float, cy: float, markup: str, anchor: str = "start") -> None:
        self.ctext(x, cy, markup, NOTE_FONT, anchor=anchor, cls="note halo")

    def rect(self, x: float, y: float, w: float, h: float, kind: str, rx: float = 6, dashed: bool = False) -> None:
        cls = f"box {kind}" + (" dash" if dashed else "")
        self.add(f'<rect x="{_f(x)}" y="{_f(y)}" width="{_f(w)}" height="{_f(h)}" rx="{_f(rx)}" class="{cls}"/>')

    def box(self, x: float, y: float, w: float, h: float, kind: str, label: str = "", size: float = FONT,
            bold: bool = False, dashed: bool = False, rx: float = 6) -> None:
        """A rectangle of ``kind`` with a centred label (top-left corner at x, y)."""
        self.rect(x, y, w, h, kind, rx=rx, dashed=dashed)
        if label:
            self.ctext(x + w / 2, y + h / 2, label, size, bold=bold)

    def tokens(self, x: float, y: float, kinds: list[str], labels: list[str], w: float = 56, h: float = 34,
               gap: float = 8, size: float = FONT) -> list[float]:
        """A row of token boxes; returns their centres' x. A label "⋯" draws no box, only the dots."""
        centres = []
        for i, (kind, label) in enumerate(zip(kinds, labels)):
            left = x + i * (w + gap)
            if label == "⋯":
                self.ctext(left + w / 2, y + h / 2, "⋯", FONT)
            else:
                self.box(left, y, w, h, kind, label, size=size, dashed=kind == "mask")
            centres.append(left + w / 2)
        return centres

    def matrix(self, x: float, y: float, rows: int, w: float, h: float, kind: str, gap: float = 3) -> None:
        """A matrix drawn as ``rows`` stacked token rows (one token per row, as in the book)."""
        row_h = (h - gap * (rows - 1)) / rows
        for r in range(rows):
            self.rect(x, y + r * (row_h + gap), w, row_h, kind, rx=2)

    def grid(self, x: float, y: float, n: int, size: float, kind: str, values: list[float] | None = None) -> None:
        """An n x n matrix of cells (attention weights: darker = larger when ``values`` are given)."""
        cell = size / n
        fill, stroke = KINDS[kind]
        self.add(f'<rect x="{_f(x)}" y="{_f(y)}" width="{_f(size)}" height="{_f(size)}" rx="2" class="box {kind}"/>')
        if values is not None:
            for i in range(n):
                for j in range(n):
                    a = values[i * n + j]
                    if a > 0.02:
                        self.add(f'<rect x="{_f(x + j * cell)}" y="{_f(y + i * cell)}" width="{_f(cell)}" '
                                 f'height="{_f(cell)}" fill="{stroke}" fill-opacity="{a:.2f}"/>')
        lines = " ".join(f"M{_f(x + k * cell)} {_f(y)}V{_f(y + size)}" for k in range(1, n))
        lines += " " + " ".join(f"M{_f(x)} {_f(y + k * cell)}H{_f(x + size)}" for k in range(1, n))
        self.add(f'<path d="{lines}" fill="none" stroke="{stroke}" stroke-width="0.8" stroke-opacity="0.6"/>')

    def arrow(self, *points: tuple[float, float], dashed: bool = False, head: bool = True, cls: str = "edge") -> None:
        d = "M" + " L".join(f"{_f(x)} {_f(y)}" for x, y in points)
        classes = cls + (" dash" if dashed else "")
        marker = ' marker-end="url(#arrow)"' if head else ""
        self.add(f'<path d="{d}" class="{classes}"{marker}/>')

    def plus(self, cx: float, cy: float, r: float = 11) -> None:
        """The residual (or embedding) sum: a circled plus."""
        self.add(f'<circle cx="{_f(cx)}" cy="{_f(cy)}" r="{_f(r)}" class="box op"/>')
        self.add(f'<path d="M{_f(cx - r * 0.55)} {_f(cy)}H{_f(cx + r * 0.55)}M{_f(cx)} {_f(cy - r * 0.55)}'
                 f'V{_f(cy + r * 0.55)}" class="edge"/>')

    def times(self, cx: float, cy: float, r: float = 11) -> None:
        """A product with a weight: a circled times."""
        self.add(f'<circle cx="{_f(cx)}" cy="{_f(cy)}" r="{_f(r)}" class="box op"/>')
        s = r * 0.42
        self.add(f'<path d="M{_f(cx - s)} {_f(cy - s)}L{_f(cx + s)} {_f(cy + s)}M{_f(cx - s)} {_f(cy + s)}'
                 f'L{_f(cx + s)} {_f(cy - s)}" class="edge"/>')

    def legend(self, x: float, y: float, items: list[tuple[str, str]], step: float | None = None) -> None:
        """A row of (kind, meaning) swatches."""
        with self.group("legend"):
            cx = x
            for kind, meaning in items:
                self.rect(cx, y, 18, 14, kind, rx=3, dashed=kind == "mask")
                self.ctext(cx + 24, y + 7, meaning, NOTE_FONT, anchor="start", cls="note")
                cx += step if step else 24 + text_width(meaning, NOTE_FONT) + 18

    def pixels(self, x: float, y: float, art: list[str], px: float, patch: int = 0, gap: float = 0,
               hidden: set[int] | frozenset[int] = frozenset(), faded: set[int] | frozenset[int] = frozenset(),
               outlined: set[int] | frozenset[int] = frozenset()) -> None:
        """A small grey-level image ("#" ink, "+" half ink, "." paper), cut into ``patch`` x ``patch``-pixel patches
        drawn ``gap`` apart (numbered row by row); ``hidden`` patches are covered by the mask grey, ``faded`` ones
        washed out, ``outlined`` ones framed in the loss colour."""
        rows, cols = len(art), len(art[0])
        ink = {"#": "#2b3440", "+": "#8a94a0", ".": "#ffffff"}
        per_row = cols // patch if patch else 1
        for r in range(rows):
            for c in range(cols):
                shift_x = (c // patch) * gap if patch else 0
                shift_y = (r // patch) * gap if patch else 0
                self.add(f'<rect x="{_f(x + c * px + shift_x)}" y="{_f(y + r * px + shift_y)}" width="{_f(px)}" '
                         f'height="{_f(px)}" fill="{ink[art[r][c]]}"/>')
        if not patch:
            self.add(f'<rect x="{_f(x)}" y="{_f(y)}" width="{_f(cols * px)}" height="{_f(rows * px)}" fill="none" '
                     f'stroke="{EDGE}" stroke-width="1.2"/>')
            return
        side = patch * px
        for i in range((rows // patch) * per_row):
            px0 = x + (i % per_row) * (side + gap)
            py0 = y + (i // per_row) * (side + gap)
            if i in hidden:
                fill, stroke = KINDS["mask"]
                self.add(f'<rect x="{_f(px0)}" y="{_f(py0)}" width="{_f(side)}" height="{_f(side)}" fill="{fill}"/>')
            elif i in faded:
                self.add(f'<rect x="{_f(px0)}" y="{_f(py0)}" width="{_f(side)}" height="{_f(side)}" fill="#ffffff" '
                         'fill-opacity="0.7"/>')
            if i in outlined:
                self.add(f'<rect x="{_f(px0)}" y="{_f(py0)}" width="{_f(side)}" height="{_f(side)}" fill="none" '
                         f'stroke="{KINDS["loss"][1]}" stroke-width="2"/>')
            else:
                self.add(f'<rect x="{_f(px0)}" y="{_f(py0)}" width="{_f(side)}" height="{_f(side)}" fill="none" '
                         f'stroke="{EDGE}" stroke-width="1" stroke-dasharray="{"3 2" if gap == 0 else "none"}"/>')

    def frame(self, x: float, y: float, w: float, h: float, copies: int = 3) -> None:
        """A stack of identical blocks: a frame with ``copies - 1`` shadows behind it."""
        for k in range(copies - 1, 0, -1):
            self.rect(x + 5 * k, y - 5 * k, w, h, "stage", rx=10)
        self.rect(x, y, w, h, "stage", rx=10)

    def svg(self) -> str:
        h = _f(self.height)
        head = [
            '<?xml version="1.0" encoding="UTF-8"?>',
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{h}" viewBox="0 0 {WIDTH} {h}" '
            'role="img" aria-labelledby="title desc">',
            f'  <title id="title">{_escape(self.title)}</title>',
            f'  <desc id="desc">{_escape(self.desc)}</desc>',
            "  <!-- drawn by tools/draw_diagrams.py: edit the script, not this file -->",
            f"  <style>{STYLE}  </style>",
            "  <defs>",
            '    <marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="9" markerHeight="9" '
            'markerUnits="userSpaceOnUse" orient="auto-start-reverse">',
            f'      <path d="M0 0L10 5L0 10z" fill="{EDGE}"/>',
            "    </marker>",
            "  </defs>",
            "  <!-- the card: a light background of its own, readable in the dark theme too -->",
            f'  <rect x="1" y="1" width="{WIDTH - 2}" height="{_f(self.height - 2)}" rx="14" fill="{CARD}" '
            'stroke="#d8d3c8" stroke-width="1.5"/>',
            "  <g>",
        ]
        return "\n".join(head + self.lines + ["  </g>", "</svg>", ""])


# ---------------------------------------------------------------- the diagrams

def attention_matmul() -> Diagram:
    """Chapter 1: X -> Q, K, V; S = Q K^T / sqrt(d_k); A = softmax per row; Z = A V."""
    d = Diagram(
        476,
        "Self-attention as matrix products",
        "The token matrix X (T x D, one token per row) is multiplied by W_q, W_k (D x d_k) and W_v (D x d_v) to "
        "give the queries Q and "
        "keys K (T x d_k) and the values V (T x d_v). Q K^T / sqrt(d_k) gives the scores S (T x T); a softmax "
        "over each row gives the attention weights A (T x T), each row summing to one; A V gives the output Z "
        "(T x d_v), one row per token.",
    )
    top = 70
    ys = {"q": top, "k": top + 140, "v": top + 280}  # top of each matrix's slot; its centre is at y + 40
    with d.group("the formula"):
        d.ctext(320, 30, "Attention$(Q, K, V) = $ softmax$(QK^T / √d_k)\u2009V$", 18)
    with d.group("X: T tokens (rows) of width D"):
        d.matrix(24, ys["k"] - 20, 5, 70, 120, "patch")
        d.ctext(59, ys["k"] - 36, "$X$", 19)
        d.shape(59, ys["k"] + 118, "$T × D$", anchor="middle")
    with d.group("the three projections Q = X W_q, K = X W_k, V = X W_v"):
        d.arrow((94, ys["k"] + 40), (124, ys["k"] + 40), head=False)
        d.arrow((124, ys["q"] + 40), (124, ys["v"] + 40), head=False)
        for kind, y in ys.items():
            d.arrow((124, y + 40), (196, y + 40))
            d.shape(160, y + 24, f"$·W_{kind}$", anchor="middle")
            d.shape(160, y + 58, "$D × d_v$" if kind == "v" else "$D × d_k$", anchor="middle")
        for kind, y in ys.items():
            d.matrix(198, y + 15, 5, 44, 50, kind)
            d.ctext(220, y + 2, f"${kind.upper()}$", 18)
            d.shape(220, y + 80, "$T × d_v$" if kind == "v" else "$T × d_k$", anchor="middle")
    with d.group("scores S = Q K^T / sqrt(d_k): T x T, one row per query, one column per key"):
        d.arrow((242, ys["q"] + 40), (289, ys["q"] + 40), (289, ys["q"] + 88))
        d.arrow((242, ys["k"] + 40), (289, ys["k"] + 40), (289, ys["k"] - 8))
        d.box(239, ys["q"] + 90, 100, 40, "op", "$QK^T/√d_k$")
        d.arrow((339, ys["q"] + 110), (350, ys["q"] + 110))
        d.grid(352, ys["q"] + 82, 5, 56, "attn", [0.22] * 25)
        d.ctext(380, ys["q"] + 68, "$S$", 18)
        d.shape(380, ys["q"] + 154, "$T × T$", anchor="middle")
    with d.group("weights A = softmax of each row of S: T x T, every row sums to 1"):
        d.arrow((410, ys["q"] + 110), (494, ys["q"] + 110))
        d.shape(452, ys["q"] + 94, "softmax", anchor="middle")
        d.shape(452, ys["q"] + 127, "each row", anchor="middle")
        weights = [0.7, 0.1, 0.1, 0.05, 0.05, 0.1, 0.6, 0.2, 0.05, 0.05, 0.05, 0.2, 0.5, 0.2, 0.05,
                   0.1, 0.05, 0.15, 0.6, 0.1, 0.05, 0.05, 0.05, 0.25, 0.6]
        d.grid(496, ys["q"] + 82, 5, 56, "attn", weights)
        d.ctext(524, ys["q"] + 68, "$A$", 18)
        d.shape(524, ys["q"] + 154, "$T × T$", anchor="middle")
    with d.group("output Z = A V: row i is token i's weighted sum of the values, T x d_v"):
        d.arrow((524, ys["q"] + 168), (524, ys["v"] + 18))
        d.arrow((242, ys["v"] + 40), (486, ys["v"] + 40))
        d.box(488, ys["v"] + 20, 72, 40, "op", "$AV$")
        d.arrow((560, ys["v"] + 40), (582, ys["v"] + 40))
        d.matrix(584, ys["v"] + 15, 5, 36, 50, "out")
        d.ctext(602, ys["v"] + 2, "$Z$", 18)
        d.shape(602, ys["v"] + 80, "$T × d_v$", anchor="middle")
    with d.group("reading hint"):
        d.note(24, ys["v"] + 112,
               "Each row is one token. Row $i$ of $A$: how much token $i$ attends to each token $j$.")
    return d


SEVEN = [  # a 6 x 6 "7": 3 x 3 patches of 2 x 2 pixels (chapter 4's drawing)
    "......",
    ".####.",
    "....#.",
    "...+#.",
    "...#..",
    "..+#..",
]

THREE = [  # an 8 x 8 "3": 4 x 4 patches of 2 x 2 pixels (ViT and MAE drawings)
    "..####..",
    ".#+..+#.",
    "......#.",
    "...###..",
    ".....+#.",
    "......#.",
    ".#+..+#.",
    "..####..",
]


def multi_head() -> Diagram:
    """Chapter 3: split D into h heads of d_k = D/h, attention per head in parallel, concatenate, W_o."""
    d = Diagram(
        618,
        "Multi-head self-attention: split, attend in parallel, concatenate, mix",
        "X (T x D) is projected to Q, K and V, each T x D. Each is cut along its width into h heads of "
        "d_k = D/h columns: head i takes columns Q_i, K_i, V_i. Every head computes "
        "softmax(Q_i K_i^T / sqrt(d_k)) V_i (T x d_k) on its own, all in parallel. The h outputs are "
        "concatenated back to T x D and multiplied by W_o (D x D), which mixes the heads: MHSA(X), T x D.",
    )
    left, col = 112, 120  # four columns: head 1, head 2, ..., head h
    cols = [left + i * col for i in range(4)]
    mid = left + 2 * col
    names = ["1", "2", "⋯", "h"]
    y0 = 20  # everything below the two formula lines
    with d.group("the formulas"):
        d.ctext(320, 24, "MHSA$(X) = [$head$_1, …, $head$_h]\\,W_o$", 18)
        d.ctext(320, 54, "head$_i$ = softmax$(Q_i\\,K_i^T/√d_k)\\,V_i$", 17)
    with d.group("X, T x D"):
        d.box(left, y0 + 52, 4 * col - 8, 34, "patch", "$X$", 18)
        d.shape(60, y0 + 69, "$T × D$", anchor="middle")
    with d.group("Q = X W_q, K = X W_k, V = X W_v, each T x D, cut into h heads of d_k = D / h columns"):
        d.arrow((mid - 4, y0 + 86), (mid - 4, y0 + 126))
        d.shape(mid + 6, y0 + 106, "$·W_q, ·W_k, ·W_v$  (each $D × D$)")
        for r, kind in enumerate("qkv"):
            y = y0 + 130 + r * 34
            d.ctext(60, y + 15, f"${kind.upper()}$", 18)
            for i, x in enumerate(cols):
                if names[i] == "⋯":
                    d.ctext(x + (col - 8) / 2, y + 15, "⋯")
                    continue
                d.box(x, y, col - 8, 30, kind, f"${kind.upper()}_{names[i]}$")
        d.shape(60, y0 + 248, "$T × D$ each", anchor="middle")
        d.arrow((cols[0], y0 + 240), (cols[0] + col - 8, y0 + 240), head=False)
        d.arrow((cols[0], y0 + 235), (cols[0], y0 + 245), head=False)
        d.arrow((cols[0] + col - 8, y0 + 235), (cols[0] + col - 8, y0 + 245), head=False)
        d.shape(cols[0] + (col - 8) / 2, y0 + 258, "$d_k = D/h$", anchor="middle")
    with d.group("h attention heads, each on its own columns, in parallel"):
        for i, x in enumerate(cols):
            cx = x + (col - 8) / 2
            if names[i] == "⋯":
                d.ctext(cx, y0 + 312, "⋯")
                continue
            d.arrow((cx, y0 + 270), (cx, y0 + 290))
            d.box(x, y0 + 292, col - 8, 40, "attn", f"head$_{names[i]}$")
            d.arrow((cx, y0 + 332), (cx, y0 + 390))
            d.shape(cx + 6, y0 + 360, "$T × d_k$")
        d.ctext(60, y0 + 306, "heads", anchor="middle")
        d.note(60, y0 + 326, "in parallel", anchor="middle")
    with d.group("concatenate: T x D again"):
        for i, x in enumerate(cols):
            if names[i] == "⋯":
                d.ctext(x + (col - 8) / 2, y0 + 407, "⋯")
                continue
            d.box(x, y0 + 392, col - 8, 30, "out", f"head$_{names[i]}$")
        d.ctext(60, y0 + 401, "concat", anchor="middle")
        d.shape(60, y0 + 421, "$T × D$", anchor="middle")
    with d.group("W_o mixes the heads"):
        d.arrow((mid - 4, y0 + 422), (mid - 4, y0 + 460))
        d.box(mid - 54, y0 + 462, 100, 38, "op", "$·W_o$")
        d.shape(mid + 58, y0 + 481, "$D × D$")
        d.arrow((mid - 4, y0 + 500), (mid - 4, y0 + 536))
        d.box(left, y0 + 538, 4 * col - 8, 34, "patch", "MHSA$(X)$")
        d.shape(60, y0 + 555, "$T × D$", anchor="middle")
    return d


def patching() -> Diagram:
    """Chapter 4: image -> P x P patches -> flatten -> linear embedding -> prepend [CLS] -> + positions."""
    d = Diagram(
        500,
        "From an image to a sequence of tokens",
        "An H x W x C image (here 6 x 6 pixels, C = 1) is cut into P x P patches (P = 2): N = HW/P^2 = 9 patches, "
        "numbered row by row. Each patch is flattened into P^2 C numbers and multiplied by the same matrix E "
        "(P^2 C x D), giving N patch tokens x_i E of width D. A learned [CLS] token is prepended as token 0, and a "
        "learned position embedding (one row of E_pos per token) is added to every token: z_0, (N + 1) x D.",
    )
    px = 18
    with d.group("the image, H x W x C"):
        d.ctext(78, 40, "image $H × W × C$", SHAPE_FONT, cls="shape")
        d.pixels(24, 58, SEVEN, px)
    with d.group("cut into P x P patches: N = HW / P^2"):
        d.arrow((140, 112), (196, 112))
        d.shape(168, 94, "cut", anchor="middle")
        d.ctext(290, 40, "$N = HW/P^2$ patches", SHAPE_FONT, cls="shape")
        d.pixels(228, 52, SEVEN, px, patch=2, gap=8)
    with d.group("flatten each patch: N x P^2 C, row by row"):
        d.arrow((362, 112), (412, 112))
        d.shape(387, 94, "flatten", anchor="middle")
        d.ctext(470, 40, "$N × P^2C$", SHAPE_FONT, cls="shape")
        for i in range(9):
            r0, c0 = 2 * (i // 3), 2 * (i % 3)
            strip = SEVEN[r0][c0 : c0 + 2] + SEVEN[r0 + 1][c0 : c0 + 2]
            d.pixels(446, 52 + i * 14, [strip], 12)
        d.note(506, 62, "patch 1", anchor="start")  # beside the first flattened row (y 52 to 64)
        d.note(506, 174, "patch $N$", anchor="start")
    with d.group("linear embedding: the same E for every patch"):
        d.arrow((470, 182), (470, 246))
        d.shape(458, 200, "linear embedding $·E$,  $E$: $P^2C × D$", anchor="end")
        d.shape(458, 221, "the same $E$ for every patch", anchor="end")
    with d.group("the tokens: learned [CLS] prepended as token 0, then x_1 E ... x_N E"):
        left, w, gap = 118, 80, 16
        labels = ["[CLS]", "$x_1E$", "$x_2E$", "⋯", "$x_NE$"]
        xs = d.tokens(left, 250, ["cls", "patch", "patch", "patch", "patch"], labels, w=w, h=36, gap=gap)
        d.ctext(60, 268, "tokens", anchor="middle")
        d.note(158, 238, "learned token", anchor="middle")
    with d.group("plus the position embeddings, one row of E_pos per token"):
        for i, x in enumerate(xs):
            if labels[i] != "⋯":
                d.arrow((x, 286), (x, 298), head=False)
                d.plus(x, 309)
                d.arrow((x, 320), (x, 330), head=False)
        poslabels = ["0", "1", "2", "⋯", "$N$"]
        d.tokens(left, 330, ["pos"] * 5, [f"pos {p}" if p != "⋯" else p for p in poslabels], w=w, h=30, gap=gap)
        d.ctext(60, 345, "$+E_{\\rm{pos}}$", 18, anchor="middle")
    with d.group("the result z_0, (N + 1) x D: the input of the first encoder block"):
        for i, x in enumerate(xs):
            if labels[i] != "⋯":
                d.arrow((x, 360), (x, 398))
        zl = ["$z_0^0$", "$z_0^1$", "$z_0^2$", "⋯", "$z_0^N$"]
        d.tokens(left, 400, ["cls", "patch", "patch", "patch", "patch"], zl, w=w, h=36, gap=gap)
        d.ctext(60, 418, "$z_0$", 18, anchor="middle")
        d.shape(320, 462, "$z_0$:  $(N + 1) × D$, the input of the first encoder block", anchor="middle")
    return d


def encoder_block() -> Diagram:
    """Chapter 5: pre-norm (ViT) beside post-norm (the 2017 Transformer)."""
    d = Diagram(
        580,
        "The encoder block: pre-norm (ViT) beside post-norm",
        "Pre-norm, as in ViT and vitedu: the residual stream X -> Y passes only through two additions; "
        "each branch normalises its own input: X' = X + MSA(LN(X)), Y = X' + MLP(LN(X')). "
        "Post-norm, as in the original Transformer: LN sits on the stream after each addition: "
        "X' = LN(X + MSA(X)), Y = LN(X' + MLP(X')). Every arrow carries T x D.",
    )

    def column(sx: float, bx: float, pre: bool) -> None:
        """sx: the stream's x; bx: the branches' x."""
        bw = 104
        d.ctext(sx, 76, "$X$", 18)
        d.shape(sx + 14, 100, "$T × D$")
        if pre:
            # stream: X -> (+) -> (+) -> Y, nothing else on it
            d.arrow((sx, 86), (sx, 225), cls="stream")
            d.arrow((sx, 250), (sx, 401), cls="stream")
            d.arrow((sx, 426), (sx, 486), cls="stream")
            d.plus(sx, 238, 12)
            d.plus(sx, 414, 12)
            # branch 1: LN -> MSA
            d.arrow((sx, 124), (bx, 124), (bx, 136))
            d.box(bx - bw / 2, 138, bw, 34, "ln", "LN")
            d.arrow((bx, 172), (bx, 188))
            d.box(bx - bw / 2, 190, bw, 34, "attn", "MSA")
            d.arrow((bx, 224), (bx, 238), (sx + 14, 238))
            # branch 2: LN -> MLP
            d.arrow((sx, 300), (bx, 300), (bx, 312))
            d.box(bx - bw / 2, 314, bw, 34, "ln", "LN")
            d.arrow((bx, 348), (bx, 364))
            d.box(bx - bw / 2, 366, bw, 34, "op", "MLP")
            d.arrow((bx, 400), (bx, 414), (sx + 14, 414))
            d.ctext(sx - 18, 270, "$X'$", 17, anchor="end")
        else:
            # stream: X -> (+) -> LN -> (+) -> LN -> Y
            d.arrow((sx, 86), (sx, 225), cls="stream")
            d.plus(sx, 238, 12)
            d.arrow((sx, 250), (sx, 262), cls="stream")
            d.box(sx - 40, 264, 80, 30, "ln", "LN")
            d.arrow((sx, 294), (sx, 401), cls="stream")
            d.plus(sx, 414, 12)
            d.arrow((sx, 426), (sx, 438), cls="stream")
            d.box(sx - 40, 440, 80, 30, "ln", "LN")
            d.arrow((sx, 470), (sx, 486), cls="stream")
            d.arrow((sx, 124), (bx, 124), (bx, 188))
            d.box(bx - bw / 2, 190, bw, 34, "attn", "MSA")
            d.arrow((bx, 224), (bx, 238), (sx + 14, 238))
            d.arrow((sx, 318), (bx, 318), (bx, 364))
            d.box(bx - bw / 2, 366, bw, 34, "op", "MLP")
            d.arrow((bx, 400), (bx, 414), (sx + 14, 414))
            d.ctext(sx - 18, 318, "$X'$", 17, anchor="end")
        d.ctext(sx, 506, "$Y$", 18)

    with d.group("pre-norm (ViT, vitedu.blocks.Block)"):
        d.text(160, 32, "pre-norm (ViT)", 17, bold=True)
        d.note(160, 52, "LN inside the branches", anchor="middle")
        column(90, 222, pre=True)
        d.note(160, 536, "the stream is never normalised;", anchor="middle")
        d.note(160, 556, "a final LN follows the last block", anchor="middle")
    with d.group("divider"):
        d.arrow((320, 24), (320, 560), head=False, dashed=True, cls="edge")
    with d.group("post-norm (Transformer, 2017)"):
        d.text(480, 32, "post-norm (2017)", 17, bold=True)
        d.note(480, 52, "LN on the stream, after each +", anchor="middle")
        column(410, 542, pre=False)
        d.note(480, 536, "every sum is normalised", anchor="middle")
    return d


def _embedding_rows(d: Diagram, y: float, kinds: list[str], labels: list[str], left: float = 200, w: float = 60,
                    gap: float = 8, pos_labels: list[str] | None = None) -> list[float]:
    """The image on the left, its tokens (prefix tokens, then patches) and their position embeddings below.
    Returns the tokens' centres."""
    with d.group("the image, cut into P x P patches"):
        d.ctext(62, y - 18, "image", cls="shape", size=SHAPE_FONT)
        d.pixels(22, y, THREE, 10, patch=2, gap=0)
        d.arrow((108, y + 40), (left - 6, y + 40))
        d.shape((108 + left - 6) / 2, y + 24, "patches", anchor="middle")
        d.shape((108 + left - 6) / 2, y + 57, "$·E$", anchor="middle")
    with d.group("the tokens"):
        xs = d.tokens(left, y + 22, kinds, labels, w=w, h=36, gap=gap)
    with d.group("position embeddings, added to every token that has one"):
        for x, label in zip(xs, pos_labels or labels):
            if label == "⋯":
                continue
            if label == "":
                continue
            d.plus(x, y + 72, 8)
            d.rect(x - w / 2, y + 84, w, 14, "pos", rx=3)
        d.shape(left + len(xs) * (w + gap) + 2, y + 86, "$+E_{\\rm{pos}}$")
    return xs


def vit() -> Diagram:
    """Chapter 6: patch embedding, [CLS], positions, L pre-norm blocks, final LN, head on [CLS]."""
    d = Diagram(
        600,
        "The Vision Transformer",
        "The image is cut into N patches, each flattened and multiplied by E; a learned [CLS] token is prepended "
        "and position embeddings are added: z_0, (N + 1) x D. L pre-norm encoder blocks follow, each "
        "z' = z + MSA(LN(z)), z = z' + MLP(LN(z')), keeping the shape (N + 1) x D. A final LayerNorm acts on every "
        "token; the head, one Linear layer, reads only the [CLS] token y = LN(z_L^0) and gives the class logits.",
    )
    kinds = ["cls", "patch", "patch", "patch", "patch"]
    labels = ["[CLS]", "$x_1E$", "$x_2E$", "⋯", "$x_NE$"]
    xs = _embedding_rows(d, 40, kinds, labels)
    mid = (xs[0] + xs[-1]) / 2
    with d.group("z_0 enters the stack of L encoder blocks"):
        d.arrow((mid, 142), (mid, 178))
        d.shape(mid + 10, 160, "$z_0$:  $(N + 1) × D$")
    with d.group("L pre-norm encoder blocks (chapter 5), same shape in and out"):
        d.frame(150, 190, 420, 96)
        d.text(170, 216, "encoder block", bold=True, anchor="start")
        d.text(550, 216, "× $L$", 18, anchor="end", bold=True)
        d.ctext(360, 244, "$z'_ℓ = z_{ℓ−1}$ + MSA(LN$(z_{ℓ−1})$)", 17)
        d.ctext(360, 270, "$z_ℓ = z'_ℓ$ + MLP(LN$(z'_ℓ)$)", 17)
    with d.group("the final LayerNorm, on every token"):
        d.arrow((mid, 288), (mid, 326))
        d.shape(mid + 10, 307, "$z_L$:  $(N + 1) × D$")
        d.box(mid - 145, 328, 290, 36, "ln", "LN  (final norm, every token)")
        d.arrow((mid, 364), (mid, 384))
    with d.group("the output tokens: only [CLS] is read"):
        shown = ["[CLS]"] + ["⋯" if label == "⋯" else "" for label in labels[1:]]
        d.tokens(xs[0] - 30, 386, kinds, shown, w=60, h=36)
        d.note(xs[0] + 24, 446, "patch tokens: not used by the head", anchor="start")
    with d.group("the head on [CLS]: y = LN(z_L^0) -> logits"):
        d.arrow((xs[0], 422), (xs[0], 478))
        d.shape(xs[0] - 10, 450, "$y = $ LN$(z_L^0)$:  $D$", anchor="end")
        d.box(xs[0] - 80, 480, 160, 38, "op", "head (Linear)")
        d.shape(xs[0] + 90, 499, "$D × $ classes")
        d.arrow((xs[0], 518), (xs[0], 548))
        d.ctext(xs[0], 568, "class logits")
    return d


def deit_distillation() -> Diagram:
    """Chapter 9: DeiT's [DIST] token; [CLS] head <- labels, [DIST] head <- the teacher's argmax."""
    d = Diagram(
        670,
        "DeiT: a distillation token beside the class token",
        "A learned [DIST] token joins [CLS] and the N patch tokens, with its own position embedding. All N + 2 "
        "tokens go through the same L encoder blocks and attend to each other; after the final LayerNorm, [CLS] "
        "feeds the head, trained with cross-entropy against the true label y, and [DIST] feeds a second head, "
        "head_dist, trained against y_t, the argmax of a frozen teacher's (a convnet's) prediction on the same image. "
        "Loss = 1/2 CE(head([CLS]), y) + 1/2 CE(head_dist([DIST]), y_t); at test time the two heads' logits are "
        "averaged.",
    )
    kinds = ["cls", "dist", "patch", "patch", "patch"]
    labels = ["[CLS]", "[DIST]", "$x_1E$", "⋯", "$x_NE$"]
    xs = _embedding_rows(d, 40, kinds, labels, w=64, gap=8)
    mid = (xs[0] + xs[-1]) / 2
    with d.group("N + 2 tokens through the same L encoder blocks"):
        d.arrow((mid, 142), (mid, 178))
        d.shape(mid + 10, 160, "$z_0$:  $(N + 2) × D$")
        d.frame(150, 190, 420, 70)
        d.text(170, 216, "encoder block", bold=True, anchor="start")
        d.text(550, 216, "× $L$", 18, anchor="end", bold=True)
        d.ctext(360, 242, "every token attends to every token", NOTE_FONT, cls="note")
        d.arrow((mid, 262), (mid, 290))
        d.box(mid - 120, 292, 240, 34, "ln", "LN  (final norm)")
        d.arrow((mid, 326), (mid, 346))
    with d.group("the output tokens"):
        shown = labels[:2] + ["⋯" if label == "⋯" else "" for label in labels[2:]]
        d.tokens(xs[0] - 32, 348, kinds, shown, w=64, h=36)
    with d.group("[CLS] -> head, trained towards the true label y"):
        d.arrow((xs[0], 384), (xs[0], 446))
        d.box(xs[0] - 70, 448, 140, 36, "op", "head")
        d.arrow((xs[0], 484), (xs[0], 544))
        d.box(xs[0] - 70, 546, 140, 36, "loss", "CE")
        d.arrow((34, 564), (xs[0] - 72, 564))
        d.shape(40, 548, "label $y$")
    with d.group("[DIST] -> head_dist, trained towards the teacher's y_t"):
        hx = 400
        d.arrow((xs[1], 384), (xs[1], 420), (hx, 420), (hx, 446))
        d.box(hx - 70, 448, 140, 36, "op", "head_dist")
        d.arrow((hx, 484), (hx, 544))
        d.box(hx - 70, 546, 140, 36, "loss", "CE")
    with d.group("the teacher: a frozen convnet on the same image, its argmax is the target y_t"):
        tx = 580
        d.ctext(tx, 406, "same image", cls="note", size=NOTE_FONT)
        d.pixels(tx - 30, 418, THREE, 7.5)
        d.arrow((tx, 480), (tx, 494))
        d.box(tx - 50, 496, 100, 44, "teacher", "")
        d.ctext(tx, 512, "teacher", 16)
        d.ctext(tx, 530, "(convnet)", 14, cls="note")
        d.arrow((tx, 540), (tx, 564), (hx + 72, 564))
        d.shape(hx + 80, 582, "$y_t = $ argmax", anchor="start")
    with d.group("the loss and the prediction"):
        d.ctext(320, 616, "loss $= ½$ CE(head([CLS]), $y$) $+ ½$ CE(head_dist([DIST]), $y_t$)", 17)
        d.ctext(320, 644, "at test time: the average of the two heads' logits", NOTE_FONT, cls="note")
    return d


def cait_class_attention() -> Diagram:
    """Chapter 9: LayerScale self-attention blocks on the patches only, then class attention where only [CLS] asks."""
    d = Diagram(
        790,
        "CaiT: self-attention on the patches, then class attention",
        "The N patch tokens, with position embeddings (the patches only), go through L self-attention blocks "
        "with LayerScale (each branch multiplied by a learned per-channel vector lambda that starts tiny) and "
        "talking heads; [CLS] is not there yet. Then the learned [CLS] token joins, without a position, and two "
        "class-attention blocks follow: after LN, only [CLS] gives a query q, while [CLS] and every patch give "
        "keys and values (N + 1 of each); softmax(q K^T / sqrt(d_k)) V (per head, then W_o and LayerScale) is "
        "added to [CLS], then an MLP branch. The patch tokens pass through unchanged. A final LayerNorm, then the "
        "head reads [CLS].",
    )
    kinds = ["patch", "patch", "patch", "patch"]
    labels = ["$x_1E$", "$x_2E$", "⋯", "$x_NE$"]
    xs = _embedding_rows(d, 40, kinds, labels, left=268, w=60, gap=8)
    mid = (xs[0] + xs[-1]) / 2
    with d.group("stage 1: L LayerScale blocks, self-attention over the patches only"):
        d.arrow((mid, 142), (mid, 178))
        d.shape(mid + 10, 160, "$N × D$")
        d.frame(150, 190, 440, 86)
        d.text(170, 216, "LayerScale block", bold=True, anchor="start")
        d.text(570, 216, "× $L$", 18, anchor="end", bold=True)
        d.ctext(370, 240, "self-attention among the patches only (talking heads)", NOTE_FONT, cls="note")
        d.ctext(370, 264, "$x ← x + $diag$(λ)\\,$SA(LN$(x)$), and likewise the MLP", 16)
        d.arrow((mid, 278), (mid, 308))
    with d.group("[CLS] joins, without a position"):
        cls_x = 230
        tok = d.tokens(200, 310, ["cls", "patch", "patch", "patch", "patch"], ["[CLS]", "$x_1$", "$x_2$", "⋯", "$x_N$"],
                       w=60, h=36, gap=8)
        d.note(100, 320, "[CLS] joins", anchor="middle")
        d.note(100, 340, "(no position)", anchor="middle")
    with d.group("stage 2: class-attention blocks; only [CLS] asks, [CLS] and the patches answer"):
        d.frame(150, 370, 440, 228, copies=2)
        for k, line in enumerate(["class-", "attention", "block × 2"]):
            d.text(76, 420 + 20 * k, line, bold=True)
        for x in tok:
            if x != tok[3]:
                d.arrow((x, 346), (x, 402), head=False)
        d.box(200, 404, 332, 24, "ln", "LN", size=15)
        # chips: [CLS] gives q, k, v; every patch gives k, v
        chip_y, chip_h = 446, 26
        d.arrow((cls_x, 428), (cls_x, 436), head=False)
        d.box(cls_x - 32, chip_y, 20, chip_h, "q", "$q$", size=16)
        d.box(cls_x - 10, chip_y, 20, chip_h, "k", "$k$", size=16)
        d.box(cls_x + 12, chip_y, 20, chip_h, "v", "$v$", size=16)
        for x in (tok[1], tok[2], tok[4]):
            d.arrow((x, 428), (x, 436), head=False)
            d.box(x - 28, chip_y, 26, chip_h, "k", "$k$", size=16)
            d.box(x + 2, chip_y, 26, chip_h, "v", "$v$", size=16)
        d.ctext(tok[3], chip_y + 13, "⋯")
        # the keys and values of all N + 1 tokens meet; the one query comes from [CLS]
        for x in (cls_x, tok[1], tok[2], tok[4]):
            d.arrow((x + (0 if x == cls_x else 0), chip_y + chip_h), (x, chip_y + chip_h + 12), head=False)
        d.arrow((cls_x, chip_y + chip_h + 12), (tok[4], chip_y + chip_h + 12), head=False)
        d.arrow((380, chip_y + chip_h + 12), (380, 510))
        d.shape(390, chip_y + chip_h + 24, "$K, V$: $(N + 1) × d_k$")
        d.arrow((cls_x - 22, chip_y + chip_h), (cls_x - 22, 510))
        d.shape(cls_x - 34, chip_y + chip_h + 24, "$q$: $1 × d_k$", anchor="end")
        d.box(200, 512, 240, 34, "attn", "softmax$(qK^T/√d_k)\\,V$")
        # back into [CLS] with LayerScale: [CLS] += lambda * W_o(...), then the MLP branch
        d.arrow((cls_x, 546), (cls_x, 562))
        d.plus(cls_x, 574, 11)
        d.arrow((200, 328), (176, 328), (176, 574), (cls_x - 13, 574))
        d.note(cls_x + 18, 570, "$+$ diag$(λ)\\,W_o(⋯)$, then the MLP", anchor="start")
    with d.group("the patch tokens pass through unchanged"):
        d.arrow((532, 328), (556, 328), (556, 616), dashed=True)
        d.note(546, 520, "patches", anchor="end")
        d.note(546, 540, "unchanged", anchor="end")
    with d.group("final LayerNorm on [CLS] and the patches; the head reads [CLS]"):
        d.arrow((cls_x, 585), (cls_x, 616))
        d.shape(cls_x - 10, 609, "$1 × D$", anchor="end")
        d.box(200, 618, 380, 34, "ln", "LN  (final norm, [CLS] and patches)")
        d.arrow((cls_x, 652), (cls_x, 690))
        d.shape(cls_x + 10, 671, "[CLS] only:  $D$")
        d.box(cls_x - 75, 692, 150, 36, "op", "head (Linear)")
        d.arrow((cls_x + 75, 710), (cls_x + 115, 710))
        d.ctext(cls_x + 121, 710, "class logits", anchor="start")
        d.note(320, 760, "only [CLS] asks: one query against $N + 1$ keys, a cost linear in $N$", anchor="middle")
    return d


def _positional_weights(grid: int, delta: tuple[int, int], alpha: float) -> list[float]:
    """GPSA's positional attention at its local start, as vitedu.convit computes it: for query i and key j,
    softmax_j(-alpha * ((dx - Delta_x)^2 + (dy - Delta_y)^2)) on a grid x grid patch grid; row-major."""
    cells = [(r, c) for r in range(grid) for c in range(grid)]
    out = []
    for qr, qc in cells:
        logits = [-alpha * ((kc - qc - delta[0]) ** 2 + (kr - qr - delta[1]) ** 2) for kr, kc in cells]
        top = max(logits)
        exps = [math.exp(v - top) for v in logits]
        out += [e / sum(exps) for e in exps]
    return out


def _content_weights(n: int) -> list[float]:
    """A made-up content map (rows sum to one) for the drawing: no locality, a few peaks per row."""
    out = []
    for i in range(n):
        logits = [2.2 * math.sin(1.7 * i + 2.3 * j + 0.5 * i * j) for j in range(n)]
        exps = [math.exp(v) for v in logits]
        out += [e / sum(exps) for e in exps]
    return out


def convit_gpsa() -> Diagram:
    """Chapter 9: GPSA, content attention and positional attention mixed by a gate sigmoid(lambda) per head."""
    d = Diagram(
        690,
        "ConViT's gated positional self-attention (GPSA), one head",
        "In one GPSA head h, on the patch tokens only (N x D, no [CLS]): the content attention "
        "softmax(Q_h K_h^T / sqrt(d_k)) and a positional attention softmax(v_h^T r_ij), which depends only on "
        "the offset r_ij = (dx, dy, dx^2 + dy^2) between query patch i and key patch j, are both N x N with "
        "rows summing to one. A learned gate sigma(lambda_h) mixes them: "
        "A_h = (1 - sigma(lambda_h)) content + sigma(lambda_h) positional, whose rows still sum to one; "
        "A_h V_h is the head's output (N x d_k). At the local start each head's positional map is a bump around "
        "its own offset Delta_h, like one tap of a convolution kernel.",
    )
    n, size = 9, 72  # the drawing's grid: 3 x 3 patches, so N = 9 and the maps are 9 x 9
    lx, rx, mx = 214, 506, 360  # the content branch, the positional branch, the middle
    with d.group("the patch tokens X (after LN; no [CLS] in the GPSA layers)"):
        d.text(90, 40, "patch tokens $X$,  $N × D$", SHAPE_FONT, anchor="start", cls="shape")
        d.tokens(90, 54, ["patch"] * 4, ["$x_1$", "$x_2$", "⋯", "$x_N$"], w=56, h=34, gap=8)
    with d.group("relative positions: from the patch grid alone"):
        d.text(506, 40, "offsets of key $j$ from query $i$", SHAPE_FONT, cls="shape")
        d.box(396, 54, 220, 34, "pos", "$r_{ij} = (δ_x, δ_y, δ_x^2 + δ_y^2)$", 16)
    with d.group("content attention: softmax(Q_h K_h^T / sqrt(d_k)), N x N"):
        d.arrow((170, 88), (170, 116))
        d.arrow((258, 88), (258, 116))
        d.box(130, 118, 80, 30, "q", "$Q_h$")
        d.box(218, 118, 80, 30, "k", "$K_h$")
        d.shape(304, 133, "$N × d_k$")
        d.arrow((170, 148), (170, 174))
        d.arrow((258, 148), (258, 174))
        d.box(lx - 104, 176, 208, 34, "op", "softmax$(Q_hK_h^T/√d_k)$", 16)
        d.arrow((lx, 210), (lx, 230))
        d.grid(lx - size / 2, 232, n, size, "attn", [min(1.0, 1.6 * a) for a in _content_weights(n)])
        d.ctext(lx - size / 2 - 10, 256, "content", anchor="end")
        d.shape(lx - size / 2 - 10, 280, "$N × N$", anchor="end")
    with d.group("positional attention: softmax(v_h^T r_ij), N x N, the same for every image"):
        d.arrow((rx, 88), (rx, 174))
        d.shape(rx - 10, 124, "learned $v_h$", anchor="end")
        d.shape(rx - 10, 144, "(3 numbers)", anchor="end")
        d.box(rx - 86, 176, 172, 34, "op", "softmax$(v_h^T r_{ij})$", 16)
        d.arrow((rx, 210), (rx, 230))
        d.grid(rx - size / 2, 232, n, size, "attn", [min(1.0, 1.6 * a) for a in _positional_weights(3, (1, 0), 1.0)])
        d.ctext(rx + size / 2 + 10, 256, "positional", anchor="start")
        d.shape(rx + size / 2 + 10, 280, "$N × N$", anchor="start")
    with d.group("the gate sigma(lambda_h), learned per head, mixes the two maps"):
        d.box(mx - 50, 326, 100, 34, "op", "$σ(λ_h)$")
        d.note(mx, 316, "gate, learned per head", anchor="middle")
        d.arrow((lx, 304), (lx, 330))
        d.arrow((rx, 304), (rx, 330))
        d.arrow((mx - 50, 343), (lx + 13, 343))
        d.arrow((mx + 50, 343), (rx - 13, 343))
        d.times(lx, 343, 11)
        d.times(rx, 343, 11)
        d.shape(lx - 16, 343, "$1 − σ(λ_h)$", anchor="end")
        d.shape(rx + 16, 343, "$σ(λ_h)$", anchor="start")
        d.arrow((lx, 354), (lx, 398), (mx - 13, 398))
        d.arrow((rx, 354), (rx, 398), (mx + 13, 398))
        d.plus(mx, 398, 11)
    with d.group("the mixed map A_h, N x N, rows still sum to one"):
        d.arrow((mx, 409), (mx, 426))
        mixed = [0.27 * c + 0.73 * p for c, p in zip(_content_weights(n), _positional_weights(3, (1, 0), 1.0))]
        d.grid(mx - size / 2, 428, n, size, "attn", [min(1.0, 1.6 * a) for a in mixed])
        d.ctext(mx + size / 2 + 10, 452, "$A_h$", 18, anchor="start")
        d.shape(mx + size / 2 + 10, 476, "$N × N$, rows sum to 1", anchor="start")
    with d.group("the head's output A_h V_h"):
        d.arrow((98, 88), (98, 554))
        d.box(62, 556, 72, 32, "v", "$V_h$")
        d.shape(98, 604, "$N × d_k$", anchor="middle")
        d.arrow((mx, 500), (mx, 554))
        d.arrow((134, 572), (mx - 42, 572))
        d.box(mx - 40, 556, 80, 32, "op", "$A_hV_h$")
        d.arrow((mx + 40, 572), (mx + 70, 572))
        d.ctext(mx + 76, 572, "head $h$:  $N × d_k$", anchor="start")
        d.note(320, 640, "then the heads are concatenated and mixed by $W_o$, as in MHSA (chapter 3);", anchor="middle")
        d.note(320, 662, "[CLS] has no position: it joins after the GPSA layers", anchor="middle")
    return d


def mae() -> Diagram:
    """Chapter 10: mask 75 % of the patches, encoder on the visible ones, mask tokens + positions, decoder, loss on
    the hidden patches only."""
    visible = {1, 6, 11, 12}  # the drawing's 4 visible patches of 16 (numbered row by row from 0)
    hidden = set(range(16)) - visible
    d = Diagram(
        766,
        "The masked autoencoder (MAE)",
        "The image is cut into N patches, embedded, and given positions; 75 % of the patches are hidden at random. "
        "The encoder, a ViT, sees only [CLS] and the visible 25 %. Its output is projected to the decoder's width; "
        "one shared, learned mask token is put in the place of every hidden patch, and the decoder's own position "
        "embeddings are added to all N + 1 tokens. The decoder, a few Transformer blocks and a LayerNorm, ends in "
        "a Linear layer that predicts the P^2 C pixels of every patch ([CLS] dropped). The loss is the mean squared "
        "error on the hidden patches only.",
    )
    d.legend(236, 30, [("patch", "patch token"), ("mask", "mask token"), ("pos", "position")])
    with d.group("the image, 75 % of its patches hidden at random"):
        d.ctext(22, 40, "hide 75 % at random", cls="shape", size=SHAPE_FONT, anchor="start")
        d.pixels(22, 56, THREE, 12, patch=2, gap=4, hidden=hidden)
    with d.group("the encoder's input: [CLS] and the visible patches only, each with its position"):
        d.arrow((136, 110), (214, 110))
        d.shape(175, 94, "$·E$, $+E_{\\rm{pos}}$", anchor="middle")
        d.shape(175, 128, "visible", anchor="middle")
        xs = d.tokens(218, 92, ["cls", "patch", "patch", "patch", "patch"], ["[CLS]", "$x_2$", "$x_7$", "$x_{12}$",
                                                                            "$x_{13}$"], w=64, h=36, gap=10)
        d.shape(404, 148, "$(1 + N/4) × D$", anchor="middle")
    with d.group("the encoder: a ViT on 1 + N/4 tokens (no mask token ever enters it)"):
        d.arrow((404, 160), (404, 174))
        d.frame(190, 186, 400, 56)
        d.text(210, 220, "encoder", bold=True, anchor="start")
        d.ctext(440, 214, "ViT blocks + LN, visible tokens only", NOTE_FONT, cls="note")
        d.arrow((404, 244), (404, 270))
        d.box(304, 272, 200, 34, "op", "Linear  $D → D_{\\rm{dec}}$", 16)
        d.arrow((404, 306), (404, 330))
    with d.group("the decoder's input: mask tokens in the hidden places, then the decoder's positions"):
        w, gap, left = 28, 4, 50
        kinds = ["cls"] + ["patch" if i in visible else "mask" for i in range(16)]
        xs = d.tokens(left, 332, kinds, [""] * 17, w=w, h=30, gap=gap)
        for x in xs:
            d.rect(x - w / 2, 368, w, 10, "pos", rx=2)
        d.note(20, 398, "mask tokens (one learned vector) fill the hidden places;", anchor="start")
        d.note(20, 418, "$+$ the decoder's own positions:  $(1 + N) × D_{\\rm{dec}}$", anchor="start")
    with d.group("the decoder: a few blocks + LN, then a Linear layer to P^2 C pixels per patch"):
        d.arrow((404, 430), (404, 446))
        d.frame(190, 458, 400, 56)
        d.text(210, 492, "decoder", bold=True, anchor="start")
        d.ctext(430, 486, "blocks + LN, every token", NOTE_FONT, cls="note")
        d.arrow((404, 516), (404, 540))
        d.box(294, 542, 220, 34, "op", "Linear  $D_{\\rm{dec}} → P^2C$", 16)
        d.shape(524, 559, "drop [CLS]")
    with d.group("the loss: mean squared error on the hidden patches only"):
        d.arrow((404, 576), (404, 600), (150, 600), (150, 618))
        blurred = [row.replace("#", "+") for row in THREE]  # a reconstruction is a blurry guess
        d.pixels(96, 620, blurred, 12, patch=2, gap=4, faded=visible, outlined=hidden)
        d.box(264, 650, 152, 48, "loss", "")
        d.ctext(340, 667, "MSE on hidden", 16)
        d.ctext(340, 686, "patches only", 16)
        d.arrow((210, 674), (262, 674))
        d.arrow((470, 674), (418, 674))
        d.pixels(474, 620, THREE, 12, patch=2, gap=4, faded=visible, outlined=hidden)
        d.note(150, 748, "prediction (visible: no loss)", anchor="middle")
        d.note(528, 748, "target: the image", anchor="middle")
    return d


def chapter_map() -> Diagram:
    """The home page: the chapters and appendices as boxes, an arrow from each to what builds on it."""
    d = Diagram(
        440,
        "How the chapters build on each other",
        "Four rows of chapters. Attention: 1 self-attention, 2 why divide by the square root of d_k, 3 multi-head "
        "attention. The Vision Transformer: 4 patches and positions, 5 the encoder block, 6 the full ViT. "
        "Training: 7 training a ViT, 8 inside a trained ViT, and appendix 1, six bugs that run. After ViT: "
        "9 DeiT, CaiT and ConViT, 10 a masked autoencoder (learning without labels), and appendix 2, the ViT "
        "in minutes on a CPU. Arrows "
        "go from a chapter to the chapters that build on it: 1 to 2, 3 and 4; 2 to 3; 3 and 4 to 5; 5 to 6; "
        "6 to 7 and to appendix 1; 7 to 8; 8 to 9, 10 and appendix 2.",
    )
    w, h = 190, 44
    xs, ys = (20, 225, 430), (70, 160, 250, 340)
    rows = [
        ("attention", "attn", ["1. Self-attention", "2. Why divide by $√d_k$", "3. Multi-head"]),
        ("the Vision Transformer", "patch", ["4. Patches", "5. Encoder block", "6. The full ViT"]),
        ("training", "ln", ["7. Training a ViT", "8. Inside a ViT", "A1. Six silent bugs"]),
        ("after ViT", "teacher", ["9. DeiT, CaiT, ConViT", "10. MAE: no labels", "A2. ViT on a CPU"]),
    ]
    with d.group("the title"):
        d.text(320, 36, "How the chapters build on each other", 17, bold=True)
    for (part, kind, labels), y in zip(rows, ys):
        with d.group(f"{part}: {', '.join(labels)}"):
            for x, label in zip(xs, labels):
                d.box(x, y, w, h, "op" if label.startswith("A") else kind, label, dashed=label.startswith("A"))
    cx = [x + w / 2 for x in xs]
    top, bottom = [y for y in ys], [y + h for y in ys]
    with d.group("arrows: from a chapter to what builds on it"):
        d.arrow((xs[0] + w, ys[0] + h / 2), (xs[1], ys[0] + h / 2))  # 1 -> 2
        d.arrow((xs[1] + w, ys[0] + h / 2), (xs[2], ys[0] + h / 2))  # 2 -> 3
        d.arrow((cx[0], bottom[0]), (cx[0], top[1]))  # 1 -> 4
        d.arrow((cx[2], bottom[0]), (cx[2], bottom[0] + 23), (cx[1], bottom[0] + 23), (cx[1], top[1]))  # 3 -> 5
        d.arrow((xs[0] + w, ys[1] + h / 2), (xs[1], ys[1] + h / 2))  # 4 -> 5
        d.arrow((xs[1] + w, ys[1] + h / 2), (xs[2], ys[1] + h / 2))  # 5 -> 6
        d.arrow((cx[2] - 30, bottom[1]), (cx[2] - 30, bottom[1] + 23), (cx[0], bottom[1] + 23),
                (cx[0], top[2]))  # 6 -> 7
        d.arrow((cx[2] + 30, bottom[1]), (cx[2] + 30, top[2]))  # 6 -> A1
        d.arrow((xs[0] + w, ys[2] + h / 2), (xs[1], ys[2] + h / 2))  # 7 -> 8
        d.arrow((cx[1] - 40, bottom[2]), (cx[1] - 40, bottom[2] + 23), (cx[0], bottom[2] + 23),
                (cx[0], top[3]))  # 8 -> 9
        d.arrow((cx[1], bottom[2]), (cx[1], top[3]))  # 8 -> 10
        d.arrow((cx[1] + 40, bottom[2]), (cx[1] + 40, bottom[2] + 23), (cx[2], bottom[2] + 23),
                (cx[2], top[3]))  # 8 -> A2
    with d.group("the key"):
        d.note(320, 414, "an arrow: what a chapter builds on; dashed: the appendices", anchor="middle")
    return d


DIAGRAMS = {
    "attention_matmul.svg": attention_matmul,
    "multi_head.svg": multi_head,
    "patching.svg": patching,
    "encoder_block.svg": encoder_block,
    "vit.svg": vit,
    "deit_distillation.svg": deit_distillation,
    "cait_class_attention.svg": cait_class_attention,
    "convit_gpsa.svg": convit_gpsa,
    "mae.svg": mae,
    "chapter_map.svg": chapter_map,
}


def render_all() -> dict[str, str]:
    """File name -> SVG text, for every diagram."""
    return {name: make().svg() for name, make in DIAGRAMS.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with book/diagrams/ instead of writing")
    parser.add_argument("--out", type=Path, default=OUT_DIR, help="where to write (default: book/diagrams/)")
    args = parser.parse_args(argv)
    stale = []
    for name, svg in render_all().items():
        path = args.out / name
        if args.check:
            if not path.exists() or path.read_text(encoding="utf-8") != svg:
                stale.append(name)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(svg, encoding="utf-8")
        print(f"wrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")
    if stale:
        print(f"out of date (run python tools/draw_diagrams.py): {', '.join(stale)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
