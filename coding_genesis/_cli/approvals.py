"""``genesis approvals``: the approval inbox of a running ``genesis serve``,
from the terminal (list, answer, watch).

A client of the server's HTTP API like any other (the standard library's
``http.client``: no extra needed), so an answer given here is one given over
the API, recorded with the channel ``cli``.  It finds the server as a client
on this machine does: ``server.json`` and ``token`` in the server's private
state directory (or ``--url`` and ``GENESIS_SERVE_TOKEN`` / ``--token-file``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from coding_genesis._cli.common import usage_error
from coding_genesis._cli.repository import absolute_path
from coding_genesis._util.display import printable

if TYPE_CHECKING:  # `genesis --help` imports this module: http.client costs ~20 ms
    import http.client

__all__ = ["register"]

EXAMPLES = """\
examples:
  genesis approvals                               what waits for an answer now
  genesis approvals list --all --json             every approval, settled ones too
  genesis approvals answer 3f2a allow             the approval whose id begins 3f2a
  genesis approvals answer 3f2a deny --message "not on main" --by alice
  genesis approvals watch                         each approval as it is asked and settled

It talks to the `genesis serve` of this machine (its state directory's server.json
and token; --state-dir, or --url with GENESIS_SERVE_TOKEN or --token-file).  The
first answer wins, whoever gives it (the API, this command, a dashboard); an
approval past its deadline (or pending when its server stopped) is expired and
takes no answer.  Exit codes: 0 done, 1 refused (unknown, already answered,
expired), 2 usage, or the server cannot be reached.
"""

#: What a request to the server may take (a watch waits as long as it runs).
TIMEOUT = 30.0
#: The answers, as typed and as the API names them.
DECISIONS = {
    "allow": "allow",
    "always": "allow_always",
    "allow-always": "allow_always",
    "deny": "deny",
}


class Unreachable(Exception):
    """The server cannot be found or reached."""


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "approvals",
        help="the approval inbox of genesis serve: list, answer, watch",
        description="List, answer and watch the tool calls that wait in the approval inbox "
        "of a running genesis serve.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    where = parser.add_argument_group("the server")
    where.add_argument(
        "--state-dir",
        type=absolute_path,
        default=None,
        help="the server's state directory (default $XDG_STATE_HOME/coding-genesis/serve)",
    )
    where.add_argument("--url", default=None, help="the server's URL (default: its server.json)")
    where.add_argument(
        "--token-file", default=None, help="the token's file (default: the state directory's)"
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION")
    listing = actions.add_parser("list", help="the approvals (pending ones unless --all)")
    listing.add_argument("--all", action="store_true", help="settled ones too")
    listing.add_argument("--run", default=None, help="only this run's (its request id)")
    listing.add_argument("--session", default=None, help="only this session's (its id)")
    listing.add_argument("--json", action="store_true", help="one JSON object")
    answer = actions.add_parser("answer", help="answer a pending approval")
    answer.add_argument("id", help="its id, or a unique prefix of it (4 characters or more)")
    answer.add_argument("decision", choices=("allow", "always", "allow-always", "deny"))
    answer.add_argument("--message", "-m", default=None, help="deny: what the agent is told")
    answer.add_argument("--end-turn", action="store_true", help="deny: also end the turn")
    answer.add_argument("--by", default=None, help="your name, recorded with the answer")
    answer.add_argument("--json", action="store_true", help="the answered approval as JSON")
    watch = actions.add_parser("watch", help="each approval as it is asked and settled")
    watch.add_argument("--json", action="store_true", help="each event as a JSON line")
    parser.set_defaults(handler=handle, action=None, all=False, run=None, session=None, json=False)


def handle(args: argparse.Namespace) -> int:
    try:
        client = _Client.find(args)
    except Unreachable as exc:
        return usage_error("approvals", str(exc))
    action = args.action or "list"
    try:
        if action == "list":
            return _list(client, args)
        if action == "answer":
            return _answer(client, args)
        return _watch(client, args)
    except Unreachable as exc:
        return usage_error("approvals", str(exc))
    except KeyboardInterrupt:
        return 130


class _Client:
    """The server's URL and token, and one request at a time."""

    def __init__(self, url: str, token: str) -> None:
        import urllib.parse

        parts = urllib.parse.urlsplit(url)
        if parts.scheme != "http" or not parts.hostname:
            raise Unreachable(f"--url must be http://HOST:PORT, got {url!r}")
        self.host = parts.hostname
        self.port = parts.port or 80
        self.url = url
        self.token = token

    @classmethod
    def find(cls, args: argparse.Namespace) -> _Client:
        # lazy: `genesis --help` imports only the parsers
        from coding_genesis._cli.env import SERVE_TOKEN, serve_dir

        state = Path(args.state_dir) if args.state_dir else serve_dir()
        url = args.url
        if url is None:
            try:
                url = json.loads((state / "server.json").read_text())["url"]
            except (OSError, ValueError, KeyError, TypeError):
                raise Unreachable(
                    f"no genesis serve found in {state} (no server.json): start one, or give "
                    "--state-dir or --url"
                ) from None
        try:
            if args.token_file:
                token = _security().read_token_file(os.path.expanduser(args.token_file))
            elif os.environ.get(SERVE_TOKEN, "").strip():
                token = _security().check_token(os.environ[SERVE_TOKEN])
            else:
                token = _security().read_token_file(str(state / "token"))
        except (OSError, ValueError) as exc:
            raise Unreachable(f"cannot use the server's token: {exc}") from None
        return cls(str(url), token)

    def _connection(self, timeout: float | None) -> http.client.HTTPConnection:
        import http.client

        return http.client.HTTPConnection(self.host, self.port, timeout=timeout)

    def _headers(self) -> dict[str, str]:
        return {
            "Authorization": f"Bearer {self.token}",
            "X-Genesis-Channel": "cli",
            "Accept": "application/json",
        }

    def call(
        self, method: str, path: str, body: Mapping[str, Any] | None = None
    ) -> tuple[int, dict[str, Any]]:
        """One request: its status and JSON body."""
        conn = self._connection(TIMEOUT)
        headers = self._headers()
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        try:
            conn.request(method, path, body=data, headers=headers)
            response = conn.getresponse()
            raw = response.read()
        except OSError as exc:
            raise Unreachable(f"cannot reach the server at {self.url}: {exc}") from None
        finally:
            conn.close()
        try:
            value = json.loads(raw)
        except ValueError:
            value = {"error": "invalid_response", "message": raw[:300].decode(errors="replace")}
        return response.status, value if isinstance(value, dict) else {"value": value}

    def events(self, path: str) -> Iterator[tuple[str, dict[str, Any]]]:
        """An SSE stream's events (its kind and data) until it ends."""
        conn = self._connection(None)
        try:
            conn.request("GET", path, headers={**self._headers(), "Accept": "text/event-stream"})
            response = conn.getresponse()
            if response.status != 200:
                raise Unreachable(
                    f"the server refused the stream ({response.status}): "
                    f"{response.read()[:300].decode(errors='replace')}"
                )
            kind, data = "", ""
            for raw in response:
                line = raw.decode("utf-8", "replace").rstrip("\r\n")
                if not line:
                    if data:
                        yield kind, json.loads(data)
                    kind, data = "", ""
                elif line.startswith("event: "):
                    kind = line[7:]
                elif line.startswith("data: "):
                    data += line[6:]
        except OSError as exc:
            raise Unreachable(f"lost the server at {self.url}: {exc}") from None
        finally:
            conn.close()


