"""Summarise a mutmut run (``make mutation``): the score per module and every surviving mutant.

    python tools/mutation_report.py            # after `mutmut run`, from the repository root
    python tools/mutation_report.py --diffs    # also print each survivor's diff

A mutant is one deliberate bug (``<`` for ``<=``, a dropped argument, a changed constant). It is *killed*
when a unit test fails (or the tests time out or crash) and *survives* when every test still passes.
Mutants listed in tools/mutation_equivalents.toml change nothing observable; they are left out of the
score and printed with their reason. A listed mutant that was killed after all, or whose diff no longer
matches the listed line, is reported as stale, so the list cannot silently go out of date.

score = killed / (killed + survived - equivalent), per module; mutants not run yet are counted apart.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10 (mutmut 3 needs 3.10 or later)
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
EQUIVALENTS = ROOT / "tools" / "mutation_equivalents.toml"
KILLED = {"killed", "timeout", "segfault", "suspicious", "caught by type check"}
SURVIVED = {"survived", "no tests"}


def load_equivalents() -> dict[str, dict[str, str]]:
    """{mutant name: {"line": the mutated line, "reason": why nothing observable changes}}"""
    if not EQUIVALENTS.exists():
        return {}
    return tomllib.loads(EQUIVALENTS.read_text())["equivalent"]


def load_import_time() -> dict[str, str]:
    """{function: why}: functions that run only while their module is imported (e.g. building a table). mutmut
    switches a mutant on after the import, so their mutants never run: counted apart, like equivalent ones."""
    if not EQUIVALENTS.exists():
        return {}
    return tomllib.loads(EQUIVALENTS.read_text()).get("import_time", {})


def _function(name: str) -> str:
    """'vitedu.registry.x__timm__mutmut_3' -> 'vitedu.registry._timm'"""
    module, _, mangled = name.rpartition(".")
    return f"{module}.{mangled.removeprefix('x_').rsplit('__mutmut_', 1)[0]}"


def changed_lines(name: str, path: Path) -> tuple[str, list[str]]:
    """The mutant's unified diff, and its added lines without the leading '+' and indentation."""
    from mutmut.mutation.diff_apply import get_diff_for_mutant

    diff = get_diff_for_mutant(name, path=str(path))
    added = [line[1:].strip() for line in diff.splitlines() if line.startswith("+") and not line.startswith("+++")]
    return diff, added


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--diffs", action="store_true", help="print the full diff of every survivor")
    parser.add_argument("--min-score", type=float, default=0.0,
                        help="exit with status 1 when a module that was run completely scores below this (0..1)")
    args = parser.parse_args(argv)

    from mutmut.stats import status_by_exit_code

    os.chdir(ROOT)  # mutmut reads its mutants/ folder relative to the working directory

    metas = sorted((ROOT / "mutants").glob("vitedu/*.py.meta"))
    if not metas:
        print("no results in mutants/: run `make mutation` (or `mutmut run`) first")
        return 1
    equivalents = load_equivalents()
    import_time = load_import_time()
    seen: set[str] = set()
    rows, survivors, stale, below = [], [], [], []
    for meta in metas:
        module = meta.name.removesuffix(".py.meta")
        source = Path("vitedu") / f"{module}.py"
        statuses = {name: status_by_exit_code[code]
                    for name, code in json.loads(meta.read_text())["exit_code_by_key"].items()}
        killed = sum(s in KILLED for s in statuses.values())
        survived = [n for n, s in statuses.items() if s in SURVIVED]
        not_run = sum(s not in KILLED | SURVIVED for s in statuses.values())
        equivalent = []
        for name in survived:
            if _function(name) in import_time:  # never switched on: counted with the equivalent ones
                equivalent.append(name)
                continue
            diff, added = changed_lines(name, source) if args.diffs or name in equivalents else ("", [])
            entry = equivalents.get(name)
            if entry is not None:
                seen.add(name)
                if entry["line"].strip() in added:
                    equivalent.append(name)
                    continue
                stale.append(f"{name}: the listed line {entry['line']!r} is no longer what it changes ({added})")
            survivors.append((module, name, diff))
        for name, status in statuses.items():
            if name in equivalents and status in KILLED:
                seen.add(name)
                stale.append(f"{name}: listed as equivalent but {status}: remove it from the list")
        real = killed + len(survived) - len(equivalent)
        score = killed / real if real else 1.0
        rows.append((module, len(statuses), killed, len(survived) - len(equivalent), len(equivalent), not_run,
                     score if killed + len(survived) else None))
        if not not_run and real and score < args.min_score:
            below.append(module)

    print(f"{'module':<12}{'mutants':>9}{'killed':>8}{'survived':>10}{'equivalent':>12}{'not run':>9}{'score':>8}")
    for module, total, killed, survived, equivalent, not_run, score in rows:
        shown = "-" if score is None else f"{100 * score:.1f}%"
        print(f"{module:<12}{total:>9}{killed:>8}{survived:>10}{equivalent:>12}{not_run:>9}{shown:>8}")
    print("(score = killed / (killed + survived); equivalent mutants, tools/mutation_equivalents.toml, are left out)")
    for function, reason in import_time.items():
        print(f"  {function}: its mutants count as equivalent: {reason}")

    print(f"\n{len(survivors)} surviving mutant(s)" + (":" if survivors else ""))
    for _module, name, diff in survivors:
        print(f"  {name}")
        if args.diffs:
            print("    " + diff.replace("\n", "\n    "))
    if not args.diffs and survivors:
        print("see one with: .venv/bin/mutmut show NAME   (or run this script with --diffs)")
    missing = sorted(set(equivalents) - seen)
    run_names = {n for meta in metas for n in json.loads(meta.read_text())["exit_code_by_key"]}
    measured = {meta.name.removesuffix(".py.meta") for meta in metas}
    stale += [f"{name}: listed as equivalent but no such mutant any more" for name in missing
              if name not in run_names and name.split(".")[1] in measured]
    if stale:
        print("\nstale entries in tools/mutation_equivalents.toml:")
        for line in stale:
            print(f"  {line}")
    if below:
        print(f"\nbelow the score of {args.min_score:.0%}: {', '.join(below)}")
    return 1 if below or stale else 0


if __name__ == "__main__":
    sys.exit(main())
