"""The workspace's files: YAML, and Markdown with YAML front matter, read strictly and
written atomically (readers see the old file or the new one, never a mix), in the style
AgentCompany writes them: keys in the order given, no anchors or aliases, block style,
UTF-8 as is."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from ralph.errors import RalphError
from ralph.fsutil import atomic_write_bytes

FENCE = "---"


class FileFormatError(RalphError):
    """A file that is not valid YAML, or a front matter that is not where it must be."""


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


class _Loader(yaml.SafeLoader):
    def construct_yaml_int(self, node: Any) -> int:
        value = str(self.construct_scalar(node))
        if value.startswith("0o"):
            return int(value[2:], 8)
        return int(value, 0) if value.startswith("0x") else int(value)


_Loader.add_constructor("tag:yaml.org,2002:int", _Loader.construct_yaml_int)
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
    if any(char in text for char in _BREAKS) and yaml.load(text, Loader=_Loader) != data:
        text = yaml.dump(data, Dumper=_Dumper, sort_keys=False, allow_unicode=False,
                         default_flow_style=False, width=10_000)
    return text


_BREAKS = ("\x85", "\u2028", "\u2029")


def load_yaml(text: str, where: str) -> Any:
    try:
        return yaml.load(text, Loader=_Loader)  # (a safe loader, with the core schema)
    except yaml.YAMLError as exc:
        raise FileFormatError(f"{where}: {' '.join(str(exc).split())}") from None


def read_yaml(path: Path) -> Any:
    """The YAML document of `path` (OSError if it cannot be read)."""
    return load_yaml(path.read_text(encoding="utf-8"), str(path))


def write_yaml(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, dump_yaml(data).encode("utf-8"))


def split_front_matter(text: str, where: str) -> tuple[Any, str]:
    """(front matter, body) of a Markdown file: the front matter starts at its first byte
    with a `---` line and ends at the next line that is `---`."""
    if not text.startswith(FENCE + "\n"):
        raise FileFormatError(f"{where}: no front matter (the file must start with a '---' "
                              "line)")
    lines = text.split("\n")
    for n, line in enumerate(lines[1:], 1):
        if line.rstrip("\r") == FENCE:
            head = "\n".join(lines[1:n])
            return load_yaml(head, where), "\n".join(lines[n + 1:])
    raise FileFormatError(f"{where}: the front matter is not closed (no '---' line after it)")


def read_front_matter(path: Path) -> tuple[Any, str]:
    return split_front_matter(path.read_text(encoding="utf-8"), str(path))


def with_front_matter(data: Any, body: str) -> str:
    return f"{FENCE}\n{dump_yaml(data)}{FENCE}\n{body}"


def write_front_matter(path: Path, data: Any, body: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, with_front_matter(data, body).encode("utf-8"))


def headings(body: str) -> set[str]:
    """The Markdown headings of `body`, each its whole line (`## Summary`)."""
    return {line.rstrip() for line in body.split("\n") if line.startswith("#")}
