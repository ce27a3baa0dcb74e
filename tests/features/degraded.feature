Feature: DEGRADED as a circuit breaker
  After K requests in a row fail in a way no retry fixes (the CLI is missing,
  authentication fails), the agent goes DEGRADED and answers at once with
  status 69 until a cooldown passes; then one probe request runs, and a
  success makes it READY again.  Timeouts, crashes and rate limits never trip
  it: after those the agent is READY.  Time is virtual.

  Background:
    Given virtual time for retries

  @slow
  Scenario: A missing binary trips DEGRADED and a later probe recovers
    Given a claude agent whose binary is missing, with a breaker of 2 failures and 60 seconds cooldown
    When the agent runs 2 requests
    Then every response has status 127 and error "not_found"
    And the agent is "DEGRADED" because of "2 consecutive missing failures"
    And a state event announced "DEGRADED" with a cooldown of 60 seconds
    When another request arrives 30 seconds later
    Then it is answered at once with status 69 and error "degraded"
    And no process was started for it
    When the binary is installed
    And another request arrives 31 seconds later
    Then the probe succeeds
    And the agent is "READY" because of "probe succeeded"

  Scenario: A probe that fails again opens the circuit for another cooldown
    Given a claude agent whose binary is missing, with a breaker of 2 failures and 60 seconds cooldown
    When the agent runs 2 requests
    And another request arrives 61 seconds later
    Then the response has status 127 and error "not_found"
    And the agent is "DEGRADED" because of "probe failed"
    When another request arrives 1 seconds later
    Then it is answered at once with status 69 and error "degraded"

  @slow
  Scenario: Authentication failures trip DEGRADED
    Given a claude agent whose every run fails with "Error: authentication failed", with a breaker of 2 failures and 60 seconds cooldown
    When the agent runs 2 requests
    Then the agent is "DEGRADED" because of "2 consecutive auth failures"

  @slow
  Scenario: A success in between resets the count
    Given a claude agent whose binary is missing, with a breaker of 2 failures and 60 seconds cooldown
    When the agent runs 1 requests
    And the binary is installed
    And the agent runs 1 requests
    And the binary is removed
    And the agent runs 1 requests
    Then the agent is "READY" because of "run finished"

  @slow
  Scenario Outline: <failure> never trips DEGRADED
    Given a <backend> agent with a breaker of 2 failures and 60 seconds cooldown
    And every run ends in <failure>
    When the agent runs 3 requests
    Then every response has status <status> and error "<error>"
    And the agent is "READY" because of "run finished"
    And the agent never went "DEGRADED"

    Examples:
      | failure      | backend | status | error     |
      | a timeout    | claude  | 124    | timeout   |
      | a crash      | claude  | 139    | killed    |
      | a rate limit | failer  | 1      | cli_error |
