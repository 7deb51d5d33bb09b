"""The lake on real Delta tables on the local file system: the kept event log backfilled
(twice: the second adds nothing) and the same records through Kafka and the live alert job
give the same `changes`, `alerts` and `znodes` rows; `partition_states`, `broker_sessions`
and `controller_terms` are what the rules engine and the events say at every change;
`history state --at` is the rules engine's state at each moment; `timeline` shows a
partition's ISR changes and alerts; compaction keeps every row in fewer files; each bad input
is one line. One Spark session (in this process) for the module's questions; the commands'
own runs start theirs."""

from __future__ import annotations

import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from conftest import wait_until
from debian_packages import ensure_binary
from history_harness import (
    FIXTURE_LOG,
    assert_partition_states_are_the_engines,
    fixture_records,
    topic_of_the_kept_log,
    zkcdc,
)
from ui_harness import answers, free_port, wait_for_page

from zkcdc.ground.change_types import EventType
from zkcdc.ground.child_processes import stop
from zkcdc.ground.kafka_connection import KafkaConnection
from zkcdc.history.state_at import state_at
from zkcdc.streaming.job.change_source import KafkaInput, LogInput
from zkcdc.streaming.job.driver_jar import TASK_SQL_CONF
from zkcdc.streaming.job.spark_session import session
from zkcdc.streaming.lake import history_queries as queries
from zkcdc.streaming.lake.history_job import HistoryJobOptions, run_history, write_alerts
from zkcdc.streaming.lake.lake_tables import VERSION_PROPERTY, LakeError, Table, table_uri
from zkcdc.streaming.lake.upkeep import compact
from zkcdc.streaming.rules.alert_engine import AlertEngine

pytestmark = pytest.mark.integration
SHOTS = Path(os.environ.get("ZKCDC_TEST_ARTIFACTS", "test-artifacts")) / "ui"


@pytest.fixture(scope="module")
def spark() -> Any:
    spark = session("local[2]", "zkcdc-history-tests", shuffle_partitions=2, lake=True)
    yield spark
    spark.stop()


