"""The deployment files run the product, checked as far as this machine allows (no Docker
engine): Prometheus rules by promtool (syntax and unit tests), systemd units by systemd-analyze
and by the daemon speaking systemd's notify protocol, docker-compose.yml by docker-compose's own
parser and by running its services' exact commands and environments outside Docker, the
Dockerfile's promises (non-root, jars baked in) by what they rest on."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import wait_until
from debian_packages import ensure_binary

from zkcdc.ground.child_processes import stop
from zkcdc.stack.probes import free_port_block

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
ZKCDC = Path(sys.executable).parent / "zkcdc"


def _run(*command: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(c) for c in command], capture_output=True, text=True, cwd=cwd,
                          timeout=120, check=False)  # fmt: skip


# -- Prometheus ----------------------------------------------------------------------------
def test_prometheus_rules_pass_promtool_check_and_their_unit_tests() -> None:
    promtool = ensure_binary("promtool", "prometheus")
    folder = DEPLOY / "prometheus"
    checked = _run(promtool, "check", "rules", "zkcdc-rules.yml", cwd=folder)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "SUCCESS: 10 rules found" in checked.stdout
    tested = _run(promtool, "test", "rules", "zkcdc-rules.test.yml", cwd=folder)
    assert tested.returncode == 0, tested.stdout + tested.stderr
    config = _run(promtool, "check", "config", "prometheus.yml", cwd=folder)
    assert config.returncode == 0, config.stdout + config.stderr


def test_the_rules_name_only_metrics_zkcdc_exports() -> None:
    """A renamed metric would leave a rule silently never firing."""
    from zkcdc.capture.metrics import CaptureMetrics
    from zkcdc.streaming.job.job_metrics import JobMetrics

    exported = set()
    for registry in (CaptureMetrics().registry, JobMetrics().registry):
        for family in registry.collect():
            exported.update(sample.name for sample in family.samples)
            exported.update(f"{family.name}_{s}" for s in ("bucket", "total", "count", "sum"))
    rules = (DEPLOY / "prometheus" / "zkcdc-rules.yml").read_text()
    used = set(re.findall(r"\bzkcdc_[a-z_]+", rules))
    assert used and used <= exported, used - exported


def test_alertmanager_config_passes_amtool() -> None:
    amtool = ensure_binary("amtool", "prometheus-alertmanager")
    result = _run(amtool, "check-config", DEPLOY / "alertmanager" / "alertmanager.yml")
    assert result.returncode == 0, result.stdout + result.stderr


# -- systemd -------------------------------------------------------------------------------
@pytest.fixture
def units(tmp_path: Path) -> Path:
    """The units as installed for an instance `test`, ExecStart pointing at this venv's zkcdc
    (systemd-analyze checks the binary exists)."""
    for template in (DEPLOY / "systemd").glob("*@.service"):
        text = template.read_text().replace("/usr/local/bin/zkcdc", str(ZKCDC))
        (tmp_path / template.name.replace("@.", "@test.")).write_text(text)
    return tmp_path


def test_systemd_units_pass_systemd_analyze_verify_without_a_warning(units: Path) -> None:
    analyze = ensure_binary("systemd-analyze", "systemd")
    files = sorted(units.glob("*.service"))
    assert [f.name for f in files] == [
        "zkcdc-alerts@test.service",
        "zkcdc-capture@test.service",
        "zkcdc-ui@test.service",
    ]
    result = _run(analyze, "verify", *files)
    # verify exits 0 on unknown keys or bad values: any word about our units is a defect.
    about_ours = [line for line in result.stderr.splitlines() if "zkcdc-" in line]
    assert result.returncode == 0 and about_ours == [], result.stderr


def _exec_start(unit: Path) -> list[str]:
    line = next(x for x in unit.read_text().splitlines() if x.startswith("ExecStart="))
    words = shlex.split(line.removeprefix("ExecStart=").replace("%i", "test"))
    return [w for w in words if not w.startswith("$")]  # environment-supplied arguments


def test_the_units_command_lines_are_ones_zkcdc_accepts(units: Path) -> None:
    """Each option of ExecStart exists (click parses them in order before --help)."""
    for unit in units.glob("*.service"):
        command = _exec_start(unit)
        result = _run(*command, "--help")
        assert result.returncode == 0, f"{unit.name}: {result.stderr}"
        assert "Usage:" in result.stdout


def test_the_ui_unit_serves_beyond_loopback_only_with_a_web_config_and_ahead_of_the_job() -> None:
    text = (DEPLOY / "systemd" / "zkcdc-ui@.service").read_text()
    command = _exec_start(DEPLOY / "systemd" / "zkcdc-ui@.service")
    assert "--web-config" in command and "--insecure-no-auth" not in command
    assert "Nice=-5" in text and "CPUWeight=200" in text


def test_the_capture_unit_is_type_notify_with_a_watchdog_and_restarts() -> None:
    unit = (DEPLOY / "systemd" / "zkcdc-capture@.service").read_text()
    for setting in ("Type=notify", "WatchdogSec=", "Restart=on-failure", "UMask=0027"):
        assert setting in unit
    assert "User=zkcdc" in unit and "PASSWORD" not in unit.upper().replace("_PASSWORD", "")


@pytest.fixture
def notify_socket(tmp_path: Path) -> Iterator[tuple[socket.socket, str]]:
    path = str(tmp_path / "notify.sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    sock.settimeout(0.5)
    yield sock, path
    sock.close()


def _messages(sock: socket.socket, until: float) -> list[str]:
    got = []
    while time.monotonic() < until:
        try:
            got.append(sock.recv(4096).decode())
        except TimeoutError:
            continue
    return got


@pytest.mark.integration
def test_capture_tells_systemd_it_is_ready_pets_the_watchdog_and_says_it_stops(
    cluster: Any, zk_chroot: Any, start_capture: Any, notify_socket: tuple[socket.socket, str]
) -> None:
    sock, path = notify_socket
    env = {"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "1000000"}  # petted every 0.5 s
    daemon = start_capture(cluster.zookeeper_hosts + zk_chroot.chroot, "--cluster", "c1", env=env)
    daemon.wait_logged("in sync")
    seen = _messages(sock, time.monotonic() + 3)
    assert any(m.startswith("READY=1") and "in sync" in m for m in seen), seen
    assert sum(m == "WATCHDOG=1" for m in seen) >= 3, seen
    daemon.process.send_signal(15)
    assert daemon.process.wait(60) == 0, daemon.tail()
    leftover = _messages(sock, time.monotonic() + 1)
    assert "STOPPING=1" in seen + leftover


# -- docker-compose ------------------------------------------------------------------------
def _compose() -> dict[str, Any]:
    return dict(yaml.safe_load((ROOT / "docker-compose.yml").read_text()))


def test_docker_compose_parses_and_has_no_placeholder_service() -> None:
    binary = ensure_binary("docker-compose", "docker-compose")
    result = _run(binary, "-f", ROOT / "docker-compose.yml", "config", "--quiet")
    assert result.returncode == 0, result.stderr
    services = _compose()["services"]
    assert set(services) == {"zookeeper", "kafka-1", "kafka-2", "kafka-3", "capture-a",
                             "capture-b", "alerts", "alertmanager"}  # fmt: skip
    assert services["zookeeper"]["image"].startswith("confluentinc/cp-zookeeper:7.9.")
    ids, ports = set(), set()
    for n in (1, 2, 3):  # three ZooKeeper-mode brokers (Confluent Platform 7.9 = Kafka 3.9)
        broker = services[f"kafka-{n}"]
        assert broker["image"].startswith("confluentinc/cp-kafka:7.9.")
        assert broker["environment"]["KAFKA_ZOOKEEPER_CONNECT"] == "zookeeper:2181/kafka"
        ids.add(broker["environment"]["KAFKA_BROKER_ID"])
        ports.update(broker["ports"])
    assert ids == {"1", "2", "3"} and ports == {"9092:9092", "9093:9093", "9094:9094"}
    for name, service in services.items():
        assert "--help" not in (service.get("command") or []), f"{name} is a placeholder"
    for name in ("capture-a", "capture-b", "alerts"):
        assert "/healthz" in " ".join(services[name]["healthcheck"]["test"]), name
        volume = services[name]["volumes"][0].split(":")[0]
        assert volume in _compose()["volumes"], f"{name}: {volume} is not a named volume"


def _healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=3) as answer:
            return bool(answer.status == 200)
    except (urllib.error.URLError, OSError):
        return False


@pytest.mark.integration
def test_the_compose_services_commands_and_environments_run_outside_docker(
    cluster: Any, alertmanager: Any, tmp_path: Path
) -> None:
    """capture-a, capture-b and alerts as compose runs them, with only what Docker would
    supply mapped: service host names to the local stack, container paths to folders here,
    ports to free ones, and the topic names to this test's own."""
    run = uuid.uuid4().hex[:6]
    names = {
        "zookeeper:2181/kafka": cluster.zookeeper_hosts + cluster.chroot,
        "kafka-1:29092,kafka-2:29092,kafka-3:29092": cluster.bootstrap_servers,
        "http://alertmanager:9093": alertmanager.url,
        "zkcdc.changes": f"zkcdc.changes.compose-{run}",
        "zkcdc.alerts": f"zkcdc.alerts.compose-{run}",
        "zkcdc.state": f"zkcdc.state.compose-{run}",
    }
    services = _compose()["services"]
    processes: list[tuple[str, subprocess.Popen[bytes], Path]] = []
    ports = {}
    try:
        for name in ("capture-a", "capture-b", "alerts"):
            service = services[name]
            volume, mount = service["volumes"][0].split(":")[:2]
            port = free_port_block(1)
            ports[name] = port

            def local(
                value: str, mount: str = mount, volume: str = volume, port: int = port
            ) -> str:
                for docker, here in names.items():
                    value = value.replace(docker, here)
                value = value.replace(mount, str(tmp_path / volume))
                return re.sub(r"^946[45]$", str(port), value)

            command = [local(w) for w in service["command"]]
            assert command[0] == "zkcdc"
            env = {k: local(str(v)) for k, v in (service.get("environment") or {}).items()}
            # The election path of this run only (compose's one cluster has the whole root).
            env["ZKCDC_HA_PATH"] = f"/zkcdc-tests/compose-{run}"
            log = tmp_path / f"{name}.log"
            process = subprocess.Popen(
                [str(ZKCDC), *command[1:]], stdout=log.open("wb"), stderr=subprocess.STDOUT,
                env={**os.environ, **env}, cwd=tmp_path,
            )  # fmt: skip
            processes.append((name, process, log))

        def all_healthy() -> bool:
            for name, process, log in processes:
                assert process.poll() is None, f"{name} exited:\n{log.read_text()[-3000:]}"
            return all(_healthy(port) for port in ports.values())

        wait_until(all_healthy, 240, 1.0, what="capture-a, capture-b and alerts healthy")
        roles = {name: urllib.request.urlopen(f"http://127.0.0.1:{ports[name]}/healthz",
                                              timeout=3).read().decode().strip()
                 for name in ("capture-a", "capture-b")}  # fmt: skip
        assert sorted(roles.values()) == ["active", "standby"], roles
        assert all(p.stat().st_mode & 0o007 == 0 for p in tmp_path.rglob("*.avro"))
    finally:
        for _, process, _ in processes:
            if process.poll() is None:
                process.terminate()
        for name, process, log in processes:
            stop(process, 90)
            print(f"--- {name} ---\n{log.read_text()[-2000:]}")


