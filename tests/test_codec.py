"""Bodies decode exactly as sent, whatever form their JSON text takes (SPEC rule 27)."""

from __future__ import annotations

import json

import pytest

from hailq.codec import BYTES, JSON, decode_body, encode_body


@pytest.mark.parametrize("body", [
    None, False, 0, -17, 2**80, 3.25, "", "Hagelschaden ü ✓", [1, "two", None],
    {"claim": 8311, "photos": [{"id": 1}, {"id": 2}], "note": None},
])
def test_a_body_hailq_encoded_decodes_to_an_equal_value(body: object) -> None:
    data, kind = encode_body(body, 1 << 20)

    assert kind == JSON
    decoded = decode_body(data, kind)
    assert decoded == body
    assert type(decoded) is type(body)


@pytest.mark.parametrize("text", [
    ' {"claim": 8311} ', '{"claim": 8311}\n', '\t[1, 2]', '{ "a" : [ 1 , 2 ] }',
])
def test_json_with_whitespace_around_it_still_decodes(text: str) -> None:
    assert decode_body(text.encode(), JSON) == json.loads(text)


@pytest.mark.parametrize("text", ["", "{", '{"a":1} trailing', '{"a":1}{"b":2}', "[1,]"])
def test_text_that_is_not_one_json_value_is_refused(text: str) -> None:
    with pytest.raises(json.JSONDecodeError):
        decode_body(text.encode(), JSON)


def test_bytes_bodies_come_back_as_bytes() -> None:
    assert decode_body(memoryview(b"\x00\xff"), BYTES) == b"\x00\xff"
