"""B9, a faster path for the instant rules? What Spark's Real-time Mode (`trigger(realTime=)`,
Spark 4.1+) gives a stateless query here, beside the micro-batch trigger the alert job uses.

The query is the alert job's own first half: capture's change records read from Kafka and
decoded as the job decodes them (`change_source.changes_with_dead_letters`), then each
record's seq and path written to an output topic; `--python-udf` passes the path through a
Python UDF on the way, as instant rules written in Python would. Records are produced one at a
time, 20 a second; latency is the output record's arrival at a consumer minus its input's
produce time.

An instant rule's alert needs more than its record: an alert id, its hold before RESOLVED,
the controller epoch it compares with (`alert_rules.instants`). That is state, which Real-time
Mode keeps in Spark 4.2 for no Python operator; this measures the floor such a path would
stand on.

Run: `.venv/bin/python bench/b9_realtime_mode.py [--quick]` (the local stack).
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from b3_alert_job import synthetic_records
from harness import fmt, local_stack, parser, percentile, reproduce, save, table

from zkcdc.ground.kafka_connection import KafkaConnection

NAME = "b9_realtime_mode"
MODES = (
    "micro-batch 100 ms",
    "real-time",
    "real-time, Python UDF",
    "real-time, Python UDF, allowlist check off",
)
WARMUP = 100  # records produced first and not counted: the JIT's first minutes


def measure(info: Any, mode: str, records: int, work: Path) -> dict[str, Any]:
    """One query of `mode` over a fresh input topic: produce→output latencies (ms)."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    from pyspark.sql import functions as F

    from zkcdc.streaming.job.change_source import KafkaInput, changes_with_dead_letters
    from zkcdc.streaming.job.spark_session import session

    kafka = KafkaConnection(bootstrap_servers=info.bootstrap_servers)
    tag = uuid.uuid4().hex[:6]
    source, sink = f"zkcdc.bench.rtm.in.{tag}", f"zkcdc.bench.rtm.out.{tag}"
    kafka.ensure_topic(source, 1, 30)
    kafka.ensure_topic(sink, 1, 30)
    # Real-time Mode refuses operators not on its allowlist (Python UDFs among them) unless
    # told not to check.
    conf = (
        {"spark.sql.streaming.realTimeMode.allowlistCheck": "false"}
        if mode.endswith("check off")
        else {}
    )
    spark = session("local[2]", "zkcdc-bench-rtm", shuffle_partitions=1, conf=conf)
    records_df = changes_with_dead_letters(spark, KafkaInput(kafka, source, "latest"))
    path = F.col("path")
    if "Python UDF" in mode:
        path = F.udf(lambda p: p, "string")(path)
    out = records_df.select(F.col("seq").cast("string").alias("key"), path.alias("value"))
    writer = (
        out.writeStream.format("kafka")
        .option("kafka.bootstrap.servers", info.bootstrap_servers)
        .option("topic", sink)
        .option("checkpointLocation", str(work / f"checkpoint-{tag}"))
        .outputMode("update")
    )
    writer = (
        writer.trigger(processingTime="100 milliseconds")
        if mode.startswith("micro-batch")
        else writer.trigger(realTime="5 minutes")
    )
    try:
        query = writer.start()
    except Exception as exc:  # the mode refused this query: a finding, not a crash
        spark.stop()
        return {"mode": mode, "refused": str(exc).splitlines()[0][:500]}
    arrived: dict[int, int] = {}
    halt = threading.Event()
    consumer = Consumer({"bootstrap.servers": info.bootstrap_servers,
                         "group.id": f"rtm-{tag}", "fetch.wait.max.ms": 5})  # fmt: skip
    consumer.assign([TopicPartition(sink, 0, 0)])

    def listen() -> None:
        while not halt.is_set():
            message = consumer.poll(0.1)
            if message is not None and not message.error():
                arrived.setdefault(int(message.key() or b"-1"), time.time_ns() // 1_000_000)

    listener = threading.Thread(target=listen, daemon=True)
    listener.start()
    values = synthetic_records("rtm", 100, records + WARMUP + 200)[-(records + WARMUP) :]
    producer = Producer({"bootstrap.servers": info.bootstrap_servers, "linger.ms": 0})
    sent: dict[int, int] = {}
    try:
        time.sleep(15)  # not a wait for an event: the query's first trigger, its tasks started
        from zkcdc.capture.encoding.avro_codec import change_decoder

        decode = change_decoder(None).decode
        for i, value in enumerate(values):
            if i >= WARMUP:
                sent[decode(value)["seq"]] = time.time_ns() // 1_000_000
            producer.produce(source, value=value)
            producer.flush(10)
            time.sleep(0.05)
        time.sleep(10)  # the last records' way through
    finally:
        halt.set()
        query.stop()
        spark.stop()
        consumer.close()
    delays = sorted(arrived[s] - t for s, t in sent.items() if s in arrived)
    return {
        "mode": mode,
        "records": len(sent),
        "arrived": len(delays),
        "p50_ms": percentile(delays, 0.5),
        "p99_ms": percentile(delays, 0.99),
        "max_ms": delays[-1] if delays else None,
        "error": None if query.exception() is None else str(query.exception())[:500],
    }


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--records", type=int, default=400)
    args = p.parse_args()
    if args.quick:
        args.records = 60
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    work = Path(tempfile.mkdtemp(prefix="zkcdc-bench-rtm-"))
    with local_stack() as info:
        runs = []
        for mode in MODES:
            print(f"{mode}", file=sys.stderr, flush=True)
            runs.append(measure(info, mode, args.records, work))
            print(f"  {runs[-1]}", file=sys.stderr, flush=True)
    print(render(save(NAME, {"runs": runs}, args.quick)))


def render(result: dict[str, Any]) -> str:
    rows = []
    for r in result["runs"]:
        if r.get("refused"):
            rows.append([r["mode"], "refused", "—", "—", r["refused"]])
            continue
        p50, p99 = (f"{fmt(r[k])} ms" if r[k] is not None else "—" for k in ("p50_ms", "p99_ms"))
        error = (r.get("error") or "").splitlines()[:1]
        rows.append([r["mode"], f"{r['arrived']}/{r['records']}", p50, f"**{p99}**",
                     error[0] if error else ""])  # fmt: skip
    return "\n\n".join([
        reproduce(result),
        "The alert job's decode of capture's records, then each record's seq and path to an "
        f"output topic; records produced one at a time, 20 a second, the first {WARMUP} not "
        "counted; produce → output consumed:",
        table(["trigger", "records out", "p50", "p99", "the query's error"], rows),
    ])  # fmt: skip


if __name__ == "__main__":
    main()
