"""Every bad tracker file is one TrackerError whose single-line message names the file, the line
(markdown, and JSON syntax) and the problem; nothing is written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ralph.tracker import JsonTracker, MarkdownTracker, TrackerError, open_tracker
from tests.tracker.helpers import read, write


def error_of(path: Path) -> str:
    tracker = open_tracker(path)
    with pytest.raises(TrackerError) as info:
        tracker.load()
    message = str(info.value)
    # set_status validates the same way, and leaves the file alone.
    before = path.read_bytes()
    with pytest.raises(TrackerError) as again:
        tracker.set_status("1", "done")
    assert str(again.value) == message
    assert path.read_bytes() == before
    assert "\n" not in message
    return message


def md(name: str, text: str, message: str) -> object:
    return pytest.param(text, message, id=name)


MARKDOWN = [
    md("empty-file", "", "{p} has no tasks: add a checklist under '## Tasks'"),
    md(
        "no-tasks-section",
        "# PRD\n\n## Goals\n- [ ] 1. a goal\n",
        "{p} has no tasks: add a checklist under '## Tasks'",
    ),
    md(
        "empty-tasks-section",
        "# PRD\n\n## Tasks\n\nTo do: everything.\n- a plain bullet\n\n## Notes\n- [ ] 1. n\n",
        "{p} has no tasks: add a checklist under '## Tasks'",
    ),
    md(
        "tasks-only-in-a-fence",
        "## Tasks\n```\n- [ ] 1. example\n```\n",
        "{p} has no tasks: add a checklist under '## Tasks'",
    ),
    md(
        "heading-level-3-is-not-the-section",
        "### Tasks\n- [ ] 1. a\n",
        "{p} has no tasks: add a checklist under '## Tasks'",
    ),
    md(
        "two-tasks-sections",
        "## Tasks\n- [ ] 1. a\n## Notes\n## tasks\n- [ ] 2. b\n",
        "{p}:4: a second '## Tasks' heading (the first is on line 1): keep one task list",
    ),
    md(
        "duplicate-explicit-ids",
        "## Tasks\n- [ ] 1. a\n  - c\n- [ ] 2. b\n* [x] 1: again\n",
        "{p}:5: duplicate task id '1' (also on line 2)",
    ),
    md(
        "duplicate-slugs",
        "## Tasks\n- [ ] Write tests\n- [x] Write tests!\n",
        "{p}:3: duplicate task id 'write-tests' (also on line 2)",
    ),
    md(
        "unknown-marker",
        "## Tasks\n- [ ] 1. a\n- [?] 2. b\n",
        "{p}:3: unknown task marker '[?]'; use [ ], [x], [~] or [-]",
    ),
    md(
        "invisible-marker",
        "## Tasks\n- [\u00a0] 1. a\n",
        "{p}:2: unknown task marker '[U+00A0]'; use [ ], [x], [~] or [-]",
    ),
    md(
        "tab-marker",
        "## Tasks\n- [ ] 1. a\n- [\t] 2. b\n",
        "{p}:3: unknown task marker '[U+0009]'; use [ ], [x], [~] or [-]",
    ),
    md("no-title", "## Tasks\n- [ ]\n", "{p}:2: task has no title"),
    md("id-without-title", "## Tasks\n- [ ] 1. a\n- [x] 2.   \n", "{p}:3: task has no title"),
    md(
        "title-without-id-characters",
        "## Tasks\n- [ ] 日本語\n",
        "{p}:2: cannot make an id from the title '日本語'; give the task an id, "
        "e.g. '- [ ] 1. 日本語'",
    ),
    md(
        "depends-on-unknown",
        "## Tasks\n- [ ] 1. a\n- [ ] 2. b\n  - Depends on: 1, 9\n",
        "{p}:3: task '2' depends on unknown task '9'",
    ),
    md(
        "depends-on-not-an-id",
        "## Tasks\n- [ ] 1. a\n- [ ] 2. b\n  - c\n  - Depends on: #1\n",
        "{p}:5: 'Depends on' lists '#1', which is not a task id "
        "(ids hold letters, digits, '_' and '-')",
    ),
    md(
        "cycle",
        "## Tasks\n- [ ] 1. a\n  - Depends on: 3\n- [ ] 2. b\n- [ ] 3. c\n  - Depends on: 2, 1\n",
        "{p}:2: dependency cycle: 1 -> 3 -> 1",
    ),
    md(
        "self-dependency",
        "## Tasks\n- [ ] 1. a\n- [ ] 2. b\n  - Depends on: 2\n",
        "{p}:3: dependency cycle: 2 -> 2",
    ),
    md(
        "cycle-behind-a-chain",
        "## Tasks\n- [ ] a\n  - Depends on: b\n- [ ] b\n  - Depends on: c\n"
        "- [ ] c\n  - Depends on: d\n- [ ] d\n  - Depends on: b\n",
        "{p}:4: dependency cycle: b -> c -> d -> b",
    ),
]


@pytest.mark.parametrize(("text", "message"), MARKDOWN)
def test_bad_markdown(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path / "PRD.md", text)
    assert error_of(path) == message.format(p=path)


def test_markdown_that_is_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "PRD.md"
    path.write_bytes(b"## Tasks\n- [ ] 1. caf\xe9\n")
    assert error_of(path) == f"{path}:2: not valid UTF-8 text"


def test_a_long_dependency_chain_is_no_problem(tmp_path: Path) -> None:
    # The cycle check is iterative: 5000 tasks in a chain stay below any recursion limit.
    chain = "".join(f"- [ ] {n}. t\n  - Depends on: {n + 1}\n" for n in range(5000))
    path = write(tmp_path / "PRD.md", f"## Tasks\n{chain}- [ ] 5000. last\n")
    assert len(MarkdownTracker(path).load()) == 5001
    looped = f"## Tasks\n{chain}- [ ] 5000. last\n  - Depends on: 0\n"
    write(path, looped)
    with pytest.raises(TrackerError, match=r"dependency cycle: 0 -> 1 -> 2 -> .* -> 5000 -> 0$"):
        MarkdownTracker(path).load()


def js(name: str, data: object, message: str) -> object:
    text = data if isinstance(data, str) else json.dumps(data, indent=2)
    return pytest.param(text, message, id=name)


def s(story_id: object = "a", **fields: object) -> dict[str, object]:
    return {"id": story_id, "title": "T", **fields}


JSON = [
    js(
        "invalid-json",
        '{\n  "stories": [\n    {"id": 1,}\n  ]\n}',
        "{p}:3: invalid JSON: Expecting property name enclosed in double quotes (column 14)",
    ),
    js("empty-file", "", "{p}:1: invalid JSON: Expecting value (column 1)"),
    js("top-level-list", [s()], "{p}: expected a JSON object with a 'stories' list"),
    js("no-stories", {"tasks": [s()]}, "{p}: expected a JSON object with a 'stories' list"),
    js(
        "stories-not-a-list",
        {"stories": {"a": s()}},
        "{p}: expected a JSON object with a 'stories' list",
    ),
    js("empty-stories", {"stories": []}, "{p} has no tasks: add a story to 'stories'"),
    js(
        "empty-user-stories",
        {"userStories": []},
        "{p} has no tasks: add a story to 'userStories'",
    ),
    js(
        "both-story-keys",
        {"stories": [s()], "userStories": [s()]},
        "{p}: has both 'stories' and 'userStories'; keep one",
    ),
    js("story-not-an-object", {"stories": [s(), "b"]}, '{p}: stories[1] is not an object: "b"'),
    js("story-without-id", {"stories": [s(), {"title": "T"}]}, "{p}: stories[1] has no 'id'"),
    js(
        "user-story-without-id",
        {"userStories": [{"title": "T"}]},
        "{p}: userStories[0] has no 'id'",
    ),
    js(
        "id-boolean",
        {"stories": [s(True)]},
        "{p}: stories[0]: 'id' must be a string or an integer, not true",
    ),
    js(
        "id-float",
        {"stories": [s(1.5)]},
        "{p}: stories[0]: 'id' must be a string or an integer, not 1.5",
    ),
    js(
        "id-with-spaces",
        {"stories": [s("US 1")]},
        "{p}: stories[0]: id \"US 1\" may hold only letters, digits, '_' and '-'",
    ),
    js("story-without-title", {"stories": [{"id": "a"}]}, "{p}: story 'a': has no 'title'"),
    js("blank-title", {"stories": [s(title="  ")]}, "{p}: story 'a': has no 'title'"),
    js(
        "title-number",
        {"stories": [s(title=3)]},
        "{p}: story 'a': 'title' must be a string, not 3",
    ),
    js(
        "duplicate-ids",
        {"stories": [s(1), s("2"), s("1")]},
        "{p}: story '1' (stories[2]) has the same id as stories[0]",
    ),
    js(
        "priority-string",
        {"stories": [s(priority="high")]},
        "{p}: story 'a': 'priority' must be an integer, not \"high\"",
    ),
    js(
        "priority-boolean",
        {"stories": [s(priority=True)]},
        "{p}: story 'a': 'priority' must be an integer, not true",
    ),
    js(
        "passes-string",
        {"stories": [s(passes="yes")]},
        "{p}: story 'a': 'passes' must be true or false, not \"yes\"",
    ),
    js(
        "blocked-number",
        {"stories": [s(blocked=1)]},
        "{p}: story 'a': 'blocked' must be true or false, not 1",
    ),
    js(
        "blocked-reason-list",
        {"stories": [s(blocked_reason=["x"])]},
        "{p}: story 'a': 'blocked_reason' must be a string, not [\"x\"]",
    ),
    js(
        "unknown-status",
        {"stories": [s(status="started")]},
        "{p}: story 'a': 'status' must be one of open, done, in_progress, blocked, not \"started\"",
    ),
    js(
        "unknown-kind",
        {"stories": [s(kind="chore")]},
        "{p}: story 'a': 'kind' must be one of build, plan, docs, hotfix, review, not \"chore\"",
    ),
    js(
        "acceptance-string",
        {"stories": [s(acceptance="works")]},
        "{p}: story 'a': 'acceptance' must be a list of strings, not \"works\"",
    ),
    js(
        "acceptance-criteria-with-a-number",
        {"stories": [s(acceptanceCriteria=["ok", 2])]},
        "{p}: story 'a': 'acceptanceCriteria' must be a list of strings, not [\"ok\", 2]",
    ),
    js(
        "both-acceptance-keys",
        {"stories": [s(acceptance=[], acceptanceCriteria=[])]},
        "{p}: story 'a': has both 'acceptance' and 'acceptanceCriteria'; keep one",
    ),
    js(
        "depends-on-string",
        {"stories": [s(depends_on="b")]},
        "{p}: story 'a': 'depends_on' must be a list of story ids, not \"b\"",
    ),
    js(
        "depends-on-with-null",
        {"stories": [s(dependsOn=[None])]},
        "{p}: story 'a': 'dependsOn' must be a list of story ids, not [null]",
    ),
    js(
        "long-values-are-cut-short",
        {"stories": [s(passes="x" * 100)]},
        "{p}: story 'a': 'passes' must be true or false, not \"" + "x" * 36 + "...",
    ),
    js(
        "depends-on-unknown",
        {"stories": [s("a"), s("b", depends_on=["a", "zz"])]},
        "{p}: story 'b': task 'b' depends on unknown task 'zz'",
    ),
    js(
        "cycle",
        {"stories": [s(1, depends_on=[3]), s(2), s(3, dependsOn=[1])]},
        "{p}: story '1': dependency cycle: 1 -> 3 -> 1",
    ),
]


@pytest.mark.parametrize(("text", "message"), JSON)
def test_bad_json(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path / "prd.json", text)
    assert error_of(path) == message.format(p=path)


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("PRD.md", "## Tasks\n- [ ] 1. a\n"),
        ("prd.json", '{"stories": [{"id": 1, "title": "a"}]}'),
    ],
)
def test_set_status_of_an_unknown_id(tmp_path: Path, name: str, text: str) -> None:
    path = write(tmp_path / name, text)
    tracker = open_tracker(path)
    noun = "task" if isinstance(tracker, MarkdownTracker) else "story"
    with pytest.raises(TrackerError) as info:
        tracker.set_status("2", "done")
    assert str(info.value) == f"{path}: no {noun} with id '2'"
    assert read(path) == text


@pytest.mark.parametrize("tracker_type", [MarkdownTracker, JsonTracker])
def test_set_status_to_an_unknown_status(tmp_path: Path, tracker_type: type) -> None:
    path = write(tmp_path / "prd", "never read")
    tracker = tracker_type(path)
    with pytest.raises(TrackerError) as info:
        tracker.set_status("1", "finished")
    assert str(info.value) == (
        f"{path}: cannot set task '1' to unknown status 'finished'; "
        "use one of open, done, in_progress, blocked"
    )
    assert read(path) == "never read"
