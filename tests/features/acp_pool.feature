Feature: A warm session pool over the Agent Client Protocol
  A pool keeps live sessions open before prompts arrive (docs/sessions.md).
  On an ACP agent each pooled conversation is a process of its own, opened with
  initialize and session/new in the background: nothing one caller said reaches
  the next.  These scenarios run on the fake ACP agent, whose HISTORY prompt
  answers the prompts its process was sent before.

  @slow
  Scenario Outline: A pool of two serves four prompts on <flavour> with no context carried
    Given a warm pool of 2 sessions of the fake ACP agent "<flavour>"
    When 4 prompts "HISTORY" are run through the pool, 2 at a time
    Then every prompt answered with status 0
    And every answer says "history: "
    And each prompt was answered by a process of its own
    And no session was opened for its caller
    When the pool is closed
    Then nothing the pool started is left

    Examples:
      | flavour  |
      | gemini   |
      | qwen     |
      | opencode |

  @slow
  Scenario: A pooled conversation keeps its own turns, and only its own
    Given a warm pool of 1 sessions of the fake ACP agent "qwen"
    When a pooled conversation is sent "remember tangerine" then "HISTORY"
    And another pooled conversation is sent "HISTORY"
    Then conversation 1's last answer says "history: remember tangerine"
    And conversation 2's last answer says "history: "
    When the pool is closed
    Then nothing the pool started is left

  Scenario: A setting a live session cannot have is refused before anything starts
    When a pool of the fake ACP agent "gemini" is asked for with isolation "worktree"
    Then it is refused with "a live session runs in its working directory"
