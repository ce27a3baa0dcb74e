Feature: Retry and recovery
  A retry policy (spec 002) retries what a retry can fix, continues the failed
  CLI session from what was already done (spec 004), and when it gives up the
  response records every attempt and, where a human or an orchestrator must
  decide, an escalation record.  Backoffs run in virtual time: the suite never
  sleeps for them.

  Background:
    Given virtual time for retries

  @slow
  Scenario: A transient failure is retried until it succeeds
    Given a failer agent with the default retry policy
    When the agent runs "/fail-then-succeed 2"
    Then the run succeeded on attempt 3
    And the answer is the failer's success body "Succeeded after 2 failures" with retry_count 3
    And the response has retry_count 2, attempts 3 and a history of 2 "network" failures with action "retry"
    And the retries waited 1, 2 seconds of virtual time
    And every retry resumed the session of the first attempt
    And every attempt was published as an event

  @slow
  Scenario: A rate limit waits the advertised retry-after between attempts
    Given a failer agent with the default retry policy
    When the agent runs "/rate-limit"
    Then the run failed with category "rate_limit" after 6 attempts
    And the retries waited 30, 30, 30, 30, 30 seconds of virtual time
    And the retry policy gave up with action "fail" and no escalation

  @slow
  Scenario: A timeout after progress is retried after 30 s with the timeout extended 1.5 times
    Given a fake claude agent with timeout 1.2 seconds and the default retry policy
    And the first attempt calls a tool and then hangs
    And the next attempt answers with the prompt it got
    When the agent runs "Refactor the parser"
    Then the run succeeded on attempt 2
    And the attempts had timeouts 1.2, 1.8 seconds
    And the retries waited 30 seconds of virtual time

  @slow
  Scenario: A timeout with no progress is not retried as-is
    Given a failer agent with timeout 0.5 seconds and the default retry policy
    When the agent runs "/timeout 5"
    Then the run failed with category "timeout" after 1 attempts
    And the retry policy gave up with action "escalate"
    And the escalation suggests "Break task into smaller subtasks" first

  @slow
  Scenario: A timeout after progress continues the same session
    Given a fake claude agent with timeout 0.5 seconds and the default retry policy
    And the first attempt calls a tool and then hangs
    And the next attempt answers with the prompt it got
    When the agent runs "Refactor the parser"
    Then the run succeeded on attempt 2
    And the attempts had timeouts 0.5, 0.75 seconds
    And the second attempt resumed the first session with a continuation prompt
    And the continuation prompt lists the tool used and the original request

  @slow
  Scenario: An agent error is retried once, then escalated
    Given a failer agent with the default retry policy
    When the agent runs "/fail"
    Then the run failed with category "agent_error" after 2 attempts
    And the retries waited 60 seconds of virtual time
    And the retry policy gave up with action "escalate"
    And the escalation record has the spec's fields and 2 errors in its history

  Scenario: A failure no retry can fix escalates at once
    Given a fake claude agent with timeout 5 seconds and the default retry policy
    And every attempt fails with "Error: authentication failed"
    When the agent runs "Fix the build"
    Then the run failed with category "auth" after 1 attempts
    And the retry policy gave up with action "escalate"

  @slow
  Scenario: The overall deadline stops the retries early
    Given a failer agent with the default retry policy and a deadline of 100 seconds
    When the agent runs "/rate-limit"
    Then the run failed with category "rate_limit" after 4 attempts
    And the retries waited 30, 30, 30 seconds of virtual time
    And the last history entry says the deadline would be passed

  Scenario: Without a retry policy a request is one attempt
    Given a failer agent without a retry policy
    When the agent runs "/fail-then-succeed 1"
    Then the run failed with category "network" after 1 attempts
    And no attempt event was published

  @slow
  Scenario: A retry policy given for one call overrides the agent's
    Given a failer agent without a retry policy
    When the agent runs "/fail-then-succeed 1" with 1 retry for this call
    Then the run succeeded on attempt 2
