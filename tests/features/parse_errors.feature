Feature: Error handling - parse errors
  Malformed JSON lines from the subprocess must be silently skipped.
  The agent must not crash on unexpected output.

  Scenario: Malformed JSON line in stdout is skipped
    Given a CodingGenesisAgent with backend "claude"
    And the subprocess emits "not-json-line" on stdout
    And the subprocess then emits a valid result event
    When the agent processes the request
    Then the malformed line is silently skipped
    And the valid result event is processed normally
    And the response contains the result text
    And the response contains key "status" with value 0

  @slow
  Scenario: Mixed valid and invalid lines are handled
    Given a CodingGenesisAgent with backend "codex"
    And the subprocess emits: valid init, invalid line, valid text, invalid line, valid done
    When the agent processes the request
    Then the session_id is extracted from the init event
    And the text is extracted from the text event
    And the 2 invalid lines are silently skipped
    And the response is successful
