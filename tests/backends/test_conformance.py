"""The conformance kit (``coding_genesis.testing``) on every backend we ship, with the recordings
found by prefix in tests/fakes/recordings/, and the kit's own behavior on backends that do not
conform."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from typing import Any

import pytest

from coding_genesis.backend import Translator
from coding_genesis.backends import ClaudeBackend, FailerBackend, available_backends, get_backend
from coding_genesis.events import Event, ResultEvent, SessionEvent, TextEvent
from coding_genesis.testing import (
    Recording,
    check_backend,
    check_bad_lines,
    check_contract,
    check_failure_hint,
    check_stop_path,
    check_translation,
    find_recordings,
    pytest_params,
)
from tests.support import RECORDINGS, cli_request

pytestmark = pytest.mark.timeout(180)


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n in available_backends() if n != "failer"])
def test_every_backend_conforms_on_its_recordings(name: str) -> None:
    recordings = find_recordings(RECORDINGS, name)
    assert recordings, (
        f"built-in backend {name!r} has no recordings {name}_<case>.jsonl in {RECORDINGS}: "
        "record its CLI (text, tool, 401, 429, resume...) against the fake model server"
    )
    checked = check_backend(get_backend(name), recordings)
    assert any(item.endswith("stop path") for item in checked)
    assert checked[0] == "contract"
    assert len(checked) == 3 * len(recordings) + 2


def failer_recording(case: str, prompt: str) -> Recording:
    program = FailerBackend().default_program()
    assert program is not None
    spec = FailerBackend().build_command(cli_request(prompt=prompt, cwd="/tmp"))
    proc = subprocess.run(
        [*program, *spec.args], input=spec.stdin, capture_output=True, timeout=60, check=False
    )
    return Recording(f"failer_{case}", case, proc.stdout, proc.returncode, proc.stderr.decode())


@pytest.mark.slow
def test_the_failer_conforms_with_its_own_executable() -> None:
    recordings = [
        failer_recording("text", "hello"),
        failer_recording("429", "/rate-limit"),
        failer_recording("fail", "/fail"),
    ]
    checked = check_backend(FailerBackend(), recordings, usage=False, stop_path=False)
    assert len(checked) == 10
    program = FailerBackend().default_program()
    assert program is not None
    result = check_stop_path(FailerBackend(), program=program, prompt="/timeout 600", timeout=2.0)
    assert result["session_id"]  # the failer prints its init line before it waits


# -- the kit finds what does not conform -------------------------------------------


class Forgetful(ClaudeBackend):
    """Loses the session id and raises on a result whose usage is not a dict."""

    name = "forgetful"

    def translator(self) -> Any:
        inner = super().translator()

        class T(Translator):
            def translate(self, obj: dict[str, Any]) -> Sequence[Event]:
                if obj.get("type") == "result" and not isinstance(obj.get("usage"), dict | None):
                    raise KeyError("usage")
                events = [e for e in inner.translate(obj) if not isinstance(e, SessionEvent)]
                for event in events:
                    if isinstance(event, ResultEvent):
                        event.session_id = None
                return events

        return T()


def claude(case: str) -> Recording:
    (rec,) = [r for r in find_recordings(RECORDINGS, "claude") if r.case == case]
    return rec


def test_a_lost_session_id_is_named() -> None:
    with pytest.raises(AssertionError, match="recording 'claude_text': no session id"):
        check_translation(Forgetful(), claude("text"))


def test_a_translator_raising_on_odd_input_is_named_with_the_line() -> None:
    with pytest.raises(AssertionError, match=r"the translator raised KeyError: 'usage' on \{") as e:
        check_bad_lines(Forgetful(), claude("text"))
    assert '"type": "result"' in str(e.value)


class BlindToAuth(ClaudeBackend):
    """Drops the result line of a success; says nothing about failures."""

    name = "blind"

    def failure_hint(self, result: Any) -> str | None:
        return None

    def translator(self) -> Any:
        inner = super().translator()

        class T(Translator):
            def translate(self, obj: dict[str, Any]) -> Sequence[Event]:
                if obj.get("type") == "result":
                    return [TextEvent("done")] if not obj.get("is_error") else []
                return inner.translate(obj)

        return T()


@pytest.mark.slow
def test_a_wrong_failure_category_is_named_and_every_problem_listed() -> None:
    with pytest.raises(AssertionError) as exc:
        check_failure_hint(ClaudeBackend(), claude("401"), {"401": "rate_limit"})
    assert "failure category 'auth', expected 'rate_limit'" in str(exc.value)
    with pytest.raises(AssertionError) as exc:
        check_backend(
            BlindToAuth(),
            [claude("text"), claude("401")],
            categories={"401": "network"},
            stop_path=False,
        )
    text = str(exc.value)
    assert text.startswith("backend 'blind' does not conform")
    assert "recording 'claude_text': expected success" in text
    assert "recording 'claude_401': failure category 'auth', expected 'network'" in text


def test_no_recordings_is_an_error_not_a_pass(tmp_path: Any) -> None:
    with pytest.raises(AssertionError, match=r"no recordings claude_<case>\.jsonl"):
        check_backend(ClaudeBackend(), tmp_path)


@pytest.mark.slow
def test_the_kit_needs_no_pytest() -> None:
    code = (
        "import sys\n"
        "from coding_genesis.testing import check_backend\n"
        "from coding_genesis.backends import ClaudeBackend\n"
        f"check_backend(ClaudeBackend(), {str(RECORDINGS)!r}, stop_path=False)\n"
        "assert 'pytest' not in sys.modules, 'pytest was imported'\n"
        "print('ok')\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.stdout.strip() == "ok", proc.stderr


@pytest.mark.parametrize(("name", "recording"), pytest_params(["codex"], RECORDINGS))
def test_the_pytest_helper_gives_one_case_per_recording(name: str, recording: Recording) -> None:
    assert recording.name.startswith(f"{name}_")
    check_translation(get_backend(name), recording)


# -- the contract: a backend against the base class ----------------------------------


class MisTyped(ClaudeBackend):
    """Members of the wrong type: a list of notes, a set of variables, a string flag."""

    name = "mistyped"
    supports_resume = "yes"  # type: ignore[assignment]

    def __init__(self) -> None:
        self.notes = ["a list, not a tuple"]  # type: ignore[assignment]
        self.env_needs = {"A_KEY"}  # type: ignore[assignment]


def test_every_built_in_backend_keeps_the_contract() -> None:
    for name in available_backends():
        check_contract(get_backend(name))


def test_a_member_of_the_wrong_type_is_named() -> None:
    with pytest.raises(AssertionError, match="backend 'mistyped' breaks the contract") as exc:
        check_contract(MisTyped())
    text = str(exc.value)
    assert "backend.notes is ['a list, not a tuple'], not tuple[str, ...]" in text
    assert "backend.env_needs is {'A_KEY'}" in text
    assert "backend.supports_resume is 'yes', not <class 'bool'>" in text
    with pytest.raises(AssertionError, match="backend 'mistyped' does not conform"):
        check_backend(MisTyped(), [claude("text")], stop_path=False)


def test_a_translator_outside_the_contract_is_named() -> None:
    class Loose(ClaudeBackend):
        name = "loose"

        def translator(self) -> Any:
            return object()

    with pytest.raises(AssertionError, match=r"backend.translator\(\) is <object object"):
        check_contract(Loose())


def test_an_object_that_is_not_a_backend_is_refused() -> None:
    with pytest.raises(AssertionError, match=r"is not a coding_genesis\.backend\.Backend"):
        check_contract(object())  # type: ignore[arg-type]
