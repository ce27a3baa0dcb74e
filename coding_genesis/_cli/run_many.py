"""``genesis run-many``: a JSON-lines batch, one result line per request."""

from __future__ import annotations

import argparse
import functools
import os
import shutil
import signal
import sys
import tempfile
from typing import IO, TYPE_CHECKING, Any

from coding_genesis._cli.approver_options import add_approver_arguments
from coding_genesis._cli.budget_options import add_budget_arguments, budget_from, prices_from
from coding_genesis._cli.common import (
    add_line_defaults,
    for_stdout,
    stop_signal_name,
    usage_error,
    watch_stop_signals,
    whole_number,
)
from coding_genesis._cli.repository import absolute_path, add_setting_sources_argument
from coding_genesis._util.display import printable
from coding_genesis.status import Status

if TYPE_CHECKING:
    from coding_genesis.integrations.ray import RayRunner

__all__ = [
    "InOrder",
    "Tally",
    "batch_defaults",
    "ending",
    "register",
    "run_until_signal",
    "with_cli_paths",
]

#: The largest batch file read (read whole: one request per line).
MAX_BATCH_FILE = 256 * 1024 * 1024

EXAMPLES = """\
examples:
  genesis run-many tasks.jsonl --concurrency 8 > results.jsonl
  printf '%s\\n' '{"prompt": "hello", "backend": "failer"}' \\
                 '{"prompt": "/fail", "backend": "failer"}' | genesis run-many -
  genesis run-many tasks.jsonl --executor ray --num-cpus 0.5 --ray-address auto

each input line is a JSON object with at least "prompt" and "backend"; optional:
  model, timeout, idle_timeout, cwd, name, resume, request_key, retry ("default",
  a number, or a policy object), options {"max_turns": N}.
  The file is data, not code: a line that sets anything else (cli_path, env,
  extra_args, other options, ...) is refused with a failure at its index, and
  every line's CLI reads the user's settings alone (nothing its cwd names runs).
  --trusted-input lifts both (and --setting-sources project needs it): whoever
  wrote the file can then run any program as you.
  An approver comes from the command line only (--approve-tools, --deny-commands,
  --writes-under): a line with "approver" or those keys is always refused.
  Blank lines are skipped.
  A line without "backend", "model", "timeout", ... takes --backend, --model,
  --timeout, ... (and $GENESIS_BACKEND, $GENESIS_<NAME>_PATH, like `genesis run`).
stdout: one JSON result per request, in input order, each with its "index"
(0-based among the non-blank lines).  A bad line gets a failure result (status 64).
A result that finishes before an earlier one waits in a private temporary file,
not in memory; --unordered prints each result as soon as it finishes.
stderr: a progress line per result, then how many succeeded, failed, were stopped
(a budget), never started and were cancelled.
exit code: 0 when every run succeeded, 1 when any did not, 2 for a usage error,
128+N on signal N (130 for Ctrl-C, 143 for SIGTERM): every process tree is stopped
first, then every result so far is printed (the unfinished ones as cancelled).
"""


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "run-many",
        help="run a JSON-lines file of requests, several at a time",
        description="Run every request of a JSON-lines file, at most --concurrency at a "
        "time, and print one JSON result per request in input order.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("file", help='JSON-lines file of requests ("-" reads stdin)')
    parser.add_argument(
        "--concurrency",
        "-j",
        type=whole_number(1),
        default=4,
        help="runs at once (default 4)",
    )
    parser.add_argument(
        "--executor",
        choices=("local", "ray"),
        default="local",
        help="local: this machine (default); ray: one Ray task per request "
        '(pip install "coding-genesis[ray]")',
    )
    parser.add_argument(
        "--num-cpus",
        type=float,
        default=None,
        help="ray: CPUs reserved per run (default 0.25)",
    )
    parser.add_argument(
        "--ray-address",
        default=None,
        help="ray: cluster to join (default: $RAY_ADDRESS, else a local cluster)",
    )
    parser.add_argument("--quiet", "-q", action="store_true", help="no progress lines on stderr")
    parser.add_argument(
        "--unordered",
        action="store_true",
        help="print each result as soon as it finishes (completion order; "
        'each line keeps its "index")',
    )
    parser.add_argument(
        "--repeat",
        type=whole_number(1),
        default=1,
        help="trials: run each request N times (each in its own worktree with "
        '"isolation": "worktree"); one line per trial (with "repeat"), then one '
        '"type": "summary" line per request',
    )
    parser.add_argument(
        "--trusted-input",
        action="store_true",
        help="accept every setting in the file (cli_path, env, extra_args, options, ...): "
        "CODE EXECUTION, whoever wrote the file runs programs as you",
    )
    defaults = add_line_defaults(
        parser, "settings for the lines that do not set them (as `genesis run` takes them)"
    )
    defaults.add_argument(
        "--cwd", "-C", type=absolute_path, default=None, help="working directory of the agents"
    )
    add_setting_sources_argument(defaults, batch=True)
    add_budget_arguments(parser, batch=True)
    add_approver_arguments(parser)
    parser.set_defaults(handler=handle)


