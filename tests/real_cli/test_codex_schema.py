"""The committed subset of the ``codex app-server`` schema (``backends/schemas/codex-app-server/``)
is still what the pinned codex generates: each file equal to its regenerated twin, and
``methods.json`` equal to the method names the regenerated message unions list.  Files under
``experimental/`` are compared with a generation with ``--experimental`` (the fields codex
hides unless the client opts into its experimental API, such as ``dynamicTools``).

Against another codex than the one the files came from (``.ci/real-cli-latest``), files may
differ by design: the equality checks skip, naming both versions, and what we rely on is checked
against the fresh schema instead: each object the codec writes validates, each message kind we
read in the recordings validates, each method the codec knows is still offered.

Skips only when codex is not installed (``.ci/run`` installs it)."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.backends.test_codex_control import (
    assert_the_codecs_methods_in,
    everything_written,
    recorded_problems,
    schema_problems,
)
from tests.fakes.real_cli import clean_env, find_codex

pytestmark = pytest.mark.timeout(60)

ROOT = Path(__file__).resolve().parents[2]
SCHEMAS = ROOT / "backends" / "schemas" / "codex-app-server"

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


def _codex() -> str:
    """The codex to ask; the test skips where none is installed (``.ci/run`` installs it)."""
    codex = find_codex()
    if codex is None:
        pytest.skip("real codex CLI not found (GENESIS_CODEX_PATH, .tools/node_modules/.bin, PATH)")
    return codex


def _generate(tmp_path_factory: pytest.TempPathFactory, *flags: str) -> Path:
    codex = _codex()
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


def committed_version() -> str:
    """The codex the committed files came from (their README says)."""
    found = re.search(r"`@openai/codex` \*\*([0-9][^*]*)\*\*", (SCHEMAS / "README.md").read_text())
    assert found, "backends/schemas/codex-app-server/README.md names no codex version"
    return found.group(1)


@pytest.fixture(scope="module")
def installed() -> str:
    codex = _codex()
    out = subprocess.run(
        [codex, "--version"],
        env=clean_env(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout
    return out.split()[-1]


@pytest.fixture
def same_codex(installed: str) -> None:
    """Equality holds only against the codex the files came from."""
    if installed != committed_version():
        pytest.skip(
            f"the committed schema is codex {committed_version()}'s, this codex is {installed}: "
            "what we rely on is checked by test_what_we_rely_on_*; regenerate when re-pinning"
        )


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
@pytest.mark.usefixtures("same_codex")
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


@pytest.mark.usefixtures("same_codex")
def test_the_method_names_are_what_codex_generates(generated: Path) -> None:
    ours = json.loads((SCHEMAS / "methods.json").read_text(encoding="utf-8"))
    assert ours == methods(generated)


def test_what_we_rely_on_what_the_codec_writes_validates(generated: Path) -> None:
    written = list(everything_written())
    assert written
    for obj in written:
        assert schema_problems(obj, generated) == [], obj


def test_what_we_rely_on_what_codex_wrote_validates(generated: Path) -> None:
    assert recorded_problems(generated) == []


def test_what_we_rely_on_the_codecs_methods_are_offered(generated: Path) -> None:
    assert_the_codecs_methods_in(methods(generated))


def test_the_committed_version_is_the_pinned_one() -> None:
    pin = re.search(r"@openai/codex@([0-9][^ ]*)", (ROOT / ".ci" / "run").read_text())
    assert pin, ".ci/run pins no codex"
    assert pin.group(1) == committed_version()
