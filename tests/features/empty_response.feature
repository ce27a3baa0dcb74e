Feature: Error handling - empty response
  If the subprocess produces no parseable events, the agent must return an
  error message rather than an empty success.

  Scenario: Subprocess produces no output
    Given a CodingGenesisAgent with backend "claude"
    And the subprocess exits with return code 0
    And the subprocess produced no stdout output
    When the agent processes the request
    Then the response contains key "message" with an empty string or error message
    And the response contains key "status" with value 0
    And the response contains key "tool_calls" with value 0
