"""The observer base classes (coding_genesis.observer) as the fan-out reads them:
overridden hooks found once, an object of the 0.1.0 protocol adapted once, and the
event types importable without the run machinery."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping
from typing import Any

from coding_genesis._pipeline.fanout import RunObservers, adapt_observer, adapt_run_observer
from coding_genesis._util.redact import Redactor
from coding_genesis.events import Event, EventKind, TextEvent, UsageEvent
from coding_genesis.observer import Observer, RunInfo, RunObserver
from tests.support import QuietObserver


def _info() -> RunInfo:
    return RunInfo(
        run_id="r1",
        agent="a",
        backend="failer",
        prompt="p",
        cwd="/tmp",
        timeout=1.0,
        model=None,
        resume=None,
        started=0.0,
        redactor=Redactor(),
    )


class _Once(Observer):
    def __init__(self, handle: Any) -> None:
        self.handle = handle

    def start(self, run: RunInfo) -> Any:
        return self.handle


def test_the_event_types_import_without_the_run_machinery() -> None:
    code = (
        "import sys, json, coding_genesis.events, coding_genesis.run_events\n"
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert not set(json.loads(out.stdout)) & {"anyio", "pydantic", "psutil", "orjson"}


def test_a_subclass_takes_part_only_in_the_hooks_it_overrides() -> None:
    class EnvOnly(RunObserver):
        def attempt_env(self) -> Mapping[str, str]:
            return {"X": "1"}

    observers = RunObservers([_Once(EnvOnly())], _info())
    assert observers.decoded is None  # no decoded tap on the hot path
    assert observers.route_handlers(TextEvent) == []
    assert observers.message_usage == "off"
    assert observers.attempt_env() == {"X": "1"}
    assert observers.kinds is None


def test_a_subclass_with_decoded_handlers_is_called_through_them() -> None:
    heard: list[str] = []

    class Usage(RunObserver):
        event_kinds = frozenset({EventKind.RUN_STARTED})
        message_usage = "folded"

        def __init__(self) -> None:
            self.decoded_handlers = {"usage": lambda e: heard.append(e._type)}

    observers = RunObservers([_Once(Usage())], _info())
    assert observers.message_usage == "folded"
    assert observers.kinds == frozenset({EventKind.RUN_STARTED})
    assert observers.decoded is not None
    observers.decoded(TextEvent("hi"))
    observers.decoded(UsageEvent({"input_tokens": 1}))
    assert heard == ["usage"]
    assert len(observers.route_handlers(UsageEvent)) == 1
    assert observers.route_handlers(TextEvent) == []


def test_an_object_of_the_old_protocol_is_adapted_once() -> None:
    heard: list[Event] = []

    class Old(QuietObserver):
        replays = True

        def decoded(self, event: Event) -> None:
            heard.append(event)

    old = Old()
    adapted = adapt_observer(old)
    assert isinstance(adapted, Observer) and adapted.replays
    assert repr(adapted) == repr(old)
    handle = adapt_run_observer(old)
    assert isinstance(handle, RunObserver)
    assert adapt_run_observer(handle) is handle  # a RunObserver is not wrapped again

    observers = RunObservers([adapted], _info())
    assert observers.message_usage == "live"
    assert observers.decoded is not None
    observers.decoded(TextEvent("hi"))
    assert [e.to_dict()["text"] for e in heard] == ["hi"]
    assert observers.attempt_env() == {}  # it has none: not called

    bare = RunObservers([QuietObserver()], _info())  # type: ignore[list-item]  # not even an Observer
    assert bare and bare.decoded is None and bare.message_usage == "off"
    assert not adapt_observer(QuietObserver()).replays
