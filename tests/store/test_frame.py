"""The frame's naming rules, its line encoding, timestamps, hashes and ids."""

from __future__ import annotations

import base64
import hashlib

import orjson
import pytest
import scru128

from ralph.store import InvalidHashError, InvalidMetaError, InvalidStreamError, InvalidTopicError
from ralph.store.frame import (
    LineError,
    check_stream,
    check_topic,
    decode_line,
    digest_from_sri,
    encode_frame,
    encode_meta,
    format_ts,
    parse_meta_json,
    parse_ts_ms,
    sri_from_digest,
    topic_filter,
)
from ralph.store.head import BOOT_ID, Head, pending_head
from ralph.store.ids import IdGenerator, encode_base36


@pytest.mark.parametrize("topic", ["a", "_x", "ralph.auth-feature.note", "run.started",
                                   "A9_-.b", "x" * 255])
def test_valid_topics(topic: str) -> None:
    assert check_topic(topic) == topic


@pytest.mark.parametrize("topic", ["", "1abc", "-a", ".a", "a.", "a..b", "a b", "a/b", "é",
                                   "a*", "x" * 256, "a.b.*"])
def test_invalid_topics(topic: str) -> None:
    with pytest.raises(InvalidTopicError):
        check_topic(topic)


def test_topic_must_be_a_string() -> None:
    with pytest.raises(InvalidTopicError):
        check_topic(3)


@pytest.mark.parametrize("stream", ["default", "runs/run_01H", "sessions/auth-feature",
                                    "a.b/c_d", "0", "x" * 249, "a.json/b", "b.jsonl"])
def test_valid_streams(stream: str) -> None:
    assert check_stream(stream) == stream


@pytest.mark.parametrize("stream", ["", "/abs", "a/", "a//b", "../up", "a/../b", ".hidden",
                                    "a/.x", "a b", "x" * 256, "a\\b", "x" * 250,
                                    "a/" + "x" * 250, "a.jsonl/b", "r/a.jsonl/b"])
def test_invalid_streams(stream: str) -> None:
    with pytest.raises(InvalidStreamError):
        check_stream(stream)


def test_topic_filters() -> None:
    assert topic_filter("a.b") == ("a.b", False)
    assert topic_filter("a.b.*") == ("a.b.", True)
    assert topic_filter("*") == ("", True)
    with pytest.raises(InvalidTopicError):
        topic_filter("a.*.b")
    with pytest.raises(InvalidTopicError):
        topic_filter("a*")


def test_meta_must_be_an_object() -> None:
    assert encode_meta(None) == b"{}"
    assert orjson.loads(encode_meta({"a": [1, None]})) == {"a": [1, None]}
    for bad in ([1], "x", 3, True):
        with pytest.raises(InvalidMetaError, match="JSON object"):
            encode_meta(bad)
    with pytest.raises(InvalidMetaError, match="serializable"):
        encode_meta({"a": object()})
    with pytest.raises(InvalidMetaError):
        encode_meta({1: "non-string key"})


def test_parse_meta_json() -> None:
    assert parse_meta_json('{"a": 1}') == {"a": 1}
    with pytest.raises(InvalidMetaError, match="not valid JSON"):
        parse_meta_json("{nope")
    with pytest.raises(InvalidMetaError, match="an array"):
        parse_meta_json("[1]")
    with pytest.raises(InvalidMetaError, match="a number"):
        parse_meta_json("3")


def test_line_round_trip() -> None:
    line = encode_frame("0" * 25, 7, "2026-11-22T01:43:24.123Z", "a.b", "runs/x",
                        b'{"k":"v"}', None)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert orjson.loads(line) == {"id": "0" * 25, "seq": 7, "ts": "2026-11-22T01:43:24.123Z",
                                  "topic": "a.b", "stream": "runs/x", "meta": {"k": "v"},
                                  "hash": None}
    assert decode_line(line.rstrip(b"\n"), "runs/x") == (
        "0" * 25, 7, "2026-11-22T01:43:24.123Z", "a.b", {"k": "v"}, None)