@pytest.fixture(scope="module")
def backfilled(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> str:
    """The kept log backfilled into a lake by `zkcdc replay --lake`, then once more by the
    same steps in this process (its changes, and the alerts the rules give over it), which
    spares the suite a second Spark of the rules and a second of the lake."""
    work = tmp_path_factory.mktemp("lake")
    lake = str(work / "lake")
    run = zkcdc("replay", str(FIXTURE_LOG), "--lake", lake)
    assert run.returncode == 0, run.stderr[-3000:]
    again = HistoryJobOptions(source=LogInput(FIXTURE_LOG), lake=lake,
                              checkpoint=work / "again", available_now=True)  # fmt: skip
    run_history(again, threading.Event(), spark)
    write_alerts(spark, lake, FIXTURE_LOG.parent / "event_log_v1.alerts.jsonl")
    return lake


def rows_of(spark: Any, lake: str, table: Table = Table.CHANGES) -> list[str]:
    """A table's rows as sorted JSON texts (the znodes' bytes too): a multiset to compare."""
    return sorted(json_rows(queries.read_table(spark, lake, table)))


def json_rows(frame: Any) -> list[str]:
    """Each row as Spark's JSON text (a null field left out). DataFrame.toJSON warns that it
    will return a DataFrame rather than an RDD."""
    from pyspark.sql import functions as F

    return [row[0] for row in frame.select(F.to_json(F.struct(*frame.columns))).collect()]


def kept_alerts() -> list[str]:
    """The alerts the kept log's own release raised over it, as sorted JSON texts."""
    lines = (FIXTURE_LOG.parent / "event_log_v1.alerts.jsonl").read_text().splitlines()
    return sorted(json.dumps(json.loads(line), sort_keys=True) for line in lines)


def alerts_in(spark: Any, lake: str) -> list[str]:
    frame = queries.read_table(spark, lake, Table.ALERTS).drop("at_ms", "day")
    # Spark's JSON leaves a null field out; the sinks write it.
    rows = [{"ended_ms": None, **json.loads(row)} for row in json_rows(frame)]
    return sorted(json.dumps(row, sort_keys=True) for row in rows)


def test_a_second_backfill_adds_nothing_and_every_seq_is_there_once(
    spark: Any, backfilled: str
) -> None:
    seqs = [r["seq"] for r in fixture_records()]
    got = queries.run_sql(spark, backfilled, "SELECT seq FROM changes ORDER BY seq").collect()
    assert [r["seq"] for r in got] == seqs
    one = queries.run_sql(
        spark, backfilled,
        "SELECT op, path, ts_ms, events[0].type AS type, after.data AS data FROM changes "
        "WHERE seq = 52",
    ).collect()[0]  # fmt: skip
    record = next(r for r in fixture_records() if r["seq"] == 52)
    assert (one["op"], one["path"], one["ts_ms"], one["type"]) == (
        record["op"], record["path"], record["ts_ms"], record["events"][0]["type"],
    )  # fmt: skip
    assert bytes(one["data"]) == record["after"]["data"]  # the znode's raw bytes are kept
    assert alerts_in(spark, backfilled) == kept_alerts()  # and the rules' alerts, once each


def test_through_kafka_gives_the_backfills_rows(
    spark: Any, backfilled: str, shared_cluster: Any, tmp_path: Path
) -> None:
    topic = topic_of_the_kept_log(shared_cluster.bootstrap_servers, "live", tmp_path)
    # The live alert job over the topic publishes its alerts, as in production.
    alerts_topic = f"{topic}.alerts"
    job = zkcdc("stream", "alerts", "--bootstrap-servers", shared_cluster.bootstrap_servers,
                "--topic", topic, "--alerts-topic", alerts_topic, "--no-state", "--available-now",
                "--checkpoint", str(tmp_path / "alerts-checkpoint"))  # fmt: skip
    assert job.returncode == 0, job.stderr[-3000:]
    lake = str(tmp_path / "lake")
    options = HistoryJobOptions(
        source=KafkaInput(KafkaConnection(bootstrap_servers=shared_cluster.bootstrap_servers),
                          topic, max_records_per_batch=150),
        lake=lake, checkpoint=tmp_path / "checkpoint", available_now=True,
        alerts_topic=alerts_topic,
    )  # fmt: skip
    run_history(options, threading.Event(), spark)
    assert rows_of(spark, lake) == rows_of(spark, backfilled)
    assert rows_of(spark, lake, Table.ALERTS) == rows_of(spark, backfilled, Table.ALERTS)
    # Kept by a MERGE a micro-batch live, by one append in the backfill: the same versions.
    assert rows_of(spark, lake, Table.ZNODES) == rows_of(spark, backfilled, Table.ZNODES)


def engine_state(records: list[dict[str, Any]], at_ms: int) -> dict[str, Any]:
    engine = AlertEngine(records[0]["cluster"])
    for record in records:
        if record["ts_ms"] <= at_ms:
            engine.process(record)
    return {key: value for key, value in engine.take_state() if value is not None}


def test_state_at_five_moments_is_the_rules_engines_state_then(spark: Any, backfilled: str) -> None:
    records = fixture_records()
    first, last = records[0]["ts_ms"], records[-1]["ts_ms"]
    for share in (0.02, 0.3, 0.5, 0.7, 1.0):  # before, during and after the staged incidents
        at = first + int((last - first) * share)
        assert state_at(spark, backfilled, "fixture", at) == engine_state(records, at), share


def test_partition_states_are_the_rules_engines_partitions_at_every_change(
    spark: Any, backfilled: str
) -> None:
    rows = [
        r.asDict()
        for r in queries.run_sql(spark, backfilled, "SELECT * FROM partition_states").collect()
    ]
    assert_partition_states_are_the_engines(rows, fixture_records())
    assert {r["under_replicated"] for r in rows} == {True, False}


def test_broker_sessions_and_controller_terms_are_the_registrations_and_elections(
    spark: Any, backfilled: str
) -> None:
    sessions, terms, open_sessions, term = [], [], {}, None
    for record in fixture_records():
        for e in record["events"]:
            kind = e["type"]
            if kind == EventType.BROKER_REGISTERED.value:
                open_sessions[e["broker_id"]] = (e["broker_id"], e["broker_epoch"], record["seq"])
            elif kind == EventType.BROKER_DEREGISTERED.value:
                sessions.append((*open_sessions.pop(e["broker_id"]), record["seq"]))
            elif kind == EventType.CONTROLLER_ELECTED.value:
                term = [e["broker_id"], None, record["seq"]]
            elif kind == EventType.CONTROLLER_EPOCH_CHANGED.value and term and term[1] is None:
                term[1] = e["epoch_after"]
            elif kind == EventType.CONTROLLER_RESIGNED.value and term:
                terms.append((*term, record["seq"]))
                term = None
    sessions += [(*s, None) for s in open_sessions.values()]
    assert len(sessions) > 3 and len(terms) > 3, "the kept log has restarts and failovers"
    got = queries.run_sql(
        spark,
        backfilled,
        "SELECT broker, epoch, registered_seq, unregistered_seq FROM broker_sessions",
    ).collect()
    assert sorted(tuple(r) for r in got) == sorted(sessions)
    got = queries.run_sql(
        spark, backfilled, "SELECT broker, epoch, from_seq, to_seq FROM controller_terms"
    ).collect()
    assert sorted(tuple(r) for r in got) == sorted(tuple(t) for t in terms)


def test_timeline_shows_each_isr_shrink_and_expand_of_a_partition(
    spark: Any, backfilled: str
) -> None:
    kinds = {EventType.ISR_SHRUNK.value, EventType.ISR_EXPANDED.value}
    wanted = [
        (r["seq"], e["type"]) for r in fixture_records()
        if r["op"] in ("CREATE", "UPDATE", "DELETE")
        for e in r["events"]
        if e["type"] in kinds and e.get("topic") == "sim-0000" and e.get("partition") == 0
    ]  # fmt: skip
    assert wanted, "the kept log has ISR changes of sim-0000/0"
    entries = queries.timeline(spark, backfilled, queries.Subject.parse(("sim-0000/0",)))
    assert [(e.seq, e.event["type"]) for e in entries if e.event["type"] in kinds] == wanted
    # With the alerts of the partition among them, each after the change that raised it.
    raised = [e for e in entries if e.seq is None]
    expected = [json.loads(a) for a in kept_alerts() if json.loads(a)["entity"] == "sim-0000/0"]
    assert len(raised) == len(expected) > 0
    first = next(e for e in entries if e.event["type"] == "ALERT FIRING")
    before = [e for e in entries if e.seq is not None and e.ts_ms <= first.ts_ms]
    assert before and entries.index(before[-1]) < entries.index(first)


def test_the_commands_answer_and_bad_input_is_one_line(backfilled: str, tmp_path: Path) -> None:
    records = fixture_records()
    at = str(records[len(records) // 2]["ts_ms"])
    shown = zkcdc("history", "state", "--lake", backfilled, "--at", at, "--json")
    assert shown.returncode == 0, shown.stderr[-3000:]
    got = {json.dumps(json.loads(line), sort_keys=True) for line in shown.stdout.splitlines()}
    want = {json.dumps(v, sort_keys=True) for v in engine_state(records, int(at)).values()}
    assert got == want
    before = zkcdc("history", "state", "--lake", backfilled, "--at", "2020-01-01T00:00:00Z")
    assert before.returncode == 1
    assert before.stderr.strip().splitlines()[-1].startswith(
        "zkcdc: error: fixture's history in the lake begins at"
    )  # fmt: skip
    sql = zkcdc("history", "sql", "SELECT count(*) AS n FROM changes", "--lake", backfilled,
                "--json")  # fmt: skip
    assert sql.returncode == 0 and json.loads(sql.stdout) == {"n": len(records)}, sql.stderr
    unwritable = zkcdc("replay", str(FIXTURE_LOG), "--lake", "/proc/zkcdc-lake")
    assert unwritable.returncode == 1
    assert unwritable.stderr.strip().splitlines()[-1].startswith(
        "zkcdc: error: cannot write the lake at /proc/zkcdc-lake:"
    )  # fmt: skip


def test_a_table_written_by_a_newer_zkcdc_is_refused(spark: Any, tmp_path: Path) -> None:
    lake = str(tmp_path / "lake")
    run_history(
        HistoryJobOptions(source=LogInput(FIXTURE_LOG), lake=lake,
                          checkpoint=tmp_path / "checkpoint", available_now=True),
        threading.Event(), spark,
    )  # fmt: skip
    uri = table_uri(lake, Table.CHANGES)
    spark.sql(f"ALTER TABLE delta.`{uri}` SET TBLPROPERTIES ('{VERSION_PROPERTY}' = '99')")
    with pytest.raises(LakeError, match=r"written by a newer zkcdc \(lake version 99"):
        queries.read_table(spark, lake, Table.CHANGES)
    with pytest.raises(LakeError, match="written by a newer zkcdc"):
        run_history(
            HistoryJobOptions(source=LogInput(FIXTURE_LOG), lake=lake,
                              checkpoint=tmp_path / "checkpoint-2", available_now=True),
            threading.Event(), spark,
        )  # fmt: skip


def test_each_file_a_batch_wrote_is_sorted_by_what_a_timeline_filters_on(backfilled: str) -> None:
    """A day not yet compacted: Parquet's page statistics skip the other partitions of a file
    only if its rows are in order of partition (nulls first, as Spark sorts)."""
    import pyarrow.parquet as pq

    files = sorted(Path(backfilled, "changes").rglob("*.parquet"))
    assert files
    for file in files:
        rows = pq.read_table(file, columns=["partition"]).to_pylist()
        keys = [(r["partition"] is not None, r["partition"] or 0) for r in rows]
        assert keys == sorted(keys), file


def test_delta_keeps_statistics_of_the_columns_readers_filter_on(backfilled: str) -> None:
    """Each data file's min/max in the table's log: of the columns a question filters on, not
    of the first 32 (the znode's bytes among them)."""
    for table in (Table.CHANGES, Table.ZNODES):
        log = Path(table_uri(backfilled, table), "_delta_log")
        actions = [json.loads(line) for f in sorted(log.glob("*.json")) for line in f.open()]
        adds = [a["add"] for a in actions if "add" in a]
        assert adds, table
        for add in adds:
            stats = json.loads(add["stats"])
            assert set(stats["minValues"]) <= set(table.statistics_on), (table, stats)
            assert {"seq", "from_seq"} & set(stats["minValues"]), (table, stats)


def test_a_task_asks_one_sql_conf_of_its_own_settings(spark: Any) -> None:
    """The driver jar's plugin (driver_jar.py), loaded by a local session, gives a task one SQL
    configuration built from that task's own settings, kept while it runs and let go when it
    ends: played here on this thread as Spark's executor plays a task."""
    jvm = spark._jvm
    assert spark.sparkContext.getConf().get("spark.plugins") == TASK_SQL_CONF
    plugin = getattr(jvm, TASK_SQL_CONF)().executorPlugin()
    plugin.init(None, jvm.java.util.HashMap())
    tasks = getattr(jvm.org.apache.spark, "TaskContext$").__getattr__("MODULE$")
    confs = getattr(jvm.org.apache.spark.sql.internal, "SQLConf$").__getattr__("MODULE$")
    same = jvm.java.lang.System.identityHashCode
    task = tasks.empty()
    task.getLocalProperties().setProperty("spark.sql.shuffle.partitions", "7")
    tasks.setTaskContext(task)
    try:
        assert same(confs.get()) != same(confs.get())  # Spark's own: built at each question
        plugin.onTaskStart()
        held = confs.get()
        assert same(held) == same(confs.get())
        assert held.numShufflePartitions() == 7 and not held.typesFrameworkEnabled()
        plugin.onTaskSucceeded()
        assert same(confs.get()) != same(held)
        plugin.onTaskStart()
        plugin.onTaskFailed(None)
        assert same(confs.get()) != same(confs.get())
    finally:
        tasks.unset()


def test_compaction_keeps_every_row_in_fewer_files(
    spark: Any, backfilled: str, tmp_path: Path
) -> None:
    lake = tmp_path / "lake"
    shutil.copytree(backfilled, lake)
    changes = table_uri(str(lake), Table.CHANGES)
    # A live job's trickle, in short: the table's rows spread over eight small files.
    spark.read.format("delta").load(changes).repartition(8).write.format("delta").mode(
        "overwrite"
    ).save(changes)
    before = {table: rows_of(spark, str(lake), table) for table in (Table.CHANGES, Table.ALERTS)}
    done = {t.table: t for t in compact(spark, str(lake), retain_hours=0)}
    assert set(done) == {Table.CHANGES, Table.ALERTS, Table.ZNODES}
    assert done[Table.CHANGES].files_before == 8
    assert all(t.files_after == 1 for t in done.values()), done
    assert {table: rows_of(spark, str(lake), table) for table in before} == before
    parquet = list((lake / "changes").rglob("*.parquet"))
    assert len(parquet) == 1  # vacuumed: the files no version within 0 hours needs are gone


def test_the_page_as_of_a_past_moment_shows_the_broker_then_down_and_its_partitions(
    spark: Any, backfilled: str, tmp_path: Path
) -> None:
    from playwright.sync_api import sync_playwright

    def run_sql(sql: str) -> list[Any]:
        return queries.run_sql(spark, backfilled, sql).collect()

    # A moment in the middle of a broker's absence, between two of its sessions.
    sessions = run_sql("SELECT broker, registered_ms, unregistered_ms FROM broker_sessions "
                       "ORDER BY broker, registered_ms")  # fmt: skip
    gaps = [(b["registered_ms"] - a["unregistered_ms"], a["broker"], a["unregistered_ms"])
            for a, b in itertools.pairwise(sessions)
            if a["broker"] == b["broker"] and a["unregistered_ms"] is not None]  # fmt: skip
    gap, down, since = max(gaps)
    assert gap > 2000, "the kept log has a broker away for seconds"
    at = since + gap // 2
    up = {r["broker"] for r in run_sql(
        f"SELECT broker FROM broker_sessions WHERE registered_ms <= {at} "
        f"AND (unregistered_ms IS NULL OR unregistered_ms > {at})")}  # fmt: skip
    not_in_sync = {f"{r['topic']}/{r['partition']}" for r in run_sql(
        f"SELECT topic, partition FROM partition_states WHERE (under_replicated OR offline) "
        f"AND valid_from_ms <= {at} AND (valid_to_ms IS NULL OR valid_to_ms > {at})")}  # fmt: skip
    assert down not in up and not_in_sync, "a broker down then, and partitions not in sync"

    port = free_port()
    with (tmp_path / "ui.log").open("wb") as log:
        # Spark's settings as a user with a lake elsewhere gives them (one core is enough here).
        ui = subprocess.Popen([sys.executable, "-m", "zkcdc", "ui", "--lake", backfilled,
                               "--master", "local[1]", "--driver-memory", "768m",
                               "--port", str(port)], stdout=log, stderr=subprocess.STDOUT)  # fmt: skip
        SHOTS.mkdir(parents=True, exist_ok=True)
        try:
            with sync_playwright() as driver:
                chromium = ensure_binary("chromium", "chromium")
                browser = driver.chromium.launch(executable_path=str(chromium),
                                                 args=["--no-sandbox"])  # fmt: skip
                page = browser.new_page(viewport={"width": 1500, "height": 1000})
                refused: list[str] = []
                page.on("console", lambda m: refused.append(m.text)
                        if "Content Security Policy" in m.text else None)  # fmt: skip
                wait_until(lambda: answers(port) or ui.poll() is not None, 120,
                           what="the ui serving")  # fmt: skip
                assert ui.poll() is None, (tmp_path / "ui.log").read_text()[-3000:]
                page.goto(f"http://127.0.0.1:{port}/#t={at}")
                wait_for_page(page, "(t) => document.body.dataset.t === String(t)", at,
                              timeout_s=120, what="the moment shown")  # fmt: skip
                statuses = {
                    int(card.get_attribute("data-broker") or -1): card.get_attribute("data-status")
                    for card in page.locator("#brokers .broker").all()
                }
                assert statuses[down] == "down"
                assert {b for b, s in statuses.items() if s == "up"} == up
                rows = page.locator("#problem-partitions tbody tr[data-partition]").all()
                assert {r.get_attribute("data-partition") for r in rows} == not_in_sync
                assert page.locator("#mode").inner_text() == "as of"
                page.screenshot(path=str(SHOTS / "lake-as-of.png"), full_page=True)
                # "next alert" moves to the next alert's moment, and the page follows.
                page.click("#next-alert")
                wait_for_page(page, "(t) => Number(document.body.dataset.t) > t", at,
                              timeout_s=120, what="the next alert's moment")  # fmt: skip
                # A moment before the history: said on the page in one line.
                page.evaluate("window.zkcdcSeek(5)")
                page.wait_for_selector("#status:has-text('history in the lake begins at')",
                                       timeout=60_000)  # fmt: skip
                assert refused == [], refused
                browser.close()
        finally:
            stop(ui, 10)
    assert ui.returncode in (0, -signal.SIGTERM), (tmp_path / "ui.log").read_text()[-3000:]
