# mypy: ignore-errors
# A throwaway spike of issue 37 (this branch's paths), kept for its figures in ARCHITECTURE.md.
"""Throughput of the stateful stage: single vs sharded, on B3's synthetic records (files)."""
import json, os, sys, tempfile, time
from pathlib import Path
ROOT = __import__("pathlib").Path(__file__).resolve().parents[2]  # the repository
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
import orjson
from b3_alert_job import synthetic_records
from zkcdc.capture.encoding.avro_codec import SingleObjectCodec
from zkcdc.streaming.job.spark_session import session
from zkcdc.streaming.job.alert_job import alerts_stream
from zkcdc.streaming.job.shard_stage import sharded_alerts_stream
from zkcdc.streaming.rules.rule_settings import RuleSettings

N = int(os.environ.get("N", "200000")); PER = 50_000
master = os.environ["MASTER"]; mode = os.environ["MODE"]; shards = int(os.environ.get("SHARDS", "4"))
data = Path(os.environ.get("DATA", "/tmp/tput-data"))
if not data.exists():
    data.mkdir()
    codec = SingleObjectCodec()
    recs = [codec.decode(v) for v in synthetic_records("bench", 1000, N)]
    for i in range(0, len(recs), PER):
        with open(data / f"part-{i // PER:04d}.json", "wb") as f:
            for r in recs[i:i + PER]:
                f.write(orjson.dumps({"cluster": r["cluster"], "seq": r["seq"], "op": r["op"], "path": r["path"],
                                      "ts_ms": r["ts_ms"], "events": orjson.dumps(r["events"]).decode()}) + b"\n")
spark = session(master, "tput", shuffle_partitions=int(os.environ.get("SP", "2")), **{"spark.ui.enabled": "true", "spark.ui.port": "4077"})
records = (spark.readStream.schema("cluster string, seq long, op string, path string, ts_ms long, events string")
           .option("maxFilesPerTrigger", 1).json(str(data)))
if mode == "single":
    out = alerts_stream(records, RuleSettings(), with_state=False)
else:
    out = sharded_alerts_stream(records, RuleSettings(), 5000, True, shards)
work = Path(tempfile.mkdtemp())
q = (out.writeStream.format("noop").option("checkpointLocation", str(work / "cp"))
     .outputMode("append").trigger(availableNow=True).start())
q.awaitTermination()
ds = [(p["numInputRows"], p["durationMs"]["triggerExecution"]) for p in q.recentProgress if p["numInputRows"]]
later = ds[1:]
rate = sum(n for n, _ in later) / (sum(d for _, d in later) / 1000)
print(f"RESULT {mode} {master} shards={shards} batches_ms={[d for _, d in ds]} records_per_s_after_first={rate:.0f}")
import urllib.request
app = spark.sparkContext.applicationId
stages = json.loads(urllib.request.urlopen(f"http://localhost:4077/api/v1/applications/{app}/stages").read())
from datetime import datetime
def t(x): return datetime.strptime(x.replace("GMT",""), "%Y-%m-%dT%H:%M:%S.%f")
for st in sorted(stages, key=lambda s: s["stageId"]):
    if st.get("completionTime") and st.get("submissionTime"):
        d = (t(st["completionTime"]) - t(st["submissionTime"])).total_seconds()
        print(f"STAGE {st['stageId']} tasks={st['numTasks']} wall={d:.2f}s run={st['executorRunTime']/1000:.2f}s cpu={st['executorCpuTime']/1e9:.2f}s in={st['inputRecords']} shw={st['shuffleWriteRecords']} shr={st['shuffleReadRecords']} {st['name'][:40]}")
spark.stop()
