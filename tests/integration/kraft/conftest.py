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


@pytest.fixture(autouse=True)
def kraft_stack_whole_after_each_test(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test that stopped a broker or controller and failed before starting it again leaves
    the stack whole for the next test: one failure, not the next tests' too (a run once lost
    three to one broker left down)."""
    yield
    stack = request.config.stash.get(KRAFT_KEY, None)
    if stack is None or "kraft_stack" not in request.fixturenames:
        return
    running = stack.running()
    for controller in stack.layout.controllers:
        if not running.get(controller.name, True):
            stack.start_controller(controller.name)
    for broker in stack.layout.brokers:
        if not running.get(broker.name, True):
            stack.start_broker(broker.broker_id)
