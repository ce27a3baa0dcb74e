"""The committed subset of the ``codex app-server`` schema (``backends/schemas/codex-app-server/``)
is still what the pinned codex generates: each file equal to its regenerated twin, and
``methods.json`` equal to the method names the regenerated message unions list.  Files under
``experimental/`` are compared with a generation with ``--experimental`` (the fields codex
hides unless the client opts into its experimental API, such as ``dynamicTools``).

Skips only when codex is not installed (``.ci/run`` installs it)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.real_cli import clean_env, find_codex

pytestmark = pytest.mark.timeout(60)

SCHEMAS = Path(__file__).resolve().parents[2] / "backends" / "schemas" / "codex-app-server"

#: methods.json's keys → the generated file whose ``oneOf`` lists those messages.
UNIONS = {
    "clientRequests": "ClientRequest.json",
    "clientNotifications": "ClientNotification.json",
    "serverRequests": "ServerRequest.json",
    "serverNotifications": "ServerNotification.json",
}


def method_names(union: dict[str, Any]) -> list[str]:
    """The ``method`` of each message a generated union (``ClientRequest.json``...) lists."""
    names: list[str] = []
    for alternative in union.get("oneOf", []):
        enum = alternative.get("properties", {}).get("method", {}).get("enum", [])
        names.extend(str(name) for name in enum)
    return sorted(names)


def methods(generated: Path) -> dict[str, list[str]]:
    """What ``methods.json`` holds, derived from a freshly generated schema directory."""
    return {
        key: method_names(json.loads((generated / name).read_text(encoding="utf-8")))
        for key, name in UNIONS.items()
    }


def _generate(tmp_path_factory: pytest.TempPathFactory, *flags: str) -> Path:
    codex = find_codex()
    if codex is None:
        pytest.skip("real codex CLI not found (GENESIS_CODEX_PATH, .tools/node_modules/.bin, PATH)")
    out = tmp_path_factory.mktemp("codex-schema")
    home = tmp_path_factory.mktemp("codex-home")
    env = clean_env() | {"CODEX_HOME": str(home), "HOME": str(home)}
    subprocess.run(
        [codex, "app-server", "generate-json-schema", *flags, "--out", str(out)],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=30,
        check=True,
    )
    return out


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _generate(tmp_path_factory)


@pytest.fixture(scope="module")
def generated_experimental(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _generate(tmp_path_factory, "--experimental")


def committed() -> list[Path]:
    return sorted(
        p.relative_to(SCHEMAS) for p in SCHEMAS.rglob("*.json") if p.name != "methods.json"
    )


def test_the_subset_is_there() -> None:
    names = {p.as_posix() for p in committed()}
    assert {"v2/TurnStartParams.json", "CommandExecutionRequestApprovalResponse.json"} <= names


@pytest.mark.parametrize("name", committed(), ids=lambda p: p.as_posix())
def test_each_committed_file_is_what_codex_generates(
    request: pytest.FixtureRequest, name: Path
) -> None:
    source = name
    if name.parts[0] == "experimental":
        generated: Path = request.getfixturevalue("generated_experimental")
        source = name.relative_to("experimental")
    else:
        generated = request.getfixturevalue("generated")
    fresh = json.loads((generated / source).read_text(encoding="utf-8"))
    ours = json.loads((SCHEMAS / name).read_text(encoding="utf-8"))
    assert ours == fresh, f"{name} changed: regenerate it (see {SCHEMAS / 'README.md'})"


def test_the_method_names_are_what_codex_generates(generated: Path) -> None:
    ours = json.loads((SCHEMAS / "methods.json").read_text(encoding="utf-8"))
    assert ours == methods(generated)
