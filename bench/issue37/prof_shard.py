# mypy: ignore-errors
# A throwaway spike of issue 37 (this branch's paths), kept for its figures in ARCHITECTURE.md.
import sys, cProfile, pstats, time, orjson
ROOT = __import__("pathlib").Path(__file__).resolve().parents[2]  # the repository
sys.path.insert(0, str(ROOT))
from pathlib import Path
from zkcdc.streaming.rules.alert_engine import AlertEngine
from zkcdc.streaming.rules.engine_scope import Scope, hash_space, leaders_text
from zkcdc.streaming.rules.sharded_alerts import shard_record
from zkcdc.streaming.rules.rule_settings import RuleSettings
from zkcdc.streaming.job.alert_job import drain_ordered
from zkcdc.streaming.job.bucketed_map import BucketedMap
recs = [orjson.loads(l) for l in open("/tmp/tput-data/part-0000.json","rb")] + [orjson.loads(l) for l in open("/tmp/tput-data/part-0001.json","rb")]
for r in recs: r["events"] = orjson.loads(r["events"])
import os
S = int(os.environ.get('S', '2'))
shard = int(sys.argv[1])
eng = AlertEngine("bench", RuleSettings(), scope=Scope(shard, S))
store = {}
def run(chunk):
    pending = {}
    for r in chunk:
        r2 = shard_record(r, shard, S)
        ev = leaders_text(r2["events"]) if r2["op"] == "LEAD" else orjson.dumps(r2["events"]).decode()
        pending[r2["seq"]] = (r2["ts_ms"], r2["op"], r2["path"], ev)
    eng.state.partitions = BucketedMap(lambda b: store.get(("p", b)), 1024, hash_space(S) if shard else 1)
    eng.state.topics = BucketedMap(lambda b: store.get(("t", b)), 1024)
    t = time.perf_counter()
    drain_ordered(eng, pending, 5000)
    d = time.perf_counter() - t
    eng.state.partitions.flush(lambda b, blob: store.__setitem__(("p", b), blob))
    eng.state.topics.flush(lambda b, blob: store.__setitem__(("t", b), blob))
    return d
print("first", run(recs[:50000]))
if os.environ.get("PROF"):
    pr = cProfile.Profile(); pr.enable()
print("second", run(recs[50000:100000]))
if os.environ.get("PROF"):
    pr.disable(); pstats.Stats(pr).sort_stats("tottime").print_stats(22)

