"""Run chosen mutants the slow, plain way: one fresh pytest process each, without mutmut's fork.

    python tools/mutation_without_fork.py NAME [NAME ...]           # after a `make mutation` (mutants/ exists)
    python tools/mutation_without_fork.py --record NAME [NAME ...]  # and store the results where mutmut keeps its own
    python tools/mutation_without_fork.py --also tests/test_x.py NAME  # with tests newer than mutmut's map (run first)

mutmut forks every mutant's test run from a process that has already run the whole test selection. The survivors
of ``preprocess.make_pretrained_cfg`` and ``preprocess.attach_pretrained_cfg`` run all of their ~200 tests, and
in a forked child one of them waits forever on a lock (futex) that the parent held at the fork; mutmut's limit is
on CPU time, which a waiting process does not use, so the run never ends. Here each mutant gets a new Python process
(``MUTANT_UNDER_TEST`` switches it on, as mutmut does), the tests mutmut maps to its function, ``-x`` and a
wall-clock limit. Exit status 0: every test passed, the mutant survived; 1: a test failed, it is killed.
``--record`` writes those results into ``mutants/vitedu/<module>.py.meta`` so that tools/mutation_report.py
counts them.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUN = ("import sys, pytest; tests = open(sys.argv[1]).read().splitlines(); "
       "sys.exit(pytest.main(['-x', '-q', '-p', 'no:cacheprovider', '-m', 'not slow and not book and not network', "
       "*tests]))")


def run_one(name: str, tests: list[str], timeout: float) -> int | None:
    """pytest's exit status with mutant ``name`` switched on, or None when it ran past ``timeout`` seconds."""
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write("\n".join(tests))
    env = dict(os.environ, MUTANT_UNDER_TEST=name, OMP_NUM_THREADS="1", VITEDU_TEST_THREADS="1")
    try:
        return subprocess.run([sys.executable, "-c", RUN, f.name], cwd=ROOT / "mutants", env=env,
                              capture_output=True, timeout=timeout).returncode
    except subprocess.TimeoutExpired:
        return None
    finally:
        os.unlink(f.name)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="+", help="mutant names, as tools/mutation_report.py prints them")
    parser.add_argument("--record", action="store_true", help="store the results in mutants/ for the report")
    parser.add_argument("--timeout", type=float, default=600, help="seconds per mutant (default 600)")
    parser.add_argument("--also", action="append", default=[], metavar="TEST",
                        help="tests to run as well (files or ids, e.g. tests added since mutmut mapped its tests)")
    args = parser.parse_args(argv)

    stats_file = ROOT / "mutants" / "mutmut-stats.json"
    if not stats_file.exists():
        print("no mutants/mutmut-stats.json: run `make mutation` first, so that mutmut maps tests to functions")
        return 1
    tests_by_function = json.loads(stats_file.read_text())["tests_by_mangled_function_name"]
    for test in args.also:  # mutmut copies the tests into mutants/ when a run starts: bring these up to date
        source = ROOT / test.split("::")[0]
        shutil.copyfile(source, ROOT / "mutants" / source.relative_to(ROOT))
    for name in args.names:
        function = name.rsplit("__mutmut_", 1)[0]
        if function not in tests_by_function:
            print(f"{name}: no tests are mapped to {function} (is the name right? see tools/mutation_report.py)")
            return 1
        start = time.perf_counter()
        code = run_one(name, [*args.also, *sorted(tests_by_function[function])], args.timeout)
        verdict = {0: "survived", 1: "killed", None: "timeout"}.get(code, f"error (pytest exit status {code})")
        print(f"{name}: {verdict} ({time.perf_counter() - start:.0f} s)", flush=True)
        if args.record and code in (0, 1, None):
            meta = ROOT / "mutants" / "vitedu" / f"{name.split('.')[1]}.py.meta"
            data = json.loads(meta.read_text())
            data["exit_code_by_key"][name] = 36 if code is None else code  # mutmut's codes: 36 timeout
            meta.write_text(json.dumps(data, indent=4))
    return 0


if __name__ == "__main__":
    sys.exit(main())
