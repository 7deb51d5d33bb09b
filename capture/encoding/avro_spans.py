"""Splits the data of an Avro container block into its records' bytes, reading only a few
top-level fields: what copying records (replay into Kafka) needs, without decoding them.

Decoding a change record with fastavro (its event type has some fifty nullable fields, each
made into a dict entry) bounded replay's rate (BENCHMARKS.md, "Figures behind the code"). Re-publishing a record
needs only its bytes (the same schema goes out as went in) and a few fields for the key, the
headers, the timestamp and the pacing. `compile_splitter(schema, keep)` generates, once, Python
source that walks a record's binary form field by field, skipping what it does not keep, and
returns the kept values with the record's end offset.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from zkcdc.capture.errors import CaptureError

Split = Callable[[bytes, int], list[tuple[Any, ...]]]


class SpanError(CaptureError):
    """Block data that does not hold the records its header counts (a damaged block)."""


def _long(b: bytes, p: int) -> tuple[int, int]:
    """Avro's zig-zag varint at `p`: (value, next offset)."""
    byte = b[p]
    n = byte & 0x7F
    shift = 7
    while byte & 0x80:
        p += 1
        byte = b[p]
        n |= (byte & 0x7F) << shift
        shift += 7
    return (n >> 1) ^ -(n & 1), p + 1


def _nullable(t: Any) -> bool:
    return isinstance(t, list) and len(t) == 2 and t[0] == "null"


# A varint is bytes with the high bit set, then one without. A run of fields of fixed shape
# (numbers, enums, booleans) is skipped by one regex match at C speed instead of a Python step
# per byte: the Znode images' six stat numbers were most of the splitting time.
_VARINT = rb"[\x80-\xff]*[\x00-\x7f]"
_ANY = rb"[\x00-\xff]"


def _length(indent: str, signed: bool = False) -> list[str]:
    """Lines that read a varint into `n`: a length (of a string, bytes or a sized block), or
    with `signed` an array block's count. Most are one byte, read inline; a function call per
    varint was the splitter's largest cost."""
    one_byte = "n = (n >> 1) ^ -(n & 1)" if signed else "n >>= 1"
    lines = ["n = b[p]", "if n < 0x80:", f"    {one_byte}", "    p += 1", "else:",
             "    n, p = _long(b, p)"]  # fmt: skip
    return [indent + line for line in lines]


_NULLABLE_RUN = 8  # shorter runs of nullable fields are cheaper skipped one by one


def _nullable_run(b: bytes, p: int, skips: tuple[Callable[[bytes, int], int], ...]) -> int:
    """Skips a run of ["null", T] fields. Most of a change record's event fields are null, one
    zero byte each: a run of zeros goes at C speed, and only the fields set cost a call."""
    j, r = 0, len(skips)
    while j < r:
        chunk = b[p : p + r - j]
        zeros = len(chunk) - len(chunk.lstrip(b"\0"))
        p += zeros
        j += zeros
        if j < r:
            if b[p] != 2:
                raise SpanError(f"union index {b[p]} at {p} for a nullable field")
            p = skips[j](b, p + 1)
            j += 1
    return p


