"""The verify step: a command of the caller's (an argv list, e.g. ``["pytest",
"-q"]``) run in the run's directory after the agent finished, supervised with
its own timeout exactly like a CLI (:func:`coding_genesis._supervision.process.run_process`:
the tree stop, reaping, the run's marker).  Its exit status and output tail go
in the result; a failing verify makes the run a failure of its own category
(``verify_failed``), which a retry policy retries by resuming the session with
the verify output as the continuation prompt.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from coding_genesis._supervision.childenv import build_env, child_base_env
from coding_genesis._supervision.process import run_process
from coding_genesis._supervision.values import StopReason
from coding_genesis.config import AgentConfig

__all__ = ["OUTPUT_TAIL_CHARS", "run_verify", "verify_failure_message"]

#: Characters of the verify output kept in the result.
OUTPUT_TAIL_CHARS = 4000


async def run_verify(
    argv: Sequence[str],
    *,
    cwd: str,
    config: AgentConfig,
    marker: str,
    attempt: int,
    environ: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Run the verify command; its record: argv, status (passed, failed,
    timeout, not_found), exit code, output tail, duration."""
    tail = bytearray()

    def sink(chunk: bytes) -> bool:
        if chunk:
            tail.extend(chunk)
            if len(tail) > 4 * OUTPUT_TAIL_CHARS:
                del tail[: len(tail) - 4 * OUTPUT_TAIL_CHARS]
        return False

    started = time.monotonic()
    base = child_base_env(
        os.environ if environ is None else environ,
        inherit=config.inherit_env,
        allow=config.env_allow,
    )
    env = build_env(base, add=config.env, marker=marker)
    outcome = await run_process(
        list(argv),
        cwd=cwd,
        env=env,
        stdin=None,
        config=replace(config.supervisor(config.verify_timeout), linger=None, idle_timeout=None),
        on_stdout=sink,
        marker=marker,
    )
    output = tail.decode("utf-8", "replace")
    if outcome.stderr_tail:
        output = f"{output}{'' if not output or output.endswith(chr(10)) else chr(10)}"
        output += outcome.stderr_tail
    if outcome.spawn_error is not None:
        status = "not_found"
        output = f"cannot run {argv[0]!r}: {outcome.spawn_error.strerror or outcome.spawn_error}"
    elif outcome.stop_reason is StopReason.TIMEOUT:
        status = "timeout"
    elif outcome.returncode == 0:
        status = "passed"
    else:
        status = "failed"
    return {
        "argv": list(argv),
        "attempt": attempt,
        "status": status,
        "exit_code": outcome.returncode,
        "output_tail": output[-OUTPUT_TAIL_CHARS:],
        "duration_s": round(time.monotonic() - started, 6),
        "timeout_s": config.verify_timeout,
    }


def verify_failure_message(record: Mapping[str, Any]) -> str:
    argv = " ".join(record["argv"])
    status = record["status"]
    if status == "timeout":
        head = f"verify `{argv}` timed out after {record['timeout_s']:g}s"
    elif status == "not_found":
        head = f"verify `{argv}` could not start"
    else:
        head = f"verify `{argv}` failed (exit {record['exit_code']})"
    lines = [ln for ln in str(record.get("output_tail") or "").splitlines() if ln.strip()]
    return head + (": " + lines[-1].strip()[:300] if lines else "")
