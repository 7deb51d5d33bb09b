"""A moment's znode versions as the records a snapshot gives: never dies on a znode's bytes."""

from __future__ import annotations

import re
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from zkcdc.capture.decoders import router
from zkcdc.capture.records import Znode
from zkcdc.ground.change_types import Op
from zkcdc.history.state_at import SILENT_IN_BULK, _as_read

PATHS = [
    "/brokers/ids/1", "/brokers/topics/t", "/brokers/topics/t/partitions/0/state", "/controller",
    "/controller_epoch", "/admin/reassign_partitions", "/config/topics/t", "/consumers/g/ids/c",
    "/cluster/id", "/somewhere/else",
]  # fmt: skip
AT_MS = 1_000


def znode(data: bytes | None) -> dict[str, Any]:
    """A version's znode as Arrow gives it to Python."""
    return dict(data=data, version=1, czxid=5, mzxid=6, ctime_ms=1, mtime_ms=2, ephemeral_owner=0)


versions = st.lists(
    st.fixed_dictionaries({
        "path": st.sampled_from(PATHS),
        "from_seq": st.integers(0, 10**6),
        "from_ms": st.integers(0, AT_MS),
        # Open, or ended by a later record (seq, time and op together).
        "to": st.one_of(st.none(), st.tuples(st.integers(0, 10**6), st.integers(0, 2 * AT_MS),
                                             st.sampled_from([op.value for op in Op]))),
        "znode": st.one_of(st.none(), st.builds(znode, st.one_of(
            st.none(), st.binary(max_size=64),
            st.sampled_from([b'{"version":1,"leader":1,"isr":[1],"leader_epoch":0,'
                             b'"controller_epoch":1}', b'{"version":5,"host":"h","port":1}',
                             b"{}", b"1"]),
        ))),
    }),
    max_size=30,
).map(lambda rows: [
    {**{k: v for k, v in row.items() if k != "to"},
     **dict(zip(("to_seq", "to_ms", "to_op"), row["to"] or (None, None, None), strict=True))}
    for row in rows
])  # fmt: skip


@given(
    st.from_regex(re.compile(SILENT_IN_BULK), fullmatch=True),
    st.one_of(st.none(), st.binary(max_size=32)),
)
def test_the_paths_left_out_in_bulk_are_ones_the_decoders_say_nothing_of(
    path: str, data: bytes | None
) -> None:
    """What `state --at` leaves out in Spark must decode to no event whatever it holds."""
    version = Znode(
        data=data, version=1, czxid=5, mzxid=6, ctime_ms=1, mtime_ms=2, ephemeral_owner=0
    )
    assert router.decode(path, None, version) == []
    assert router.decode(path, version, None) == []


@given(versions)
def test_any_bytes_give_records_in_order_and_a_deleted_znode_its_deletion(
    found: list[dict[str, Any]],
) -> None:
    records = list(_as_read(found, AT_MS))
    assert [r["seq"] for r in records] == list(range(1, len(records) + 1))
    kept = [f for f in found if f["znode"] is not None]
    deleted = [
        f for f in kept
        if f["to_ms"] is not None and f["to_ms"] <= AT_MS and f["to_op"] == Op.DELETE.value
    ]  # fmt: skip
    assert sum(r["op"] == Op.READ.value for r in records) == len(kept)
    assert sum(r["op"] == Op.DELETE.value for r in records) == len(deleted)
