"""The Spark session of a zkcdc job: its Kafka and Avro jars, RocksDB state. (pyspark is
imported when a session starts: every `zkcdc` command loads this module.)"""

from __future__ import annotations

import atexit
import logging
import os
import shutil
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

import zkcdc
from zkcdc.ground.user_dirs import default_cache_dir
from zkcdc.streaming.errors import StreamingError
from zkcdc.streaming.job.class_archive import driver_options, ready_archive
from zkcdc.streaming.job.driver_jar import driver_jar, driver_jar_conf
from zkcdc.streaming.job.driver_jvm import (
    EXIT_ON_OUT_OF_MEMORY,
    WhileTheDriverRuns,
    launching_the_driver,
)
from zkcdc.streaming.job.spark_jars import pyspark_home, spark_jars


def package_zip(folder: Path | None = None) -> Path:
    """zkcdc's own Python packages as one zip, for executors on other machines: in `folder`,
    or else in one only this user can enter, removed when the process ends."""
    package = Path(zkcdc.__file__).parent  # followed through its links to capture/, streaming/
    if folder is None:
        folder = Path(tempfile.mkdtemp(prefix="zkcdc-py-"))
        atexit.register(shutil.rmtree, folder, True)
    out = folder / "zkcdc-py.zip"
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for here, dirs, files in sorted(os.walk(package, followlinks=True)):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for name in sorted(f for f in files if f.endswith(".py")):
                file = Path(here) / name
                archive.write(file, Path("zkcdc") / file.relative_to(package))
    return out


# Avro 1.12 (Spark 4's) reads through its "fast reader" unless told otherwise, and that reader's
# cache keeps every schema instance it meets, a weak key its own value holds (AVRO-3524,
# AVRO-4253). Spark's `from_avro` parses the schema anew in every task, so a live job's JVM
# kept ~17 MB more every minute, idle, until its heap ran out (a 512 MB driver within about
# half an hour). The plain reader keeps nothing.
AVRO_PLAIN_READER = "-Dorg.apache.avro.fastread=false"

# Delta Lake in a session: its SQL (MERGE, OPTIMIZE, VACUUM, time travel) and its catalog.
LAKE_CONF = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    # A table's log is read in this many tasks: Delta's default (50) is for clusters, and on
    # a local master each small table's snapshot cost ~50 tiny tasks.
    "spark.databricks.delta.snapshotPartitions": "2",
    # A task writes the files of up to this many table partitions (cluster, day) at once
    # instead of sorting its rows by partition first: a backfill ~40 % quicker (B10).
    "spark.sql.maxConcurrentOutputFileWriters": "16",
    # An event-log file (up to 64 MB before it rotates) read in several tasks, not one.
    "spark.sql.files.maxPartitionBytes": "16m",
    # VACUUM lists a table's folders in this many tasks: Spark's default (10,000) is for
    # clusters and object stores, and on a local master a small table's VACUUM took ~40 s.
    "spark.sql.sources.parallelPartitionDiscovery.parallelism": "16",
}


