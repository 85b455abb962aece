"""The README is the front door: short, and everything it shows works as written.

Every `make` target it names exists in the Makefile, every option of every `python -m vitedu.train`
command exists in the command's own --help (and every choice it picks is offered there), every file it
links exists, the chapter list follows _toc.yml, the Python example runs, and CI runs the test command the
README gives.
"""

from __future__ import annotations

import contextlib
import io
import re
import subprocess
import sys
import tomllib

import pytest
import yaml
from book_pages import ROOT, book_config, colab_url, toc_pages

import vitedu

README = ROOT / "README.md"
TEXT = README.read_text()


def _code() -> str:
    """Every fenced block and inline code span of a markdown text, one per line."""
    fenced = re.findall(r"^```[^\n]*\n(.*?)^```", TEXT, re.S | re.M)
    prose = re.sub(r"^```.*?^```", "", TEXT, flags=re.S | re.M)
    return "\n".join(fenced + re.findall(r"`([^`\n]+)`", prose))


def _commands(prefix: str) -> list[str]:
    """Shell commands in the README's code that contain ``prefix``, comments and continuation lines joined."""
    lines = _code().replace("\\\n", " ").splitlines()
    return [line.split("  #")[0].split(" # ")[0].strip() for line in lines if prefix in line]


def _makefile_targets() -> set[str]:
    text = (ROOT / "Makefile").read_text()
    return set(re.findall(r"^([A-Za-z][\w.-]*)\s*:(?!=)", text, re.M))


def _section(title: str) -> str:
    return TEXT.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]


def test_readme_is_a_front_door_not_a_ledger():
    lines = TEXT.splitlines()
    assert len(lines) <= 200, f"README.md has {len(lines)} lines; move details to the book or benchmarks/README.md"
    first_screen = "\n".join(lines[:40])
    assert "make book" in first_screen and "make test" in first_screen, "the two set-up commands belong on top"
    assert not re.search(r"\bissues? \d+", TEXT, re.I), "the README names no issue numbers"
    ways = TEXT.index("Three ways in")  # what it is, the reader's three ways in, then the two commands
    assert ways < TEXT.index("## Set up: two commands") < TEXT.index("## Use the package")
    assert all(f"](#{_github_anchor(h)})" in TEXT[ways:] for h in ("Read the book", "Open a notebook",
                                                                       "Use the package"))
    assert max(len(line) for line in lines if "colab-badge" not in line) <= 120


def test_every_make_target_the_readme_shows_exists():
    shown = {m for cmd in _commands("make ") for m in re.findall(r"(?:^|\s)make\s+(?:-\S+\s+)*([a-z][\w-]*)", cmd)}
    assert {"book", "test"} <= shown, shown
    missing = shown - _makefile_targets()
    assert not missing, f"the README shows `make {', '.join(sorted(missing))}`, which the Makefile lacks"


def test_makefile_target_parser_sees_targets_and_not_variables():
    targets = _makefile_targets()
    assert {"book", "test", "venv", "check-newest"} <= targets
    assert not {"PYTHON", "VENV", "BIN", "PIP"} & targets  # `NAME ?= ...` and `NAME := ...` are variables


