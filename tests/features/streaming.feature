Feature: Live output: text as it is written, stderr as it comes
  With partial=True a run or a session delivers the model's text in pieces
  (text_delta events) as the CLI writes them, before the whole message, which
  still comes as its own text event and alone makes the answer; on_stderr=
  hears each line of the CLI's stderr as it is written.  These scenarios run
  on the embedded failer, which writes claude's stream_event pieces when told
  --include-partial-messages, and "/stderr N" writes N lines 200 ms apart.

  Scenario: A session opened with partial streams each answer in pieces, then whole
    Given a two-way failer agent
    When a session is opened with partial
    And the session streams "hello"
    Then the streamed turn had 3 text deltas, in order, joined equal to the text that follows
    And the streamed turn answered with status 0, its answer the whole text

  Scenario: A one-shot run with partial streams its answer in pieces
    Given a two-way failer agent
    When a run asks "hello" with partial
    Then the run had 3 text deltas, in order, joined equal to the text that follows

  Scenario: Streaming deltas from a session opened without them is refused, naming the fix
    Given a two-way failer agent
    When a session is opened
    And the session streams "hello" with partial
    Then it was refused with "needs a session opened with partial=True"

  Scenario: A secret split across two pieces never reaches a delta
    Given a two-way failer agent whose environment holds the secret "supersecretvalue123"
    When a session is opened with partial
    And the session is sent "supersecretvalue123 and then a long tail of words that moves the cut into the secret, a tail long enough to put the first cut of three inside it"
    And the session streams "/history"
    Then no text delta holds "supersecretvalue123", nor does their join
    And the streamed turn had 3 text deltas, in order, joined equal to the text that follows

  Scenario: on_stderr hears each stderr line of a session's turn before the next is written
    Given a two-way failer agent that hands its stderr lines to a callable
    When a session is opened
    And the session is sent "/stderr 3"
    Then the callable heard 3 lines, each before the next was written
