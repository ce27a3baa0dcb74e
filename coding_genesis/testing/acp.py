"""The conformance kit's ACP section: does an Agent Client Protocol backend speak the protocol?

For a plug-in author whose backend drives an ACP agent (an
:class:`~coding_genesis.backends.AcpBackend`, one from a backends file, or a
backend of their own whose :meth:`~coding_genesis.backend.Backend.control` speaks
ACP)::

    from coding_genesis import load_backends_file
    from coding_genesis.testing import check_acp_backend

    def test_my_acp_backend_conforms():
        check_acp_backend(load_backends_file("backends.toml")["myagent"])

The backend's live sessions are run against the kit's fake ACP agent
(``fake_acp.py`` beside this module, standard library only, started with the
Python running the kit in place of the backend's command, with the backend's
arguments and environment): its permission options have ids that say nothing of
their kind, and it offers the modes the backend maps its permission levels to.
Plain functions that raise :class:`AssertionError` saying what is wrong; no
pytest magic.  What is checked:

* **the opening** (:func:`check_acp_opening`): ``initialize`` asks for protocol
  version 1, ``session/new`` gives the session's working directory, a prompt's
  text comes back as the turn's answer (its text events, its session id, its
  usage); an agent answering another version is refused, saying so.
* **translation** (:func:`check_acp_translation`): ``session/update`` becomes
  typed events (a thought and a plan, a tool call and its result).
* **permissions** (:func:`check_acp_permissions`): a permission request goes to
  the approver and is answered by the option's ``kind``: ``allow_once`` for an
  allow, ``reject_once`` for a refusal, and the once options for "always" (the
  session keeps "always").
* **cancel** (:func:`check_acp_cancel`): ``interrupt()`` in the middle of a long
  tool sends ``session/cancel``, the turn ends interrupted, the tool's process is
  gone and the next turn works; a permission request open at the interrupt is
  answered with the ``cancelled`` outcome.
* **bad input** (:func:`check_acp_bad_input`): an unknown update and an unknown
  notification are ignored and counted (a warning), lines that are not JSON are
  skipped and counted, and the session goes on.
* **death** (:func:`check_acp_death`): the agent dying mid-turn is a clear
  failure (``incomplete``, its exit code said), the session closed and no
  process left.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from coding_genesis.approval import ApprovalRequest, Decision
from coding_genesis.backend import Backend, as_backend, is_factory
from coding_genesis.events import (
    Event,
    PlanEvent,
    TextEvent,
    ThoughtEvent,
    ToolCallEvent,
    ToolResultEvent,
)

__all__ = [
    "FAKE_ACP_AGENT",
    "check_acp_backend",
    "check_acp_bad_input",
    "check_acp_cancel",
    "check_acp_death",
    "check_acp_opening",
    "check_acp_permissions",
    "check_acp_translation",
]

#: The kit's fake ACP agent, a script (``python fake_acp.py``; its docstring
#: lists what each prompt makes it do).
FAKE_ACP_AGENT = Path(__file__).with_name("fake_acp.py")

#: The option kinds the fake agent offers, and the answer each decision must pick.
_ONCE = {True: "allow_once", False: "reject_once"}


@dataclass
class _Rig:
    """One check's fake agent: the backend run against it, in a private directory."""

    backend: Backend
    modes: Sequence[str]
    timeout: float
    workdir: str = field(default_factory=lambda: tempfile.mkdtemp(prefix="genesis-acp-kit-"))
    events: list[Event] = field(default_factory=list)

    @property
    def record(self) -> Path:
        return Path(self.workdir) / "fake-acp-record.jsonl"

    def agent(self, env: dict[str, str] | None = None, **settings: Any) -> Any:
        # lazy: importing the kit (a plug-in's tests) loads no agent or pipeline
        from coding_genesis.agent import CodingGenesisAgent

        fake_env = {
            "FAKE_CLI_FLAVOUR": "kit",
            "FAKE_CLI_RECORD": str(self.record),
            "FAKE_ACP_MODES": ",".join(self.modes),
            **(env or {}),
        }
        settings.setdefault("timeout", self.timeout)
        agent = CodingGenesisAgent(
            self.backend,
            cli_path=[sys.executable, str(FAKE_ACP_AGENT)],
            cwd=self.workdir,
            env=fake_env,
            grace=0.5,
            ledger=False,
            circuit_breaker=None,
            **settings,
        )
        agent.subscribe(self.events.append)
        return agent

    def recorded(self, what: str) -> list[dict[str, Any]]:
        """What the fake agent recorded: messages received (``received``) or
        the option chosen (``chosen``)."""
        import json

        if not self.record.exists():
            return []
        entries = [json.loads(line) for line in self.record.read_text().splitlines()]
        return [e for e in entries if what in e]

    def received(self, method: str) -> list[dict[str, Any]]:
        return [e for e in self.recorded("received") if e["received"] == method]


