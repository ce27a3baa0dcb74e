Feature: Questions from the CLI to the user
  asker= answers the questions the CLI puts to the user (docs/sessions.md, "Questions
  from the CLI"): each question reaches the asker on its own, the answers go back to
  the CLI together, and each is recorded in the turn's result.  Without an asker the
  model reads that nobody can answer.  The CLI is the fake codex app-server, whose
  QUESTION scenario asks two questions with item/tool/requestUserInput and says the
  answers it got; or the fake ACP agent, whose ELICIT scenario asks to fill a form of
  one field with elicitation/create and says what it got.

  Scenario: The asker answers the CLI's questions
    Given a fake codex agent whose asker answers "yes" and "because"
    When a session is opened
    And the session is sent "QUESTION Proceed?"
    Then the CLI got the answers "yes" and "because"
    And the turn recorded the questions "Proceed?" and "Why?", answered by "asker"

  Scenario: Without an asker the model reads that nobody can answer
    Given a fake codex agent with no asker
    When a session is opened
    And the session is sent "QUESTION Proceed?"
    Then the last answer's message holds "no one can answer questions in this run; decide yourself and say what you assumed"
    And the turn recorded the questions "Proceed?" and "Why?", answered by "none"

  Scenario: An ACP agent's form is filled by the asker
    Given the ACP agent "opencode"
    And an asker answering "Ada"
    When an ACP session is opened
    And the ACP session is sent "ELICIT Your name?"
    Then the agent's form was filled with "Ada"
