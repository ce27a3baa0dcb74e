"""Bind vocabulary.feature to its steps (tests/steps/vocab_steps.py)."""

from pytest_bdd import scenarios

# pytest-bdd steps are fixtures: the star import brings their generated names here.
from tests.steps.vocab_steps import *  # noqa: F403

scenarios("vocabulary.feature")