@contextmanager
def _rig(backend: Backend, modes: Sequence[str] | None, timeout: float) -> Iterator[_Rig]:
    rig = _Rig(backend, _modes(backend) if modes is None else tuple(modes), timeout)
    try:
        yield rig
    finally:
        shutil.rmtree(rig.workdir, ignore_errors=True)


def _modes(backend: Backend) -> tuple[str, ...]:
    """The mode ids the backend may ask for (the fake agent offers them)."""
    agent = getattr(backend.control(), "agent", None)  # an AcpControl's facts
    ids = [*getattr(agent, "modes", {}).values(), getattr(agent, "ask_mode", None)]
    return tuple(m for m in ids if isinstance(m, str))


def _fail(check: str, what: str) -> AssertionError:
    return AssertionError(f"ACP {check}: {what}")


def _said(result: Any) -> str:
    return f"status {result.status} ({result.error}), message {result.message[:300]!r}"


def _run(check: str, main: Callable[[], Any]) -> Any:
    """The check's sessions; what they raise (a session closed under a turn, a
    refusal) is the check's failure, saying so."""
    try:
        return anyio.run(main)
    except Exception as exc:  # the kit reports whatever the session raised
        raise _fail(check, f"the session raised {type(exc).__name__}: {exc}") from exc


# -- the checks ------------------------------------------------------------------


def check_acp_opening(
    backend: Backend, *, modes: Sequence[str] | None = None, timeout: float = 20.0
) -> None:
    """``initialize`` (version 1), ``session/new`` (the working directory), a
    prompt's text; an agent answering version 2 is refused, saying so."""
    with _rig(backend, modes, timeout) as rig:

        async def main() -> Any:
            async with rig.agent().session() as s:
                return await s.send_result("hello from the kit"), s.session_id

        result, session_id = _run("opening", main)
        init = rig.received("initialize")
        if not init:
            raise _fail("opening", f"the agent never got initialize ({_said(result)})")
        version = (init[0].get("params") or {}).get("protocolVersion")
        if version != 1:
            raise _fail("opening", f"initialize asked for protocolVersion {version!r}, not 1")
        opened = rig.received("session/new")
        if not opened:
            raise _fail("opening", f"no session/new after initialize ({_said(result)})")
        cwd = (opened[0].get("params") or {}).get("cwd")
        if not cwd or os.path.realpath(cwd) != os.path.realpath(rig.workdir):
            raise _fail("opening", f"session/new gave cwd {cwd!r}, not {rig.workdir!r}")
        expected = "fake kit got: hello from the kit"
        if result.status != 0 or result.message != expected:
            raise _fail("opening", f"expected the answer {expected!r}, got {_said(result)}")
        texts = "".join(e.text for e in rig.events if isinstance(e, TextEvent))
        if texts != expected:
            raise _fail("opening", f"the text events say {texts!r}, not {expected!r}")
        prompted = rig.received("session/prompt")
        used = (prompted[0].get("params") or {}).get("sessionId") if prompted else None
        if not session_id or result.session_id != session_id or used != session_id:
            raise _fail(
                "opening",
                f"session id {result.session_id!r} (the session's {session_id!r}), "
                f"session/prompt sent for {used!r}: all must be session/new's",
            )
        if not result.usage or result.usage.get("inputTokens") != 10:
            raise _fail("opening", f"the answer's usage was lost: {result.usage!r}")

    with _rig(backend, modes, timeout) as rig:

        async def other() -> Any:
            async with rig.agent(env={"FAKE_ACP_VERSION": "2"}).session() as s:
                return await s.send_result("hello")

        refused = _run("version", other)
        if refused.status == 0 or "version 2" not in refused.message:
            raise _fail(
                "version",
                "an agent answering protocol version 2 was not refused with a message "
                f"naming it: {_said(refused)}",
            )


