"""ralph.records: dataclass records read with every field set, written in declared order."""

from __future__ import annotations

from dataclasses import dataclass, field

import msgspec
import orjson
import pytest

from ralph.records import convert, declared_fields


@dataclass
class Inner:
    name: str
    count: int = 0
    note: str | None = None


@dataclass
class Outer:
    inner: Inner
    flag: bool = False
    by_name: dict[str, Inner] = field(default_factory=dict)
    items: list[Inner] = field(default_factory=list)


def test_every_field_is_set_on_every_record_read() -> None:
    read = convert({"items": [{"name": "c"}], "by_name": {"b": {"name": "b"}},
                    "inner": {"name": "a"}}, Outer)
    assert read == Outer(Inner("a"), by_name={"b": Inner("b")}, items=[Inner("c")])
    for record in (read, read.inner, read.by_name["b"], read.items[0]):
        assert set(vars(record)) == set(type(record).__dataclass_fields__)


def test_records_are_written_with_every_field_in_declared_order() -> None:
    read = convert({"flag": True, "inner": {"note": "n", "name": "a"}}, Outer)
    body = orjson.loads(orjson.dumps(read, default=declared_fields,
                                     option=orjson.OPT_PASSTHROUGH_DATACLASS))
    assert list(body) == ["inner", "flag", "by_name", "items"]
    assert body["inner"] == {"name": "a", "count": 0, "note": "n"}
    assert list(body["inner"]) == ["name", "count", "note"]


def test_a_wrong_value_is_a_validation_error_naming_the_field() -> None:
    with pytest.raises(msgspec.ValidationError, match=r"\$\.by_name\[\.\.\.\]\.count"):
        convert({"inner": {"name": "a"}, "by_name": {"b": {"name": "b", "count": "two"}}}, Outer)
    with pytest.raises(msgspec.ValidationError, match="missing required field `name`"):
        convert({"inner": {}}, Outer)


def test_only_dataclasses_have_declared_fields() -> None:
    with pytest.raises(TypeError, match="set is not JSON serializable"):
        declared_fields({1})
    with pytest.raises(TypeError):
        declared_fields(Inner)  # the class, not a record
