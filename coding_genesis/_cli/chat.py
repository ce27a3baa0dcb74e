"""``genesis chat``: a live session in the terminal.

Each line typed is one turn of one CLI process (``agent.session()``), shown
with the live panel of ``genesis run`` and answered on stdout; each tool call
the CLI asks to make is asked inline (after the approval flags had their say).
Ctrl-C interrupts the running turn (the session lives on); a second Ctrl-C,
in the turn or at the prompt, closes the session and exits 130.  Ctrl-D or
``/exit`` closes it and exits 0.  Each turn is recorded like a ``genesis run``
(transcript, run log).
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
from typing import TYPE_CHECKING, Any, cast, get_args

from coding_genesis._cli.approver_options import add_approver_arguments
from coding_genesis._cli.common import positive_seconds, usage_error
from coding_genesis._cli.parsing import COMMAND_HELP
from coding_genesis._cli.repository import absolute_path, add_setting_sources_argument

if TYPE_CHECKING:
    import anyio
    import anyio.abc

    from coding_genesis._cli.asking import TerminalAsker, TerminalLines
    from coding_genesis._observers.progress import ProgressView
    from coding_genesis.agent import CodingGenesisAgent
    from coding_genesis.request import SendOptions
    from coding_genesis.result import RunResponse
    from coding_genesis.session import Session

__all__ = ["register"]

EXAMPLES = """\
examples:
  genesis chat --backend claude
  genesis chat --backend codex --cwd ~/src/app --approve-tools read
  genesis chat --deny-commands "rm -rf *" "git push*" --writes-under .
  genesis chat --resume 4bb9969a-70c4-4d11-8b4a-353abc836831

type a prompt and Enter: the turn runs with a live panel on stderr, its answer
goes to stdout.  Each tool call the CLI asks to make is asked inline:
  Allow Bash `pytest -q`? [y]es / [n]o / [a]lways for this session:
(n <why> tells the model why; a allows this exact command, or a write of exactly
these paths, for the rest of the session); the approval flags settle what they
can first.  What the CLI does by itself between turns (a background task that
came back) is a turn of its own: its questions are asked in place of the
prompt, its answer shown when it ends.
Ctrl-C interrupts the running turn; a second Ctrl-C (in the turn or at the
prompt) closes the session and exits 130; Ctrl-D or /exit closes it (exit 0).
/help lists chat's own commands (/help, /clear, /model, /permissions, /exit),
never sent to the model: /model NAME and /permissions LEVEL switch the next turns
(a switch the CLI cannot make is refused in words at the next turn, which does
not run; the chat goes on).
Each turn is recorded like a `genesis run` (see `genesis runs`).
stdin must be a terminal (for scripts: `genesis run`, or agent.session()).
"""

#: What the prompt looks like (on stderr: stdout holds only answers).
PROMPT = "> "
#: The lines that close the session.
EXIT_WORDS = frozenset({"/exit", "/quit"})
#: chat's own commands (never sent to the model), as /help lists them.
CHAT_HELP = """genesis chat's own commands (any other line, /compact included, goes to the CLI):
  /help          this list
  /clear         clear the screen (the conversation goes on)
  /model NAME    the next turns run on model NAME
  /permissions LEVEL   the next turns' level: read-only, edit or full
  /exit, /quit   close the session (also Ctrl-D)
