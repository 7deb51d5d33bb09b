"""A job's Spark driver on a local master maps the class archive recorded for its class path
(the tests' set-up records it: conftest `_fill_caches`), with the lake's jars too, and says
nothing of it on the job's output. The same probe checks what the session keeps from growing
in a long-lived driver (spark_session.py): Avro read by its plain reader, whose caches do not
keep every schema instance Spark parses, and few finished executions kept for a UI."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from zkcdc.streaming.job.spark_session import local_driver

pytestmark = pytest.mark.integration

# A session as every zkcdc job starts one; the driver JVM's memory map, read from inside.
PROBE = """
import json, sys
from zkcdc.streaming.job.spark_session import local_driver, session
spark = session("local[1]", "class-archive-probe", lake=sys.argv[1] == "lake")
try:
    pid = spark._jvm.java.lang.ProcessHandle.current().pid()
    maps = open(f"/proc/{pid}/maps").read()
    archive = local_driver()[1]
    fast = spark._jvm.org.apache.avro.generic.GenericData.get().isFastReaderEnabled()
    kept = spark.conf.get("spark.sql.ui.retainedExecutions")
    print(json.dumps({"archive": str(archive), "mapped": str(archive) in maps,
                      "avro_fast_reader": fast, "executions_kept": kept}))
finally:
    spark.stop()
"""


@pytest.mark.parametrize("kind", ["alerts", "lake"])
def test_a_local_driver_maps_the_recorded_class_archive_quietly(kind: str) -> None:
    # Recorded by a worker's set-up, maybe still under way (a job would not wait; this does).
    assert local_driver(wait=True)[1] is not None, "no class archive could be recorded"
    run = subprocess.run([sys.executable, "-c", PROBE, kind], capture_output=True, text=True,
                         timeout=300, check=False)  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    (line,) = [line for line in run.stdout.splitlines() if line.startswith("{")]
    found = json.loads(line)
    assert found["archive"] != "None", "no archive recorded: " + run.stderr[-2000:]
    assert found["mapped"], found
    assert found["avro_fast_reader"] is False and found["executions_kept"] == "20", found
    assert "cds" not in run.stdout + run.stderr and "recording" not in run.stderr
