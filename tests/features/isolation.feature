Feature: Isolated runs - a git worktree per run
  With isolation "worktree" the agent works in a fresh git worktree on a new
  branch; the caller's checkout is never touched, the changes are read from
  git, and the worktree is removed or kept per "keep" while the branch stays.

  @slow
  Scenario: A successful isolated run leaves its work on a branch and no worktree
    Given a git repository with one commit
    And an isolated agent whose CLI writes "out.txt"
    When the agent processes the request in the repository
    Then the response status is 0
    And the response lists "out.txt" as "added"
    And the caller's checkout is unchanged
    And the run's branch holds "out.txt"
    And no worktree of ours remains

  Scenario: A failed run keeps its worktree when keep is "on_failure"
    Given a git repository with one commit
    And an isolated agent with keep "on_failure" whose CLI writes "out.txt" then fails
    When the agent processes the request in the repository
    Then the response status is not 0
    And the run's worktree is kept and holds "out.txt"
    And the caller's checkout is unchanged

  @slow
  Scenario: A cancelled isolated run commits its leftovers and removes its worktree
    Given a git repository with one commit
    And an isolated agent whose CLI writes "out.txt" then hangs
    When the request is cancelled once the CLI has written its file
    Then the run's branch holds "out.txt"
    And no worktree of ours remains
    And the caller's checkout is unchanged

  @slow
  Scenario: A failing verify is retried with its output as the continuation
    Given a git repository with one commit
    And an isolated agent whose CLI writes its prompt to "out.txt"
    And a verify command that passes only once "out.txt" holds a continuation
    When the agent processes the request in the repository
    Then the response status is 0
    And the verify history is "failed" then "passed"
