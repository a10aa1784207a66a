"""The inbox: reviews (`inbox/reviews/<rev>.yaml`, one per decision, never rewritten) and help
requests (`inbox/help_requests/<help>.md`) as `inbox.list_reviews` and
`inbox.list_help_requests` list them, the writing of a review, and what every decision
shares: a lock that makes deciding about one subject one at a time (across processes too),
and the appending of its event to the log of the run the subject came from."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ralph.company.events import append_event
from ralph.company.files import (
    FileFormatError,
    read_text,
    read_yaml,
    split_front_matter,
    write_yaml,
)
from ralph.company.ids import new_id
from ralph.company.layout import (
    EVENTS_FILE,
    HELP_REQUESTS,
    PROJECTS,
    REVIEWS,
    CompanyError,
    component,
    require_workspace,
)
from ralph.company.schemas import HelpRequestFrontMatter, ReviewYaml, schema_issues
from ralph.company.workspace import HELP_HEADINGS, now_iso
from ralph.flock import exclusive

DEFAULT_LIMIT = 200
MAX_LIMIT = 1000
LOCKS = ".local/locks"


def js_order(name: str) -> bytes:
    """A sort key ordering strings as JavaScript's default sort does (by UTF-16 units)."""
    return name.encode("utf-16-be", "surrogatepass")


def _newest_names(directory: Path, suffix: str, limit: int) -> list[str]:
    """The last `limit` names ending in `suffix` (files or not), in descending order, as the
    original picks them before reading any."""
    try:
        names = [p.name for p in directory.iterdir() if p.name.endswith(suffix)]
    except OSError:
        return []
    return sorted(names, key=js_order, reverse=True)[:limit]


def _check_limit(limit: int) -> int:
    if not 1 <= limit <= MAX_LIMIT:
        raise CompanyError(f"limit must be between 1 and {MAX_LIMIT}: {limit}", limit=limit)
    return limit


def list_reviews(root: Path, limit: int = DEFAULT_LIMIT) -> list[dict[str, Any]]:
    """The reviews of the `limit` last file names (descending; an invalid file takes its
    place in the count and is left out), each with its keys in the review schema's order."""
    require_workspace(root)
    found: list[dict[str, Any]] = []
    for name in _newest_names(root / REVIEWS, ".yaml", _check_limit(limit)):
        review = read_review(root / REVIEWS / name)
        if review is not None:
            found.append(review)
    return found


def read_review(path: Path) -> dict[str, Any] | None:
    """A review file's object in schema order, or None if it is unreadable or invalid."""
    try:
        data = read_yaml(path)
    except (OSError, FileFormatError):
        return None
    if schema_issues(ReviewYaml, data):
        return None
    return ReviewYaml.model_validate(data).model_dump(exclude_none=True)


def list_help_requests(root: Path, limit: int = DEFAULT_LIMIT) -> list[dict[str, Any]]:
    """The front matter of the help requests of the `limit` last file names (descending;
    an invalid one takes its place in the count and is left out), as written."""
    require_workspace(root)
    found: list[dict[str, Any]] = []
    for name in _newest_names(root / HELP_REQUESTS, ".md", _check_limit(limit)):
        try:
            text = read_text(root / HELP_REQUESTS / name)
            data, body = split_front_matter(text, name)
        except (OSError, FileFormatError):
            continue
        if schema_issues(HelpRequestFrontMatter, data) or not all(
                _has_heading(body, heading) for heading in HELP_HEADINGS):
            continue
        found.append(data)
    return found


def _has_heading(body: str, heading: str) -> bool:
    pattern = re.compile(rf"^\s*{re.escape('## ' + heading)}\s*$", re.IGNORECASE | re.M)
    return pattern.search(body) is not None


def reviews_of(root: Path, kind: str, project_id: str, artifact_id: str) -> list[dict[str, Any]]:
    """Every valid review deciding about the artifact (`subject.kind` = `kind`)."""
    try:
        names = sorted((p.name for p in (root / REVIEWS).iterdir()
                        if p.name.endswith(".yaml")), key=js_order)
    except OSError:
        return []
    found = []
    for name in names:
        review = read_review(root / REVIEWS / name)
        if review is None:
            continue
        subject = review["subject"]
        if (subject["kind"], subject["project_id"], subject["artifact_id"]) == (
                kind, project_id, artifact_id):
            found.append(review)
    return found


def write_review(root: Path, *, actor_id: str, actor_role: str, decision: str,
                 subject: dict[str, Any], policy: dict[str, Any],
                 notes: str | None) -> tuple[str, str]:
    """A new review file (notes always written, "" when none): (review_id, created_at)."""
    review_id, created_at = new_id("rev"), now_iso()
    write_yaml(root / REVIEWS / f"{review_id}.yaml", {
        "schema_version": 1,
        "type": "review",
        "id": review_id,
        "created_at": created_at,
        "actor_id": actor_id,
        "actor_role": actor_role,
        "decision": decision,
        "subject": subject,
        "policy": policy,
        "notes": notes or "",
    })
    return review_id, created_at


@contextmanager
def decision_lock(root: Path, subject: str) -> Iterator[None]:
    """Held while one request decides about `subject` (a file name): a second decision,
    from this process or another, waits for the first to be written and then sees it.
    (Blocking: a decision takes milliseconds, and the kernel releases the lock of a
    process that dies.)"""
    with exclusive(root / LOCKS / f"{subject}.lock"):
        yield


def agent_files_lock(agent_id: str) -> str:
    """The lock of an agent's own files (mistakes.yaml, AGENTS.md), which two methods
    rewrite."""
    return f"agent-{agent_id}"


def file_lock(rel: str) -> str:
    """The lock of one workspace file (a memory delta's target, which several deltas may
    patch): named by a digest of its path."""
    return "file-" + hashlib.sha256(rel.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def run_events_path(root: Path, project_id: str, run_id: str) -> Path | None:
    """The events file of a run of the project, or None if an id is not a plain name."""
    try:
        component(project_id, "project_id")
        component(run_id, "run_id")
    except CompanyError:
        return None
    return root / PROJECTS / project_id / "runs" / run_id / EVENTS_FILE


def append_run_event(root: Path, project_id: str, run_id: str, event: dict[str, Any], *,
                     create: bool = False) -> bool:
    """Append `event` to the run's log, if the run has one (`create`: if its directory
    exists); whether it was. Best effort, as in the original: the decision it records is
    already written, and a run that is gone must not undo it."""
    path = run_events_path(root, project_id, run_id)
    if path is None or not (create or path.exists()):
        return False
    try:
        append_event(path, event)
    except OSError:
        return False
    return True
