"""The storage seam's shape: every method of ``Backend`` takes at most one argument,
a params object (a dataclass or named tuple of the seam's, or a model), never loose
strings, numbers or sequences; and every Protocol the seam is made of lives in the
seam's own modules, not beside an implementation."""

from __future__ import annotations

import dataclasses
import inspect
import typing

import hailq.backends.base as base
import hailq.backends.base_parts as base_parts
import hailq.history as history
from hailq.backends.base import Backend

SEAM_MODULES = {"hailq.backends.base", "hailq.backends.base_parts"}


def _methods() -> list[tuple[str, typing.Any]]:
    return [(n, f) for n, f in inspect.getmembers(Backend, inspect.isfunction)
            if not n.startswith("_")]


def test_every_seam_method_takes_one_params_object_at_most() -> None:
    loose = []
    for name, fn in _methods():
        args = [p for p in inspect.signature(fn).parameters.values() if p.name != "self"]
        if len(args) > 1:
            loose.append(f"{name}: {len(args)} arguments")
        for a in args:
            kind = eval(a.annotation, {**vars(history), **vars(base_parts), **vars(base)})
            if not (inspect.isclass(kind) and (dataclasses.is_dataclass(kind)
                                               or hasattr(kind, "_fields")  # NamedTuple
                                               or hasattr(kind, "model_fields"))):
                loose.append(f"{name}({a.name}: {kind})")
    assert not loose, loose
    assert len(_methods()) > 50  # the whole seam was looked at


def test_the_seam_protocols_live_in_the_seam_modules() -> None:
    parts = [c for c in Backend.__mro__ if getattr(c, "_is_protocol", False)
             and c is not typing.Protocol and c is not typing.Generic]
    assert len(parts) >= 6
    assert {c.__module__ for c in parts} <= SEAM_MODULES, [
        (c.__name__, c.__module__) for c in parts]
