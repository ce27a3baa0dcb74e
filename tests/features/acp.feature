Feature: Sessions over the Agent Client Protocol
  gemini, qwen, opencode and any command that speaks ACP run under the same
  session API as claude and codex (docs/sessions.md): one process across turns,
  the approver asked before each tool call, an interrupt that ends only the
  running turn, and every misbehaviour of the agent a clear answer.  These
  scenarios run on the fake ACP agent (coding_genesis/testing/fake_acp.py, the
  one the conformance kit ships), which plays each agent's flavour: its option
  ids, its usage, what each prompt makes it do.

  Scenario: A session's turns are text answers of one ACP process
    Given the ACP agent "qwen"
    When an ACP session is opened
    And the ACP session is sent "hello"
    And the ACP session is sent "and again"
    Then every ACP turn answered with status 0
    And the last ACP answer is "fake qwen got: and again"
    And every ACP turn was answered by one process, under the session id of session/new
    And the agent was asked for protocol version 1 with no file system and no terminal

  Scenario: A tool call refused, then allowed, by the approver
    Given the ACP agent "gemini" whose approver refuses, then allows
    When an ACP session is opened
    And the ACP session is sent 'ASK execute {"command": "make"}'
    And the ACP session is sent 'ASK execute {"command": "make"}'
    Then the ACP answers were "denied reject_once", "allowed allow_once"
    And the ACP approver was asked 2 times
    And the agent was answered the options "cancel", "proceed_once"

  Scenario: "Always" is kept by the session, whatever the agent's option ids
    Given the ACP agent "opencode" whose approver allows always
    When an ACP session is opened
    And the ACP session is sent 'ASK execute {"command": "make test"}'
    And the ACP session is sent 'ASK execute {"command": "make test"}'
    And the ACP session is sent 'ASK execute {"command": "make clean"}'
    Then every ACP turn answered with status 0
    And the ACP approvals were settled by "approver", "always", "approver"
    And the ACP approver was asked 2 times
    And the agent was answered the options "once", "once", "once"

  @slow
  Scenario: An interrupt in the middle of a long tool leaves no process, and the session goes on
    Given the ACP agent "qwen" whose approver allows everything
    When an ACP session is opened
    And the ACP session is sent "SLEEP 600" and interrupted once the tool runs
    Then the ACP turn answered with status 130 and error "interrupted"
    And the agent got "session/cancel"
    And no sleeping tool of the ACP session is left
    When the ACP session is sent "after the interrupt"
    Then the ACP turn answered with status 0

  Scenario: An agent answering another protocol version is refused
    Given the ACP agent "qwen" answering protocol version 2
    When an ACP session is opened
    And the ACP session is sent "hello"
    Then the ACP turn answered with status 1
    And the last ACP message holds "ACP protocol version 2; coding-genesis speaks version 1 only"
    And no process of the ACP session is left

  Scenario: Lines that are not JSON and unknown updates are counted, not fatal
    Given the ACP agent "opencode"
    When an ACP session is opened
    And the ACP session is sent "GARBAGE"
    And the ACP session is sent "UNKNOWN"
    And the ACP session is sent "MALFORMED"
    And the ACP session is sent "after all that"
    Then ACP turn 1 answered with status 0, skipping 2 lines
    And ACP turn 2 answered with status 0, warning "2 message(s) of a type opencode does not know"
    And ACP turn 3 answered with status 1, saying "neither a method nor a result"
    And the last ACP answer is "fake opencode got: after all that"

  Scenario: The agent dying mid-turn is a clear failure
    Given the ACP agent "gemini"
    When an ACP session is opened
    And the ACP session is sent "DIE"
    Then the ACP turn answered with status 1 and error "incomplete"
    And the last ACP message holds "exited with code 3"
    And the ACP session is closed
    And no process of the ACP session is left

  Scenario: A backends file makes any ACP command a backend, with no code
    Given a backends file whose ACP entry "myagent" runs the fake qwen with its mode ids
    When "myagent" runs "hello there"
    Then the run answered with status 0, saying "fake qwen got: hello there"
    When "myagent" runs 'ASK execute {"command": "ls"}' with an approver allowing everything
    Then the run answered with status 0, saying "allowed allow_once"
    And each run set the agent to the mode "default"
