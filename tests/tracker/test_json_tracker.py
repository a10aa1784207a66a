"""prd.json: the public loops' format read into tasks, and set_status touching only the status
fields of one story while every other key (known or not) survives."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ralph.tracker import JsonTracker, Task
from tests.tracker.helpers import changes, read, write


def story(story_id: object, **fields: Any) -> dict[str, Any]:
    return {"id": story_id, "title": f"Story {story_id}", **fields}


def dump(data: object) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def save(tmp_path: Path, data: object) -> JsonTracker:
    return JsonTracker(write(tmp_path / "prd.json", dump(data)))


def test_the_public_loops_format(tmp_path: Path) -> None:
    tracker = save(
        tmp_path,
        {
            "project": "MyApp",
            "branchName": "ralph/feature",
            "userStories": [
                {
                    "id": "US-001",
                    "title": "Add priority field",
                    "description": "As a user ...",
                    "acceptanceCriteria": ["Column exists", "Typecheck passes"],
                    "priority": 1,
                    "passes": True,
                    "notes": "",
                },
                {
                    "id": "US-002",
                    "title": "Show priority",
                    "acceptanceCriteria": [],
                    "priority": 2,
                    "passes": False,
                    "dependsOn": ["US-001"],
                },
            ],
        },
    )
    assert tracker.load() == [
        Task(
            id="US-001",
            title="Add priority field",
            status="done",
            kind="build",
            acceptance=("Column exists", "Typecheck passes"),
            depends_on=(),
            priority=1,
            order=0,
            blocked_reason=None,
        ),
        Task(
            id="US-002",
            title="Show priority",
            status="open",
            kind="build",
            acceptance=(),
            depends_on=("US-001",),
            priority=2,
            order=1,
            blocked_reason=None,
        ),
    ]


def test_stories_and_minimal_stories(tmp_path: Path) -> None:
    tracker = save(
        tmp_path,
        {"stories": [story(1), story(2, acceptance=["a"], depends_on=[1, "1"])]},
    )
    first, second = tracker.load()
    assert (first.id, first.status, first.priority, first.acceptance) == ("1", "open", None, ())
    assert (second.id, second.acceptance, second.depends_on) == ("2", ("a",), ("1",))


@pytest.mark.parametrize(
    ("fields", "status", "reason"),
    [
        ({}, "open", None),
        ({"passes": False}, "open", None),
        ({"passes": True}, "done", None),
        ({"status": "in_progress"}, "in_progress", None),
        ({"status": "in_progress", "passes": True}, "done", None),
        ({"blocked": True, "passes": True}, "blocked", None),
        ({"blocked": True, "blocked_reason": "no key"}, "blocked", "no key"),
        ({"blocked": False, "blocked_reason": "stale"}, "open", None),
        ({"status": "open", "blocked": None, "passes": None}, "open", None),
    ],
)
def test_status_fields(
    tmp_path: Path, fields: dict[str, Any], status: str, reason: str | None
) -> None:
    [task] = save(tmp_path, {"stories": [story("s", **fields)]}).load()
    assert (task.status, task.blocked_reason) == (status, reason)


@pytest.mark.parametrize(
    ("fields", "kind"),
    [
        ({}, "build"),
        ({"title": "[PLAN] Design"}, "plan"),
        ({"title": "Guide [docs]"}, "docs"),
        ({"kind": "hotfix"}, "hotfix"),
        ({"kind": "review", "title": "[PLAN] the field wins"}, "review"),
        ({"kind": "build", "title": "[DOCS] even when it says build"}, "build"),
    ],
)
def test_kinds(tmp_path: Path, fields: dict[str, Any], kind: str) -> None:
    [task] = save(tmp_path, {"stories": [story("s", **fields)]}).load()
    assert task.kind == kind


# set_status

DOC: dict[str, Any] = {
    "project": "MyApp",
    "unknownTopLevel": {"nested": [1, 2.5, None, "ü"]},
    "stories": [
        {
            "id": "US-1",
            "title": "First",
            "priority": 2,
            "acceptance": ["a"],
            "passes": False,
            "notes": "keep me",
            "x-custom": {"deep": True},
        },
        {"id": 2, "title": "[PLAN] Second", "priority": 1, "passes": True, "depends_on": ["US-1"]},
        {
            "id": "US-3",
            "title": "Third",
            "passes": False,
            "status": "in_progress",
            "blocked": True,
            "blocked_reason": "old",
        },
    ],
}


@pytest.fixture
def tracker(tmp_path: Path) -> JsonTracker:
    return save(tmp_path, DOC)


def test_done_flips_passes_only(tracker: JsonTracker) -> None:
    before = read(tracker.path)
    updated = tracker.set_status("US-1", "done")
    assert changes(before, read(tracker.path)) == [
        (19, ['      "passes": false,\n'], ['      "passes": true,\n']),
    ]
    assert updated.status == "done"
    assert tracker.load()[0] == updated


def test_reopening_an_integer_id(tracker: JsonTracker) -> None:
    before = read(tracker.path)
    updated = tracker.set_status("2", "open")
    assert changes(before, read(tracker.path)) == [
        (29, ['      "passes": true,\n'], ['      "passes": false,\n']),
    ]
    assert (updated.id, updated.status, updated.kind) == ("2", "open", "plan")
    # The id keeps its JSON type.
    assert json.loads(read(tracker.path))["stories"][1]["id"] == 2


def test_in_progress_adds_a_status_key(tracker: JsonTracker) -> None:
    before = read(tracker.path)
    tracker.set_status("US-1", "in_progress")
    assert changes(before, read(tracker.path)) == [
        # The new key goes last in the story: the comma after x-custom's closing brace.
        (23, ["      }\n"], ["      },\n", '      "status": "in_progress"\n']),
    ]
    assert tracker.load()[0].status == "in_progress"


def test_blocking_sets_blocked_and_reason(tracker: JsonTracker) -> None:
    updated = tracker.set_status("US-1", "blocked", "needs\na database")
    stories = json.loads(read(tracker.path))["stories"]
    assert stories[0] == {
        **DOC["stories"][0],
        "passes": False,
        "blocked": True,
        "blocked_reason": "needs a database",
    }
    assert stories[1:] == DOC["stories"][1:]
    assert (updated.status, updated.blocked_reason) == ("blocked", "needs a database")


def test_unblocking_clears_blocked_and_reason_and_updates_status(tracker: JsonTracker) -> None:
    updated = tracker.set_status("US-3", "done")
    data = json.loads(read(tracker.path))
    assert data["stories"][2] == {
        "id": "US-3",
        "title": "Third",
        "passes": True,
        "status": "done",
        "blocked": False,
    }
    assert data["stories"][:2] == DOC["stories"][:2]
    assert (updated.status, updated.blocked_reason) == ("done", None)


def test_blocking_without_a_reason_keeps_the_old_one(tracker: JsonTracker) -> None:
    updated = tracker.set_status("US-3", "blocked")
    assert updated.blocked_reason == "old"
    assert json.loads(read(tracker.path))["stories"][2]["blocked_reason"] == "old"


def test_every_other_key_survives_every_status(tracker: JsonTracker) -> None:
    status_keys = {"passes", "blocked", "blocked_reason", "status"}
    for status in ("in_progress", "blocked", "done", "open"):
        for task in DOC["stories"]:
            tracker.set_status(str(task["id"]), status, "r")
            data = json.loads(read(tracker.path))
            assert list(data) == list(DOC)
            assert {k: v for k, v in data.items() if k != "stories"} == {
                k: v for k, v in DOC.items() if k != "stories"
            }
            for old, new in zip(DOC["stories"], data["stories"], strict=True):
                assert {k: v for k, v in new.items() if k not in status_keys} == {
                    k: v for k, v in old.items() if k not in status_keys
                }
    assert [t.status for t in tracker.load()] == ["open", "open", "open"]


def test_the_file_is_rewritten_with_two_space_indentation(tmp_path: Path) -> None:
    path = write(
        tmp_path / "prd.json",
        '{"stories":[{"id":"a","title":"Ä","passes":false,"extra":[1,{"k":null}]}],"v":1}',
    )
    JsonTracker(path).set_status("a", "done")
    assert read(path) == (
        "{\n"
        '  "stories": [\n'
        "    {\n"
        '      "id": "a",\n'
        '      "title": "Ä",\n'
        '      "passes": true,\n'
        '      "extra": [\n'
        "        1,\n"
        "        {\n"
        '          "k": null\n'
        "        }\n"
        "      ]\n"
        "    }\n"
        "  ],\n"
        '  "v": 1\n'
        "}\n"
    )


def test_user_stories_key_is_kept(tmp_path: Path) -> None:
    tracker = save(tmp_path, {"userStories": [story("a", passes=False)]})
    tracker.set_status("a", "done")
    assert json.loads(read(tracker.path)) == {"userStories": [story("a", passes=True)]}
