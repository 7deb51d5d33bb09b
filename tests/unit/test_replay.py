"""The pure parts of `zkcdc replay`: order across clusters, pacing, the acknowledged prefix a
resume starts from, damaged logs made readable, and bad input as one-line errors."""

from __future__ import annotations

from pathlib import Path

import fastavro
from click.testing import CliRunner

from zkcdc.capture.delivery.event_log import EventLogWriter, log_files, read_records, scan_blocks
from zkcdc.capture.records import ChangeRecord, Znode
from zkcdc.cli import main
from zkcdc.ground.change_types import Op
from zkcdc.replay.alerts_replay import readable_copy
from zkcdc.replay.pacing import Pacer, merged


def rec(cluster: str, seq: int, ts: int, captured: int | None = None) -> dict:
    return {"cluster": cluster, "seq": seq, "ts_ms": ts, "captured_ms": captured or ts}


def test_clusters_merge_by_event_time_and_each_keeps_its_seq_order():
    a = [rec("a", 1, 100), rec("a", 2, 300), rec("a", 3, 250), rec("a", 4, 400)]
    b = [rec("b", 1, 200), rec("b", 2, 260)]
    out = [(r["cluster"], r["seq"]) for r in merged([iter(a), iter(b)])]
    assert out == [("a", 1), ("b", 1), ("b", 2), ("a", 2), ("a", 3), ("a", 4)]


def test_the_pacer_holds_records_to_their_event_time_scaled_by_speed():
    clock = [0.0]
    slept = []

    def sleep(s: float) -> None:
        slept.append(round(s, 3))
        clock[0] += s

    pacer = Pacer(10.0, lambda: clock[0], sleep)
    for ts in (1_000, 1_000, 3_000, 2_000, 11_000):
        pacer.wait_for(ts)
    assert slept == [0.2, 0.8]  # 2 s and 10 s of event time at 10x; never back in time
    fast = Pacer(0.0, lambda: clock[0], sleep)
    fast.wait_for(1)
    fast.wait_for(10**9)
    assert len(slept) == 2


def record(seq: int) -> dict:
    return ChangeRecord("c1", seq, Op.UPDATE, f"/x{seq}", None, Znode(b"v" * 200), None, seq,
                        seq).to_avro()  # fmt: skip


def test_a_damaged_block_is_found_and_named_and_the_blocks_before_and_after_it_copied(tmp_path):
    log = tmp_path / "log"
    writer = EventLogWriter(log, "c1", now=lambda: 0.0)
    for block in range(5):
        writer.append([record(block * 10 + i) for i in range(10)])
    writer.close()
    (file,) = log_files(log)
    data = file.read_bytes()
    with file.open("rb") as stream:
        blocks_start = next(iter(fastavro.block_reader(stream))).offset
    middle = blocks_start + (len(data) - blocks_start) // 2
    file.write_bytes(data[:middle] + data[middle + 20 :])  # bytes cut from the middle block
    (damage,) = scan_blocks(log).damaged
    assert damage.file == file and 0 < damage.block < 5
    copy = readable_copy(log, [damage], tmp_path / "copy")
    seqs = [r["seq"] for r in read_records(copy)]
    # Only the damaged block's ten records are missing: reading went on after it.
    lost = set(range(damage.block * 10, damage.block * 10 + 10))
    assert seqs == [s for s in range(50) if s not in lost]


def test_a_replay_runs_one_group_unless_a_cluster_names_too_many_znodes(tmp_path, monkeypatch):
    from zkcdc.replay import alerts_replay

    monkeypatch.setattr(alerts_replay, "ONE_GROUP_ZNODES", 4)

    def log_of(name: str, paths: dict[str, list[str]]) -> Path:
        log = tmp_path / name
        for cluster, named in paths.items():
            writer = EventLogWriter(log / cluster, cluster, now=lambda: 0.0)
            writer.append([{**record(seq), "cluster": cluster, "path": path}
                           for seq, path in enumerate(named)])  # fmt: skip
            writer.close()
        return log

    # Versions of the same znode count once, and each cluster on its own.
    at_limit = {"a": ["/p1", "/p2", "/p1", "/p3", "/p4", "/p4"], "b": ["/p1", "/p5", "/p6"]}
    layout = alerts_replay.readable_log(log_of("small", at_limit), tmp_path, print).layout
    assert layout == 0  # one group per cluster
    over = {**at_limit, "b": ["/q1", "/q2", "/q3", "/q4", "/q5"]}
    assert alerts_replay.readable_log(log_of("large", over), tmp_path, print).layout is None
    # A log of an older schema version is not split to count its znodes: the sharded default.
    old = Path(__file__).parents[1] / "fixtures" / "event_log_v1"
    assert alerts_replay.readable_log(old, tmp_path, print).layout is None
    assert scan_blocks(old, count_paths=10).paths is None
    assert scan_blocks(log_of("counted", over), count_paths=3).paths == {"a": 3, "b": 3}
    assert scan_blocks(log_of("uncounted", over)).paths is None


def test_a_bad_rule_of_a_backfill_is_one_line_before_spark_starts(tmp_path, monkeypatch):
    from zkcdc.replay import lake_replay

    def no_spark(*_: object) -> None:
        raise AssertionError("Spark started")

    monkeypatch.setattr(lake_replay, "lake_session", no_spark)
    log = Path(__file__).parents[1] / "fixtures" / "event_log_v1"
    lake = str(tmp_path / "lake")
    for rule, message in (("nope=1", "unknown rule setting 'nope'"),
                          ("broker_down_for_ms=abc", "needs a number")):  # fmt: skip
        result = CliRunner().invoke(main, ["replay", str(log), "--lake", lake, "--rule", rule])
        assert result.exit_code == 1, result.output
        assert message in result.output and "Traceback" not in result.output, result.output


def test_bad_replay_options_are_one_line_errors(tmp_path):
    runner = CliRunner()
    cases = [
        ([str(tmp_path)], "give one of --bootstrap-servers"),
        ([str(tmp_path), "--alerts-out", "a", "--bootstrap-servers", "b"], "give one of"),
        ([str(tmp_path), "--alerts-out", "a", "--lake", "l"], "give one of"),
        ([str(tmp_path), "--bootstrap-servers", "b", "--speed", "-1"], "--speed must be"),
        ([str(tmp_path), "--bootstrap-servers", "b", "--state-out", "s"], "--state-out goes"),
        ([str(tmp_path), "--bootstrap-servers", "b"], "no event log files"),
    ]
    for args, message in cases:
        result = runner.invoke(main, ["replay", *args])
        assert result.exit_code == 1, (args, result.output)
        assert message in result.output and "Traceback" not in result.output
