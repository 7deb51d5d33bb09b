"""The KRaft stack (`zkcdc stack up --mode kraft`: three controllers, three brokers), started once
for the KRaft tests of this folder and stopped after them; its logs are shown when one fails."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from zkcdc.stack import LocalStack, StackSettings
from zkcdc.stack.probes import free_port_block
from zkcdc.stack.processes import tail

KRAFT_KEY = pytest.StashKey[LocalStack]()


@pytest.fixture(scope="package")
def kraft_stack(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LocalStack]:
    settings = StackSettings(
        state_dir=tmp_path_factory.mktemp("kraft-stack"),
        mode="kraft",
        kafka_port=free_port_block(3),
        controller_port=free_port_block(3),
    )
    stack = LocalStack(settings)
    request.config.stash[KRAFT_KEY] = stack
    try:
        stack.up()
        yield stack
    finally:
        stack.down()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    report = yield
    stack = item.config.stash.get(KRAFT_KEY, None)
    if report.failed and stack is not None and "kraft_stack" in getattr(item, "fixturenames", ()):
        for name in stack.records():
            text = tail(stack.layout.log_file(name), 40)
            report.sections.append((f"log of {name} (last lines)", text))
    return report
