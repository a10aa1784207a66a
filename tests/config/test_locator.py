"""KeyLocator: the line where a dotted key is defined, on the TOML that trips simple scanners."""

from __future__ import annotations

import tomllib
from typing import Any

import pytest

from ralph.config import KeyLocator, parse_dotted_key
from ralph.scaffold import config_template

TRICKY = '''\
# [loop] in a comment is not a table; neither is max_iterations = 3
title = "a # not a comment [files]"   # a real comment with = and [brackets]

[ files ]  # spaces inside the brackets
prd = """
[loop]
max_iterations = 1
"""
progress = \'\'\'
[gates] \'\' and \'
agents = "still a string"\'\'\'

[loop]
max_iterations = 20
"quoted.key" = 1
'single.quoted' = 2
"esc\\u0061ped" = 3
dotted . part = 4

[ agents . "my.agent" ]
argv = [
  "first",   # a comment inside an array
  # a whole comment line
  "second",
  [ "nested", "array" ],
]
env = { A = "1", "B.C" = { D = 2 }, E = [ { F = 3 } ] }

[[stories]]
id = "1"

[[stories]]
id = "2"
nested.deep = true

[agents.'literal name']
when = 1979-05-27 07:32:00Z
'''


@pytest.fixture(scope="module")
def locator() -> KeyLocator:
    tomllib.loads(TRICKY)  # the locator is only ever used on text tomllib accepts
    return KeyLocator(TRICKY)


@pytest.mark.parametrize(("path", "line"), [
    ("title", 2),
    ("files", 4),
    ("files.prd", 5),
    ("files.progress", 9),
    ("files.agents", 4),  # inside a multi-line string: not a key, falls back to [files]
    ("loop", 13),
    ("loop.max_iterations", 14),
    ('loop."quoted.key"', 15),
    ("loop.'single.quoted'", 16),
    ("loop.escaped", 17),
    ("loop.dotted", 18),
    ("loop.dotted.part", 18),
    ('agents."my.agent"', 20),
    ('agents."my.agent".argv', 21),
    ('agents."my.agent".env', 27),
    ('agents."my.agent".env.A', 27),
    ('agents."my.agent".env."B.C".D', 27),
    ("gates", None),  # only in a string and a comment
    ("agents", 20),  # implied by its first sub-table
    ("agents.'literal name'.when", 37),
    ("loop.missing", 13),  # falls back to its table
    ("nothing.here", None),
])
def test_dotted_paths(locator: KeyLocator, path: str, line: int | None) -> None:
    assert locator.line(path) == line


@pytest.mark.parametrize(("path", "line"), [
    (("agents", "my.agent", "argv", 0), 22),
    (("agents", "my.agent", "argv", 1), 24),
    (("agents", "my.agent", "argv", 2, 1), 25),
    (("agents", "my.agent", "env", "E", 0, "F"), 27),
    (("stories", 0), 29),
    (("stories", 0, "id"), 30),
    (("stories", 1, "id"), 33),
    (("stories", 1, "nested", "deep"), 34),
    (("stories", 1, "nested"), 34),
    (("stories",), 29),
])
def test_tuple_paths_with_indexes(locator: KeyLocator, path: tuple[str | int, ...],
                                  line: int) -> None:
    assert locator.line(path) == line


def test_crlf_and_top_level_dotted_keys() -> None:
    text = "loop.max_iterations = 5\r\n\r\n[git]\r\nbranch = 'x'\r\n"
    tomllib.loads(text)
    locator = KeyLocator(text)
    assert locator.line("loop.max_iterations") == 1
    assert locator.line("loop") == 1
    assert locator.line("git.branch") == 4


def test_multiline_basic_string_with_escaped_quotes() -> None:
    text = 'a = """x\\"""\n[fake]\n"""\nb = """two quotes at the end"""""\nc = 1\n'
    assert tomllib.loads(text)["b"] == 'two quotes at the end""'
    locator = KeyLocator(text)
    assert (locator.line("b"), locator.line("c"), locator.line("fake")) == (4, 5, None)


def test_text_it_cannot_follow_keeps_what_it_found() -> None:
    locator = KeyLocator('[loop]\nmax_iterations = 3\n[broken\nx = "unterminated\n')
    assert locator.line("loop.max_iterations") == 2
    assert locator.line("x") is None
    assert KeyLocator("").line("loop") is None


def test_parse_dotted_key() -> None:
    assert parse_dotted_key('agents."my.agent".env') == ["agents", "my.agent", "env"]
    assert parse_dotted_key("a . 'b.c' . d") == ["a", "b.c", "d"]
    with pytest.raises(ValueError, match="not a TOML key"):
        parse_dotted_key("a..b")
    with pytest.raises(ValueError, match="not a TOML key"):
        parse_dotted_key("a b")


def _leaves(value: Any, path: tuple[str | int, ...] = ()) -> list[tuple[str | int, ...]]:
    if isinstance(value, dict) and value:
        return [leaf for key, item in value.items() for leaf in _leaves(item, (*path, key))]
    return [path]


def test_every_key_of_the_scaffolded_config_is_located() -> None:
    text = config_template()
    lines = text.splitlines()
    locator = KeyLocator(text)
    leaves = _leaves(tomllib.loads(text))
    assert len(leaves) > 20
    for path in leaves:
        line = locator.line(path)
        assert line is not None, path
        assert lines[line - 1].startswith(f"{path[-1]} = "), (path, lines[line - 1])
