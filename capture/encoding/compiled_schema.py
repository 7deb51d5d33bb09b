"""What the event log's readers and writer build from the current ChangeRecord schema, built
once a process per schema text.

Compiling a splitter takes ~13 ms and an encoder ~6 ms (Python source through `compile`), and
fastavro's parse a few more. Every read of a log (`scan_blocks`, `read_spans`,
`read_records`) and every writer did it again, so a folder read file by file, the web view's
reloads and the damage fuzz tests' thousands of reads paid for it each time. The key is the
schema file's text, not its name: `ZKCDC_SCHEMA_DIR` may point a later call at a later
release."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from typing import Any

import fastavro

from zkcdc.capture.encoding.avro_encoder import compile_encoder
from zkcdc.capture.encoding.avro_spans import Split, compile_splitter
from zkcdc.ground import schema_files


def current_text() -> str:
    """The current ChangeRecord schema's text: what the functions below are keyed by."""
    return schema_files.current_text("ChangeRecord")


@functools.lru_cache(maxsize=8)
def parsed(text: str) -> Any:
    """fastavro's parsed form of a schema's text (a reader or writer schema)."""
    return fastavro.parse_schema(json.loads(text), named_schemas={})


@functools.lru_cache(maxsize=8)
def splitter(text: str, keep: tuple[str, ...]) -> Split:
    """compile_splitter of a schema's text."""
    return compile_splitter(json.loads(text), keep)


@functools.lru_cache(maxsize=8)
def sized_encoder(text: str) -> Callable[[Any], bytes]:
    """compile_encoder of a schema's text, arrays written sized (what the log holds)."""
    return compile_encoder(parsed(text), sized_arrays=True)


@functools.lru_cache(maxsize=64)
def normalized(schema_text: str) -> str:
    """A schema's text as `json.dumps` writes it: what a log file's header holds, and a
    block's header compared with the current schema (a file's blocks share one text)."""
    return json.dumps(json.loads(schema_text))
