"""The book's architecture diagrams (book/diagrams/*.svg) are there, well-formed, accessible,
self-contained, and what tools/draw_diagrams.py draws.

The chapters insert them as MyST figures (``../book/diagrams/<file>``), so the file names are fixed
(/work/notes/diagrams.md's table); they must render offline (no web font, no external reference) and in the
dark theme (each drawing sits on its own light card).
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from tools_loader import load_tool

ROOT = Path(__file__).resolve().parents[1]
DIAGRAMS = ROOT / "book" / "diagrams"
SVG = "{http://www.w3.org/2000/svg}"

# file -> the chapter that inserts it
FILES = {
    "attention_matmul.svg": "01_self_attention",
    "multi_head.svg": "03_multi_head",
    "patching.svg": "04_patches_and_positions",
    "encoder_block.svg": "05_encoder_block",
    "vit.svg": "06_vision_transformer",
    "deit_distillation.svg": "09_after_vit",
    "cait_class_attention.svg": "09_after_vit",
    "convit_gpsa.svg": "09_after_vit",
    "mae.svg": "10_masked_autoencoder",
    "chapter_map.svg": "book/intro.md",  # the home page
}


def _root(name: str) -> ET.Element:
    return ET.parse(DIAGRAMS / name).getroot()


def _luminance(colour: str) -> float:
    """Relative luminance (0 black, 1 white) of a #rrggbb colour."""
    channels = [int(colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
    linear = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def test_every_diagram_of_the_table_is_drawn_and_no_other():
    assert {path.name for path in DIAGRAMS.glob("*.svg")} == set(FILES)
    assert set(load_tool("draw_diagrams").DIAGRAMS) == set(FILES)


@pytest.mark.parametrize("name", sorted(FILES))
def test_committed_svg_is_what_the_script_draws(name):
    drawn = load_tool("draw_diagrams").render_all()[name]
    assert (DIAGRAMS / name).read_text(encoding="utf-8") == drawn, (
        f"book/diagrams/{name} differs from tools/draw_diagrams.py's drawing: run python tools/draw_diagrams.py"
    )


@pytest.mark.parametrize("name", sorted(FILES))
def test_svg_scales_and_is_accessible(name):
    root = _root(name)
    assert root.tag == f"{SVG}svg"
    view_box = [float(v) for v in root.get("viewBox", "").split()]
    assert len(view_box) == 4 and view_box[:2] == [0, 0] and view_box[2] > 0 and view_box[3] > 0
    # width and height as the viewBox's, so the figure's :width: 100% scales it without distortion
    assert float(root.get("width")) == view_box[2] and float(root.get("height")) == view_box[3]
    assert 600 <= view_box[2] <= 800, "drawn for the text column (about 700-800 px at 1280)"
    title, desc = root.find(f"{SVG}title"), root.find(f"{SVG}desc")
    assert title is not None and title.text and title.text.strip()
    assert desc is not None and desc.text and len(desc.text.split()) >= 20, "desc says what is drawn"
    assert root.get("role") == "img" and root.get("aria-labelledby") == "title desc"
    assert title.get("id") == "title" and desc.get("id") == "desc"


@pytest.mark.parametrize("name", sorted(FILES))
def test_svg_needs_nothing_from_outside(name):
    text = (DIAGRAMS / name).read_text(encoding="utf-8")
    root = _root(name)
    for element in root.iter():
        for key, value in element.attrib.items():
            if key.endswith("href"):
                assert value.startswith("#"), f"{name}: external reference {value!r}"
            assert not re.search(r"url\(\s*['\"]?(?!#)", value), f"{name}: external url() in {key}={value!r}"
        assert element.tag not in (f"{SVG}image", f"{SVG}foreignObject", f"{SVG}script")
    style = "".join(s.text or "" for s in root.iter(f"{SVG}style"))
    assert "@import" not in style and "@font-face" not in style, f"{name}: a web font or imported style"
    assert not re.search(r"url\(\s*['\"]?(?!#)", style)
    assert "http://" not in text.replace('xmlns="http://www.w3.org/2000/svg"', "") and "https://" not in text
    # every font-family ends with a generic family, so the reader's own fonts draw it offline
    families = re.findall(r"font-family:\s*([^;]+);", style) + [
        e.get("font-family") for e in root.iter() if e.get("font-family")
    ]
    assert families, f"{name}: no font-family"
    for family in families:
        assert family.strip().split(",")[-1].strip() in ("sans-serif", "serif", "monospace"), family


@pytest.mark.parametrize("name", sorted(FILES))
def test_svg_sits_on_its_own_light_card(name):
    """Dark text on a light, rounded background of its own: readable on the book's dark theme too."""
    root = _root(name)
    width, height = (float(v) for v in root.get("viewBox").split()[2:])
    card = next(r for r in root.iter(f"{SVG}rect"))  # the first rectangle drawn is the background
    assert float(card.get("x")) <= 2 and float(card.get("y")) <= 2
    assert float(card.get("width")) >= width - 4 and float(card.get("height")) >= height - 4
    assert float(card.get("rx")) > 0
    assert _luminance(card.get("fill")) > 0.9
    style = root.find(f"{SVG}style").text
    text_fill = re.search(r"text \{[^}]*fill: (#[0-9a-f]{6})", style).group(1)
    # WCAG contrast of the text on the card: at least 7:1 (AAA)
    contrast = (_luminance(card.get("fill")) + 0.05) / (_luminance(text_fill) + 0.05)
    assert contrast >= 7, contrast


def test_one_visual_language():
    """The same style sheet (colours, font, strokes) and the same arrowhead in every diagram; labels big enough
    to read when the column shrinks to a phone's (no text under 13 px in a 640-px-wide drawing)."""
    styles, markers = set(), set()
    for name in FILES:
        root = _root(name)
        styles.add(root.find(f"{SVG}style").text)
        markers.add(ET.tostring(root.find(f"{SVG}defs")))
        for element in root.iter(f"{SVG}text"):
            size = element.get("font-size")
            assert size is None or float(size) >= 13, f"{name}: a {size}-px label"
    assert len(styles) == 1 and len(markers) == 1
    style = styles.pop()
    for kind in ("q", "k", "v", "cls", "dist", "patch", "mask", "pos"):
        assert re.search(rf"\.{kind} \{{ fill: #[0-9a-f]{{6}}; stroke: #[0-9a-f]{{6}}; \}}", style), kind


def test_labels_follow_the_books_notation():
    """Spot checks of the details the chapters teach, in the text of the drawings."""

    def words(name: str) -> str:
        root = _root(name)
        return " ".join("".join(t.itertext()) for t in root.iter(f"{SVG}text"))

    assert "softmax" in words("attention_matmul.svg") and "T × d" in words("attention_matmul.svg")
    assert "dk = D/h" in words("multi_head.svg")  # d_k: d, then a subscript k
    assert "[CLS]" in words("patching.svg") and "N = HW/P2" in words("patching.svg")
    labels = ["".join(t.itertext()).strip() for t in _root("encoder_block.svg").iter(f"{SVG}text")]
    assert labels.count("LN") == 4 and labels.count("MSA") == 2  # two LN per block, placed differently
    assert "final norm" in words("vit.svg") and "[DIST]" in words("deit_distillation.svg")
    assert "argmax" in words("deit_distillation.svg")
    cait = words("cait_class_attention.svg")
    assert "(N + 1) × d" in cait and "1 × d" in cait  # keys/values from [CLS] and the patches; one query
    assert "σ(λ" in words("convit_gpsa.svg") and "1 − σ(λ" in words("convit_gpsa.svg")
    assert "hidden" in words("mae.svg") and "D" in words("mae.svg")
    chapters = words("chapter_map.svg")
    assert all(f"{n}. " in chapters for n in range(1, 11)) and "A1." in chapters and "A2." in chapters