def test_make_help_lists_every_target():
    shown = subprocess.run(["make", "-s", "help"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    listed = set(re.findall(r"^make ([a-z][\w-]*)", shown, re.M))
    assert listed == _makefile_targets(), f"make help misses or invents: {sorted(_makefile_targets() ^ listed)}"


@pytest.fixture(scope="module")
def train_help() -> str:
    """What `python -m vitedu.train --help` prints: the options a reader can actually pass. The same parser's
    help, made in this process at 80 columns, as in a pipe (a subprocess only added an import of torch; that
    the command itself starts is checked by tests/test_config.py's
    test_the_cli_prints_an_explained_error_as_one_line_in_a_subprocess)."""
    from vitedu.train import build_parser

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("COLUMNS", "80")
        return build_parser().format_help()


def _unknown_train_options(command: str, help_text: str) -> list[str]:
    """Options of one `... -m vitedu.train ...` command that its --help does not offer, or choices it lacks."""
    args = command.split("-m vitedu.train", 1)[1].split()
    offered = set(re.findall(r"(?<![\w-])(--[a-z][\w-]*)", help_text))
    problems = []
    for i, arg in enumerate(args):
        if not arg.startswith("--"):
            continue
        option = arg.split("=", 1)[0]
        if option not in offered:
            problems.append(option)
            continue
        choices = re.search(rf"{re.escape(option)} \{{([^}}]*)\}}", help_text)
        if choices and i + 1 < len(args) and args[i + 1] not in choices.group(1).split(","):
            problems.append(f"{option} {args[i + 1]}")
    return problems


@pytest.mark.integration
def test_every_training_command_uses_options_that_exist(train_help):
    commands = _commands("-m vitedu.train")
    assert len(commands) >= 4, commands  # the Train section's commands and the torchrun line
    problems = {cmd: bad for cmd in commands if (bad := _unknown_train_options(cmd, train_help))}
    assert not problems, f"options that `python -m vitedu.train --help` does not offer: {problems}"


@pytest.mark.integration
def test_training_option_check_catches_a_wrong_option_and_a_wrong_choice(train_help):
    assert _unknown_train_options("python -m vitedu.train --dataset digits --epochs 3", train_help) == []
    assert _unknown_train_options("python -m vitedu.train --datset digits", train_help) == ["--datset"]
    assert _unknown_train_options("python -m vitedu.train --dataset mnist", train_help) == ["--dataset mnist"]


def _github_anchor(heading: str) -> str:
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_every_linked_file_exists():
    links = re.findall(r"\]\(([^)\s]+)\)", TEXT)
    local = [link for link in links if not re.match(r"[a-z]+://", link)]
    assert len(local) >= 10, local
    for link in local:
        path, _, anchor = link.partition("#")
        target = ROOT / path if path else README  # "#heading": a section of the README itself
        assert target.exists(), f"README links {link}, but {path} does not exist"
        if anchor:
            headings = re.findall(r"^#+ (.+)$", target.read_text(), re.M)
            assert anchor in {_github_anchor(h) for h in headings}, f"README links {link}: no such heading"


def test_chapter_list_follows_the_table_of_contents():
    listed = re.findall(r"^\d+\. \[[^]]+\]\((notebooks/[^)]+\.ipynb)\)", _section("Read the book"), re.M)
    chapters = [page.source.relative_to(ROOT).as_posix() for page in toc_pages()
                if page.is_notebook and re.match(r"notebooks/\d\d_", page.source.relative_to(ROOT).as_posix())]
    assert listed == chapters, "the README's chapter list must follow _toc.yml, one line per chapter"
    for page in toc_pages():  # and every other page of the book is linked from the README
        assert page.source.relative_to(ROOT).as_posix() in TEXT or page.docname == "book/intro" \
            or page.docname == "book/bibliography", f"the README does not link {page.source.name}"


def test_colab_badge_and_install_line_come_from_the_repository_url():
    url = book_config()["repository"]["url"]
    badge = re.search(r"\[!\[Open In Colab\]\([^)]*\)\]\(([^)]+)\)", _section("Open a notebook")).group(1)
    assert badge == colab_url(badge.split("/blob/main/", 1)[1])
    assert (ROOT / badge.split("/blob/main/", 1)[1]).is_file()
    usage = _section("Use the package")
    fenced = re.findall(r"```bash\n(.*?)```", usage, re.S)
    assert any(f'pip install "vitedu @ git+{url}"' in block for block in fenced), \
        "the install line stands in a code block of its own, with the repository URL of _config.yml"


def test_the_book_is_published_by_a_workflow_that_runs_the_readmes_book_command():
    owner, name = book_config()["repository"]["url"].rstrip("/").split("/")[-2:]
    pages = f"https://{owner}.github.io/{name}/"
    assert pages in TEXT.split("## Set up")[0], "the README's first lines link the published book"
    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "book.yml").read_text())
    steps = workflow["jobs"]["build"]["steps"]
    assert {"run": "make book"} in steps  # the README's own command
    upload = next(s for s in steps if s.get("uses", "").startswith("actions/upload-pages-artifact"))
    assert upload["with"]["path"] == "_build/html"
    assert any(s.get("uses", "").startswith("actions/deploy-pages") for s in workflow["jobs"]["deploy"]["steps"])
    assert pages in (ROOT / ".github" / "workflows" / "book.yml").read_text()


