"""Unified diffs as AgentCompany makes and applies them (the JavaScript `diff` library, v8):
`two_files_patch` writes, byte for byte, what its `createTwoFilesPatch(old_name, new_name,
before, after, "", "")` writes (the `===` underline, `--- a/<file>\\t` headers with an empty
tab-separated header, 4 lines of context, the same hunks: the same Myers line diff with the
same tie-breaking), and `apply_patch` applies a patch as its `applyPatch(source, patch)` does
with its defaults (no fuzz, a hunk is looked for at its line first and then ever further away,
line endings converted when the source has only Windows or only Unix ones), so that a memory
delta either implementation proposed is approved alike by both. (One difference: a hunk of
insertions only, placed past the end of the file, does not apply here; the library pads the
file with blank lines up to it.)
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field

CONTEXT = 4
UNDERLINE = "=" * 67
NO_NEWLINE = "\\ No newline at end of file"
# JavaScript's String.prototype.trim/trimEnd whitespace (not quite Python's str.isspace)
JS_WHITESPACE = ("\t\n\v\f\r \xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007"
                 "\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000\ufeff")


class PatchError(ValueError):
    """A patch that is not a unified diff the way the `diff` library reads one."""


def js_trim(text: str) -> str:
    return text.strip(JS_WHITESPACE)


def js_trim_end(text: str) -> str:
    return text.rstrip(JS_WHITESPACE)


# -- making a patch ---------------------------------------------------------------------------

@dataclass
class _Component:
    count: int
    added: bool
    removed: bool
    previous: _Component | None


@dataclass
class _Path:
    old_pos: int
    last: _Component | None


@dataclass
class _Change:
    value: str
    added: bool
    removed: bool
    lines: list[str] | None = None


def line_tokens(text: str) -> list[str]:
    """The lines of `text`, each with its line end (`\\n` or `\\r\\n`), as the library cuts
    them."""
    parts = re.split(r"(\n|\r\n)", text)
    if not parts[-1]:
        parts.pop()
    tokens: list[str] = []
    for index, part in enumerate(parts):
        if index % 2:
            tokens[-1] += part
        else:
            tokens.append(part)
    return [token for token in tokens if token]


def diff_lines(old_text: str, new_text: str) -> list[_Change]:
    """The line changes from `old_text` to `new_text`: the library's Myers diff (its
    diagonal order, and a removal preferred to an insertion where both reach as far)."""
    old, new = line_tokens(old_text), line_tokens(new_text)
    old_len, new_len = len(old), len(new)

    def extract_common(path: _Path, diagonal: int) -> int:
        old_pos = path.old_pos
        new_pos = old_pos - diagonal
        common = 0
        while new_pos + 1 < new_len and old_pos + 1 < old_len \
                and old[old_pos + 1] == new[new_pos + 1]:
            new_pos += 1
            old_pos += 1
            common += 1
        if common:
            path.last = _Component(common, False, False, path.last)
        path.old_pos = old_pos
        return new_pos

    def add_to_path(path: _Path, added: bool, removed: bool, step: int) -> _Path:
        last = path.last
        if last is not None and last.added == added and last.removed == removed:
            return _Path(path.old_pos + step, _Component(last.count + 1, added, removed,
                                                         last.previous))
        return _Path(path.old_pos + step, _Component(1, added, removed, last))

    best: dict[int, _Path | None] = {0: _Path(-1, None)}
    start = best[0]
    assert start is not None
    new_pos = extract_common(start, 0)
    if start.old_pos + 1 >= old_len and new_pos + 1 >= new_len:
        return _values(start.last, old, new)
    lowest, highest = -(old_len + new_len + 2), old_len + new_len + 2
    for edit_length in range(1, old_len + new_len + 1):
        for diagonal in range(max(lowest, -edit_length), min(highest, edit_length) + 1, 2):
            remove_path, add_path = best.get(diagonal - 1), best.get(diagonal + 1)
            if remove_path is not None:
                best[diagonal - 1] = None
            can_add = add_path is not None and 0 <= add_path.old_pos - diagonal < new_len
            can_remove = remove_path is not None and remove_path.old_pos + 1 < old_len
            if not can_add and not can_remove:
                best[diagonal] = None
                continue
            if not can_remove or (can_add and remove_path is not None and add_path is not None
                                  and remove_path.old_pos < add_path.old_pos):
                assert add_path is not None
                base = add_to_path(add_path, True, False, 0)
            else:
                assert remove_path is not None
                base = add_to_path(remove_path, False, True, 1)
            new_pos = extract_common(base, diagonal)
            if base.old_pos + 1 >= old_len and new_pos + 1 >= new_len:
                return _values(base.last, old, new)
            best[diagonal] = base
            if base.old_pos + 1 >= old_len:
                highest = min(highest, diagonal - 1)
            if new_pos + 1 >= new_len:
                lowest = max(lowest, diagonal + 1)
    raise AssertionError("the edit graph always has a path")  # (n + m edits reach the end)


def _values(last: _Component | None, old: list[str], new: list[str]) -> list[_Change]:
    components: list[_Component] = []
    while last is not None:
        components.append(last)
        last = last.previous
    components.reverse()
    changes: list[_Change] = []
    old_pos = new_pos = 0
    for component in components:
        if component.removed:
            value = "".join(old[old_pos:old_pos + component.count])
            old_pos += component.count
        else:
            value = "".join(new[new_pos:new_pos + component.count])
            new_pos += component.count
            if not component.added:
                old_pos += component.count
        changes.append(_Change(value, component.added, component.removed))
    return changes


def _split_lines(text: str) -> list[str]:
    """`text`'s lines, each keeping its `\\n` (the last may have none)."""
    lines = [line + "\n" for line in text.split("\n")]
    if text.endswith("\n"):
        lines.pop()
    else:
        lines[-1] = lines[-1][:-1]
    return lines


