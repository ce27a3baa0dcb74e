"""A third-party backend installed as a package: the ``coding_genesis.backends`` entry point.

A tiny plug-in package (a pyproject with the entry point, a backend speaking claude-style
stream-json, a fake executable) is installed into a fresh venv together with coding-genesis, then
driven through ``genesis run --backend``, listed by ``genesis run --help`` and ``genesis doctor``,
and checked with the conformance kit from the plug-in's side.  A second, broken entry point is a
clear error naming it, and hides nothing else.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.test_install import ROOT, _child_env, _fresh_venv, _pip_install, _run

pytestmark = [pytest.mark.timeout(600), pytest.mark.slow]

PYPROJECT = """\
[build-system]
requires = ["hatchling>=1.24"]
build-backend = "hatchling.build"

[project]
name = "genesis-plugin-demo"
version = "1.2.3"

[project.entry-points."coding_genesis.backends"]
demo = "genesis_plugin_demo:DemoBackend"
brokendemo = "genesis_plugin_demo.missing:Nope"

[tool.hatch.build.targets.wheel]
packages = ["genesis_plugin_demo"]
"""

PLUGIN = '''\
"""A demo backend: a CLI that speaks claude's stream-json."""

import sys
from pathlib import Path

from coding_genesis.backend import CommandSpec, AttemptRequest
from coding_genesis.backends.claude import ClaudeTranslator, claude_failure_hint

FAKE = str(Path(__file__).with_name("fake_cli.py"))


class DemoBackend:
    name = "demo"
    executable = "demo-cli"
    path_env_var = "GENESIS_DEMO_PATH"
    supports_resume = False
    options = {}
    permission_levels = frozenset({"read-only"})
    version_args = ("--version",)
    notes = ("a demo plug-in: it only echoes",)

    def default_program(self):
        return (sys.executable, FAKE)

    def install_hint(self):
        return "pip install genesis-plugin-demo"

    def build_command(self, request: AttemptRequest) -> CommandSpec:
        args = ["--stream-json"]
        if request.permissions == "read-only":
            args.append("--read-only")
        return CommandSpec(args=tuple(args), stdin=request.prompt.encode())

    def translator(self):
        return ClaudeTranslator()

    def failure_hint(self, result):
        return claude_failure_hint(result)
'''

FAKE_CLI = """\
import json, sys, time

if "--version" in sys.argv:
    print("demo-cli 1.2.3")
    sys.exit(0)
prompt = sys.stdin.read()
def emit(obj):
    print(json.dumps(obj), flush=True)
emit({"type": "system", "subtype": "init", "session_id": "demo-session", "model": "demo"})
if "hang" in prompt:
    time.sleep(600)
mode = " (read-only)" if "--read-only" in sys.argv else ""
emit({"type": "assistant", "message": {"content": [{"type": "text", "text": "demo got: " + prompt + mode}]}})
emit({"type": "result", "subtype": "success", "is_error": False, "result": "demo got: " + prompt + mode,
      "session_id": "demo-session", "usage": {"input_tokens": 1, "output_tokens": 2}})
"""

RECORDING = [
    {"type": "system", "subtype": "init", "session_id": "rec-1", "model": "demo"},
    {"type": "assistant", "message": {"content": [{"type": "text", "text": "hi"}]}},
    {
        "type": "result",
        "subtype": "success",
        "is_error": False,
        "result": "hi",
        "session_id": "rec-1",
        "usage": {"input_tokens": 1, "output_tokens": 1},
    },
]

#: The plug-in author's own test, run in the plug-in's venv: the kit on its recordings and
#: its executable's stop path, without pytest.
AUTHOR_TEST = """\
import sys
from genesis_plugin_demo import DemoBackend
from coding_genesis.testing import check_backend, check_stop_path

checked = check_backend(DemoBackend(), sys.argv[1], usage=True)
check_stop_path(DemoBackend(), program=DemoBackend().default_program(), prompt="hang", timeout=2)
print(len(checked))
"""


def make_plugin(where: Path) -> Path:
    package = where / "genesis_plugin_demo"
    package.mkdir(parents=True)
    (where / "pyproject.toml").write_text(PYPROJECT)
    (package / "__init__.py").write_text(PLUGIN)
    (package / "fake_cli.py").write_text(FAKE_CLI)
    return where


def test_an_installed_plugin_runs_is_listed_and_checked(tmp_path: Path) -> None:
    plugin = make_plugin(tmp_path / "plugin")
    venv = tmp_path / "venv"
    python = _fresh_venv(venv)
    _pip_install(python, "-e", str(ROOT))
    _pip_install(python, str(plugin))
    env = _child_env(tmp_path)
    env["GENESIS_TRANSCRIPTS"] = "off"
    env["GENESIS_RUN_LOG"] = "off"
    genesis = str(venv / "bin" / "genesis")

    done = _run(
        [genesis, "run", "--backend", "demo", "--permissions", "read-only", "hello"], env=env
    )
    assert done.stdout.strip() == "demo got: hello (read-only)"
    # A level the plug-in cannot enforce is refused, never loosened.
    refused = subprocess.run(
        [genesis, "run", "--backend", "demo", "--permissions", "full", "hello"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert refused.returncode == 64, refused.stderr
    assert "cannot enforce permissions='full'" in refused.stderr

    help_text = " ".join(_run([genesis, "run", "--help"], env=env).stdout.split())
    listed = help_text.split("one of: ", 1)[1].split(" (default", 1)[0].split(", ")
    assert {"brokendemo", "claude", "codex", "demo", "failer"} <= set(listed), listed

    broken = subprocess.run(
        [genesis, "run", "--backend", "brokendemo", "hello"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert broken.returncode == 2
    assert "backend plug-in 'brokendemo'" in broken.stderr
    assert "genesis_plugin_demo.missing:Nope from genesis-plugin-demo 1.2.3" in broken.stderr
    assert "failed to load: ModuleNotFoundError" in broken.stderr
    assert "Traceback" not in broken.stderr

    doctor = subprocess.run(
        [genesis, "doctor", "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    report = json.loads(doctor.stdout)
    rows = {(c["backend"], c["check"]): c for c in report["checks"]}
    assert rows[("demo", "plug-in")]["detail"] == (
        "genesis_plugin_demo:DemoBackend (genesis-plugin-demo 1.2.3)"
    )
    assert rows[("demo", "version")]["detail"] == "demo-cli 1.2.3"
    assert rows[("demo", "notes")]["detail"] == "a demo plug-in: it only echoes"
    assert rows[("brokendemo", "plug-in")]["status"] == "FAIL"
    assert report["can_run"]["demo"] is True and report["can_run"]["brokendemo"] is False
    assert report["can_run"]["failer"] is True  # the broken one hides nothing

    recordings = tmp_path / "recordings"
    recordings.mkdir()
    (recordings / "demo_text.jsonl").write_text("".join(json.dumps(o) + "\n" for o in RECORDING))
    done = _run([str(python), "-c", AUTHOR_TEST, str(recordings)], env=env)
    assert done.stdout.strip() == "5"  # contract, translation, bad lines, failure hint, stop path
