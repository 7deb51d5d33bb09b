"""A real schema registry on loopback: Apicurio Registry, built once from Maven Central.

Apicurio serves Confluent's registry API under `/apis/ccompat/v6`, the API zkcdc's registry
mode speaks. Maven Central holds its application jar but no runnable build, so the build is
done here, once, into the cache: a Quarkus build of that jar (in-memory H2 storage). As
Central holds it, 2.3.1 is the newest version whose parts are all there (newer ones lack
modules there); its config-index extension comes at 0.1.10, the one version of
that extension whose build-time half is there."""

from __future__ import annotations

import shutil
import subprocess
import urllib.error
import urllib.request
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from zkcdc.ground import child_processes, waiting
from zkcdc.ground.fill_lock import filling
from zkcdc.ground.maven_jars import JarFetchError
from zkcdc.stack.errors import StackError
from zkcdc.stack.probes import free_port

APICURIO = "2.3.1.Final"
QUARKUS = "2.7.6.Final"
CONFIG_INDEX = "0.1.10.Final"
API = "/apis/ccompat/v6"
MAIN_CLASS = "io.quarkus.runner.GeneratedMain"  # the runner jar's; its manifest has the rest

_POM = f"""<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>zkcdc</groupId><artifactId>apicurio-registry</artifactId><version>1</version>
  <properties>
    <maven.compiler.release>17</maven.compiler.release>
    <project.build.sourceEncoding>UTF-8</project.build.sourceEncoding>
  </properties>
  <dependencyManagement><dependencies>
    <dependency><groupId>io.apicurio</groupId>
      <artifactId>apicurio-common-app-components-config-index</artifactId>
      <version>{CONFIG_INDEX}</version></dependency>
    <dependency><groupId>io.apicurio</groupId>
      <artifactId>apicurio-common-app-components-config-index-deployment</artifactId>
      <version>{CONFIG_INDEX}</version></dependency>
    <dependency><groupId>io.apicurio</groupId><artifactId>apicurio-registry</artifactId>
      <version>{APICURIO}</version><type>pom</type><scope>import</scope></dependency>
  </dependencies></dependencyManagement>
  <dependencies>
    <dependency><groupId>io.apicurio</groupId><artifactId>apicurio-registry-app</artifactId>
      <version>{APICURIO}</version>
      <!-- JSON Schema validation, not on Central; zkcdc registers Avro only -->
      <exclusions><exclusion><groupId>com.github.everit-org.json-schema</groupId>
        <artifactId>org.everit.json.schema</artifactId></exclusion></exclusions>
    </dependency>
  </dependencies>
  <build><plugins>
    <plugin><groupId>io.quarkus</groupId><artifactId>quarkus-maven-plugin</artifactId>
      <version>{QUARKUS}</version>
      <executions><execution><goals><goal>build</goal></goals></execution></executions>
    </plugin>
  </plugins></build>
</project>
"""

# Apicurio's parent pom names other repositories; everything comes from Central.
_SETTINGS = """<settings><mirrors><mirror><id>central</id><mirrorOf>*</mirrorOf>
<url>https://repo.maven.apache.org/maven2</url></mirror></mirrors></settings>
"""

# The app jar's beans are found only if Quarkus indexes it.
_INDEX = """
quarkus.index-dependency.registry.group-id=io.apicurio
quarkus.index-dependency.registry.artifact-id=apicurio-registry-app
"""

Runner = Callable[[list[str], Path], "subprocess.CompletedProcess[str]"]


def _run_mvn(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, check=False)


def registry_jar(
    cache_dir: Path,
    announce: Callable[[str], None] = lambda _: None,
    runner: Runner = _run_mvn,
) -> Path:
    """The runnable registry jar, built into `<cache>/apicurio-registry-<version>/` once."""
    home = cache_dir / f"apicurio-registry-{APICURIO}"
    built = home / "app" / "apicurio-registry-1-runner.jar"
    if built.is_file():
        return built
    with filling(cache_dir, home.name):
        if built.is_file():
            return built
        return _build_registry(home, built, announce, runner)


def _build_registry(
    home: Path, built: Path, announce: Callable[[str], None], runner: Runner
) -> Path:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise JarFetchError("mvn not found on PATH: install Maven (apt-get install maven)")
    announce(f"building Apicurio Registry {APICURIO} with mvn into {home} (once)")
    work = home / "build"
    shutil.rmtree(work, ignore_errors=True)
    (work / "src" / "main" / "resources").mkdir(parents=True)
    (work / "pom.xml").write_text(_POM)
    (work / "settings.xml").write_text(_SETTINGS)
    base = [mvn, "-B", "-s", "settings.xml", f"-Dmaven.repo.local={home / 'm2'}"]
    _mvn(runner, [*base, "dependency:resolve"], work)
    app = home / "m2" / "io" / "apicurio" / "apicurio-registry-app" / APICURIO
    with zipfile.ZipFile(app / f"apicurio-registry-app-{APICURIO}.jar") as jar:
        properties = jar.read("application.properties").decode()
    (work / "src" / "main" / "resources" / "application.properties").write_text(properties + _INDEX)
    _mvn(runner, [*base, "package", "-DskipTests"], work)
    target = home / "app"
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir()
    shutil.copy2(work / "target" / built.name, built)
    shutil.copytree(work / "target" / "lib", target / "lib")
    shutil.rmtree(work, ignore_errors=True)
    shutil.rmtree(home / "m2", ignore_errors=True)  # Quarkus's build tools: not run again
    return built


def _mvn(runner: Runner, args: list[str], work: Path) -> None:
    result = runner(args, work)
    log = work / "mvn.log"
    with log.open("a") as out:
        out.write(result.stdout + result.stderr)
    if result.returncode != 0:
        errors = [line for line in result.stdout.splitlines() if "[ERROR]" in line]
        first = errors[0].replace("[ERROR]", "").strip() if errors else "no [ERROR] line"
        raise JarFetchError(f"building Apicurio Registry failed: {first} (full log: {log})")


def registry_answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/subjects", timeout=2) as response:
            return bool(response.status == 200)
    except (OSError, urllib.error.URLError):
        return False


@dataclass
class SchemaRegistry:
    """A running registry process; `url` is what zkcdc's `--schema-registry` takes."""

    process: subprocess.Popen[Any]
    port: int
    log_file: Path
    host: str = "127.0.0.1"

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}{API}"

    def answering(self) -> bool:
        return registry_answers(self.url)

    def stop(self) -> int:
        return child_processes.stop(self.process, 20.0)


def start_registry(
    jar: Path,
    log_file: Path,
    port: int | None = None,
    heap: str = "256m",
    ready_s: float = 120.0,
    java: str = "java",
) -> SchemaRegistry:
    """Starts the registry on loopback and waits until its API answers."""
    port = port or free_port()
    log: IO[bytes] = log_file.open("ab")
    process = subprocess.Popen(
        [java, f"-Xmx{heap}", f"-Dquarkus.http.port={port}", "-Dquarkus.http.host=127.0.0.1",
         "-jar", str(jar)],
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    log.close()
    registry = SchemaRegistry(process, port, log_file)
    try:
        waiting.wait_until(
            registry.answering, ready_s, what="the schema registry to start", interval_s=0.3,
            abandon=lambda: None if process.poll() is None else f"it exited {process.returncode}",
        )  # fmt: skip
    except waiting.WaitFailed as exc:
        registry.stop()
        tail = log_file.read_text(errors="replace")[-2000:]
        raise StackError(f"{exc} (log {log_file}):\n{tail}") from exc
    return registry
