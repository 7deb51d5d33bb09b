"""Jars fetched once with `mvn` into a cache outside the repo; later runs download nothing."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from zkcdc.ground.errors import ZkcdcError
from zkcdc.ground.fill_lock import filling


class JarFetchError(ZkcdcError):
    """mvn is missing, or could not fetch a set of jars."""


Runner = Callable[[Sequence[str], Path], "subprocess.CompletedProcess[str]"]

_JAR_NAME = re.compile(r"^(?P<artifact>.+)-(?P<version>\d+(?:\.\d+)*(?:[.-][A-Za-z0-9_]+)*)\.jar$")


@dataclass(frozen=True)
class JarSet:
    """A named set of Maven coordinates, copied with their runtime dependencies into one folder."""

    name: str
    coordinates: tuple[str, ...]
    exclude_artifacts: frozenset[str] = frozenset()

    def pom(self) -> str:
        deps = []
        for coordinate in self.coordinates:
            group, artifact, version = coordinate.split(":")
            deps.append(
                f"<dependency><groupId>{group}</groupId><artifactId>{artifact}</artifactId>"
                f"<version>{version}</version></dependency>"
            )
        return (
            '<project xmlns="http://maven.apache.org/POM/4.0.0">'
            "<modelVersion>4.0.0</modelVersion><groupId>zkcdc</groupId>"
            f"<artifactId>fetch-{self.name}</artifactId><version>1</version><packaging>pom</packaging>"
            f"<dependencies>{''.join(deps)}</dependencies></project>\n"
        )


def artifact_id(jar_name: str) -> str:
    """`kafka-clients-3.9.0.jar` -> `kafka-clients`."""
    match = _JAR_NAME.match(jar_name)
    return match.group("artifact") if match else jar_name.removesuffix(".jar")


def _run_mvn(args: Sequence[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(args), cwd=cwd, capture_output=True, text=True, check=False)


class ArtifactCache:
    """`<cache>/<set name>/` holds the jars and a manifest naming the coordinates they came from."""

    def __init__(self, cache_dir: Path, runner: Runner = _run_mvn) -> None:
        self.cache_dir = cache_dir
        self._runner = runner

    def folder(self, jar_set: JarSet) -> Path:
        return self.cache_dir / jar_set.name

    def cached(self, jar_set: JarSet) -> list[Path] | None:
        manifest = self.folder(jar_set) / "manifest.json"
        try:
            recorded = json.loads(manifest.read_text())
        except (OSError, ValueError):
            return None
        if recorded.get("coordinates") != list(jar_set.coordinates):
            return None
        jars = [self.folder(jar_set) / name for name in recorded.get("jars", [])]
        return jars if jars and all(j.is_file() for j in jars) else None

    def fetch(
        self, jar_set: JarSet, announce: Callable[[str], None] = lambda _: None
    ) -> list[Path]:
        """The jars of `jar_set`, downloading them with mvn only if the cache lacks them."""
        jars = self.cached(jar_set)
        if jars is not None:
            return jars
        with filling(self.cache_dir, jar_set.name):
            return self.cached(jar_set) or self._fetch(jar_set, announce)

    def _fetch(self, jar_set: JarSet, announce: Callable[[str], None]) -> list[Path]:
        mvn = shutil.which("mvn")
        if mvn is None:
            raise JarFetchError("mvn not found on PATH: install Maven (apt-get install maven)")
        announce(f"fetching {jar_set.name} jars with mvn into {self.folder(jar_set)} (once)")
        work = self.cache_dir / "_build" / jar_set.name
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        (work / "pom.xml").write_text(jar_set.pom())
        result = self._runner(
            [
                mvn,
                "-B",
                f"-Dmaven.repo.local={self.cache_dir / 'm2'}",
                "dependency:copy-dependencies",
                "-DincludeScope=runtime",
                f"-DoutputDirectory={work / 'jars'}",
            ],
            work,
        )
        (work / "mvn.log").write_text(result.stdout + result.stderr)
        if result.returncode != 0:
            raise JarFetchError(
                f"downloading {jar_set.name} with mvn failed: {_first_error(result.stdout)} "
                f"(full log: {work / 'mvn.log'})"
            )
        return self._install(jar_set, work / "jars")

    def _install(self, jar_set: JarSet, downloaded: Path) -> list[Path]:
        target = self.folder(jar_set)
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir(parents=True)
        names = []
        for jar in sorted(downloaded.glob("*.jar")):
            if artifact_id(jar.name) in jar_set.exclude_artifacts:
                continue
            shutil.move(str(jar), target / jar.name)
            names.append(jar.name)
        manifest = {"coordinates": list(jar_set.coordinates), "jars": names}
        # The manifest is written last: a fetch cut short leaves no manifest and is redone.
        (target / "manifest.json").write_text(json.dumps(manifest, indent=1))
        return [target / n for n in names]


def _first_error(mvn_output: str) -> str:
    for line in mvn_output.splitlines():
        if line.startswith("[ERROR]") and len(line) > 8:
            return line.removeprefix("[ERROR]").strip()[:300]
    return "mvn exited non-zero"
