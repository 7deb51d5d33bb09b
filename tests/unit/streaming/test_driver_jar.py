"""zkcdc's driver jar (the java.nio local file system for Spark's checkpoint, and the plugin
that gives each task one SQL configuration): built with the JDK's javac against pyspark's own
jars, used on local masters only, and skipped (not failed) without a JDK."""

from __future__ import annotations

from pathlib import Path

import pytest

from zkcdc.streaming.job import driver_jar
from zkcdc.streaming.job.driver_jar import (
    FILE_CONTEXT_FS,
    FILE_SYSTEM,
    TASK_SQL_CONF,
    driver_jar_conf,
)
from zkcdc.streaming.job.spark_jars import pyspark_home


def test_a_local_master_uses_the_jars_file_system_and_task_plugin() -> None:
    conf = driver_jar_conf(Path("/cache/driver.jar"), "local[2]")
    assert conf == {
        "spark.driver.extraClassPath": "/cache/driver.jar",
        "spark.hadoop.fs.file.impl": FILE_SYSTEM,
        "spark.hadoop.fs.AbstractFileSystem.file.impl": FILE_CONTEXT_FS,
        "spark.plugins": TASK_SQL_CONF,
    }


@pytest.mark.parametrize(("jar", "master"), [(None, "local[2]"), (Path("j.jar"), "spark://h:7077")])
def test_without_the_jar_or_on_a_cluster_sparks_own_classes_are_named(
    jar: Path | None, master: str
) -> None:
    """Named, not left out: PySpark's builders share their options within a process, and a
    cluster session after a local one would send its executors a class they do not have."""
    assert driver_jar_conf(jar, master) == {
        "spark.hadoop.fs.file.impl": "org.apache.hadoop.fs.LocalFileSystem",
        "spark.hadoop.fs.AbstractFileSystem.file.impl": "org.apache.hadoop.fs.local.LocalFs",
        "spark.plugins": "",
    }


def test_the_jar_is_built_once_into_the_cache(tmp_path: Path) -> None:
    jars = pyspark_home() / "jars"
    jar = driver_jar.driver_jar(tmp_path, jars)
    assert jar is not None and jar.is_relative_to(tmp_path), jar
    built = jar.stat().st_mtime_ns
    assert driver_jar.driver_jar(tmp_path, jars) == jar
    assert jar.stat().st_mtime_ns == built, "built again"


def test_no_javac_means_hadoops_own_classes_not_a_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(driver_jar, "_jdk_tool", lambda name: None)
    assert driver_jar.driver_jar(tmp_path, pyspark_home() / "jars") is None
    assert not (tmp_path / "_build").exists() or not any((tmp_path / "_build").iterdir())
