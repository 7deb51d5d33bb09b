"""New KRaft cluster ids follow Kafka's `Uuid.randomUuid`: never a leading "-", never a
reserved id."""

from __future__ import annotations

import base64
from collections.abc import Iterator

from hypothesis import given
from hypothesis import strategies as st

from zkcdc.stack.cluster import new_cluster_id


def _feed(*chunks: bytes) -> Iterator[bytes]:
    yield from chunks


def test_draws_that_would_start_with_a_dash_or_are_reserved_are_drawn_again() -> None:
    dash = b"\xf8" + bytes(15)  # encodes as "-AAA..."
    zero, metadata_topic = bytes(16), bytes(15) + b"\x01"
    good = b"\x01" * 16
    draws = _feed(dash, zero, metadata_topic, good)
    cluster_id = new_cluster_id(lambda n: next(draws))
    assert cluster_id == base64.urlsafe_b64encode(good).decode().rstrip("=")


@given(st.binary(min_size=16, max_size=16))
def test_an_id_is_22_url_safe_characters_that_decode_to_the_16_bytes_drawn(raw: bytes) -> None:
    draws = _feed(raw, b"\x02" * 16)
    cluster_id = new_cluster_id(lambda n: next(draws))
    assert len(cluster_id) == 22
    assert not cluster_id.startswith("-")
    decoded = base64.urlsafe_b64decode(cluster_id + "==")
    assert decoded in (raw, b"\x02" * 16)
