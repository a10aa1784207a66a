"""AgentCompany ids (prefix + ULID) and the workspace's file formats: YAML in the order
given without anchors, front matter at the first byte, atomic writes."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ralph.company.files import (
    FileFormatError,
    dump_yaml,
    headings,
    load_yaml,
    read_front_matter,
    read_yaml,
    split_front_matter,
    write_front_matter,
    write_yaml,
)
from ralph.company.ids import ALPHABET, PREFIXES, _Clock, is_id, new_id, ulid


def decode_ms(value: str) -> int:
    ms = 0
    for char in value[:10]:
        ms = ms * 32 + ALPHABET.index(char)
    return ms


def test_a_ulid_holds_its_millisecond_and_sorts_as_made(monkeypatch: pytest.MonkeyPatch) -> None:
    # Ids made earlier by this process (other tests) are later than the millisecond asked
    # for here, and a monotonic factory never goes back: start from a fresh factory.
    monkeypatch.setattr(_Clock, "last", (0, 0))
    made = [ulid(1_700_000_000_123) for _ in range(1000)]
    assert all(len(u) == 26 and set(u) <= set(ALPHABET) for u in made)
    assert {decode_ms(u) for u in made} <= {1_700_000_000_123, 1_700_000_000_124}
    assert made == sorted(made) and len(set(made)) == 1000
    later = ulid()
    assert later > made[-1] and decode_ms(later) > 1_700_000_000_124


def test_ids_have_the_originals_prefixes() -> None:
    assert PREFIXES == ("cmp", "team", "agent", "proj", "task", "ms", "run", "art", "ctx",
                        "share", "rev", "help")
    run_id = new_id("run")
    assert run_id.startswith("run_") and is_id(run_id) and is_id(run_id, "run")
    assert not is_id(run_id, "proj") and not is_id("run_0123") and not is_id("x_" + ulid())
    assert not is_id(run_id.replace("run_", "run_I"))  # I is not in the alphabet
    with pytest.raises(ValueError, match="unknown id prefix 'job'"):
        new_id("job")


def test_yaml_keeps_the_order_given_and_writes_no_anchor(tmp_path: Path) -> None:
    shared = {"a": 1}
    data = {"schema_version": 1, "type": "company", "id": "cmp_x", "name": "Ünïcode Co",
            "one": shared, "two": shared, "none": None, "list": ["x", "y"]}
    text = dump_yaml(data)
    assert text.splitlines()[:4] == ["schema_version: 1", "type: company", "id: cmp_x",
                                     "name: Ünïcode Co"]
    assert "&" not in text and "*" not in text and "none: null" in text
    write_yaml(tmp_path / "deep" / "c.yaml", data)
    assert read_yaml(tmp_path / "deep" / "c.yaml") == data
    (tmp_path / "bad.yaml").write_text("a: [1, 2\n")
    with pytest.raises(FileFormatError, match=r"bad\.yaml"):
        read_yaml(tmp_path / "bad.yaml")


def test_front_matter_starts_at_the_first_byte_and_closes_with_a_line(tmp_path: Path) -> None:
    path = tmp_path / "task.md"
    write_front_matter(path, {"id": "task_x", "title": "A: title"}, "## Contract\n\ntext\n")
    assert path.read_text().startswith("---\nid: task_x\n")
    data, body = read_front_matter(path)
    assert data == {"id": "task_x", "title": "A: title"}
    assert body == "## Contract\n\ntext\n" and "## Contract" in headings(body)
    for text, why in ((" ---\nid: x\n---\n", "no front matter"),
                      ("\n---\nid: x\n---\n", "no front matter"),
                      ("---\nid: x\n", "not closed"),
                      ("---\nid: [x\n---\n", r"task\.md")):
        with pytest.raises(FileFormatError, match=why):
            split_front_matter(text, "task.md")


@given(st.dictionaries(st.text(min_size=1), st.one_of(st.none(), st.booleans(), st.integers(),
                                                      st.text(), st.lists(st.text()))))
def test_any_mapping_goes_through_yaml_unchanged(data: dict[str, object]) -> None:
    assert split_front_matter(f"---\n{dump_yaml(data)}---\nbody", "x")[0] == data


def test_aliases_that_never_end_or_explode_are_format_errors() -> None:
    assert load_yaml("a: &x [1]\nb: *x\n", "f") == {"a": [1], "b": [1]}  # sharing is fine
    with pytest.raises(FileFormatError, match="contains it"):
        load_yaml("extra: &x [*x]\n", "f")
    laughs = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]\n" for i in range(1, 9))
    with pytest.raises(FileFormatError, match="Excessive alias count"):
        load_yaml(laughs, "f")
