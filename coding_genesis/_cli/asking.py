"""Asking a person at the terminal: lines read from it without blocking the
event loop (:class:`TerminalLines`), and an approver that asks about each tool
call inline (:class:`TerminalAsker`), for ``genesis chat`` and ``genesis run
--ask``.

The question is written on stderr with the live panel taken off the screen,
laid out by :class:`~coding_genesis._cli.question.Question` to fit the
terminal (what the CLI wants to run shown truthfully, its answers offered).
Input typed before the question is dropped, so nothing typed ahead answers it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import sys
import termios
from collections.abc import Awaitable, Callable, Iterator
from typing import TYPE_CHECKING, TypeVar

import anyio

from coding_genesis._cli.question import INLINE, Question, choices, user_answer, user_question
from coding_genesis._observers.progress import tool_summary
from coding_genesis._util.display import printable
from coding_genesis.approval import ApprovalRequest, Decision
from coding_genesis.questions import UserAnswer, UserQuestion
from coding_genesis.run_events import ApprovalEvent

if TYPE_CHECKING:
    from coding_genesis._observers.progress import ProgressView

__all__ = ["TerminalAsker", "TerminalLines"]

#: What a question at the terminal answers (a decision, an answer).
T = TypeVar("T")

#: The most typed ahead that is kept.
_TYPED_AHEAD = 65536


class TerminalLines:
    """Lines typed on the terminal ``fd`` (canonical mode: the kernel edits
    the line), read without blocking the event loop, so a read can be
    cancelled (Ctrl-C at the prompt, a question withdrawn).

    While a panel is drawn (:meth:`hidden`), keys are not echoed: the
    kernel would draw them into the panel, and a panel redrawn by moving the
    cursor up as many lines as it drew would leave its top behind.  What
    was typed meanwhile is kept and shown when the next line is read.
    """

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._buffer = b""
        #: Bytes at the start of the buffer typed while hidden, not yet shown.
        self._unshown = 0
        self._hidden = False
        #: An end of input typed ahead, after the buffer.
        self._eof = False

    async def read(self) -> str | None:
        """The next line, without its newline; None at the end of input
        (Ctrl-D on an empty line, the terminal gone)."""
        self._show_typed_ahead()
        with self._echoing():
            while b"\n" not in self._buffer:
                if self._eof:  # typed ahead: the lines before it, then the end
                    self._eof = bool(self._buffer)
                    line, self._buffer = self._buffer, b""
                    return line.decode("utf-8", "replace") if line else None
                await anyio.wait_readable(self.fd)
                try:
                    chunk = os.read(self.fd, 4096)
                except BlockingIOError:
                    continue
                except OSError as exc:
                    if exc.errno == errno.EINTR:
                        continue
                    return None  # EIO: the terminal hung up
                if not chunk:
                    line, self._buffer = self._buffer, b""
                    return line.decode("utf-8", "replace") if line else None
                self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line.decode("utf-8", "replace")

    def discard(self) -> None:
        """Drop what was typed and not yet read (the kernel's line included)."""
        self._buffer = b""
        self._unshown = 0
        self._eof = False
        with contextlib.suppress(OSError, termios.error):
            termios.tcflush(self.fd, termios.TCIFLUSH)

    @contextlib.contextmanager
    def hidden(self, *, keep: bool = True) -> Iterator[None]:
        """Keys not echoed for the body (a panel is drawn).  ``keep``: what
        was typed meanwhile is taken from the kernel, to be shown and read as
        the next line; else it stays there, for whoever reads the terminal
        next (the shell after ``genesis run``)."""
        if self._hidden or not self._set_echo(on=False):
            yield
            return
        self._hidden = True
        try:
            yield
        finally:
            self._hidden = False
            if keep:
                self._take_typed_ahead()
            self._set_echo(on=True)

    @contextlib.contextmanager
    def _echoing(self) -> Iterator[None]:
        """Echo on while a line is read inside :meth:`hidden` (a question)."""
        if not self._hidden or not self._set_echo(on=True):
            yield
            return
        try:
            yield
        finally:
            self._set_echo(on=False)

    def _foreground(self) -> bool:
        """Whether we own the terminal now.  A background job (``genesis run
        ... &``) leaves its modes alone: changing them would stop it
        (SIGTTOU), and they are the shell's."""
        try:
            return os.tcgetpgrp(self.fd) == os.getpgrp()
        except OSError:
            return False

    def _set_echo(self, *, on: bool) -> bool:
        """Turn the terminal's echo on or off; False when it is not a
        terminal, not ours now, or its echo was already off (someone else's
        setting)."""
        if not self._foreground():
            return False
        try:
            attrs = termios.tcgetattr(self.fd)
            echoing = bool(attrs[3] & termios.ECHO)
            if echoing == on:
                return on  # off already: not ours to turn back on
            attrs[3] = attrs[3] | termios.ECHO if on else attrs[3] & ~termios.ECHO
            termios.tcsetattr(self.fd, termios.TCSANOW, attrs)
        except (OSError, termios.error):
            return False
        return True

    def _take_typed_ahead(self) -> None:
        """Move what was typed unseen (whole lines and the one being typed)
        from the kernel into the buffer: the kernel hands the unfinished
        line over once the terminal leaves canonical mode for a moment."""
        if not self._foreground():
            return
        try:
            attrs = termios.tcgetattr(self.fd)
            raw = [*attrs[:6], list(attrs[6])]
            raw[3] = attrs[3] & ~termios.ICANON
            raw[6][termios.VMIN] = 0
            raw[6][termios.VTIME] = 0
            termios.tcsetattr(self.fd, termios.TCSANOW, raw)
        except (OSError, termios.error):
            return
        taken = b""
        try:
            while len(taken) < _TYPED_AHEAD:
                try:
                    chunk = os.read(self.fd, 4096)
                except BlockingIOError:
                    break
                if not chunk:
                    break
                taken += chunk
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError, termios.error):
                termios.tcsetattr(self.fd, termios.TCSANOW, attrs)
        # The kernel keeps an end of input (Ctrl-D) as a NUL: on an empty line
        # it ends the input (for chat: the session), after some text it only
        # hands the text over.
        kept = b""
        for piece in taken.split(b"\x00")[:-1]:
            kept += piece
            if not kept or kept.endswith(b"\n"):
                self._eof = True
                break
        else:
            kept += taken.rpartition(b"\x00")[2]
        if kept:
            self._buffer += kept
            self._unshown = len(self._buffer)

    def _show_typed_ahead(self) -> None:
        """Show the next line's part that was typed unseen, as if echoed."""
        if not self._unshown:
            return
        part = self._buffer[: self._unshown]
        line, newline, _ = part.partition(b"\n")
        self._unshown -= len(line) + len(newline)
        if not newline:
            self._unshown = 0
        _say(printable(line.decode("utf-8", "replace")), end="\n" if newline else "")


