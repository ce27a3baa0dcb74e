"""Wrappers around a run's attempts: the protocol isolation and verification plug
in as, without a branch in the agent (the concrete wrappers live in
:mod:`coding_genesis._workspace.wrappers`; the agent builds them and hands them
to the pipeline).

A :class:`RunWrapper` is told when the run starts (it may change the request:
the worktree wrapper moves ``cwd`` into the run's worktree), sees each attempt's
result before its failure analysis (the verify wrapper turns a success into a
``verify_failed`` failure), and ends with the run, cancelled or not (its
cleanup runs to its end even then), adding fields to the response.
:class:`RunWrappers` runs them in order (and ends them in reverse).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import anyio

from coding_genesis._supervision.shield import shielded
from coding_genesis.status import ErrorCode

if TYPE_CHECKING:
    from coding_genesis.request import Request
    from coding_genesis.result import RunResult

__all__ = ["Refuse", "RunWrapper", "RunWrappers", "WrapperRefused"]

log = logging.getLogger("coding_genesis._pipeline.wrappers")


class WrapperRefused(Exception):
    """The run cannot start (answered with ``status``/``error``, nothing started)."""

    def __init__(self, status: int, error: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.error = error
        self.message = message


class RunWrapper(Protocol):
    async def enter(self, request: Request) -> Request:
        """The run starts: the request its attempts will run (raise WrapperRefused)."""

    async def after_attempt(self, result: RunResult, request: Request) -> RunResult:
        """One attempt's result, before its failure analysis."""

    async def exit(self, result: RunResult | None) -> dict[str, Any]:
        """The run ended (None: cancelled or broken); fields for the response
        (``warnings`` are appended)."""


Refuse = Callable[[int, ErrorCode, str], "RunResult"]


class RunWrappers:
    """The wrappers of one run."""

    __slots__ = ("_entered", "_steps", "fields")

    def __init__(self, wrappers: Sequence[RunWrapper] = ()) -> None:
        self._steps = tuple(wrappers)
        self._entered: list[RunWrapper] = []
        #: The fields the wrappers added when the run ended (also when cancelled).
        self.fields: dict[str, Any] = {}

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
            for wrapper in self._steps:
                try:
                    request = await wrapper.enter(request)
                except WrapperRefused as exc:
                    result = refuse(exc.status, exc.error, exc.message)
                    break
                self._entered.append(wrapper)
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
        for wrapper in self._entered:
            result = await wrapper.after_attempt(result, request)
        return result

    async def _exit(self, result: RunResult | None) -> None:
        for wrapper in reversed(self._entered):
            try:
                extra = await wrapper.exit(result)
            except anyio.get_cancelled_exc_class():
                raise
            except Exception as exc:
                log.exception("run wrapper %r failed at the end of the run", wrapper)
                extra = {"warnings": [f"{type(wrapper).__name__} failed at the end: {exc}"]}
            warnings = extra.pop("warnings", None)
            if warnings:
                self.fields.setdefault("warnings", []).extend(warnings)
            self.fields.update(extra)
        self._entered.clear()
