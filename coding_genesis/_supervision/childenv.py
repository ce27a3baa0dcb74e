"""The environment a CLI is started with: everything we have (the default,
``inherit_env=True``) or, least privilege, only what it needs.

With ``inherit_env=False`` (``genesis run --clean-env``) the child gets:

- a minimal environment: ``PATH``, ``HOME``, the user and shell, the locale
  (``LANG``, ``LC_*``), the terminal (``TERM``, ``COLORTERM``, ``NO_COLOR``),
  the temporary directory (``TMPDIR``, ``TMP``, ``TEMP``) and ``TZ``;
- the variables its backend declares it needs (``Backend.env_needs``, e.g.
  ``ANTHROPIC_API_KEY`` for claude);
- the names of an explicit allow-list (``env_allow``; ``PREFIX_*`` matches a
  prefix);
- and ``env=``, as always.

A coding agent with a shell can read every variable it is given: the default
hands it every credential of the calling process (cloud keys, ``SSH_AUTH_SOCK``,
unrelated service tokens).  :func:`exposed_credentials` says which.

Every child also carries :data:`RUN_MARKER_ENV` (set by :func:`build_env`):
inherited through forks and execs, it is how the stop finds the processes of
a run that escaped the CLI's tree.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from coding_genesis._util.redact import is_secret_name

__all__ = [
    "MINIMAL_ENV",
    "RUN_MARKER_ENV",
    "build_env",
    "child_base_env",
    "env_matches",
    "exposed_credentials",
]

#: Environment variable that marks every process of a run.
RUN_MARKER_ENV = "GENESIS_RUN_ID"

#: What any program expects to find; no credentials.
MINIMAL_ENV: tuple[str, ...] = (
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "LC_*",
    "TERM",
    "COLORTERM",
    "NO_COLOR",
    "TMPDIR",
    "TMP",
    "TEMP",
    "TZ",
)


#: Not secret values (redaction leaves them), but they grant access: an agent
#: socket signs with your keys, a ticket cache authenticates as you.
ACCESS_GRANTING = frozenset({"SSH_AUTH_SOCK", "GPG_AGENT_INFO", "KRB5CCNAME"})


def child_base_env(
    environ: Mapping[str, str],
    *,
    inherit: bool,
    needs: Sequence[str] = (),
    allow: Iterable[str] = (),
) -> dict[str, str]:
    """The environment the child starts from (before the backend's own
    changes and ``env=``)."""
    if inherit:
        return dict(environ)
    patterns = [*MINIMAL_ENV, *needs, *allow]
    return {k: v for k, v in environ.items() if env_matches(k, patterns)}


def exposed_credentials(
    environ: Mapping[str, str],
    *,
    inherit: bool,
    needs: Sequence[str] = (),
    allow: Iterable[str] = (),
) -> tuple[list[str], list[str]]:
    """Names of the secret-looking variables a run would give the CLI: those
    its backend needs, and the others (exposed for nothing)."""
    base = child_base_env(environ, inherit=inherit, needs=needs, allow=allow)
    secret = sorted(k for k, v in base.items() if v and (is_secret_name(k) or k in ACCESS_GRANTING))
    needed = [k for k in secret if env_matches(k, list(needs))]
    return needed, [k for k in secret if k not in needed]


def build_env(
    base: Mapping[str, str],
    *,
    unset: Sequence[str] = (),
    add: Mapping[str, str] | None = None,
    marker: str | None = None,
) -> dict[str, str]:
    """The child's environment: ``base`` minus ``unset``, plus ``add``.

    In ``unset`` a trailing ``*`` matches a prefix, and an entry starting with
    ``!`` keeps what it matches (e.g. ``CLAUDE_CODE_*`` but ``!CLAUDE_CODE_OAUTH_TOKEN``).
    """
    env = dict(base)
    if unset:
        drop = [u for u in unset if not u.startswith("!")]
        keep = [u[1:] for u in unset if u.startswith("!")]
        for key in list(env):
            if env_matches(key, drop) and not env_matches(key, keep):
                del env[key]
    if add:
        env.update(add)
    if marker is not None:
        env[RUN_MARKER_ENV] = marker
    return env


def env_matches(key: str, patterns: Sequence[str]) -> bool:
    """Whether the variable ``key`` is one of ``patterns`` (``PREFIX*`` matches a prefix)."""
    for pattern in patterns:
        if pattern.endswith("*"):
            if key.startswith(pattern[:-1]):
                return True
        elif key == pattern:
            return True
    return False
