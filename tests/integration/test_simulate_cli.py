"""`zkcdc simulate` refuses bad input with one line and a non-zero exit, and `--force` rebuilds."""

from __future__ import annotations

import pytest
from simulate_harness import simulate

pytestmark = pytest.mark.integration


def test_a_non_empty_chroot_is_refused_unless_forced(cluster, zk_chroot):
    zk_chroot.create("/something/else", b"x", makepath=True)
    connect = cluster.zookeeper_hosts + zk_chroot.chroot
    small = ["--brokers", "2", "--topics", "1", "--partitions-per-topic", "2",
             "--replication-factor", "2"]  # fmt: skip

    refused = simulate("build", "--zookeeper", connect, *small)
    assert refused.returncode == 1
    assert refused.stderr.strip().splitlines()[-1].startswith("zkcdc: error: ")
    assert "not empty" in refused.stderr and "--force" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert zk_chroot.exists("/something/else")

    forced = simulate("build", "--zookeeper", connect, *small, "--force")
    assert forced.returncode == 0, forced.stderr
    assert not zk_chroot.exists("/something")
    assert len(zk_chroot.get_children("/brokers/topics/sim-0000/partitions")) == 2


def test_a_scenario_on_a_chroot_without_a_cluster_says_to_build_first(cluster, zk_chroot):
    connect = cluster.zookeeper_hosts + zk_chroot.chroot
    result = simulate("run", "broker-failure", "--zookeeper", connect)
    assert result.returncode == 1
    assert "run `zkcdc simulate build` on this chroot first" in result.stderr
    assert "Traceback" not in result.stderr


def test_an_unknown_scenario_and_an_unreachable_zookeeper_are_one_line_errors():
    unknown = simulate("run", "meteor-strike", "--zookeeper", "127.0.0.1:2181/x")
    assert unknown.returncode == 2 and "meteor-strike" in unknown.stderr
    # The connect timeout set small, as users can (ZKCDC_CONNECT_TIMEOUT_S; 15 s by default).
    unreachable = simulate("build", "--zookeeper", "127.0.0.1:1/x",
                           env={"ZKCDC_CONNECT_TIMEOUT_S": "2"})  # fmt: skip
    assert unreachable.returncode == 1
    assert "unreachable" in unreachable.stderr and "Traceback" not in unreachable.stderr
    assert "no session within 2 s" in unreachable.stderr


def test_list_names_every_scenario():
    from zkcdc.simulate.scenarios import SCENARIOS

    listed = simulate("list").stdout
    assert all(name in listed for name in SCENARIOS)
