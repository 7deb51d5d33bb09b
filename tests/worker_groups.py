"""Which tests must share an xdist worker, and a scheduler that keeps them together.

xdist's own `--dist loadgroup` marks a group by appending `@group` to a test's node id on the
worker; pytest 9.2 derives node ids from elsewhere, so the suffix no longer takes and every
test is spread on its own (a module fixture such as the 23 simulated scenarios was then run on
three workers). Here the workers write each grouped test's node id and group to a file the
controller's scheduler reads when it splits the tests into units of work."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

ENV = "ZKCDC_TEST_GROUPS_FILE"


def shared_fixture_group(module: str, fixtures: Iterable[tuple[str, str]]) -> str | None:
    """The group of a test in `module` (its node id's file part) that uses the module- or
    package-scoped fixtures `fixtures`, each (scope, the node id of where it is defined); None
    when it uses none. A package's fixture is one instance for every module of its package, so
    it names the group (a package's stack before a module's). Module fixtures name the test's
    module, whichever of them the test uses: one fixture is often built on another (an alert
    job over the staged scenarios), and the tests of the inner one and those of the outer one
    must share the inner one's instance, or it is made again on a second worker."""
    fixtures = list(fixtures)
    packages = sorted(where or "root" for scope, where in fixtures if scope == "package")
    if packages:
        return f"{packages[0]}::package"
    if any(scope == "module" for scope, _ in fixtures):
        return f"{module}::module"
    return None


def publish(groups: dict[str, str]) -> None:
    """On a worker: the groups it found, written whole (each worker finds the same ones)."""
    where = os.environ.get(ENV)
    if not where:
        return
    target = Path(where)
    partial = target.with_name(f"{target.name}.{os.getpid()}")
    partial.write_text(json.dumps(groups))
    partial.replace(target)


def read(where: Path) -> dict[str, str]:
    try:
        return dict(json.loads(where.read_text()))
    except (OSError, ValueError):
        return {}


def make_scheduler(config: Any, log: Any) -> Any:
    """The controller's scheduler: xdist's loadgroup, its units of work from the groups file."""
    from xdist.scheduler import LoadGroupScheduling

    where = Path(os.environ[ENV])

    class FileGroupScheduling(LoadGroupScheduling):  # type: ignore[misc]
        _groups: dict[str, str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self._groups is None:
                self._groups = read(where)
            return self._groups.get(nodeid, nodeid)

    return FileGroupScheduling(config, log)
