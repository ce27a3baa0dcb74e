Feature: Handing work to a CLI over MCP
  genesis mcp serves MCP tools on stdio, so that another agent (a claude or
  codex session, any MCP client) runs a coding CLI under our supervision
  (docs/mcp.md). These scenarios run a real genesis mcp process and the mcp
  package's own client, on the failer: no model, no credentials (the first
  calls the tools in-process, on a server's parts, as both transports do).

  Scenario: A tool's argument that sets the environment is refused before anything runs
    Given the tools of a server without --trusted-input
    When a tool call of "run" sets "env" to {"PATH": "/tmp"}
    Then the call is refused: "invalid_request: refused field(s) env"
    And the server's queue holds no run

  @slow
  Scenario: The failer's failure comes back as the run tool's structured answer, with progress
    Given a genesis mcp
    When the client calls "run" with {"prompt": "/fail", "backend": "failer"}
    Then the tool answers a finished run with status 1 and error "cli_error"
    And the client was told the progress "run_started" and "result"

  @slow
  Scenario: An argument that names a program is refused in words, and nothing runs
    Given a genesis mcp
    When the client calls "run" with {"prompt": "hi", "cli_path": "/bin/sh"}
    Then the tool answers an error saying "refused field(s) cli_path"
    And the server lists no run

  @slow
  Scenario: A nested run's tool call waits in the inbox until the client allows it
    Given a genesis mcp
    When the client calls "run" with {"prompt": "/bash echo mcp-ok", "approvals": "inbox", "wait": false}
    Then the MCP server's inbox holds one pending approval for "echo mcp-ok"
    When the client allows it through the answer_approval tool
    Then the run finishes with status 0
