"""The wrappers around a run that the workspace supplies: a fresh git worktree per
run (isolation) and the caller's verify command after each successful attempt.

The agent builds them (:func:`run_wrappers`) and hands them to the pipeline as
:class:`~coding_genesis._pipeline.wrappers.RunWrapper` objects: the pipeline
knows the protocol, never the workspace.
"""

from __future__ import annotations

from typing import Any

from coding_genesis._pipeline.wrappers import RunWrapper, RunWrappers, WrapperRefused
from coding_genesis._supervision.ledger import Ledger
from coding_genesis._workspace.gitops import GitError
from coding_genesis._workspace.isolation import (
    Workspace,
    WorkspaceTampered,
    WorktreeRefused,
    changes,
    check_intact,
    close_worktree,
    open_worktree,
)
from coding_genesis._workspace.verify import run_verify, verify_failure_message
from coding_genesis.config import AgentConfig
from coding_genesis.request import Request
from coding_genesis.result import RunResult
from coding_genesis.status import ErrorCode, Status

__all__ = ["VerifyWrapper", "WorktreeWrapper", "run_wrappers"]


def run_wrappers(config: AgentConfig, run_id: str, ledger: Ledger | None) -> RunWrappers:
    """The wrappers ``config`` asks for around run ``run_id``."""
    wrappers: list[RunWrapper] = []
    if config.isolation == "worktree":
        wrappers.append(WorktreeWrapper(config, run_id, ledger))
    if config.verify:
        wrappers.append(VerifyWrapper(config, run_id))
    return RunWrappers(wrappers)


# -- isolation: one git worktree per run ----------------------------------------------


class WorktreeWrapper:
    """Runs the attempts in a fresh worktree; reports the changes from git;
    commits leftovers and removes the worktree per ``keep``."""

    def __init__(self, config: AgentConfig, run_id: str, ledger: Ledger | None) -> None:
        self._config = config
        self._run_id = run_id
        self._ledger = ledger
        self._ws: Workspace | None = None

    def __repr__(self) -> str:
        return f"WorktreeWrapper({self._run_id})"

    @property
    def _ledger_key(self) -> str:
        return f"{self._run_id}.worktree"

    async def enter(self, request: Request) -> Request:
        config = self._config
        try:
            ws = await open_worktree(
                request.cwd,
                self._run_id,
                base=config.isolation_base,
                carry_uncommitted=config.carry_uncommitted,
                worktrees_dir=config.worktrees_dir,
                marker=self._run_id,
            )
        except WorktreeRefused as exc:
            if exc.missing_git:
                raise WrapperRefused(Status.NOT_FOUND, ErrorCode.NOT_FOUND, str(exc)) from None
            raise WrapperRefused(Status.USAGE, ErrorCode.INVALID_REQUEST, str(exc)) from None
        self._ws = ws
        ledger = self._ledger
        if ledger is not None:
            try:
                ledger.record(self._ledger_key, marker=self._run_id, worktree=ws.record())
            except OSError as exc:
                ws.warnings.append(f"run ledger: worktree not recorded: {exc}")
        return request.moved(ws.cwd)

    async def after_attempt(self, result: RunResult, request: Request) -> RunResult:
        """A worktree whose ``.git`` the attempt replaced fails the run
        (``workspace_tampered``), before the failure analysis."""
        ws = self._ws
        if ws is None:
            return result
        try:
            check_intact(ws)
        except WorkspaceTampered:
            return result.model_copy(
                update={
                    "status": int(Status.FAILED),
                    "is_error": True,
                    "error": ErrorCode.WORKSPACE_TAMPERED,
                    "message": f"the worktree's .git was replaced during the run: {ws.tampered}; "
                    f"nothing of it was run, the branch {ws.branch} was left as it was, and the "
                    f"worktree {ws.path} was kept for inspection",
                }
            )
        return result

    async def exit(self, result: RunResult | None) -> dict[str, Any]:
        ws = self._ws
        if ws is None:
            return {}
        config = self._config
        fields: dict[str, Any] = {}
        try:
            found = await changes(ws, include_diff=config.include_diff)
            fields["changes"] = found
            fields["files_modified"] = [f["path"] for f in found["files"]]
        except WorkspaceTampered:
            pass  # said in the workspace's warnings and its summary's ``tampered``
        except GitError as exc:
            ws.warnings.append(f"could not read the run's changes from git: {exc}")
        failed = result is None or result.is_error
        keep = config.keep == "always" or (config.keep == "on_failure" and failed)
        try:
            await close_worktree(ws, keep=keep, keep_branch=config.keep_branch, failed=failed)
        finally:
            if self._ledger is not None:
                self._ledger.remove(self._ledger_key)
        fields["worktree"] = ws.summary()
        if ws.warnings:
            fields["warnings"] = list(ws.warnings)
        return fields


# -- verification ---------------------------------------------------------------------


class VerifyWrapper:
    """Runs the caller's verify command after each successful attempt."""

    def __init__(self, config: AgentConfig, run_id: str) -> None:
        self._config = config
        self._run_id = run_id
        self._history: list[dict[str, Any]] = []

    def __repr__(self) -> str:
        return f"VerifyWrapper({self._run_id})"

    async def enter(self, request: Request) -> Request:
        return request

    async def after_attempt(self, result: RunResult, request: Request) -> RunResult:
        if result.is_error or self._config.verify is None:
            return result
        record = await run_verify(
            self._config.verify,
            cwd=request.cwd,
            config=self._config,
            marker=self._run_id,
            attempt=len(self._history) + 1,
        )
        self._history.append(record)
        if record["status"] == "passed":
            return result.model_copy(update={"verify": record})
        answer = result.message.strip()
        message = verify_failure_message(record)
        if answer:
            message += f"\n\nThe agent's answer was:\n{answer}"
        return result.model_copy(
            update={
                "verify": record,
                "status": int(Status.FAILED),
                "is_error": True,
                "error": ErrorCode.VERIFY_FAILED,
                "message": message,
            }
        )

    async def exit(self, result: RunResult | None) -> dict[str, Any]:
        if not self._history:
            return {}
        return {"verify": {**self._history[-1], "history": list(self._history)}}
