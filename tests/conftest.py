"""Fixtures: one shared stack a session (and one per chain of broker-stopping tests), a ZooKeeper
chroot and topics of each test's own; how the suite runs in parallel is in TESTING.md."""

from __future__ import annotations

import atexit
import json
import os
import re
import shutil
import signal
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

# What provisions the tests' tools (Alertmanager, ZooKeeper servers, Debian's and Go's
# binaries), shared with the benchmarks: tests/support/, importable as top-level modules.
sys.path.insert(0, str(Path(__file__).resolve().parent / "support"))

import worker_groups
from alertmanager_server import Alertmanager, alertmanager_binary
from alerts_harness import AlertJob, AlertsTopic
from capture_harness import CaptureProcess, ChangesTopic
from cluster_backends import ClusterBackend, LocalBackend, make_backend
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic
from cpu_accounting import CpuPerTest
from hypothesis import settings as hypothesis_settings
from kazoo.client import KazooClient
from memory_peak import MemoryPeak

from zkcdc.ground import waiting
from zkcdc.ground.backoff import Backoff
from zkcdc.ground.child_processes import stop
from zkcdc.ground.topic_creation import create_topics, passes
from zkcdc.ground.user_dirs import default_cache_dir
from zkcdc.stack import probes
from zkcdc.stack.schema_registry import SchemaRegistry, registry_jar, start_registry

BACKEND_KEY = pytest.StashKey[ClusterBackend]()
CAPTURES_KEY = pytest.StashKey[list[CaptureProcess]]()
SHOWN_KEY = pytest.StashKey[bool]()
# Topics a test's fixtures made on a stack, deleted once the test's fixtures are all torn down.
TOPICS_KEY = pytest.StashKey[list[tuple[str, str]]]()


def drop_after_test(request: pytest.FixtureRequest, bootstrap: str, topic: str) -> None:
    """Deletes `topic` after the test: a stack's brokers replicate every partition they hold
    whether used or not, and the shared stack's did ~0.2 cores of idle work for 300 topics of
    six partitions (TESTING.md)."""
    request.node.stash.setdefault(TOPICS_KEY, []).append((bootstrap, topic))


def drop_topics(bootstrap: str, topics: list[str]) -> None:
    """Best effort, bounded: a test that stopped brokers may leave none to ask."""
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 2})
    futures = admin.delete_topics(topics, operation_timeout=20, request_timeout=25)
    for topic, future in futures.items():
        try:
            future.result(timeout=30)
        except Exception as exc:  # hygiene, not the test's verdict
            gone = isinstance(exc, KafkaException) and (
                exc.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART
            )
            if not gone:
                print(f"topic {topic} not deleted after the test: {exc!r}")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    try:
        return (yield)  # the test's fixtures torn down: nothing writes to its topics now
    finally:
        by_stack: dict[str, list[str]] = {}
        for bootstrap, topic in item.stash.get(TOPICS_KEY, []):
            by_stack.setdefault(bootstrap, []).append(topic)
        for bootstrap, topics in by_stack.items():
            drop_topics(bootstrap, topics)


# Fuzzing: a bounded number of examples in `make test`, many more in `make fuzz`
# (ZKCDC_TEST_FUZZ=long). No example database in the tree: each run draws afresh.
# No per-example deadline: on a loaded 2-core machine one slow example is not a failure (speed
# is the benchmarks' to check, never a test's).
hypothesis_settings.register_profile("bounded", max_examples=300, database=None, deadline=None)
hypothesis_settings.register_profile("long", max_examples=20_000, database=None, deadline=None)
hypothesis_settings.load_profile(
    "long" if os.environ.get("ZKCDC_TEST_FUZZ") == "long" else "bounded"
)


def worker_slot() -> tuple[int, int]:
    """(this xdist worker's index, how many workers): (0, 1) when the suite runs in one process."""
    name = os.environ.get("PYTEST_XDIST_WORKER", "")
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1)
    return (int(name[2:]) if name.startswith("gw") and name[2:].isdigit() else 0), count


# Workers start servers side by side (each its own stack): each looks for free ports in a range
# of its own, so two never pick the same port in the moment between the probe and the bind.
_index, _count = worker_slot()
if _count > 1:
    _span = (32000 - 10000) // _count
    os.environ["ZKCDC_PORT_RANGE"] = f"{10000 + _index * _span}-{10000 + (_index + 1) * _span}"

