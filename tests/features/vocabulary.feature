Feature: One option vocabulary across coding CLIs
  The same words (permissions, max_turns, cli_max_retries, model, resume, cwd)
  work with every backend. A permission level a CLI cannot enforce is refused,
  never silently loosened; another option it cannot honor is a warning in
  the response.

  Scenario: A permission level the CLI cannot enforce is refused
    Given a generic backend "plain" reading claude stream-json without permission arguments
    When a request asks for permissions "read-only"
    Then the response contains key "status" with value 64
    And the response message says "cannot enforce permissions='read-only'"
    And the CLI was never started

  Scenario: An option the CLI cannot honor is a warning
    Given a codex agent with max_turns 3
    When the agent processes the request
    Then the response contains key "status" with value 0
    And the response warns "max_turns=3 not honored: codex has no turn limit"

  Scenario: Every installed backend is listed by the run command's help
    When I ask for "genesis run --help"
    Then the help names the backends "claude, codex, failer"
