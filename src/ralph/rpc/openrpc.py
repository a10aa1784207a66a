"""The OpenRPC 1.x document of a Registry, generated from its pydantic types.

All params, results and notification params are put through one pydantic JSON Schema run, so
shared models appear once under `components.schemas` and every `$ref` points there. Each field
of a params model becomes one content descriptor, in the order a positional call uses.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final, Literal

from pydantic import BaseModel, RootModel, TypeAdapter
from pydantic.json_schema import JsonSchemaValue

from ralph.rpc.method import Method, wire_names

if TYPE_CHECKING:
    from ralph.rpc.registry import Registry

DISCOVER: Final = "rpc.discover"
"""OpenRPC's service discovery method, which every Registry registers itself."""

__all__ = ["META_SCHEMA_URI", "OPENRPC_VERSION", "build_document"]

OPENRPC_VERSION: Final = "1.3.2"
META_SCHEMA_URI: Final = "https://meta.open-rpc.org/"
"""The `$id` of the OpenRPC meta-schema: the schema of `rpc.discover`'s result."""

_REF_PREFIX = "#/components/schemas/"
_Mode = Literal["validation", "serialization"]
_Key = tuple[str, str]


def build_document(registry: Registry) -> dict[str, Any]:
    methods = list(registry.methods.values())
    notifications = registry.notifications
    inputs: list[tuple[_Key, _Mode, TypeAdapter[Any]]] = []
    for method in methods:
        if method.params is not None:
            inputs.append(((method.name, "params"), "validation", TypeAdapter(method.params)))
        if method.result_adapter is not None:
            inputs.append(((method.name, "result"), "serialization", method.result_adapter))
    for note in notifications:
        inputs.append(((note.name, "notification"), "serialization", TypeAdapter(note.params)))
    schemas: dict[tuple[_Key, _Mode], JsonSchemaValue] = {}
    definitions: dict[str, JsonSchemaValue] = {}
    if inputs:
        schemas, top = TypeAdapter.json_schemas(inputs, ref_template=_REF_PREFIX + "{model}")
        definitions = top.get("$defs", {})

    def schema_of(key: _Key, mode: _Mode) -> JsonSchemaValue:
        return schemas[(key, mode)]

    document: dict[str, Any] = {
        "openrpc": OPENRPC_VERSION,
        "info": _info(registry),
        "methods": [_method(method, schema_of, definitions) for method in methods],
    }
    if definitions:
        document["components"] = {"schemas": definitions}
    if notifications:
        document["x-notifications"] = [
            _notification(
                note.name,
                note.summary,
                note.params,
                schema_of((note.name, "notification"), "serialization"),
                definitions,
            )
            for note in notifications
        ]
    return document


def _info(registry: Registry) -> dict[str, Any]:
    info = {"title": registry.title, "version": registry.version}
    if registry.description:
        info["description"] = registry.description
    return info


def _method(
    method: Method,
    schema_of: Callable[[_Key, _Mode], JsonSchemaValue],
    definitions: dict[str, JsonSchemaValue],
) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": method.name}
    if method.summary:
        entry["summary"] = method.summary
    if method.description:
        entry["description"] = method.description
    params: list[dict[str, Any]] = []
    if method.params is not None:
        params = _descriptors(
            method.params,
            schema_of((method.name, "params"), "validation"),
            definitions,
            order=(*method.fixed, *((method.rest,) if method.rest else ())),
            rest=method.rest,
        )
    entry["params"] = params
    entry["paramStructure"] = "either" if method.positional else "by-name"
    if method.name == DISCOVER:
        result_schema: JsonSchemaValue = {"$ref": META_SCHEMA_URI}
    elif method.result_adapter is None:
        result_schema = {}
    else:
        result_schema = schema_of((method.name, "result"), "serialization")
    entry["result"] = {"name": f"{method.name}.result", "schema": result_schema}
    if method.errors:
        entry["errors"] = [{"code": code, "message": message} for code, message in method.errors]
    return entry


def _notification(
    name: str,
    summary: str,
    model: type[BaseModel],
    schema: JsonSchemaValue,
    definitions: dict[str, JsonSchemaValue],
) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": name}
    if summary:
        entry["summary"] = summary
    # The whole params object's schema always; per-field descriptors where the params are one
    # object model (a RootModel, such as a union discriminated by `type`, has no fixed fields).
    entry["paramsSchema"] = schema
    if not issubclass(model, RootModel):
        entry["params"] = _descriptors(model, schema, definitions, order=(), rest=None)
    return entry


def _descriptors(
    model: type[BaseModel],
    schema: JsonSchemaValue,
    definitions: dict[str, JsonSchemaValue],
    *,
    order: tuple[str, ...],
    rest: str | None,
) -> list[dict[str, Any]]:
    """One content descriptor per field: positional fields first, in their order."""
    resolved = _resolve(schema, definitions)
    properties: dict[str, JsonSchemaValue] = resolved.get("properties", {})
    required = set(resolved.get("required", ()))
    keys = list(order) + [key for key in properties if key not in order]
    keys += sorted(set(wire_names(model).values()) - set(keys))  # left out of the schema
    descriptors: list[dict[str, Any]] = []
    for key in keys:
        field_schema = properties.get(key, {})
        descriptor: dict[str, Any] = {
            "name": key,
            "schema": field_schema,
            "required": key in required,
        }
        if isinstance(field_schema.get("description"), str):
            descriptor["description"] = field_schema["description"]
        if key == rest:
            descriptor["x-variadic"] = True
        descriptors.append(descriptor)
    return descriptors


def _resolve(schema: JsonSchemaValue, definitions: dict[str, JsonSchemaValue]) -> JsonSchemaValue:
    """Follow a top-level `$ref` into the definitions (pydantic refers to models that way)."""
    seen: set[str] = set()
    while isinstance(ref := schema.get("$ref"), str) and ref.startswith(_REF_PREFIX):
        name = ref.removeprefix(_REF_PREFIX)
        if name in seen or name not in definitions:
            break
        seen.add(name)
        schema = definitions[name]
    return schema
