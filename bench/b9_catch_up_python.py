"""B9's catch-up without Spark: the Python work of an alert job started against a large
cluster, part by part. B9 times such a job's first alert (a new checkpoint, capture's whole
snapshot read first); this says how much of that time is the rules' own Python, so what a
faster start has to remove.

The records are capture's snapshot of a simulated cluster as B9 builds it (`simulate build`'s
znodes, 3 brokers, replication factor 3, topics of 1,000 partitions), decoded by capture's own
decoders, in the order of the snapshot's walk (a level of the tree after another: the topics'
assignments, then their partitions' znodes, then the partitions' states). One process, no
Spark, no Kafka:
- the single engine (`--shards 0`'s `AlertEngine`, its state kept in memory, not saved);
- the default layout's stateful step at local[2] (`streaming/job/shard_stage.py`: the cluster
  shard and 2 partition shards, each record routed to each as `shard_stage.routed` does for
  these records), over micro-batches of the job's bound (100,000 records), its MapState a dict
  in memory; the task of Spark that runs each shard (the cluster shard shares task 0 with
  partition shard 2) is where the seconds are summed;
- the same under cProfile at the largest size: the functions that take the most of it;
- the single engine as the job's step runs it (the records as JSON text through the seq order,
  Python's cycle collector paused), then split into the default layout's shards
  (`streaming/rules/engine_split.py`) and each written as its MapState entries
  (`shard_stage.stored_entries`): what a job that took the backlog whole would hand its shards.

Run: `.venv/bin/python bench/b9_catch_up_python.py [--quick] [--sizes 100000,1000000]` (~7 min;
no stack)."""

from __future__ import annotations

import cProfile
import pstats
import random
import sys
import time
from collections.abc import Iterator
from typing import Any

import orjson
from harness import fmt, parser, reproduce, save, table

from zkcdc.capture.decoders import router
from zkcdc.capture.records import Znode, event_fields
from zkcdc.ground.gc_pause import gc_paused
from zkcdc.simulate import formats
from zkcdc.simulate import partition_logic as logic
from zkcdc.simulate.topology import assign_replicas
from zkcdc.streaming.job import shard_stage
from zkcdc.streaming.job.alert_job import drain_ordered
from zkcdc.streaming.job.bucketed_map import NEW_BUCKETS
from zkcdc.streaming.rules.alert_engine import AlertEngine
from zkcdc.streaming.rules.engine_scope import partition_shard
from zkcdc.streaming.rules.engine_split import split
from zkcdc.streaming.rules.rule_settings import RuleSettings
from zkcdc.streaming.rules.seq_order import SeqOrder

NAME = "b9_catch_up_python"
PER_TOPIC = 1000
BROKERS = (1, 2, 3)
BATCH = 100_000  # stream_settings: a micro-batch's bound (max_records_per_batch)
PARTITION_SHARDS = 2  # `--shards auto` at local[2]
TASK_OF_SHARD = {0: 0, 1: 1, 2: 0}  # shard_stage.routed: shard k on task k mod 2
TS_MS = 1_764_000_000_000
PROFILE_ROWS = 12

Record = tuple[int, str, list[dict[str, Any]]]  # seq, path, events


