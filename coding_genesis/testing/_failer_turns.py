"""The failer's turns as claude plays them: tool calls asked about, and its two-way mode.

``failer.py`` hands a prompt here when a tool command (``/write``, ``/bash``,
``/json``) comes first in it or an output schema is given (``--json-schema``),
and every turn of a live session (``--input-format stream-json``: claude's
control protocol, claude's side of which is ``_claude_side.py``).  What it
does is what claude 2.1.330 does (the recordings in ``tests/fakes/recordings/twoway``):

* A tool call is asked about through the registered ``PreToolUse`` hook (an
  approver decides every call), else claude's own rules decide: under
  ``--permissions`` read-only no write or command, edit: writes under the cwd,
  full: everything (a live session's ``set_model``, ``apply_flag_settings`` and
  ``set_permission_mode`` switch its model and level between turns, as
  claude's do); a plain ``echo``, ``ls``, ``pwd`` or ``cat`` runs unasked; what
  the rules leave open is asked with ``can_use_tool`` (a one-shot run refuses it,
  as ``claude -p`` does).  An allow-always answer's rules hold for the session.
* The call runs only once allowed, with the input as answered: ``/write`` writes
  the file, ``/bash`` runs the command without a shell (its words split as a
  shell splits them; no pipes or redirections), ``/tool`` calls the caller's
  function through ``mcp_message``, ``/agent`` runs a subagent of
  ``agents=`` (between ``SubagentStart`` and ``SubagentStop``).  An interrupt stops it.
* ``UserPromptSubmit``, ``PostToolUse``/``PostToolUseFailure``, ``Stop`` and
  ``PreCompact`` hooks are called where claude calls them (a ``Stop`` hook that blocks makes the failer
  answer again, at most 8 times in a row); what hooks add as context is said
  in the answer.
* With ``--json-schema`` the answer is a ``StructuredOutput`` call: the
  ``/json`` value, else a small value the schema accepts.  Unlike claude, the
  failer does not check it, so ``/json`` can answer one that does not match.
* A conversation's prompts are kept in the failer's private state directory
  (``<hash>.session``, 0600, dropped after 24 hours unused), so ``--resume``
  continues it (``/history`` says them); an id it never held fails as claude's
  does ("No conversation found").
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING or __package__:
    from coding_genesis.testing._claude_side import (
        INTERRUPTED_TURN,
        ClaudeSide,
        example,
        sdk_servers,
    )
else:  # run from failer.py's directory
    from _claude_side import INTERRUPTED_TURN, ClaudeSide, example, sdk_servers

_COMMAND = re.compile(
    r"(?<![\w/])/(fail-then-succeed|fail|timeout|partial|rate-limit|stderr"
    r"|write|bash|tool|agent|json|compact|history)(?![\w-])"
)
#: Commands of a live session only (a one-shot run answers them as plain text).
_LIVE_ONLY = frozenset({"tool", "agent", "compact", "history"})
_FAILURES = frozenset({"fail-then-succeed", "fail", "timeout", "partial", "rate-limit", "stderr"})
#: The tools a read-only session has not (claude.py's LEVELS: --disallowedTools).
_REMOVED_READ_ONLY = frozenset({"Bash", "Write"})
#: Commands claude runs unasked (read-only, no shell).
_PLAIN_COMMANDS = frozenset({"echo", "ls", "pwd", "cat", "true", "date", "whoami"})
#: ``Stop`` hooks that block in a row before the turn ends anyway.
_MAX_STOPS = 8
#: What a command's output is cut to, as claude cuts a tool's output.
_OUTPUT_CAP = 30_000
_MODES = {"edit": "acceptEdits", "full": "acceptEdits"}

#: What a tool's run gives: its text for the model, whether it failed, the
#: answer's words about it; None: the turn ended meanwhile.
Ran = tuple[str, bool, str] | None


class Failer(Protocol):
    """What this module uses of ``failer.py`` (handed in: it runs as ``__main__``)."""

    def respond(self, run: Any, prompt: str, args: argparse.Namespace) -> int: ...

    def error_body(self, code: str, message: str, mode: str, **extra: Any) -> dict[str, Any]: ...

    def now(self) -> str: ...

    def state_dir(self, explicit: str | None) -> str: ...

    def private_dir(self, state_dir: str) -> None: ...


class FailerSide(ClaudeSide):
    """One run or live session of the failer, as claude plays it (see the module's docstring)."""

    def __init__(self, args: argparse.Namespace, failer: Failer, *, live: bool) -> None:
        fork = args.resume and args.fork_session
        super().__init__(
            (args.session_id or str(uuid.uuid4())) if fork or not args.resume else args.resume,
            prefix="failer",
            usage={"input_tokens": 0, "output_tokens": 0},
            cost=0.0,
            sdk_servers=sdk_servers(args.mcp_config) if live else (),
            read_stdin=live,
            finish_at_eof=True,
        )
        self.args, self.failer, self.live = args, failer, live
        self.partial = bool(getattr(args, "include_partial_messages", False))
        if getattr(args, "agents", None):
            given = json.loads(args.agents)
            self.agents.update(given if isinstance(given, dict) else {})
        self.schema: dict[str, Any] | None = None
        if args.json_schema is not None:
            schema = json.loads(args.json_schema)
            self.schema = schema if isinstance(schema, dict) else {}
        self.permissions: str | None = args.permissions
        self.allowed = frozenset(t for t in (args.allowedTools or "").split(",") if t)
        #: Rules an allow-always answer added: (tool, command or None).
        self.rules: set[tuple[str, str | None]] = set()
        self.history: list[str] = []
        #: The prompts of :attr:`history` a ``/compact`` folded (no longer in the context).
        self.compacted = 0
        #: A live session's ``/partial``: the CLI exits mid-turn, as a crash does.
        self.exit_now = False
        self._started = time.monotonic()
        self._notes: list[str] = []
        self._denials: list[dict[str, Any]] = []
        #: What its init line names; a live session's ``set_model`` switches it.
        self.model = "process-failer"
        #: The tool rules of the last ``apply_flag_settings`` (a live switch of level).
        self._flag_rules: dict[str, Any] = {}

    # -- lines -------------------------------------------------------------------

    def init(self) -> None:
        tools = ["Bash", "Write"] + [
            f"mcp__{server}__{name}" for server, names in self.host_tools.items() for name in names
        ]
        servers = [{"name": name, "status": "connected"} for name in self.host_tools]
        self.emit(
            {
                "type": "system",
                "subtype": "init",
                "session_id": self.session_id,
                "model": self.model,
                "cwd": os.getcwd(),
                "tools": tools if self.live else [],
                "mcp_servers": servers,
                "permissionMode": _MODES.get(self.permissions or "", "default"),
            }
        )

    def result(
        self, text: str | None, subtype: str = "success", is_error: bool | None = None, **extra: Any
    ) -> None:
        extra.setdefault("permission_denials", self._denials)
        extra.setdefault("duration_ms", int((time.monotonic() - self._started) * 1000))
        super().result(text, subtype, is_error, **extra)

    def end_interrupted(self) -> None:
        """A turn interrupted with no tool running."""
        self.emit(self.message("user", {"type": "text", "text": INTERRUPTED_TURN}))
        self.result(None, "error_during_execution", terminal_reason="aborted_streaming")

    def invalid(self, command: str, what: str) -> int:
        body = self.failer.error_body("INVALID_COMMAND", f"/{command}: {what}", f"/{command}")
        text = json.dumps(body, ensure_ascii=False)
        self.say(text)
        self.result(text, "error_during_execution")
        sys.stderr.write(f"Error: INVALID_COMMAND: /{command} {what}\n")
        return 2

    # -- a turn ------------------------------------------------------------------

    def turn(self, prompt: str) -> int:
        """Answer one prompt; the exit code a one-shot run ends with."""
        self._started, self._notes, self._denials = time.monotonic(), [], []
        if self.live and self._prompt_blocked(prompt):
            return 0
        self.init()
        match = _COMMAND.search(prompt)
        command = match.group(1) if match else None
        if command in _LIVE_ONLY and not self.live:
            command = None
        if command is None or command in _FAILURES:
            self.exit_now = self.live and command == "partial"
            return self.failer.respond(_Reply(self), prompt, self.args)
        assert match is not None
        rest = prompt[match.end() :].split("\n", 1)[0].strip()
        if command == "json":
            try:
                value = json.loads(rest)
            except ValueError:
                return self.invalid(command, "expects a JSON value")
            self.answer(value=value)
        elif command == "history":
            said = " | ".join(self.history)
            self.answer(f"{len(self.history)} earlier prompts in this conversation: {said}")
        elif command == "compact":
            self.compact()
        else:
            return self.tool_command(command, rest)
        return 1 if self.last_error else 0

    def _prompt_blocked(self, prompt: str) -> bool:
        """The ``UserPromptSubmit`` hook, as claude calls it before the turn: a
        block answers why (the prompt goes no further), a context is noted."""
        out = self.hook("UserPromptSubmit", {"prompt": prompt})
        if out.get("decision") == "block":
            reason = out.get("reason") or ""
            self.result(
                f"UserPromptSubmit operation blocked by hook:\n{reason}\n\nOriginal prompt: {prompt}"
            )
            return True
        specific = out.get("hookSpecificOutput")
        if isinstance(specific, dict) and specific.get("additionalContext"):
            context = specific["additionalContext"]
            self._notes.append(f"UserPromptSubmit hook additional context: {context}")
        return False

    def tool_command(self, command: str, rest: str) -> int:
        if command == "write":
            path, _, text = rest.partition(" ")
            if not path:
                return self.invalid(command, "expects a path and the text")
            tool_input = {"file_path": os.path.join(os.getcwd(), path), "content": text + "\n"}
            done = self.call("Write", tool_input, self._write)
        elif command == "agent":
            name, _, task = rest.partition(" ")
            if name not in self.agents or not task:
                known = ", ".join(self.agents) or "none"
                return self.invalid(command, f"expects a subagent and its task (agents=: {known})")
            tool_input = {"subagent_type": name, "description": name, "prompt": task}
            done = self.call("Agent", tool_input, self._subagent)
        elif command == "bash":
            if not rest:
                return self.invalid(command, "expects a command")
            tool_input = {"command": rest, "description": "Run a command for the failer"}
            done = self.call("Bash", tool_input, self._bash)
        else:
            name, _, raw = rest.partition(" ")
            try:
                arguments = json.loads(raw) if raw.strip() else {}
            except ValueError:
                arguments = None
            if not isinstance(arguments, dict):
                return self.invalid(command, "expects a tool's name and a JSON object")
            server = next((s for s, names in self.host_tools.items() if name in names), None)
            if server is None:
                names = ", ".join(n for names in self.host_tools.values() for n in names)
                return self.invalid(command, f"no host tool {name!r} (tools=: {names or 'none'})")
            done = self.call(f"mcp__{server}__{name}", arguments, self._host(server, name))
        if done is not None:
            self.answer(done[2])
        return 1 if self.last_error else 0

    def answer(
        self, message: str = "", *, value: Any = None, body: dict[str, Any] | None = None
    ) -> None:
        """The turn's answer (a message, a success ``body``, or ``value``),
        through the ``Stop`` hooks, then its result."""
        body = body or {"status": "success", "message": message, "timestamp": self.failer.now()}
        text, extra = self._say(body, value)
        for round_ in range(_MAX_STOPS):
            said = {"stop_hook_active": round_ > 0, "last_assistant_message": text}
            out = self.hook("Stop", said) if self.live else {}
            if out.get("decision") != "block" or self.interrupt_pending:
                break
            reason = str(out.get("reason") or "")
            feedback = self.message(
                "user", {"type": "text", "text": f"Stop hook feedback:\n{reason}"}
            )
            self.emit({**feedback, "isSynthetic": True})
            again = f"Went on, as the Stop hook asked: {reason}"
            text, extra = self._say({**body, "message": again}, value)
        if self.interrupt_pending:
            self.interrupt_pending = False
            self.end_interrupted()
            return
        self.result(text, **extra)

    def _say(self, body: dict[str, Any], value: Any) -> tuple[str, dict[str, Any]]:
        if self.schema is not None:
            chosen = value if value is not None else example(self.schema)
            call = self.tool_use("StructuredOutput", chosen)
            self.tool_result(call, "Structured output provided successfully")
            return json.dumps(chosen, ensure_ascii=False), {"structured_output": chosen}
        if value is not None:
            text = json.dumps(value, ensure_ascii=False)
        else:
            if self._notes:
                body = {**body, "message": f"{body['message']} ({'; '.join(self._notes)})"}
            text = json.dumps(body, ensure_ascii=False)
        self.say(text)
        return text, {}

    def compact(self) -> None:
        status = {"type": "system", "subtype": "status", "session_id": self.session_id}
        self.emit({**status, "status": "compacting"})
        out = self.hook("PreCompact", {"trigger": "manual", "custom_instructions": None})
        if out.get("decision") == "block":
            error = "skipped: Compaction blocked by PreCompact hook: [callback]"
            self.emit(
                {**status, "status": None, "compact_result": "failed", "compact_error": error}
            )
            self.answer(f"Compaction blocked by the PreCompact hook: {out.get('reason') or ''}")
            return
        self.emit({**status, "status": None, "compact_result": "success"})
        before = self.context_usage()["totalTokens"]
        self.compacted = len(self.history) + 1  # this prompt too
        boundary = {"trigger": "manual", "pre_tokens": before, "post_tokens": 0}
        self.emit(
            {
                "type": "system",
                "subtype": "compact_boundary",
                "session_id": self.session_id,
                "compact_metadata": boundary,
            }
        )
        self.answer("Compacted the conversation")

    def context_usage(self) -> dict[str, Any]:
        """The context: 25 tokens a prompt since the last ``/compact``."""
        used = 25 * max(len(self.history) - self.compacted, 0)
        return {"totalTokens": used, "maxTokens": 200_000, "percentage": used / 2000}

    # -- one tool call -------------------------------------------------------------

    def call(self, tool: str, tool_input: dict[str, Any], run: Callable[..., Ran]) -> Ran:
        """Ask about one tool call as claude does, run it once allowed (with the
        input as answered), tell the hooks.  At read-only a removed tool is
        refused first: claude's ``--disallowedTools`` takes it away, whatever a
        hook, an approver or a rule would say (measured on claude 2.1.330)."""
        if self.permissions == "read-only" and tool in _REMOVED_READ_ONLY:
            why = f"No such tool available: {tool}. {tool} is disabled for this session"
            return self._refuse(self.tool_use(tool, tool_input), tool, tool_input, why)
        return self._asked(tool, tool_input, run)

    def _asked(self, tool: str, tool_input: dict[str, Any], run: Callable[..., Ran]) -> Ran:
        call = self.tool_use(tool, tool_input)
        decided = None
        if self.live and self.hook_id is not None:
            mode = _MODES.get(self.permissions or "", "default")
            data = {"permission_mode": mode, "tool_name": tool, "tool_input": tool_input}
            rid = self.hook_request("PreToolUse", data, call)
            assert rid is not None
            answer = self.answer_of(rid, True, call)
            if answer.got != "answer":
                return None
            if answer.context:
                self._notes.append(f"PreToolUse:{tool} hook additional context: {answer.context}")
            if answer.decision == "deny" or (answer.stop and answer.decision != "allow"):
                refused = self._refuse(call, tool, tool_input, answer.message, hook=True)
                if answer.stop:
                    self.result("", terminal_reason="hook_stopped")
                    return None
                return refused
            tool_input = answer.input if answer.input is not None else tool_input
            decided = answer.decision
        if decided != "allow":
            rule = self._rules_say(tool, tool_input)
            if rule is False:
                why = f"Permission to use {tool} has been denied (permissions={self.permissions})."
                return self._refuse(call, tool, tool_input, why)
            if rule is None and not self.live:
                why = f"Claude requested permissions to use {tool}, but you haven't granted it yet."
                return self._refuse(call, tool, tool_input, why)
            if rule is None:
                reason, suggestions = self._question(tool, tool_input)
                rid = self.can_use_tool(tool, tool_input, call, reason, suggestions)
                answer = self.answer_of(rid, False, call)
                if answer.got != "answer":
                    return None
                if answer.decision != "allow" and answer.stop:
                    self._denials.append({"tool_name": tool, "tool_use_id": call})
                    self.interrupted(call)
                    return None
                if answer.decision != "allow":
                    return self._refuse(call, tool, tool_input, answer.message)
                tool_input = answer.input if answer.input is not None else tool_input
                self._remember(answer.permissions)
        ran = run(tool_input, call)
        if ran is None:
            return None
        text, failed, _summary = ran
        if self.live:
            self._post_tool(tool, tool_input, call, text, failed)
        self.tool_result(call, text, failed)
        return ran

    def _post_tool(
        self, tool: str, tool_input: dict[str, Any], call: str, text: str, failed: bool
    ) -> None:
        data: dict[str, Any] = {"tool_name": tool, "tool_input": tool_input}
        data |= {"error": text} if failed else {"tool_response": {"stdout": text}}
        event = "PostToolUseFailure" if failed else "PostToolUse"
        out = self.hook(event, data, call)
        if out.get("decision") == "block":
            self._notes.append(f"{event}:{tool} hook blocking error: {out.get('reason') or ''}")
        specific = out.get("hookSpecificOutput")
        if isinstance(specific, dict) and specific.get("additionalContext"):
            context = specific["additionalContext"]
            self._notes.append(f"{event}:{tool} hook additional context: {context}")

    def _refuse(
        self, call: str, tool: str, tool_input: dict[str, Any], why: str, hook: bool = False
    ) -> Ran:
        text = f"PreToolUse:{tool} hook error: {why}" if hook else why
        self.tool_result(call, text, True)
        self._denials.append({"tool_name": tool, "tool_use_id": call, "tool_input": tool_input})
        return text, True, f"{tool} was refused: {why}"

    def _rules_say(self, tool: str, tool_input: Mapping[str, Any]) -> bool | None:
        """claude's own rules: allowed, refused outright (False) or to be asked (None)."""
        command = tool_input.get("command") if tool == "Bash" else None
        if any(t == tool and c in (None, command) for t, c in self.rules) or tool in self.allowed:
            return True
        if self.permissions == "full":
            return True
        if tool == "Write" and self.permissions == "edit":
            path = os.path.realpath(str(tool_input.get("file_path", "")))
            return True if path.startswith(os.path.realpath(os.getcwd()) + os.sep) else None
        if isinstance(command, str):
            try:
                words = shlex.split(command)
            except ValueError:
                return None
            return True if words and words[0] in _PLAIN_COMMANDS else None
        return None

    def _question(self, tool: str, tool_input: Mapping[str, Any]) -> tuple[str, list[Any]]:
        """claude's reason for asking, and its suggestions (what "always" hands back)."""
        if tool == "Bash":
            rule = {"toolName": tool, "ruleContent": tool_input.get("command")}
            reason = "This command requires approval"
        elif tool == "Write":
            return f"{tool} requires approval", [
                {"type": "setMode", "mode": "acceptEdits", "destination": "session"}
            ]
        else:
            rule, reason = {"toolName": tool}, f"{tool} requires approval"
        suggestion = {"type": "addRules", "rules": [rule], "behavior": "allow"}
        return reason, [{**suggestion, "destination": "session"}]

    def serve(self, obj: dict[str, Any]) -> None:
        """claude's switches between turns (model, level), then the rest as claude."""
        rid, request = obj.get("request_id"), obj.get("request") or {}
        subtype = request.get("subtype")
        if subtype == "set_model" and isinstance(request.get("model"), str):
            self.model = request["model"]
        elif subtype == "apply_flag_settings":
            rules = (request.get("settings") or {}).get("permissions")
            self._flag_rules = rules if isinstance(rules, dict) else {}
        elif subtype == "set_permission_mode":
            # the level the switch's rules and mode make (as claude.py's table)
            if "Write" in (self._flag_rules.get("deny") or ()):
                self.permissions = "read-only"
            elif "Bash" in (self._flag_rules.get("allow") or ()):
                self.permissions = "full"
            elif request.get("mode") == "acceptEdits":
                self.permissions = "edit"
        else:
            super().serve(obj)
            return
        answer: dict[str, Any] = {"subtype": "success", "request_id": rid, "response": {}}
        self.emit({"type": "control_response", "response": answer})

    def _remember(self, permissions: list[Any]) -> None:
        for change in permissions:
            if not isinstance(change, dict):
                continue
            if change.get("type") == "setMode" and change.get("mode") == "acceptEdits":
                self.permissions = self.permissions or "edit"
            if change.get("type") == "addRules" and change.get("behavior") == "allow":
                for rule in change.get("rules") or []:
                    if isinstance(rule, dict) and isinstance(rule.get("toolName"), str):
                        self.rules.add((rule["toolName"], rule.get("ruleContent")))

    # -- the tools ---------------------------------------------------------------

    def _write(self, tool_input: Mapping[str, Any], call: str) -> Ran:
        path, content = tool_input.get("file_path"), tool_input.get("content")
        if not isinstance(path, str) or not isinstance(content, str):
            return "InputValidationError: file_path and content must be strings", True, "no write"
        path = os.path.join(os.getcwd(), path)
        existed = os.path.exists(path)
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(content)
        except OSError as exc:
            return f"Error writing file: {exc}", True, f"Write failed: {exc}"
        shown = os.path.relpath(path) if path.startswith(os.getcwd() + os.sep) else path
        said = f"wrote {len(content.encode())} bytes to {shown}"
        if existed:
            return f"The file {path} has been updated successfully.", False, said
        return f"File created successfully at: {path}", False, said

    def _subagent(self, tool_input: Mapping[str, Any], call: str) -> Ran:
        """A subagent as claude runs one: ``SubagentStart`` (its context is what
        the subagent reads besides its task), its answer, ``SubagentStop`` (a
        block keeps it going, as ``Stop`` does a turn)."""
        name = str(tool_input.get("subagent_type"))
        definition = self.agents.get(name) or {}
        who = {"agent_id": f"{self.prefix}-agent-{call}", "agent_type": name}
        out = self.hook("SubagentStart", who)
        specific = out.get("hookSpecificOutput")
        context = specific.get("additionalContext") if isinstance(specific, dict) else None
        said = f"{name} ({definition.get('prompt', '')}) read: {tool_input.get('prompt')}"
        if context:
            said += f" [SubagentStart hook additional context: {context}]"
        for round_ in range(_MAX_STOPS):
            data = {**who, "stop_hook_active": round_ > 0, "last_assistant_message": said}
            out = self.hook("SubagentStop", data)
            if out.get("decision") != "block" or self.interrupt_pending:
                break
            said = f"{name} went on, as the SubagentStop hook asked: {out.get('reason') or ''}"
        return said, False, said

    def _bash(self, tool_input: Mapping[str, Any], call: str) -> Ran:
        command = tool_input.get("command")
        try:
            argv = shlex.split(command) if isinstance(command, str) else []
        except ValueError as exc:
            argv, command = [], f"{command} ({exc})"
        if not argv:
            return f"Error: cannot run {command!r}", True, f"Bash failed: cannot run {command!r}"
        with tempfile.TemporaryFile() as out:
            try:  # what the prompt asked, once allowed, as claude's Bash runs it (no shell)
                child = subprocess.Popen(  # noqa: S603
                    argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT
                )
            except OSError as exc:
                code = 127 if isinstance(exc, FileNotFoundError) else 126
                said = f"{argv[0]}: {exc.strerror}"
                return f"Exit code {code}\n{said}", True, f"{command} exited {code}: {said}"
            got, code = self.wait(child=child)
            if got != "done":
                child.kill()
                child.wait()
                if got == "interrupt":
                    self.interrupted(call)
                return None
            out.seek(0)
            text = out.read(_OUTPUT_CAP).decode("utf-8", "replace").rstrip("\n")
        if code != 0:
            return f"Exit code {code}\n{text}", True, f"{command} exited {code}: {text}"
        return text or "(Bash completed with no output)", False, f"ran {command}: {text}"

    def _host(self, server: str, name: str) -> Callable[..., Ran]:
        def run(arguments: dict[str, Any], call: str) -> Ran:
            got, text, failed = self.call_host_tool(server, name, arguments, call)
            if got == "interrupt":
                self.interrupted(call)
            if got != "answer":
                return None
            return text, failed, f"{name} {'failed' if failed else 'answered'}: {text}"

        return run

    # -- the conversation kept -------------------------------------------------------

    def _store(self, session_id: str | None = None) -> str:
        digest = hashlib.sha256((session_id or self.session_id).encode()).hexdigest()[:32]
        return os.path.join(self.failer.state_dir(self.args.state_dir), digest + ".session")

    def message(self, role: str, *blocks: dict[str, Any]) -> dict[str, Any]:
        """A line of the conversation; an assistant line carries the turn's
        ``uuid``, as claude's do (a fork's ``--resume-session-at`` names one)."""
        line = super().message(role, *blocks)
        if role == "assistant":
            line["uuid"] = turn_uuid(self.session_id, len(self.history))
        return line

    def load(self) -> bool:
        """The conversation ``--resume`` names (a fork's: copied, cut at
        ``--resume-session-at``); False: the failer never held it (or that turn)."""
        if not self._load():
            return False
        at = self.args.resume_session_at if self.args.fork_session else None
        if at is not None:
            turns = [turn_uuid(self.args.resume, i) for i in range(len(self.history))]
            if at not in turns:
                return False
            self.history = self.history[: turns.index(at) + 1]
        return True

    def _load(self) -> bool:
        try:
            path = self._store(self.args.resume)
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
            with open(fd, encoding="utf-8") as fh:
                prompts = json.load(fh)
        except (OSError, ValueError):
            return False
        self.history = (
            [p for p in prompts if isinstance(p, str)] if isinstance(prompts, list) else []
        )
        return True

    def remember(self, prompt: str) -> None:
        self.history.append(prompt)
        self.failer.private_dir(self.failer.state_dir(self.args.state_dir))
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
        with open(os.open(self._store(), flags, 0o600), "w", encoding="utf-8") as fh:
            json.dump(self.history, fh)

    def no_conversation(self) -> int:
        """``--resume`` of an id never held: claude's answer to the opening, exit 1."""
        while (obj := self.inbox.get()) is not None:
            if obj.get("type") == "control_request":
                break
        said = f"No conversation found with session ID: {self.session_id}"
        self.result(None, "error_during_execution", num_turns=0, errors=[said], duration_ms=0)
        sys.stderr.write(said + "\n")
        return 1


class _Reply:
    """A turn as ``failer.respond`` writes to it (its ``Reply``)."""

    def __init__(self, side: FailerSide) -> None:
        self.side = side

    def text(self, text: str) -> None:
        self.side.say(text)

    def raw(self, data: str) -> None:
        self.side.raw(data.encode())

    def sleep(self, seconds: float) -> bool:
        got, _ = self.side.wait(until=time.monotonic() + seconds)
        if got == "interrupt":
            self.side.end_interrupted()
        return got == "done"

    def result(
        self,
        body: dict[str, Any],
        *,
        is_error: bool,
        subtype: str = "success",
        api_error_status: int | None = None,
    ) -> None:
        if not is_error:
            self.side.answer(body=body)
            return
        text = json.dumps(body, ensure_ascii=False)
        self.side.say(text)
        self.side.result(text, subtype, is_error=True, api_error_status=api_error_status)


def turn_uuid(session_id: str, index: int) -> str:
    """The ``uuid`` of the assistant lines of a conversation's turn ``index``
    (from 0): the same in every process that holds the conversation."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"failer:{session_id}:{index}"))


def serve(args: argparse.Namespace, failer: Failer) -> int:
    """A live session: turns until stdin ends; exit 1 when the last turn failed."""
    side = FailerSide(args, failer, live=True)
    if args.resume and not side.load():
        return side.no_conversation()
    while (prompt := side.next_prompt()) is not None:
        code = side.turn(prompt)
        side.remember(prompt)
        if side.exit_now:
            return code
    return 1 if side.last_error else 0


def one_shot(args: argparse.Namespace, prompt: str, failer: Failer) -> int:
    """One run (``-p``) whose prompt holds a tool command or that has an output schema."""
    return FailerSide(args, failer, live=False).turn(prompt)
