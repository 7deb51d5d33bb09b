"""B9: a job started on a new checkpoint against a cluster that capture keeps in sync, and how
long it is blind: the last column of B9's first table, measured alone at the sizes given
(default 1,000,000 partitions), with the steps of the started job's start read from its own
log: Spark up, the backlog's take begun and done (streaming/job/initial_state.py), the
backlog's alerts delivered, the query's first micro-batch, and the alert of a partition taken
offline as the job started, on the alerts topic.

As in B9 (`b9_cluster_size.py`, whose harness this is): a simulated cluster (3 brokers,
replication factor 3, topics of 1,000 partitions), `zkcdc capture` and a first alert job
started together, a few incidents once the job alerts; then that job is stopped and another
started on a new checkpoint with the same flags (`--driver-memory 3g`, the default layout).

Run: `.venv/bin/python bench/b9_started_job.py [--sizes 1000000]` (a stack of its own,
ZooKeeper with B9's heap; ~20 min at 1,000,000 partitions: the build, capture's snapshot, the
first job reading it, then the started one)."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from b3_alert_job import latency
from b9_cluster_size import ZOOKEEPER_HEAP_MB, sizes, started_job_targets
from harness import fmt, own_stack, parser, reproduce, save, spark_built, table

NAME = "b9_started_job"
# Its target is B9's own: the summary takes this run's figure where it is the newer.
SUPERSEDES = "b9_cluster_size"
INCIDENTS = 6  # the first waits for the first job to be up; the others are not the point here
STEPS = ("Spark up", "backlog take begun", "backlog taken", "backlog's alerts delivered",
         "first micro-batch done")  # fmt: skip


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--sizes", default="1000000", help="partitions of each cluster")
    p.add_argument("--job-arg", action="append", default=[], help="one more flag for the job")
    args = p.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    job = ("--driver-memory", "3g", *args.job_arg)
    result: dict[str, Any] = {"sizes": []}
    spark_built()  # timed starts are a user's after the first
    with own_stack(brokers=1, zookeeper_heap_mb=ZOOKEEPER_HEAP_MB) as info:
        for topics, per_topic in sizes(False, True, args.sizes):
            partitions = topics * per_topic
            print(f"{partitions:,} partitions", file=sys.stderr, flush=True)
            work = Path(tempfile.mkdtemp(prefix="zkcdc-bench-b9s-"))
            measured = latency(
                info, INCIDENTS, work, topics=topics, partitions_per_topic=per_topic,
                job_args=job, first_alert_s=120 + partitions / 500, clean=partitions <= 1000,
                fresh_job=True,
            )  # fmt: skip
            result["sizes"].append({"partitions": partitions, **measured})
            print(f"  started job's first alert after {measured['fresh_job_first_alert_s']} s",
                  file=sys.stderr)  # fmt: skip
    print(render(save(NAME, result, args.quick)))


def targets(result: dict[str, Any]) -> list[tuple[str, str, str, bool]]:
    return started_job_targets(result["sizes"])


def render(result: dict[str, Any]) -> str:
    rows = []
    for s in result["sizes"]:
        steps = s.get("fresh_job_steps_s") or {}
        rows.append([
            fmt(s["partitions"]), f"{s['capture_in_sync_s']:.0f} s",
            *[f"{steps[step]:.1f} s" if step in steps else "—" for step in STEPS],
            f"**{s['fresh_job_first_alert_s']:.1f} s**",
        ])  # fmt: skip
    return "\n\n".join([
        reproduce(result),
        "A job started on a new checkpoint once capture kept the cluster in sync, a partition "
        "taken offline as it started. Seconds from its start (its process launched) to each "
        "step its log marks, and to that partition's alert on the alerts topic; `capture in "
        "sync` is capture's own, from the daemons' start. — : a step the start did not take, or "
        "had not reached when the benchmark, having its alert, stopped it.",
        table(["partitions", "capture in sync", *STEPS, "its first alert"], rows),
    ])  # fmt: skip


if __name__ == "__main__":
    main()