class TerminalAsker:
    """An approver asking a person on the terminal about each tool call, with
    the answers of :func:`~coding_genesis._cli.question.choices`, each saying
    its scope: ``[y]es`` allows this call once, ``[a]lways`` this exact
    command (or a write of exactly these paths) for the rest of the ``scope``
    (the session, the run), ``[t]ool`` every call of this tool for the rest
    of it, ``[n]o`` refuses it (``n <words>``: the model is told the words).
    The session keeps an "always" answer and settles the repeats itself
    (:meth:`heard` shows each).  One question at a time; :meth:`withdraw`
    ends the pending ones (the turn ended)."""

    def __init__(self, lines: TerminalLines, *, scope: str = "session") -> None:
        self.lines = lines
        self.scope = scope
        #: The panel to take off the screen while asking (None: none shown).
        self.view: ProgressView | None = None
        #: Awaited before a question is shown: whoever else reads the terminal
        #: (chat's prompt) gives way, so that what is typed answers the question.
        self.before_asking: Callable[[], Awaitable[None]] | None = None
        self._lock = anyio.Lock()
        self._pending: set[anyio.CancelScope] = set()
        self._quiet: anyio.Event | None = None

    async def __call__(self, request: ApprovalRequest) -> Decision:
        answered = await self._alone(lambda: self._ask(request), f"{request.tool} denied")
        if answered is None:
            return Decision.deny(
                "the question was withdrawn: the turn ended", reason="withdrawn at the terminal"
            )
        return answered

    async def ask_user(self, question: UserQuestion) -> UserAnswer:
        """An asker (``asker=``): the CLI's question to the person, shown as
        :func:`~coding_genesis._cli.question.user_question` lays it out, one
        at a time with the approvals; what is typed answers it, never a
        prompt.  A secret is not asked here (what is typed is echoed)."""
        answered = await self._alone(lambda: self._ask_user(question), "declined")
        return answered if answered is not None else UserAnswer(declined=True)

    async def _alone(self, ask: Callable[[], Awaitable[T]], unanswered: str) -> T | None:
        """``ask`` with the terminal to itself (one question at a time, chat's
        prompt gone); None when withdrawn or out of time (the caller's)."""
        scope = anyio.CancelScope()
        self._pending.add(scope)
        answered: T | None = None
        try:
            with scope:
                async with self._lock:
                    if self.before_asking is not None:
                        await self.before_asking()
                    answered = await ask()
        finally:
            self._pending.discard(scope)
            if not self._pending and self._quiet is not None:
                self._quiet.set()
            if answered is None:  # withdrawn, or no answer in time (the caller's deadline)
                _say(f"  (no answer: {unanswered})")
        return answered

    async def _ask_user(self, question: UserQuestion) -> UserAnswer:
        with self.view.paused() if self.view is not None else contextlib.nullcontext():
            self.lines.discard()  # nothing typed ahead answers the question
            above, prompt = user_question(question, *_screen())
            _say("\n".join(above))
            if question.secret:
                _say("  (a secret: genesis chat does not take one, since what is typed shows)")
                return UserAnswer(declined=True)
            _say(prompt, end="")
            line = await self.lines.read()
            if line is None:
                _say("")
                return UserAnswer(declined=True)
            return user_answer(question, line)

    def heard(self, event: object) -> None:
        """Subscribed to the agent: a call settled by an "always" answer is
        shown, though nobody was asked (the person sees what ran)."""
        if not isinstance(event, ApprovalEvent) or event.source != "always":
            return
        raw = event.extra.get("input")
        summary = tool_summary(event.tool, raw if isinstance(raw, dict) else {}, limit=INLINE)
        word = "allowed" if event.allowed else "denied"
        with self.view.paused() if self.view is not None else contextlib.nullcontext():
            _say(f"  {word} {printable(summary)} (always, for this {self.scope})")

    def withdraw(self) -> None:
        """End every question asked or waiting (each is denied)."""
        for scope in list(self._pending):
            scope.cancel()

    async def settled(self, within: float = 1.0) -> None:
        """Wait (at most ``within`` seconds) until no question is pending."""
        if self._pending:
            self._quiet = anyio.Event()
            with anyio.move_on_after(within):
                await self._quiet.wait()

    async def _ask(self, request: ApprovalRequest) -> Decision:
        with self.view.paused() if self.view is not None else contextlib.nullcontext():
            self.lines.discard()  # nothing typed ahead answers the question
            question = Question(request, choices(self.scope, request))
            above, prompt = question.render(*_screen())
            if above:
                _say("\n".join(above))
            while True:
                _say(prompt, end="")
                line = await self.lines.read()
                if line is None:
                    _say("")
                    return Decision.deny(
                        "no answer (the terminal's input ended)", reason="end of input"
                    )
                chosen = question.choice(line)
                if chosen is None:
                    _say(question.hint)
                    continue
                return chosen[0].decision(chosen[1])


def _screen() -> tuple[int, int]:
    """The terminal's columns and rows, where the question is written (stderr)."""
    try:
        size = os.get_terminal_size(sys.stderr.fileno())
    except (OSError, ValueError):
        size = shutil.get_terminal_size()
    return size.columns, size.lines


def _say(text: str, *, end: str = "\n") -> None:
    with contextlib.suppress(OSError, ValueError):
        print(text, end=end, file=sys.stderr, flush=True)