@dataclass
class Hunk:
    old_start: int
    old_lines: int
    new_start: int
    new_lines: int
    lines: list[str] = field(default_factory=list)


def structured_hunks(before: str, after: str) -> list[Hunk]:
    changes = diff_lines(before, after)
    changes.append(_Change("", False, False, []))
    hunks: list[Hunk] = []
    old_range = new_range = 0
    current: list[str] = []
    old_line = new_line = 1
    for index, change in enumerate(changes):
        lines = change.lines if change.lines is not None else _split_lines(change.value)
        change.lines = lines
        if change.added or change.removed:
            if not old_range:
                old_range, new_range = old_line, new_line
                if index > 0:
                    previous = changes[index - 1].lines or []
                    current = [" " + line for line in previous[-CONTEXT:]]
                    old_range -= len(current)
                    new_range -= len(current)
            current.extend(("+" if change.added else "-") + line for line in lines)
            if change.added:
                new_line += len(lines)
            else:
                old_line += len(lines)
            continue
        if old_range:
            if len(lines) <= CONTEXT * 2 and index < len(changes) - 2:
                current.extend(" " + line for line in lines)  # joins the next change's hunk
            else:
                size = min(len(lines), CONTEXT)
                current.extend(" " + line for line in lines[:size])
                hunks.append(Hunk(old_range, old_line - old_range + size, new_range,
                                  new_line - new_range + size, current))
                old_range = new_range = 0
                current = []
        old_line += len(lines)
        new_line += len(lines)
    for hunk in hunks:
        tidy: list[str] = []
        for line in hunk.lines:
            if line.endswith("\n"):
                tidy.append(line[:-1])
            else:
                tidy.extend((line, NO_NEWLINE))
        hunk.lines = tidy
    return hunks


def two_files_patch(old_name: str, new_name: str, before: str, after: str,
                    old_header: str | None = "", new_header: str | None = "") -> str:
    """The unified diff from `before` to `after`, as `createTwoFilesPatch(old_name,
    new_name, before, after, old_header, new_header)` writes it."""
    out: list[str] = []
    if old_name == new_name:
        out.append(f"Index: {old_name}")
    out.append(UNDERLINE)
    out.append(f"--- {old_name}" + ("" if old_header is None else f"\t{old_header}"))
    out.append(f"+++ {new_name}" + ("" if new_header is None else f"\t{new_header}"))
    for hunk in structured_hunks(before, after):
        old_start = hunk.old_start - 1 if hunk.old_lines == 0 else hunk.old_start
        new_start = hunk.new_start - 1 if hunk.new_lines == 0 else hunk.new_start
        out.append(f"@@ -{old_start},{hunk.old_lines} +{new_start},{hunk.new_lines} @@")
        out.extend(hunk.lines)
    return "\n".join(out) + "\n"


