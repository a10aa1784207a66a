"""Task trackers: the PRD (markdown checklist or prd.json) the loop takes its tasks from.

    from ralph.tracker import next_task, open_tracker

    tracker = open_tracker(Path("PRD.md"))
    task = next_task(tracker.load())
    if task is not None:
        tracker.set_status(task.id, "in_progress")

Every call answers for the file as it is now (agents edit it), from the tracker's last parse
when the file did not change; every write is atomic and changes only the task asked for.
All failures are TrackerError, with one-line messages naming file and line.
"""

from ralph.tracker.errors import TrackerError
from ralph.tracker.factory import open_tracker
from ralph.tracker.jsontracker import JsonTracker
from ralph.tracker.markdown import MarkdownTracker
from ralph.tracker.model import KINDS, STATUSES, Task, TaskKind, TaskStatus, kind_from_title
from ralph.tracker.protocol import Tracker, TrackerFormat
from ralph.tracker.selection import Summary, next_task, summary
from ralph.tracker.snapshot import Snapshot
from ralph.tracker.suspicious import SuspiciousLine, suspicious_lines

__all__ = [
    "KINDS",
    "STATUSES",
    "JsonTracker",
    "MarkdownTracker",
    "Snapshot",
    "Summary",
    "SuspiciousLine",
    "Task",
    "TaskKind",
    "TaskStatus",
    "Tracker",
    "TrackerError",
    "TrackerFormat",
    "kind_from_title",
    "next_task",
    "open_tracker",
    "summary",
    "suspicious_lines",
]
