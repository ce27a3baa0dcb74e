Feature: The caller's functions as tools
  tools= hands the model the caller's own Python functions (docs/sessions.md,
  "The caller's functions as tools"): the model calls one, the session runs it
  within its timeout and answers the CLI.  Neither the approver nor a pre_tool
  hook is asked about it.  The CLI is the embedded failer, which makes the call
  through claude's SDK MCP server the way claude does.

  @slow
  Scenario: The model calls one of the caller's functions
    Given a two-way failer agent whose approver allows everything
    And the caller's function "add"
    When a session is opened
    And the session is sent '/tool add {"a": 2, "b": 3}'
    Then the last answer says "add answered: 5"
    And the turn made 1 tool call, named "mcp__genesis__add"
    And the approver was asked 0 times

  Scenario: A function that raises answers an error the model reads; the turn goes on
    Given a two-way failer agent
    And the caller's function "divide"
    When a session is opened
    And the session is sent '/tool divide {"a": 1, "b": 0}'
    Then the turn answered with status 0
    And the last answer says "divide failed: ZeroDivisionError: division by zero"

  @slow
  Scenario: Arguments that do not match the function are refused before it runs
    Given a two-way failer agent
    And the caller's function "add"
    When a session is opened
    And the session is sent '/tool add {"a": "two", "b": 3}'
    Then the last answer starts with "add failed: "
    And the function "add" was never called