class _Output:
    """Each result as it comes: counted, its progress on stderr, its JSON line
    on stdout (in the input's order unless ``--unordered``)."""

    def __init__(self, args: argparse.Namespace, total: int) -> None:
        self.tally = Tally()
        #: The (input, trial) slots answered so far.
        self.answered: set[int] = set()
        self.out = sys.stdout.buffer
        self.tty = sys.stdout.isatty()
        self.in_order = None if args.unordered else InOrder(self.out)
        self.repeat: int = args.repeat
        self.quiet: bool = args.quiet
        self.total = total
        # lazy: `genesis --help` imports only the parsers
        from coding_genesis._observers.transcript import safe_dumps

        self.dumps = safe_dumps

    def __call__(self, result: dict[str, Any]) -> None:
        repeat = self.repeat
        summary = result.get("type") == "summary"
        if not summary:
            self.tally.add(result)
            self.answered.add(int(result["index"]) * repeat + int(result.get("repeat") or 1) - 1)
            if not self.quiet:
                print(
                    printable(_progress(result, self.tally.finished, self.total)),
                    file=sys.stderr,
                    flush=True,
                )
        line = for_stdout(self.dumps(result) + b"\n", self.tty)
        if self.in_order is None:
            self.out.write(line)
        else:
            slot = result["index"]
            if repeat > 1:  # each input: its trials, then its summary
                slot = slot * (repeat + 1) + (repeat if summary else result["repeat"] - 1)
            self.in_order.add(slot, line)
        self.out.flush()


def _read(args: argparse.Namespace) -> bytes | str:
    """The batch file's bytes (``-``: stdin), or why it cannot be read."""
    # lazy: `genesis --help` imports only the parsers
    from coding_genesis._util.files import NotARegularFile, read_regular

    try:
        if args.file == "-":
            return sys.stdin.buffer.read()
        # a regular file (a FIFO would block: "-" reads a pipe), bounded
        return read_regular(args.file, MAX_BATCH_FILE, follow=True)
    except NotARegularFile as exc:
        return f'cannot read {args.file}: {exc} ("-" reads stdin)'
    except OSError as exc:
        return f"cannot read {args.file}: {exc.strerror or exc}"


def _ray_runner(args: argparse.Namespace) -> RayRunner:
    """The Ray runner ``--executor ray`` asks for (a ConfigError or an
    ImportError when Ray cannot serve)."""
    # lazy: `genesis --help` imports only the parsers
    from coding_genesis.integrations.ray import DEFAULT_NUM_CPUS, RayRunner

    return RayRunner(
        num_cpus=DEFAULT_NUM_CPUS if args.num_cpus is None else args.num_cpus,
        address=args.ray_address,
        # A local cluster of our own needs no dashboard; a remote one takes no such option.
        init_kwargs={}
        if args.ray_address or os.environ.get("RAY_ADDRESS")
        else {"include_dashboard": False},
    )


def handle(args: argparse.Namespace) -> int:
    # lazy: `genesis --help` imports only the parsers
    from coding_genesis._cli.env import backends_file, default_backend
    from coding_genesis._cli.repository import batch_sources_problem
    from coding_genesis._cli.run import add_backends_file
    from coding_genesis._lines import read_requests, with_safe_start
    from coding_genesis.batch import Executor, ExecutorName
    from coding_genesis.errors import ConfigError

    data = _read(args)
    if isinstance(data, str):
        return usage_error("run-many", data)
    if problem := batch_sources_problem(args.setting_sources, trusted=args.trusted_input):
        return usage_error("run-many", problem)
    try:  # before the lines are looked at: their backends may be its entries
        add_backends_file(backends_file(None))
    except ConfigError as exc:
        return usage_error("run-many", str(exc))
    requests = with_cli_paths(read_requests(data.splitlines(), trusted=args.trusted_input), args)
    requests = with_safe_start(requests, args.backend or default_backend(), args.trusted_input)
    total = len(requests)
    try:
        budget = budget_from(args)
        prices = prices_from(args)
        approvals = _approvals(args)
    except ConfigError as exc:
        return usage_error("run-many", str(exc))

    executor: ExecutorName | Executor = "local"
    runner = None
    if args.executor == "ray":
        try:
            runner = _ray_runner(args)
        except (ConfigError, ImportError) as exc:
            return usage_error("run-many", str(exc))
        executor = runner

    repeat = args.repeat
    total *= repeat
    on_result = _Output(args, total)
    tally, answered, in_order = on_result.tally, on_result.answered, on_result.in_order

    signum: int | None = None
    try:
        signum = run_until_signal(
            requests,
            concurrency=args.concurrency,
            executor=executor,
            on_result=on_result,
            defaults={
                **_recording(),
                **batch_defaults(args),
                **({"prices": prices} if prices else {}),
                **approvals,
            },
            budget=budget,
            repeat=repeat,
            quiet=args.quiet,
        )
        if signum is not None and repeat == 1:
            # Every result so far is out; the requests the signal cut short say so.
            for index in range(total):
                if index not in answered:
                    on_result(_cancelled(index, requests[index], signum))
    except ConfigError as exc:
        return usage_error("run-many", str(exc))
    finally:
        if in_order is not None:
            in_order.close(flush=signum is not None)
        if runner is not None:
            runner.close()
    if not args.quiet:
        stopped = f" (stopped by {stop_signal_name(signum)})" if signum is not None else ""
        print(f"genesis run-many: {tally.text()}{stopped}", file=sys.stderr)
    if signum is not None:
        return 128 + signum
    return 0 if tally.succeeded == tally.finished else 1


