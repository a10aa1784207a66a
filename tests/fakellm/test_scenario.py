"""Scenario parsing and its error messages."""

from __future__ import annotations

import json

import pytest

from ralph.testing.fakellm import Scenario, ScenarioError, Usage


def test_full_example_parses():
    scenario = Scenario.load({
        "default": {"text": "OK"},
        "usage": {"input_tokens": 5, "output_tokens": 6, "cached_tokens": 1},
        "rules": [
            {"name": "create", "match": {"user": "hello.txt"},
             "reply": {"write_file": {"path": "hello.txt", "content": "hello"}},
             "then": [{"text": "Done. EXIT_SIGNAL: true"}]},
            {"match": {"user_regex": "rate.?limit", "protocol": "chat"},
             "reply": {"error": {"status": 429, "retry_after": 1, "times": 2}}},
            {"match": {"tool_result": True}, "reply": {"hang": 5}, "times": 1},
        ],
    })
    assert scenario.usage == Usage(5, 6, 1)
    create, limited, hang = scenario.rules
    assert [r.kind for r in create.replies] == ["tool_call", "text"]
    assert create.replies[0].write_file == ("hello.txt", "hello")
    assert limited.name == "rule1" and limited.times == 2
    assert limited.replies[0].error is not None and limited.replies[0].error.retry_after == 1
    assert hang.times == 1 and hang.replies[0].hang == 5
    assert Scenario.load(scenario) is scenario


def test_defaults():
    scenario = Scenario.load({})
    assert scenario.rules == ()
    assert scenario.default.text == "OK"
    assert scenario.usage == Usage(1200, 40, 0)


@pytest.mark.parametrize(("data", "message"), [
    ({"rule": []}, "scenario: unknown key(s) rule"),
    ({"rules": {}}, "rules must be a list"),
    ({"rules": [{"match": {}}]}, "rule 'rule0': a rule needs a reply"),
    ({"rules": [{"reply": {}}]}, "a reply needs text, write_file, shell, tool, error or hang"),
    ({"rules": [{"reply": {"text": "a", "shell": "b", "hang": 1}}]}, "only one of shell, hang"),
    ({"rules": [{"reply": {"error": {"status": 200}}}]}, "an HTTP error status"),
    ({"rules": [{"reply": {"hang": -1}}]}, "hang must be a number >= 0"),
    ({"rules": [{"match": {"user_regex": "("}, "reply": {"text": "a"}}]},
     "bad regular expression"),
    ({"rules": [{"match": {"protocol": "grpc"}, "reply": {"text": "a"}}]},
     "protocol must be one of"),
    ({"rules": [{"match": {"tool_result": 3}, "reply": {"text": "a"}}]},
     "tool_result must be true, false or a string"),
    ({"rules": [{"match": {"who": "x"}, "reply": {"text": "a"}}]}, "unknown key(s) who"),
    ({"rules": [{"reply": {"text": "a"}, "then": {}}]}, "then must be a list"),
    ({"rules": [{"reply": {"write_file": {"path": 1}}}]}, "write_file.path must be a string"),
    ({"rules": [{"name": "x", "reply": {"text": "a"}}, {"name": "x", "reply": {"text": "b"}}]},
     "rule names must be unique: x"),
    ({"default": {"shell": "ls"}}, "the default reply cannot be a tool call"),
    ({"default": {"tool": {"name": "x"}}}, "the default reply cannot be a tool call"),
    ({"default": {"text": "a", "times": 1}}, "times is only allowed on a rule's first reply"),
    ({"rules": [{"reply": {"text": "a"}, "then": [{"error": {"status": 500, "times": 1}}]}]},
     "then[0]: times is only allowed on a rule's first reply"),
    ({"usage": {"input_tokens": -1}}, "usage.input_tokens must be an integer >= 0"),
    ({"rules": [{"reply": {"text": "a"}, "times": True}]}, "times must be an integer"),
])
def test_invalid_scenarios(data, message):
    with pytest.raises(ScenarioError) as info:
        Scenario.load(data)
    assert message in str(info.value)
    assert isinstance(info.value, ValueError)


def test_files(tmp_path):
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"default": {"text": "file"}}))
    assert Scenario.load(path).default.text == "file"
    assert Scenario.load(str(path)).default.text == "file"
    path.write_text("{nope")
    with pytest.raises(ScenarioError, match="is not JSON"):
        Scenario.load(path)
    path.write_text("[]")
    with pytest.raises(ScenarioError, match="top level must be an object"):
        Scenario.load(path)
    with pytest.raises(ScenarioError, match="cannot read scenario"):
        Scenario.load(tmp_path / "missing.json")
