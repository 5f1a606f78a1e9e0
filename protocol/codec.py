"""Encode and decode declared messages (see ``schema.py``) at a given version.

The first use of a struct at a version compiles a plan: the fields present at
that version, each with a reader and a writer closure chosen for its type,
nullability and flexibility. Later calls only run the plan, so the per-message
cost is one closure call per field, not a walk over the declaration.

Flexible versions (KIP-482) change three things: strings, bytes and arrays use
compact (varint) lengths; each struct ends with a tagged-field section; some
fields live only in that section. Unknown tags are skipped, as Kafka does,
so a newer peer's additions decode.
"""

from __future__ import annotations

import struct as _struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from tributary.protocol.errors import ProtocolError, UnsupportedVersionError
from tributary.protocol.primitives import Reader, Writer
from tributary.protocol.schema import Declared, Field, Struct, Versions

ReadFn = Callable[[Reader], Any]
WriteFn = Callable[[Writer, Any], None]
T = TypeVar("T", bound=Declared)


@dataclass(frozen=True, slots=True)
class _Tagged:
    tag: int
    attr: str
    read: ReadFn
    write: WriteFn
    default: Any


_compiled: dict[tuple[Struct, int, bool], tuple[ReadFn, WriteFn]] = {}

_FIXED: dict[str, tuple[ReadFn, WriteFn]] = {
    "bool": (Reader.boolean, Writer.boolean),
    "int8": (Reader.int8, Writer.int8),
    "int16": (Reader.int16, Writer.int16),
    "uint16": (Reader.uint16, Writer.uint16),
    "int32": (Reader.int32, Writer.int32),
    "uint32": (Reader.uint32, Writer.uint32),
    "int64": (Reader.int64, Writer.int64),
    "float64": (Reader.float64, Writer.float64),
    "uuid": (Reader.uuid, Writer.uuid),
}

# (flexible, nullable) -> reader/writer, for the length-prefixed types
_STRING: dict[tuple[bool, bool], tuple[ReadFn, WriteFn]] = {
    (False, False): (Reader.string, Writer.string),
    (False, True): (Reader.nullable_string, Writer.nullable_string),
    (True, False): (Reader.compact_string, Writer.compact_string),
    (True, True): (Reader.compact_nullable_string, Writer.compact_nullable_string),
}
_BYTES: dict[tuple[bool, bool], tuple[ReadFn, WriteFn]] = {
    (False, False): (Reader.bytes_, Writer.bytes_),
    (False, True): (Reader.nullable_bytes, Writer.nullable_bytes),
    (True, False): (Reader.compact_bytes, Writer.compact_bytes),
    (True, True): (Reader.compact_nullable_bytes, Writer.compact_nullable_bytes),
}


def _records_io(flexible: bool, nullable: bool) -> tuple[ReadFn, WriteFn]:
    """Records decode as bytes; they encode from bytes or, without a copy, from any
    sized object the transport knows how to send (see ``Writer.splice``)."""
    read, write_bytes = _BYTES[flexible, nullable]

    def write(w: Writer, value: Any) -> None:
        if value is None or isinstance(value, bytes | bytearray | memoryview):
            write_bytes(w, value)
            return
        size = len(value)
        w.unsigned_varint(size + 1) if flexible else w.int32(size)
        w.splice(value)

    return read, write


def _scalar_io(type_: str, flexible: bool, nullable: bool) -> tuple[ReadFn, WriteFn]:
    if type_ in _FIXED:
        return _FIXED[type_]
    if type_ == "string":
        return _STRING[flexible, nullable]
    if type_ == "bytes":
        return _BYTES[flexible, nullable]
    if type_ == "records":
        return _records_io(flexible, nullable)
    raise ProtocolError(f"unknown field type {type_!r}")


def _array_io(elem_read: ReadFn, elem_write: WriteFn, flexible: bool, nullable: bool) -> tuple[ReadFn, WriteFn]:
    def read(r: Reader) -> list[Any] | None:
        n = r.compact_array_length() if flexible else r.array_length()
        if n < 0:
            if not nullable:
                raise ProtocolError("non-nullable array is null")
            return None
        return [elem_read(r) for _ in range(n)]

    def write(w: Writer, value: list[Any] | None) -> None:
        if value is None:
            if not nullable:
                raise ValueError("non-nullable array is None")
            w.unsigned_varint(0) if flexible else w.int32(-1)
            return
        w.unsigned_varint(len(value) + 1) if flexible else w.int32(len(value))
        for item in value:
            elem_write(w, item)

    return read, write