def run_until_signal(
    requests: list[Any],
    *,
    quiet: bool,
    **kwargs: Any,
) -> int | None:
    """Run the batch; on SIGINT, SIGTERM or SIGHUP (also when started with
    SIGINT ignored: the handlers are ours) stop every run's process tree, let
    the batch end, and return the signal (None: the batch ran to its end)."""
    import anyio

    # lazy: `genesis --help` imports only the parsers
    from coding_genesis.batch import run_many

    stop: list[int] = []

    async def main() -> None:
        scope = anyio.CancelScope()

        def first(signum: int) -> None:
            if not quiet:
                print(
                    f"genesis run-many: {stop_signal_name(signum)}: stopping every process tree…",
                    file=sys.stderr,
                    flush=True,
                )
            scope.cancel()

        async with anyio.create_task_group() as tg:
            await tg.start(functools.partial(watch_stop_signals, stop, first))
            with scope:
                await run_many(requests, collect=False, **kwargs)
            tg.cancel_scope.cancel()

    try:
        anyio.run(main)
    except KeyboardInterrupt:  # before the watcher was up or after it was gone
        if not stop:
            stop.append(signal.SIGINT)
    return stop[0] if stop else None


def batch_defaults(args: argparse.Namespace) -> dict[str, Any]:
    """The settings of the lines that do not set them: the flags, else what
    ``genesis run`` reads from the environment (``$GENESIS_BACKEND``)."""
    # lazy: `genesis --help` imports only the parsers
    from coding_genesis._cli.env import default_backend

    given = {
        "backend": args.backend or default_backend(),
        "model": args.model,
        "timeout": args.timeout,
        "idle_timeout": args.idle_timeout,
        "grace": args.grace,
        "permissions": args.permissions,
        "cwd": args.cwd,
        "setting_sources": args.setting_sources,
    }
    return {k: v for k, v in given.items() if v is not None}


def with_cli_paths(requests: list[Any], args: argparse.Namespace) -> list[Any]:
    """Each line's CLI binary as ``genesis run`` finds it (``$GENESIS_<NAME>_PATH``),
    for the lines that do not set one (a line may only with --trusted-input)."""
    # lazy: `genesis --help` imports only the parsers
    from coding_genesis._cli.env import cli_path_for, default_backend, node_path_for

    fallback = args.backend or default_backend()
    out: list[Any] = []
    for request in requests:
        if isinstance(request, dict) and request.get("cli_path") is None:
            backend = request.get("backend") or fallback
            if isinstance(backend, str):
                path, node = cli_path_for(backend, None), node_path_for(backend)
                request = {
                    **request,
                    **({"cli_path": path} if path else {}),
                    **({"node_path": node} if node and request.get("node_path") is None else {}),
                }
        out.append(request)
    return out


def _cancelled(index: int, request: Any, signum: int) -> dict[str, Any]:
    """The answer to a request a signal cut short (in flight, or not yet started)."""
    # lazy: `genesis --help` imports only the parsers
    from coding_genesis._failures.analysis import failed_result

    backend = request.get("backend") if isinstance(request, dict) else None
    result = failed_result(
        Status.CANCELLED if signum == signal.SIGINT else 128 + signum,
        "cancelled",
        f"cancelled by {stop_signal_name(signum)} before it finished; its process tree was stopped",
        backend=backend if isinstance(backend, str) else "",
    )
    return {**result.to_dict(), "index": index}