# -- Dockerfile ----------------------------------------------------------------------------
def test_the_image_runs_as_a_user_and_bakes_the_jars_in_at_build_time() -> None:
    text = (DEPLOY / "Dockerfile").read_text()
    stages = re.split(r"^FROM ", text, flags=re.M)[1:]
    assert len(stages) == 3
    _, build, final = stages
    assert "maven" in build and "spark_jars()" in build
    assert "maven" not in final and "mvn" not in final
    # the C part (setup.py) compiled in the build stage, its wheel installed without a compiler
    assert "setup.py" in stages[0] and "gcc" in build and "pip wheel" in build
    assert "gcc" not in final and "/wheels/zkcdc-*.whl" in final
    assert "COPY --from=jars /opt/zkcdc/jars /opt/zkcdc/jars" in final
    assert "ENV ZKCDC_CACHE_DIR=/opt/zkcdc/jars" in final
    users = re.findall(r"^USER (\S+)", final, flags=re.M)
    assert users and users[-1] not in ("root", "0")


def test_baked_jars_are_used_without_mvn(tmp_path: Path) -> None:
    """What the image's last stage does: a cache holding only the jar folder (no Maven
    repository) serves spark_jars() on a PATH without mvn."""
    from zkcdc.ground.user_dirs import default_cache_dir
    from zkcdc.streaming.job.spark_jars import spark_jar_set

    name = spark_jar_set().name
    source = default_cache_dir() / name
    assert (source / "manifest.json").exists(), "the jar cache is filled by the stack fixture"
    shutil.copytree(source, tmp_path / "jars" / name)
    env = {**os.environ, "ZKCDC_CACHE_DIR": str(tmp_path / "jars"), "PATH": "/usr/bin:/bin"}
    env["PATH"] = ":".join(p for p in env["PATH"].split(":") if not Path(p, "mvn").exists())
    result = subprocess.run(
        [sys.executable, "-c", "from zkcdc.streaming.job.spark_jars import spark_jars; "
         "print(len(spark_jars()))"],
        capture_output=True, text=True, env=env, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert int(result.stdout.split()[-1]) > 3


# -- Helm ----------------------------------------------------------------------------------
# helm itself cannot be installed here (not in Debian 12, not on PyPI): the chart is checked
# for what holds without rendering it.
CHART = DEPLOY / "helm" / "zkcdc"


def _values_paths(tree: Any, prefix: str = "") -> set[str]:
    paths = set()
    if isinstance(tree, dict):
        for key, value in tree.items():
            paths.add(prefix + key)
            paths |= _values_paths(value, prefix + key + ".")
    return paths


def test_the_helm_chart_refers_only_to_values_it_defines() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["apiVersion"] == "v2" and chart["name"] == "zkcdc" and chart["version"]
    defined = _values_paths(yaml.safe_load((CHART / "values.yaml").read_text()))
    templates = "".join(p.read_text() for p in (CHART / "templates").iterdir())
    used = set(re.findall(r"\.Values\.([A-Za-z0-9_.]+)", templates))
    assert used and used <= defined, used - defined
    assert templates.count("{{") == templates.count("}}")
    assert len(re.findall(r"{{-? *(?:if|define)\b", templates)) == len(
        re.findall(r"{{-? *end *-?}}", templates)
    )


def test_the_helm_chart_runs_capture_with_a_volume_as_a_user_and_a_healthz_probe() -> None:
    text = (CHART / "templates" / "capture-statefulset.yaml").read_text()
    for expected in ("kind: StatefulSet", "volumeClaimTemplates:", "runAsNonRoot: true",
                     "path: /healthz", "mountPath: /var/lib/zkcdc/capture"):  # fmt: skip
        assert expected in text
    command = yaml.safe_load(re.search(r"command: (\[.*\])", text).group(1))  # type: ignore[union-attr]
    result = _run(ZKCDC, *command[1:], "--help")
    assert result.returncode == 0, result.stderr
    alerts = (CHART / "templates" / "alerts-statefulset.yaml").read_text()
    options = re.findall(r"^ +- (--[a-z-]+)$", alerts, flags=re.M)
    result = _run(ZKCDC, "stream", "alerts", "--help")
    assert all(option in result.stdout for option in options), options


# -- helm, rendered by helm itself ----------------------------------------------------------
@pytest.fixture(scope="module")
def helm() -> Path:
    from go_tools import HELM, ensure_go_binary

    return ensure_go_binary("helm", HELM)


def _rendered(helm: Path, *sets: str) -> list[dict[str, Any]]:
    args = [a for s in sets for a in ("--set", s)]
    done = _run(helm, "template", "rel", CHART, *args)
    assert done.returncode == 0, done.stderr
    return [d for d in yaml.safe_load_all(done.stdout) if d]


def test_helm_lints_the_chart_without_a_warning(helm: Path) -> None:
    done = _run(helm, "lint", "--strict", CHART)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("sets", [(), ("connectionSecret=zkcdc-connection",
                                       "alerts.alertmanager=http://am:9093", "ui.enabled=true",
                                       "ui.webConfigSecret=zkcdc-ui-web")])  # fmt: skip
def test_every_rendered_container_runs_a_zkcdc_command_line_its_help_accepts_with_healthz_probes(
    helm: Path, sets: tuple[str, ...]
) -> None:
    documents = _rendered(helm, *sets)
    workloads = [d for d in documents if d["kind"] in ("StatefulSet", "Deployment")]
    assert {w["metadata"]["name"] for w in workloads} >= {"rel-capture", "rel-alerts"}
    for workload in workloads:
        for container in workload["spec"]["template"]["spec"]["containers"]:
            command = [*container["command"], *container.get("args", [])]
            assert command[0] == "zkcdc", command
            words = []  # the subcommand: the words before the first option
            for word in command[1:]:
                if word.startswith("-"):
                    break
                words.append(word)
            helped = _run(ZKCDC, *words, "--help")
            assert helped.returncode == 0, helped.stderr
            for option in (w.split("=")[0] for w in command if w.startswith("--")):
                assert option in helped.stdout, (option, words)
            ports = {p["name"]: p["containerPort"] for p in container.get("ports", [])}
            served = "http" if words == ["ui"] else "metrics"  # the ui's /healthz is on its port
            for probe in ("readinessProbe", "livenessProbe"):
                got = container[probe]["httpGet"]
                # Capture's liveness is /livez: alive through a ZooKeeper outage, which it
                # rides out by itself (a restart would not help).
                path = "/livez" if (probe, words) == ("livenessProbe", ["capture"]) else "/healthz"
                assert got["path"] == path and got["port"] in (served, ports.get(served)), got
            # Secrets come from a Secret (mounted or referenced), never from the command line.
            text = " ".join(map(str, command)) + str(container.get("env", []))
            assert not re.search(r"password|secret=|sasl\.|token", text, flags=re.I), text
    if sets:
        volumes = [v for w in workloads for v in w["spec"]["template"]["spec"].get("volumes", [])]
        secrets = {v.get("secret", {}).get("secretName") for v in volumes}
        assert {"zkcdc-connection", "zkcdc-ui-web"} <= secrets
        (ui,) = [w for w in workloads if w["metadata"]["name"] == "rel-ui"]
        assert "--web-config" in ui["spec"]["template"]["spec"]["containers"][0]["command"]


def test_the_chart_will_not_render_a_ui_without_a_web_config(helm: Path) -> None:
    done = _run(helm, "template", "rel", CHART, "--set", "ui.enabled=true")
    assert done.returncode != 0 and "ui.webConfigSecret" in done.stderr
