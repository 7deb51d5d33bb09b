"""`kafka-storage format` takes every cluster id Kafka can hold, also one that starts with "-"
(a ZooKeeper-mode cluster's id, kept by a migration, may): real Kafka tool, no servers."""

from __future__ import annotations

from pathlib import Path

import pytest

from zkcdc.stack import LocalStack, StackSettings, configs
from zkcdc.stack.cluster import new_cluster_id
from zkcdc.stack.errors import StackError


def _controller_home(tmp_path: Path) -> tuple[LocalStack, Path]:
    settings = StackSettings(state_dir=tmp_path, mode="kraft", controllers=1)
    stack = LocalStack(settings, announce=lambda _: None)
    stack.fetch()  # the jars, once per cache
    controller = stack.layout.controllers[0]
    controller.log_dir.mkdir(parents=True)
    stack.layout.logs_dir.mkdir(parents=True)
    controller.config_file.write_text(configs.controller_config(stack.layout, controller, settings))
    (controller.home / "log4j.properties").write_text(configs.log4j_config())
    return stack, controller.log_dir


def _formatted_id(log_dir: Path) -> str:
    for line in (log_dir / "meta.properties").read_text().splitlines():
        if line.startswith("cluster.id="):
            return line.removeprefix("cluster.id=")
    raise AssertionError(f"no cluster.id in {log_dir / 'meta.properties'}")


# The ids are fixed at collection and named (parallel workers must collect the same tests); a
# new id is drawn in the test.
@pytest.mark.parametrize("cluster_id", ["-Wm5HBb7QkSqj8qE8fdeMA", "new"], ids=["dash", "new"])
def test_the_metadata_log_is_formatted_with_the_id_asked_for(
    tmp_path: Path, cluster_id: str
) -> None:
    cluster_id = new_cluster_id() if cluster_id == "new" else cluster_id
    stack, log_dir = _controller_home(tmp_path)
    stack.format_kraft_storage(cluster_id, [log_dir.parent])
    assert _formatted_id(log_dir) == cluster_id


def test_a_log_dir_formatted_before_is_one_clear_error_and_keeps_its_id(tmp_path: Path) -> None:
    stack, log_dir = _controller_home(tmp_path)
    first = new_cluster_id()
    stack.format_kraft_storage(first, [log_dir.parent])
    with pytest.raises(StackError, match=r"kafka-storage format of .* failed \(exit 1\)"):
        stack.format_kraft_storage(new_cluster_id(), [log_dir.parent])
    assert _formatted_id(log_dir) == first
