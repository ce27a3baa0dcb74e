Feature: Error handling - state recovery
  After any error, the agent must return to READY state so it can accept
  subsequent requests. It must not get stuck in BUSY or DEGRADED state.

  @slow
  Scenario: Agent recovers to READY after timeout error
    Given a CodingGenesisAgent in "BUSY" state due to a timed-out request
    When the timeout error is handled
    Then the agent state is "READY"
    And a graph node event is published with state "READY"
    And the agent can accept new requests

  Scenario: Agent recovers to READY after subprocess crash
    Given a CodingGenesisAgent in "BUSY" state due to a crashed subprocess
    When the crash error is handled
    Then the agent state is "READY"
    And the agent can accept new requests
