"""LineSplitter: lines of a byte stream however the reads cut it, with a bound on their length."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ralph.rpc.lines import TOO_LONG, LineSplitter, clean_line


def _split(reads: list[bytes], limit: int) -> list[bytes | None]:
    splitter = LineSplitter(limit)
    lines: list[bytes | None] = []
    for chunk in reads:
        lines += splitter.feed(chunk)
    return lines + splitter.end()


def _expected(data: bytes, limit: int) -> list[bytes | None]:
    """What any cutting of `data` into reads must give."""
    *complete, last = data.split(b"\n")
    if last:
        complete.append(last)
    return [TOO_LONG if len(line) > limit else line for line in complete]


def test_a_line_split_across_reads_comes_out_whole_once_its_newline_arrives() -> None:
    splitter = LineSplitter(1000)
    line = b'{"jsonrpc":"2.0","id":1,"method":"ping"}'
    for index in range(len(line)):
        assert splitter.feed(line[index : index + 1]) == []
    assert splitter.feed(b"\n") == [line]
    assert splitter.end() == []


def test_many_lines_in_one_read() -> None:
    lines = [b'{"id":%d}' % index for index in range(500)]
    splitter = LineSplitter(1000)
    assert splitter.feed(b"\n".join(lines) + b"\n{\"id\":") == lines
    assert splitter.feed(b"500}\n") == [b'{"id":500}']


def test_a_line_of_exactly_the_bound_passes_and_one_byte_more_does_not() -> None:
    assert _split([b"x" * 10 + b"\n", b"y" * 11 + b"\n", b"z\n"], 10) == [
        b"x" * 10, TOO_LONG, b"z"]


def test_a_long_line_across_reads_is_dropped_as_it_streams_and_reported_in_place() -> None:
    splitter = LineSplitter(100)
    assert splitter.feed(b"a\n" + b"b" * 60) == [b"a"]
    for _ in range(1000):  # 60 KB of one line: never buffered past the bound
        assert splitter.feed(b"b" * 60) == []
    assert splitter.feed(b"bb\nc\n") == [TOO_LONG, b"c"]


def test_a_long_rest_after_the_last_newline_is_dropped_at_once() -> None:
    assert _split([b"a\n" + b"x" * 200, b"x\nb\n"], 100) == [b"a", TOO_LONG, b"b"]


def test_eof_without_a_final_newline_gives_the_last_line() -> None:
    assert _split([b"a\nb"], 10) == [b"a", b"b"]
    assert _split([b"a\n", b"b" * 11], 10) == [b"a", TOO_LONG]
    assert _split([b"a\n"], 10) == [b"a"]
    assert _split([], 10) == []


def test_the_bound_must_be_positive() -> None:
    with pytest.raises(ValueError, match="positive"):
        LineSplitter(0)


def test_clean_line_drops_a_carriage_return_and_blank_lines() -> None:
    assert clean_line(b'{"a":1}\r') == b'{"a":1}'
    assert clean_line(b"\r") == b""
    assert clean_line(b"   \t") == b""
    assert clean_line(b"") == b""
    assert clean_line(b" {} ") == b" {} "


@given(
    data=st.lists(st.sampled_from([b"a", b"bcd", b"\n", b"\r", b" ", b"x" * 12]), max_size=40),
    cuts=st.lists(st.integers(min_value=1, max_value=30), min_size=1, max_size=40),
    limit=st.integers(min_value=1, max_value=20),
)
def test_any_cutting_into_reads_gives_the_same_lines(
    data: list[bytes], cuts: list[int], limit: int
) -> None:
    stream = b"".join(data)
    reads = []
    position = 0
    index = 0
    while position < len(stream):
        size = cuts[index % len(cuts)]
        reads.append(stream[position : position + size])
        position += size
        index += 1
    assert _split(reads, limit) == _expected(stream, limit)
