Feature: A turn's own model, permission level and output schema
  One turn of a live session may switch the model and the permission level
  (docs/sessions.md, "Switching the model or the level between turns"); the
  switch holds for the later turns, as the CLIs keep it.  A switch the CLI
  cannot make is refused for that turn in words (status 64) and the session
  lives on.  The CLI is the embedded failer playing claude, which switches
  through claude's control requests.

  Scenario: A model and a level one turn switched hold for the later turns
    Given a two-way failer agent with permissions "edit"
    When a session is opened
    And a turn sets model "m-b" and sends "hello"
    And a turn sets permissions "read-only" and sends "/write narrowed.txt no"
    And the session is sent "/write still.txt no"
    And a turn sets permissions "edit" and sends "/write widened.txt yes"
    Then "narrowed.txt" does not exist
    And "still.txt" does not exist
    And "widened.txt" holds "yes"
    And every turn answered with status 0
    And the turns ran on the models "m-b, m-b, m-b, m-b"

  Scenario: A level the session's opening fixed is refused for the turn and the session lives on
    Given a two-way failer agent with permissions "read-only"
    When a session is opened
    And a turn sets permissions "edit" and sends "/write w.txt x"
    Then the turn answered with status 64 and error "invalid_request"
    And the last answer's message holds "opened with permissions='read-only' to 'edit'"
    And "w.txt" does not exist
    When the session is sent "hello"
    Then the turn answered with status 0

  Scenario: A turn's own output schema shapes that turn's answer alone
    Given a two-way failer agent
    When a session is opened
    And a turn asks for a Review and sends '/json {"verdict": "fine", "issues": []}'
    And the session is sent '/json {"verdict": "free text"}'
    Then every turn answered with status 0
    And the outputs of the turns were [{"verdict": "fine", "issues": []}, null]

  Scenario: A session opened with a schema keeps it: another for a turn is refused
    Given a two-way failer agent
    When a session is opened for a Review
    And a turn asks for a Review and sends 'hello'
    Then the turn answered with status 64 and error "invalid_request"
    And the last answer's message holds "opened with its own output_schema="