def _nullable_struct_io(read_struct: ReadFn, write_struct: WriteFn) -> tuple[ReadFn, WriteFn]:
    """A nullable non-array struct is preceded by a marker byte: -1 null, 1 present."""

    def read(r: Reader) -> Any:
        return None if r.int8() < 0 else read_struct(r)

    def write(w: Writer, value: Any) -> None:
        if value is None:
            w.int8(-1)
        else:
            w.int8(1)
            write_struct(w, value)

    return read, write


def _field_io(f: Field, version: int, flexible: bool) -> tuple[ReadFn, WriteFn]:
    flex = flexible if f.flexible is None else version in f.flexible
    nullable = version in f.nullable
    if f.struct is not None:
        read_struct, write_struct = _compile(f.struct, version, flexible)
        if f.is_array:
            return _array_io(read_struct, write_struct, flex, nullable)
        return _nullable_struct_io(read_struct, write_struct) if nullable else (read_struct, write_struct)
    if f.is_array:
        elem_read, elem_write = _scalar_io(f.element_type, flex, False)
        return _array_io(elem_read, elem_write, flex, nullable)
    return _scalar_io(f.type, flex, nullable)


def _compile(struct: Struct, version: int, flexible: bool) -> tuple[ReadFn, WriteFn]:
    key = (struct, version, flexible)
    io = _compiled.get(key)
    if io is not None:
        return io
    regular = []
    tagged = []
    for f in struct.fields:
        if version not in f.versions:
            continue
        read, write = _field_io(f, version, flexible)
        if flexible and version in f.tagged:
            assert f.tag is not None
            default = f.default
            if f.struct is not None and not f.is_array and default is None and version not in f.nullable:
                default = f.struct.cls()
            tagged.append(_Tagged(f.tag, f.attr, read, write, default))
        else:
            regular.append((f.attr, read, write))
    tagged.sort(key=lambda t: t.tag)
    io = _struct_io(struct.cls, tuple(regular), tuple(tagged), flexible)
    _compiled[key] = io
    return io


def _struct_io(
    cls: type, regular: tuple[tuple[str, ReadFn, WriteFn], ...], tagged: tuple[_Tagged, ...], flexible: bool
) -> tuple[ReadFn, WriteFn]:
    by_tag = {t.tag: t for t in tagged}

    def read(r: Reader) -> Any:
        values = {attr: fread(r) for attr, fread, _ in regular}
        if flexible:
            for _ in range(r.unsigned_varint()):
                tag = r.unsigned_varint()
                size = r.unsigned_varint()
                if size > r.remaining:
                    raise ProtocolError(f"tagged field {tag} claims {size} bytes, {r.remaining} remain")
                known = by_tag.get(tag)
                if known is not None:
                    values[known.attr] = known.read(Reader(r.buf, r.pos, r.pos + size))
                r.pos += size
        return cls(**values)

    def write(w: Writer, obj: Any) -> None:
        for attr, _, fwrite in regular:
            fwrite(w, getattr(obj, attr))
        if flexible:
            present = [(t, v) for t in tagged if (v := getattr(obj, t.attr)) != t.default]
            w.unsigned_varint(len(present))
            for t, value in present:
                body = Writer()
                t.write(body, value)
                if body.splices:
                    raise ValueError("spliced records cannot be carried in a tagged field")
                w.unsigned_varint(t.tag)
                w.unsigned_varint(len(body.buf))
                w.raw(body.buf)

    return read, write


def _checked_io(cls: type, version: int) -> tuple[ReadFn, WriteFn]:
    spec = cls.SPEC  # type: ignore[attr-defined]
    if version not in spec.valid:
        raise UnsupportedVersionError(f"{spec.name} has no version {version} (valid: {spec.valid})")
    return _compile(spec.struct, version, version in spec.flexible)


def write(w: Writer, obj: Declared, version: int) -> None:
    """Append ``obj`` encoded at ``version`` to ``w``."""
    write_struct = _checked_io(type(obj), version)[1]
    try:
        write_struct(w, obj)
    except (_struct.error, TypeError, AttributeError, ValueError) as exc:
        raise ValueError(f"cannot encode {type(obj).__name__} v{version}: {exc}") from exc


def encode(obj: Declared, version: int) -> bytes:
    w = Writer()
    write(w, obj, version)
    return bytes(w.buf)


def read(cls: type[T], r: Reader, version: int) -> T:
    """Decode a ``cls`` at ``version`` from ``r``, leaving ``r.pos`` after it."""
    result: T = _checked_io(cls, version)[0](r)
    return result


def decode(cls: type[T], data: bytes | bytearray | memoryview, version: int) -> T:
    """Decode a whole buffer. Trailing bytes are ignored, so a newer version of a
    message decodes as the newest one we know (as Kafka's consumer protocol expects)."""
    return read(cls, Reader(data), version)


def message_versions(cls: type) -> Versions:
    versions: Versions = cls.SPEC.valid  # type: ignore[attr-defined]
    return versions
