"""Dataclass records read from JSON (state.json) and written as JSON, without pydantic.

msgspec validates data into dataclasses quickly and with clear errors, but it leaves a field
whose value is its class-level default unset on the instance, and it sets the others in the
order the data had them. JSON writers that go by an instance's `__dict__` (orjson, msgspec)
would then drop those fields and follow the file's order. So records are read with
`convert`, which sets every field, and written with `declared_fields` as orjson's `default`
(with `OPT_PASSTHROUGH_DATACLASS`), which writes every field in its declared order.
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

T = TypeVar("T")


def convert(data: Any, cls: type[T]) -> T:
    """`data` (JSON values) validated into `cls`, every field of every record set; raises
    msgspec.ValidationError naming the field (`... - at $.tasks[...].attempts`). Lax as
    pydantic was when these records were its models: `3.0` or `"3"` for an int, `1` for a
    bool (never `3.5` for an int)."""
    # Imported here: the CLI's JSON output uses declared_fields, and most commands read no
    # record (msgspec costs a few ms to import).
    import msgspec  # noqa: PLC0415

    record = msgspec.convert(data, cls, strict=False)
    _set_defaults(record)
    return record


def declared_fields(value: Any) -> dict[str, Any]:
    """A dataclass as a dict of its fields, in declared order (orjson's `default`)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {field.name: getattr(value, field.name) for field in dataclasses.fields(value)}
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def _set_defaults(value: Any) -> None:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        attributes = vars(value)
        for field in dataclasses.fields(value):
            if field.name not in attributes:
                object.__setattr__(value, field.name, getattr(value, field.name))
            _set_defaults(attributes[field.name])
    elif isinstance(value, dict):
        for item in value.values():
            _set_defaults(item)
    elif isinstance(value, list):
        for item in value:
            _set_defaults(item)
