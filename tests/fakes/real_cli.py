"""Run the REAL ``claude`` / ``codex`` CLIs against :mod:`tests.fakes.model_server`.

No pytest import: these helpers only build paths, environments and argv lists. The recipes follow
``/work/shared/recordings/README.md`` (how the recordings of the real CLIs were made):

* claude: ``ANTHROPIC_BASE_URL=http://127.0.0.1:PORT``, ``ANTHROPIC_API_KEY=<anything>``, a private
  ``HOME``; ``CLAUDE_CODE_MAX_RETRIES`` / ``API_TIMEOUT_MS`` keep failing runs short; every
  inherited ``CLAUDECODE`` / ``CLAUDE_CODE_*`` variable is removed (or the CLI refuses to start
  "inside another Claude Code session"). argv: ``claude -p PROMPT --output-format stream-json
  --verbose [...]``.
* codex: a ``CODEX_HOME`` directory whose ``config.toml`` selects a ``fake`` model provider with
  ``base_url = http://127.0.0.1:PORT/v1`` and ``wire_api = "responses"``; the provider's
  ``env_key`` variable is set. argv: ``codex exec --json --skip-git-repo-check [-s MODE] PROMPT``.

Always start the CLIs with ``stdin=subprocess.DEVNULL`` (codex blocks reading stdin otherwise) and
an argv list (never ``shell=True``).

    spec = claude_run(server.url, tmp_path, "SCENARIO:text")
    proc = subprocess.run(spec.argv, env=spec.env, cwd=spec.cwd, stdin=subprocess.DEVNULL, ...)
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path

__all__ = [
    "CLAUDE_PATH_ENV",
    "CODEX_API_KEY_ENV",
    "CODEX_PATH_ENV",
    "MARKER_ENV",
    "OPENCODE_BARE",
    "CLIRun",
    "QuickStart",
    "claude_argv",
    "claude_env",
    "claude_run",
    "clean_env",
    "codex_argv",
    "codex_env",
    "codex_run",
    "find_claude",
    "find_cli",
    "find_codex",
    "find_gemini",
    "find_opencode",
    "find_qwen",
    "gemini_env",
    "kill_marked",
    "marked_processes",
    "node22_bin",
    "offline_env",
    "opencode_env",
    "quick_start_env",
    "qwen_env",
    "repo_root",
    "stripped_names",
    "write_codex_home",
]

CLAUDE_PATH_ENV = "GENESIS_CLAUDE_PATH"
GEMINI_PATH_ENV = "GENESIS_GEMINI_PATH"
OPENCODE_PATH_ENV = "GENESIS_OPENCODE_PATH"
QWEN_PATH_ENV = "GENESIS_QWEN_PATH"
CODEX_PATH_ENV = "GENESIS_CODEX_PATH"
#: Name of the variable holding the fake API key for codex (the provider's ``env_key``).
CODEX_API_KEY_ENV = "GENESIS_FAKE_OPENAI_KEY"
#: Environment variable tests put in a CLI's environment to find its whole process tree later
#: (children inherit it, even those that escape with ``setsid``).
MARKER_ENV = "GENESIS_TEST_RUN_MARK"

# Inherited variables that would change what the CLIs do or where they talk to.
_STRIP_PREFIXES = (
    "CLAUDE_CODE_",
    "ANTHROPIC_",
    "CLAUDE_",
    "OPENAI_",
    "CODEX_",
    "GEMINI_",
    "GOOGLE_",
    "OPENCODE_",
    "QWEN_",
    "DASHSCOPE_",
    "XDG_",
)
#: opencode's built-in work a test of the protocol does not need (each switch turns off what
#: users rely on, so only in the test rigs, and never in a test of plugins, skills, the user's
#: customizations or a repository's settings): the built-in auth plugins, external plugins,
#: external skills, ``~/.claude``'s skills and prompt, the file watcher.
OPENCODE_BARE = {
    "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
    "OPENCODE_PURE": "1",
    "OPENCODE_DISABLE_EXTERNAL_SKILLS": "1",
    "OPENCODE_DISABLE_CLAUDE_CODE": "1",
    "OPENCODE_EXPERIMENTAL_DISABLE_FILEWATCHER": "1",
}
#: The plugin package opencode installs into each of its config dirs, at the pinned version.
_OPENCODE_PLUGIN = {"@opencode-ai/plugin": "1.18.33"}

_STRIP_NAMES = frozenset({"CLAUDECODE", "CLAUDE_CONFIG_DIR", "MCP_TIMEOUT", "API_TIMEOUT_MS"})

# Honored by claude 2.1.x (names checked in the shipped binary): no telemetry, no auto-update,
# no error reporting, no "non-essential" network traffic.
_CLAUDE_QUIET = {
    "DISABLE_TELEMETRY": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "DISABLE_BUG_COMMAND": "1",
    "DISABLE_COST_WARNINGS": "1",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "CLAUDE_CODE_DISABLE_TERMINAL_TITLE": "1",
    "CLAUDE_CODE_DISABLE_FEEDBACK_SURVEY": "1",
}


@dataclasses.dataclass(frozen=True, slots=True)
class CLIRun:
    """Everything needed to start one CLI run: ``subprocess.Popen(argv, env=env, cwd=cwd)``."""

    argv: list[str]
    env: dict[str, str]
    cwd: str


# ------------------------------------------------------------------------------ locating


def repo_root() -> Path:
    """The repository root (``tests/fakes/real_cli.py`` → two levels up)."""
    return Path(__file__).resolve().parents[2]


def find_cli(name: str, env_var: str | None = None, root: Path | None = None) -> str | None:
    """Path of CLI ``name``: ``$env_var``, else ``<repo>/.tools/node_modules/.bin/<name>``,
    else ``PATH``. None if none of them is an executable file."""
    candidates: list[str] = []
    if env_var and os.environ.get(env_var):
        candidates.append(os.environ[env_var])
    root = root if root is not None else repo_root()
    candidates.append(str(root / ".tools" / "node_modules" / ".bin" / name))
    for cand in candidates:
        if os.path.isfile(cand) and os.access(cand, os.X_OK):
            return cand
    return shutil.which(name)


def find_claude(root: Path | None = None) -> str | None:
    """``$GENESIS_CLAUDE_PATH``, ``<repo>/.tools/node_modules/.bin/claude`` or PATH."""
    return find_cli("claude", CLAUDE_PATH_ENV, root)


def find_codex(root: Path | None = None) -> str | None:
    """``$GENESIS_CODEX_PATH``, ``<repo>/.tools/node_modules/.bin/codex`` or PATH."""
    return find_cli("codex", CODEX_PATH_ENV, root)


def find_gemini(root: Path | None = None) -> str | None:
    """``$GENESIS_GEMINI_PATH``, ``<repo>/.tools/node_modules/.bin/gemini`` or PATH."""
    return find_cli("gemini", GEMINI_PATH_ENV, root)


def find_opencode(root: Path | None = None) -> str | None:
    """``$GENESIS_OPENCODE_PATH``, ``<repo>/.tools/node_modules/.bin/opencode`` or PATH."""
    return find_cli("opencode", OPENCODE_PATH_ENV, root)


def find_qwen(root: Path | None = None) -> str | None:
    """``$GENESIS_QWEN_PATH``, ``<repo>/.tools/node_modules/.bin/qwen`` or PATH (the ``qwen``
    wrapper: the qwen backend runs the real entry point beside it under a node >= 22)."""
    return find_cli("qwen", QWEN_PATH_ENV, root)


def node22_bin() -> Path | None:
    """``<repo>/.tools/node_modules/node/bin`` (the node 22 ``.ci/run`` installs beside the
    CLIs), when it is there."""
    node = repo_root() / ".tools" / "node_modules" / "node" / "bin"
    return node if node.is_dir() else None


# ------------------------------------------------------------------------------ environment


def clean_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """A copy of ``base`` (default ``os.environ``) without variables that would leak a parent
    Claude Code session, real credentials or endpoints into the CLI under test."""
    src = os.environ if base is None else base
    return {
        k: v for k, v in src.items() if k not in _STRIP_NAMES and not k.startswith(_STRIP_PREFIXES)
    }


def _v1(base_url: str) -> str:
    """``base_url`` (given with or without it) ending in ``/v1``."""
    url = base_url.rstrip("/")
    return url if url.endswith("/v1") else url + "/v1"


def _cli_env(
    base_env: Mapping[str, str] | None,
    values: Mapping[str, str],
    marker: str | None,
    extra: Mapping[str, str] | None,
) -> dict[str, str]:
    """:func:`clean_env` of ``base_env`` with a CLI's ``values``, then the run ``marker``, then
    ``extra`` (last: it overrides any of them)."""
    env = clean_env(base_env)
    env.update(values)
    if marker is not None:
        env[MARKER_ENV] = marker
    if extra:
        env.update(extra)
    return env


def claude_env(
    base_url: str,
    home: str | os.PathLike[str],
    *,
    max_retries: int | None = 1,
    api_timeout_ms: int = 20_000,
    marker: str | None = None,
    extra: Mapping[str, str] | None = None,
    base_env: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Environment for ``claude`` talking to the fake server at ``base_url``
    (``http://127.0.0.1:PORT``, no ``/v1``). ``home`` becomes ``HOME`` (created if missing).
    ``max_retries=None``: claude's own default retries."""
    Path(home).mkdir(parents=True, exist_ok=True)
    retries = {} if max_retries is None else {"CLAUDE_CODE_MAX_RETRIES": str(max_retries)}
    return _cli_env(
        base_env,
        {
            **_CLAUDE_QUIET,
            "HOME": str(home),
            "ANTHROPIC_BASE_URL": base_url.rstrip("/").removesuffix("/v1"),
            "ANTHROPIC_API_KEY": "fake",
            **retries,
            "API_TIMEOUT_MS": str(api_timeout_ms),
        },
        marker,
        extra,
    )