# The tests' JVMs (the stacks, Spark's driver, Kafka's tools) compile with C1 only: most of a
# short-lived JVM's CPU is the C2 compiler's, and two cores are shared by the whole suite. Set
# through the settings users have (ZKCDC_STACK_JAVA_OPTIONS, Spark's SPARK_SUBMIT_OPTS).
TEST_JAVA_OPTIONS = ("-XX:TieredStopAtLevel=1",)
# Spark in the tests: its SQL run interpreted (no Java code generated and compiled for each
# query: most of a small job's CPU), executors C1-only too. Given as the driver's system
# properties, which Spark takes as its defaults (a job's own settings still win over them), not
# as a spark-defaults.conf: a conf folder on the driver's class path would keep it from
# mapping its class archive (class_archive.py). The executors' as the options Spark puts before
# a job's own (`defaultJavaOptions`): deploy/spark's file sets `extraJavaOptions`, which would
# replace them, and its two executors then compiled with C2 (~25 CPU-s of the standalone test).
TEST_SPARK_DEFAULTS = (
    "-Dspark.sql.codegen.wholeStage=false",
    "-Dspark.sql.codegen.factoryMode=NO_CODEGEN",
    f"-Dspark.executor.defaultJavaOptions={TEST_JAVA_OPTIONS[0]}",
)
os.environ.setdefault("ZKCDC_STACK_JAVA_OPTIONS", json.dumps(list(TEST_JAVA_OPTIONS)))
# Capture's heartbeat every 5 s, not 1 (a setting users have; a test that times heartbeats sets
# its own `--heartbeat-s`): each heartbeat is a transaction on the brokers and a micro-batch in
# every alert job reading the topic. An alert job over a captured idle cluster used 0.37 of a
# core at 2 s and 0.15 at 10 s (~0.56 CPU-s a heartbeat's micro-batch; TESTING.md). For-duration
# alerts fire on the next record after their duration: up to one heartbeat later.
os.environ.setdefault("ZKCDC_HEARTBEAT_S", "5")
os.environ.setdefault("SPARK_DAEMON_JAVA_OPTS", " ".join(TEST_JAVA_OPTIONS))  # standalone's
_submit_opts = os.environ.get("SPARK_SUBMIT_OPTS", "").split()
os.environ["SPARK_SUBMIT_OPTS"] = " ".join(
    [
        *_submit_opts,
        *(o for o in (*TEST_JAVA_OPTIONS, *TEST_SPARK_DEFAULTS) if o not in _submit_opts),
    ]
)

# The usual umask, whatever the machine's: zkcdc's own tightening is what the file-mode tests
# prove, so a strict CI umask must not make them pass for it.
os.umask(0o022)


def wait_until(
    predicate: Callable[[], object],
    timeout_s: float = 60.0,
    interval_s: float = 0.2,
    what: str = "",
) -> object:
    """Poll until `predicate()` is truthy; its value is returned. Fails the test on timeout
    (the one wait, zkcdc/ground/waiting.py)."""
    try:
        return waiting.wait_until(
            predicate, timeout_s, what=what or str(predicate), interval_s=interval_s
        )
    except waiting.WaitFailed as exc:
        pytest.fail(str(exc))


SHARED_STACK_ENV = "ZKCDC_TEST_SHARED_STACK"


@pytest.fixture(scope="session")
def shared_cluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ClusterBackend]:
    """The session's one stack, started by the controller before the workers (every worker's
    tests use it, each in chroots and topics of its own); started here when the controller did
    not (a run of one file, another backend)."""
    shared = os.environ.get(SHARED_STACK_ENV)
    if shared and os.environ.get("ZKCDC_TEST_BACKEND", "local") == "local":
        backend: ClusterBackend = LocalBackend(Path(shared), attach=True)
    else:
        backend = make_backend(tmp_path_factory.mktemp("stack"))
    request.config.stash[BACKEND_KEY] = backend
    try:
        yield backend
    finally:
        backend.close()


@pytest.fixture(scope="session")
def own_cluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ClusterBackend]:
    """A stack of this worker's own for the tests marked `stops_brokers` (in two chains, each
    on one worker): a broker they stop must not disturb the tests on the shared stack."""
    if os.environ.get("ZKCDC_TEST_BACKEND", "local") != "local":
        yield request.getfixturevalue("shared_cluster")  # one cluster there: tests run alone
        return
    backend = LocalBackend(tmp_path_factory.mktemp("own-stack"))
    try:
        yield backend
    finally:
        backend.close()