@pytest.mark.parametrize("line, reason", [
    (b"{not json", "not JSON"),
    (b"[1]", "not a JSON object"),
    (b'{"id":"x","seq":1}', "id"),
    (b'{"id":"' + b"0" * 25 + b'","seq":0}', "seq"),
    (b'{"id":"' + b"0" * 25 + b'","seq":true}', "seq"),
    (b'{"id":"' + b"0" * 25 + b'","seq":9223372036854775808}', "seq"),
    (b'{"id":"' + b"0" * 25 + b'","seq":18446744073709551615}', "seq"),
    (b'{"id":"' + b"0" * 25 + b'","seq":1,"ts":"yesterday"}', "ts"),
    (b'{"id":"' + b"0" * 25 + b'","seq":1,"ts":"2026-11-22T01:43:24.123Z","topic":"1x"}',
     "topic"),
    (b'{"id":"' + b"0" * 25 + b'","seq":1,"ts":"2026-11-22T01:43:24.123Z","topic":"t",'
     b'"stream":"other","meta":{}}', "stream"),
    (b'{"id":"' + b"0" * 25 + b'","seq":1,"ts":"2026-11-22T01:43:24.123Z","topic":"t",'
     b'"meta":[]}', "meta"),
    (b'{"id":"' + b"0" * 25 + b'","seq":1,"ts":"2026-11-22T01:43:24.123Z","topic":"t",'
     b'"meta":{},"hash":"md5-x"}', "hash"),
])
def test_decode_rejects_what_is_not_a_frame(line: bytes, reason: str) -> None:
    with pytest.raises(LineError, match=reason):
        decode_line(line, "s")


def test_timestamps() -> None:
    assert format_ts(0) == "1970-01-01T00:00:00.000Z"
    assert format_ts(1795311830292) == "2026-11-22T01:43:50.292Z"
    assert parse_ts_ms("2026-11-22T01:43:50.292Z") == 1795311830292
    assert parse_ts_ms("2026-11-22T02:43:50.292+01:00") == 1795311830292
    assert parse_ts_ms("2026-11-22T01:43:50.292") == 1795311830292
    with pytest.raises(ValueError, match="ISO-8601"):
        parse_ts_ms("nope")


def test_sri_hashes() -> None:
    digest = hashlib.sha256(b"hello").digest()
    sri = sri_from_digest(digest)
    assert sri == "sha256-" + base64.b64encode(digest).decode()
    assert digest_from_sri(sri) == digest
    for bad in ("sha256-xyz", "md5-" + sri[7:], sri[:-1], None, sri + "A"):
        with pytest.raises(InvalidHashError):
            digest_from_sri(bad)


def test_ids_are_scru128_and_increase() -> None:
    generator = IdGenerator()
    ids = [generator.next() for _ in range(2000)]
    strings = [s for s, _ in ids]
    assert strings == sorted(strings) and len(set(strings)) == len(strings)
    for text, ms in ids:
        parsed = scru128.Scru128Id.from_str(text)
        assert str(parsed) == text and len(text) == 25
        assert parsed.timestamp == ms


def test_generator_follows_the_scru128_state_machine() -> None:
    gen = IdGenerator()
    base = 1_795_311_830_000
    first = scru128.Scru128Id.from_str(gen.next_at(base)[0])
    same_ms = scru128.Scru128Id.from_str(gen.next_at(base)[0])
    assert same_ms.timestamp == base and same_ms.counter_lo == first.counter_lo + 1
    assert same_ms.counter_hi == first.counter_hi and same_ms > first
    back_a_little = gen.next_at(base - 5_000)  # within the rollback allowance: still ordered
    assert scru128.Scru128Id.from_str(back_a_little[0]) > same_ms and back_a_little[1] == base
    later = scru128.Scru128Id.from_str(gen.next_at(base + 2_000)[0])
    assert later.timestamp == base + 2_000 and later > same_ms
    reset_text, reset_ms = gen.next_at(base - 60_000)  # far back: start over from the clock
    assert reset_ms == base - 60_000
    assert scru128.Scru128Id.from_str(reset_text).timestamp == base - 60_000
    gen._counter_lo = 0xFF_FFFF  # counter_lo overflow carries into counter_hi
    hi_before = gen._counter_hi
    carried = scru128.Scru128Id.from_str(gen.next_at(reset_ms)[0])
    assert carried.counter_lo == 0 and carried.counter_hi == hi_before + 1
    gen._counter_lo, gen._counter_hi = 0xFF_FFFF, 0xFF_FFFF  # both overflow: time moves on
    assert gen.next_at(reset_ms)[1] == reset_ms + 1


def test_base36_matches_the_reference_encoding() -> None:
    for value in (0, 1, 35, 36, 2**128 - 1, 2**64, 36**12, 36**12 - 1):
        assert encode_base36(value) == str(scru128.Scru128Id(value))
    for _ in range(500):
        value = int(scru128.new())
        assert encode_base36(value) == str(scru128.Scru128Id(value))


def test_pending_head_decodes_like_head() -> None:
    raw = pending_head(12, 3, "runs/a", 456)
    assert Head.decode(raw) == Head(12, 3, BOOT_ID, ("runs/a", 456))
    assert Head.decode(Head(5, 1, BOOT_ID, None).encode()) == Head(5, 1, BOOT_ID, None)
    assert Head.decode(b"") is None
    assert Head.decode(b'{"v":99}') is None
    assert Head.decode(b"garbage") is None
