"""The ready-made approvers on real files: paths resolved as the kernel would
(symlinks, ``..``, files not yet written), commands split as a shell would, best effort."""

from __future__ import annotations

import os
import re
from collections.abc import Awaitable
from pathlib import Path

import anyio
import anyio.lowlevel
import pytest

from coding_genesis.approval import (
    ApprovalRequest,
    Approver,
    Decision,
    ToolKind,
    Verdict,
    allow_tools,
    chain,
    deny_commands,
    writes_under,
)
from coding_genesis.errors import ConfigError


def write(cwd: Path | str, *paths: str) -> ApprovalRequest:
    return ApprovalRequest("Write", {}, kind="write", paths=paths, cwd=str(cwd))


def command(text: str) -> ApprovalRequest:
    return ApprovalRequest("Bash", {"command": text}, kind="command", command=text, cwd="/")


def settled(verdict: Verdict | Awaitable[Verdict]) -> Decision | None:
    """A sync approver's answer, as a decision (None: not settled)."""
    assert not isinstance(verdict, Awaitable)
    assert verdict is None or isinstance(verdict, Decision), verdict
    return verdict


def allowed(approver: Approver, request: ApprovalRequest) -> bool:
    decision = settled(approver(request))
    assert decision is not None, "not settled"
    return decision.allowed


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """``root/`` (with ``src/``, a link to ``/outside``, a dangling link out) and ``outside/``."""
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "src").mkdir(parents=True)
    outside.mkdir()
    (root / "src" / "a.py").write_text("x = 1\n")
    (outside / "secret.txt").write_text("s\n")
    (root / "out").symlink_to(outside)
    (root / "dangling").symlink_to(outside / "not-yet.txt")
    (root / "inner").symlink_to(root / "src")
    return root


# -- writes_under ------------------------------------------------------------------


def test_a_write_inside_the_root_is_allowed(tree: Path) -> None:
    under = writes_under(tree)
    decision = settled(under(write("/", str(tree / "src" / "a.py"))))
    assert decision is not None and decision.allowed and "writes_under" in decision.reason
    assert allowed(under, write("/", str(tree)))  # the root itself
    assert allowed(under, write("/", str(tree / "inner" / "a.py")))  # a link that stays inside


def test_relative_paths_resolve_against_the_requests_cwd(tree: Path) -> None:
    under = writes_under(tree)
    assert allowed(under, write(tree / "src", "a.py", "./b.py", "../c.txt"))
    assert not allowed(under, write(tree.parent, "a.py"))  # the same name, another cwd
    decision = settled(under(write("", "a.py")))  # no cwd: cannot be resolved
    assert decision is not None and not decision.allowed


def test_files_not_yet_written_resolve_through_their_existing_parent(tree: Path) -> None:
    under = writes_under(tree)
    assert allowed(under, write(tree, "src/new.py", "src/pkg/deeper/new.py"))
    assert not allowed(under, write(tree, "out/new.txt"))  # a new file behind a link out
    assert not allowed(under, write(tree, "out/new/dir/x.txt"))
    assert not (tree.parent / "outside" / "new.txt").exists()


def test_a_symlink_inside_the_root_pointing_outside_is_denied(tree: Path) -> None:
    under = writes_under(tree)
    for path, target in (("out/secret.txt", "secret.txt"), ("dangling", "not-yet.txt")):
        decision = settled(under(write(tree, path)))
        assert decision is not None and not decision.allowed
        # the model is told the offending path and where it leads
        where = os.path.realpath(tree.parent / "outside" / target)
        assert f"{path!r} ({where})" in decision.message
        assert decision.reason == f"writes_under: {path!r} is outside the allowed roots"


def test_dot_dot_escaping_the_root_is_denied(tree: Path) -> None:
    under = writes_under(tree)
    assert not allowed(under, write(tree, "../outside/secret.txt"))
    assert not allowed(under, write(tree / "src", "../../outside/x"))
    assert not allowed(under, write("/", f"{tree}/src/../../outside/x"))
    # ".." after a link goes up from the link's target, as the kernel does:
    # out/.. is the parent of outside/, not root/
    assert allowed(under, write(tree, "out/../root/src/a.py"))
    assert not allowed(under, write(tree, "out/../x"))
    # a sibling whose name starts with the root's is not under it
    (tree.parent / "root-evil").mkdir()
    assert not allowed(under, write("/", str(tree.parent / "root-evil" / "x")))


def test_every_path_must_be_under_a_root(tree: Path) -> None:
    under = writes_under(tree / "src", tree.parent / "outside")
    assert allowed(under, write(tree, "src/a.py", "out/secret.txt"))
    decision = settled(under(write(tree, "src/a.py", "x.txt")))
    assert decision is not None and not decision.allowed and "'x.txt'" in decision.message


def test_a_symlinked_root_is_resolved_too(tree: Path, tmp_path: Path) -> None:
    link = tmp_path / "link-to-root"
    link.symlink_to(tree)
    under = writes_under(link)
    assert allowed(under, write(tree, "src/a.py"))  # the real path, under the link's target
    assert allowed(under, write("/", str(link / "src" / "a.py")))
    assert not allowed(under, write(tree, "out/secret.txt"))
    relative = writes_under("src")  # a relative root: against the request's cwd
    assert allowed(relative, write(tree, "src/a.py"))
    assert not allowed(relative, write(tree / "src", "a.py"))  # src/src does not hold it


