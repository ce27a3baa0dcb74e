"""docs/api/index.md, the API reference's index: every public name once, grouped by
what a user does with it, entry points first, one line each.  ``tests/test_docs.py``
renders the page from this and checks it is up to date and complete; a new public
name (``coding_genesis._EXPORTS``) goes into the group a user would look in."""

from __future__ import annotations

#: (group, its one-line guide, [(name, what it is for)]), in the order a user meets them.
GROUPS: list[tuple[str, str, list[tuple[str, str]]]] = [
    (
        "Run a coding agent",
        "The entry points: one agent, one request, one answer.",
        [
            (
                "CodingGenesisAgent",
                "Runs one CLI request at a time and always answers (`run`, `run_sync`, `session`).",
            ),
            (
                "RunResponse",
                "The dict `run()` returns: status, message, failure, usage, approvals...",
            ),
            ("RunResult", "The same answer as a typed model (`run_result()`, `send_result()`)."),
            ("AgentConfig", "An agent's settings, checked once; shareable between agents."),
            ("DEFAULT_TIMEOUT", "The wall-clock limit of a run when none is given (seconds)."),
            ("available_backends", "The names of every backend you can pass as `backend=`."),
            ("Prompt", "What `run()` and `send()` take: text, or text with images and files."),
            ("Image", "An image in a prompt: a file's or bytes (at most 20 MiB)."),
            ("FileRef", "A file in a prompt: the agent is pointed at it."),
        ],
    ),
    (
        "Hold a conversation",
        "One CLI process across turns: approve, interrupt, resume, steer.",
        [
            ("Session", "A live conversation with one CLI process (`agent.session()`)."),
            ("SyncSession", "The same for code without an event loop (`agent.session_sync()`)."),
            (
                "TurnStream",
                "The events of one streamed turn, then its result (`session.stream()`).",
            ),
            ("SessionPool", "Warm sessions started before prompts arrive."),
            ("SyncSessionPool", "The pool for code without an event loop."),
            ("PoolStats", "A pool's counts: warm, in use, served, replaced..."),
            ("ContextUsage", "A session's context window now (`session.context_usage()`)."),
        ],
    ),
    (
        "Run many requests",
        "Batches, bounded concurrency, executors.",
        [
            ("run_many", "Run many requests at most `concurrency` at a time (asyncio)."),
            ("run_many_sync", "`run_many` for code without an event loop."),
            ("RunSpec", "One request of a batch, validated."),
            ("BatchItem", "What `run_many` accepts per request: a prompt, a dict or a `RunSpec`."),
            ("BatchSettings", "The settings a batch line may set besides its prompt and backend."),
            ("ExecutorName", "Where a batch runs: `local` (this process) or `ray`."),
        ],
    ),
    (
        "Approve each tool call",
        "Decide what the CLI may do, call by call.",
        [
            (
                "Approver",
                "The type of `approver=`: a callable given a request, answering a decision.",
            ),
            (
                "ApprovalRequest",
                "One tool call the CLI asks to make: tool, input, kind, command, paths.",
            ),
            ("Decision", "An approver's answer: allow (maybe with a changed input) or deny."),
            ("ApprovalOption", "The four answers: allow or reject, once or always."),
            ("Verdict", "What an approver may return: a decision, a bool or None."),
            ("ToolKind", "A request's kind: `command`, `write`, `read` or `other`."),
            ("writes_under", "Ready-made approver: writes only under given directories."),
            ("deny_commands", "Ready-made approver: refuse commands matching glob patterns."),
            ("allow_tools", "Ready-made approver: allow tools by name or kind."),
            ("chain", "Ask several approvers in turn; the first that settles wins."),
        ],
    ),
    (
        "Hooks and your own functions as tools",
        "Your code at the CLI's hook points, and functions the model may call.",
        [
            ("Hooks", "The type of `hooks=`: a hook point mapped to hooks."),
            ("Hook", "One hook: a callable given a `HookInput`, answering a `HookResult` or None."),
            (
                "HookEvent",
                "A hook point: `pre_tool`, `post_tool`, `turn_end`, `prompt_submit`, "
                "`session_start`...",
            ),
            ("HookInput", "What a hook is told: the tool call, its output, the turn's answer..."),
            ("HookResult", "A hook's answer: block, change the input, add context."),
            (
                "Subagent",
                "One subagent of `agents=` (claude): description, prompt, tools, model.",
            ),
            ("tool", "Make a function a tool the model may call (`tools=`)."),
            ("HostTool", "One of your functions as a tool: name, description, schema, timeout."),
            ("ToolResult", "What one call of a tool answered."),
            ("McpServerSpec", "One of your MCP servers (`mcp_servers=`): a command or a URL."),
        ],
    ),
    (
        "Read how a run ended",
        "Status codes, failures, the failure report.",
        [
            ("Status", "The status codes a response carries (0, 1, 64, 124, 127, 130...)."),
            ("ErrorCode", "The `error` words of a response (`timeout`, `cli_error`...)."),
            ("FailureCategory", "Why a run failed: the one taxonomy retries and reports use."),
            (
                "ChildFailure",
                "The failure record: category, partial progress, retryability, advice.",
            ),
            ("format_failure_report", "The failure record as the standard text report."),
            ("parse_failure_report", "A text report read back into a `ChildFailure`."),
            ("AgentState", "An agent's state: `READY`, `BUSY`, `DEGRADED`."),
            ("CostSource", "Where a run's cost came from: `reported`, `computed` or `unknown`."),
        ],
    ),
    (
        "Retries, budgets and limits",
        "What is retried, what a run may spend, how a process is stopped.",
        [
            ("RetryPolicy", "Retry strategies per failure category, a deadline, resume."),
            (
                "CircuitBreaker",
                "Stops calling a CLI that keeps failing (`DEGRADED`), then probes it.",
            ),
            ("Budget", "Limits on cost, tokens, turns and tool calls, per run or shared."),
            ("SupervisorConfig", "The clocks and limits of one supervised process."),
            ("StopReason", "Why the runner stopped a process tree."),
        ],
    ),
    (
        "Watch a run: events and observers",
        "What a run says while it runs, and code that listens.",
        [
            ("Event", "The base of every event a run publishes."),
            ("EventKind", "What an event says: text, tool call, usage, state..."),
            ("TextEvent", "Text the model wrote."),
            ("ThoughtEvent", "The model's reasoning, as the CLI shows it (not the answer)."),
            ("PlanEvent", "The agent's plan as it stands: its entries and their status."),
            ("ToolCallEvent", "The CLI called a tool."),
            ("ToolResultEvent", "A tool call finished."),
            ("UsageEvent", "Token usage and cost."),
            ("ResultEvent", "The CLI's final answer."),
            ("ErrorEvent", "An error line of the CLI."),
            ("SessionEvent", "The CLI's session id and model."),
            ("CliRetryEvent", "The CLI retries an API call by itself."),
            ("RunEvent", "Any event a run publishes (the union of the event types)."),
            ("StateEvent", "The agent changed state."),
            ("RunStartedEvent", "The CLI process was launched."),
            ("RunFinishedEvent", "The response is ready (or the run was cancelled)."),
            ("AttemptEvent", "An attempt under the retry policy started or ended."),
            ("ApprovalEvent", "A tool call the CLI asked to make was decided."),
            ("TextDeltaEvent", "A piece of assistant text as it is written (`partial=True`)."),
            ("ThoughtDeltaEvent", "A piece of the model's reasoning as it is written."),
            ("McpServerEvent", "An MCP server of the session: started, failed or changed."),
            ("CompactionEvent", "The CLI compacted its context (asked for, or by itself)."),
            ("QuestionEvent", "A question of the CLI to the user was answered or refused."),
            ("EVENT_TYPES", "Every event class by its kind."),
            ("event_from_dict", "An event read back from its dict (an `events.jsonl` line)."),
            ("EventStream", "An async iterator over an agent's events (`agent.events()`)."),
            ("Subscription", "The handle `agent.subscribe()` returns (to unsubscribe)."),
            ("Observer", "Code plugged into every run of an agent (`observers=`)."),
            ("RunObserver", "Watches one run: its lines, its events, its end."),
            ("RunInfo", "What is known when a run starts."),
            ("TranscriptObserver", "Writes one directory per run: stdout, events, result."),
            ("RunLogObserver", "Appends one line per run to a run log (`genesis stats`)."),
        ],
    ),
    (
        "Settings and options",
        "The typed keywords of an agent, a run and a session.",
        [
            ("AgentSettings", "The keywords an agent (and `AgentConfig`, `RunSpec`) accepts."),
            ("RunOptions", "The keywords of one `run()` call."),
            ("RequestOptions", "The options a session's turns share with a one-shot run."),
            ("CallOptions", "The options only a call takes: `resume`, `request_key`."),
            ("LiveOptions", "The keywords of `agent.session()`."),
            ("SendOptions", "The keywords of one turn: `send()`, `send_result()`, `stream()`."),
            ("AGENT_DEFAULT", '"Use the agent\'s own setting" for an option of one run.'),
            ("Permissions", "A permission level: `read-only`, `edit` or `full`."),
            (
                "SettingSource",
                "Whose settings a CLI reads (`setting_sources=`): `user`, `project`, `local`.",
            ),
            ("Isolation", "How a run is isolated: `worktree` (None: in `cwd` itself)."),
            ("Keep", "When an isolated run's worktree is kept: `never`, `on_failure`, `always`."),
            ("RetrySetting", "What `retry=` accepts."),
            ("BreakerSetting", "What `circuit_breaker=` accepts."),
            ("MessageUsage", "What a translator makes of the usage a CLI reports mid-stream."),
        ],
    ),
    (
        "Backends and plug-ins",
        "Adapters of the CLIs, and how to add one.",
        [
            ("Backend", "The base class of a backend: argv, translation, failure hints."),
            ("register_backend", "Make `backend=NAME` use your backend."),
            ("get_backend", "A fresh backend by name."),
            (
                "GenericBackend",
                "A CLI that speaks a format we read, described by an argv template.",
            ),
            (
                "AcpBackend",
                "Any command that speaks the Agent Client Protocol, as a backend (no code).",
            ),
            ("load_backends_file", "Generic backends from a TOML file."),
            ("Request", "One request, validated once: what a backend and a protocol are handed."),
            ("CommandSpec", "How to start the CLI: arguments, stdin, environment."),
            (
                "RepositoryFile",
                "A file of a repository a CLI itself reads or runs, and whether it is read.",
            ),
            ("OptionSpec", "One backend option (`options=`): its types and help."),
            ("Translator", "Turns a CLI's lines into events, one run at a time."),
            ("ControlProtocol", "A backend's two-way protocol for live sessions."),
            ("BackendPluginError", "An installed plug-in could not be loaded."),
        ],
    ),
    (
        "Errors",
        "What is raised (a runtime failure is never raised: it is a response).",
        [
            ("GenesisError", "The root of every exception coding-genesis raises."),
            ("ConfigError", "An argument is wrong (raised at once)."),
            ("AgentUsageError", "The API was used in a way it cannot support."),
            (
                "RefusedError",
                "The request cannot run as asked on this backend (both of the above).",
            ),
            ("InvalidCwdError", "The working directory does not exist or cannot be used."),
            ("InvalidTimeoutError", "A timeout that is not a finite positive number."),
            ("UnknownBackendError", "No backend is registered under that name."),
        ],
    ),
    (
        "Testing",
        "Helpers for your own tests (and the conformance kit: `coding_genesis.testing`).",
        [
            ("VirtualClock", "Time the test controls: backoffs and deadlines without waiting."),
            ("JsonLinesParser", "The tolerant JSON-lines parser the runs use."),
        ],
    ),
]
