"""The examples of README.md, CHANGELOG.md and docs/ are real (issue 25).

* Every ``python`` block is type-checked with ``mypy --strict``, except a verbatim copy of a
  file in ``examples/`` (``tests/test_examples.py`` runs those).
* A block marked ``<!-- example: run -->`` is also run (against the failer); when the next block
  is marked ``<!-- example: output -->``, what it printed must be exactly that.
* Every ``genesis`` command line of a shell or console block is parsed by the CLI's own parser
  (parsed, never run): a flag that does not exist, or is given to the wrong command, fails.
* Every ``toml`` and ``json`` block parses; the failure report shown reads back.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shlex
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

from coding_genesis import _EXPORTS, parse_failure_report
from coding_genesis._cli.main import build_parser
from tests.api_index import GROUPS

ROOT = Path(__file__).parent.parent
DOCS = ROOT / "docs"
PAGES = [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted(DOCS.glob("*.md"))]
EXAMPLE_FILES = {p.read_text() for p in (ROOT / "examples").glob("*.py")}
FENCE = re.compile(r"^```(\w*)\s*$")
MARKER = re.compile(r"^<!-- example: (run|output) -->$")
SHELLS = {"bash", "sh", "shell", "console"}


@dataclass(frozen=True)
class Block:
    page: Path
    line: int  # of the opening fence, 1-based
    lang: str
    code: str
    marker: str | None  # "run" / "output": the comment on the line before the fence

    @property
    def id(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks(page: Path) -> list[Block]:
    found: list[Block] = []
    lines = page.read_text().splitlines()
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if opening is None:
            i += 1
            continue
        end = i + 1
        while lines[end] != "```":
            end += 1
        marked = MARKER.match(lines[i - 1]) if i else None
        code = "\n".join(lines[i + 1 : end]) + "\n"
        found.append(Block(page, i + 1, opening[1], code, marked[1] if marked else None))
        i = end + 1
    return found


ALL = [block for page in PAGES for block in blocks(page)]
PYTHON = [b for b in ALL if b.lang == "python"]
RUN = [b for b in PYTHON if b.marker == "run"]


def test_examples_are_found() -> None:
    # The extraction itself: a change to the fences or markers must not silently skip them.
    assert len(PYTHON) >= 15 and len(RUN) >= 5
    assert {b.page.name for b in RUN} >= {
        "README.md",
        "getting-started.md",
        "failures.md",
        "sessions.md",
    }
    # Every example of the sessions page runs (on the two-way failer), none only type-checks.
    sessions = [b for b in PYTHON if b.page.name == "sessions.md"]
    assert len(sessions) >= 6 and all(b.marker == "run" for b in sessions), [
        b.id for b in sessions if b.marker != "run"
    ]
    assert all(b.lang for b in ALL), [b.id for b in ALL if not b.lang]


@pytest.mark.slow
def test_python_examples_type_check(tmp_path: Path) -> None:
    checked = [b for b in PYTHON if b.code not in EXAMPLE_FILES]
    files = []
    for n, block in enumerate(checked):
        path = tmp_path / f"example_{n}.py"
        path.write_text(block.code)
        files.append(str(path))
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--config-file",
            str(ROOT / "pyproject.toml"),
            "--follow-imports=silent",
            "--cache-dir",
            str(ROOT / ".mypy_cache" / "docs-examples"),
            *files,
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        cwd=ROOT,
    )
    where = {f"example_{n}.py": block.id for n, block in enumerate(checked)}
    report = re.sub(r"\S*(example_\d+\.py)", lambda m: where[m[1]], done.stdout)
    assert done.returncode == 0, report + done.stderr


@pytest.mark.slow
@pytest.mark.parametrize("block", RUN, ids=lambda b: b.id)
def test_run_examples_run(block: Block, tmp_path: Path) -> None:
    script = tmp_path / "example.py"
    script.write_text(block.code)
    done = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=110,
        check=False,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    following = [b for b in ALL if b.page == block.page and b.line > block.line][:1]
    if following and following[0].marker == "output":
        assert done.stdout == following[0].code


def command_lines(block: Block) -> list[list[str]]:
    """Each ``genesis ...`` command of a shell block, as argv without ``genesis``: a line's
    pipeline and list segments are split apart; comments, redirections and ``$ `` prompts
    are left out; output lines of a console block are skipped."""
    commands: list[list[str]] = []
    text = block.code.replace("\\\n", " ")
    for raw in text.splitlines():
        line = raw.strip()
        if block.lang == "console":
            if not line.startswith("$ "):
                continue
            line = line[2:]
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        lexer.commenters = "#"
        segment: list[str] = []
        segments = [segment]
        for token in lexer:
            if token in {"|", "||", "&&", ";", "&"}:
                segment = []
                segments.append(segment)
            else:
                segment.append(token)
        for words in segments:
            for redirect in (">", ">>", "<", "2>"):
                while redirect in words:
                    at = words.index(redirect)
                    del words[at : at + 2]
            if words and words[0] == "genesis":
                commands.append(words[1:])
    return commands


ARGVS = [(b, argv) for b in ALL if b.lang in SHELLS for argv in command_lines(b)]
COMMANDS = [pytest.param(argv, id=f"{b.id}: genesis {shlex.join(argv)}") for b, argv in ARGVS]


def test_command_examples_are_found() -> None:
    named = {argv[0] for _, argv in ARGVS if argv}
    assert named >= {
        "run",
        "run-many",
        "runs",
        "show",
        "replay",
        "doctor",
        "stats",
        "reap",
        "worktrees",
    }


@pytest.mark.parametrize("argv", COMMANDS)
def test_command_examples_parse(argv: list[str]) -> None:
    errors = io.StringIO()
    code: object = None
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(errors):
            build_parser(argv).parse_args(argv)
    except SystemExit as exited:  # --help exits 0; a usage error exits 2, saying why
        code = exited.code
    assert code in (0, None), errors.getvalue()


def test_command_parsing_catches_a_wrong_flag() -> None:
    # The bug this guards against: a run flag given to the top-level parser.
    bad = Block(ROOT / "README.md", 1, "bash", "genesis --transcript-dir off\n", None)
    (argv,) = command_lines(bad)
    with pytest.raises(SystemExit) as exited, contextlib.redirect_stderr(io.StringIO()):
        build_parser(argv).parse_args(argv)
    assert exited.value.code == 2


def test_sample_task_files_are_valid_batch_lines() -> None:
    # The `tasks.jsonl` shown on the CLI and embedding pages: each line a valid RunSpec.
    from coding_genesis import RunSpec

    samples = [b for b in ALL if b.lang == "console" and b.code.startswith("$ cat tasks.jsonl")]
    assert {b.page.name for b in samples} >= {"cli.md", "embedding.md"}
    for block in samples:
        for line in block.code.splitlines()[1:]:
            RunSpec.model_validate(json.loads(line))


def test_data_blocks_parse() -> None:
    data = [b for b in ALL if b.lang in {"toml", "json"}]
    assert {b.lang for b in data} == {"toml", "json"}
    for block in data:
        if block.lang == "toml":
            tomllib.loads(block.code)
        else:
            json.loads(block.code)


def test_the_failure_report_shown_reads_back() -> None:
    (report,) = [b for b in ALL if b.code.startswith("Child agent failed:")]
    record = parse_failure_report(report.code)
    assert record.category == "timeout"
    assert record.files_modified == ["src/config.py"]


def test_readme_fits_two_screens() -> None:
    assert len((ROOT / "README.md").read_text().splitlines()) <= 200


PUBLIC_MODULES = {p.stem for p in (DOCS / "api").glob("*.md")} - {"index"}


def render_api_index() -> str:
    """docs/api/index.md: every public name (``_EXPORTS``) once, grouped by what a user does
    (``tests/api_index.py``), entry points first, one line each, linked to its documentation:
    the page of the public module that defines it, or this page for the others."""
    lines = [
        "# API reference",
        "",
        "Everything below is importable from the top-level package",
        "(`from coding_genesis import NAME`). Start with `CodingGenesisAgent`; the guides",
        "([Getting started](../getting-started.md), [Live sessions](../sessions.md),",
        "[Embedding](../embedding.md)) show each name at work.",
        "",
    ]
    here = []
    for group, guide, items in GROUPS:
        lines += [f"## {group}", "", guide, "", "| name | what it is for |", "|---|---|"]
        for name, what in items:
            module = _EXPORTS[name]
            if module in PUBLIC_MODULES:
                target = f"coding_genesis.{module}.{name}"
            else:
                target = f"coding_genesis.{name}"
                here.append(name)
            lines.append(f"| [`{name}`][{target}] | {what} |")
        lines.append("")
    lines += [
        "`__version__` is the installed package's version (read from its metadata on first use).",
        "",
        "## At the top level",
        "",
        "These names live at the top level (`coding_genesis.NAME` is their home; their code may move).",
        "",
    ]
    for name in sorted(here, key=str.lower):
        lines += [f"::: coding_genesis.{name}", "    options:", "      heading_level: 3", ""]
    return "\n".join(lines)


def test_the_api_index_groups_every_public_name_once() -> None:
    named = [name for _, _, items in GROUPS for name, _ in items]
    missing = sorted(set(_EXPORTS) - set(named))
    assert not missing, f"add {missing} to a group in tests/api_index.py"
    assert len(named) == len(set(named)) and set(named) <= set(_EXPORTS)
    assert GROUPS[0][2][0][0] == "CodingGenesisAgent"  # the entry point comes first
    assert all(len(what) <= 100 and "\n" not in what for _, _, i in GROUPS for _, what in i)


def test_api_reference_lists_every_public_name() -> None:
    assert (DOCS / "api" / "index.md").read_text() == render_api_index(), (
        "docs/api/index.md is out of date: run `python -m tests.test_docs`"
    )
    nav = (ROOT / "mkdocs.yml").read_text()
    for page in sorted((DOCS / "api").glob("*.md")):
        assert f"api/{page.name}" in nav, page.name
        assert "::: coding_genesis" in page.read_text(), page.name
        assert "::: coding_genesis._" not in page.read_text(), page.name


def test_supervision_page_quotes_the_guarantee_from_its_docstring() -> None:
    # Rendered by mkdocstrings from the module's docstring, so it cannot drift from it.
    page = (DOCS / "supervision.md").read_text()
    assert "::: coding_genesis._supervision.process\n    options:\n" in page
    assert "members: false" in page


ID = re.compile(
    r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b|\b[0-9a-f]{12,32}\b"
)


def masked(text: str) -> str:
    """What may differ between two runs of one command: ids, paths, numbers (times, pids)."""
    text = ID.sub("ID", text)
    text = re.sub(r"/[^\s\"',]+", "PATH", text)
    return re.sub(r"\d+(\.\d+)?", "N", text)


def _shows_a_failer_run(b: Block, argv: list[str]) -> bool:
    return (
        b.lang == "console"
        and argv[:1] == ["run"]
        and "failer" in argv
        and "--isolate" not in argv
        and not re.search(r"[|>]", b.code.splitlines()[0])
    )


FAILER_RUNS = [
    pytest.param(b, argv, id=f"{b.id}: genesis {shlex.join(argv)}")
    for b, argv in ARGVS
    if _shows_a_failer_run(b, argv)
]


def test_failer_runs_are_found() -> None:
    assert len(FAILER_RUNS) >= 4


def run_genesis(argv: list[str], where: Path) -> str:
    """``genesis ARGV`` as a person runs it, in a fresh state directory: stdout and stderr."""
    done = subprocess.run(
        [sys.executable, "-m", "coding_genesis._cli.main", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=60,
        check=False,
        cwd=where,
        env={
            "PATH": os.environ["PATH"],
            "HOME": str(where),
            "XDG_STATE_HOME": str(where / "state"),
            "GENESIS_LEDGER": "off",
        },
    )
    return done.stdout


@pytest.mark.slow
@pytest.mark.parametrize(("block", "argv"), FAILER_RUNS)
def test_failer_run_output_shown_is_real(block: Block, argv: list[str], tmp_path: Path) -> None:
    # The console blocks show what `genesis run` printed: run it again, compare all but the
    # ids, paths and numbers.  After a deliberate change of the output, rewrite the blocks
    # with `python -m tests.test_docs`.
    shown = block.code.split("\n", 1)[1]
    assert masked(run_genesis(argv, tmp_path)) == masked(shown)


if __name__ == "__main__":
    import tempfile

    (DOCS / "api" / "index.md").write_text(render_api_index())

    for block, argv in reversed([(b, a) for b, a in ARGVS if _shows_a_failer_run(b, a)]):
        lines = block.page.read_text().split("\n")
        end = lines.index("```", block.line)
        with tempfile.TemporaryDirectory() as scratch:
            output = run_genesis(argv, Path(scratch)).rstrip("\n").split("\n")
        lines[block.line + 1 : end] = output
        block.page.write_text("\n".join(lines))
        print(f"{block.id}: genesis {shlex.join(argv)}")