def check_acp_translation(
    backend: Backend, *, modes: Sequence[str] | None = None, timeout: float = 20.0
) -> None:
    """A thought, a plan, a tool call and its result become typed events."""
    with _rig(backend, modes, timeout) as rig:

        async def main() -> Any:
            async with rig.agent(approver=lambda request: True).session() as s:
                thought = await s.send_result("THINK weighing it")
                tool = await s.send_result('ASK execute {"command": "make"}')
                return thought, tool

        thought, tool = _run("translation", main)
        if thought.status != 0 or thought.message != "fake kit got: THINK weighing it":
            raise _fail("translation", f"a turn with a thought: {_said(thought)}")
        thoughts = [e.text for e in rig.events if isinstance(e, ThoughtEvent)]
        if thoughts != ["weighing it"]:
            raise _fail("translation", f"agent_thought_chunk became thoughts {thoughts!r}")
        plans = [e.entries for e in rig.events if isinstance(e, PlanEvent)]
        if len(plans) != 1 or len(plans[0]) != 2:
            raise _fail("translation", f"a plan of two entries became {plans!r}")
        calls = [e for e in rig.events if isinstance(e, ToolCallEvent)]
        results = [e for e in rig.events if isinstance(e, ToolResultEvent)]
        if len(calls) != 1 or calls[0].id != "call_1" or not calls[0].name:
            raise _fail("translation", f"tool_call call_1 became {[e.to_dict() for e in calls]}")
        if [(e.id, e.is_error) for e in results] != [("call_1", False)]:
            raise _fail(
                "translation",
                f"a completed tool_call_update became {[e.to_dict() for e in results]}",
            )
        if tool.status != 0 or tool.tool_calls != 1:
            raise _fail("translation", f"a turn with one tool call: {_said(tool)}")


def check_acp_permissions(
    backend: Backend, *, modes: Sequence[str] | None = None, timeout: float = 20.0
) -> None:
    """Each permission request reaches the approver and is answered with the
    option of the right kind (allow, refuse, and both "always")."""
    decisions = [
        Decision.allow(),
        Decision.deny("not this one"),
        Decision.allow(always=True),
        Decision.deny("never", always=True),
    ]
    asked: list[ApprovalRequest] = []

    def approver(request: ApprovalRequest) -> Decision:
        asked.append(request)
        return decisions[len(asked) - 1]

    prompts = [f'ASK execute {{"command": "step {n}"}}' for n in range(len(decisions))]
    with _rig(backend, modes, timeout) as rig:

        async def main() -> list[Any]:
            async with rig.agent(approver=approver).session() as s:
                return [await s.send_result(p) for p in prompts]

        results = _run("permissions", main)
        if [r.command for r in asked] != [f"step {n}" for n in range(len(decisions))]:
            raise _fail(
                "permissions",
                f"the approver was asked about {[r.command for r in asked]}, "
                "expected one request per call with its command",
            )
        chosen = rig.recorded("chosen")
        for n, decision in enumerate(decisions):
            want = _ONCE[decision.allowed]
            got = chosen[n] if n < len(chosen) else None
            if got is None or got.get("kind") != want:
                shown = "no option" if got is None else f"{got['chosen']!r} ({got['kind']})"
                raise _fail(
                    "permissions",
                    f"the approver {'allowed' if decision.allowed else 'refused'}"
                    f"{' always' if decision.always else ''}; the agent was answered "
                    f"{shown}, expected the option of kind {want} (choose by kind, never "
                    "by id or position; the session keeps 'always')",
                )
        said = [r.message for r in results]
        if said != [
            f"{'allowed' if d.allowed else 'denied'} {_ONCE[d.allowed]}" for d in decisions
        ]:
            raise _fail("permissions", f"the turns said {said}")
        if any(len(r.approvals) != 1 for r in results):
            raise _fail("permissions", "each turn's result must record its one approval")


