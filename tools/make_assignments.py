"""Generate the student notebooks from the instructor notebooks, with nbgrader's own preprocessors.

    python tools/make_assignments.py                  # source/<name>/<name>.ipynb -> release/<name>/
    python tools/make_assignments.py --check          # exit 1 if the committed release is out of date
    python tools/make_assignments.py --release DIR    # write somewhere else (the tests use a temp dir)
    python tools/make_assignments.py --course-dir my_course --course-seed 1234
        # an instructor's private copy: my_course/source/<name>/<name>.ipynb with the hidden tests'
        # random inputs (and the sizes drawn from them) changed by the course seed

    make assignments                                          # the same, through make
    make assignments COURSE_DIR=my_course COURSE_SEED=1234

The preprocessors are those of ``nbgrader generate_assignment``, in its order: lock cells, replace
``### BEGIN SOLUTION`` regions by ``raise NotImplementedError()`` (``YOUR ANSWER HERE`` in written
answers), clear outputs, checksum the graded cells, remove ``### BEGIN HIDDEN TESTS`` regions, remove
mark schemes, checksum again, validate the metadata. Left out are SaveCells, which records the cells in
a course's gradebook database (an instructor's ``nbgrader generate_assignment`` does that in the course
directory), and the header/footer and autotest steps, which this course does not use.

The output depends only on the source notebooks: running this twice gives byte-identical files.

The course seed: every hidden-test region starts with a line ``torch.manual_seed(K)  # course seed``.
``--course-seed S`` rewrites it to ``torch.manual_seed(S + K)`` in the course copy, so the hidden tests
of a course draw other random inputs and sizes than the ones in this public repository. Only hidden
tests change: the student version generated from a course copy is the committed release, byte for byte.
"""

from __future__ import annotations

import argparse
import re
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


# The line that opens every hidden-test region; the number is that region's offset from the course seed.
COURSE_SEED_LINE = re.compile(r"torch\.manual_seed\((\d+)\)(  # course seed)")


def with_course_seed(nb: nbformat.NotebookNode, seed: int) -> nbformat.NotebookNode:
    """The instructor notebook with each hidden test's ``torch.manual_seed(K)  # course seed`` -> (seed + K)."""
    nb = nbformat.from_dict(nb)  # a copy
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.source = COURSE_SEED_LINE.sub(lambda m: f"torch.manual_seed({seed + int(m.group(1))}){m.group(2)}",
                                               cell.source)
    return nb


def course_copy(course_dir: Path, seed: int, source_dir: Path = SOURCE) -> list[Path]:
    """Write course_dir/source/<name>/<notebook>.ipynb (nbgrader's layout) with the course seed applied."""
    if seed < 0:
        raise SystemExit(f"--course-seed must be a non-negative integer, got {seed}")
    written = []
    for source in sources(source_dir):
        nb = nbformat.read(source, as_version=4)
        if not any(COURSE_SEED_LINE.search(c.source) for c in nb.cells if c.cell_type == "code"):
            raise SystemExit(f"{source} has no `torch.manual_seed(K)  # course seed` line in its hidden tests")
        target = course_dir / "source" / source.relative_to(source_dir)
        target.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(with_course_seed(nb, seed), target)
        written.append(target)
    return written


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
    parser.add_argument("--course-dir", type=Path, help="also write a private instructor copy to DIR/source/")
    parser.add_argument("--course-seed", type=int, default=0, help="the per-course seed of the hidden tests")
    args = parser.parse_args(argv)
    if args.course_seed and not args.course_dir:
        parser.error("--course-seed applies to the instructor copy: give --course-dir as well")
    if args.check:
        out_of_date = stale(args.source, args.release)
        for path in out_of_date:
            print(f"out of date: {args.release / path}  (run `make assignments`)")
        return 1 if out_of_date else 0
    for path in generate(args.source, args.release):
        print(f"wrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")
    if args.course_dir:
        for path in course_copy(args.course_dir, args.course_seed, args.source):
            print(f"wrote {path} (course seed {args.course_seed})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
