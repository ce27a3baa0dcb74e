Feature: Approving each tool call
  An approver settles each tool call the CLI asks to make (docs/sessions.md,
  "Approving each tool call"): allow, with a changed input; refuse, the model
  reading why; refuse and end the turn; "always" for the rest of the session.
  A request nobody answers in time, or an approver that raises, is denied.
  The CLI is the embedded failer playing claude: it makes the call only once
  allowed, with the input as answered.

  Scenario: An allowed write happens with the approver's changed input
    Given a two-way failer agent whose approver allows writes with the content "changed"
    When a session is opened
    And the session is sent "/write notes.txt original"
    Then "notes.txt" holds "changed"
    And the approvals of the turn were "allow_once" by "approver"

  @slow
  Scenario: A refused command is not run and the model reads why
    Given a two-way failer agent whose approver refuses commands saying "not today"
    When a session is opened
    And the session is sent "/bash touch made.txt"
    Then "made.txt" does not exist
    And the turn answered with status 0
    And the last answer says "Bash was refused: not today"
    And the approvals of the turn were "reject_once" by "approver"

  @slow
  Scenario: A refusal that ends the turn
    Given a two-way failer agent whose approver refuses commands and ends the turn saying "stop"
    When a session is opened
    And the session is sent "/bash touch made.txt"
    Then "made.txt" does not exist
    And the turn answered with status 1 and error "permission_denied"
    When the session is sent "hello"
    Then the turn answered with status 0

  @slow
  Scenario: "Always" settles the same command for the rest of the session
    Given a two-way failer agent whose approver allows always
    When a session is opened
    And the session is sent "/bash python3 -c print(7)"
    And the session is sent "/bash python3 -c print(7)"
    Then the last answer says "ran python3 -c print(7): 7"
    And the approver was asked 1 time

  @slow
  Scenario: A request nobody answers in time is denied
    Given a two-way failer agent whose approver never answers, with an approval timeout of 0.5 seconds
    When a session is opened
    And the session is sent "/bash touch late.txt"
    Then "late.txt" does not exist
    And the approvals of the turn were "reject_once" by "timeout"

  @slow
  Scenario: An approver that raises denies, and the error is recorded
    Given a two-way failer agent whose approver raises "approver bug"
    When a session is opened
    And the session is sent "/bash touch made.txt"
    Then "made.txt" does not exist
    And the approvals of the turn were "reject_once" by "error"
    And the approval's error holds "approver bug"
