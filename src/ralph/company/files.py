"""The workspace's files: YAML, and Markdown with YAML front matter, read strictly and
written atomically (readers see the old file or the new one, never a mix), in the style
AgentCompany writes them: keys in the order given, no anchors or aliases, block style,
UTF-8 as is."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import yaml

from ralph.errors import RalphError
from ralph.fsutil import atomic_write_bytes

FENCE = "---"
MAX_EXPANDED_NODES = 1_000_000


class FileFormatError(RalphError):
    """A file that is not valid YAML, or a front matter that is not where it must be;
    `kind` says which as AgentCompany names it (missing_frontmatter, frontmatter_unclosed,
    frontmatter_yaml_parse_error, or yaml_parse_error for a YAML file)."""

    def __init__(self, message: str, kind: str = "yaml_parse_error",
                 reason: str = "") -> None:
        super().__init__(message)
        self.kind = kind
        self.reason = reason or message


# YAML 1.2's core schema, as AgentCompany's YAML library reads and writes: `2026-02-10T20:58Z`
# is a string (not a timestamp), `yes`/`on` are strings (not booleans), `<<` merges nothing.
_CORE_RESOLVERS: list[tuple[str, re.Pattern[str], list[str]]] = [
    ("tag:yaml.org,2002:null", re.compile(r"^(?:~|null|Null|NULL|)$"), ["~", "n", "N", ""]),
    ("tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
     list("tTfF")),
    ("tag:yaml.org,2002:int", re.compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$"),
     list("-+0123456789")),
    ("tag:yaml.org,2002:float", re.compile(
        r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
        r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"), list("-+.0123456789")),
]


def _core_schema(cls: Any) -> None:
    cls.yaml_implicit_resolvers = {}
    for tag, pattern, first in _CORE_RESOLVERS:
        for char in first:
            cls.yaml_implicit_resolvers.setdefault(char, []).append((tag, pattern))


_BaseLoader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when built with it


class _Loader(_BaseLoader):  # type: ignore[misc]
    """YAML as JavaScript sees it: one number type (an integral float is an int), keys
    always strings (`1` -> "1", `true` -> "true", `~` -> ""), a key twice is an error."""

    def construct_yaml_int(self, node: Any) -> int:
        value = str(self.construct_scalar(node))
        if value.startswith("0o"):
            return int(value[2:], 8)
        return int(value, 0) if value.startswith("0x") else int(value)

    def construct_yaml_float(self, node: Any) -> float | int:
        value = yaml.SafeLoader.construct_yaml_float(self, node)
        if math.isfinite(value) and value.is_integer() and abs(value) < 2 ** 53:
            return int(value)
        return value

    def construct_mapping(self, node: Any, deep: bool = False) -> dict[str, Any]:
        if not isinstance(node, yaml.MappingNode):
            raise yaml.constructor.ConstructorError(
                None, None, f"expected a mapping node, but found {node.id}", node.start_mark)
        mapping: dict[str, Any] = {}
        for key_node, value_node in node.value:
            key = _js_key(self.construct_object(key_node, deep=True))
            if key in mapping:
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping", node.start_mark,
                    f"Map keys must be unique: {key!r}", key_node.start_mark)
            mapping[key] = self.construct_object(value_node, deep=deep)
        return mapping


def _js_key(key: Any) -> str:
    if key is None:
        return ""
    if isinstance(key, bool):
        return "true" if key else "false"
    if isinstance(key, float) and math.isfinite(key) and key.is_integer():
        return str(int(key))
    return str(key)


_Loader.add_constructor("tag:yaml.org,2002:int", _Loader.construct_yaml_int)
_Loader.add_constructor("tag:yaml.org,2002:float", _Loader.construct_yaml_float)
_Loader.add_constructor("tag:yaml.org,2002:map", _Loader.construct_yaml_map)
_core_schema(_Loader)


class _Dumper(yaml.SafeDumper):
    def ignore_aliases(self, data: Any) -> bool:
        return True  # a value written twice is written twice, never as an anchor


_core_schema(_Dumper)


def dump_yaml(data: Any) -> str:
    """`data` as YAML, UTF-8 as is; escaped (`\\u2028`) where a character would not read
    back as written (NEL and the Unicode line separators are line breaks to YAML)."""
    text = yaml.dump(data, Dumper=_Dumper, sort_keys=False, allow_unicode=True,
                     default_flow_style=False, width=10_000)
    if any(char in text for char in _BREAKS):  # (always escaped: YAML 1.1 and 1.2 differ)
        text = yaml.dump(data, Dumper=_Dumper, sort_keys=False, allow_unicode=False,
                         default_flow_style=False, width=10_000)
    return text


_BREAKS = ("\x85", "\u2028", "\u2029")


def load_yaml(text: str, where: str) -> Any:
    try:
        data = yaml.load(text, Loader=_Loader)  # (a safe loader, with the core schema)
    except (yaml.YAMLError, RecursionError, ValueError) as exc:
        reason = " ".join(str(exc).split()) or "Maximum nesting depth exceeded"
        raise FileFormatError(f"{where}: {reason}", reason=reason) from None
    try:
        size = _expanded_size(data, set(), {})
    except _Cycle:
        reason = "an alias refers to a node that contains it (the document has no end)"
        raise FileFormatError(f"{where}: {reason}", reason=reason) from None
    if size > MAX_EXPANDED_NODES:
        # (as the original's YAML library refuses too many aliases: a few lines of aliases
        # of aliases can stand for billions of nodes, which reading them would walk)
        reason = "Excessive alias count indicates a resource exhaustion attack"
        raise FileFormatError(f"{where}: {reason}", reason=reason)
    return data


class _Cycle(Exception):
    pass


def _expanded_size(value: Any, open_: set[int], sizes: dict[int, int]) -> int:
    """How many nodes `value` stands for with every alias expanded (each shared node is
    counted once per place, computed once); _Cycle if it contains itself (`a: &x [*x]`)."""
    if not isinstance(value, dict | list):
        return 1
    key = id(value)
    if key in sizes:
        return sizes[key]
    if key in open_:
        raise _Cycle
    open_.add(key)
    items = value.values() if isinstance(value, dict) else value
    size = 1 + sum(_expanded_size(item, open_, sizes) for item in items)
    open_.discard(key)
    sizes[key] = size
    return size


def read_text(path: Path) -> str:
    """A file's text as Node reads it: UTF-8 with bad bytes replaced, line ends untouched."""
    return path.read_bytes().decode("utf-8", "replace")