def test_the_cpu_torch_advice_stands_beside_the_install_line():
    usage = _section("Use the package")
    install = usage.index('pip install "vitedu @')
    assert "https://download.pytorch.org/whl/cpu" in usage[install:install + 400]


def test_ci_runs_the_readmes_test_command():
    setup = _section("Set up: two commands")
    assert re.search(r"^make test\b", setup, re.M)
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()
          if line.strip() and not line.lstrip().startswith("#")]
    assert ci[-1] == "make test", f".ci/run must end by running the README's test command, not {ci[-1]!r}"


def test_python_floor_is_stated_the_same_everywhere():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    floor = re.fullmatch(r">=(3\.\d+)", project["requires-python"]).group(1)
    assert f"Python ≥ {floor}" in TEXT
    assert f"Python {floor} or newer" in (ROOT / "book" / "how_to_run.md").read_text()
    assert sys.version_info >= tuple(int(p) for p in floor.split(".")), "the tests run on the stated floor or above"


def test_licence_and_citation():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    licence = (ROOT / "LICENSE").read_text()
    assert project["license"]["text"] == "MIT" and licence.startswith("MIT License\n")
    assert "Copyright (c) 2026 the vitedu authors" in licence
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert cff["cff-version"] == "1.2.0"
    assert {"message", "title", "authors"} <= cff.keys() and cff["authors"]  # required by CFF 1.2.0
    assert cff["license"] == "MIT" and cff["version"] == project["version"] == vitedu.__version__
    assert cff["repository-code"] == book_config()["repository"]["url"]


def _example() -> str:
    """The package's Python blocks, in order (the five lines, then the rollout that reuses their names)."""
    blocks = re.findall(r"```python\n(.*?)```", _section("Use the package"), re.S)
    assert len(blocks[0].strip().splitlines()) == 5, "the package in five lines"
    return "".join(blocks)


@pytest.mark.integration
def test_python_example_runs_and_gives_the_shipped_models_accuracy():
    from vitedu.shipped import shipped_metadata

    out = io.StringIO()
    namespace: dict = {}
    with contextlib.redirect_stdout(out):
        exec(compile(_example(), "README example", "exec"), namespace)
    printed = out.getvalue()
    accuracy = float(re.match(r"tensor\(([\d.]+)\)", printed).group(1))
    # The plain call on plain images gives the accuracy the shipped file records (its transform is right).
    assert accuracy == pytest.approx(float(shipped_metadata("vit_cluttered_digits")["test_acc"]), abs=1e-3)
    rollout = namespace["rollout"]
    tokens = 1 + namespace["model"].patch_embed.num_patches
    assert rollout.shape == (1, tokens, tokens)
    where = vitedu.interpret.cls_attention(rollout)
    assert where.min() >= 0 and where.sum().item() == pytest.approx(1.0, abs=1e-5)


def test_python_example_uses_only_names_that_will_exist():
    code = _example()
    assert "vitedu.create_transform(model)" in code and "model.pretrained_cfg" in code
    for name in re.findall(r"from vitedu\.interpret import (.+)", code)[0].split(", "):
        assert hasattr(vitedu.interpret, name.strip()), name
    assert "model.attention_maps(" in code
