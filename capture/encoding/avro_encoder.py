"""A schema-compiled Avro binary encoder for the capture hot path.

fastavro resolves every union value by validating it against each branch; the change record's
event type has some fifty nullable fields, which made that the largest single cost of
capturing under a storm (BENCHMARKS.md, "Figures behind the code"). `compile_encoder(schema)` turns a parsed schema into
closures, and each record into a generated function of one statement per field, once; they
write the same bytes (proven against fastavro in the tests) in a fraction of the time. Unions are resolved by Python type, which is unambiguous for the unions
this project's schemas use (null with one other type, or branches of distinct Python kinds).

Inputs are the dicts fastavro takes (records as dicts, enums as symbol strings, bytes, lists)."""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from zkcdc.capture.errors import CaptureError

Encode = Callable[[Any, bytearray], None]


class EncoderError(CaptureError):
    """A value does not fit the schema, or the schema has a union this encoder cannot resolve."""


_SMALL = [bytes([n << 1]) for n in range(64)]  # zig-zag of 0..63: one byte
# Larger numbers recur: a record's zxid and time are its after image's mzxid and mtime, its
# before image is the previous record's after image, and a znode's czxid and ctime never
# change. Their varints come from here (a dict lookup instead of a loop of six or more steps).
_RECENT: dict[int, bytes] = {}
_RECENT_MAX = 8192


def write_long(n: int, out: bytearray) -> None:
    """Avro's zig-zag varint."""
    if 0 <= n < 64:
        out += _SMALL[n]
        return
    encoded = _RECENT.get(n)
    if encoded is None:
        if not _LONG_MIN <= n <= _LONG_MAX:  # what is cached was checked: only on a miss
            raise EncoderError(f"{n!r} is out of the range of a long")
        encoded = _varint((n << 1) ^ (n >> 63))
        if len(_RECENT) >= _RECENT_MAX:
            _RECENT.clear()
        _RECENT[n] = encoded
    out += encoded


_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1


def write_int(n: int, out: bytearray) -> None:
    """An Avro int: a long in 32 bits. A larger value would read back as another number in
    fastavro and fail in Java's readers (Spark), so it is refused here."""
    if 0 <= n < 64:
        out += _SMALL[n]
        return
    if not -2147483648 <= n <= 2147483647:
        raise EncoderError(f"{n!r} is out of the range of an int")
    write_long(n, out)


def _varint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _null(value: Any, out: bytearray) -> None:
    if value is not None:
        raise EncoderError(f"expected null, got {value!r}")


def _boolean(value: Any, out: bytearray) -> None:
    out.append(1 if value else 0)


def _bytes(value: Any, out: bytearray) -> None:
    write_long(len(value), out)
    out += value


def _string(value: Any, out: bytearray) -> None:
    encoded = value.encode()
    write_long(len(encoded), out)
    out += encoded


_float = struct.Struct("<f")
_double = struct.Struct("<d")

_PRIMITIVES: dict[str, Encode] = {
    "null": _null,
    "boolean": _boolean,
    "int": write_int,
    "long": write_long,
    "float": lambda v, out: out.extend(_float.pack(v)),
    "double": lambda v, out: out.extend(_double.pack(v)),
    "bytes": _bytes,
    "string": _string,
}

# The Python kinds a value of each Avro type arrives as, to pick a union branch.
_KINDS: dict[str, tuple[type, ...]] = {
    "null": (type(None),),
    "boolean": (bool,),
    "int": (int,),
    "long": (int,),
    "float": (float, int),
    "double": (float, int),
    "bytes": (bytes, bytearray),
    "string": (str,),
    "enum": (str,),
    "fixed": (bytes,),
    "record": (dict,),
    "map": (dict,),
    "array": (list, tuple),
}


def compile_encoder(schema: Any, sized_arrays: bool = False) -> Callable[[Any], bytes]:
    """The encoder of a parsed (fastavro.parse_schema) schema: value -> Avro binary.

    `sized_arrays` writes each non-empty array as one block with a negative count and its size
    in bytes, a form the Avro spec provides so readers can skip an array without decoding it
    (every Avro reader must accept it). Copying records without decoding them (replay) then
    jumps over a change record's events instead of walking their fifty nullable fields."""
    named: dict[str, Any] = {}
    encode = _compile(schema, named, sized_arrays)

    def encoder(value: Any) -> bytes:
        out = bytearray()
        encode(value, out)
        return bytes(out)

    return encoder


