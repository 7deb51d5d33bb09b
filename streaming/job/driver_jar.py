"""A jar of small classes (`driver_classes/*.java`) for a local master's driver, compiled once
with the JDK's `javac` against pyspark's own jars into the user's cache; a machine with no
`javac` goes on without them (Spark's own classes, only slower):

- `zkcdc.hadoop.*`: the local file system over java.nio, so Spark writes its checkpoint without
  forking processes: Hadoop without its native library (pyspark ships none) runs `chmod` once
  and `readlink` four times for each file it writes there, ~50 ms a file on a busy 2-core
  machine and several files a micro-batch;
- `zkcdc.spark.TaskSqlConf`: a plugin that gives each task one SQL configuration, which
  Spark 4.2 otherwise builds anew each time a task asks (for every field of every nested
  record the Avro reader decodes: over a third of a lake backfill's CPU)."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from zkcdc.ground import logs

log = logs.get("zkcdc.stream")

SOURCES = Path(__file__).parent / "driver_classes"
FILE_SYSTEM = "zkcdc.hadoop.NioLocalFileSystem"
FILE_CONTEXT_FS = "zkcdc.hadoop.NioLocalFs"
TASK_SQL_CONF = "zkcdc.spark.TaskSqlConf"
HADOOPS_OWN = {
    "spark.hadoop.fs.file.impl": "org.apache.hadoop.fs.LocalFileSystem",
    "spark.hadoop.fs.AbstractFileSystem.file.impl": "org.apache.hadoop.fs.local.LocalFs",
    "spark.plugins": "",
}


def driver_jar_conf(jar: Path | None, master: str) -> dict[str, str]:
    """Spark settings that use the jar's classes: on a local master only (the jar goes on the
    driver's class path at its launch, where Hadoop and Spark look for them; executors of a
    cluster would need it on each worker). Elsewhere Spark's and Hadoop's own, named: the
    options of PySpark's session builders are shared by the process, so a session on a
    cluster after a local one (B9's throughput) would otherwise send executors our classes."""
    if jar is None or not master.startswith("local"):
        return dict(HADOOPS_OWN)
    return {
        "spark.driver.extraClassPath": str(jar),
        "spark.hadoop.fs.file.impl": FILE_SYSTEM,
        "spark.hadoop.fs.AbstractFileSystem.file.impl": FILE_CONTEXT_FS,
        "spark.plugins": TASK_SQL_CONF,
    }


def driver_jar(cache_dir: Path, spark_jars_dir: Path) -> Path | None:
    """The jar, built if missing; None (and one warning) when it cannot be."""
    sources = sorted(SOURCES.glob("*.java"))
    digest = hashlib.sha256()
    for source in sources:
        digest.update(source.read_bytes())
    # Compiled against these: another pyspark's or Hadoop's jars build the classes again.
    against = sorted(p.name for pattern in ("hadoop-*.jar", "spark-*.jar")
                     for p in spark_jars_dir.glob(pattern))  # fmt: skip
    digest.update(",".join(against).encode())
    jar = cache_dir / "_build" / f"zkcdc-driver-{digest.hexdigest()[:12]}.jar"
    if jar.exists():
        return jar
    javac, jar_tool = _jdk_tool("javac"), _jdk_tool("jar")
    if javac is None or jar_tool is None:
        log.warning("no javac: Spark's checkpoint writes fork chmod and readlink for each file, "
                    "and tasks build their SQL settings often (install a JDK to spare that)")  # fmt: skip
        return None
    jar.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=jar.parent) as work:
        classes = Path(work) / "classes"
        built = Path(work) / jar.name
        try:
            subprocess.run([javac, "--release", "17", "-nowarn", "-cp", f"{spark_jars_dir}/*",
                            "-d", str(classes), *map(str, sources)],
                           check=True, capture_output=True, text=True)  # fmt: skip
            subprocess.run([jar_tool, "cf", str(built), "-C", str(classes), "zkcdc"],
                           check=True, capture_output=True, text=True)  # fmt: skip
        except (OSError, subprocess.CalledProcessError) as exc:
            detail = getattr(exc, "stderr", "") or str(exc)
            log.warning("zkcdc's driver classes did not build; Spark's own are used (slower)",
                        reason=detail.strip()[:300])  # fmt: skip
            return None
        os.replace(built, jar)  # atomic: another process building the same jar is harmless
    return jar


def _jdk_tool(name: str) -> str | None:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / name).exists():
        return str(Path(java_home) / "bin" / name)
    return shutil.which(name)


def local_file_system(spark: Any) -> str:
    """The class Hadoop writes `file:` paths with in this session (said in the job's log)."""
    conf = spark._jsc.hadoopConfiguration()
    local = spark._jvm.org.apache.hadoop.fs.FileSystem.getLocal(conf)
    return str(local.getRawFileSystem().getClass().getName())
