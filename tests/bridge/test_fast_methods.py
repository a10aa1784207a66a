"""ping and status are sync methods; ping's answer is PingResult's own JSON with the time
put in, status is validated from the report's attributes: both write exactly what the slower
way wrote."""

from __future__ import annotations

import json
import re
from dataclasses import asdict, fields
from pathlib import Path

import pytest

from ralph import __version__
from ralph.bridge.methods import _around_time, build_registry
from ralph.bridge.models import PingResult, StatusResult
from ralph.config import load_config
from ralph.loop import LoopService
from ralph.rpc import Dispatcher
from tests.loop.conftest import Project


@pytest.mark.parametrize("name", ["plain", 'we"ird \\ é ✓'])
def test_ping_is_the_models_json_with_the_time(tmp_path: Path, name: str) -> None:
    root = tmp_path / name
    root.mkdir()
    service = LoopService(root, config=load_config(root, required=False))
    try:
        registry = build_registry(service)
        assert registry.methods["ping"].sync and registry.methods["status"].sync
        answer = Dispatcher(registry).dispatch(b'{"jsonrpc":"2.0","id":1,"method":"ping"}')
        assert isinstance(answer, bytes)
        result = json.loads(answer)["result"]
        expected = PingResult(version=__version__, cwd=str(root), time=result["time"])
        assert json.dumps(result) == json.dumps(expected.model_dump(mode="json"))
        assert answer == b'{"jsonrpc":"2.0","id":1,"result":' + registry.methods[
            "ping"].serialize(expected) + b"}"
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", result["time"])
    finally:
        service.close()


def test_a_time_that_cannot_be_told_apart_is_refused() -> None:
    def twice(value: object) -> bytes:
        return b'{"a":"\\u0000time\\u0000","b":"\\u0000time\\u0000"}'

    with pytest.raises(ValueError, match="cannot be told"):
        _around_time(twice, lambda time: time)


def test_status_is_the_reports_fields_as_a_dump_of_it_would_give(project: Project) -> None:
    service = LoopService(project.root, config=load_config(project.root, required=False))
    try:
        registry = build_registry(service)
        answer = Dispatcher(registry).dispatch(b'{"jsonrpc":"2.0","id":1,"method":"status"}')
        report = asdict(service.status())
        expected = {field.name: report[field.name] for field in fields(StatusResult)}
        assert isinstance(answer, bytes)  # a sync method answers at once
        assert json.loads(answer) == {"jsonrpc": "2.0", "id": 1, "result": expected}
        assert list(json.loads(answer)["result"]) == list(expected)  # in the documented order
    finally:
        service.close()
