Feature: Prompts with parts: text, images and file references
  A prompt may be a list of parts (docs/sessions.md): its text, an Image (a
  file's or bytes) and a FileRef (a file the agent is pointed at).  Each backend
  sends them as its CLI's content blocks, or the turn is refused in words; an
  image's bytes never appear in an event.  These scenarios run on the fake ACP
  agent (coding_genesis/testing/fake_acp.py), which records the blocks it got.

  Scenario: An image and a file reach the agent as its content blocks
    Given the ACP agent "qwen"
    And a file "notes.md" in the working directory
    When an ACP session is opened
    And the ACP session is sent a 1x1 PNG and the file "notes.md", asking "hello"
    Then every ACP turn answered with status 0
    And the last ACP answer is "fake qwen got: hello"
    And the agent got the PNG as an image block, by its size and sha256
    And the agent got a resource_link to "notes.md"
    And no event record of the session holds the PNG's bytes

  Scenario: An agent whose initialize takes no image refuses the turn, the session lives on
    Given the ACP agent "gemini" that takes no image
    When an ACP session is opened
    And the ACP session is sent a 1x1 PNG, asking "hello"
    And the ACP session is sent "and again"
    Then ACP turn 1 answered with status 64, saying "takes no image in a prompt"
    And ACP turn 2 answered with status 0, saying "fake gemini got: and again"
    And the agent got no prompt part

  Scenario: An image over 20 MiB is refused at the door
    Given the ACP agent "qwen"
    When an ACP session is opened
    And the ACP session is sent an image of 21 MiB, asking "hello"
    Then ACP turn 1 answered with status 64, saying "at most 20971520 bytes (20 MiB)"
    And the agent got no prompt part
