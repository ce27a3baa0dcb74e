"""Isolated runs with the REAL ``claude`` and ``codex`` against the fake model
server's file-writing scenario (tracker issue 16): the file appears in the
run's worktree, not in the caller's checkout; the result lists it from git; the
worktree is removed or kept per ``keep``, the branch always stays."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from coding_genesis import CodingGenesisAgent, Keep
from tests.real_cli.test_claude_codex import (  # noqa: F401 - fixtures
    RUN_TIMEOUT,
    Rig,
    assert_nothing_left,
    explain,
    hermetic_env,
    rig,
    run,
)
from tests.workspace.test_isolation import checkout_state, git, our_branches, worktree_paths

pytestmark = pytest.mark.timeout(90)


@pytest.mark.parametrize("keep", ["never", "always"])
def test_real_cli_writes_in_its_worktree(rig: Rig, tmp_path: Path, keep: Keep) -> None:  # noqa: F811
    repo = rig.work
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    (repo / "README.md").write_text("a project\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "init")
    before = checkout_state(repo)
    agent = CodingGenesisAgent(
        rig.backend,
        cli_path=rig.cli,
        cwd=repo,
        timeout=RUN_TIMEOUT,
        grace=1.0,
        env=rig.env(),
        options=rig.options(True),
        isolation="worktree",
        keep=keep,
        worktrees_dir=str(tmp_path / "worktrees"),
        ledger=str(tmp_path / "ledger"),
    )
    result, events = run(agent, "SCENARIO:write sub/out.txt hello file")
    assert result["status"] == 0, explain(result, events)
    tree = result["worktree"]
    assert events.of("run_started")[0]["cwd"] == tree["cwd"] == tree["path"]
    # Not in the caller's checkout, which is untouched.
    assert not (repo / "sub").exists()
    assert checkout_state(repo) == before
    # Listed from git (not guessed from tool events).
    assert result["changes"]["files"] == [{"path": "sub/out.txt", "kind": "added"}], explain(result)
    assert result["files_modified"] == ["sub/out.txt"]
    # The branch stays; the worktree goes unless kept (its leftovers committed to the branch).
    assert our_branches(repo) == [tree["branch"]]
    if keep == "always":
        assert (
            tree["kept"] and (Path(tree["path"]) / "sub" / "out.txt").read_text() == "hello file\n"
        )
        assert worktree_paths(repo) == [str(repo), tree["path"]]
    else:
        assert tree["removed"] and not os.path.exists(tree["path"])
        assert git(repo, "show", f"{tree['branch']}:sub/out.txt") == "hello file\n"
        assert worktree_paths(repo) == [str(repo)]
    assert os.listdir(tmp_path / "ledger") == []
    assert_nothing_left(events.run_id())
