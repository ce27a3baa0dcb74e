"""Bind every feature file in tests/features to the step definitions."""

from pytest_bdd import scenarios

scenarios(
    "isolation.feature",
    "timeout.feature",
    "crash.feature",
    "parse_errors.feature",
    "empty_response.feature",
    "state_recovery.feature",
    "failures.feature",
    "retry.feature",
    "degraded.feature",
    "telemetry.feature",
    "transcripts.feature",
    "budget.feature",
    "sessions.feature",
    "streaming.feature",
    "approvals.feature",
    "hooks.feature",
    "hook_points.feature",
    "host_tools.feature",
    "structured_output.feature",
    "serve.feature",
    "mcp.feature",
    "acp.feature",
    "acp_pool.feature",
    "turn_options.feature",
    "prompt_parts.feature",
    "mcp_servers.feature",
    "session_context.feature",
    "questions.feature",
)