def session(
    master: str,
    app: str,
    shuffle_partitions: int = 1,
    driver_memory: str = "512m",
    *,
    lake: bool = False,
    conf: dict[str, str] | None = None,
) -> Any:
    """A SparkSession on `master` (local[*], local[2], spark://host:port). `driver_memory`:
    the driver JVM's heap, which in local mode runs the tasks too. `lake`: with Delta Lake.
    `conf`: Spark settings over zkcdc's own."""
    from pyspark.sql import SparkSession

    if os.environ.get("PYSPARK_GATEWAY_PORT"):
        # Launched by spark-submit (deploy/spark/submit.sh): its master, jars and properties
        # file rule; --master of the command line is not applied over them.
        return _started(SparkSession.builder.appName(app), master)
    # Executors must run the same Python as the driver (pandas UDFs, our packages).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    jar_files = spark_jars(lake=lake)
    jars = ",".join(str(p) for p in jar_files)
    # Built (once) only where they are used: a cluster master keeps Hadoop's classes.
    # A lake session maps the alert job's archive too: the connectors' and Delta's jars go to
    # Spark's own class loader (`spark.jars`), not to the class path a JVM checks an archive
    # against, so Spark's classes are shared and Delta's load as they did (~4 CPU-s and ~4 s
    # of a C1-only start saved).
    local = master.startswith("local")
    if local:
        # A local master's driver runs its tasks itself and serves no other host (its UI is
        # off): bound to loopback, it does not warn, at every start, that the host's name
        # resolves to loopback and another address is taken.
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    jar, archive = local_driver() if local else (None, None)
    driver_classes = driver_jar_conf(jar, master)
    builder = (
        SparkSession.builder.master(master)
        .appName(app)
        .config("spark.jars", jars)
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config(
            "spark.sql.streaming.stateStore.providerClass",
            "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
        )
        # A commit writes a changelog instead of a snapshot each micro-batch (quicker: B3).
        .config("spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled", "true")
        .config("spark.sql.session.timeZone", "UTC")
        # Hadoop applies its own umask (022) to checkpoint files: keep them from other users.
        .config("spark.hadoop.fs.permissions.umask-mode", "027")
        .config("spark.ui.enabled", "false")
        # No stage bars: a command's stderr is its JSON log lines (jvm_log_lines.py), and a
        # command that answers a question prints the answer alone.
        .config("spark.ui.showConsoleProgress", "false")
        # What Spark keeps of finished work for its UI, kept with the UI off too: a live job
        # runs a micro-batch a second, and at Spark's defaults (1,000 SQL executions, each
        # with its plan's text, which names the changes' Avro schema) an idle job's driver
        # held ~110 MB of its 512 MB heap for them after ten minutes.
        .config("spark.sql.ui.retainedExecutions", "20")
        .config("spark.ui.retainedJobs", "20")
        .config("spark.ui.retainedStages", "20")
        .config("spark.ui.retainedTasks", "1000")
        .config("spark.driver.memory", driver_memory)
        .config("spark.executor.memory", "512m")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        # Spark 4.2 asks this once for every field of every nested row a task builds (the Avro
        # reader's records), and unset its default reads the process environment each time:
        # a sixth of a lake backfill's CPU. False is that default outside Spark's own tests.
        .config("spark.sql.types.framework.enabled", "false")
    )
    if master.startswith("spark://"):
        builder = builder.config("spark.submit.pyFiles", str(package_zip()))
    ours = {**driver_classes, **(LAKE_CONF if lake else {})}
    # A driver out of heap exits rather than live on without the threads that ran out
    # (driver_jvm.py): the job then says so in one line instead of waiting forever.
    java_options = [
        EXIT_ON_OUT_OF_MEMORY,
        AVRO_PLAIN_READER,
        *([driver_options(archive)] if archive else []),
    ]
    ours["spark.driver.extraJavaOptions"] = " ".join(java_options)
    if not local:  # a cluster's executors decode too; their Java options stay the cluster's
        ours["spark.executorEnv.JAVA_TOOL_OPTIONS"] = AVRO_PLAIN_READER
    conf = conf or {}
    settings = {**ours, **conf}
    for key, sep in (("spark.driver.extraClassPath", os.pathsep),
                     ("spark.driver.extraJavaOptions", " "), ("spark.plugins", ",")):  # fmt: skip
        if ours.get(key) and key in conf:  # the caller's, and ours after it
            settings[key] = f"{conf[key]}{sep}{ours[key]}"
    for key, value in settings.items():
        builder = builder.config(key, value)
    return _started(builder, master)


def local_driver(wait: bool = False) -> tuple[Path | None, Path | None]:
    """What a local master's driver gets, built the first time: zkcdc's driver jar
    (driver_jar.py), and the archive of Spark's classes (class_archive.py) made on that class
    path (None while another process records it, unless `wait`)."""
    cache = default_cache_dir()
    jar = driver_jar(cache, pyspark_home() / "jars")
    # The key of the archive's file: a connector's new version records a new one.
    class_path = [*spark_jars(), *([jar] if jar else [])]
    return jar, ready_archive(cache, class_path, wait=wait)


def _started(builder: Any, master: str) -> Any:
    try:
        with launching_the_driver():
            spark = builder.getOrCreate()
    except Exception as exc:
        raise StreamingError(f"Spark did not start on {master}: {exc}") from exc
    spark.sparkContext.setLogLevel("WARN")
    quiet_state_server(spark)
    quiet_query_failures(spark)
    _quiet_accumulator_server(spark)
    callbacks = logging.getLogger("py4j.clientserver")
    if not any(isinstance(f, WhileTheDriverRuns) for f in callbacks.filters):  # one a process
        callbacks.addFilter(WhileTheDriverRuns(spark))
    return spark


def _quiet_accumulator_server(spark: Any) -> None:
    """PySpark's server of accumulator updates prints a traceback when the driver's connection
    to it drops: the driver ending under a job, which the job says in one line
    (driver_jvm.py)."""
    server = getattr(spark.sparkContext, "_accumulatorServer", None)
    if server is not None:
        server.handle_error = lambda request, client_address: None


