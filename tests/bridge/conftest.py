"""The loop tests' scratch project (git repo, 3-task PRD, the fake agent as `fake`)."""

from tests.loop.conftest import project

__all__ = ["project"]