def test_a_write_with_no_paths_is_denied_and_other_kinds_are_not_settled(tree: Path) -> None:
    under = writes_under(tree)
    decision = settled(under(write(tree)))
    assert decision is not None and not decision.allowed and "no path" in decision.message
    assert settled(under(command("rm -rf /"))) is None
    read = ApprovalRequest("Read", {}, kind="read", paths=("/etc/passwd",), cwd=str(tree))
    assert settled(under(read)) is None
    with pytest.raises(ConfigError):
        writes_under()
    with pytest.raises(ConfigError):
        writes_under(b"/tmp")  # type: ignore[arg-type]  # a misuse, checked at run time


# -- deny_commands -----------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "rm -rf build",
        "ls && rm -rf build",
        "ls; rm -rf build",
        "false || rm -rf build",
        "cat x | rm -rf build",
        "ls\nrm -rf build",
        "echo $(rm -rf build)",
        "echo `rm -rf build`",
        "diff <(rm -rf build) x",
        "(cd src && rm -rf build)",
        "FOO=1 rm -rf build",
        "sudo rm -rf build",
        "bash -c 'ls; rm -rf build'",
        # codex app-server 0.169 asks about its shell commands in this form (measured)
        "/bin/bash -lc 'rm -rf build && ls'",
        """/bin/bash -lc 'echo '"'"'a; b'"'"' && rm -rf build'""",
        "if true; then rm -rf build; fi",
    ],
)
def test_a_denied_command_is_found_inside_compound_commands(text: str) -> None:
    deny = deny_commands("rm -rf *")
    decision = settled(deny(command(text)))
    assert decision is not None and not decision.allowed, text
    assert (
        "'rm -rf *'" in decision.message and decision.reason == "deny_commands: matches 'rm -rf *'"
    )


def test_other_commands_and_other_kinds_are_not_settled() -> None:
    deny = deny_commands("rm -rf *", re.compile(r"\bgit\s+push\b.*--force"))
    for text in ("ls -la", "echo 'rm' -rf", "git push origin main", "grm -rf x"):
        assert settled(deny(command(text))) is None, text
    decision = settled(deny(command("cd repo && git push --force origin main")))
    assert decision is not None and not decision.allowed
    assert "--force" in decision.message  # the regex is named
    write_request = ApprovalRequest("Write", {"content": "rm -rf /"}, kind="write", paths=("x",))
    assert settled(deny(write_request)) is None
    assert settled(deny(ApprovalRequest("Bash", {}, kind="command"))) is None  # no command


def test_globs_are_case_sensitive_and_patterns_are_checked() -> None:
    assert settled(deny_commands("RM *")(command("rm x"))) is None
    with pytest.raises(ConfigError):
        deny_commands()
    with pytest.raises(ConfigError):
        deny_commands("")
    with pytest.raises(ConfigError):
        deny_commands(re.compile(rb"rm"))  # type: ignore[arg-type]  # bytes: a misuse


# -- allow_tools and chain ---------------------------------------------------------


@pytest.mark.parametrize(
    ("tool", "kind", "allowed_"),
    [
        ("Read", "read", True),  # by name
        ("Grep", "read", True),  # by kind
        ("Bash", "command", True),
        ("Edit", "write", False),
        ("commandExecution", "command", True),
        ("READ", "other", False),  # names are case-sensitive
        ("bash", "other", False),
    ],
)
def test_allow_tools_by_name_and_by_kind(tool: str, kind: ToolKind, allowed_: bool) -> None:
    approver = allow_tools("Read", "read", "Bash", "commandExecution")
    decision = settled(approver(ApprovalRequest(tool, {}, kind=kind)))
    if allowed_:
        assert decision is not None and decision.allowed and not decision.always
    else:
        assert decision is None
    with pytest.raises(ConfigError):
        allow_tools()


def test_chain_asks_in_order_and_the_first_verdict_wins(tree: Path) -> None:
    asked: list[str] = []

    def spy(name: str, verdict: Verdict) -> Approver:
        def approver(request: ApprovalRequest) -> Verdict:
            asked.append(name)
            return verdict

        return approver

    approver = chain(spy("a", None), deny_commands("rm *"), spy("b", True), spy("c", False))
    assert approver(command("ls")) is True
    assert asked == ["a", "b"]
    asked.clear()
    decision = settled(approver(command("rm x")))
    assert decision is not None and not decision.allowed and asked == ["a"]
    assert chain()(command("ls")) is None
    policy = chain(writes_under(tree), allow_tools("read"))
    assert settled(policy(command("ls"))) is None  # nobody settles a command
    with pytest.raises(ConfigError):
        chain("not callable")  # type: ignore[arg-type]  # a misuse, checked at run time


@pytest.mark.anyio
async def test_a_chain_with_an_async_approver_is_awaited_in_order() -> None:
    asked: list[str] = []

    async def later(request: ApprovalRequest) -> Verdict:
        await anyio.lowlevel.checkpoint()
        asked.append("async")
        return None

    def last(request: ApprovalRequest) -> Verdict:
        asked.append("sync")
        return Decision.deny("no", end_turn=True)

    pending = chain(allow_tools("Read"), later, last)(command("ls"))
    assert isinstance(pending, Awaitable) and asked == []
    decision = await pending
    assert isinstance(decision, Decision) and decision.end_turn and asked == ["async", "sync"]
    assert chain(allow_tools("Bash"), later)(command("ls")) is not None  # settled before it
