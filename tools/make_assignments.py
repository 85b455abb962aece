"""Generate the student notebooks from the instructor notebooks, with nbgrader's own preprocessors.

    python tools/make_assignments.py                  # source/<name>/<name>.ipynb -> release/<name>/
    python tools/make_assignments.py --check          # exit 1 if the committed release is out of date
    python tools/make_assignments.py --release DIR    # write somewhere else (the tests use a temp dir)

The preprocessors are those of ``nbgrader generate_assignment``, in its order: lock cells, replace
``### BEGIN SOLUTION`` regions by ``raise NotImplementedError()`` (``YOUR ANSWER HERE`` in written
answers), clear outputs, checksum the graded cells, remove ``### BEGIN HIDDEN TESTS`` regions, remove
mark schemes, checksum again, validate the metadata. Left out are SaveCells, which records the cells in
a course's gradebook database (an instructor's ``nbgrader generate_assignment`` does that in the course
directory), and the header/footer and autotest steps, which this course does not use.

The output depends only on the source notebooks: running this twice gives byte-identical files.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import nbformat
from nbgrader.preprocessors import (
    CheckCellMetadata,
    ClearHiddenTests,
    ClearMarkScheme,
    ClearOutput,
    ClearSolutions,
    ComputeChecksums,
    LockCells,
)

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "notebooks" / "assignments" / "source"
RELEASE = ROOT / "notebooks" / "assignments" / "release"

# Timestamps nbconvert records while executing the source are not part of the student's notebook.
VOLATILE_METADATA = {"collapsed", "scrolled", "execution", "ExecuteTime"}


def pipeline() -> list:
    """nbgrader generate_assignment's preprocessors (see the module docstring for what is left out)."""
    return [
        LockCells(),
        ClearSolutions(),
        ClearOutput(remove_metadata_fields=VOLATILE_METADATA),
        CheckCellMetadata(),
        ComputeChecksums(),
        ClearHiddenTests(),
        ClearMarkScheme(),
        ComputeChecksums(),
        CheckCellMetadata(),
    ]


def student_version(source: Path) -> nbformat.NotebookNode:
    """The release (student) version of one source notebook."""
    nb = nbformat.read(source, as_version=4)
    resources: dict = {"unique_key": source.stem, "metadata": {"path": str(source.parent)}}
    for preprocessor in pipeline():
        nb, resources = preprocessor.preprocess(nb, resources)
    return nb


def sources(source_dir: Path = SOURCE) -> list[Path]:
    """Every assignment notebook: source/<name>/<name>.ipynb, the layout nbgrader expects."""
    found = sorted(p for p in source_dir.glob("*/*.ipynb") if ".ipynb_checkpoints" not in p.parts)
    if not found:
        raise SystemExit(f"no assignments found in {source_dir} (expected <name>/<name>.ipynb)")
    return found


def generate(source_dir: Path = SOURCE, release_dir: Path = RELEASE) -> list[Path]:
    """Write release_dir/<name>/<notebook>.ipynb for every source notebook; return the paths."""
    written = []
    for source in sources(source_dir):
        target = release_dir / source.relative_to(source_dir)
        target.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(student_version(source), target)
        written.append(target)
    return written


def stale(source_dir: Path = SOURCE, release_dir: Path = RELEASE) -> list[str]:
    """Release notebooks that differ from a fresh generation (or are missing, or have no source)."""
    with tempfile.TemporaryDirectory() as tmp:
        fresh = {p.relative_to(tmp): p.read_bytes() for p in generate(source_dir, Path(tmp))}
    committed = {p.relative_to(release_dir): p.read_bytes() for p in release_dir.glob("*/*.ipynb")}
    return sorted(str(p) for p in fresh.keys() | committed.keys() if fresh.get(p) != committed.get(p))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--source", type=Path, default=SOURCE, help="folder of <name>/<name>.ipynb sources")
    parser.add_argument("--release", type=Path, default=RELEASE, help="where the student versions go")
    parser.add_argument("--check", action="store_true", help="only report release notebooks that are out of date")
    args = parser.parse_args(argv)
    if args.check:
        out_of_date = stale(args.source, args.release)
        for path in out_of_date:
            print(f"out of date: {args.release / path}  (run `make assignments`)")
        return 1 if out_of_date else 0
    for path in generate(args.source, args.release):
        print(f"wrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
