"""The CLI's environment: the one place coding-genesis reads ``GENESIS_*``
configuration variables (the library itself reads none: it takes explicit
settings, passes the process environment on to the CLI it runs, finds
binaries on ``PATH`` and knows secret values from the environment for
redaction).

==========================  ==========================================================
variable                    meaning for ``genesis``
==========================  ==========================================================
``GENESIS_BACKEND``         default ``--backend`` (else ``claude``)
``GENESIS_TRANSCRIPTS``     where run directories go, or ``off``
                            (else ``$XDG_STATE_HOME/coding-genesis/runs``)
``GENESIS_RUN_LOG``         the run log file, or ``off``
                            (else ``$XDG_STATE_HOME/coding-genesis/runs.jsonl``)
``GENESIS_<NAME>_PATH``     the CLI binary of backend NAME (``GENESIS_CLAUDE_PATH``...),
                            unless ``--cli-path`` is given
``GENESIS_LEDGER``          the run ledger directory, or ``off`` (else
                            ``$XDG_RUNTIME_DIR/coding-genesis``, else a private
                            directory in ``/dev/shm`` or the temp directory)
``GENESIS_BACKENDS_FILE``   a TOML file of generic backends (``[backends.NAME]``),
                            unless ``--backends-file`` is given
``GENESIS_SUBREAPER=0``     runs never make ``genesis`` a child subreaper
``GENESIS_RETRY_TESTING=1`` retry backoffs take no real time (virtual time), for
                            testing a pipeline that shells out to ``genesis``; the
                            same as ``--retry-testing``
``GENESIS_SERVE_TOKEN``     the token of ``genesis serve`` (else one is generated into
                            ``$XDG_STATE_HOME/coding-genesis/serve/token``)
==========================  ==========================================================

``XDG_STATE_HOME`` defaults to ``~/.local/state``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

__all__ = [
    "BACKEND",
    "BACKENDS_FILE",
    "RETRY_TESTING",
    "RUN_LOG",
    "SERVE_TOKEN",
    "SUBREAPER",
    "TRANSCRIPTS",
    "apply_process_settings",
    "backends_file",
    "cli_path_for",
    "default_backend",
    "node_path_for",
    "run_log_path",
    "serve_dir",
    "transcript_dir",
]

BACKEND = "GENESIS_BACKEND"
TRANSCRIPTS = "GENESIS_TRANSCRIPTS"
RUN_LOG = "GENESIS_RUN_LOG"
SUBREAPER = "GENESIS_SUBREAPER"
LEDGER = "GENESIS_LEDGER"
RETRY_TESTING = "GENESIS_RETRY_TESTING"
BACKENDS_FILE = "GENESIS_BACKENDS_FILE"
SERVE_TOKEN = "GENESIS_SERVE_TOKEN"
_OFF = frozenset({"off", "0", "false", "no", "none", "disable", "disabled"})


def _env(env: Mapping[str, str] | None) -> Mapping[str, str]:
    return os.environ if env is None else env


def _state_home(env: Mapping[str, str]) -> Path:
    base = env.get("XDG_STATE_HOME", "").strip()
    if base and os.path.isabs(base):
        return Path(base)
    return Path(os.path.expanduser("~")) / ".local" / "state"


def default_backend(env: Mapping[str, str] | None = None) -> str:
    return _env(env).get(BACKEND, "").strip() or "claude"


def transcript_dir(option: str | None = None, env: Mapping[str, str] | None = None) -> Path | None:
    """Where ``genesis`` records runs: ``--transcript-dir`` (a path or "off"),
    else ``$GENESIS_TRANSCRIPTS``, else the XDG default.  None: off."""
    values = _env(env)
    text = option if option is not None else values.get(TRANSCRIPTS)
    if text is not None:
        if text.strip().lower() in _OFF or not text.strip():  # empty: off, as before
            return None
        return Path(os.path.expanduser(text))
    return _state_home(values) / "coding-genesis" / "runs"


def run_log_path(option: str | None = None, env: Mapping[str, str] | None = None) -> Path | None:
    """The run log ``genesis`` appends to: ``--run-log`` (a path or "off"),
    else ``$GENESIS_RUN_LOG``, else the XDG default.  None: off."""
    values = _env(env)
    text = option if option is not None else values.get(RUN_LOG)
    if text is not None and text.strip():  # empty: the default
        if text.strip().lower() in _OFF:
            return None
        return Path(os.path.expanduser(text))
    return _state_home(values) / "coding-genesis" / "runs.jsonl"


def serve_dir(env: Mapping[str, str] | None = None) -> Path:
    """``genesis serve``'s private directory: its token, journal and ``server.json``."""
    return _state_home(_env(env)) / "coding-genesis" / "serve"


def backends_file(option: str | None = None, env: Mapping[str, str] | None = None) -> str | None:
    """The generic backends' TOML file: ``--backends-file``, else
    ``$GENESIS_BACKENDS_FILE``, else None (none is read)."""
    text = option if option is not None else _env(env).get(BACKENDS_FILE, "")
    return os.path.expanduser(text.strip()) if text and text.strip() else None


def ledger_setting(env: Mapping[str, str] | None = None) -> str | bool | None:
    """``$GENESIS_LEDGER``: a directory, False for "off", None (unset): the default."""
    text = _env(env).get(LEDGER, "").strip()
    if not text:
        return None
    if text.lower() in _OFF:
        return False
    return os.path.expanduser(text)


def cli_path_for(
    backend: str, explicit: str | None, env: Mapping[str, str] | None = None
) -> str | None:
    """``--cli-path``, else ``$GENESIS_<BACKEND>_PATH`` (the backend's
    ``path_env_var``), else None (the library finds the CLI on ``PATH``); a
    path with a slash made absolute here (a run's cwd is no place to look for it)."""
    if explicit:
        return _here(explicit)
    try:
        # lazy: `genesis --help` imports only the parsers
        from coding_genesis.backends import get_backend

        variable = get_backend(backend).path_env_var
    except Exception:  # noqa: BLE001  (an unknown or broken backend has no variable to read)
        return None
    value = _env(env).get(variable, "").strip() if variable else ""
    return _here(value) if value else None


def _here(path: str) -> str:
    """``path`` against this process's working directory when it names one
    (a bare name is looked up on ``PATH``)."""
    return os.path.abspath(os.path.expanduser(path)) if os.sep in path else path


def node_path_for(backend: str, env: Mapping[str, str] | None = None) -> str | None:
    """The node a backend's node-script CLI runs under: the variable its
    ``node_script`` names (``$GENESIS_QWEN_NODE``), else None (found)."""
    try:
        # lazy: `genesis --help` imports only the parsers
        from coding_genesis.backends import get_backend

        script = get_backend(backend).node_script
    except Exception:  # noqa: BLE001  (an unknown or broken backend has no variable to read)
        return None
    variable = script.node_env_var if script is not None else ""
    value = _env(env).get(variable, "").strip() if variable else ""
    return _here(value) if value else None


def apply_process_settings(
    retry_testing: bool = False, env: Mapping[str, str] | None = None
) -> None:
    """Process-wide switches of a ``genesis`` invocation: the subreaper, virtual time."""
    values = _env(env)
    if values.get(SUBREAPER, "").strip() == "0":
        # lazy: `genesis --help` imports only the parsers
        from coding_genesis._supervision.table import set_subreaper

        set_subreaper(False)
    if retry_testing or values.get(RETRY_TESTING, "").strip().lower() in ("1", "true", "yes", "on"):
        # lazy: `genesis --help` imports only the parsers
        from coding_genesis._util.clock import set_testing

        set_testing(True)
