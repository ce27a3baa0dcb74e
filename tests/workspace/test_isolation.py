"""Isolated runs (tracker issue 16): a git worktree per run, changes from git,
the keep/branch lifecycle, verify, trials, the sweep of a dead runner's
worktree.  Real ``git``, real processes (the fake CLI), no mock."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from coding_genesis import CodingGenesisAgent, retry
from coding_genesis._supervision.ledger import Ledger
from coding_genesis._workspace.instructions import instruction_warnings
from coding_genesis._workspace.isolation import BRANCH_PREFIX
from coding_genesis._workspace.sweep import sweep_sync
from coding_genesis.batch import RunSpec, run_many, run_many_sync
from coding_genesis.errors import ConfigError
from tests.support import FakeCLI, present

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")

REPO_ROOT = str(Path(__file__).parents[2])


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=T", "-c", "user.email=t@example.invalid", *args],
        cwd=repo,
        check=True,
        capture_output=True,
        text=True,
    ).stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "repo"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    (path / "a.txt").write_text("a\n")
    (path / "b.txt").write_text("b\n")
    (path / "old.txt").write_text("a file that is renamed\nwith enough lines\nto be seen\n")
    (path / "sub").mkdir()
    (path / "sub" / "keep.txt").write_text("k\n")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "init")
    return path


def checkout_state(repo: Path) -> tuple[str, str, str, str]:
    """HEAD, the index's bytes, the working tree status, the work files' contents."""
    index = hashlib.sha256((repo / ".git" / "index").read_bytes()).hexdigest()
    status = git(repo, "status", "--porcelain=v1", "--untracked-files=all")
    files = sorted(
        (str(p.relative_to(repo)), p.read_bytes())
        for p in repo.rglob("*")
        if p.is_file() and ".git" not in p.relative_to(repo).parts
    )
    content = hashlib.sha256(repr(files).encode()).hexdigest()
    return git(repo, "rev-parse", "HEAD").strip(), index, status, content


def our_branches(repo: Path) -> list[str]:
    out = git(repo, "branch", "--list", f"{BRANCH_PREFIX}*", "--format=%(refname:short)")
    return out.split()


def worktree_paths(repo: Path) -> list[str]:
    out = git(repo, "worktree", "list", "--porcelain")
    return [line.split(" ", 1)[1] for line in out.splitlines() if line.startswith("worktree ")]


def agent(fake: FakeCLI, repo: Path, tmp_path: Path, **settings: Any) -> CodingGenesisAgent:
    settings.setdefault("isolation", "worktree")
    settings.setdefault("worktrees_dir", str(tmp_path / "worktrees"))
    settings.setdefault("ledger", str(tmp_path / "ledger"))
    settings.setdefault("cwd", str(repo))
    return fake.agent(**settings)


WRITES = [
    {"write": "new.txt", "content": "new\n"},
    {"write": "a.txt", "content": "changed\n"},
    {"delete": "b.txt"},
    {"git_commit": "agent: edit a, add new, drop b"},
    {"delete": "old.txt"},
    {"write": "renamed.txt", "content": "a file that is renamed\nwith enough lines\nto be seen\n"},
    {"write": "notes/untracked.md", "content": "left uncommitted\n"},
    {"answer": "done"},
]


@pytest.mark.slow
def test_run_happens_in_a_worktree_and_changes_come_from_git(repo: Path, tmp_path: Path) -> None:
    before = checkout_state(repo)
    fake = FakeCLI(tmp_path)
    fake.script(WRITES)
    result = agent(fake, repo, tmp_path, include_diff=True).run_sync("edit things")
    assert result["status"] == 0, result["message"]
    assert checkout_state(repo) == before, "the caller's checkout was touched"
    assert not (repo / "new.txt").exists()

    tree = present(result["worktree"])
    assert tree["branch"].startswith(BRANCH_PREFIX) and tree["removed"] and not tree["kept"]
    assert tree["base_commit"] == before[0]
    assert not os.path.exists(tree["path"])
    assert worktree_paths(repo) == [str(repo)]
    # The CLI ran in the worktree.
    assert fake.records()[0]["cwd"] == tree["cwd"] == tree["path"]

    changes = present(result["changes"])
    kinds = {f["path"]: f["kind"] for f in changes["files"]}
    assert kinds == {
        "a.txt": "modified",
        "b.txt": "deleted",
        "new.txt": "added",
        "renamed.txt": "renamed",
        "notes/untracked.md": "added",
    }
    [renamed] = [f for f in changes["files"] if f["kind"] == "renamed"]
    assert renamed["old_path"] == "old.txt"
    assert sorted(result["files_modified"]) == sorted(kinds)
    assert [c["subject"] for c in changes["commits"]] == ["agent: edit a, add new, drop b"]
    assert changes["uncommitted"] is True
    assert "5 files changed" in changes["diff_stat"]
    assert "+changed" in changes["diff"] and "notes/untracked.md" in changes["diff"]

    # The branch holds everything: the agent's commit, then ours with its leftovers.
    branch = tree["branch"]
    assert git(repo, "show", f"{branch}:notes/untracked.md") == "left uncommitted\n"
    assert git(repo, "show", f"{branch}:a.txt") == "changed\n"
    log = git(repo, "log", "--format=%an|%s", f"{before[0]}..{branch}").splitlines()
    assert log[0].startswith("coding-genesis|coding-genesis: uncommitted work of run ")
    assert result["run_id"] in log[0]
    assert log[1] == "Fake Agent|agent: edit a, add new, drop b"
    assert tree["head"] == git(repo, "rev-parse", branch).strip()
    assert os.listdir(tmp_path / "ledger") == []


@pytest.mark.slow
@pytest.mark.parametrize(
    ("keep", "fail", "kept"),
    [
        ("never", False, False),
        ("never", True, False),
        ("on_failure", False, False),
        ("on_failure", True, True),
        ("always", False, True),
    ],
)
def test_keep_decides_the_worktree_the_branch_stays(
    repo: Path, tmp_path: Path, keep: str, fail: bool, kept: bool
) -> None:
    fake = FakeCLI(tmp_path)
    ending = [{"init": True}, {"exit": 3}] if fail else [{"answer": "ok"}]
    fake.script([{"write": "x.txt", "content": "x\n"}, *ending])
    result = agent(fake, repo, tmp_path, keep=keep).run_sync("go")
    assert (result["status"] != 0) is fail
    tree = present(result["worktree"])
    assert tree["kept"] is kept and tree["removed"] is not kept
    assert os.path.isdir(tree["path"]) is kept
    assert our_branches(repo) == [tree["branch"]]
    if kept:
        assert (Path(tree["path"]) / "x.txt").read_text() == "x\n"
        assert worktree_paths(repo) == [str(repo), tree["path"]]
    else:
        assert git(repo, "show", f"{tree['branch']}:x.txt") == "x\n"
        assert worktree_paths(repo) == [str(repo)]


@pytest.mark.slow
def test_keep_branch_false_deletes_the_branch(repo: Path, tmp_path: Path) -> None:
    fake = FakeCLI(tmp_path)
    fake.script([{"answer": "ok"}])
    result = agent(fake, repo, tmp_path, keep_branch=False).run_sync("go")
    assert result["status"] == 0 and our_branches(repo) == []


@pytest.mark.slow
def test_dirty_checkout_is_not_carried_by_default_and_is_on_request(
    repo: Path, tmp_path: Path
) -> None:
    (repo / "a.txt").write_text("dirty\n")
    (repo / "scratch.txt").write_text("untracked\n")
    git(repo, "add", "scratch.txt")
    (repo / "b.txt").unlink()
    before = checkout_state(repo)
    fake = FakeCLI(tmp_path)
    fake.script([{"answer": "ok"}])
    plain = agent(fake, repo, tmp_path, keep="always").run_sync("go")
    assert present(plain["worktree"])["carried_uncommitted"] is False
    assert present(plain["worktree"])["uncommitted_in_checkout"] == 3
    assert any("3 uncommitted path(s)" in w for w in plain["warnings"])
    path = Path(present(plain["worktree"])["path"])
    assert (path / "a.txt").read_text() == "a\n" and not (path / "scratch.txt").exists()

    carried = agent(fake, repo, tmp_path, keep="always", carry_uncommitted=True).run_sync("go")
    path = Path(present(carried["worktree"])["path"])
    assert present(carried["worktree"])["carried_uncommitted"] is True
    assert (path / "a.txt").read_text() == "dirty\n"
    assert (path / "scratch.txt").read_text() == "untracked\n"
    assert not (path / "b.txt").exists()
    kinds = {f["path"]: f["kind"] for f in present(carried["changes"])["files"]}
    assert kinds == {"a.txt": "modified", "scratch.txt": "added", "b.txt": "deleted"}
    assert checkout_state(repo) == before, "carrying changes touched the caller's index"


@pytest.mark.slow
def test_subdirectory_of_the_checkout_is_kept(repo: Path, tmp_path: Path) -> None:
    fake = FakeCLI(tmp_path)
    fake.script([{"write": "made.txt", "content": "m\n"}, {"answer": "ok"}])
    result = agent(fake, repo, tmp_path, cwd=str(repo / "sub")).run_sync("go")
    assert present(result["worktree"])["cwd"] == os.path.join(
        present(result["worktree"])["path"], "sub"
    )
    assert result["files_modified"] == ["sub/made.txt"]


def test_not_a_repository_and_missing_git_are_clear_failures(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    fake = FakeCLI(tmp_path)
    result = agent(fake, plain, tmp_path).run_sync("go")
    assert result["status"] == 64 and result["error"] == "invalid_request"
    assert "needs a git repository" in result["message"]
    assert fake.records() == [], "the CLI must not start"

    empty = tmp_path / "nobin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    result = agent(fake, plain, tmp_path).run_sync("go")
    assert result["status"] == 127 and result["error"] == "not_found"
    assert "needs git" in result["message"]
    assert present(result["failure"])["category"] == "missing"


def test_bad_settings_are_config_errors() -> None:
    bad: dict[str, Any]
    for bad in (
        {"isolation": "container"},
        {"keep": "sometimes"},
        {"verify": "pytest -q"},
        {"verify": []},
        {"isolation_base": "--upload-pack=evil"},
        {"carry_uncommitted": "yes"},
        {"verify_timeout": 0},
    ):
        with pytest.raises(ConfigError):
            CodingGenesisAgent("claude", **bad)


def test_bad_base_is_refused(repo: Path, tmp_path: Path) -> None:
    fake = FakeCLI(tmp_path)
    result = agent(fake, repo, tmp_path, isolation_base="no-such-branch").run_sync("go")
    assert result["status"] == 64 and "is not a commit" in result["message"]
    assert our_branches(repo) == [] and fake.records() == []


# -- verify ---------------------------------------------------------------------------

#: Passes once the file the agent wrote holds a continuation prompt.
VERIFY = [
    sys.executable,
    "-c",
    "import sys; text = open('out.txt').read(); "
    "ok = 'Continue from previous attempt' in text; "
    "print('checked out.txt' if ok else 'NEEDS-FIX: out.txt is not done'); sys.exit(0 if ok else 1)",
]


@pytest.mark.slow
@pytest.mark.parametrize("isolated", [True, False])
def test_verify_fails_then_passes_after_the_resumed_retry(
    repo: Path, tmp_path: Path, isolated: bool
) -> None:
    fake = FakeCLI(tmp_path)
    fake.script([{"write": "out.txt"}, {"answer": "wrote it"}])
    settings: dict[str, Any] = {"verify": VERIFY, "retry": "default"}
    if not isolated:
        settings["isolation"] = None
    with retry.testing():
        result = agent(fake, repo, tmp_path, **settings).run_sync("write out.txt")
    assert result["status"] == 0, result["message"]
    assert result["attempts"] == 2
    [first] = result["retry_history"]
    assert first["category"] == "verify_failed" and first["error"] == "verify_failed"
    assert first["action"] == "retry" and first["resume_session"]
    assert "NEEDS-FIX" in first["verify"]["output_tail"]
    assert present(result["verify"])["status"] == "passed"
    history = present(result["verify"])["history"]
    assert [h["status"] for h in history] == ["failed", "passed"]
    assert "NEEDS-FIX" in history[0]["output_tail"]
    assert "checked out.txt" in history[1]["output_tail"]
    # The retry resumed the session with the verify output as its prompt.
    argvs = [r["argv"] for r in fake.records() if "argv" in r]
    assert len(argvs) == 2
    assert f"--resume={first['resume_session']}" in argvs[1]
    if isolated:
        prompt = git(repo, "show", f"{present(result['worktree'])['branch']}:out.txt")
    else:
        prompt = (repo / "out.txt").read_text()
    assert "NEEDS-FIX: out.txt is not done" in prompt and "verify_failed" in prompt


@pytest.mark.slow
def test_verify_failure_without_retry_is_its_own_category(repo: Path, tmp_path: Path) -> None:
    fake = FakeCLI(tmp_path)
    fake.script([{"write": "out.txt", "content": "nope"}, {"answer": "wrote it"}])
    result = agent(fake, repo, tmp_path, verify=VERIFY).run_sync("go")
    assert result["status"] == 1 and result["error"] == "verify_failed"
    assert present(result["failure"])["category"] == "verify_failed"
    assert present(result["failure"])["retryable"] is True
    assert result["message"].startswith("verify `")
    assert "The agent's answer was:\nwrote it" in result["message"]
    assert present(result["verify"])["exit_code"] == 1


@pytest.mark.slow
def test_verify_timeout_stops_its_tree(repo: Path, tmp_path: Path) -> None:
    fake = FakeCLI(tmp_path)
    fake.script([{"answer": "ok"}])
    sleeper = [sys.executable, "-c", "import time; time.sleep(600)"]
    result = agent(fake, repo, tmp_path, verify=sleeper, verify_timeout=0.5).run_sync("go")
    assert result["error"] == "verify_failed" and present(result["verify"])["status"] == "timeout"
    assert "timed out after 0.5s" in result["message"]


# -- many runs on one repository ------------------------------------------------------


@pytest.mark.slow
def test_twenty_isolated_runs_with_timeouts_and_cancellations(repo: Path, tmp_path: Path) -> None:
    before = checkout_state(repo)
    finishing, hanging, cancelled = FakeCLI(tmp_path), FakeCLI(tmp_path), FakeCLI(tmp_path)
    finishing.script([{"write": "out.txt"}, {"answer": "ok"}])
    hanging.script([{"write": "out.txt"}, {"hang": True}])
    cancelled.script([{"write": "out.txt"}, {"init": True}, {"hang": True}])
    common: dict[str, Any] = {
        "backend": "claude",
        "isolation": "worktree",
        "cwd": str(repo),
        "worktrees_dir": str(tmp_path / "worktrees"),
        "ledger": str(tmp_path / "ledger"),
        "grace": 0.5,
    }

    def spec(fake: FakeCLI, prompt: str, timeout: float) -> RunSpec:
        return RunSpec(prompt=prompt, cli_path=fake.path, env=fake.env(), timeout=timeout, **common)

    batch = [
        spec(hanging, f"run {i} times out", 5.0) if i % 3 == 0 else spec(finishing, f"run {i}", 30)
        for i in range(14)
    ]
    results = run_many_sync(batch, concurrency=8)
    assert [r["status"] for r in results] == [124 if i % 3 == 0 else 0 for i in range(14)]

    async def cancel_when_started() -> None:
        sessions: list[dict[str, Any]] = []
        all_written = anyio.Event()

        def on_event(event: dict[str, Any]) -> None:
            if event["type"] == "session":  # the fake CLI wrote its file, then said hello
                sessions.append(event)
                if len(sessions) == 6:
                    all_written.set()

        async with anyio.create_task_group() as tg:
            specs = [spec(cancelled, f"run {14 + i} is cancelled", 60) for i in range(6)]
            tg.start_soon(lambda: run_many(specs, concurrency=8, on_event=on_event))
            await all_written.wait()
            tg.cancel_scope.cancel()

    anyio.run(cancel_when_started)

    branches = our_branches(repo)
    assert len(branches) == 20
    contents = sorted(git(repo, "show", f"{b}:out.txt") for b in branches)
    expected = sorted(
        [f"run {i} times out" if i % 3 == 0 else f"run {i}" for i in range(14)]
        + [f"run {14 + i} is cancelled" for i in range(6)]
    )
    assert contents == expected
    assert worktree_paths(repo) == [str(repo)]
    assert checkout_state(repo) == before
    assert os.listdir(tmp_path / "ledger") == []
    assert os.listdir(next((tmp_path / "worktrees").iterdir())) == [".lock"]


@pytest.mark.slow
def test_trials_give_one_line_per_attempt_then_a_summary(repo: Path, tmp_path: Path) -> None:
    good, bad = FakeCLI(tmp_path), FakeCLI(tmp_path)
    good.script([{"write": "out.txt"}, {"answer": "ok"}])
    bad.script([{"write": "out.txt", "content": "no"}, {"answer": "ok"}])
    common: dict[str, Any] = {
        "backend": "claude",
        "isolation": "worktree",
        "cwd": str(repo),
        "worktrees_dir": str(tmp_path / "worktrees"),
        "ledger": False,
        "verify": VERIFY,
    }
    seen: list[dict[str, Any]] = []
    results = run_many_sync(
        [
            RunSpec(
                prompt="Continue from previous attempt",
                cli_path=good.path,
                env=good.env(),
                **common,
            ),
            RunSpec(prompt="x", cli_path=bad.path, env=bad.env(), **common),
        ],
        concurrency=4,
        repeat=3,
        on_result=seen.append,
    )
    assert [(r["index"], r.get("repeat"), r.get("type")) for r in results] == [
        (0, 1, None), (0, 2, None), (0, 3, None), (0, 3, "summary"),
        (1, 1, None), (1, 2, None), (1, 3, None), (1, 3, "summary"),
    ]  # fmt: skip
    first, second = results[3], results[7]
    assert first["runs"] == 3 and first["passed"] == 3 and first["pass_rate"] == 1.0
    assert first["verify"] == {"ran": 3, "passed": 3, "failed": 0, "pass_rate": 1.0}
    assert second["pass_rate"] == 0.0 and second["by_status"] == {"1": 3}
    assert second["verify"]["failed"] == 3 and second["verify"]["pass_rate"] == 0.0
    assert set(first["duration_s"]) == {"min", "max", "mean", "median", "total"}
    assert len(our_branches(repo)) == 6
    summaries = [r for r in seen if r.get("type") == "summary"]
    assert len(seen) == 8 and len(summaries) == 2
    for summary in summaries:  # each after its own three trials
        position = seen.index(summary)
        assert len([r for r in seen[:position] if r["index"] == summary["index"]]) == 3


@pytest.mark.slow
def test_run_many_cli_repeat_orders_trials_then_summary(tmp_path: Path) -> None:
    lines = "\n".join(json.dumps({"prompt": p, "backend": "failer"}) for p in ("hello", "/fail"))
    out = subprocess.run(
        [sys.executable, "-m", "coding_genesis._cli.main", "run-many", "-", "--repeat", "2", "-q"],
        input=lines,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "GENESIS_TRANSCRIPTS": "off", "GENESIS_RUN_LOG": "off"},
    )
    rows = [json.loads(line) for line in out.stdout.splitlines()]
    assert [(r["index"], r["repeat"], r.get("type")) for r in rows] == [
        (0, 1, None), (0, 2, None), (0, 2, "summary"),
        (1, 1, None), (1, 2, None), (1, 2, "summary"),
    ]  # fmt: skip
    assert rows[2]["pass_rate"] == 1.0 and rows[5]["pass_rate"] == 0.0
    assert out.returncode == 1


def test_run_many_file_may_isolate_but_not_verify_unless_trusted(tmp_path: Path) -> None:
    from coding_genesis.capabilities import untrusted_problem

    assert untrusted_problem({"prompt": "p", "backend": "claude", "isolation": "worktree"}) is None
    problem = untrusted_problem({"prompt": "p", "backend": "claude", "verify": ["sh"]})
    assert problem is not None and "verify" in problem


# -- a runner's death, leftovers, hygiene -------------------------------------------------

HOST = textwrap.dedent(
    """
    import json, sys
    from coding_genesis import CodingGenesisAgent
    settings = json.loads(sys.argv[1])
    CodingGenesisAgent("claude", **settings).run_sync("write then hang")
    """
)


@pytest.mark.slow
def test_sweep_removes_the_worktree_of_a_sigkilled_runner_and_keeps_its_branch(
    repo: Path, tmp_path: Path
) -> None:
    fake = FakeCLI(tmp_path)
    fake.script([{"write": "out.txt", "content": "work in progress\n"}, {"hang": True}])
    ledger = tmp_path / "ledger"
    settings = {
        "cli_path": fake.path,
        "env": fake.env(),
        "timeout": 60,
        "cwd": str(repo),
        "isolation": "worktree",
        "worktrees_dir": str(tmp_path / "worktrees"),
        "ledger": str(ledger),
    }
    host = subprocess.Popen(
        [sys.executable, "-c", HOST, json.dumps(settings)],
        cwd=REPO_ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while not list((tmp_path / "worktrees").glob("*/*/out.txt")):
            assert time.monotonic() < deadline and host.poll() is None, "the run never wrote"
            time.sleep(0.05)
        host.send_signal(signal.SIGKILL)
        host.wait()
    finally:
        host.kill()
        host.wait()
    [path] = [p for p in worktree_paths(repo) if p != str(repo)]
    assert (Path(path) / "out.txt").exists()
    [branch] = our_branches(repo)

    swept = sweep_sync(Ledger(ledger))
    assert [s.worktree for s in swept if s.worktree] == [path]
    assert worktree_paths(repo) == [str(repo)] and not os.path.exists(path)
    assert our_branches(repo) == [branch]
    assert git(repo, "show", f"{branch}:out.txt") == "work in progress\n"
    assert "its runner died" in git(repo, "log", "-1", "--format=%s", branch)
    assert os.listdir(ledger) == []


@pytest.mark.slow
def test_genesis_worktrees_lists_and_prunes(repo: Path, tmp_path: Path) -> None:
    fake = FakeCLI(tmp_path)
    fake.script([{"write": "kept.txt", "content": "k\n"}, {"answer": "ok"}])
    result = agent(fake, repo, tmp_path, keep="always").run_sync("go")
    path = present(result["worktree"])["path"]
    env = {**os.environ, "GENESIS_LEDGER": str(tmp_path / "ledger")}
    base = [sys.executable, "-m", "coding_genesis._cli.main", "worktrees", "-C", str(repo)]
    base += ["--worktrees-dir", str(tmp_path / "worktrees")]

    def genesis(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*base, *args], capture_output=True, text=True, env=env, cwd=REPO_ROOT, check=True
        )

    listing = genesis("--json")
    [entry] = [json.loads(line) for line in listing.stdout.splitlines()]
    assert entry["path"] == path and entry["branch"] == present(result["worktree"])["branch"]
    assert path in genesis("prune", "--dry-run").stdout and os.path.isdir(path)
    genesis("prune")
    assert not os.path.exists(path) and worktree_paths(repo) == [str(repo)]
    assert git(repo, "show", f"{entry['branch']}:kept.txt") == "k\n"
    assert genesis("--json").stdout == ""


def test_instruction_files_above_the_worktree_are_reported(tmp_path: Path) -> None:
    checkout = tmp_path / "home" / "project"
    elsewhere = tmp_path / "cache" / "wt" / "run"
    for directory in (checkout, elsewhere):
        directory.mkdir(parents=True)
        (directory / ".git").mkdir()
    (tmp_path / "home" / "CLAUDE.md").write_text("caller's\n")
    (tmp_path / "cache" / "AGENTS.md").write_text("stray\n")
    warnings = instruction_warnings(str(elsewhere), str(checkout))
    assert len(warnings) == 2
    assert str(tmp_path / "cache" / "AGENTS.md") in warnings[0]
    assert "above the worktree" in warnings[0]
    assert str(tmp_path / "home" / "CLAUDE.md") in warnings[1]
    assert "not above the worktree" in warnings[1]
    assert instruction_warnings(str(checkout), str(checkout)) == []


@pytest.mark.slow
def test_worktree_directories_are_private(repo: Path, tmp_path: Path) -> None:
    fake = FakeCLI(tmp_path)
    fake.script([{"answer": "ok"}])
    result = agent(fake, repo, tmp_path, keep="always").run_sync("go")
    path = Path(present(result["worktree"])["path"])
    for directory in (tmp_path / "worktrees", path.parent, path):
        assert directory.stat().st_mode & 0o777 == 0o700, directory


LOCK_HOLDER = textwrap.dedent(
    """
    import fcntl, os, sys
    fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    print("held", flush=True)
    sys.stdin.read()
    """
)


@pytest.mark.slow
def test_repo_lock_excludes_other_processes_and_threads(tmp_path: Path) -> None:
    import threading

    from coding_genesis._workspace.gitops import RepoLock

    path = tmp_path / ".lock"
    taken: list[str] = []

    async def take(name: str, hold: threading.Event | None = None) -> None:
        async with RepoLock(path).held():
            taken.append(name)
            if hold is not None:
                await anyio.to_thread.run_sync(hold.wait)

    async def try_take(name: str) -> None:
        with anyio.move_on_after(0.5):  # a held lock is never taken, however long we try
            await take(name)

    holder = subprocess.Popen(
        [sys.executable, "-c", LOCK_HOLDER, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == b"held\n"
        anyio.run(try_take, "while another process holds it")
        assert taken == []
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait()
        assert holder.stdout is not None
        holder.stdout.close()
    anyio.run(take, "after the process let go")
    assert taken == ["after the process let go"]

    release = threading.Event()
    thread = threading.Thread(target=anyio.run, args=(take, "thread", release))
    thread.start()
    while "thread" not in taken:
        time.sleep(0.01)
    anyio.run(try_take, "while another thread holds it")
    assert taken[-1] == "thread"
    release.set()
    thread.join()
    anyio.run(take, "after the thread let go")
    assert taken[-1] == "after the thread let go"


@pytest.mark.slow
def test_genesis_run_isolate_and_verify(repo: Path, tmp_path: Path) -> None:
    env = {
        **os.environ,
        "GENESIS_TRANSCRIPTS": "off",
        "GENESIS_RUN_LOG": "off",
        "GENESIS_LEDGER": str(tmp_path / "ledger"),
        "TMPDIR": str(tmp_path),  # the default worktrees directory goes under it
    }
    base = [sys.executable, "-m", "coding_genesis._cli.main", "run", "-b", "failer", "--json", "-q"]
    base += ["-C", str(repo / "sub"), "--isolate"]

    def genesis(*args: str) -> tuple[int, dict[str, Any]]:
        out = subprocess.run([*base, *args], capture_output=True, text=True, env=env, cwd=tmp_path)
        return out.returncode, json.loads(out.stdout)

    code, result = genesis("--verify", f"{sys.executable} -c 'import os; print(os.getcwd())'", "hi")
    assert code == 0 and result["verify"]["status"] == "passed"
    assert result["verify"]["output_tail"].strip() == result["worktree"]["cwd"]
    assert result["worktree"]["cwd"].endswith("/sub") and result["worktree"]["removed"]
    code, result = genesis("--keep", "on_failure", "--verify", "false", "hi")
    assert code == 1 and result["error"] == "verify_failed" and result["worktree"]["kept"]
    assert len(our_branches(repo)) == 2
    code, result = genesis("--base", "nope", "hi")
    assert code == 64 and "is not a commit" in result["message"]
    subprocess.run(
        [sys.executable, "-m", "coding_genesis._cli.main", "worktrees", "prune", "-C", str(repo)],
        check=True,
        capture_output=True,
        env=env,
    )
    assert worktree_paths(repo) == [str(repo)]
    # The default directory: under the temp directory, private, ours, a random name.
    [ours] = tmp_path.glob(f"coding-genesis-worktrees-{os.getuid()}*")
    assert ours.name.startswith(f"coding-genesis-worktrees-{os.getuid()}-")
    assert ours.stat().st_mode & 0o777 == 0o700 and ours.stat().st_uid == os.getuid()
    assert len(os.listdir(ours)) == 1


@pytest.mark.slow
def test_the_callers_index_is_never_rewritten(repo: Path, tmp_path: Path) -> None:
    """Not even refreshed: a stale stat in it makes a plain ``git status`` rewrite it."""
    os.utime(repo / "a.txt", (1, 1))
    (repo / "b.txt").write_text("dirty\n")
    index = (repo / ".git" / "index").read_bytes()
    fake = FakeCLI(tmp_path)
    fake.script([{"answer": "ok"}])
    result = agent(fake, repo, tmp_path, carry_uncommitted=True).run_sync("go")
    assert result["status"] == 0 and present(result["worktree"])["carried_uncommitted"]
    assert (repo / ".git" / "index").read_bytes() == index


@pytest.mark.slow
def test_genesis_worktrees_prune_branches(repo: Path, tmp_path: Path) -> None:
    """Issue 28: every isolated run leaves a branch; ``prune --branches`` removes those whose
    commits another branch reaches (nothing is lost), the rest only with ``--force``;
    ``--dry-run`` only lists them."""
    fake = FakeCLI(tmp_path)
    fake.script([{"write": "new.txt", "content": "n\n"}, {"answer": "ok"}])
    with_work = present(agent(fake, repo, tmp_path).run_sync("go")["worktree"])["branch"]
    fake.script([{"answer": "nothing written"}])
    empty = present(agent(fake, repo, tmp_path).run_sync("go")["worktree"])["branch"]
    assert sorted(our_branches(repo)) == sorted([with_work, empty])
    env = {**os.environ, "GENESIS_LEDGER": str(tmp_path / "ledger")}
    base = [sys.executable, "-m", "coding_genesis._cli.main", "worktrees", "prune", "-C", str(repo)]
    base += ["--worktrees-dir", str(tmp_path / "worktrees"), "--branches"]

    def genesis(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*base, *args], capture_output=True, text=True, env=env, cwd=REPO_ROOT, check=True
        )

    listed = genesis("--dry-run", "--json")
    entries = {e["branch"]: e for e in map(json.loads, listed.stdout.splitlines())}
    assert entries[empty]["unique"] == 0 and entries[with_work]["unique"] == 1
    assert not any(e["removed"] for e in entries.values())
    assert sorted(our_branches(repo)) == sorted([with_work, empty])  # a dry run removes nothing

    said = genesis()
    assert our_branches(repo) == [with_work]  # its commit is on no other branch: kept
    assert f"branch {with_work}  kept: 1 commit(s) no other branch has" in said.stdout
    git(repo, "branch", "merged-work", with_work)  # now another branch reaches its commit
    genesis()
    assert our_branches(repo) == []
    assert git(repo, "show", "merged-work:new.txt") == "n\n"  # nothing was lost

    fake.script([{"write": "lost.txt", "content": "l\n"}, {"answer": "ok"}])
    alone = present(agent(fake, repo, tmp_path).run_sync("go")["worktree"])["branch"]
    forced = genesis("--force")
    assert our_branches(repo) == [] and f"branch {alone}  removed (1 commit(s)" in forced.stdout


@pytest.mark.slow
def test_genesis_run_names_the_branch_on_stderr_also_in_pipes(repo: Path, tmp_path: Path) -> None:
    """Issue 28: an isolated run's branch (and its warnings) on stderr, not only on a terminal
    or after a failure: a script needs the branch to find the work."""
    env = {
        **os.environ,
        "GENESIS_LEDGER": str(tmp_path / "ledger"),
        "GENESIS_TRANSCRIPTS": "off",
        "GENESIS_RUN_LOG": "off",
        "GENESIS_FAILER_STATE_DIR": str(tmp_path / "failer"),
        "TMPDIR": str(tmp_path),
    }
    argv = ["run", "-b", "failer", "--isolate", "-C", str(repo), "hello"]
    done = subprocess.run(
        [sys.executable, "-m", "coding_genesis._cli.main", *argv],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO_ROOT,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "No failure mode specified" in done.stdout
    [branch] = our_branches(repo)
    assert f"branch: {branch} - " in done.stderr, done.stderr
    assert "genesis: ok" not in done.stderr  # the rest of the summary stays for terminals
