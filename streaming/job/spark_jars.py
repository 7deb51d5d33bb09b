"""The jars a Spark job of zkcdc needs: Spark's Kafka source/sink and Avro functions at
pyspark's version, and for the lake Delta Lake's release for that Spark line, minus what pyspark
ships; fetched with mvn once into the user's cache."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import sys
from pathlib import Path

from zkcdc.ground.maven_jars import ArtifactCache, JarFetchError, JarSet, artifact_id
from zkcdc.ground.user_dirs import default_cache_dir
from zkcdc.streaming.errors import StreamingError


def pyspark_home() -> Path:
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        raise StreamingError("pyspark is not installed in this environment (pip install -e .)")
    return Path(next(iter(spec.submodule_search_locations)))


def spark_jar_set(spark_version: str | None = None, bundled: Path | None = None) -> JarSet:
    version = spark_version or importlib.metadata.version("pyspark")
    jars_dir = bundled if bundled is not None else pyspark_home() / "jars"
    shipped = frozenset(artifact_id(p.name) for p in jars_dir.glob("*.jar"))
    return JarSet(
        name=f"spark-{version}",
        coordinates=(
            f"org.apache.spark:spark-sql-kafka-0-10_2.13:{version}",
            f"org.apache.spark:spark-avro_2.13:{version}",
        ),
        exclude_artifacts=shipped,
    )


# Delta Lake's release built for each Spark line zkcdc runs on (Delta names its Scala artifact
# after the Spark line it was compiled against).
DELTA_RELEASES = {"4.2": "4.4.0"}


def delta_jar_set(spark_version: str | None = None, bundled: Path | None = None) -> JarSet:
    version = spark_version or importlib.metadata.version("pyspark")
    line = ".".join(version.split(".")[:2])
    delta = DELTA_RELEASES.get(line)
    if delta is None:
        known = ", ".join(sorted(DELTA_RELEASES))
        raise StreamingError(f"no Delta Lake release is paired with Spark {line} (known: {known})")
    jars_dir = bundled if bundled is not None else pyspark_home() / "jars"
    return JarSet(
        name=f"delta-{delta}-spark-{line}",
        coordinates=(f"io.delta:delta-spark_{line}_2.13:{delta}",),
        exclude_artifacts=frozenset(artifact_id(p.name) for p in jars_dir.glob("*.jar")),
    )


def spark_jars(cache_dir: Path | None = None, lake: bool = False) -> list[Path]:
    """The jar files, from the cache (`ZKCDC_CACHE_DIR`), fetching them first if missing;
    with `lake`, Delta Lake's too."""
    cache = ArtifactCache(cache_dir or default_cache_dir())
    sets = [spark_jar_set(), *([delta_jar_set()] if lake else [])]
    try:
        return [jar for jar_set in sets for jar in cache.fetch(jar_set, announce=_print_err)]
    except JarFetchError as exc:
        raise StreamingError(str(exc)) from exc


def _print_err(line: str) -> None:
    print(line, file=sys.stderr)
