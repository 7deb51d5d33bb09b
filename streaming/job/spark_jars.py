"""The jars a Spark job of zkcdc needs: Spark's Kafka source/sink and Avro functions at
pyspark's version, minus what pyspark ships; fetched with mvn once into the user's cache."""

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


def spark_jars(cache_dir: Path | None = None) -> list[Path]:
    """The jar files, from the cache (`ZKCDC_CACHE_DIR`), fetching them first if missing."""
    cache = ArtifactCache(cache_dir or default_cache_dir())
    try:
        return cache.fetch(spark_jar_set(), announce=_print_err)
    except JarFetchError as exc:
        raise StreamingError(str(exc)) from exc


def _print_err(line: str) -> None:
    print(line, file=sys.stderr)