# -- reading a patch --------------------------------------------------------------------------

_HEADER = re.compile(r"^(---|\+\+\+|@@)\s")
_NEXT_FILE = re.compile(r"^(Index:\s|diff\s|---\s|\+\+\+\s|" + UNDERLINE + ")")
_FILE_HEADER = re.compile(r"^(---|\+\+\+)\s+")
_HUNK_HEADER = re.compile(r"@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def parse_patch(text: str) -> list[list[Hunk]]:
    """The hunks of each file of a unified diff (PatchError if it is not one), read as the
    library's `parsePatch` reads it."""
    return _PatchReader(text.split("\n")).files()


class _PatchReader:
    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        self.i = 0

    def files(self) -> list[list[Hunk]]:
        lines = self.lines
        found: list[list[Hunk]] = []
        while self.i < len(lines):
            while self.i < len(lines) and not _HEADER.match(lines[self.i]):
                self.i += 1  # an `Index:` line, the underline, anything before the headers
            for _ in range(2):  # `---` and `+++`
                if self.i < len(lines) and _FILE_HEADER.match(lines[self.i]):
                    self.i += 1
            hunks: list[Hunk] = []
            found.append(hunks)
            while self.i < len(lines):
                line = lines[self.i]
                if _NEXT_FILE.match(line):
                    break
                if line.startswith("@@"):
                    hunks.append(self.hunk())
                elif line:
                    raise PatchError(f"Unknown line {self.i + 1} {_js_quote(line)}")
                else:
                    self.i += 1
        return found

    def hunk(self) -> Hunk:
        lines, header_at = self.lines, self.i
        found = _HUNK_HEADER.search(lines[header_at])
        self.i += 1
        if found is None:
            raise PatchError(f"Hunk header at line {header_at + 1} is not "
                             f"'@@ -start,count +start,count @@': {lines[header_at]!r}")
        made = Hunk(int(found[1]), 1 if found[2] is None else int(found[2]), int(found[3]),
                    1 if found[4] is None else int(found[4]))
        if made.old_lines == 0:
            made.old_start += 1
        if made.new_lines == 0:
            made.new_start += 1
        added = removed = 0
        while self.i < len(lines) and (removed < made.old_lines or added < made.new_lines
                                       or lines[self.i].startswith("\\")):
            line = lines[self.i]
            operation = " " if not line and self.i != len(lines) - 1 else line[:1]
            if operation not in ("+", "-", " ", "\\"):
                raise PatchError(f"Hunk at line {header_at + 1} contained invalid line {line}")
            made.lines.append(line)
            added += operation in ("+", " ")
            removed += operation in ("-", " ")
            self.i += 1
        if not added and made.new_lines == 1:
            made.new_lines = 0
        if not removed and made.old_lines == 1:
            made.old_lines = 0
        if added != made.new_lines:
            raise PatchError(f"Added line count did not match for hunk at line {header_at + 1}")
        if removed != made.old_lines:
            raise PatchError("Removed line count did not match for hunk at line "
                             f"{header_at + 1}")
        return made


def _js_quote(line: str) -> str:
    return json.dumps(line, ensure_ascii=False)  # (as JSON.stringify quotes it)


# -- applying a patch -------------------------------------------------------------------------

def _only_windows_endings(text: str) -> bool:
    return "\r\n" in text and not text.startswith("\n") and not re.search(r"[^\r]\n", text)


def _only_unix_endings(text: str) -> bool:
    return "\r\n" not in text and "\n" in text


def _is_unix(hunks: list[Hunk]) -> bool:
    return not any(not line.startswith("\\") and line.endswith("\r")
                   for hunk in hunks for line in hunk.lines)


def _ends_windows(lines: list[str], index: int) -> bool:
    line = lines[index]
    return (line.startswith("\\") or line.endswith("\r")
            or (index + 1 < len(lines) and lines[index + 1].startswith("\\")))


def _is_windows(hunks: list[Hunk]) -> bool:
    return (any(line.endswith("\r") for hunk in hunks for line in hunk.lines)
            and all(_ends_windows(hunk.lines, n) for hunk in hunks
                    for n in range(len(hunk.lines))))


def _with_lines(hunks: list[Hunk], convert: Callable[[list[str], int], str]) -> list[Hunk]:
    return [Hunk(h.old_start, h.old_lines, h.new_start, h.new_lines,
                 [convert(h.lines, n) for n in range(len(h.lines))]) for h in hunks]


def _to_windows(lines: list[str], index: int) -> str:
    return lines[index] if _ends_windows(lines, index) else lines[index] + "\r"


def _to_unix(lines: list[str], index: int) -> str:
    line = lines[index]
    return line[:-1] if line.endswith("\r") else line


def _positions(start: int, lowest: int, highest: int) -> list[int]:
    """Where to try a hunk after `start`: ever further from it, after then before, within
    [lowest, highest] (the library's distance iterator)."""
    found: list[int] = []
    offset = 1
    forward_done = backward_done = False
    want_forward = True
    while True:
        if want_forward and not forward_done:
            if backward_done:
                offset += 1
            else:
                want_forward = False
            if start + offset <= highest:
                found.append(start + offset)
                continue
            forward_done = True
        if backward_done:
            return found
        if not forward_done:
            want_forward = True
        if lowest <= start - offset:
            found.append(start - offset)
            offset += 1
            continue
        backward_done = True


def apply_patch(source: str, patch: str) -> str | None:
    """`source` patched, or None when a hunk fits nowhere (PatchError: not a patch of one
    file), as `applyPatch(source, patch)` does."""
    files = parse_patch(patch)
    if len(files) > 1:
        raise PatchError("applyPatch only works with a single input.")
    return apply_hunks(source, files[0])


def apply_hunks(source: str, hunks: list[Hunk]) -> str | None:
    if _only_windows_endings(source) and _is_unix(hunks):
        hunks = _with_lines(hunks, _to_windows)
    elif _only_unix_endings(source) and _is_windows(hunks):
        hunks = _with_lines(hunks, _to_unix)
    lines = source.split("\n")
    if not hunks:
        return source
    remove_eofnl = add_eofnl = False
    previous = ""
    for line in hunks[-1].lines:
        if line.startswith("\\"):
            if previous.startswith("+"):
                remove_eofnl = True
            elif previous.startswith("-"):
                add_eofnl = True
        previous = line
    if remove_eofnl:
        if add_eofnl:
            if lines[-1] == "":
                return None
        elif lines[-1] == "":
            lines.pop()
        else:
            return None
    elif add_eofnl:
        if lines[-1] != "":
            lines.append("")
        else:
            return None

    result: list[str] = []
    lowest = 0
    offset = 0
    for hunk in hunks:
        highest = len(lines) - hunk.old_lines
        start = hunk.old_start + offset - 1
        at, fitted = start, _fit(lines, hunk.lines, start)
        if fitted is None:
            for at in _positions(start, lowest, highest):
                fitted = _fit(lines, hunk.lines, at)
                if fitted is not None:
                    break
        if fitted is None or at > len(lines):
            # (past the end only a hunk of insertions fits; the library would pad the file
            # with blank lines up to the hunk's line: a patch of another file, refused)
            return None
        patched, last_old = fitted
        result.extend(lines[lowest:at] if at > lowest else [])
        result.extend(patched)
        lowest = last_old + 1
        offset = at + 1 - hunk.old_start
    result.extend(lines[lowest:])
    return "\n".join(result)


def _fit(lines: list[str], hunk_lines: list[str], at: int) -> tuple[list[str], int] | None:
    """The lines `hunk_lines` make of `lines` from `at` and the index of the last old line
    they replace, or None if they do not fit there exactly."""

    def line_at(index: int) -> str | None:
        return lines[index] if 0 <= index < len(lines) else None

    patched: list[str] = []
    trailing_context = 0
    for hunk_line in hunk_lines:
        operation = hunk_line[0] if hunk_line else " "
        content = hunk_line[1:] if hunk_line else hunk_line
        if operation == "-":
            if line_at(at) != content:
                return None
            at += 1
            trailing_context = 0
        elif operation == "+":
            patched.append(content)
            trailing_context = 0
        elif operation == " ":
            if line_at(at) != content:
                return None
            patched.append(content)
            trailing_context += 1
            at += 1
    # trailing context is left to the next hunk (it may start in it)
    del patched[len(patched) - trailing_context:]
    return patched, at - trailing_context - 1
