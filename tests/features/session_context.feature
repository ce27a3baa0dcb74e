Feature: A session's context: its use now, compaction on demand, forks
  A live session says how much of the CLI's context window it uses
  (session.context_usage()) and compacts it when asked (session.compact()),
  where the CLI can (docs/sessions.md, "Context and compaction").  The CLI is
  the embedded failer, which answers claude's get_context_usage call (25 tokens
  a prompt since its last compaction) and compacts on a "/compact" turn as
  claude does; the fake ACP agent can do neither, and says so.

  Scenario: The context's use grows with each turn and a compaction empties it
    Given a two-way failer agent
    When a session is opened
    And the session is sent "hello"
    And the session is sent "again"
    And the session's context usage is asked
    Then the context usage is 50 tokens of 200000
    When the session is compacted
    Then the compaction turn answered with status 0 and a "manual" compaction event
    When the session's context usage is asked
    Then the context usage is 0 tokens of 200000

  Scenario: A CLI that cannot say its context's use or compact is refused in words
    Given a fake ACP agent "gemini"
    When a session is opened
    And the session's context usage is asked
    Then the session refused saying "backend 'gemini' cannot say its context's use now"
    When the session is compacted
    Then the session refused saying "backend 'gemini' cannot compact its context on demand"

  Scenario: A fork carries the history and the session goes on without the fork's turns
    Given a two-way failer agent
    When a session is opened
    And the session is sent "alpha"
    And the session is sent "beta"
    And the session is forked
    And the fork is sent "/history"
    Then the fork answered "2 earlier prompts in this conversation: alpha | beta"
    And the fork has a session id of its own
    When the session is sent "/history"
    Then the last answer says "2 earlier prompts in this conversation: alpha | beta"

  Scenario: A fork at a turn keeps the history up to that turn
    Given a two-way failer agent
    When a session is opened
    And the session is sent "alpha"
    And the session is sent "beta"
    And the session is forked at its turn 1
    And the fork is sent "/history"
    Then the fork answered "1 earlier prompts in this conversation: alpha"

  Scenario: A CLI that cannot fork a session is refused in words
    Given a fake ACP agent "qwen"
    When a session is opened
    And the session is sent "hello"
    And the session is forked
    Then the session refused saying "backend 'qwen' cannot fork a session (a new one from its history)"
