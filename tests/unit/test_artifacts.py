"""Jars are fetched with mvn once; a populated cache is used without running mvn at all."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest

from zkcdc.ground.maven_jars import ArtifactCache, JarFetchError, JarSet, artifact_id
from zkcdc.streaming.job.spark_jars import spark_jar_set


class FakeMvn:
    """Stands in for `mvn dependency:copy-dependencies`: writes the jars it is told to."""

    def __init__(self, jars: Sequence[str], returncode: int = 0, stdout: str = "") -> None:
        self.jars, self.returncode, self.stdout, self.calls = jars, returncode, stdout, 0

    def __call__(self, args: Sequence[str], cwd: Path) -> subprocess.CompletedProcess[str]:
        self.calls += 1
        out = Path(next(a for a in args if a.startswith("-DoutputDirectory=")).split("=", 1)[1])
        out.mkdir(parents=True)
        for jar in self.jars:
            (out / jar).write_bytes(b"PK")
        return subprocess.CompletedProcess(list(args), self.returncode, self.stdout, "")


def never_runs(args: Sequence[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    raise AssertionError(f"mvn ran although the cache is complete: {args}")


@pytest.mark.parametrize(
    ("jar", "artifact"),
    [
        ("kafka-clients-3.9.0.jar", "kafka-clients"),
        ("spark-sql-kafka-0-10_2.13-4.0.0.jar", "spark-sql-kafka-0-10_2.13"),
        ("jetty-util-9.4.57.v20241219.jar", "jetty-util"),
        ("snappy-java-1.1.10.5.jar", "snappy-java"),
        ("foo-1.0-SNAPSHOT.jar", "foo"),
    ],
)
def test_artifact_id_strips_the_version(jar: str, artifact: str):
    assert artifact_id(jar) == artifact


def test_second_fetch_uses_the_cache_and_excluded_jars_are_dropped(tmp_path: Path):
    jar_set = JarSet("x-1", ("g:a:1",), exclude_artifacts=frozenset({"scala-library"}))
    mvn = FakeMvn(["a-1.jar", "scala-library-2.13.15.jar"])
    first = ArtifactCache(tmp_path, runner=mvn).fetch(jar_set)
    assert [p.name for p in first] == ["a-1.jar"]
    assert mvn.calls == 1
    assert ArtifactCache(tmp_path, runner=never_runs).fetch(jar_set) == first


def test_other_coordinates_are_fetched_anew(tmp_path: Path):
    mvn = FakeMvn(["a-2.jar"])
    ArtifactCache(tmp_path, runner=FakeMvn(["a-1.jar"])).fetch(JarSet("x", ("g:a:1",)))
    assert [p.name for p in ArtifactCache(tmp_path, runner=mvn).fetch(JarSet("x", ("g:a:2",)))] == [
        "a-2.jar"
    ]


def test_a_failed_download_is_one_line_with_maven_s_reason(tmp_path: Path):
    mvn = FakeMvn(
        [], returncode=1, stdout="[INFO] x\n[ERROR] Could not find artifact g:a:jar:9 in central\n"
    )
    with pytest.raises(JarFetchError) as failure:
        ArtifactCache(tmp_path, runner=mvn).fetch(JarSet("x", ("g:a:9",)))
    message = str(failure.value)
    assert "\n" not in message
    assert message.startswith(
        "downloading x with mvn failed: Could not find artifact g:a:jar:9 in central"
    )
    assert ArtifactCache(tmp_path).cached(JarSet("x", ("g:a:9",))) is None


def test_spark_jars_keep_only_what_pyspark_does_not_ship(tmp_path: Path):
    (tmp_path / "kafka-clients-3.0.0.jar").write_bytes(b"")
    jar_set = spark_jar_set("4.0.0", bundled=tmp_path)
    assert "org.apache.spark:spark-sql-kafka-0-10_2.13:4.0.0" in jar_set.coordinates
    assert "org.apache.spark:spark-avro_2.13:4.0.0" in jar_set.coordinates
    assert jar_set.exclude_artifacts == {"kafka-clients"}