# transformWithStateInPandas's state server (in the JVM that runs the task) logs a WARN for
# every map key a task asks for that its state does not hold. The sharded stage asks for each
# bucket a micro-batch touches, present or not yet written (shard_stage.py): a few hundred
# lines a minute in a live job's log, none of them a fault. Its errors still show.
STATE_SERVER_LOGGER = (
    "org.apache.spark.sql.execution.python.streaming.TransformWithStateInPySparkStateServer"
)


# Spark's state stores are maintained by a thread of their own every minute. One that runs
# while Spark stops finds no SparkEnv and logs a WARN with a Java stack trace ("SparkEnv not
# active, cannot do maintenance on StateStores"): nothing is lost, the stores are committed.
STATE_STORE_LOGGER = "org.apache.spark.sql.execution.streaming.state.StateStore"


def quiet_state_server(spark: Any) -> None:
    """The state server's log at ERROR in this JVM (a local master's tasks run in it; a
    cluster's executors keep their own log4j settings)."""
    _log_at(spark, STATE_SERVER_LOGGER, "ERROR")


def quiet_state_store_maintenance(spark: Any) -> None:
    """Before Spark's stop: the state stores' maintenance logs only errors from here on."""
    _log_at(spark, STATE_STORE_LOGGER, "ERROR")


# A streaming query that fails: Spark logs an ERROR with its whole Java stack (~70 lines), and
# Delta one (~200 lines) for each try of a lake's MERGE that failed, where the job says it
# itself, in one line: a warning when Kafka out of reach made it start the query again
# (query_failures.py), its error line when the failure ends it. (Spark 4.2 keeps the query's
# class in `runtime`, 4.0 beside it.)
QUERY_LOGGERS = (
    "org.apache.spark.sql.execution.streaming.runtime.MicroBatchExecution",
    "org.apache.spark.sql.execution.streaming.MicroBatchExecution",
    "org.apache.spark.sql.delta.commands.MergeIntoCommand",
)
# While a broker is down, Kafka's Java clients (the Kafka source's, on the driver and a local
# master's tasks) log a WARN at every try to reach it, hundreds a minute, and the source's
# offset reader a WARN with a Java stack at each of its tries: the job says the outage once a
# restart.
KAFKA_OUTAGE_LOGGERS = (
    "org.apache.kafka.clients.NetworkClient",
    "org.apache.spark.sql.kafka010.KafkaOffsetReaderAdmin",
    "org.apache.spark.sql.kafka010.KafkaOffsetReaderConsumer",
)


# A micro-batch longer than the trigger's interval: Spark logs a WARN ("Current batch is
# falling behind") for each. The alert job's trigger is how often it looks for records (100 ms),
# not a deadline, so nearly every micro-batch of a live job said it: 850 lines in B6's 20
# minutes beside the job's own 875 progress lines, which give each micro-batch's time.
TRIGGER_LOGGERS = (
    "org.apache.spark.sql.execution.streaming.runtime.ProcessingTimeExecutor",
    "org.apache.spark.sql.execution.streaming.ProcessingTimeExecutor",
)


# A task that fails (a damaged state store it cannot load, a source out of reach): the
# executor logs an ERROR with the whole Java stack, the task set a WARN with it again, a file
# sink's writer one more: ~400 lines for one damaged checkpoint file, before the job's own
# line that names the reason (query_failures.py). The task set's one-line ERROR (a task failed
# N times; aborting) still shows.
TASK_FAILURE_LOGGERS = (
    "org.apache.spark.executor.Executor",
    "org.apache.spark.sql.execution.datasources.FileFormatWriter",
)
TASK_SET_LOGGER = "org.apache.spark.scheduler.TaskSetManager"


def quiet_query_failures(spark: Any) -> None:
    for logger in (*QUERY_LOGGERS, *TASK_FAILURE_LOGGERS):
        _log_at(spark, logger, "OFF")
    for logger in (*KAFKA_OUTAGE_LOGGERS, *TRIGGER_LOGGERS, TASK_SET_LOGGER):
        _log_at(spark, logger, "ERROR")


def _log_at(spark: Any, logger: str, level: str) -> None:
    """`logger` in the driver's JVM at log4j's `level` (ERROR, OFF...) from here on."""
    jvm = spark.sparkContext._jvm
    log4j = jvm.org.apache.logging.log4j
    log4j.core.config.Configurator.setLevel(logger, getattr(log4j.Level, level))
