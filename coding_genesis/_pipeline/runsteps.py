"""Steps around a run's attempts: what isolation and verification plug in as,
without a branch in the agent.

A :class:`RunStep` is told when the run starts (it may change the request:
the worktree step moves ``cwd`` into the run's worktree), sees each attempt's
result before its failure analysis (the verify step turns a success into a
``verify_failed`` failure), and ends with the run, cancelled or not (its
cleanup runs to its end even then), adding fields to the response.
:class:`RunSteps` runs them in order (and ends them in reverse).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import anyio

from coding_genesis._supervision.shield import shielded
from coding_genesis.status import ErrorCode, Status

if TYPE_CHECKING:
    from coding_genesis._pipeline.request import Request
    from coding_genesis._supervision.ledger import Ledger
    from coding_genesis._workspace.isolation import Workspace
    from coding_genesis.config import AgentConfig
    from coding_genesis.result import RunResult

__all__ = ["RunStep", "RunSteps", "StepRefused", "VerifyStep", "WorktreeStep"]

log = logging.getLogger("coding_genesis._pipeline.runsteps")


class StepRefused(Exception):
    """The run cannot start (answered with ``status``/``error``, nothing started)."""

    def __init__(self, status: int, error: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.error = error
        self.message = message


class RunStep(Protocol):
    async def enter(self, request: Request) -> Request:
        """The run starts: the request its attempts will run (raise StepRefused)."""

    async def after_attempt(self, result: RunResult, request: Request) -> RunResult:
        """One attempt's result, before its failure analysis."""

    async def exit(self, result: RunResult | None) -> dict[str, Any]:
        """The run ended (None: cancelled or broken); fields for the response
        (``warnings`` are appended)."""


Refuse = Callable[[int, ErrorCode, str], "RunResult"]


class RunSteps:
    """The steps of one run."""

    __slots__ = ("_entered", "_steps", "fields")

    def __init__(self, steps: Sequence[RunStep] = ()) -> None:
        self._steps = tuple(steps)
        self._entered: list[RunStep] = []
        #: The fields the steps added when the run ended (also when cancelled).
        self.fields: dict[str, Any] = {}

    @classmethod
    def for_run(cls, config: AgentConfig, run_id: str, ledger: Ledger | None) -> RunSteps:
        steps: list[RunStep] = []
        if config.isolation == "worktree":
            steps.append(WorktreeStep(config, run_id, ledger))
        if config.verify:
            steps.append(VerifyStep(config, run_id))
        return cls(steps)

    def __bool__(self) -> bool:
        return bool(self._steps)

    async def run(
        self,
        request: Request,
        pipeline: Callable[[Request], Awaitable[RunResult]],
        refuse: Refuse,
    ) -> RunResult:
        if not self._steps:
            return await pipeline(request)
        try:
            for step in self._steps:
                try:
                    request = await step.enter(request)
                except StepRefused as exc:
                    result = refuse(exc.status, exc.error, exc.message)
                    break
                self._entered.append(step)
            else:
                result = await pipeline(request)
        except BaseException:
            await shielded(lambda: self._exit(None))
            raise
        await shielded(lambda: self._exit(result))
        update = dict(self.fields)
        warnings = update.pop("warnings", None)
        if warnings:
            update["warnings"] = [*result.warnings, *warnings]
        return result.model_copy(update=update)

    async def after_attempt(self, result: RunResult, request: Request) -> RunResult:
        for step in self._entered:
            result = await step.after_attempt(result, request)
        return result

    async def _exit(self, result: RunResult | None) -> None:
        for step in reversed(self._entered):
            try:
                extra = await step.exit(result)
            except anyio.get_cancelled_exc_class():
                raise
            except Exception as exc:
                log.exception("run step %r failed at the end of the run", step)
                extra = {"warnings": [f"{type(step).__name__} failed at the end: {exc}"]}
            warnings = extra.pop("warnings", None)
            if warnings:
                self.fields.setdefault("warnings", []).extend(warnings)
            self.fields.update(extra)
        self._entered.clear()


# -- isolation: one git worktree per run ----------------------------------------------


class WorktreeStep:
    """Runs the attempts in a fresh worktree; reports the changes from git;
    commits leftovers and removes the worktree per ``keep``."""

    def __init__(self, config: AgentConfig, run_id: str, ledger: Ledger | None) -> None:
        self._config = config
        self._run_id = run_id
        self._ledger = ledger
        self._ws: Workspace | None = None

    def __repr__(self) -> str:
        return f"WorktreeStep({self._run_id})"

    @property
    def _ledger_key(self) -> str:
        return f"{self._run_id}.worktree"

    async def enter(self, request: Request) -> Request:
        from dataclasses import replace

        from coding_genesis._workspace.isolation import WorktreeRefused, open_worktree

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
                raise StepRefused(Status.NOT_FOUND, ErrorCode.NOT_FOUND, str(exc)) from None
            raise StepRefused(Status.USAGE, ErrorCode.INVALID_REQUEST, str(exc)) from None
        self._ws = ws
        ledger = self._ledger
        if ledger is not None:
            try:
                ledger.record(self._ledger_key, marker=self._run_id, worktree=ws.record())
            except OSError as exc:
                ws.warnings.append(f"run ledger: worktree not recorded: {exc}")
        return replace(request, cwd=ws.cwd)

    async def after_attempt(self, result: RunResult, request: Request) -> RunResult:
        """A worktree whose ``.git`` the attempt replaced fails the run
        (``workspace_tampered``), before the failure analysis."""
        from coding_genesis._workspace.isolation import WorkspaceTampered, check_intact

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
        from coding_genesis._workspace.gitops import GitError
        from coding_genesis._workspace.isolation import WorkspaceTampered, changes, close_worktree

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


class VerifyStep:
    """Runs the caller's verify command after each successful attempt."""

    def __init__(self, config: AgentConfig, run_id: str) -> None:
        self._config = config
        self._run_id = run_id
        self._history: list[dict[str, Any]] = []

    def __repr__(self) -> str:
        return f"VerifyStep({self._run_id})"

    async def enter(self, request: Request) -> Request:
        return request

    async def after_attempt(self, result: RunResult, request: Request) -> RunResult:
        from coding_genesis._workspace.verify import run_verify, verify_failure_message

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
