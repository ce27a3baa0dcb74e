Feature: OpenTelemetry spans
  When opentelemetry-api is installed, every run is a span "invoke_agent <agent>"
  under the caller's current span, with one child span per attempt and, under
  it, one span per tool call.  The CLI is started with a TRACEPARENT naming its
  attempt.  Nothing is recorded until the application configures an SDK; the
  prompt and the answer are never recorded unless the user opts in, and
  telemetry=False switches it all off.

  Background:
    Given an OpenTelemetry SDK exporting to memory
    And a fake claude CLI that calls one tool and answers

  Scenario: A run is traced under the caller's span
    Given an agent with the default settings
    When the agent runs "prompt-frobozz" inside the caller's span "orchestrator"
    Then a span "invoke_agent claude-agent" is a child of "orchestrator"
    And it has one child "attempt 1" with one child "execute_tool Bash"
    And the CLI was started with a TRACEPARENT naming "attempt 1"
    And no span holds the text "prompt-frobozz"

  Scenario: Telemetry switched off
    Given an agent with telemetry off
    When the agent runs "prompt-frobozz" inside the caller's span "orchestrator"
    Then the only span is "orchestrator"
    And the CLI was started without a TRACEPARENT