class _Generator:
    def __init__(self, schema: dict[str, Any]) -> None:
        self.named: dict[str, Any] = {}
        self.functions: list[str] = []
        self.done: set[str] = set()
        self.namespace = schema.get("namespace", "")
        self.counter = 0
        self.patterns: dict[str, Callable[..., Any]] = {}

    def fullname(self, name: str, namespace: str) -> str:
        return name if "." in name or not namespace else f"{namespace}.{name}"

    def skip(self, t: Any, ns: str, indent: str) -> list[str]:
        """Lines that move `p` past one value of type `t`."""
        if isinstance(t, list):
            if len(t) >= 64:
                raise SpanError("unions of 64 or more branches are not supported")
            lines = [f"{indent}i = b[p] >> 1", f"{indent}p += 1"]
            first = True
            for index, branch in enumerate(t):
                body = self.skip(branch, ns, indent + "    ")
                if not body:
                    continue
                lines.append(f"{indent}{'if' if first else 'elif'} i == {index}:")
                lines += body
                first = False
            return lines
        if isinstance(t, dict):
            kind = t["type"]
            if kind in ("record", "error"):
                name = self.fullname(t["name"], t.get("namespace", ns))
                self.named[name] = t
                self.record_function(name, t, t.get("namespace", ns))
                return [f"{indent}p = {self.fn(name)}(b, p)"]
            if kind == "enum":
                self.named[self.fullname(t["name"], t.get("namespace", ns))] = t
                return self.skip("long", ns, indent)
            if kind == "fixed":
                self.named[self.fullname(t["name"], t.get("namespace", ns))] = t
                return [f"{indent}p += {int(t['size'])}"]
            if kind in ("array", "map"):
                return [f"{indent}p = {self.blocks_function(t, ns)}(b, p)"]
            return self.skip(kind, ns, indent)
        if t == "null":
            return []
        if t == "boolean":
            return [f"{indent}p += 1"]
        if t in ("int", "long"):
            return [f"{indent}while b[p] & 0x80:", f"{indent}    p += 1", f"{indent}p += 1"]
        if t == "float":
            return [f"{indent}p += 4"]
        if t == "double":
            return [f"{indent}p += 8"]
        if t in ("bytes", "string"):
            return [*_length(indent), f"{indent}p += n"]
        name = self.fullname(t, ns)
        if name not in self.named:
            raise SpanError(f"unknown Avro type {t!r}")
        return self.skip(self.named[name], ns, indent)

    def fn(self, name: str) -> str:
        return "_skip_" + name.replace(".", "_")

    def shape(self, t: Any, ns: str) -> bytes | None:
        """A regex for one value of `t` when its encoding has no length prefix, else None."""
        if isinstance(t, dict):
            kind = t["type"]
            if kind == "enum":
                self.named[self.fullname(t["name"], t.get("namespace", ns))] = t
                return _VARINT
            if kind == "fixed":
                self.named[self.fullname(t["name"], t.get("namespace", ns))] = t
                return _ANY + b"{%d}" % int(t["size"])
            return self.shape(kind, ns) if isinstance(kind, str) else None
        if t in ("int", "long"):
            return _VARINT
        if t == "boolean":
            return _ANY
        if t == "float":
            return _ANY + b"{4}"
        if t == "double":
            return _ANY + b"{8}"
        if isinstance(t, str) and t not in ("null", "bytes", "string"):
            name = self.fullname(t, ns)
            if name in self.named and self.named[name].get("type") in ("enum", "fixed"):
                return self.shape(self.named[name], ns)
        return None

    def run_lines(self, shapes: list[bytes], indent: str) -> list[str]:
        """Lines that move `p` past a run of fixed-shape values in one regex match."""
        self.counter += 1
        name = f"_run_{self.counter}"
        self.patterns[name] = re.compile(b"".join(b"(?:%s)" % x for x in shapes)).match
        return [f"{indent}p = {name}(b, p).end()"]  # None (data ends): AttributeError

    def fields_lines(self, types: list[Any], ns: str, indent: str) -> list[str]:
        """Lines that skip consecutive fields: fixed-shape runs as one match, nullable runs
        as one `_nullable_run`, the rest one by one."""
        lines: list[str] = []
        start = 0
        while start < len(types):
            end = start
            shapes = []
            while end < len(types) and (shape := self.shape(types[end], ns)) is not None:
                shapes.append(shape)
                end += 1
            if end - start >= 2:
                lines += self.run_lines(shapes, indent)
                start = end
                continue
            end = start
            while end < len(types) and _nullable(types[end]):
                end += 1
            if end - start >= _NULLABLE_RUN:
                skips = ", ".join(self.value_function(f[1], ns) for f in types[start:end])
                lines.append(f"{indent}p = _nullable_run(b, p, ({skips},))")
                start = end
            else:
                lines += self.skip(types[start], ns, indent)
                start += 1
        return lines

    def record_function(self, name: str, t: dict[str, Any], ns: str) -> None:
        if name in self.done:
            return
        self.done.add(name)
        lines = [f"def {self.fn(name)}(b, p):"]
        lines += self.fields_lines([f["type"] for f in t["fields"]], ns, "    ")
        lines.append("    return p")
        self.functions.append("\n".join(lines))

    def value_function(self, t: Any, ns: str) -> str:
        self.counter += 1
        name = f"_skip_value_{self.counter}"
        body = self.skip(t, ns, "    ")
        self.functions.append("\n".join([f"def {name}(b, p):", *body, "    return p"]))
        return name

    def blocks_function(self, t: dict[str, Any], ns: str) -> str:
        self.counter += 1
        name = f"_skip_blocks_{self.counter}"
        item = self.skip(t["items"] if t["type"] == "array" else t["values"], ns, "            ")
        key = self.skip("string", ns, "            ") if t["type"] == "map" else []
        lines = [
            f"def {name}(b, p):",
            "    while True:",
            *_length("        ", signed=True),  # the block's count: negative when sized
            "        if n == 0:",
            "            return p",
            "        if n < 0:",  # a block that carries its size in bytes: jump over it
            *_length("            "),
            "            p += n",
            "            continue",
            "        for _ in range(n):",
            *key,
            *(item or ["            pass"]),
        ]
        self.functions.append("\n".join(lines))
        return name


def compile_splitter(schema: dict[str, Any], keep: Sequence[str]) -> Split:
    """`split(data, count)` -> a tuple per record: the values of the top-level fields `keep`
    (strings, longs or ints, in that order) then the record's bytes. Raises SpanError when the
    data does not end where its `count` records end."""
    gen = _Generator(schema)
    ns = gen.namespace
    gen.named[gen.fullname(schema["name"], ns)] = schema
    body: list[str] = []
    skipped: list[Any] = []  # fields between two kept ones, skipped together
    for f in [*schema["fields"], None]:
        if f is not None and f["name"] not in keep:
            skipped.append(f["type"])
            continue
        body += gen.fields_lines(skipped, ns, "        ")
        skipped = []
        if f is None:
            break
        var = "k_" + f["name"]
        if f["type"] == "string":
            body += [*_length("        "), f"        {var} = b[p:p + n].decode()",
                     "        p += n"]  # fmt: skip
        elif f["type"] in ("long", "int"):
            body.append(f"        {var}, p = _long(b, p)")
        else:
            raise SpanError(f"field {f['name']} must be a string or a number to keep it")
    kept = ", ".join("k_" + name for name in keep)
    source = "\n\n".join([
        *gen.functions,
        "\n".join([
            "def split(b, count):",
            "    out = []",
            "    p = 0",
            "    for _ in range(count):",
            "        start = p",
            *body,
            f"        out.append(({kept}, b[start:p]))",
            "    if p != len(b):",
            "        raise SpanError(f'block data ends at {len(b)}, its records at {p}')",
            "    return out",
        ]),
    ])  # fmt: skip
    scope: dict[str, Any] = {
        "_long": _long,
        "_nullable_run": _nullable_run,
        "SpanError": SpanError,
        **gen.patterns,
    }
    exec(compile(source, "<avro_spans>", "exec"), scope)
    split: Split = scope["split"]

    def guarded(data: bytes, count: int) -> list[tuple[Any, ...]]:
        try:
            return split(data, count)
        except (IndexError, AttributeError) as exc:
            raise SpanError(f"block data ends inside a record ({len(data)} bytes)") from exc

    return guarded
