"""The generated OpenRPC document: valid against the official meta-schema, and true to the wire."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal

import jsonschema  # type: ignore[import-untyped]
import pytest
from pydantic import BaseModel, Field
from referencing import Registry as SchemaRegistry
from referencing.jsonschema import DRAFT7

from ralph.rpc import APPLICATION_ERROR, RATE_LIMITED, Dispatcher, Registry
from tests.rpc.helpers import SpecApi, decode

DATA = Path(__file__).with_name("data")


class Kind(StrEnum):
    BUILD = "build"
    PLAN = "plan"


class NextTask(BaseModel):
    task_id: str
    title: str
    kind: Kind


class Status(BaseModel):
    version: str
    done: int
    total: int
    next: NextTask | None = Field(description="The next open task, or null when none is left.")
    active_run_id: str | None = Field(alias="activeRunId")


class RunParams(BaseModel):
    max_iterations: int | None = Field(default=None, alias="maxIterations", ge=1)
    agent: Literal["codex", "claude", "gemini", "opencode"] = "codex"
    tags: list[str] = []


class RunStarted(BaseModel):
    run_id: str = Field(alias="runId")
    started_at: datetime


class IterationFinished(BaseModel):
    type: Literal["iteration_finished"] = "iteration_finished"
    ts: datetime
    task: NextTask


def _api() -> Registry:
    registry = Registry(
        title="Ralph test API", version="1.2.3", description="A bridge-like API for the test."
    )

    @registry.method("ping", summary="Health check.")
    async def ping() -> dict[str, Any]:
        return {"ok": True}

    @registry.method("status", result=Status, description="PRD progress and run state.")
    async def status() -> Status:
        return Status(
            version="1",
            done=1,
            total=3,
            next=NextTask(task_id="t2", title="Two", kind=Kind.BUILD),
            activeRunId=None,
        )

    @registry.method(
        "run",
        params=RunParams,
        result=RunStarted,
        positional=("maxIterations", "agent", "*tags"),
        errors=[(APPLICATION_ERROR, "A run is already active"), (RATE_LIMITED, "Rate limited")],
    )
    async def run(params: RunParams) -> RunStarted:
        return RunStarted(runId="r1", started_at=datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC))

    @registry.method("tasks", result=list[NextTask])
    async def tasks() -> list[NextTask]:
        return [NextTask(task_id="t1", title="One", kind=Kind.PLAN)]

    registry.notification_schema("event", IterationFinished, summary="Loop events.")
    return registry


def _validator() -> Any:
    meta = json.loads((DATA / "openrpc-meta-schema.json").read_text())
    json_schema_meta = DRAFT7.create_resource(
        json.loads((DATA / "json-schema-tools-meta-schema.json").read_text())
    )
    schemas: SchemaRegistry[Any] = SchemaRegistry().with_resources(
        [
            ("https://meta.json-schema.tools", json_schema_meta),
            ("https://meta.json-schema.tools/", json_schema_meta),
        ]
    )
    jsonschema.Draft7Validator.check_schema(meta)
    return jsonschema.Draft7Validator(meta, registry=schemas)


@pytest.mark.parametrize("make", [_api, lambda: SpecApi().registry], ids=["bridge-like", "spec"])
def test_the_document_is_valid_openrpc(make: Any) -> None:
    document = make().openrpc()
    errors = sorted(_validator().iter_errors(document), key=lambda error: list(error.path))
    assert not errors, "\n".join(f"{list(e.path)}: {e.message}" for e in errors)


def test_the_meta_schema_rejects_a_broken_document() -> None:
    """The validator really checks: a method without params is not OpenRPC."""
    document = _api().openrpc()
    del document["methods"][1]["params"]
    assert not _validator().is_valid(document)


def test_the_meta_schema_checks_the_schemas_inside() -> None:
    """The JSON Schema meta-schema is resolved (offline): a bad component schema is caught."""
    document = _api().openrpc()
    document["components"]["schemas"]["Status"]["type"] = 5
    assert not _validator().is_valid(document)


def test_every_schema_is_a_valid_json_schema() -> None:
    document = _api().openrpc()
    for schema in document["components"]["schemas"].values():
        jsonschema.Draft202012Validator.check_schema(schema)
    for method in document["methods"]:
        jsonschema.Draft202012Validator.check_schema(method["result"]["schema"])
        for param in method["params"]:
            jsonschema.Draft202012Validator.check_schema(param["schema"])


def test_the_document_describes_the_registry() -> None:
    document = _api().openrpc()
    assert document["openrpc"] == "1.3.2"
    assert document["info"] == {
        "title": "Ralph test API",
        "version": "1.2.3",
        "description": "A bridge-like API for the test.",
    }
    methods = {method["name"]: method for method in document["methods"]}
    assert list(methods) == ["rpc.discover", "ping", "status", "run", "tasks"]
    assert methods["rpc.discover"]["result"]["schema"] == {"$ref": "https://meta.open-rpc.org/"}
    assert methods["ping"]["summary"] == "Health check."
    assert methods["ping"]["params"] == []
    assert methods["ping"]["paramStructure"] == "by-name"
    assert methods["status"]["description"] == "PRD progress and run state."
    assert methods["status"]["result"]["schema"] == {"$ref": "#/components/schemas/Status"}
    run = methods["run"]
    assert run["paramStructure"] == "either"
    assert [param["name"] for param in run["params"]] == ["maxIterations", "agent", "tags"]
    assert [param["required"] for param in run["params"]] == [False, False, False]
    assert run["params"][2]["x-variadic"] is True
    assert run["params"][1]["schema"]["enum"] == ["codex", "claude", "gemini", "opencode"]
    assert run["errors"] == [
        {"code": -32000, "message": "A run is already active"},
        {"code": -32001, "message": "Rate limited"},
    ]
    status = document["components"]["schemas"]["Status"]
    assert set(status["required"]) == {"version", "done", "total", "next", "activeRunId"}
    assert status["properties"]["next"]["description"].startswith("The next open task")
    notifications = document["x-notifications"]
    assert [note["name"] for note in notifications] == ["event"]
    assert {param["name"] for param in notifications[0]["params"]} == {"type", "ts", "task"}
    assert notifications[0]["paramsSchema"]["$ref"].startswith("#/components/schemas/")


async def test_rpc_discover_returns_the_document() -> None:
    registry = _api()
    response = decode(
        await Dispatcher(registry).handle('{"jsonrpc":"2.0","method":"rpc.discover","id":1}')
    )
    assert response["result"] == registry.openrpc()


def test_the_document_is_a_copy() -> None:
    registry = _api()
    registry.openrpc()["methods"].clear()
    assert len(registry.openrpc()["methods"]) == 5


def test_the_document_follows_registrations() -> None:
    registry = _api()
    before = len(registry.openrpc()["methods"])

    @registry.method("later")
    async def later() -> None: ...

    assert len(registry.openrpc()["methods"]) == before + 1


@pytest.mark.parametrize("method", ["status", "run", "tasks"])
async def test_results_on_the_wire_match_their_published_schema(method: str) -> None:
    registry = _api()
    document = registry.openrpc()
    index = [entry["name"] for entry in document["methods"]].index(method)
    schema = {
        "$ref": f"#/methods/{index}/result/schema",
        "methods": document["methods"],
        "components": document["components"],
    }
    response = decode(
        await Dispatcher(registry).handle(
            json.dumps({"jsonrpc": "2.0", "method": method, "id": 1, "params": [3, "claude"]})
            if method == "run"
            else json.dumps({"jsonrpc": "2.0", "method": method, "id": 1})
        )
    )
    jsonschema.Draft202012Validator(schema).validate(response["result"])
