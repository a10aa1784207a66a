"""Task ids: what a valid id looks like, and the slug used when a task has no explicit id."""

from __future__ import annotations

import re

ID_PATTERN = re.compile(r"[A-Za-z0-9_-]+")
SLUG_MAX_LENGTH = 40

_NON_ALNUM = re.compile(r"[^a-z0-9]+")


def is_valid_id(value: str) -> bool:
    return ID_PATTERN.fullmatch(value) is not None


def slugify(title: str) -> str:
    """The id of a task without an explicit one: derived from its own title only, so that
    inserting, removing or reordering other tasks never changes it.

    Lowercase ASCII letters and digits; every other run of characters becomes one `-`; at most
    SLUG_MAX_LENGTH characters, never starting or ending with `-`. Empty when the title holds
    no ASCII letter or digit (the caller reports that).
    """
    slug = _NON_ALNUM.sub("-", title.lower()).strip("-")
    return slug[:SLUG_MAX_LENGTH].rstrip("-")
