# mypy: ignore-errors
# A throwaway spike of issue 37 (this branch's paths), kept for its figures in ARCHITECTURE.md.
"""Spike: what one MapState call costs in transformWithStateInPandas (PySpark 4.0.0), against
applyInPandasWithState's one pickled value. Throwaway measurement for issue 37's design."""

from __future__ import annotations

import json
import os
import pickle
import sys
import tempfile
import time
from pathlib import Path

ROOT = __import__("pathlib").Path(__file__).resolve().parents[2]  # the repository
sys.path.insert(0, str(ROOT))
from zkcdc.streaming.job.spark_session import session  # noqa: E402

OUT = Path("/tmp/spike_out.jsonl")
N = int(os.environ.get("N", "20000"))


def main() -> None:
    import pandas as pd
    from pyspark.sql.streaming import StatefulProcessor
    from pyspark.sql.streaming.state import GroupStateTimeout
    from pyspark.sql.types import BinaryType, StructField, StructType, LongType

    master = os.environ.get("MASTER", "local[2]")
    spark = session(master, "spike", shuffle_partitions=int(os.environ.get("SP", "2")))
    work = Path(tempfile.mkdtemp(prefix="spike-"))
    src = work / "in"
    src.mkdir()
    groups = int(os.environ.get("G", "1"))
    rows = [{"g": i % groups, "k": i} for i in range(N)]
    (src / "a.json").write_text("".join(json.dumps(r) + "\n" for r in rows))
    df = spark.readStream.schema("g long, k long").json(str(src))

    class Proc(StatefulProcessor):
        def init(self, handle):  # type: ignore[no-untyped-def]
            self.m = handle.getMapState(
                "m", StructType([StructField("k", LongType())]),
                StructType([StructField("v", BinaryType())]),
            )
            self.v = handle.getValueState("v", StructType([StructField("n", LongType())]))

        def handleInputRows(self, key, rows, timerValues):  # type: ignore[no-untyped-def]
            t0 = time.perf_counter()
            ks = [k for pdf in rows for k in pdf["k"].tolist()]
            t1 = time.perf_counter()
            got = 0
            for k in ks:
                if self.m.getValue((k,)) is not None:
                    got += 1
            t2 = time.perf_counter()
            blob = pickle.dumps({"leader": 1, "isr": (1, 2, 3), "replicas": (1, 2, 3)})
            for k in ks:
                self.m.updateValue((k,), (blob,))
            t3 = time.perf_counter()
            self.v.update((len(ks),))
            with OUT.open("a") as f:
                f.write(json.dumps({"api": "tws", "n": len(ks), "get_us": (t2 - t1) / len(ks) * 1e6,
                                    "put_us": (t3 - t2) / len(ks) * 1e6}) + "\n")
            yield pd.DataFrame({"g": [key[0]], "n": [len(ks)]})

        def close(self) -> None:
            pass

    which = os.environ.get("API", "tws")
    if which == "tws":
        out = df.groupBy("g").transformWithStateInPandas(Proc(), "g long, n long", "Append", "None")
    else:
        def run(key, batches, state):  # type: ignore[no-untyped-def]
            t0 = time.perf_counter()
            d = pickle.loads(state.get[0]) if state.exists else {}
            t1 = time.perf_counter()
            blob = {"leader": 1, "isr": (1, 2, 3), "replicas": (1, 2, 3)}
            n = 0
            for pdf in batches:
                for k in pdf["k"].tolist():
                    d[k] = blob
                    n += 1
            t2 = time.perf_counter()
            state.update((pickle.dumps(d),))
            t3 = time.perf_counter()
            with OUT.open("a") as f:
                f.write(json.dumps({"api": "apply", "n": n, "load_ms": (t1 - t0) * 1e3,
                                    "store_ms": (t3 - t2) * 1e3}) + "\n")
            yield pd.DataFrame({"g": [key[0]], "n": [n]})

        out = df.groupBy("g").applyInPandasWithState(
            run, "g long, n long", "s binary", "append", GroupStateTimeout.NoTimeout)
    q = (out.writeStream.format("noop").option("checkpointLocation", str(work / "cp"))
         .outputMode("append").trigger(processingTime="200 milliseconds").start())
    def wait_batches(n):
        deadline = time.time() + 120
        while len([p for p in q.recentProgress if p["numInputRows"]]) < n and time.time() < deadline:
            time.sleep(0.2)
    wait_batches(1)
    for i in range(8):
        (src / f"s{i}.json").write_text("".join(json.dumps({"g": r["g"], "k": 10_000_000 + i * 10 + j}) + "\n" for j, r in enumerate(rows[:5])))
        wait_batches(2 + i)
    for p in q.recentProgress:
        if p["numInputRows"]:
            print("batch", p["batchId"], p["numInputRows"], p["durationMs"].get("triggerExecution"), p["durationMs"].get("addBatch"))
    q.stop()
    spark.stop()


if __name__ == "__main__":
    main()
