"""`make test-census` (tools/suite_census.py) counts the CPU of every process that ran while its
command did, those its command started included, by role."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "tools"
sys.path.insert(0, str(BENCH))
suite_census = importlib.import_module("suite_census")

SPIN = "import time\nend = time.process_time() + {s}\nwhile time.process_time() < end: pass\n"


def test_a_grandchild_that_spins_counts_in_its_role_and_the_command_status_is_kept(tmp_path):
    # A child named as a zkcdc capture would be, started by the command and left running past
    # one sample: its CPU is counted under its role, not under the command that started it.
    script = tmp_path / "capture"
    script.write_text(SPIN.format(s=0.8))
    parent = textwrap.dedent(f"""
        import subprocess, sys
        child = subprocess.Popen([sys.executable, {str(script)!r}, "capture", "--zookeeper", "z"])
        child.wait()
        sys.exit(3)
    """)
    out = tmp_path / "census.json"
    status = suite_census.main(["--out", str(out), "--interval", "0.1", "--",
                                sys.executable, "-c", parent])  # fmt: skip
    assert status == 3
    result = json.loads(out.read_text())
    # This very child, named with its CPU and role (another test's capture under the suite
    # could fill the role's total, not this row).
    mine = [p for p in result["costliest"] if f"{script} capture" in p["command"]]
    assert len(mine) == 1 and mine[0]["role"] == "zkcdc capture", result["costliest"]
    assert mine[0]["cpu_s"] >= 0.6 and mine[0]["seen_s"][1] >= mine[0]["seen_s"][0], mine
    assert result["by_role"]["zkcdc capture"]["cpu_s"] >= 0.6, result
    assert result["machine_busy_cpu_s"] >= result["by_role"]["zkcdc capture"]["cpu_s"] - 0.2


def test_roles_name_the_stack_and_spark_processes():
    role = suite_census.role_of
    assert role("java -Xmx384m -cp /c/kafka-3.9.2/* kafka.Kafka /s/server.properties") == (
        "Kafka broker or KRaft controller"
    )
    assert role("java -cp x org.apache.zookeeper.server.quorum.QuorumPeerMain z.cfg") == "ZooKeeper"
    assert (
        role("java -cp x org.apache.spark.deploy.SparkSubmit pyspark-shell") == "Spark driver JVM"
    )
    executor = "java -cp x org.apache.spark.executor.CoarseGrainedExecutorBackend --driver-url u"
    assert role(executor) == "Spark executor JVM"
    assert role("/v/bin/python3 -m zkcdc capture --zookeeper z") == "zkcdc capture"
    assert role("/c/.venv/bin/uv pip install --editable .[dev]") == "the venv (pip, uv)"
    assert (
        role("/c/.venv/bin/python /root/.cache/uv/.tmpX/pip_compileall.py") == "the venv (pip, uv)"
    )
    assert role("/usr/bin/sleep 1") == "other"


def test_no_command_is_one_clear_error(capsys):
    try:
        suite_census.main([])
    except SystemExit as exit:
        assert exit.code == 2
    else:
        raise AssertionError("no error")
    assert "no command given" in capsys.readouterr().err


def test_a_script_that_execs_its_program_counts_as_that_program(tmp_path):
    # As spark-submit's bash script becomes the driver's JVM: same pid, another program. Only
    # this process is looked at: the census counts the whole machine, other tests included.
    spin = tmp_path / "spin.py"
    spin.write_text(SPIN.format(s=0.8))
    launcher = tmp_path / "launch.sh"
    launcher.write_text(f"sleep 0.4\nexec {sys.executable} {spin} capture --zookeeper z\n")
    seen: dict = {}
    process = subprocess.Popen(["bash", str(launcher)])
    while process.poll() is None:
        suite_census.sample(seen, first=False)
        time.sleep(0.05)
    mine = [s for (pid, _), s in seen.items() if pid == process.pid]
    assert len(mine) == 1, mine
    assert suite_census.role_of(mine[0].command) == "zkcdc capture", mine[0].command
    assert mine[0].cpu_s >= 0.6, mine[0]
