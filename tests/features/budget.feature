Feature: Budgets - a run that spends too much is stopped mid-run
  An orchestrator caps what a delegated run may spend. The budget is checked on
  every event that reports usage, not only at the end: crossing it stops the
  whole process tree like a timeout and answers with what the run did so far.

  @slow
  Scenario: A run crossing its cost budget mid-stream is stopped
    Given a CodingGenesisAgent with a budget of 0.03 USD
    And the subprocess streams messages costing 0.018 USD each and never finishes
    When the agent processes the request
    Then the run is stopped right after the message that crossed the budget
    And the process tree is gone, its grandchild included
    And the subprocess is waited on to prevent zombie processes
    And the response contains key "error" with text containing "budget_exceeded"
    And the response says the limit "max_cost_usd" was exceeded by 0.006 USD
    And the response keeps the partial work of 2 tool calls
    And the failure is "budget_exceeded" and not retryable
    And the agent transitions to "READY" state, not "DEGRADED"

  Scenario: A spent shared budget starts nothing
    Given a CodingGenesisAgent with a budget of 0.03 USD
    And the budget was already spent by another run
    When the agent processes the request
    Then nothing was started
    And the response contains key "error" with text containing "budget_exceeded"
    And the failure is "not_started" and not retryable
