"""Message bodies and headers: JSON values or bytes, never pickle (SPEC rule 27)."""

from __future__ import annotations

import functools
import json
import json.encoder
import json.scanner
import math
from collections.abc import Callable
from typing import Any, cast

from hailq.errors import InvalidArgument, MessageTooLarge

JSON = 0
BYTES = 1

Body = Any  # a JSON value (None, bool, int, float, str, list, dict[str, ...]) or bytes

MAX_HEADERS = 64
MAX_HEADER_LENGTH = 4096
MAX_KEY_LENGTH = 255
_MAX_DEPTH = 64


def encode_body(body: Body, max_size: int) -> tuple[bytes, int]:
    """Return ``(data, kind)``; raise InvalidArgument for what cannot round-trip exactly."""
    if isinstance(body, bytes | bytearray | memoryview):
        data, kind = bytes(body), BYTES
    else:
        _check_json(body, 0)
        try:
            data = _dumps(body).encode("utf-8")
        except UnicodeEncodeError as exc:
            raise InvalidArgument(f"body holds a string that is not valid Unicode: {exc}") from None
        except ValueError as exc:  # an integer past Python's digit limit for str()
            raise InvalidArgument(f"body cannot be written as JSON: {exc}") from None
        kind = JSON
    if len(data) > max_size:
        raise MessageTooLarge(
            f"body is {len(data)} bytes encoded; this queue allows at most {max_size} "
            "(setting max_message_size)")
    return data, kind


_JSON_OPTIONS: dict[str, Any] = {"ensure_ascii": False, "allow_nan": False,
                                 "separators": (",", ":")}


def _no_default(value: object) -> object:
    raise TypeError(f"{type(value).__name__} is not JSON")  # _check_json refused it first


def _make_dumps() -> Callable[[Any], str]:
    """``json.dumps`` with hailq's options, as one encoder made once: ``json.dumps`` with
    options builds an encoder object, and its C scanner, on every call (a quarter of
    a small send's building). No check for cycles: ``_check_json`` refused any body
    nested deeper than it allows first. Where the C encoder is missing or encodes
    otherwise than ``json.dumps``, ``json.dumps`` itself."""
    make = getattr(json.encoder, "c_make_encoder", None)
    plain: Callable[[Any], str] = functools.partial(json.dumps, **_JSON_OPTIONS)
    if make is None:
        return plain
    try:
        encoder = make(None, _no_default, json.encoder.encode_basestring, None, ":", ",",
                       False, False, False)
        sample = {"a": [1, -2.5, 1e300, "é\u2028\"\\", None, True, False], "b": {}, "c": []}
        if "".join(encoder(sample, 0)) != plain(sample):
            return plain
    except (TypeError, ValueError):  # another signature: the public way
        return plain

    def dumps(body: Any) -> str:
        return "".join(encoder(body, 0))

    return dumps


_dumps = _make_dumps()


_decoder = json.JSONDecoder()
_decode_json = _decoder.decode
# The decoder's own scanner (C where available): hailq stores JSON compact, with no
# whitespace around it, so the decoder's two whitespace matches can be skipped. That
# halves the decoding of a small body, which every received message pays.
_scan_json: Callable[[str, int], tuple[Any, int]] = json.scanner.make_scanner(
    cast(Any, _decoder))  # typeshed names the wrong type for its argument


def decode_body(data: bytes, kind: int) -> Body:
    if kind == BYTES:
        return bytes(data)
    # JSON that hailq stored is always UTF-8: no encoding detection (json.loads on bytes
    # costs twice as much for a small body).
    text = (data if isinstance(data, bytes) else bytes(data)).decode()
    try:
        value, end = _scan_json(text, 0)
    except StopIteration:
        end = -1
    if end != len(text):  # not hailq's compact form: the full decoder decides (or says why)
        return _decode_json(text)
    return value


def _check_json(value: object, depth: int) -> None:
    if depth > _MAX_DEPTH:
        raise InvalidArgument(f"body is nested deeper than {_MAX_DEPTH} levels")
    kind = type(value)
    if kind is str:  # the common kinds first, by their exact type
        _check_text(value, "body string")  # type: ignore[arg-type]
        return
    if value is None or kind is int or kind is bool:
        return
    if isinstance(value, dict):
        last = depth == _MAX_DEPTH  # its items are one level too deep
        for key, item in value.items():
            if not isinstance(key, str):
                raise InvalidArgument(
                    f"body object keys must be strings, got {type(key).__name__} key {key!r}")
            _check_text(key, "body key")
            kind = type(item)
            if (kind is int or item is None or kind is bool) and not last:
                continue  # (a call saved per plain item)
            _check_json(item, depth + 1)
        return
    if isinstance(value, list):
        for item in value:
            _check_json(item, depth + 1)
        return
    if isinstance(value, str):
        _check_text(value, "body string")
        return
    if isinstance(value, bool | int):
        return
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            raise InvalidArgument("body holds NaN or infinity, which JSON cannot carry")
        return
    raise InvalidArgument(
        f"body must be a JSON value (None, bool, int, float, str, list, dict with str keys) "
        f"or bytes, got {type(value).__name__}")


def _check_text(text: str, what: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidArgument(f"{what} is not valid Unicode (lone surrogate)") from None


def encode_headers(headers: object) -> str | None:
    """Validate a ``str -> str`` mapping and return it as JSON text (or None when empty)."""
    if headers is None:
        return None
    if not isinstance(headers, dict):
        raise InvalidArgument(f"headers must be a dict of str to str, got {type(headers).__name__}")
    if len(headers) > MAX_HEADERS:
        raise InvalidArgument(f"at most {MAX_HEADERS} headers are allowed, got {len(headers)}")
    for key, value in headers.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise InvalidArgument(f"headers must map str to str, got {key!r}: {value!r}")
        if not key or len(key) > MAX_KEY_LENGTH:
            raise InvalidArgument(
                f"header names must be 1-{MAX_KEY_LENGTH} characters, got {key!r}")
        if len(value) > MAX_HEADER_LENGTH:
            raise InvalidArgument(
                f"header {key!r} is {len(value)} characters; at most {MAX_HEADER_LENGTH}")
        check_plain_text(key, "header name")
        check_plain_text(value, f"header {key!r}")
    if not headers:
        return None
    return json.dumps(headers, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def decode_headers(text: str | None) -> dict[str, str]:
    return {} if not text else dict(json.loads(text))


def check_plain_text(text: str, what: str) -> None:
    """Text stored in columns: valid Unicode, no NUL (databases cannot store it)."""
    if "\x00" in text:
        raise InvalidArgument(f"{what} must not contain NUL characters")
    _check_text(text, what)


def storable_text(text: str) -> str:
    """Diagnostic text (an error, a reason) made storable as it is written: a NUL or a
    lone surrogate, which a handler's exception may well hold, becomes its escape."""
    if "\x00" in text:
        text = text.replace("\x00", "\\x00")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def check_key(value: object, what: str) -> str | None:
    """Validate an ordering key or dedup id: None, or 1-255 characters of text."""
    if value is None:
        return None
    if not isinstance(value, str) or not 1 <= len(value) <= MAX_KEY_LENGTH:
        raise InvalidArgument(f"{what} must be a string of 1-{MAX_KEY_LENGTH} characters, "
                              f"got {value!r}")
    check_plain_text(value, what)
    return value
