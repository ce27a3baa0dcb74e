Feature: Served sessions and the approval inbox
  genesis serve holds live sessions for clients of its HTTP API, and keeps
  every tool call they (or its runs) ask about in an approval inbox that any
  client may answer and that survives a restart of the server (docs/serve.md).
  These scenarios run a real server process on 127.0.0.1 with the two-way
  failer: no model, no credentials (the first two read a body as the server
  does, in-process: what a body may set is the house's one list, what its
  backend cannot do the one capability check).

  Scenario: A body that names an executable is refused in a batch line's words
    Given the rules of a server without --trusted-input
    When a client's body sets "cli_path" to "/bin/sh"
    Then the body is refused: "refused field(s) cli_path: a run-many file may set only"

  Scenario: The approval inbox on a one-way backend is refused in the capability check's words
    Given the rules of a server without --trusted-input
    And a backend "oneway" with no two-way protocol
    When a client's body asks for the approval inbox on backend "oneway"
    Then the body is refused as the capability check refuses "approver" on "oneway"

  @slow
  Scenario: A session over HTTP answers its turns in one conversation
    Given a genesis serve
    When a client opens a session
    And the client sends the turn "hello"
    And the client sends the turn "/history"
    Then every turn of the session answered with status 0
    And the last turn says "1 earlier prompts in this conversation: hello"

  @slow
  Scenario: A turn's model holds for the next turns; its level needs --trusted-input
    Given a genesis serve
    When a client opens a session
    And the client sends the turn "hello" with model "m-b"
    And the client sends the turn "hello again"
    Then every turn of the session answered with status 0
    And the turns of the session ran on the models "m-b, m-b"
    And a turn that sets permissions "full" is refused: "refused field(s) permissions: a run-many file may set only"

  @slow
  Scenario: A level the session's backend cannot switch to answers the turn 64 and the session lives on
    Given a genesis serve with --trusted-input
    When a client opens a session with permissions "read-only"
    And the client sends the turn "/write w.txt x" with permissions "edit"
    Then the last turn answered with status 64
    And the last turn says "opened with permissions='read-only' to 'edit'"
    When the client sends the turn "hello"
    Then the last turn answered with status 0

  @slow
  Scenario: A tool call waits in the inbox until a client allows it
    Given a genesis serve
    When a client opens a session
    And the client starts the turn "/bash echo inbox-ok"
    Then the inbox holds one pending approval for "echo inbox-ok"
    When another client allows it as "alice"
    Then the last turn says "ran echo inbox-ok"
    And the approval is answered "allow_once" by "alice" through "api"

  @slow
  Scenario: Nobody answers before the deadline, so the default denies the call
    Given a genesis serve
    When a client opens a session with an approval timeout of 0.5 seconds
    And the client sends the turn "/bash echo unanswered"
    Then the last turn does not say "ran echo unanswered"
    And the approval is "expired"
    And an answer to it is refused as "expired"

  @slow
  Scenario: A server killed mid-approval lists the session lost and the approval expired
    Given a genesis serve
    When a client opens a session
    And the client sends the turn "remember the tide"
    And the client starts the turn "/bash echo mid-crash"
    Then the inbox holds one pending approval for "echo mid-crash"
    When the server is killed with SIGKILL and started again
    Then the session is listed "lost" with 2 turns
    And the approval is "expired"
    And an answer to it is refused as "expired"
    And no process of the session is left
    When the client resumes the session
    And the client sends the turn "/history"
    Then the last turn says "remember the tide"