def claude_argv(
    claude_path: str,
    prompt: str,
    *,
    allowed_tools: Iterable[str] | None = None,
    permission_mode: str | None = None,
    max_turns: int | None = None,
    model: str | None = None,
    extra_args: Iterable[str] = (),
) -> list[str]:
    """``claude -p PROMPT --output-format stream-json --verbose`` plus options. The prompt goes
    right after ``-p`` so a prompt starting with ``-`` is still taken as the prompt."""
    argv = [claude_path, "-p", prompt, "--output-format", "stream-json", "--verbose"]
    if allowed_tools:
        argv += ["--allowedTools", ",".join(allowed_tools)]
    if permission_mode:
        argv += ["--permission-mode", permission_mode]
    if max_turns is not None:
        argv += ["--max-turns", str(max_turns)]
    if model:
        argv += ["--model", model]
    argv += list(extra_args)
    return argv


def write_codex_home(
    codex_home: str | os.PathLike[str],
    base_url: str,
    *,
    model: str = "gpt-5.5",
    request_max_retries: int | None = 0,
    stream_max_retries: int | None = 1,
    stream_idle_timeout_ms: int = 10_000,
) -> Path:
    """Create ``codex_home`` with a ``config.toml`` pointing codex at the fake server.

    ``base_url`` may be ``http://127.0.0.1:PORT`` or ``.../v1``. ``model`` should be one codex
    knows (``gpt-5.5``); an unknown one works but adds a non-fatal ``error`` item to the output.
    A retry count of None leaves codex's own default.
    """
    home = Path(codex_home)
    home.mkdir(parents=True, exist_ok=True)
    url = _v1(base_url)
    (home / "config.toml").write_text(
        f'model = "{model}"\n'
        'model_provider = "fake"\n'
        "\n"
        "[model_providers.fake]\n"
        'name = "fake"\n'
        f'base_url = "{url}"\n'
        f'env_key = "{CODEX_API_KEY_ENV}"\n'
        'wire_api = "responses"\n'
        + (
            ""
            if request_max_retries is None
            else f"request_max_retries = {int(request_max_retries)}\n"
        )
        + (
            ""
            if stream_max_retries is None
            else f"stream_max_retries = {int(stream_max_retries)}\n"
        )
        + f"stream_idle_timeout_ms = {int(stream_idle_timeout_ms)}\n",
        encoding="utf-8",
    )
    return home