def _sleepers(key: str) -> list[int]:
    import psutil

    # lazy: importing the kit (a plug-in's tests) loads no agent or pipeline
    from coding_genesis._supervision.childenv import RUN_MARKER_ENV

    found = []
    for proc in psutil.process_iter():
        try:
            if proc.environ().get(RUN_MARKER_ENV) == key and "time.sleep" in " ".join(
                proc.cmdline()
            ):
                found.append(proc.pid)
        except (psutil.Error, OSError):
            continue
    return found


def check_acp_cancel(
    backend: Backend, *, modes: Sequence[str] | None = None, timeout: float = 20.0
) -> None:
    """``interrupt()`` during a long tool: ``session/cancel`` sent, the turn
    interrupted, the tool's process gone, the next turn answered; during a
    permission request: the request answered ``cancelled``."""
    with _rig(backend, modes, timeout) as rig:

        async def main() -> tuple[Any, Any, list[int], bool]:
            agent = rig.agent(approver=lambda request: True)
            running = anyio.Event()  # the tool's call is told after its process started
            agent.subscribe(lambda e: running.set() if isinstance(e, ToolCallEvent) else None)
            async with agent.session() as s:
                results: list[Any] = []
                async with anyio.create_task_group() as tg:

                    async def turn() -> None:
                        results.append(await s.send_result("SLEEP 600"))

                    tg.start_soon(turn)
                    with anyio.move_on_after(timeout):
                        await running.wait()
                    if not _sleepers(s.key):
                        tg.cancel_scope.cancel()
                        return None, None, [], False
                    await s.interrupt()
                left = _sleepers(s.key)
                if s.closed:
                    return results[0], None, left, True
                return results[0], await s.send_result("after the cancel"), left, False

        interrupted, after, left, closed = _run("cancel", main)
        if interrupted is None:
            raise _fail("cancel", "the fake agent's long tool never started")
        if not rig.received("session/cancel"):
            raise _fail("cancel", f"interrupt() sent no session/cancel ({_said(interrupted)})")
        if interrupted.status != 130 or interrupted.error != "interrupted":
            raise _fail("cancel", f"the interrupted turn: {_said(interrupted)}")
        if left:
            raise _fail("cancel", f"the cancelled tool's process is still running: {left}")
        if closed or after is None:
            raise _fail("cancel", "the session was closed by the interrupt; it must live on")
        if after.status != 0 or not after.message.endswith("after the cancel"):
            raise _fail("cancel", f"the turn after the cancel: {_said(after)}")
    _check_cancel_asking(backend, modes, timeout)


def _check_cancel_asking(backend: Backend, modes: Sequence[str] | None, timeout: float) -> None:
    """``interrupt()`` while the agent waits for a permission: the question is
    answered with the ``cancelled`` outcome (the protocol requires it; the agent
    waits for it before it ends the turn)."""
    with _rig(backend, modes, timeout) as rig:
        asked = anyio.Event()

        async def never(request: ApprovalRequest) -> bool:
            asked.set()
            await anyio.sleep(3600)
            return True

        async def main() -> tuple[Any, Any]:
            async with rig.agent(approver=never, approval_timeout=3 * timeout).session() as s:
                results: list[Any] = []
                async with anyio.create_task_group() as tg:

                    async def turn() -> None:
                        results.append(await s.send_result('ASK execute {"command": "x"}'))

                    tg.start_soon(turn)
                    with anyio.move_on_after(timeout):
                        await asked.wait()
                    await s.interrupt()
                after = None if s.closed else await s.send_result("after the cancel")
                return results[0], after

        interrupted, after = _run("cancel", main)
        answers = [
            e.get("result")
            for e in rig.recorded("received")
            if not isinstance(e["received"], str) and e.get("result") is not None
        ]
        if answers[:1] != [{"outcome": {"outcome": "cancelled"}}]:
            raise _fail(
                "cancel",
                "the permission request open at the interrupt was answered "
                f"{answers[:1] or 'never'}, not with the cancelled outcome "
                f"({_said(interrupted)})",
            )
        if interrupted.status != 130 or after is None or after.status != 0:
            raise _fail(
                "cancel",
                f"an interrupt while the approver decides: {_said(interrupted)}; "
                f"the next turn: {'none, the session closed' if after is None else _said(after)}",
            )