def snapshot(partitions: int) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """(path, events) of capture's snapshot of a simulated cluster, level by level."""
    rng = random.Random(0)
    topics = [f"sim-{i:04d}" for i in range(max(1, partitions // PER_TOPIC))]
    per_topic = min(partitions, PER_TOPIC)

    def read(path: str, data: bytes | None) -> tuple[str, list[dict[str, Any]]]:
        events = router.decode(path, None, Znode(data, version=0, czxid=1, mzxid=1))
        return path, [event_fields(e) for e in events]

    for broker in BROKERS:
        yield read(f"/brokers/ids/{broker}",
                   formats.broker_registration(broker, f"b{broker}", 9092, TS_MS))  # fmt: skip
    yield read("/controller", formats.controller(BROKERS[0], TS_MS))
    yield read("/controller_epoch", formats.controller_epoch(1))
    assignments = {t: assign_replicas(BROKERS, per_topic, 3, rng) for t in topics}
    for t in topics:
        yield read(f"/config/topics/{t}", formats.entity_config({}))
    for t, replicas in assignments.items():
        yield read(f"/brokers/topics/{t}", formats.topic_assignment(replicas, f"id-{t}"))
    for t in topics:
        yield read(f"/brokers/topics/{t}/partitions", None)
    for t in topics:
        for p in range(per_topic):
            yield read(f"/brokers/topics/{t}/partitions/{p}", None)
    for t, replicas in assignments.items():
        for p, assigned in replicas.items():
            s = logic.initial(assigned, 1)
            data = formats.partition_state(s.leader, s.leader_epoch, s.isr, s.controller_epoch)
            yield read(f"/brokers/topics/{t}/partitions/{p}/state", data)


def records(partitions: int) -> list[Record]:
    return [(seq, path, events) for seq, (path, events) in enumerate(snapshot(partitions), 1)]


def single_engine(recs: list[Record]) -> dict[str, Any]:
    engine = AlertEngine("c", RuleSettings())
    started = time.perf_counter()
    alerts = 0
    for seq, path, events in recs:
        record = {"seq": seq, "ts_ms": TS_MS, "op": "READ", "path": path, "events": events}
        alerts += len(engine.process_ordered(record))
    took = time.perf_counter() - started
    return {"seconds": round(took, 2), "records_per_s": round(len(recs) / took), "alerts": alerts}


def split_start(recs: list[Record]) -> dict[str, Any]:
    """The single engine over the records as the job's step takes them, then its shards."""
    rows = [(seq, (TS_MS, "READ", path, orjson.dumps(events).decode()))
            for seq, path, events in recs]  # fmt: skip
    engine, order = AlertEngine("c", RuleSettings()), SeqOrder(1)
    with gc_paused():
        began = time.perf_counter()
        for seq, waiting in rows:
            order.add(seq, 0, waiting, engine.last_seq)
        alerts = len(drain_ordered(engine, order))
        engine.forget_changes()
        ran = time.perf_counter()
        shards = split(engine, order, PARTITION_SHARDS)
        cut = time.perf_counter()
        entries = [shard_stage.stored_entries(e, o, PARTITION_SHARDS, NEW_BUCKETS)
                   for e, o in shards]  # fmt: skip
        stored = time.perf_counter()
    return {
        "engine_s": round(ran - began, 2), "split_s": round(cut - ran, 2),
        "entries_s": round(stored - cut, 2), "alerts": alerts,
        "entries": [len(e) for e in entries],
        "entries_mb": round(sum(len(b) for e in entries for _, _, b in e) / 1e6, 1),
    }  # fmt: skip


class DictMapState:
    """A MapState in memory (the job's is Spark's, through its state server)."""

    def __init__(self) -> None:
        self.values: dict[Any, bytes] = {}
        self.calls = 0

    def getValue(self, key: Any) -> Any:
        self.calls += 1
        value = self.values.get(key)
        return None if value is None else (value,)

    def updateValue(self, key: Any, value: Any) -> None:
        self.calls += 1
        self.values[key] = value[0]

    def removeKey(self, key: Any) -> None:
        self.calls += 1
        self.values.pop(key, None)


class Handle:
    def __init__(self) -> None:
        self.state = DictMapState()

    def getMapState(self, *_: Any) -> DictMapState:
        return self.state


def routed_rows(shard: int, batch: list[Record]) -> Any:
    """One shard's rows of a micro-batch, as shard_stage.routed gives them for a snapshot's
    records: a partition's state whole to the cluster shard and its own shard, a tick to the
    other; a broker's registration whole to the cluster shard alone; the rest whole to all."""
    import pandas as pd  # type: ignore[import-untyped]

    ops, paths, texts = [], [], []
    for _, path, events in batch:
        whole = True
        if shard and path.endswith("/state") and events:
            e = events[0]
            whole = partition_shard(e["topic"], e["partition"], PARTITION_SHARDS) == shard
        elif shard and path.startswith("/brokers/ids/"):
            whole = False
        ops.append("READ" if whole else "TICK")
        paths.append(path if whole else None)
        texts.append(orjson.dumps(events).decode() if whole else None)
    n = len(batch)
    return pd.DataFrame({
        "cluster": ["c"] * n, "slot": [shard] * n, "seq": [seq for seq, _, _ in batch],
        "partition": [0] * n, "ts_ms": [TS_MS] * n, "op": ops, "path": paths, "events": texts,
    })  # fmt: skip


def shard_stage_run(recs: list[Record], profile: cProfile.Profile | None = None) -> dict[str, Any]:
    processor = shard_stage._processor_class()
    shards = []
    for _ in range(PARTITION_SHARDS + 1):
        shard = processor(RuleSettings(), 1, True, PARTITION_SHARDS, NEW_BUCKETS)
        shard.init(Handle())
        shards.append(shard)
    batches: list[dict[str, Any]] = []
    for start in range(0, len(recs), BATCH):
        batch = recs[start : start + BATCH]
        seconds, outputs = [], []
        for number, shard in enumerate(shards):
            rows = routed_rows(number, batch)  # Spark's part: not timed
            began = time.perf_counter()
            if profile is not None:
                profile.enable()
            out = list(shard.handleInputRows(("c", number), iter([rows]), None))
            if profile is not None:
                profile.disable()
            seconds.append(time.perf_counter() - began)
            outputs.append(sum(len(frame) for frame in out))
        tasks = [0.0, 0.0]
        for number, took in enumerate(seconds):
            tasks[TASK_OF_SHARD[number]] += took
        batches.append({
            "first_seq": batch[0][0], "records": len(batch),
            "holds": sorted({_kind(path) for _, path, _ in batch}),
            "shard_s": [round(s, 3) for s in seconds], "task_s": [round(s, 3) for s in tasks],
            "rows_out": outputs,
        })  # fmt: skip
    return {
        "batches": batches,
        "task_s": [round(sum(b["task_s"][t] for b in batches), 1) for t in (0, 1)],
        "shard_s": [round(sum(b["shard_s"][s] for b in batches), 1) for s in range(len(shards))],
        "state_calls": [s.store.calls for s in shards],
        "rows_out": sum(sum(b["rows_out"]) for b in batches),
    }


def _kind(path: str) -> str:
    if path.endswith("/state"):
        return "partition states"
    if "/partitions" in path:
        return "partitions' znodes"
    if path.startswith("/brokers/topics/"):
        return "topic assignments"
    return "brokers, controller, configs"


def profile_rows(profile: cProfile.Profile) -> list[dict[str, Any]]:
    stats = pstats.Stats(profile)
    total = sum(row[2] for row in stats.stats.values())  # type: ignore[attr-defined]
    rows = sorted(stats.stats.items(), key=lambda kv: -kv[1][2])[:PROFILE_ROWS]  # type: ignore[attr-defined]
    out = []
    for (file, line, function), (_, calls, own, cumulative, _) in rows:
        where = file.split("/zkcdc/", 1)[-1] if "/zkcdc/" in file else file.rsplit("/", 1)[-1]
        out.append({"function": f"{where}:{line}({function})", "calls": calls,
                    "own_share": round(own / total, 3), "with_callees_share":
                    round(cumulative / total, 3)})  # fmt: skip
    return out


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--sizes", default="", help="partitions, comma-separated")
    args = p.parse_args()
    default = "10000,100000" if args.quick else "100000,1000000"
    sizes = [int(n) for n in (args.sizes or default).split(",")]
    out = []
    for partitions in sizes:
        print(f"{partitions:,} partitions: the snapshot's records", file=sys.stderr, flush=True)
        recs = records(partitions)
        print(f"  {len(recs):,} records; the single engine", file=sys.stderr, flush=True)
        single = single_engine(recs)
        print(f"  {single}; the shard stage", file=sys.stderr, flush=True)
        sharded = shard_stage_run(recs)
        print(f"  tasks {sharded['task_s']} s; the single engine, then split", file=sys.stderr,
              flush=True)  # fmt: skip
        started = split_start(recs)
        print(f"  {started}", file=sys.stderr, flush=True)
        out.append({"partitions": partitions, "records": len(recs), "single": single,
                    "sharded": sharded, "split_start": started})  # fmt: skip
    print(f"{sizes[-1]:,} partitions under cProfile", file=sys.stderr, flush=True)
    profile = cProfile.Profile()
    shard_stage_run(records(sizes[-1]), profile)
    result = {"sizes": out, "profiled": sizes[-1], "profile": profile_rows(profile)}
    print(render(save(NAME, result, args.quick)))


def render(result: dict[str, Any]) -> str:
    rows = []
    for s in result["sizes"]:
        single, sharded = s["single"], s["sharded"]
        busier = max(sharded["task_s"])
        rows.append([
            fmt(s["partitions"]), fmt(s["records"]),
            f"{single['seconds']:.1f} s ({fmt(single['records_per_s'])}/s)",
            " / ".join(f"{x:.1f}" for x in sharded["shard_s"]) + " s",
            " / ".join(f"{x:.1f}" for x in sharded["task_s"]) + " s",
            f"**{busier:.1f} s**", f"{busier / single['seconds']:.1f}x",
            fmt(sharded["rows_out"]), fmt(sum(sharded["state_calls"])),
        ])  # fmt: skip
    largest = result["sizes"][-1]
    parts: dict[str, list[float]] = {}
    for b in largest["sharded"]["batches"]:
        key = ", ".join(b["holds"])
        parts.setdefault(key, [0, 0.0, 0.0])
        parts[key][0] += 1
        parts[key][1] += b["task_s"][0]
        parts[key][2] += b["task_s"][1]
    part_rows = [[what, fmt(n), f"{t0:.1f} s", f"{t1:.1f} s"]
                 for what, (n, t0, t1) in parts.items()]  # fmt: skip
    split_rows = [
        [fmt(s["partitions"]), f"{x['engine_s']:.1f} s", f"{x['split_s']:.1f} s",
         f"{x['entries_s']:.1f} s", f"**{x['engine_s'] + x['split_s'] + x['entries_s']:.1f} s**",
         " / ".join(fmt(n) for n in x["entries"]), f"{x['entries_mb']:.1f} MB",
         f"{max(s['sharded']['task_s']):.1f} s"]
        for s in result["sizes"] if (x := s.get("split_start")) is not None
    ]  # fmt: skip
    profile = [[f"`{r['function']}`", fmt(r["calls"]), f"{100 * r['own_share']:.0f} %",
                f"{100 * r['with_callees_share']:.0f} %"] for r in result["profile"]]  # fmt: skip
    return "\n\n".join([
        reproduce(result),
        "Capture's snapshot of a simulated cluster (3 brokers, replication factor 3, topics of "
        "1,000 partitions) through the rules in one process, no Spark: the single engine, and "
        "the default layout's stateful step at local[2] (the cluster shard and 2 partition "
        "shards, micro-batches of 100,000 records, its state in memory). A task is a core: "
        "task 0 runs the cluster shard and partition shard 2, task 1 partition shard 1.",
        table(["partitions", "records", "single engine", "shards 0 / 1 / 2",
               "tasks 0 / 1", "busier task", "against the single engine",
               "rows out (alerts, state upserts)", "state store calls"], rows),
        f"At {fmt(largest['partitions'])} partitions, by what the micro-batches held (each "
        "task's seconds):",
        table(["records", "micro-batches", "task 0", "task 1"], part_rows),
        f"Under cProfile at {fmt(result['profiled'])} partitions (the shard stage; shares "
        "of its profiled time, own and with what each calls):",
        table(["function", "calls", "own", "with callees"], profile),
        *(["The single engine over the same records as the job's step takes them (JSON text "
           "through the seq order, the cycle collector paused), then split into the default "
           "layout's three shards and each written as its MapState entries: what a job that "
           "took the backlog whole would hand its shards, in one process.",
           table(["partitions", "single engine", "split", "entries written", "together",
                  "entries (shards 0 / 1 / 2)", "their bytes", "the shard stage's busier task"],
                 split_rows)] if split_rows else []),
    ])  # fmt: skip


if __name__ == "__main__":
    main()