def codex_env(
    codex_home: str | os.PathLike[str],
    *,
    home: str | os.PathLike[str] | None = None,
    marker: str | None = None,
    extra: Mapping[str, str] | None = None,
    base_env: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Environment for ``codex`` using ``codex_home`` (see :func:`write_codex_home`).
    ``home`` (default: ``codex_home``) becomes ``HOME`` so no user config is read."""
    return _cli_env(
        base_env,
        {
            "CODEX_HOME": str(codex_home),
            "HOME": str(home if home is not None else codex_home),
            CODEX_API_KEY_ENV: "fake",
        },
        marker,
        extra,
    )


def codex_argv(
    codex_path: str,
    prompt: str,
    *,
    sandbox: str | None = "workspace-write",
    workdir: str | os.PathLike[str] | None = None,
    model: str | None = None,
    extra_args: Iterable[str] = (),
) -> list[str]:
    """``codex exec --json --skip-git-repo-check [-s SANDBOX] [-C DIR] [-m MODEL] -- PROMPT``.

    ``sandbox``: ``read-only`` (codex's default: commands run but cannot write), ``workspace-write``
    (writes inside the workdir; works in this container) or ``danger-full-access``.
    """
    argv = [codex_path, "exec", "--json", "--skip-git-repo-check"]
    if sandbox:
        argv += ["-s", sandbox]
    if workdir is not None:
        argv += ["-C", str(workdir)]
    if model:
        argv += ["-m", model]
    argv += list(extra_args)
    argv += ["--", prompt]
    return argv


def quick_start_env(compile_cache: str | os.PathLike[str]) -> dict[str, str]:
    """What makes a node CLI start with less CPU in the tests (never in a backend: it
    changes what the agent's own ``node`` tool runs get): Node's ``NODE_COMPILE_CACHE`` in
    ``compile_cache`` (one directory per pytest session, so every start after the first
    skips compiling the bundles) and the tools' node 22 first on ``PATH`` (gemini starts
    under the ``node`` of ``PATH``, and node 20 ignores the cache)."""
    values = {"NODE_COMPILE_CACHE": str(compile_cache)}
    node = node22_bin()
    if node is not None:
        values["PATH"] = f"{node}{os.pathsep}{os.environ.get('PATH', '')}"
    return values


def gemini_env(
    base_url: str,
    home: str | os.PathLike[str],
    *,
    marker: str | None = None,
    extra: Mapping[str, str] | None = None,
    base_env: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Environment for ``gemini`` 0.61 talking to the fake server: a private ``HOME`` whose
    ``.gemini/settings.json`` selects the ``gemini-api-key`` auth type (with only a base URL and a
    key, 0.61 picks ``gateway`` and exits 41), ``GOOGLE_GEMINI_BASE_URL`` (http is allowed for
    127.0.0.1) and a fake ``GEMINI_API_KEY``."""
    settings = Path(home) / ".gemini"
    settings.mkdir(parents=True, exist_ok=True)
    (settings / "settings.json").write_text(
        '{"security": {"auth": {"selectedType": "gemini-api-key"}}, '
        '"privacy": {"usageStatisticsEnabled": false}}\n',
        encoding="utf-8",
    )
    return _cli_env(
        base_env,
        {
            "HOME": str(home),
            "GOOGLE_GEMINI_BASE_URL": base_url.rstrip("/").removesuffix("/v1"),
            "GEMINI_API_KEY": "fake",
        },
        marker,
        extra,
    )


def opencode_env(
    base_url: str,
    home: str | os.PathLike[str],
    *,
    model: str = "fake-model",
    marker: str | None = None,
    extra: Mapping[str, str] | None = None,
    base_env: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Environment for ``opencode`` 1.18 talking to the fake server: a private ``HOME`` whose
    ``~/.config/opencode/opencode.json`` declares a ``fake`` OpenAI-compatible provider (bundled
    ``@ai-sdk/openai-compatible``: no download) as the model; no ``XDG_*`` variables."""
    config = Path(home) / ".config" / "opencode"
    config.mkdir(parents=True, exist_ok=True)
    url = _v1(base_url)
    doc = {
        "$schema": "https://opencode.ai/config.json",
        "provider": {
            "fake": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "Fake",
                "options": {"baseURL": url, "apiKey": "fake"},
                "models": {model: {"name": "Fake Model", "tool_call": True}},
            }
        },
        "model": f"fake/{model}",
        "small_model": f"fake/{model}",
        "autoupdate": False,
        "share": "disabled",
    }
    (config / "opencode.json").write_text(json.dumps(doc), encoding="utf-8")
    _opencode_plugin_stub(config)
    return _cli_env(
        base_env,
        {
            "HOME": str(home),
            "OPENCODE_DISABLE_MODELS_FETCH": "1",
            "OPENCODE_DISABLE_AUTOUPDATE": "1",
            "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
            "OPENCODE_DISABLE_SHARE": "1",
        },
        marker,
        extra,
    )


def _opencode_plugin_stub(config: Path) -> None:
    """What opencode's background install of its plugin package into ``config`` leaves: a
    manifest and a lock naming it, and a ``node_modules``.  Finding them, opencode runs no
    ``npm install`` (a registry fetch on every fresh ``HOME``, seconds of CPU)."""
    manifest = config / "package.json"
    if not manifest.exists():
        manifest.write_text(json.dumps({"dependencies": _OPENCODE_PLUGIN}), encoding="utf-8")
        lock = {"packages": {"": {"dependencies": _OPENCODE_PLUGIN}}}
        (config / "package-lock.json").write_text(json.dumps(lock), encoding="utf-8")
    (config / "node_modules").mkdir(exist_ok=True)


def qwen_env(
    base_url: str,
    home: str | os.PathLike[str],
    *,
    model: str = "fake-model",
    marker: str | None = None,
    extra: Mapping[str, str] | None = None,
    base_env: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Environment for ``qwen`` 0.24 talking to the fake server (auth type ``openai`` is inferred
    from ``OPENAI_*``; no settings file needed) with a private ``HOME``."""
    Path(home).mkdir(parents=True, exist_ok=True)
    url = _v1(base_url)
    return _cli_env(
        base_env,
        {
            "HOME": str(home),
            "OPENAI_BASE_URL": url,
            "OPENAI_API_KEY": "fake",
            "OPENAI_MODEL": model,
            "QWEN_CODE_SUPPRESS_YOLO_WARNING": "1",
            "QWEN_USAGE_STATISTICS_ENABLED": "false",  # no telemetry lookups
        },
        marker,
        extra,
    )


def offline_env(base_url: str, home: str | os.PathLike[str]) -> dict[str, str]:
    """What every real CLI needs to talk to the fake server at ``base_url`` at once (one
    private ``HOME`` for all, codex's home inside it) and where ``genesis`` finds each CLI
    (``$GENESIS_<NAME>_PATH``, when installed): only the variables set, never the caller's.
    Start the CLIs with :func:`clean_env` of the caller's environment updated with these."""
    empty: dict[str, str] = {}
    values = {
        **claude_env(base_url, home, base_env=empty),
        **gemini_env(base_url, home, base_env=empty),
        **opencode_env(base_url, home, base_env=empty),
        **qwen_env(base_url, home, base_env=empty),
        **codex_env(write_codex_home(Path(home) / ".codex", base_url), home=home, base_env=empty),
    }
    for name, find in (
        ("CLAUDE", find_claude),
        ("CODEX", find_codex),
        ("GEMINI", find_gemini),
        ("OPENCODE", find_opencode),
        ("QWEN", find_qwen),
    ):
        found = find()
        if found:
            values[f"GENESIS_{name}_PATH"] = found
    node = node22_bin()
    if node is not None:  # qwen needs node >= 22 first on PATH
        values["PATH"] = f"{node}{os.pathsep}{os.environ.get('PATH', '')}"
    return values


class QuickStart:
    """One pytest session's start-up state shared by the real node CLIs and opencode, in a
    private directory ``root`` (test rigs only: see :func:`quick_start_env`).

    opencode's first start in a fresh ``HOME`` creates its database and state; one
    template ``HOME`` made by one start (``opencode session list``) is copied into each
    test's own ``HOME`` instead (never a live ``HOME`` shared: sessions stay apart)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.compile_cache = root / "node-compile-cache"
        self.compile_cache.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._opencode: dict[str, Path | None] = {}

    def env(self) -> dict[str, str]:
        return quick_start_env(self.compile_cache)

    def opencode_home(self, cli: str) -> Path | None:
        """The template ``HOME`` of ``cli`` (made at the first call), or None when its one
        start failed (each test then starts from an empty ``HOME``, as before)."""
        if cli not in self._opencode:
            self._opencode[cli] = self._make_opencode_home(cli, len(self._opencode))
        return self._opencode[cli]

    def _make_opencode_home(self, cli: str, n: int) -> Path | None:
        import subprocess

        home = self.root / f"opencode-home-{n}"
        work = self.root / f"opencode-work-{n}"
        work.mkdir(mode=0o700)
        env = opencode_env("http://127.0.0.1:9", home)
        try:
            done = subprocess.run(
                [cli, "session", "list"],
                env=env,
                cwd=work,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=120,
                check=False,
            )
        except (OSError, subprocess.SubprocessError):
            return None
        if done.returncode != 0:
            return None
        shutil.rmtree(home / ".local" / "share" / "opencode" / "log", ignore_errors=True)
        return home

    def copy_opencode_home(self, cli: str, home: str | os.PathLike[str]) -> None:
        """Fill ``home`` from the template of ``cli`` once: nothing when ``home`` is there
        already (a test's second agent keeps its sessions) or when there is no template."""
        if Path(home).exists():
            return
        template = self.opencode_home(cli)
        if template is not None:
            shutil.copytree(template, home, symlinks=True, dirs_exist_ok=True)


def stripped_names(base: Mapping[str, str] | None = None) -> list[str]:
    """The names of ``base``'s variables :func:`clean_env` leaves out (never their values)."""
    src = os.environ if base is None else base
    return sorted(set(src) - set(clean_env(src)))


# ------------------------------------------------------------------------------ all in one


def claude_run(
    server_url: str,
    tmp_dir: str | os.PathLike[str],
    prompt: str,
    *,
    claude_path: str | None = None,
    allowed_tools: Iterable[str] | None = None,
    permission_mode: str | None = None,
    max_retries: int = 1,
    api_timeout_ms: int = 20_000,
    marker: str | None = None,
    extra_args: Iterable[str] = (),
    extra_env: Mapping[str, str] | None = None,
) -> CLIRun:
    """argv/env/cwd to run the real claude against the fake server. Uses ``tmp_dir/home`` as
    ``HOME`` and ``tmp_dir/work`` as the working directory (both created).
    Raises FileNotFoundError if no claude CLI is found."""
    path = claude_path or find_claude()
    if path is None:
        raise FileNotFoundError("claude CLI not found (set GENESIS_CLAUDE_PATH)")
    tmp = Path(tmp_dir)
    work = tmp / "work"
    work.mkdir(parents=True, exist_ok=True)
    env = claude_env(
        server_url,
        tmp / "home",
        max_retries=max_retries,
        api_timeout_ms=api_timeout_ms,
        marker=marker,
        extra=extra_env,
    )
    argv = claude_argv(
        path,
        prompt,
        allowed_tools=allowed_tools,
        permission_mode=permission_mode,
        extra_args=extra_args,
    )
    return CLIRun(argv, env, str(work))


def codex_run(
    server_url: str,
    tmp_dir: str | os.PathLike[str],
    prompt: str,
    *,
    codex_path: str | None = None,
    sandbox: str | None = "workspace-write",
    request_max_retries: int = 0,
    stream_max_retries: int = 1,
    stream_idle_timeout_ms: int = 10_000,
    marker: str | None = None,
    extra_args: Iterable[str] = (),
    extra_env: Mapping[str, str] | None = None,
) -> CLIRun:
    """argv/env/cwd to run the real codex against the fake server. Writes
    ``tmp_dir/codex_home/config.toml``; ``tmp_dir/work`` is the working directory (created).
    Raises FileNotFoundError if no codex CLI is found."""
    path = codex_path or find_codex()
    if path is None:
        raise FileNotFoundError("codex CLI not found (set GENESIS_CODEX_PATH)")
    tmp = Path(tmp_dir)
    work = tmp / "work"
    work.mkdir(parents=True, exist_ok=True)
    home = write_codex_home(
        tmp / "codex_home",
        server_url,
        request_max_retries=request_max_retries,
        stream_max_retries=stream_max_retries,
        stream_idle_timeout_ms=stream_idle_timeout_ms,
    )
    env = codex_env(home, marker=marker, extra=extra_env)
    argv = codex_argv(path, prompt, sandbox=sandbox, workdir=work, extra_args=extra_args)
    return CLIRun(argv, env, str(work))


# ------------------------------------------------------------------------------ process clean-up


def marked_processes(marker: str) -> list[int]:
    """PIDs of live (non-zombie) processes whose environment has ``MARKER_ENV=marker``.

    Found by scanning ``/proc/*/environ`` (Linux), so it also finds tool processes that escaped
    the CLI's process group with ``setsid`` or were reparented to PID 1.
    """
    needle = f"{MARKER_ENV}={marker}".encode()
    me = os.getpid()
    found: list[int] = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return found
    for entry in entries:
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                environ = f.read()
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:  # gone, or not ours to read
            continue
        state = stat.rsplit(b")", 1)[-1].split()[0:1]
        if state == [b"Z"]:
            continue
        if needle in environ.split(b"\0"):
            found.append(int(entry))
    return found


def kill_marked(marker: str, timeout: float = 10.0) -> list[int]:
    """SIGKILL every process carrying ``marker`` until none is left (or ``timeout``).
    Returns the PIDs that were signaled."""
    import signal
    import time

    killed: list[int] = []
    deadline = time.monotonic() + timeout
    while True:
        pids = marked_processes(marker)
        if not pids or time.monotonic() > deadline:
            return killed
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            except ProcessLookupError:
                pass
        time.sleep(0.05)
