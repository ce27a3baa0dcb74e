"""Steps of isolation.feature: a real git repository, the fake CLI, real git."""

from __future__ import annotations

import sys
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.from_thread import BlockingPortal
from pytest_bdd import given, parsers, then, when

from coding_genesis import CodingGenesisAgent
from tests.support import FakeCLI
from tests.workspace.test_isolation import VERIFY, checkout_state, git, our_branches, worktree_paths


class Isolated:
    def __init__(self, tmp_path: Path, portal: BlockingPortal) -> None:
        self.tmp_path = tmp_path
        self.portal = portal
        self.repo = tmp_path / "repo"
        self.fake = FakeCLI(tmp_path)
        self.settings: dict[str, Any] = {
            "isolation": "worktree",
            "worktrees_dir": str(tmp_path / "worktrees"),
            "ledger": str(tmp_path / "ledger"),
        }
        self.before: tuple[str, str, str, str] | None = None
        self.response: dict[str, Any] | None = None
        self.agent: CodingGenesisAgent | None = None

    def build(self) -> CodingGenesisAgent:
        self.agent = self.fake.agent(cwd=str(self.repo), **self.settings)
        return self.agent


@pytest.fixture
def iso(tmp_path: Path, portal: BlockingPortal) -> Isolated:
    return Isolated(tmp_path, portal)


@given("a git repository with one commit")
def _repo(iso: Isolated) -> None:
    iso.repo.mkdir()
    git(iso.repo, "init", "-q", "-b", "main")
    (iso.repo / "README.md").write_text("a project\n")
    git(iso.repo, "add", "-A")
    git(iso.repo, "commit", "-q", "-m", "init")
    iso.before = checkout_state(iso.repo)


@given(parsers.parse('an isolated agent whose CLI writes "{name}"'))
def _writes(iso: Isolated, name: str) -> None:
    iso.fake.script([{"write": name, "content": "work\n"}, {"answer": "done"}])


@given(parsers.parse('an isolated agent with keep "{keep}" whose CLI writes "{name}" then fails'))
def _writes_then_fails(iso: Isolated, keep: str, name: str) -> None:
    iso.settings["keep"] = keep
    iso.fake.script([{"write": name, "content": "work\n"}, {"init": True}, {"exit": 3}])


@given(parsers.parse('an isolated agent whose CLI writes "{name}" then hangs'))
def _writes_then_hangs(iso: Isolated, name: str) -> None:
    iso.fake.script([{"write": name, "content": "work\n"}, {"init": True}, {"hang": True}])


@given(parsers.parse('an isolated agent whose CLI writes its prompt to "{name}"'))
def _writes_prompt(iso: Isolated, name: str) -> None:
    iso.fake.script([{"write": name}, {"answer": "done"}])


@given(parsers.parse('a verify command that passes only once "{name}" holds a continuation'))
def _verify(iso: Isolated, name: str) -> None:
    assert name == "out.txt"
    iso.settings.update(verify=VERIFY, retry="default")


@when("the agent processes the request in the repository")
def _run(iso: Isolated) -> None:
    agent = iso.build()
    iso.response = iso.portal.call(agent.run, "do the task")


@when("the request is cancelled once the CLI has written its file")
def _cancel(iso: Isolated) -> None:
    agent = iso.build()
    written = anyio.Event()

    def on_event(event: Any) -> None:
        if event.to_dict()["type"] == "session":  # after the file was written
            written.set()  # the bus calls back in the run's own event loop

    async def run_then_cancel() -> None:
        unsubscribe = agent.subscribe(on_event)
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(lambda: agent.run("do the task"))
                await written.wait()
                tg.cancel_scope.cancel()
        finally:
            unsubscribe()

    future: Future[None] = iso.portal.start_task_soon(run_then_cancel)
    future.result(timeout=60)


@then("the response status is 0")
def _ok(iso: Isolated) -> None:
    assert iso.response is not None and iso.response["status"] == 0, iso.response


@then("the response status is not 0")
def _not_ok(iso: Isolated) -> None:
    assert iso.response is not None and iso.response["status"] != 0


@then(parsers.parse('the response lists "{name}" as "{kind}"'))
def _lists(iso: Isolated, name: str, kind: str) -> None:
    assert iso.response is not None
    assert {"path": name, "kind": kind} in iso.response["changes"]["files"]


@then("the caller's checkout is unchanged")
def _unchanged(iso: Isolated) -> None:
    assert checkout_state(iso.repo) == iso.before


@then(parsers.parse('the run\'s branch holds "{name}"'))
def _branch_holds(iso: Isolated, name: str) -> None:
    [branch] = our_branches(iso.repo)
    assert git(iso.repo, "show", f"{branch}:{name}") == "work\n"


@then("no worktree of ours remains")
def _no_worktree(iso: Isolated) -> None:
    assert worktree_paths(iso.repo) == [str(iso.repo)]


@then(parsers.parse('the run\'s worktree is kept and holds "{name}"'))
def _kept(iso: Isolated, name: str) -> None:
    assert iso.response is not None
    tree = iso.response["worktree"]
    assert tree["kept"] and (Path(tree["path"]) / name).read_text() == "work\n"
    assert worktree_paths(iso.repo) == [str(iso.repo), tree["path"]]
    assert our_branches(iso.repo) == [tree["branch"]]


@then(parsers.parse('the verify history is "{first}" then "{second}"'))
def _verify_history(iso: Isolated, first: str, second: str) -> None:
    assert iso.response is not None
    assert [h["status"] for h in iso.response["verify"]["history"]] == [first, second]
    assert iso.response["retry_history"][0]["category"] == "verify_failed"
    assert sys.executable in iso.response["verify"]["argv"]
