Feature: Live sessions
  A live session keeps one CLI process across turns and speaks its two-way
  protocol (docs/sessions.md): a conversation, an interrupt that ends only the
  running turn, and a later session that resumes the conversation.  These
  scenarios run on the embedded failer, which speaks claude's control protocol
  without a model or credentials.

  Scenario: The turns of one conversation share one process
    Given a two-way failer agent
    When a session is opened
    And the session is sent "hello"
    And the session is sent "/history"
    Then every turn answered with status 0
    And the turns were numbered 1, 2
    And the last answer says "1 earlier prompts in this conversation: hello"
    And every turn was answered by one process, under one session id

  @slow
  Scenario: An interrupt ends the running turn and the session goes on
    Given a two-way failer agent with permissions "full"
    When a session is opened
    And the session is sent "/bash sleep 600" and interrupted once the command runs
    Then the turn answered with status 130 and error "interrupted"
    And no "sleep" process of the session is left
    When the session is sent "hello"
    Then the turn answered with status 0

  @slow
  Scenario: A later session resumes the conversation in a new process
    Given a two-way failer agent
    When a session is opened
    And the session is sent "remember the number 7"
    And the session is closed
    And a session is opened that resumes the last one
    And the session is sent "/history"
    Then the last answer says "1 earlier prompts in this conversation: remember the number 7"
    And both sessions had one session id

  @slow
  Scenario: A session that resumes a conversation the CLI never held fails clearly
    Given a two-way failer agent
    When a session is opened that resumes "0f0f0f0f-0000-4000-8000-000000000000"
    And the session is sent "hello"
    Then the turn answered with status 1 and error "incomplete"
    And the last answer's message holds "No conversation found"
