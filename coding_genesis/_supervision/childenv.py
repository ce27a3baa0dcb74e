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
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from coding_genesis._supervision.process import _env_match
from coding_genesis._util.redact import is_secret_name

__all__ = ["MINIMAL_ENV", "child_base_env", "exposed_credentials"]

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
    return {k: v for k, v in environ.items() if _env_match(k, patterns)}


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
    needed = [k for k in secret if _env_match(k, list(needs))]
    return needed, [k for k in secret if k not in needed]
