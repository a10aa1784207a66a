"""What a run warns about its PRD at the start: lines that look like tasks but are not read as
tasks (`1. [ ] Title`, `- [] Title`, a checklist under another heading than `## Tasks`), which
would otherwise be left out of the run without a word."""

from __future__ import annotations

from ralph.config import Config
from ralph.loop.paths import ProjectPaths
from ralph.tracker import TrackerError, suspicious_lines

# A run's start shows this many lines; `ralph tasks` lists them all.
MAX_SHOWN = 5


def prd_warnings(paths: ProjectPaths, config: Config) -> list[str]:
    """One message per line of the PRD that looks like a task but is not read as one (see
    ralph.tracker.suspicious_lines), for a `loop.warning` event each: at most MAX_SHOWN, then
    one counting the rest. Never raises: a PRD that cannot be read gives none (loading its
    tasks reports that), and prd.json has no such lines."""
    source = config.files.prd
    try:
        found = suspicious_lines(paths.root / source)
    except TrackerError:
        return []
    messages = [line.describe(source) for line in found[:MAX_SHOWN]]
    hidden = len(found) - MAX_SHOWN
    if hidden == 1:
        messages.append(f"{source}: 1 more line looks like a task but is not read as one "
                        "(`ralph tasks` lists it)")
    elif hidden > 1:
        messages.append(f"{source}: {hidden} more lines look like tasks but are not read as "
                        "tasks (`ralph tasks` lists them all)")
    return messages