def _security() -> Any:
    """The server's token rules (one truth): the server sits below the command line."""
    # lazy: `genesis --help` imports only the parsers
    from coding_genesis._serve import security

    return security


def _refused(status: int, body: Mapping[str, Any]) -> int:
    print(
        printable(f"genesis approvals: {body.get('error', status)}: {body.get('message', '')}"),
        file=sys.stderr,
    )
    return 1


def _line(view: Mapping[str, Any]) -> str:
    """One approval in a line: id, state, what it is about, and its deadline
    or answer."""
    call = view.get("call") or {}
    what = call.get("command") or ", ".join(call.get("paths") or ()) or call.get("kind") or ""
    state = str(view.get("state"))
    if state == "pending":
        left = float(view.get("deadline") or 0) - time.time()
        tail = f"denied in {max(0, round(left))}s unless answered"
    elif state == "answered":
        answer = view.get("answer") or {}
        who = answer.get("channel") or "?"
        if answer.get("by"):
            who += f", by {answer['by']}"
        tail = f"{answer.get('decision')} ({who})"
    else:
        tail = str(view.get("why") or "")
    if view.get("session"):
        owner = f"session {str(view['session'])[:12]} turn {view.get('turn')}"
    else:
        owner = f"run {str(view.get('run'))[:12]}" if view.get("run") else ""
    return printable(
        f"{str(view.get('id'))[:12]}  {state:<9} {owner}  {call.get('tool') or '?'}: "
        f"{str(what)[:100]}  [{tail}]"
    )


def _list(client: _Client, args: argparse.Namespace) -> int:
    query = {"state": "all" if args.all else "pending", "limit": "1000"}
    if args.run:
        query["run"] = args.run
    if args.session:
        query["session"] = args.session
    import urllib.parse

    status, body = client.call("GET", "/approvals?" + urllib.parse.urlencode(query))
    if status != 200:
        return _refused(status, body)
    if args.json:
        print(json.dumps(body, indent=2))
        return 0
    approvals = body.get("approvals") or []
    if not approvals:
        print("no approval waits for an answer" if not args.all else "no approval")
    for view in approvals:
        print(_line(view))
    return 0


def _answer(client: _Client, args: argparse.Namespace) -> int:
    import urllib.parse

    ref = urllib.parse.quote(args.id, safe="")
    status, found = client.call("GET", f"/approvals/{ref}")
    if status != 200:
        return _refused(status, found)
    body = {"decision": DECISIONS[args.decision], "end_turn": args.end_turn}
    if args.message is not None:
        body["message"] = args.message
    if args.by is not None:
        body["by"] = args.by
    status, view = client.call("POST", f"/approvals/{found['id']}", body)
    if status != 200:
        return _refused(status, view)
    print(json.dumps(view, indent=2) if args.json else _line(view))
    return 0


def _watch(client: _Client, args: argparse.Namespace) -> int:
    for kind, data in client.events("/approvals/events"):
        if args.json:
            print(json.dumps({"event": kind, **data}), flush=True)
        elif kind == "inbox":
            pending = data.get("pending") or []
            print(f"{len(pending)} approval(s) pending", flush=True)
            for view in pending:
                print(_line(view), flush=True)
        elif kind == "approval_request":
            print(_line(data), flush=True)
        elif kind == "closing":
            print("the server is stopping", flush=True)
    return 0
