Feature: Hook points and tool matchers
  Beyond the tool calls, hooks run when a prompt is handed to the CLI, when
  the session starts and ends, when a subagent starts and stops and at a
  notification (docs/sessions.md, "Hooks").  claude calls them itself; on
  another CLI the session reports the prompt and the session's start and end
  itself, observed, and refuses the subagent and notification points.  A
  pre_tool or post_tool hook may name its tools (@matching).  The CLI is the
  embedded failer, which calls claude's hook callbacks where claude calls
  them, or the fake ACP agent.

  Scenario: A pre_tool hook that names Write skips a command and guards a write
    Given a two-way failer agent with permissions "full"
    And a pre_tool hook matching "Write" that blocks saying "no writes"
    When a session is opened
    And the session is sent "/bash echo hi"
    Then the last answer says "ran echo hi: hi"
    And the turn ran no hook
    When the session is sent "/write notes.txt hello"
    Then the hooks of the turn were "pre_tool" "blocked"
    And "notes.txt" does not exist

  Scenario: A prompt_submit hook adds context the model reads
    Given a two-way failer agent with permissions "full"
    And a prompt_submit hook that adds the context "Answer in French."
    When a session is opened
    And the session is sent "/bash echo built"
    Then the last answer says "ran echo built: built (UserPromptSubmit hook additional context: Answer in French.)"
    And the hooks of the turn were "prompt_submit" "changed"

  Scenario: A prompt_submit hook refuses a prompt
    Given a two-way failer agent with permissions "full"
    And a prompt_submit hook that blocks saying "not this one"
    When a session is opened
    And the session is sent "/bash echo never"
    Then the last answer's message holds "UserPromptSubmit operation blocked by hook"
    And the last answer's message holds "not this one"
    And the hooks of the turn were "prompt_submit" "blocked"

  Scenario: Off claude the session reports its start, each prompt and its end, observed
    Given a fake ACP agent "qwen"
    And session_start, prompt_submit and session_end hooks that each ask to block
    When a session is opened
    And the session is sent "hello"
    Then the hooks of the turn were "session_start" "continued", "prompt_submit" "continued"
    And every hook record of the turn was observed, its block not applied
    When the session is sent "again"
    Then the hooks of the turn were "prompt_submit" "continued"
    When the session is closed, its end hooks kept
    Then the session's end hooks were "session_end" "continued", observed

  Scenario: Off claude the subagent points and subagent definitions are refused in words
    Given a fake ACP agent "gemini"
    Then a subagent_stop hook is refused with "reports no subagent_stop hook point"
    And agents= is refused with "takes no subagent definitions, which agents= needs"

  Scenario: A defined subagent runs between its start and stop hooks
    Given a two-way failer agent with permissions "full"
    And the subagent "reviewer" prompted "You review code."
    And a subagent_start hook that adds the context "Be brief."
    And a subagent_stop hook that blocks once saying "check the tests too"
    When a session is opened
    And the session is sent "/agent reviewer look at main.py"
    Then the last answer says "reviewer went on, as the SubagentStop hook asked: check the tests too"
    And the hooks of the turn were "subagent_start" "changed", "subagent_stop" "blocked", "subagent_stop" "continued"
    And the subagent_stop hook first read "reviewer (You review code.) read: look at main.py [SubagentStart hook additional context: Be brief.]"
