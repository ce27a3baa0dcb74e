"""Step definitions of tests/features/serve.feature: a real ``genesis serve``
process (tests/serve/support.py) and its clients (httpx), on the two-way
failer.  Skipped without the serve extra."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from pytest_bdd import given, parsers, then, when

WAIT = 60.0


class Scene:
    """The server of a scenario and what its clients saw."""

    def __init__(self, tmp_path: Path) -> None:
        from tests.serve.support import serve

        self.tmp_path = tmp_path
        self.served = serve(tmp_path)
        self.session: str | None = None
        self.turns: list[dict[str, Any]] = []
        self.approval: dict[str, Any] | None = None
        self.pids: list[psutil.Process] = []

    def client(self) -> Any:
        return self.served.client()

    def restart(self) -> None:
        from tests.serve.support import serve

        self.pids = psutil.Process(self.served.proc.pid).children(recursive=True)
        self.served.proc.send_signal(signal.SIGKILL)
        self.served.proc.wait(10)
        self.served.stop()
        self.served = serve(self.tmp_path)


@pytest.fixture
def scene(tmp_path: Path) -> Iterator[Scene]:
    pytest.importorskip("fastapi", reason="genesis serve needs the serve extra (fastapi)")
    pytest.importorskip("httpx", reason="the server's clients need httpx (the test extra)")
    made = Scene(tmp_path)
    try:
        yield made
    finally:
        made.served.stop()


@given("a genesis serve", target_fixture="served_scene")
def _a_server(scene: Scene) -> Scene:
    return scene


def _open(scene: Scene, body: dict[str, Any]) -> None:
    with scene.client() as client:
        response = client.post("/sessions", json=body)
    assert response.status_code == 201, response.text
    scene.session = response.json()["id"]


@when("a client opens a session")
def _opens(served_scene: Scene) -> None:
    _open(served_scene, {})


@when(parsers.parse("a client opens a session with an approval timeout of {seconds:g} seconds"))
def _opens_with_timeout(served_scene: Scene, seconds: float) -> None:
    _open(served_scene, {"approval_timeout": seconds})


def _start(scene: Scene, prompt: str, **options: Any) -> int:
    with scene.client() as client:
        response = client.post(
            f"/sessions/{scene.session}/turns", json={"prompt": prompt, **options}
        )
    assert response.status_code == 202, response.text
    number: int = response.json()["turn"]
    return number


def _finish(scene: Scene, number: int) -> None:
    with scene.client() as client:
        turn = client.get(f"/sessions/{scene.session}/turns/{number}", params={"wait": WAIT}).json()
    assert turn["state"] == "finished", turn
    scene.turns.append(turn)


@when(parsers.parse('the client sends the turn "{prompt}"'))
def _sends(served_scene: Scene, prompt: str) -> None:
    _finish(served_scene, _start(served_scene, prompt))


@given("a genesis serve with --trusted-input", target_fixture="served_scene")
def _a_trusting_server(scene: Scene) -> Scene:
    from tests.serve.support import serve

    scene.served.stop()
    scene.served = serve(scene.tmp_path, "--trusted-input")
    return scene


@when(parsers.parse('a client opens a session with permissions "{level}"'))
def _opens_at(served_scene: Scene, level: str) -> None:
    _open(served_scene, {"approvals": "none", "permissions": level})


@when(parsers.parse('the client sends the turn "{prompt}" with {option} "{value}"'))
def _sends_with(served_scene: Scene, prompt: str, option: str, value: str) -> None:
    _finish(served_scene, _start(served_scene, prompt, **{option: value}))


@then(parsers.parse('the turns of the session ran on the models "{names}"'))
def _models(served_scene: Scene, names: str) -> None:
    assert [t["result"]["model"] for t in served_scene.turns] == names.split(", ")


@then(parsers.parse("the last turn answered with status {status:d}"))
def _last_status(served_scene: Scene, status: int) -> None:
    assert served_scene.turns[-1]["status"] == status, served_scene.turns[-1]


@then(parsers.parse('a turn that sets {option} "{value}" is refused: "{words}"'))
def _turn_refused(served_scene: Scene, option: str, value: str, words: str) -> None:
    with served_scene.client() as client:
        response = client.post(
            f"/sessions/{served_scene.session}/turns", json={"prompt": "hi", option: value}
        )
    assert response.status_code == 422 and response.json()["message"].startswith(words)


@when(parsers.parse('the client starts the turn "{prompt}"'))
def _starts(served_scene: Scene, prompt: str) -> None:
    _start(served_scene, prompt)


@then(parsers.parse('the inbox holds one pending approval for "{command}"'))
def _pending(served_scene: Scene, command: str) -> None:
    deadline = time.monotonic() + WAIT
    with served_scene.client() as client:
        while True:
            pending = client.get("/approvals").json()["approvals"]
            if pending or time.monotonic() > deadline:
                break
            time.sleep(0.05)
    assert len(pending) == 1, pending
    assert pending[0]["call"]["command"] == command
    assert pending[0]["session"] == served_scene.session
    served_scene.approval = pending[0]


@when(parsers.parse('another client allows it as "{name}"'))
def _allows(served_scene: Scene, name: str) -> None:
    assert served_scene.approval is not None
    with served_scene.client() as client:
        response = client.post(
            f"/approvals/{served_scene.approval['id']}", json={"decision": "allow", "by": name}
        )
    assert response.status_code == 200, response.text
    number = served_scene.approval["turn"]
    _finish(served_scene, number)


@then(parsers.parse("every turn of the session answered with status {status:d}"))
def _statuses(served_scene: Scene, status: int) -> None:
    assert served_scene.turns and {t["status"] for t in served_scene.turns} == {status}


@then(parsers.parse('the last turn says "{text}"'))
def _says(served_scene: Scene, text: str) -> None:
    assert text in served_scene.turns[-1]["message"], served_scene.turns[-1]


@then(parsers.parse('the last turn does not say "{text}"'))
def _does_not_say(served_scene: Scene, text: str) -> None:
    assert served_scene.turns[-1]["status"] is not None
    assert text not in served_scene.turns[-1]["message"], served_scene.turns[-1]


def _approval(scene: Scene) -> dict[str, Any]:
    with scene.client() as client:
        if scene.approval is None:
            found = client.get("/approvals", params={"state": "all"}).json()["approvals"]
            assert len(found) == 1, found
            scene.approval = found[0]
        view: dict[str, Any] = client.get(f"/approvals/{scene.approval['id']}").json()
    return view


@then(parsers.parse('the approval is answered "{decision}" by "{name}" through "{channel}"'))
def _answered(served_scene: Scene, decision: str, name: str, channel: str) -> None:
    view = _approval(served_scene)
    assert view["state"] == "answered"
    answer = view["answer"]
    assert (answer["decision"], answer["by"], answer["channel"]) == (decision, name, channel)


@then(parsers.parse('the approval is "{state}"'))
def _approval_state(served_scene: Scene, state: str) -> None:
    view = _approval(served_scene)
    assert view["state"] == state, view
    assert view["call"]["tool"] == "Bash" and view["call"]["command"]


@then(parsers.parse('an answer to it is refused as "{error}"'))
def _refused(served_scene: Scene, error: str) -> None:
    assert served_scene.approval is not None
    with served_scene.client() as client:
        response = client.post(
            f"/approvals/{served_scene.approval['id']}", json={"decision": "allow"}
        )
        assert response.status_code == 409 and response.json()["error"] == error
        assert client.get(f"/approvals/{served_scene.approval['id']}").json()["answer"] is None


@when("the server is killed with SIGKILL and started again")
def _killed(served_scene: Scene) -> None:
    served_scene.restart()


@then(parsers.parse('the session is listed "{state}" with {count:d} turns'))
def _listed(served_scene: Scene, state: str, count: int) -> None:
    with served_scene.client() as client:
        view = client.get(f"/sessions/{served_scene.session}").json()
    assert view["state"] == state and len(view["turns"]) == count, view


@then("no process of the session is left")
def _no_process(served_scene: Scene) -> None:
    assert served_scene.pids
    for proc in served_scene.pids:
        assert not psutil.pid_exists(proc.pid) or proc.status() == psutil.STATUS_ZOMBIE


@when("the client resumes the session")
def _resumes(served_scene: Scene) -> None:
    with served_scene.client() as client:
        response = client.post(f"/sessions/{served_scene.session}/resume")
    assert response.status_code == 201, response.text


# -- a body read as the server reads it (in-process) ------------------------------------


@given("the rules of a server without --trusted-input", target_fixture="body_rules")
def _rules(tmp_path: Path) -> Any:
    from coding_genesis._serve.requests import Rules, root_path

    return Rules(False, root_path(tmp_path), {}, "failer")


@given(parsers.parse('a backend "{name}" with no two-way protocol'))
def _one_way(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """Every built-in backend has a two-way protocol: a generic one, for this
    scenario only."""
    import coding_genesis.backends
    from tests.session.twoway import one_way_backend

    monkeypatch.setitem(coding_genesis.backends._REGISTRY, name, one_way_backend)


def _read(rules: Any, body: dict[str, Any]) -> Any:
    import orjson

    from coding_genesis._serve.requests import read_run_request
    from coding_genesis.approval import allow_tools

    return read_run_request(
        orjson.dumps(body), rules, owned={}, inbox=lambda _timeout: allow_tools("Read")
    )


@when(parsers.parse('a client\'s body sets "{field}" to "{value}"'), target_fixture="read_body")
def _body_sets(body_rules: Any, field: str, value: str) -> Any:
    return _read(body_rules, {"prompt": "hi", field: value})


@when(
    parsers.parse('a client\'s body asks for the approval inbox on backend "{backend}"'),
    target_fixture="read_body",
)
def _body_inbox(body_rules: Any, backend: str) -> Any:
    return _read(body_rules, {"prompt": "hi", "backend": backend, "approvals": "inbox"})


@then(parsers.parse('the body is refused: "{words}"'))
def _refused_with(read_body: Any, words: str) -> None:
    from coding_genesis._serve.requests import Refused

    assert isinstance(read_body, Refused) and read_body.message.startswith(words), read_body


@then(parsers.parse('the body is refused as the capability check refuses "{option}" on "{name}"'))
def _refused_as_checked(read_body: Any, option: str, name: str) -> None:
    from coding_genesis._serve.requests import Refused
    from coding_genesis.approval import allow_tools
    from coding_genesis.backends import get_backend
    from coding_genesis.capabilities import check
    from coding_genesis.config import AgentConfig

    settings = AgentConfig(backend=name, approver=allow_tools("Read"))
    expected = check(get_backend(name), settings)
    assert expected is not None and expected.option == option
    assert isinstance(read_body, Refused) and read_body.message == expected.message
