"""Hypothesis strategies built from the message declarations themselves.

``instances(cls, version)`` draws objects whose every field that exists at
``version`` holds an arbitrary valid value, and every other field its default,
so ``decode(encode(x)) == x`` must hold exactly.
"""

from __future__ import annotations

import uuid
from typing import Any

from hypothesis import strategies as st

from tributary.protocol.schema import Field, Struct

_INTS = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "uint16": (0, 2**16 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "uint32": (0, 2**32 - 1),
    "int64": (-(2**63), 2**63 - 1),
}


def _scalar(type_: str) -> st.SearchStrategy[Any]:
    if type_ in _INTS:
        lo, hi = _INTS[type_]
        return st.integers(lo, hi)
    if type_ == "bool":
        return st.booleans()
    if type_ == "float64":
        return st.floats(allow_nan=False)
    if type_ == "string":
        return st.text(max_size=12)
    if type_ in ("bytes", "records"):
        return st.binary(max_size=24)
    if type_ == "uuid":
        return st.uuids().map(lambda u: uuid.UUID(int=u.int))
    raise AssertionError(f"no strategy for {type_}")


def _field(f: Field, version: int) -> st.SearchStrategy[Any]:
    inner = struct_instances(f.struct, version) if f.struct is not None else _scalar(f.element_type)
    value = st.lists(inner, max_size=3) if f.is_array else inner
    return st.one_of(st.none(), value) if version in f.nullable else value


def struct_instances(struct: Struct, version: int) -> st.SearchStrategy[Any]:
    fields = {f.attr: _field(f, version) for f in struct.fields if version in f.versions}
    return st.builds(struct.cls, **fields)


def instances(cls: type, version: int) -> st.SearchStrategy[Any]:
    return struct_instances(cls.SPEC.struct, version)  # type: ignore[attr-defined]