@pytest.fixture
def cluster(request: pytest.FixtureRequest) -> ClusterBackend:
    """The stack this test runs on: the shared one, or for a test that stops brokers the
    worker's own."""
    if request.node.get_closest_marker("stops_brokers"):
        return request.getfixturevalue("own_cluster")  # type: ignore[no-any-return]
    return request.getfixturevalue("shared_cluster")  # type: ignore[no-any-return]


def _client(hosts: str) -> KazooClient:
    client = KazooClient(hosts=hosts, timeout=10.0)
    client.start(timeout=15)
    return client


@pytest.fixture
def kafka_zk(cluster: ClusterBackend) -> Iterator[KazooClient]:
    """A kazoo client rooted at Kafka's chroot: the tree the brokers write."""
    client = _client(cluster.zookeeper_hosts + cluster.chroot)
    yield client
    client.stop()
    client.close()


@pytest.fixture
def zk_chroot(cluster: ClusterBackend, request: pytest.FixtureRequest) -> Iterator[KazooClient]:
    """A kazoo client rooted at a fresh chroot owned by this test, removed afterwards."""
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", request.node.name)[:80]
    chroot = f"/zkcdc-tests/{name}-{uuid.uuid4().hex[:8]}"
    root = _client(cluster.zookeeper_hosts)
    root.ensure_path(chroot)
    client = _client(cluster.zookeeper_hosts + chroot)
    yield client
    client.stop()
    client.close()
    root.delete(chroot, recursive=True)
    root.stop()
    root.close()


def _admin_call(
    bootstrap: str,
    call: Callable[[AdminClient], dict[str, object]],
    done_already: int,
    deadline_s: float = 90.0,
    done_is_fine: bool = False,
) -> None:
    """Runs an admin request until it succeeds, retrying what is retriable (e.g. NOT_CONTROLLER
    while a controller moves); `done_already` is the error code meaning an earlier try took
    effect. Each try has a client of its own: one client kept sending to a broker that was no
    longer the controller for the whole deadline once (CI), its metadata never refreshed."""
    deadline = time.monotonic() + deadline_s
    attempt = 0
    backoff = Backoff(first_s=0.5, most_s=2.0)
    # not a wait: a retry of what Kafka refused for now (NOT_CONTROLLER while a controller moves)
    while True:
        try:
            client = AdminClient({"bootstrap.servers": bootstrap})  # alive until answered
            for future in call(client).values():
                future.result(timeout=60)  # type: ignore[attr-defined]
            return
        except KafkaException as exc:
            error: KafkaError = exc.args[0]
            if error.code() == done_already and (attempt > 0 or done_is_fine):
                return
            if not passes(error) or time.monotonic() > deadline:
                raise
        attempt += 1
        time.sleep(backoff.failed())  # fixed wait: a retry's backoff, jittered


@pytest.fixture
def new_topic(
    cluster: ClusterBackend, request: pytest.FixtureRequest
) -> Iterator[Callable[..., str]]:
    """Creates topics named after the test; deletes them when the test ends."""
    created: list[str] = []

    def create(partitions: int = 1, replication_factor: int = 3, **config: str) -> str:
        base = re.sub(r"[^A-Za-z0-9_.-]", "_", request.node.name)[:100]
        name = f"{base}-{uuid.uuid4().hex[:6]}"
        topic = NewTopic(name, partitions, replication_factor, config=config)
        create_topics(lambda: AdminClient({"bootstrap.servers": cluster.bootstrap_servers}),
                      [topic], 90)  # fmt: skip
        created.append(name)
        return name

    yield create
    for name in created:
        _admin_call(
            cluster.bootstrap_servers,
            lambda admin, n=name: admin.delete_topics([n], operation_timeout=30),  # type: ignore[misc]
            KafkaError.UNKNOWN_TOPIC_OR_PART,
            done_is_fine=True,  # the test itself may have deleted it
        )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    cpu = item.config.stash.get(CPU_KEY, None)
    if cpu is not None:
        item.stash[CPU_START_KEY] = cpu.mark()
    item.stash[STARTED_KEY] = time.time()
    return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    cpu, start = item.config.stash.get(CPU_KEY, None), item.stash.get(CPU_START_KEY, None)
    if call.when == "teardown" and cpu is not None and start is not None:
        item.user_properties.append(("cpu_s", f"{cpu.since(start):.1f}"))
    if call.when == "teardown":
        # Where and when it ran: `make test-times` says from them when each worker ended.
        item.user_properties.append(("worker", os.environ.get("PYTEST_XDIST_WORKER", "")))
        item.user_properties.append(("started", f"{item.stash.get(STARTED_KEY, 0.0):.1f}"))
    report = yield
    captures = item.stash.get(CAPTURES_KEY, [])
    if report.failed and captures and not item.stash.get(SHOWN_KEY, False):
        # First: the daemons' own logs say what went wrong; a long report is cut in its middle.
        item.stash[SHOWN_KEY] = True
        for n, process in enumerate(captures):
            report.sections.insert(n, (f"capture log {process.log_file.name}", process.report()))
    backend = getattr(item, "funcargs", {}).get("cluster") or item.config.stash.get(
        BACKEND_KEY, None
    )
    if report.failed and backend is not None and "cluster" in getattr(item, "fixturenames", ()):
        for name, text in backend.log_tails().items():
            report.sections.append((f"log of {name} (last lines)", text))
    return report


