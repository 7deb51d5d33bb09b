"""The ui reads every topic value as Python's json would, though with orjson first."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from zkcdc.view.json_values import loads

_scalars = (
    st.none() | st.booleans() | st.text() | st.integers(-(2**63), 2**64 - 1)
    | st.floats(allow_nan=True, allow_infinity=True)
)  # fmt: skip
_values = st.recursive(
    _scalars, lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner), max_leaves=20
)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a):
        return math.isnan(b)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


@given(_values)
def test_any_value_reads_as_pythons_json_reads_it(value: Any) -> None:
    data = json.dumps(value).encode()
    assert _same(loads(data), json.loads(data))


@given(st.integers(2**64, 10**300) | st.integers(-(10**300), -(2**63) - 1))
def test_an_integer_past_64_bits_reads_as_the_nearest_float(n: int) -> None:
    # No record of the alert job holds one (Spark's longs are 64 bits); a stray one still reads.
    assert loads(str(n).encode()) == float(n)


@given(st.binary(max_size=64))
def test_bytes_no_reader_takes_are_a_value_error(data: bytes) -> None:
    try:
        expected = json.loads(data)
    except ValueError:
        with pytest.raises(ValueError):
            loads(data)
    else:
        assert _same(loads(data), expected)