def _compile(schema: Any, named: dict[str, Any], sized: bool = False) -> Encode:
    if isinstance(schema, str):
        if schema in _PRIMITIVES:
            return _PRIMITIVES[schema]
        if schema in named:
            # Looked up at call time: a record may refer to itself.
            return lambda value, out: named[schema](value, out)
        raise EncoderError(f"unknown type {schema}")
    if isinstance(schema, list):
        return _union(schema, named, sized)
    kind = schema["type"]
    if kind == "record":
        return _record(schema, named, sized)
    if kind == "enum":
        index = {symbol: i for i, symbol in enumerate(schema["symbols"])}
        encode_enum: Encode = lambda value, out: write_long(index[value], out)  # noqa: E731
        named[schema["name"]] = encode_enum
        return encode_enum
    if kind == "array":
        items = _compile(schema["items"], named, sized)
        return _sized_array(items) if sized else _array(items)
    if kind == "map":
        return _map(_compile(schema["values"], named, sized))
    if kind in _PRIMITIVES:
        return _PRIMITIVES[kind]
    raise EncoderError(f"type {kind} is not supported")


def _record(schema: dict[str, Any], named: dict[str, Any], sized: bool) -> Encode:
    """Generated code, one statement per field: the event record's fifty nullable fields are
    each an inline null test, not a call (most are null)."""
    name = schema["name"]
    real: list[Encode] = []
    named[name] = lambda value, out: real[0](value, out)  # until compiled: self-reference
    scope: dict[str, Any] = {}
    lines = ["def encode_record(value, out):", "    get = value.get"]
    for i, field in enumerate(schema["fields"]):
        kind = field["type"]
        if isinstance(kind, list) and len(kind) == 2 and _kind(kind[0]) == "null":
            scope[f"e{i}"] = _compile(kind[1], named, sized)
            lines += [
                f"    v = get({field['name']!r})",
                "    if v is None:",
                "        out.append(0)",
                "    else:",
                "        out.append(2)",
                f"        e{i}(v, out)",
            ]
        else:
            scope[f"e{i}"] = _compile(kind, named, sized)
            lines.append(f"    e{i}(get({field['name']!r}), out)")
    if len(lines) == 2:
        lines.append("    pass")
    exec("\n".join(lines), scope)  # field names are our own schema's, quoted by repr
    encode_record: Encode = scope["encode_record"]
    real.append(encode_record)
    named[name] = encode_record
    return encode_record


def _array(items: Encode) -> Encode:
    def encode_array(value: Any, out: bytearray) -> None:
        if value:
            write_long(len(value), out)
            for item in value:
                items(item, out)
        out.append(0)

    return encode_array


def _sized_array(items: Encode) -> Encode:
    def encode_sized_array(value: Any, out: bytearray) -> None:
        if value:
            block = bytearray()
            for item in value:
                items(item, block)
            write_long(-len(value), out)
            write_long(len(block), out)
            out += block
        out.append(0)

    return encode_sized_array


def _map(values: Encode) -> Encode:
    def encode_map(value: Any, out: bytearray) -> None:
        if value:
            write_long(len(value), out)
            for key, item in value.items():
                _string(key, out)
                values(item, out)
        out.append(0)

    return encode_map


def _kind(branch: Any) -> str:
    if isinstance(branch, str):
        return branch if branch in _KINDS else "record"  # a named type: record/enum/fixed
    if isinstance(branch, dict):
        return str(branch["type"])
    raise EncoderError("a union inside a union")


def _union(branches: list[Any], named: dict[str, Any], sized: bool) -> Encode:
    encoders = [_compile(b, named, sized) for b in branches]
    kinds = [_kind(b) for b in branches]
    if len(branches) == 2 and kinds[0] == "null":
        other = encoders[1]

        def encode_nullable(value: Any, out: bytearray) -> None:
            if value is None:
                out.append(0)
            else:
                out.append(2)
                other(value, out)

        return encode_nullable
    by_type: dict[type, int] = {}
    for index, kind in enumerate(kinds):
        for python_type in _KINDS[kind]:
            if python_type in by_type and python_type is not int:
                raise EncoderError(f"union {branches} is ambiguous for {python_type.__name__}")
            by_type.setdefault(python_type, index)

    def encode_union(value: Any, out: bytearray) -> None:
        index = by_type.get(type(value))
        if index is None:
            raise EncoderError(f"{value!r} fits no branch of {branches}")
        write_long(index, out)
        encoders[index](value, out)

    return encode_union