@pytest.fixture
def start_capture(
    cluster: ClusterBackend,
    tmp_path_factory: pytest.TempPathFactory,
    request: pytest.FixtureRequest,
) -> Iterator[Callable[..., CaptureProcess]]:
    """Starts `zkcdc capture` processes publishing to a topic of this test's own; stops them
    (SIGKILL if need be) and prints their logs at the end, so a failing test shows them."""
    processes: list[CaptureProcess] = []
    request.node.stash[CAPTURES_KEY] = processes  # shown first when the test fails
    base = tmp_path_factory.mktemp("capture")
    ha_path = f"/zkcdc-tests/ha-{uuid.uuid4().hex[:8]}"  # shared by this test's daemons only

    def start(
        zookeeper: str,
        *args: str,
        state_dir: Path | None = None,
        publish_to: ChangesTopic | None = None,
        env: dict[str, str] | None = None,
    ) -> CaptureProcess:
        state = state_dir or base / f"state-{len(processes)}"
        kafka = ["--bootstrap-servers", cluster.bootstrap_servers] if publish_to else []
        topic = ["--topic", publish_to.topic] if publish_to else []
        common = ["--zookeeper", zookeeper, "--state-dir", str(state), "--ha-path", ha_path]
        process = CaptureProcess(
            [*common, *kafka, *topic, *args],
            base / f"capture-{len(processes)}.log",
            env,
        )
        processes.append(process)
        return process

    yield start
    for process in processes:
        stop(process.process, 0, signal.SIGKILL)


@pytest.fixture
def changes_topic(
    cluster: ClusterBackend, request: pytest.FixtureRequest
) -> Iterator[ChangesTopic]:
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", request.node.name)[:80]
    topic = ChangesTopic(cluster.bootstrap_servers, f"zkcdc.changes.{name}-{uuid.uuid4().hex[:6]}")
    for name in (topic.topic, f"{topic.topic}.deadletter"):  # the alert job's default for it
        drop_after_test(request, cluster.bootstrap_servers, name)
    yield topic
    topic.close()


@pytest.fixture
def start_alert_job(
    cluster: ClusterBackend,
    tmp_path_factory: pytest.TempPathFactory,
    request: pytest.FixtureRequest,
) -> Iterator[Callable[..., tuple[AlertJob, AlertsTopic]]]:
    """Starts `zkcdc stream alerts` on a changes topic, publishing to an alerts topic of this
    test's own, without a warm-up unless asked for (`--warm-up-batches`: the tests of
    streaming/job/warm_up.py); stops it at the end and prints its log, so a failing test shows
    it."""
    jobs: list[tuple[AlertJob, AlertsTopic]] = []
    base = tmp_path_factory.mktemp("alerts")

    def start(changes: ChangesTopic, *args: str) -> tuple[AlertJob, AlertsTopic]:
        name = re.sub(r"[^A-Za-z0-9_.-]", "_", request.node.name)[:80]
        suffix = f"{name}-{uuid.uuid4().hex[:6]}"
        alerts = AlertsTopic(cluster.bootstrap_servers, f"zkcdc.alerts.{suffix}")
        for topic in (alerts.topic, f"zkcdc.state.{suffix}"):
            drop_after_test(request, cluster.bootstrap_servers, topic)
        job = AlertJob(
            [
                "--bootstrap-servers",
                cluster.bootstrap_servers,
                "--topic",
                changes.topic,
                "--alerts-topic",
                alerts.topic,
                "--state-topic",
                f"zkcdc.state.{suffix}",
                "--checkpoint",
                str(base / f"checkpoint-{len(jobs)}"),
                # The warm-up costs a start ~30 s; its own tests ask for it.
                *([] if "--warm-up-batches" in args else ["--warm-up-batches", "0"]),
                *args,
            ],
            base / f"alerts-{len(jobs)}.log",
        )
        jobs.append((job, alerts))
        return job, alerts

    yield start
    for job, alerts in jobs:
        stop(job.process, 0, signal.SIGKILL)
        alerts.close()
        print(f"--- alert job log {job.log_file} ---\n{job.tail(80)}")


