"""A ZooKeeper outage past the daemons' sessions, on a ZooKeeper server of the test's own frozen
with SIGSTOP (as a stalled host or a rolling restart would leave it): the daemons step down,
campaign again by themselves and go on; none exits, the stream stays contiguous."""

from __future__ import annotations

import re
import signal
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from conftest import wait_until
from kazoo.client import KazooClient
from ui_harness import free_port
from zookeeper_servers import ZookeeperServer, zookeeper_server

from zkcdc.capture.delivery.event_log import read_records
from zkcdc.stack.probes import four_letter_word

pytestmark = pytest.mark.integration

SESSION_S = 4  # ZooKeeper's least session with its default tickTime (2 x 2 s)
ARGS = ["--cluster", "c1", "--session-timeout-s", str(SESSION_S), "--heartbeat-s", "0.2"]


@contextmanager
def _zookeeper(tmp_path: Path) -> Iterator[tuple[ZookeeperServer, KazooClient]]:
    with zookeeper_server("kafka-3.8.4", tmp_path / "zk") as server:
        client = KazooClient(server.hosts)
        client.start(30)
        client.create("/c/brokers/ids", b"", makepath=True)
        try:
            yield server, client
        finally:
            client.stop()
            client.close()


def _sessions(server: ZookeeperServer) -> set[str]:
    """The session ids the server tracks (its `dump` four-letter word)."""
    host, port = server.hosts.split(",")[0].rsplit(":", 1)
    answer = four_letter_word(host, int(port), "dump", timeout_s=5)
    assert answer is not None, f"ZooKeeper at {host}:{port} did not answer `dump`"
    # 0x0: a connection without a session yet, such as this one.
    return set(re.findall(r"0x[0-9a-f]+", answer)) - {"0x0"}


def _frozen_past_the_sessions(
    server: ZookeeperServer, client: KazooClient, daemons: list[Any]
) -> None:
    """ZooKeeper frozen for three sessions' time, and the daemons' sessions expired when it is
    back. A frozen server does not expire them by itself: resumed, it may take a client's
    reconnect before its expirer runs, and the session lives on (seen in the suite). So the daemons
    are held while the server resumes, until it has expired their sessions."""
    theirs = _sessions(server) - {hex(client.client_id[0])}
    server.process.send_signal(signal.SIGSTOP)
    try:
        time.sleep(3 * SESSION_S)  # fixed wait: the outage must outlast every session
    finally:
        for daemon in daemons:
            daemon.process.send_signal(signal.SIGSTOP)
        server.process.send_signal(signal.SIGCONT)
    try:
        wait_until(lambda: not (_sessions(server) & theirs), 30, what="the sessions expired")
    finally:
        for daemon in daemons:
            daemon.process.send_signal(signal.SIGCONT)


def _terms(daemon: Any) -> int:
    return sum(line.get("event") == "capturing" for line in daemon.log_lines())


def _role(port: int) -> str:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/livez", timeout=3) as answer:
            return str(answer.read().decode().strip())
    except (urllib.error.URLError, OSError):
        return "no answer"


def _contiguous_once(records: list[dict[str, Any]]) -> None:
    """The stream of cluster c1: seq 1..n, each once, one content per seq."""
    seqs = Counter(r["seq"] for r in records if r["cluster"] == "c1")
    assert sorted(seqs) == list(range(1, len(seqs) + 1)), sorted(seqs)[-20:]
    twice = {seq: n for seq, n in seqs.items() if n > 1}
    assert not twice, f"seqs on the topic more than once: {sorted(twice)[:20]}"


def test_a_single_daemon_rides_out_zookeeper_frozen_past_its_session_and_captures_what_follows(
    start_capture: Callable[..., Any], changes_topic: Any, tmp_path: Path
) -> None:
    with _zookeeper(tmp_path) as (server, client):
        daemon = start_capture(server.hosts + "/c", *ARGS, "--event-log", str(tmp_path / "log"),
                               publish_to=changes_topic)  # fmt: skip
        daemon.wait_logged("in sync")
        client.create("/c/before", b"1")
        changes_topic.wait_for(lambda r: r["path"] == "/before", "the change before")

        _frozen_past_the_sessions(server, client, [daemon])
        daemon.wait_logged("stepped down")  # its session is gone: the term ended
        wait_until(lambda: _terms(daemon) == 2, 90, what="a second term")
        assert daemon.process.poll() is None, daemon.tail()
        client.retry(client.create, "/c/after", b"2")
        (after,) = changes_topic.wait_for(lambda r: r["path"] == "/after", "the change after")
        assert after["op"] == "CREATE" and after["after"]["data"] == b"2"

        assert daemon.stop() == 0, daemon.tail()
        changes_topic.read_to_end()
        _contiguous_once(changes_topic.records)
        logged = [r["seq"] for r in read_records(tmp_path / "log", lambda damage: None)]
        assert logged == list(range(1, len(logged) + 1)), logged[-20:]
        on_topic = {r["seq"] for r in changes_topic.records}
        assert set(logged) == on_topic, "the event log and the topic differ"


def test_of_two_daemons_through_zookeeper_frozen_past_their_sessions_exactly_one_is_active(
    start_capture: Callable[..., Any], changes_topic: Any, tmp_path: Path
) -> None:
    with _zookeeper(tmp_path) as (server, client):
        ports = [free_port(), free_port()]
        daemons = []
        for n, port in enumerate(ports):
            daemons.append(start_capture(
                server.hosts + "/c", *ARGS, "--metrics-port", str(port),
                "--event-log", str(tmp_path / f"log-{n}"), state_dir=tmp_path / f"state-{n}",
                publish_to=changes_topic,
            ))  # fmt: skip
            # The first is the active: started (and in sync) before the second.
            daemons[n].wait_logged("in sync" if n == 0 else "standby")
        client.create("/c/before", b"1")
        changes_topic.wait_for(lambda r: r["path"] == "/before", "the change before")

        _frozen_past_the_sessions(server, client, daemons)
        daemons[0].wait_logged("stepped down")
        wait_until(lambda: sorted(_role(p) for p in ports) == ["active", "standby"], 90,
                   what="one active, one standby")  # fmt: skip
        client.retry(client.create, "/c/after", b"2")
        changes_topic.wait_for(lambda r: r["path"] == "/after", "the change after")
        roles = [_role(p) for p in ports]
        assert sorted(roles) == ["active", "standby"], roles
        assert all(d.process.poll() is None for d in daemons), [d.tail() for d in daemons]
        # Memory's bounds, as a scrape sees them: the standby's prefetch on each, the
        # publisher's and the watch inbox on the active.
        for port, role in zip(ports, roles, strict=True):
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=3) as page:
                scraped = page.read().decode()
            bound = 'zkcdc_capture_queue_bound{queue="standby_prefetch_kbytes_per_partition"}'
            assert f"{bound} 2048.0" in scraped, scraped[-2000:]
            if role == "active":
                assert 'zkcdc_capture_queue_bound{queue="publisher_waiting_records"}' in scraped
                assert "\nzkcdc_capture_watch_inbox " in scraped

        for daemon in daemons:
            assert daemon.stop() == 0, daemon.tail()
        changes_topic.read_to_end()
        _contiguous_once(changes_topic.records)
        versions = Counter(
            (r["path"], r["after"]["czxid"], r["after"]["version"])
            for r in changes_topic.records if r["op"] in ("CREATE", "UPDATE")
        )  # fmt: skip
        assert not [k for k, n in versions.items() if n > 1], "a version recorded twice"
