"""The cycle collector paced for the capture loop: no full collection on its own, one on
purpose when due, everything back as it was afterwards."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest
from manual_clock import ManualClock

from zkcdc.capture.collector_pacing import CollectorPacing


@pytest.fixture(autouse=True)
def collector_as_found() -> Iterator[None]:
    threshold = gc.get_threshold()
    yield
    gc.set_threshold(*threshold)
    gc.unfreeze()


def test_full_collections_never_start_on_their_own_while_paced() -> None:
    young, middle, _ = gc.get_threshold()
    with CollectorPacing():
        assert gc.get_threshold()[:2] == (young, middle)  # the young generations as before
        assert gc.get_threshold()[2] >= 2**31 - 1


def test_settle_collects_cycles_and_freezes_the_survivors() -> None:
    class Node:
        other: object = None

    a, b = Node(), Node()
    a.other, b.other = b, a
    cycle = weakref.ref(a)
    del a, b
    kept = Node()
    with CollectorPacing() as pacing:
        pacing.settle()
        assert cycle() is None  # garbage only a collection finds: found
        assert gc.get_freeze_count() > 0
        # Frozen: in no generation any collection walks.
        assert not any(o is kept for o in gc.get_objects())


def test_the_paced_full_collection_runs_when_due_and_not_before() -> None:
    clock = ManualClock(1000.0)
    with CollectorPacing(full_every_s=60.0, now=clock) as pacing:
        clock.now += 59.0
        pacing.tick()
        assert pacing.full_collections == 0
        clock.now += 1.0
        pacing.tick()
        assert pacing.full_collections == 1
        clock.now += 30.0
        pacing.tick()
        assert pacing.full_collections == 1  # the next one 60 s after that one


def test_closing_restores_the_thresholds_and_unfreezes() -> None:
    before = gc.get_threshold()
    with CollectorPacing() as pacing:
        pacing.settle()
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


def test_pacing_holds_until_the_last_of_several_is_closed() -> None:
    before = gc.get_threshold()
    first, second = CollectorPacing(), CollectorPacing()
    first.open()
    second.open()
    first.close()
    assert gc.get_threshold() != before  # the second still runs its loop
    second.close()
    assert gc.get_threshold() == before