@pytest.fixture(scope="session")
def alertmanager(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Alertmanager]:
    """A real Prometheus Alertmanager (Debian's package) on a free loopback port."""
    port = probes.free_port()
    manager = Alertmanager(alertmanager_binary(), tmp_path_factory.mktemp("alertmanager"), port)
    yield manager
    manager.stop()


@pytest.fixture(scope="session")
def schema_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SchemaRegistry]:
    """A real schema registry (Apicurio, built once from Maven Central) on a free loopback
    port; its log is shown at the end of the session."""
    jar = registry_jar(default_cache_dir(), lambda line: print(line, file=sys.stderr))
    registry = start_registry(jar, tmp_path_factory.mktemp("registry") / "registry.log")
    yield registry
    registry.stop()


# The modules whose broker-stopping tests make the second own-stack chain (the alert job's).
_OWN_STACK_B = frozenset({"test_alert_job.py", "test_alert_consumers.py", "test_live_ui.py"})
# Session fixtures too costly to start on every worker: their users join the tests that stop
# brokers on one worker.
_GROUPED_SESSION_FIXTURES = ("schema_registry",)


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the groups
def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    _group_shared_fixtures(items)
    _fill_caches(items)


def _group_shared_fixtures(items: list[pytest.Item]) -> None:
    """Tests that share a module or package fixture (a secured stack, a KRaft stack, a staged
    incident) run on one worker, so it is made once; the rest spread test by test
    (`worker_groups`: the controller's scheduler reads the groups found here)."""
    groups: dict[str, str] = {}
    for item in items:
        _group_of(item)
        for mark in item.iter_markers("xdist_group"):
            groups[item.nodeid] = str(mark.args[0] if mark.args else mark.kwargs["name"])
    worker_groups.publish(groups)
    # The longest chains first (the tests on the own stack, then the other groups, then the
    # rest of the integration tests, the unit tests last): the workers start on what takes
    # longest and end together. The same order on every worker.
    items.sort(key=lambda item: _start_rank(item, groups.get(item.nodeid)))


def _start_rank(item: pytest.Item, group: str | None) -> int:
    if group is not None and group.startswith("own-stack"):
        return 0
    if group is not None:
        return 1
    return 2 if item.get_closest_marker("integration") else 3


def _group_of(item: pytest.Item) -> None:
    fixtures = getattr(item, "fixturenames", ())
    if item.get_closest_marker("xdist_group"):
        return
    if item.get_closest_marker("stops_brokers") or any(
        name in fixtures for name in _GROUPED_SESSION_FIXTURES
    ):
        # Two chains of about equal length, each on a worker with a stack of its own.
        second = item.path.name in _OWN_STACK_B
        item.add_marker(pytest.mark.xdist_group("own-stack-b" if second else "own-stack-a"))
        return
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return
    group = worker_groups.shared_fixture_group(
        item.nodeid.split("::")[0],
        (
            (definition.scope, definition.baseid)
            for definitions in info.name2fixturedefs.values()
            for definition in definitions[-1:]
        ),
    )
    if group is not None:
        item.add_marker(pytest.mark.xdist_group(group))


def pytest_sessionstart(session: pytest.Session) -> None:
    """The controller of a parallel run (or a run in one process) fills the caches the
    integration tests need before any worker starts: set-up, timed on its own."""
    config = session.config
    if hasattr(config, "workerinput") or not _runs_integration(config):
        return
    started = time.monotonic()
    from zookeeper_servers import kafka_libs

    from zkcdc.streaming.job.spark_jars import spark_jars

    kafka_libs()
    spark_jars(lake=True)  # Delta Lake's jars too, for the history tests
    registry_jar(default_cache_dir(), lambda line: print(line, file=sys.stderr))
    from go_tools import HELM, ensure_go_binary

    ensure_go_binary("helm", HELM)  # minutes the first time: never inside a test's timeout
    if os.environ.get("ZKCDC_TEST_BACKEND", "local") == "local" and not os.environ.get(
        SHARED_STACK_ENV
    ):
        # The shared stack, before the workers start (they inherit where it is).
        folder = Path(tempfile.mkdtemp(prefix="zkcdc-shared-stack-"))
        config.stash[SHARED_KEY] = LocalBackend(folder)
        os.environ[SHARED_STACK_ENV] = str(folder)
    config.stash[SETUP_S_KEY] = time.monotonic() - started