Ctrl-C interrupts the running turn; Ctrl-C twice leaves."""
#: Clear the screen and put the cursor home (what `clear` writes).
_CLEAR = "\x1b[H\x1b[2J"


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "chat",
        help=COMMAND_HELP["chat"],
        description="Hold a conversation with one coding-agent CLI process (claude, "
        "codex): one turn per line, each tool call approved inline.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--backend",
        "-b",
        default=None,
        help="a backend with a two-way protocol: claude, codex, failer, gemini, opencode, "
        "qwen, or an ACP agent of --backends-file (default: $GENESIS_BACKEND, else claude)",
    )
    parser.add_argument(
        "--backends-file",
        metavar="TOML",
        default=None,
        help="generic backends to add ([backends.NAME] tables: command, format, ...; "
        'format = "acp" for an Agent Client Protocol agent; default: $GENESIS_BACKENDS_FILE)',
    )
    parser.add_argument(
        "--timeout",
        "-t",
        type=positive_seconds,
        default=1800.0,
        help="wall-clock limit of each turn, questions included (default 1800)",
    )
    parser.add_argument(
        "--idle-timeout", type=positive_seconds, default=None, help="end a silent turn"
    )
    parser.add_argument(
        "--grace",
        type=positive_seconds,
        default=5.0,
        help="seconds between SIGTERM and SIGKILL, and for an interrupt (default 5)",
    )
    parser.add_argument(
        "--cwd", "-C", type=absolute_path, default=None, help="working directory of the agent"
    )
    parser.add_argument("--model", "-m", default=None, help="model name passed to the CLI")
    parser.add_argument(
        "--cli-path",
        default=None,
        help="path of the CLI binary (default: $GENESIS_<BACKEND>_PATH, else found on PATH)",
    )
    parser.add_argument("--resume", default=None, help="continue this CLI session id")
    parser.add_argument(
        "--permissions",
        choices=("read-only", "edit", "full"),
        default=None,
        help="what the agent may do, enforced by the CLI (default: the CLI's own setting)",
    )
    parser.add_argument(
        "--quiet", "-q", action="store_true", help="no panel and no summaries on stderr"
    )
    parser.add_argument(
        "--transcript-dir",
        metavar="DIR",
        default=None,
        help='where the turns\' run directories go, or "off" (default: $GENESIS_TRANSCRIPTS, '
        "else $XDG_STATE_HOME/coding-genesis/runs)",
    )
    add_setting_sources_argument(parser)
    add_approver_arguments(parser)
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    # lazy: `genesis --help` imports only the parsers
    import anyio

    from coding_genesis._cli.approver_options import approval_timeout, approver_from
    from coding_genesis._cli.asking import TerminalAsker, TerminalLines
    from coding_genesis._cli.env import (
        backends_file,
        cli_path_for,
        default_backend,
        ledger_setting,
        node_path_for,
        run_log_path,
        transcript_dir,
    )
    from coding_genesis._cli.run import add_backends_file, warn_of_repository
    from coding_genesis.agent import CodingGenesisAgent
    from coding_genesis.errors import AgentUsageError, ConfigError

    if not sys.stdin.isatty():
        return usage_error(
            "chat",
            "stdin is not a terminal: genesis chat reads prompts and answers there "
            "(for a script: genesis run, or agent.session() in Python)",
        )
    backend = args.backend or default_backend()
    lines = TerminalLines(sys.stdin.fileno())
    asker = TerminalAsker(lines, scope="session")
    try:
        add_backends_file(backends_file(args.backends_file))
        agent = CodingGenesisAgent(
            backend,
            timeout=args.timeout,
            idle_timeout=args.idle_timeout,
            grace=args.grace,
            cwd=args.cwd,
            model=args.model,
            cli_path=cli_path_for(backend, args.cli_path),
            node_path=node_path_for(backend),
            transcripts=transcript_dir(args.transcript_dir),
            run_log=run_log_path(),
            ledger=ledger_setting(),
        )
        protocol = agent.backend.control()
        session = agent.session(
            resume=args.resume,
            # the panel's last line follows the text as it is written, where the CLI says it
            partial=protocol is not None and protocol.deltas,
            permissions=args.permissions,
            approver=approver_from(args, asker),
            approval_timeout=approval_timeout(args, asking=True),
            # the CLI's questions to the person, where they reach the session
            asker=asker.ask_user if _asks_questions(agent) else None,
            question_timeout=approval_timeout(args, asking=True),  # a person's time
            setting_sources=args.setting_sources,
        )
    except (ConfigError, AgentUsageError) as exc:
        return usage_error("chat", str(exc))
    agent.subscribe(asker.heard)
    warn_of_repository(agent, args.setting_sources, "chat")
    chat = Chat(agent, session, lines, asker, quiet=args.quiet)
    try:
        return anyio.run(chat.main)
    except KeyboardInterrupt:  # before the signal watcher was up, or after
        return 130


class Chat:
    """The prompt loop and its signals (see the module's docstring)."""

    def __init__(
        self,
        agent: CodingGenesisAgent,
        session: Session,
        lines: TerminalLines,
        asker: TerminalAsker,
        *,
        quiet: bool,
    ) -> None:
        self.agent = agent
        self.session = session
        self.lines = lines
        self.asker = asker
        self.quiet = quiet
        #: The exit code: 0 (Ctrl-D, /exit), the last turn's when the CLI ended
        #: the session, 128+N for a signal.
        self.code = 0
        self._last = 0
        #: A Ctrl-C was pressed since the last prompt was sent: the next one leaves.
        self.armed = False
        self.opened = False
        self.in_turn = False
        self._outer: anyio.CancelScope | None = None
        self._reading: anyio.CancelScope | None = None
        #: The prompt's read was given up for the terminal's other user (a
        #: question, or the answer of a turn the CLI started): prompt again.
        self._yielded = False
        #: Set while nobody reads the prompt (a reader of the terminal waits on it).
        self._not_reading: anyio.Event | None = None
        #: What /model and /permissions asked of the next turn (the session
        #: holds a switch once a turn made it).
        self.switch: SendOptions = {}
        asker.before_asking = self._give_way

    async def main(self) -> int:
        import anyio  # lazy: `genesis --help` imports only the parsers

        self._outer = anyio.CancelScope()
        async with anyio.create_task_group() as tg:
            await tg.start(self._signals, tg)
            with self._outer:
                async with self.session as session:
                    self.opened = True
                    self._note(
                        f"genesis chat: {self.agent.backend_name} session open; "
                        "Ctrl-C interrupts a turn, Ctrl-C twice, Ctrl-D or /exit leaves"
                    )
                    tg.start_soon(self._cli_turns, session)
                    await self._loop(session)
            tg.cancel_scope.cancel()
        self._goodbye()
        return self.code

    async def _loop(self, session: Session) -> None:
        while True:
            if session.closed:
                self._note("genesis chat: the CLI's process ended; the session is closed")
                self.code = self._last or 1
                return
            line = await self._prompt()
            if line is None:  # Ctrl-D
                _err("")
                return
            text = line.strip()
            if text in EXIT_WORDS:
                return
            if text == "/help":
                _err(CHAT_HELP)
                continue
            if text == "/clear":
                _err(_CLEAR, end="")
                continue
            command, _, argument = text.partition(" ")
            if command in ("/model", "/permissions"):
                self._switching(command[1:], argument.strip())
                continue
            if text:
                self.armed = False
                self._last = await self._turn(session, line)

    def _switching(self, option: str, value: str) -> None:
        """/model NAME, /permissions LEVEL: asked of the next turn, whose
        capability check refuses a switch the CLI cannot make (in words)."""
        # lazy: `genesis --help` imports only the parsers
        from coding_genesis.options import Permissions

        levels = get_args(Permissions)
        if option == "model" and value and not value.startswith("-"):
            self.switch["model"] = value
        elif option == "permissions" and value in levels:
            self.switch["permissions"] = cast("Permissions", value)
        else:
            what = "NAME" if option == "model" else "LEVEL (" + ", ".join(levels) + ")"
            _err(f"genesis chat: /{option} takes a {what}; nothing switched")
            return
        self._note(f"genesis chat: {option} {value} asked of the next turn (it holds after)")

    async def _prompt(self) -> str | None:
        """The next prompt; "" when Ctrl-C cleared the line.  The read gives
        way to a question of a turn the CLI started by itself (one reader of
        the terminal at a time: what is typed answers the question, never
        becomes a prompt), then the prompt is shown again."""
        import anyio

        while True:
            _err(PROMPT, end="")
            with anyio.CancelScope() as scope:
                self._reading = scope
                try:
                    return await self.lines.read()
                finally:
                    self._reading = None
                    if self._not_reading is not None:
                        self._not_reading.set()
            if not self._yielded:
                break
            self._yielded = False
            await self.asker.settled(within=float("inf"))
        self.lines.discard()
        _err("")
        self._note("(Ctrl-C again to leave; Ctrl-D or /exit closes the session)")
        return ""

    def _yield_prompt(self) -> bool:
        """The terminal is needed (a question, an answer to show): the prompt's
        read gives way, and the prompt comes back after.  False: no prompt
        was being read."""
        if self._reading is None or self._yielded:
            return False
        self._yielded = True
        self._reading.cancel()
        _err("")  # off the prompt's line
        return True

    async def _give_way(self) -> None:
        """Before a question: the prompt's read has ended (two readers of one
        terminal would fight over each key)."""
        import anyio

        self._not_reading = anyio.Event()
        try:
            if self._yield_prompt():
                await self._not_reading.wait()
        finally:
            self._not_reading = None

    async def _cli_turns(self, session: Session) -> None:
        """Shows each turn the CLI started by itself, when it ends."""
        # lazy: `genesis --help` imports only the parsers
        from coding_genesis.errors import AgentUsageError

        while True:
            try:
                result = await session.cli_turn()
            except AgentUsageError:  # the session closed
                return
            self._yield_prompt()
            self._note(f"genesis chat: the CLI worked by itself (turn {result.turn}):")
            self._last = self._show(result.to_dict())

    async def _turn(self, session: Session, prompt: str) -> int:
        """One turn with the live panel; its answer printed; its exit code."""
        import anyio

        # lazy: `genesis --help` imports only the parsers
        from coding_genesis._observers.progress import ProgressView, RunTracker

        tracker = RunTracker(self.agent.backend_name, self.agent.timeout)
        view = ProgressView(tracker) if not self.quiet and sys.stderr.isatty() else None
        self.asker.view = view
        self.in_turn = True
        result: RunResponse | None = None
        try:
            # keys typed during the turn are not drawn into the panel: they
            # are shown at the next prompt
            hidden = self.lines.hidden() if view is not None else contextlib.nullcontext()
            with hidden, view if view is not None else contextlib.nullcontext():
                async with anyio.create_task_group() as tg:
                    if view is not None:
                        tg.start_soon(_tick, view)
                    switch, self.switch = self.switch, {}
                    async with session.stream(prompt, **switch) as turn:
                        async for event in turn:
                            tracker.on_event(event)
                    tg.cancel_scope.cancel()
                self.asker.withdraw()  # a question the turn's end left open
                await self.asker.settled()
                if turn.result is not None:
                    result = turn.result.to_dict()
        finally:
            self.in_turn = False
            self.asker.view = None
            self.asker.withdraw()
        return self._show(result) if result is not None else 1

    def _show(self, result: RunResponse) -> int:
        # lazy: `genesis --help` imports only the parsers
        from coding_genesis._cli.common import status_exit_code
        from coding_genesis._cli.render import cli_words, summary_lines, terminal_line
        from coding_genesis._util.display import printable

        status = result["status"]
        if status == 0:
            if result["message"]:
                print(printable(result["message"]), flush=True)
        elif result["error"] == "interrupted":
            _err("[interrupted]")
        else:
            if result["message"]:
                _err(printable(cli_words(result["message"])))
            _err(f"[status {status}: {result['error']}]")
        if not self.quiet:
            tty = sys.stderr.isatty()
            for line in summary_lines(result):
                _err(terminal_line(line) if tty else printable(line))
        return status_exit_code(status)

    async def _signals(
        self, tg: anyio.abc.TaskGroup, *, task_status: anyio.abc.TaskStatus[None]
    ) -> None:
        """Ctrl-C: interrupt the turn, or clear the prompt; a second one (or
        SIGTERM, SIGHUP) closes the session."""
        import anyio

        # lazy: `genesis --help` imports only the parsers
        from coding_genesis._cli.common import STOP_SIGNALS, stop_signal_name

        with anyio.open_signal_receiver(*STOP_SIGNALS) as signals:
            task_status.started()
            async for signum in signals:
                if signum != signal.SIGINT or self.armed or not self.opened:
                    _err("")
                    self._note(f"genesis chat: {stop_signal_name(signum)}: closing the session…")
                    self.code = 130 if signum == signal.SIGINT else 128 + signum
                    if self._outer is not None:
                        self._outer.cancel()
                    continue
                self.armed = True
                if self.in_turn or self.session.turn_running:
                    _err("")
                    self._note(
                        "genesis chat: interrupting the turn (Ctrl-C again closes the session)"
                    )
                    tg.start_soon(self._interrupt)
                elif self._reading is not None:
                    self._reading.cancel()

    async def _interrupt(self) -> None:
        # lazy: `genesis --help` imports only the parsers
        from coding_genesis.errors import AgentUsageError

        with contextlib.suppress(AgentUsageError):  # the session closed meanwhile
            await self.session.interrupt()

    def _goodbye(self) -> None:
        # lazy: `genesis --help` imports only the parsers
        from coding_genesis._util.display import printable
        from coding_genesis._util.words import counted, money

        session = self.session
        if self.quiet or not self.opened:
            return
        parts = [counted(session.turns, "turn")]
        tokens = sum(session.usage.get(k, 0) for k in ("input_tokens", "output_tokens"))
        if tokens:
            parts.append(counted(tokens, "token", short=True))
        if session.cost_usd is not None:
            parts.append(money(session.cost_usd))
        text = f"genesis chat: session closed - {' - '.join(parts)}"
        if session.session_id:
            text += f" - continue it: genesis chat --resume {session.session_id}"
        _err(printable(text))

    def _note(self, text: str) -> None:
        if not self.quiet:
            _err(text)


async def _tick(view: ProgressView) -> None:
    import anyio  # lazy: `genesis --help` imports only the parsers

    while True:
        view.refresh()
        await anyio.sleep(0.125)


def _err(text: str, *, end: str = "\n") -> None:
    with contextlib.suppress(OSError, ValueError):
        print(text, end=end, file=sys.stderr, flush=True)


def _asks_questions(agent: CodingGenesisAgent) -> bool:
    """The backend's questions to the user reach a session (else no asker:
    the capability check would refuse the session)."""
    protocol = agent.backend.control()
    return protocol is not None and protocol.asks_questions