def read_yaml(path: Path) -> Any:
    """The YAML document of `path` (OSError if it cannot be read)."""
    return load_yaml(read_text(path), str(path))


def write_yaml(path: Path, data: Any) -> None:
    """`data` as `path`, replaced atomically (a link at `path` is replaced, not followed)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, dump_yaml(data).encode("utf-8"), follow_symlinks=False)


def split_front_matter(text: str, where: str) -> tuple[Any, str]:
    """(front matter, body) of a Markdown file, as AgentCompany reads it: the file starts
    with a `---` line, the front matter ends at the next line that is exactly `---`; line
    ends may be CRLF (the body gets LF)."""
    if not text.startswith((FENCE + "\n", FENCE + "\r\n")):
        raise FileFormatError(f"{where}: no front matter (the file must start with a '---' "
                              "line)", "missing_frontmatter")
    lines = re.split(r"\r?\n", text)
    closing = next((n for n, line in enumerate(lines[1:], 1) if line == FENCE), None) \
        if len(lines) >= 3 else None
    if closing is None:
        raise FileFormatError(f"{where}: the front matter is not closed (no '---' line "
                              "after it)", "frontmatter_unclosed")
    try:
        data = load_yaml("\n".join(lines[1:closing]), where)
    except FileFormatError as exc:
        raise FileFormatError(str(exc), "frontmatter_yaml_parse_error", exc.reason) from None
    return data, "\n".join(lines[closing + 1:])


def read_front_matter(path: Path) -> tuple[Any, str]:
    return split_front_matter(read_text(path), str(path))


def with_front_matter(data: Any, body: str) -> str:
    return f"{FENCE}\n{dump_yaml(data)}{FENCE}\n{body}"


def write_front_matter(path: Path, data: Any, body: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, with_front_matter(data, body).encode("utf-8"),
                       follow_symlinks=False)


def headings(body: str) -> set[str]:
    """The Markdown headings of `body`, each its whole line (`## Summary`)."""
    return {line.rstrip() for line in body.split("\n") if line.startswith("#")}