SHARED_KEY = pytest.StashKey[LocalBackend]()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    _fail_on_skips(session)
    shared = session.config.stash.get(SHARED_KEY, None)
    if shared is not None:
        shared.stack.down()
        shutil.rmtree(shared.stack.layout.state_dir, ignore_errors=True)


SETUP_S_KEY = pytest.StashKey[float]()
MEMORY_KEY = pytest.StashKey[MemoryPeak]()
CPU_KEY = pytest.StashKey[CpuPerTest]()
CPU_START_KEY = pytest.StashKey[Any]()
STARTED_KEY = pytest.StashKey[float]()


def pytest_configure(config: pytest.Config) -> None:
    if os.environ.get(CpuPerTest.ENV, "1") != "0" and (
        hasattr(config, "workerinput") or config.getvalue("numprocesses") in (None, 0)
    ):
        config.stash[CPU_KEY] = CpuPerTest()  # each worker accounts for its own tests
    if not hasattr(config, "workerinput"):
        config.stash[MEMORY_KEY] = MemoryPeak()
        # Where the workers say which tests share a worker (before they are started).
        folder = Path(tempfile.mkdtemp(prefix="zkcdc-test-groups-"))
        os.environ[worker_groups.ENV] = str(folder / "groups.json")
        atexit.register(shutil.rmtree, folder, True)


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    if config.getvalue("dist") != "loadgroup":
        return None  # another --dist asked for: xdist's own
    return worker_groups.make_scheduler(config, log)


def pytest_unconfigure(config: pytest.Config) -> None:
    cpu = config.stash.get(CPU_KEY, None)
    if cpu is not None:
        cpu.stop()
    peak = config.stash.get(MEMORY_KEY, None)
    if peak is not None:
        peak.stop()


def _runs_integration(config: pytest.Config) -> bool:
    """Whether the paths asked for hold integration tests (all of tests/ by default)."""
    root = Path(__file__).resolve().parent
    asked = [a.split("::")[0] for a in config.args] or ["tests"]
    for arg in asked:
        path = (Path(config.invocation_params.dir) / arg).resolve()
        if path == root or (root in path.parents and "integration" in path.parts):
            return True
        if path in root.parents:
            return True
    return False


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    took = config.stash.get(SETUP_S_KEY, None)
    if took is not None:
        terminalreporter.write_line(
            f"set-up before the tests (caches filled or checked, the shared stack): {took:.1f} s"
        )
    peak = config.stash.get(MEMORY_KEY, None)
    if peak is not None:
        terminalreporter.write_line(
            f"memory in use at its peak during the run: {peak.peak_mib} MiB"
        )


def _fill_caches(items: list[pytest.Item]) -> None:
    """What a session builds once is built before any test runs, outside the tests' timeouts:
    the registry from Maven Central took a fresh machine's first registry test past its 300 s.
    Every worker collects; the caches' locks let one fill each while the others wait."""
    started = time.monotonic()
    if any("schema_registry" in getattr(item, "fixturenames", ()) for item in items):
        registry_jar(default_cache_dir(), lambda line: print(line, file=sys.stderr))
    if any(item.get_closest_marker("integration") for item in items):
        from zookeeper_servers import kafka_libs

        from zkcdc.streaming.job.spark_session import local_driver

        kafka_libs()
        # Spark's jars, and the driver's class archive (~60 s, once a venv): recorded by the
        # first worker here while the others start on their tests without it.
        local_driver()
    took = time.monotonic() - started
    if took > 5:
        print(f"\ncaches filled in {took:.0f} s (set-up, before any test)", file=sys.stderr)


def _fail_on_skips(session: pytest.Session) -> None:
    """On the default local backend (CI's) every test can run: a skip there is a failure.
    Only the external and docker backends skip the tests they cannot serve."""
    if os.environ.get("ZKCDC_TEST_BACKEND", "local") != "local":
        return
    if hasattr(session.config, "workerinput"):
        return  # the controller sees every worker's reports
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    skipped = reporter.stats.get("skipped", []) if reporter is not None else []
    if skipped:
        names = ", ".join(report.nodeid for report in skipped)
        print(f"\n{len(skipped)} test(s) skipped on the local backend: {names}")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
