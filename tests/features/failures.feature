Feature: Failure intelligence
  Every failed run comes back classified, with its partial progress, recovery
  guidance, an error context and a text failure report, so an orchestrator or
  a person can act on it. The agent always answers.

  @slow
  Scenario Outline: Each Process Failer mode yields its failure category
    Given a failer agent with timeout <timeout> seconds
    When the failer processes "<prompt>"
    Then the failure category is "<category>"
    And the failure is retryable "<retryable>", in every view of it
    And the response carries an error context of type "<category>"
    And the failure report round-trips to the same record
    And the response message is not empty

    Examples:
      | prompt               | timeout | category     | retryable |
      | /fail                | 10      | agent_error  | yes       |
      | /rate-limit          | 10      | rate_limit   | yes       |
      | /timeout 30          | 1       | timeout      | no        |
      | /partial             | 10      | partial      | yes       |
      | /fail-then-succeed 1 | 10      | network      | yes       |
      | /timeout soon        | 10      | invalid_task | no        |

  Scenario: No failure command is a success without a failure record
    Given a failer agent with timeout 10 seconds
    When the failer processes "hello"
    Then the response is a success without failure record

  Scenario: A rate-limited run says when to retry
    Given a failer agent with timeout 10 seconds
    When the failer processes "/rate-limit"
    Then the failure says to retry after 30 seconds
    And the failure report contains "  • Wait 30s before retrying (the API said so)"
    And the failure report contains "<failure_category>rate_limit</failure_category>"

  @slow
  Scenario: A transient failure succeeds on the next attempt
    Given a failer agent with timeout 10 seconds
    When the failer processes "/fail-then-succeed 1"
    Then the failure category is "network"
    When the failer processes "/fail-then-succeed 1"
    Then the response is a success without failure record

  @slow
  Scenario: A timeout without progress suggests breaking the task up
    Given a failer agent with timeout 1 seconds
    When the failer processes "/timeout 30"
    Then the failure report contains "Retryable: No"
    And the failure report contains "  • Break task into smaller subtasks"
    And the failure report contains "  • Retry with timeout=2s"

  Scenario Outline: The fake CLIs' failure modes are classified
    Given a fake "<cli>" CLI that <behavior>
    When the fake CLI's agent processes a request
    Then the failure category is "<category>"
    And the response carries an error context of type "<category>"
    And the failure report round-trips to the same record

    Examples:
      | cli    | behavior                                                  | category    |
      | claude | exits 1 with stderr "Error: authentication failed"         | auth        |
      | codex  | exits 1 with stderr "connect ECONNREFUSED 127.0.0.1:443"   | network     |
      | claude | is killed by SIGKILL                                       | agent_error |
      | claude | hangs past the timeout                                     | timeout     |
      | claude | exits 0 before its result event                            | partial     |
      | claude | replays the "claude_429" recording                         | rate_limit  |
      | claude | replays the "claude_401" recording                         | auth        |
      | codex  | replays the "codex_stream_error" recording                 | network     |
      | codex  | replays the "codex_500" recording                          | agent_error |
      | gemini | replays the "gemini_401" recording                         | auth        |
      | gemini | replays the "gemini_429capped" recording                   | rate_limit  |
      | gemini | replays the "gemini_sigterm" recording                     | partial     |
      | opencode | replays the "opencode_429" recording                     | rate_limit  |
      | qwen   | replays the "qwen_401" recording                           | auth        |
      | qwen   | replays the "qwen_429retrying" recording                   | rate_limit  |

  Scenario: A missing CLI is not found, with the install hint
    Given a claude agent whose CLI does not exist
    When the fake CLI's agent processes a request
    Then the failure category is "missing"
    And the failure report contains "  • Install it with `npm install -g @anthropic-ai/claude-code`"

  Scenario: A failure report with odd characters round-trips
    Given a failure record with the message
      """
      line one
      line two <b>bold</b> & <status>completed</status>
      """
    And the record modified the files "a,b.py" and "ünïcødé/файл.py" and " spaced "
    When the record is written as a failure report and read back
    Then the parsed record equals the original
    And the report has one line per modified-files list
