# mypy: ignore-errors
# A throwaway spike of issue 37 (this branch's paths), kept for its figures in ARCHITECTURE.md.
"""Try: the fixture log through today's stage and the sharded stage, alerts compared."""
import sys, tempfile, time
from pathlib import Path
ROOT = __import__("pathlib").Path(__file__).resolve().parents[2]  # the repository
sys.path.insert(0, str(ROOT))
from zkcdc.streaming.job.spark_session import session
from zkcdc.streaming.job.change_source import LogInput, read_changes
from zkcdc.streaming.job.alert_job import alerts_stream
from zkcdc.streaming.job.shard_stage import sharded_alerts_stream
from zkcdc.streaming.rules.rule_settings import RuleSettings

LOG = ROOT / "tests" / "fixtures" / "event_log_v1"
spark = session("local[2]", "try", shuffle_partitions=2)
work = Path(tempfile.mkdtemp())
got = {}
def run(name, make):
    records, _ = read_changes(spark, LogInput(LOG))
    rows = []
    def collect(batch, batch_id):
        rows.extend(tuple(r) for r in batch.collect())
    t = time.time()
    q = (make(records).writeStream.foreachBatch(collect).option("checkpointLocation", str(work / name))
         .outputMode("append").trigger(availableNow=True).start())
    q.awaitTermination()
    print(name, "rows", len(rows), "s", round(time.time() - t, 1), [p["numInputRows"] for p in q.recentProgress])
    got[name] = rows
run("single", lambda r: alerts_stream(r, RuleSettings(), with_state=True))
run("sharded", lambda r: sharded_alerts_stream(r, RuleSettings(), 5000, True, 3))
single = [r for r in got["single"] if r[0] == "alert"]
sharded = sorted([r for r in got["sharded"] if r[0] == "alert"], key=lambda r: r[5])
print("alerts", len(single), len(sharded))
print("same in order:", [r[:5] for r in single] == [r[:5] for r in sharded])
ss = {r[1]: r[2] for r in got["single"] if r[0] == "state"}
hs = {r[1]: r[2] for r in got["sharded"] if r[0] == "state"}
print("state same:", ss == hs, len(ss), len(hs))
spark.stop()
