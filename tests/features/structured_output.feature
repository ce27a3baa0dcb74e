Feature: Structured output
  output_schema= asks for an answer of a given shape (docs/sessions.md,
  "Structured output"): the CLI is given the JSON Schema, the answer is
  validated into the result's output, and an answer that does not match is
  retried once with the validation error, then fails.  The CLI is the embedded
  failer, which answers as claude does with --json-schema, or the fake ACP
  agent: ACP has no schema field, so the schema goes in the turn's prompt and
  the answer is validated by us.

  Scenario: The answer is validated into the caller's model
    Given a two-way failer agent
    When a run asks "Review the last commit" for a Review
    Then the output is a Review whose verdict is "failer"

  @slow
  Scenario: An answer that does not match is retried once, then fails
    Given a two-way failer agent
    When a run asks '/json {"verdict": 1, "issues": []}' for a Review
    Then the result failed with error "invalid_output" after 2 attempts
    And its message names "$.verdict"

  @slow
  Scenario: In a live session the retry is a second turn of the same session
    Given a two-way failer agent
    When a session is opened for a Review
    And the session is sent '/json {"verdict": 1, "issues": []}'
    Then the turn answered with status 1 and error "invalid_output"
    And the turns were numbered 2
    When the session is sent "Review it again"
    Then the turn answered with status 0

  Scenario: Over ACP a wrong answer is retried in the session with the validation error
    Given a fake ACP agent "qwen"
    When a session is opened for a Review
    And the session is sent 'JSONFIX {"verdict":1,"issues":[]} {"verdict":"ok","issues":[]}'
    Then the turn answered with status 0
    And the last turn took 2 attempts
    And the last output is {"verdict": "ok", "issues": []}

  Scenario: Over ACP an answer that never matches fails after one retry
    Given a fake ACP agent "gemini"
    When a run asks 'JSON {"verdict":1,"issues":[]}' for a Review
    Then the result failed with error "invalid_output" after 2 attempts
    And its message names "$.verdict"
