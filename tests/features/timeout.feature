Feature: Error handling - subprocess timeout
  Coding tasks can take minutes. The agent enforces a configurable timeout
  and terminates the subprocess gracefully if exceeded.
  (The spec's 10-second timeout is scaled down to 1 second to keep the suite fast.)

  @slow
  Scenario: Subprocess exceeds timeout
    Given a CodingGenesisAgent with timeout 1.0 seconds
    And the subprocess runs for longer than 1.0 seconds without completing
    When the timeout is reached
    Then the subprocess is terminated via SIGTERM
    And the subprocess is waited on to prevent zombie processes
    And the response contains key "status" with a non-zero value
    And the response contains key "message" with text containing "timed out"
    And the agent transitions to "READY" state, not "DEGRADED"

  Scenario: Default timeout is 300 seconds (5 minutes)
    Given a CodingGenesisAgent created with default parameters
    When checking the timeout value
    Then the timeout is 300.0 seconds

  Scenario: Custom timeout is respected
    Given a CodingGenesisAgent created with timeout 60.0
    When checking the timeout value
    Then the timeout is 60.0 seconds