class Tally:
    """How the batch's runs ended: succeeded, failed, stopped (a budget), not
    started, cancelled."""

    ORDER = ("succeeded", "failed", "stopped", "not started", "cancelled")

    def __init__(self) -> None:
        self.counts = dict.fromkeys(self.ORDER, 0)
        self.finished = 0

    @property
    def succeeded(self) -> int:
        return self.counts["succeeded"]

    def add(self, result: dict[str, Any]) -> None:
        self.finished += 1
        self.counts[ending(result)] += 1

    def text(self) -> str:
        shown = [f"{n} {what}" for what, n in self.counts.items() if n or what in ORDER_ALWAYS]
        return ", ".join(shown)


#: Said even when none ended so.
ORDER_ALWAYS = ("succeeded", "failed")


def ending(result: dict[str, Any]) -> str:
    """How one run of the batch ended, in the summary's words."""
    if result.get("status") == 0:
        return "succeeded"
    failure = result.get("failure") or {}
    category = failure.get("category") if isinstance(failure, dict) else None
    if category == "cancelled" or result.get("error") == "cancelled":
        return "cancelled"
    if category == "not_started":
        return "not started"
    if category == "budget_exceeded":
        return "stopped"
    return "failed"


class InOrder:
    """Writes result lines in index order, each as soon as every earlier one is out.

    A line that comes before its turn waits in a private temporary file (0600,
    created ``O_EXCL`` in a 0700 directory of its own, made on first need); only
    its ``(offset, length)`` stays in memory.  The file is emptied whenever
    nothing waits, and :meth:`close` deletes it and its directory.
    """

    def __init__(self, out: IO[bytes]) -> None:
        self._out = out
        self._next = 0
        #: index -> (offset, length) of each waiting line in the spill file.
        self.waiting: dict[int, tuple[int, int]] = {}
        self.directory: str | None = None
        self._spill: IO[bytes] | None = None

    def add(self, index: int, line: bytes) -> None:
        if index != self._next:
            spill = self._spill_file()
            offset = spill.seek(0, os.SEEK_END)
            spill.write(line)
            spill.flush()  # on disk, not in a buffer of ours
            self.waiting[index] = (offset, len(line))
            return
        self._out.write(line)
        self._next += 1
        while self._next in self.waiting:
            offset, length = self.waiting.pop(self._next)
            assert self._spill is not None
            self._spill.seek(offset)
            self._out.write(self._spill.read(length))
            self._next += 1
        if self._spill is not None and not self.waiting:
            self._spill.seek(0)
            self._spill.truncate()

    def _spill_file(self) -> IO[bytes]:
        if self._spill is None:
            self.directory = tempfile.mkdtemp(prefix="genesis-run-many-")  # 0700
            # mkstemp: O_CREAT | O_EXCL, mode 0600.
            fd, _path = tempfile.mkstemp(prefix="waiting-", dir=self.directory)
            self._spill = os.fdopen(fd, "w+b")
        return self._spill

    def close(self, *, flush: bool = False) -> None:
        """Delete the spill file and its directory; ``flush``: first write the
        lines still waiting, in index order (a stopped batch prints every result
        it has), else they are lost."""
        if flush and self._spill is not None:
            for index in sorted(self.waiting):
                offset, length = self.waiting[index]
                self._spill.seek(offset)
                self._out.write(self._spill.read(length))
            self._out.flush()
        if self._spill is not None:
            self._spill.close()
            self._spill = None
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)
            self.directory = None
        self.waiting.clear()


def _approvals(args: argparse.Namespace) -> dict[str, Any]:
    """The approver of every run, from the flags only (never a batch line)."""
    # lazy: `genesis --help` imports only the parsers
    from coding_genesis._cli.approver_options import approval_timeout, approver_from

    approver, timeout = approver_from(args), approval_timeout(args, asking=False)
    return {
        **({"approver": approver} if approver is not None else {}),
        **({"approval_timeout": timeout} if timeout is not None else {}),
    }


def _recording() -> dict[str, Any]:
    """Each run is recorded like a `genesis run` (transcript and run log)."""
    # lazy: `genesis --help` imports only the parsers
    from coding_genesis._cli.env import ledger_setting, run_log_path, transcript_dir

    base, log = transcript_dir(), run_log_path()
    return {
        "transcripts": str(base) if base is not None else None,
        "run_log": str(log) if log is not None else None,
        "ledger": ledger_setting(),
    }


def _progress(result: dict[str, Any], finished: int, total: int) -> str:
    width = len(str(total))
    head = f"[{finished:>{width}}/{total}] #{result['index']}"
    if result["status"] == 0:
        return f"{head} ok ({result.get('duration_s') or 0:.2f}s)"
    # lazy: `genesis --help` imports only the parsers
    from coding_genesis._failures.analysis import error_words

    # Called what it is: a cancelled or never-started run did not fail.
    detail = error_words(str(result.get("message") or ""))[:120]
    return f"{head} {ending(result)}: status {result['status']} {result['error']}: {detail}"
