Feature: The caller's MCP servers
  mcp_servers= hands the CLI the caller's own MCP servers (docs/sessions.md, "The
  caller's MCP servers"): the CLI starts each with its own environment and the model
  calls their tools.  A backend that cannot be given servers is refused in the
  capability check's words, before anything starts.

  Scenario: An ACP agent calls a tool of the caller's server
    Given the ACP agent "opencode"
    And the caller's MCP server "srv"
    When an ACP session is opened
    And the ACP session is sent 'MCP echo {"text": "hi"}'
    Then the last ACP message holds "srv echoes: hi"
    And the server "srv" was started with its own secret

  Scenario: A backend that cannot be given MCP servers is refused
    Given the ACP agent "failer"
    And the caller's MCP server "srv"
    When an agent is built
    Then the agent is refused with "backend 'failer' cannot be given MCP servers, which mcp_servers= needs"
