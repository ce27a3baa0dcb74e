Feature: Hooks
  Hooks are the caller's code at the CLI's hook points (docs/sessions.md,
  "Hooks"): before and after each tool call, at a turn's end and before a
  compaction.  A hook blocks, changes a tool's input or adds context for the
  model.  The CLI is the embedded failer, which calls claude's hook callbacks
  where claude calls them, or the fake ACP agent, where a pre_tool hook blocks
  through the agent's permission request and the other points are observed.

  Scenario: A pre_tool hook blocks a command before the approver is asked
    Given a two-way failer agent whose approver allows everything
    And a pre_tool hook that blocks commands holding "push --force" saying "no force-push"
    When a session is opened
    And the session is sent "/bash git push --force"
    Then the last answer says "Bash was refused: no force-push"
    And the approver was asked 0 times
    And the hooks of the turn were "pre_tool" "blocked"

  Scenario: A pre_tool hook changes the input the tool runs with
    Given a two-way failer agent with permissions "full"
    And a pre_tool hook that makes every command "echo changed"
    When a session is opened
    And the session is sent "/bash echo original"
    Then the last answer says "ran echo changed: changed"
    And the hooks of the turn were "pre_tool" "changed"

  Scenario: A post_tool hook adds context the model reads
    Given a two-way failer agent with permissions "full"
    And a post_tool hook that adds the context "Run the tests after each change."
    When a session is opened
    And the session is sent "/bash echo built"
    Then the last answer says "ran echo built: built (PostToolUse:Bash hook additional context: Run the tests after each change.)"

  Scenario: A turn_end hook that blocks keeps the turn going
    Given a two-way failer agent
    And a turn_end hook that blocks once saying "also update the changelog"
    When a session is opened
    And the session is sent "hello"
    Then the last answer says "Went on, as the Stop hook asked: also update the changelog"
    And the hooks of the turn were "turn_end" "blocked", "turn_end" "continued"

  @slow
  Scenario: A pre_compact hook skips the compaction
    Given a two-way failer agent
    And a pre_compact hook that blocks saying "not now"
    When a session is opened
    And the session is sent "/compact"
    Then the last answer says "Compaction blocked by the PreCompact hook: not now"
    And the hooks of the turn were "pre_compact" "blocked"

  Scenario: Over ACP a pre_tool hook blocks through the agent's permission request
    Given a fake ACP agent "opencode" whose approver allows everything
    And a pre_tool hook that blocks commands holding "rm -rf" saying "no rm here"
    When a session is opened
    And the session is sent 'ASK execute {"command": "rm -rf build"}'
    Then the agent answered "denied reject_once"
    And the approver was asked 0 times
    And the hooks of the turn were "pre_tool" "blocked"

  Scenario: Over ACP a post_tool hook observes, and what it asks is recorded as not applied
    Given a fake ACP agent "gemini" whose approver allows everything
    And a post_tool hook that adds the context "Run the tests after each change."
    When a session is opened
    And the session is sent 'ASK execute {"command": "make"}'
    Then the agent answered "allowed allow_once"
    And the hooks of the turn were "post_tool" "continued"
    And the hook's record says "gemini cannot apply a post_tool hook's context"
