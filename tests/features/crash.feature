Feature: Error handling - subprocess crash
  If the subprocess exits with a non-zero return code, the agent must report
  the error and return to READY state.

  Scenario: Subprocess exits with non-zero return code
    Given a CodingGenesisAgent with backend "claude"
    And the subprocess exits with return code 1
    And stderr contains "Error: authentication failed"
    When the agent processes the request
    Then the response contains key "status" with a non-zero value
    And the response contains error information
    And the agent transitions to "READY" state

  Scenario: Subprocess is killed externally (SIGKILL)
    Given a CodingGenesisAgent with backend "claude"
    And the subprocess is killed by an external signal
    When the agent processes the request
    Then the response contains key "status" with a non-zero value
    And the agent transitions to "READY" state
    And no zombie process remains
