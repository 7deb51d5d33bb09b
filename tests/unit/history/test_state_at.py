"""A moment's newest znodes as the records a snapshot gives: never dies on a znode's bytes."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from zkcdc.ground.change_types import Op
from zkcdc.history.state_at import _as_read

PATHS = [
    "/brokers/ids/1", "/brokers/topics/t", "/brokers/topics/t/partitions/0/state", "/controller",
    "/controller_epoch", "/admin/reassign_partitions", "/config/topics/t", "/consumers/g/ids/c",
    "/cluster/id", "/somewhere/else",
]  # fmt: skip


class Row(dict[str, Any]):
    def asDict(self) -> dict[str, Any]:
        return dict(self)


def znode(data: bytes | None) -> Row:
    return Row(data=data, version=1, czxid=5, mzxid=6, ctime_ms=1, mtime_ms=2, ephemeral_owner=0)


rows = st.lists(
    st.fixed_dictionaries({
        "path": st.sampled_from(PATHS),
        "seq": st.integers(0, 10**6),
        "ts_ms": st.integers(0, 2**41),
        "op": st.sampled_from([op.value for op in Op]),
        "data": st.one_of(st.none(), st.binary(max_size=64),
                          st.sampled_from([b'{"version":1,"leader":1,"isr":[1],"leader_epoch":0,'
                                           b'"controller_epoch":1}', b"{}", b"1"])),
    }),
    max_size=30,
)  # fmt: skip


@given(rows)
def test_any_bytes_give_records_in_seq_order_and_a_deleted_znode_its_deletion(
    found: list[dict[str, Any]],
) -> None:
    table = [
        {**f, "before": znode(f["data"]) if f["op"] == "DELETE" else None,
         "after": None if f["op"] == "DELETE" else znode(f["data"])}
        for f in found
    ]  # fmt: skip
    records = list(_as_read(table))
    assert [r["seq"] for r in records] == list(range(1, len(records) + 1))
    kept = [f for f in sorted(table, key=lambda f: f["seq"]) if f["op"] != Op.HEARTBEAT.value]
    assert len(records) == len(kept) + sum(f["op"] == Op.DELETE.value for f in kept)
    assert {r["op"] for r in records} <= {Op.READ.value, Op.DELETE.value}
