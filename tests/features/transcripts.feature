Feature: Transcripts record the raw stdout once
  A transcript writes the CLI's stdout as it arrives and derives the CLI's
  events from it when they are read, with the same decoder a live run uses.

  Scenario: The events of a recorded run are decoded from its raw stdout
    Given a CodingGenesisAgent with backend "claude" writing transcripts
    And the subprocess emits a tool call, then a result
    When the agent processes the request
    Then the transcript's stdout holds every line the CLI printed
    And events.jsonl holds only the runner's own events
    And genesis show --events lists the tool call the subscribers saw
