"""Kafka's message encoding ("flexible" versions: compact strings and arrays, tagged fields),
read by a function compiled once per message and version from its layout.

The compiled functions are plain Python with the layout unrolled (no per-field dispatch): the
metadata log is read at hundreds of thousands of records a second (B7). A message that ends
early, or a length that points past the end, raises `MessageError`; unknown tags are skipped,
as Kafka skips them."""

from __future__ import annotations

import base64
import struct
from collections.abc import Callable
from typing import Any

from zkcdc.capture.errors import CaptureError
from zkcdc.capture.kraft.message_layouts import (
    TYPE_DEFAULT,
    Field,
    MessageLayout,
    Struct,
    StructArray,
)

Reader = Callable[[bytes, int], tuple[dict[str, Any], int]]


class MessageError(CaptureError):
    """Bytes that are not the message they claim to be."""


_FIXED = {
    "int8": (">b", 1),
    "int16": (">h", 2),
    "uint16": (">H", 2),
    "int32": (">i", 4),
    "int64": (">q", 8),
    "float64": (">d", 8),
}
_ZERO = {"bool": False, "string": "", "bytes": b"", "uuid": "AAAAAAAAAAAAAAAAAAAAAA"}


def uvarint(b: bytes, p: int) -> tuple[int, int]:
    """An unsigned varint at `p`: (value, position after it)."""
    value = shift = 0
    while True:
        byte = b[p]
        p += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, p
        shift += 7
        if shift > 63:
            raise MessageError("varint longer than 10 bytes")


