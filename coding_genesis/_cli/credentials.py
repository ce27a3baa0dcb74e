"""Credentials as each CLI reads them, for ``genesis doctor``: whether a
variable or file is there (never a value).  codex reads the ``env_key`` of
the provider ``$CODEX_HOME/config.toml`` selects; gemini, opencode and qwen
their documented variables and files."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["Found", "cli_credentials", "codex_credentials"]

#: (status, detail, fix) of a credentials check.
Found = tuple[str, str, str]


#: The largest CLI configuration file read (they are a few KiB).
MAX_CONFIG = 4 * 1024 * 1024


def _env_set(*names: str) -> list[str]:
    return [n for n in names if os.environ.get(n, "").strip()]


def _codex_provider(home: Path) -> tuple[str, str | None, str]:
    """(provider, its ``env_key`` or None, where it was read) as codex selects
    it: ``model_provider`` of ``$CODEX_HOME/config.toml`` (default ``openai``)."""
    import tomllib

    # lazy: `genesis --help` imports only the parsers
    from coding_genesis._util.files import read_regular

    config = home / "config.toml"
    try:  # a regular file only (a FIFO would block), bounded; any damage: the default
        doc = tomllib.loads(read_regular(config, MAX_CONFIG, follow=True).decode("utf-8"))
    except (OSError, ValueError, RecursionError):  # TOMLDecodeError, UnicodeDecodeError
        return "openai", None, "codex's default"
    name = doc.get("model_provider")
    provider = name if isinstance(name, str) and name else "openai"
    table = doc.get("model_providers")
    entry = table.get(provider) if isinstance(table, dict) else None
    key = entry.get("env_key") if isinstance(entry, dict) else None
    return provider, key if isinstance(key, str) and key else None, str(config)


def codex_credentials() -> Found:
    home = Path(os.environ.get("CODEX_HOME") or Path.home() / ".codex")
    provider, env_key, where_from = _codex_provider(home)
    if env_key is not None:  # the selected provider reads this variable, and only it
        if _env_set(env_key):
            return ("ok", f"${env_key} is set (provider {provider})", "")
        return (
            "warn",
            f"${env_key} is not set: provider {provider} of {where_from} reads it",
            f"export {env_key}=...",
        )
    if provider != "openai":
        return ("ok", f"provider {provider} ({where_from}) names no env_key", "")
    found = _env_set("OPENAI_API_KEY", "CODEX_API_KEY")
    auth = home / "auth.json"
    where = [f"${n} is set" for n in found] + ([f"{auth} exists"] if auth.is_file() else [])
    if where:
        return ("ok", "; ".join(where), "")
    return (
        "warn",
        f"no OPENAI_API_KEY / CODEX_API_KEY, no {auth}",
        "export OPENAI_API_KEY=..., or run `codex login`",
    )


#: Where each other CLI reads its credentials (variables, files under HOME), as
#: their documentation says; the first found is reported.
_CREDENTIALS: dict[str, tuple[tuple[str, ...], tuple[str, ...], str]] = {
    "gemini": (
        ("GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_APPLICATION_CREDENTIALS"),
        (".gemini/oauth_creds.json",),
        "export GEMINI_API_KEY=..., or run `gemini` once and log in",
    ),
    "opencode": (
        ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENROUTER_API_KEY", "GEMINI_API_KEY"),
        (".local/share/opencode/auth.json", ".config/opencode/opencode.json"),
        "run `opencode auth login`, or export the provider's API key",
    ),
    "qwen": (
        ("OPENAI_API_KEY", "DASHSCOPE_API_KEY"),
        (".qwen/oauth_creds.json", ".qwen/settings.json"),
        "export OPENAI_API_KEY=... (with OPENAI_BASE_URL), or run `qwen` once and log in",
    ),
}


def cli_credentials(name: str) -> Found:
    known = _CREDENTIALS.get(name)
    if known is None:
        return ("ok", "none needed", "")
    names, files, fix = known
    home = Path.home()
    where = [f"${n} is set" for n in _env_set(*names)]
    where += [f"~/{f} exists" for f in files if (home / f).is_file()]
    if where:
        return ("ok", "; ".join(where[:2]), "")
    return (
        "warn",
        f"none of {', '.join(names)}; no {', '.join('~/' + f for f in files)}",
        fix,
    )