def check_acp_bad_input(
    backend: Backend, *, modes: Sequence[str] | None = None, timeout: float = 20.0
) -> None:
    """An unknown update and notification ignored and counted; lines that are not
    JSON skipped and counted; the session goes on."""
    with _rig(backend, modes, timeout) as rig:

        async def main() -> list[Any]:
            async with rig.agent().session() as s:
                return [await s.send_result(p) for p in ("UNKNOWN", "GARBAGE", "and after")]

        unknown, garbage, after = _run("bad input", main)
        if unknown.status != 0 or unknown.message != "after unknown":
            raise _fail("bad input", f"an unknown update was fatal: {_said(unknown)}")
        if not any("2 message(s) of a type" in w for w in unknown.warnings):
            raise _fail(
                "bad input",
                "an unknown session/update and an unknown notification were not counted "
                f"(warnings: {unknown.warnings})",
            )
        if garbage.status != 0 or garbage.message != "after garbage":
            raise _fail("bad input", f"lines that are not JSON were fatal: {_said(garbage)}")
        if garbage.skipped_lines != 2:
            raise _fail(
                "bad input",
                f"2 lines that are not JSON, {garbage.skipped_lines} counted as skipped",
            )
        if after.status != 0 or after.message != "fake kit got: and after":
            raise _fail("bad input", f"the turn after bad input: {_said(after)}")


def check_acp_death(
    backend: Backend, *, modes: Sequence[str] | None = None, timeout: float = 20.0
) -> None:
    """The agent dying mid-turn: ``incomplete`` with its exit code, the session
    closed, nothing left running."""
    with _rig(backend, modes, timeout) as rig:

        async def main() -> tuple[Any, bool, str]:
            async with rig.agent().session() as s:
                return await s.send_result("DIE"), s.closed, s.key

        died, closed, key = _run("death", main)
        if died.status == 0 or died.error != "incomplete" or "code 3" not in died.message:
            raise _fail(
                "death",
                f"an agent that exited with code 3 mid-turn must fail the turn as "
                f"incomplete, saying so; got {_said(died)}",
            )
        if not closed:
            raise _fail("death", "the session stayed open after its agent died")
        # lazy: the base kit's helper (it imports psutil)
        from coding_genesis.testing import _wait_gone

        left = _wait_gone(key)
        if left:
            raise _fail("death", f"processes of the session left behind: {left}")


#: Every check, in order, by the name ``check_acp_backend`` reports.
CHECKS: tuple[tuple[str, Callable[..., None]], ...] = (
    ("opening", check_acp_opening),
    ("translation", check_acp_translation),
    ("permissions", check_acp_permissions),
    ("cancel", check_acp_cancel),
    ("bad input", check_acp_bad_input),
    ("death", check_acp_death),
)


def check_acp_backend(
    backend: Backend | Callable[[], Backend],
    *,
    modes: Sequence[str] | None = None,
    timeout: float = 20.0,
) -> list[str]:
    """Every ACP check; one AssertionError listing every problem found.
    ``modes``: the mode ids the fake agent offers (default: those of the
    backend's :class:`~coding_genesis.backends.AcpBackend` facts); ``timeout``
    bounds each turn.  Returns what was checked."""
    instance = as_backend(backend() if is_factory(backend) else backend)  # type: ignore[operator]
    if instance.control() is None:
        raise AssertionError(f"backend {instance.name!r} has no live-session protocol (control())")
    problems: list[str] = []
    checked: list[str] = []
    for name, check in CHECKS:
        try:
            check(instance, modes=modes, timeout=timeout)
            checked.append(f"acp {name}")
        except AssertionError as exc:
            problems.append(str(exc))
    if problems:
        raise AssertionError(
            f"backend {instance.name!r} does not conform to ACP ({len(problems)} problem(s)):\n- "
            + "\n- ".join(problems)
        )
    return checked