def uuid_text(raw: bytes) -> str:
    """Kafka's way of showing a Uuid: URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def _default(field: Field) -> object:
    if field.default is not TYPE_DEFAULT:
        return field.default
    kind = field.kind
    if isinstance(kind, StructArray) or (isinstance(kind, str) and kind.startswith("[]")):
        return []
    if isinstance(kind, Struct):
        return None
    return _ZERO.get(kind, 0) if isinstance(kind, str) else None


# An unsigned varint into `n`, its usual single byte read inline (a call per field costs more
# than the field).
_LENGTH = ["n = b[p]", "if n < 0x80:", "    p += 1", "else:", "    n, p = uv(b, p)"]


class _Compiler:
    """Python source for one layout at one version; nested structs become functions too."""

    def __init__(self) -> None:
        self.functions: list[str] = []
        self.constants: dict[str, object] = {}

    def constant(self, value: object) -> str:
        name = f"_k{len(self.constants)}"
        self.constants[name] = value
        return name

    def struct(self, fields: tuple[Field, ...], version: int) -> str:
        name = f"_read{len(self.functions)}"
        self.functions.append("")  # reserve the slot: nested ones come after
        index = len(self.functions) - 1
        # Each field into a local, the dict made once at the end: a dict literal costs less
        # than a store per field.
        lines = [f"def {name}(b, p):"]
        tagged = []
        for i, field in enumerate(fields):
            if not field.present_in(version):
                lines.append(f"    f{i} = {self.constant(_default(field))}")
            elif field.tag is not None:
                tagged.append((i, field))
                lines.append(f"    f{i} = {self.constant(_default(field))}")
            else:
                lines += ["    " + line for line in self.value(field, version, f"f{i}")]
        lines += ["    " + line for line in _LENGTH]
        lines += ["    for _ in range(n):",
                  "        tag, p = uv(b, p)", "        size, p = uv(b, p)",
                  "        end = p + size"]  # fmt: skip
        for j, (i, field) in enumerate(tagged):
            keyword = "if" if j == 0 else "elif"
            lines.append(f"        {keyword} tag == {field.tag}:")
            lines += ["            " + line for line in self.value(field, version, f"f{i}")]
        lines.append("        p = end")
        items = ", ".join(f"{field.name!r}: f{i}" for i, field in enumerate(fields))
        lines.append(f"    return {{{items}}}, p")
        self.functions[index] = "\n".join(lines)
        return name

    def value(self, field: Field, version: int, target: str) -> list[str]:
        """Lines that read `field` at `p` into `target` and move `p` past it."""
        kind = field.kind
        nullable = field.nullable_in(version)
        null = (
            [f"    {target} = None"]
            if nullable
            else [f"    raise MessageError('null {field.name} where it may not be null')"]
        )
        if isinstance(kind, Struct):
            sub = self.struct(kind.fields, version)
            return [f"{target}, p = {sub}(b, p)"]
        if isinstance(kind, StructArray):
            sub = self.struct(kind.fields, version)
            return [*_LENGTH, "if n == 0:", *null, "else:",
                    "    a = []", "    for _ in range(n - 1):",
                    f"        x, p = {sub}(b, p)", "        a.append(x)",
                    f"    {target} = a"]  # fmt: skip
        if kind.startswith("[]"):
            element = kind[2:]
            if element in _FIXED:
                code, size = _FIXED[element]
                return [*_LENGTH, "if n == 0:", *null, "else:",
                        "    n -= 1", f"    e = p + {size} * n",
                        "    if e > len(b): raise MessageError('array past the end')",
                        f"    {target} = list(unpack_from('>' + str(n) + {code[1:]!r}, b, p))",
                        "    p = e"]  # fmt: skip
            reads = self.scalar(element, "x", nullable=False)
            return [*_LENGTH, "if n == 0:", *null, "else:", "    a = []",
                    "    for _ in range(n - 1):", *("        " + r for r in reads),
                    "        a.append(x)", f"    {target} = a"]  # fmt: skip
        return self.scalar(kind, target, nullable, field.name)

    def scalar(self, kind: str, target: str, nullable: bool, name: str = "") -> list[str]:
        if kind in _FIXED:
            code, size = _FIXED[kind]
            reader = self.constant(struct.Struct(code).unpack_from)
            return [f"{target} = {reader}(b, p)[0]", f"p += {size}"]
        if kind == "bool":
            return [f"{target} = b[p] != 0", "p += 1"]
        if kind == "uuid":
            return ["if p + 16 > len(b): raise MessageError('uuid past the end')",
                    f"{target} = uuid_text(b[p:p + 16])", "p += 16"]  # fmt: skip
        if kind in ("string", "bytes"):
            null = (
                f"{target} = None"
                if nullable
                else f"raise MessageError('null {name} where it may not be null')"
            )
            take = "b[p:e].decode('utf-8')" if kind == "string" else "bytes(b[p:e])"
            return [*_LENGTH, "if n == 0:", f"    {null}", "else:",
                    "    e = p + n - 1",
                    "    if e > len(b): raise MessageError('string past the end')",
                    f"    {target} = {take}", "    p = e"]  # fmt: skip
        raise ValueError(f"no reader for type {kind!r}")


_COMPILED: dict[tuple[str, int], Reader] = {}


def compiled(layout: MessageLayout, version: int) -> Reader:
    """The reader of `layout` at `version` (compiled on first use, then kept; by name, as
    hashing a layout's nested fields on every record costs more than reading it)."""
    key = (layout.name, version)
    reader = _COMPILED.get(key)
    if reader is None:
        reader = _COMPILED[key] = _compile(layout, version)
    return reader


def _compile(layout: MessageLayout, version: int) -> Reader:
    compiler = _Compiler()
    entry = compiler.struct(layout.fields, version)
    namespace: dict[str, Any] = {
        "uv": uvarint,
        "uuid_text": uuid_text,
        "unpack_from": struct.unpack_from,
        "MessageError": MessageError,
        **compiler.constants,
    }
    # Our own layouts compiled, never input.
    exec("\n\n".join(compiler.functions), namespace)
    reader: Reader = namespace[entry]
    return reader


def read_message(
    layout: MessageLayout, version: int, data: bytes, start: int = 0
) -> dict[str, Any]:
    """The whole of `data[start:]` as `layout` at `version`; anything left over is an error."""
    reader = _COMPILED.get((layout.name, version))
    if reader is None:
        low, high = layout.versions
        if not low <= version <= high:
            raise MessageError(f"{layout.name} version {version} is not known (knows {low}-{high})")
        reader = compiled(layout, version)
    try:
        message, end = reader(data, start)
    except (IndexError, struct.error, UnicodeDecodeError) as exc:
        raise MessageError(f"{layout.name} v{version}: {exc}") from exc
    if end != len(data):
        raise MessageError(f"{layout.name} v{version}: {len(data) - end} byte(s) after the end")
    return message
