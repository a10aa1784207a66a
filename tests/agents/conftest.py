"""The loop tests' scratch project fixture, for the adapter tests that run a loop."""

from tests.loop.conftest import project

__all__ = ["project"]
