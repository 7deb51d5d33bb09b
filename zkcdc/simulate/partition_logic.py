"""What Kafka's ZooKeeper-mode controller and partition leaders write into a partition's state
znode when something happens to a broker: pure functions from one state to the next.

Two kinds of writer, as in Kafka 3.9:
- the controller (broker failure, elections): every write bumps `leader_epoch`;
- a leader's AlterPartition (ISR shrink/expand while it stays leader): `leader_epoch` stays,
  only the znode version (the partition epoch) moves."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace

NO_LEADER = -1


@dataclass(frozen=True)
class PartitionState:
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int


def initial(replicas: Sequence[int], controller_epoch: int) -> PartitionState:
    """A new partition: the preferred (first) replica leads, every replica in sync."""
    return PartitionState(replicas[0], 0, tuple(replicas), controller_epoch)


def elect(state: PartitionState, leader: int, isr: Sequence[int], epoch: int) -> PartitionState:
    return PartitionState(leader, state.leader_epoch + 1, tuple(isr), epoch)


def after_broker_failure(
    replicas: Sequence[int], state: PartitionState, dead: int, live: Collection[int], epoch: int
) -> PartitionState | None:
    """The controller's write for one partition when broker `dead` goes, or None if none.

    A partition it led moves to the first live in-sync replica in assignment order; with none
    left it goes offline (leader -1) and keeps its last ISR member, as Kafka never empties an
    ISR. A partition it followed drops it from the ISR."""
    if state.leader == dead:
        isr = [b for b in state.isr if b != dead]
        leader = next((b for b in replicas if b in isr and b in live and b != dead), None)
        if leader is None:
            return elect(state, NO_LEADER, state.isr if len(state.isr) == 1 else isr, epoch)
        return elect(state, leader, isr, epoch)
    if dead in state.isr and len(state.isr) > 1:
        return elect(state, state.leader, [b for b in state.isr if b != dead], epoch)
    return None


def after_broker_return(
    replicas: Sequence[int], state: PartitionState, back: int, epoch: int
) -> list[PartitionState]:
    """The writes that follow broker `back` returning: an offline partition it can lead gets it
    as leader (controller), then the leader takes it back into the ISR once it caught up."""
    if back not in replicas:
        return []
    writes = []
    if state.leader == NO_LEADER and back in state.isr:
        state = elect(state, back, [back], epoch)
        writes.append(state)
    if back not in state.isr and state.leader != NO_LEADER:
        writes.append(expand_isr(state, back, epoch))
    return writes


def shrink_isr(state: PartitionState, broker: int, epoch: int) -> PartitionState:
    """The leader drops a lagging follower (AlterPartition: same leader epoch)."""
    return replace(state, isr=tuple(b for b in state.isr if b != broker), controller_epoch=epoch)


def expand_isr(state: PartitionState, broker: int, epoch: int) -> PartitionState:
    """The leader takes a caught-up follower back (AlterPartition: same leader epoch)."""
    return replace(state, isr=(*state.isr, broker), controller_epoch=epoch)


def unclean_election(
    replicas: Sequence[int], state: PartitionState, live: Collection[int], epoch: int
) -> PartitionState | None:
    """With `unclean.leader.election.enable`, an offline partition takes the first live replica
    although it was not in sync: the ISR restarts from it, and data may be lost."""
    leader = next((b for b in replicas if b in live and b not in state.isr), None)
    if leader is None:
        return None
    return elect(state, leader, [leader], epoch)


def healthy(
    replicas: Sequence[int], state: PartitionState, live: Collection[int], epoch: int
) -> PartitionState | None:
    """The state of a partition once every live replica caught up and its preferred replica
    leads again (Kafka's auto leader rebalance), or None if it is there already."""
    isr = (
        *(b for b in state.isr if b in live),
        *(b for b in replicas if b in live and b not in state.isr),
    )
    if not isr:
        return None  # nothing live to lead: stays as it is
    preferred = replicas[0] if replicas[0] in isr else isr[0]
    leader = state.leader if state.leader in isr and preferred not in live else preferred
    if leader == state.leader and set(isr) == set(state.isr):
        return None
    if leader != state.leader:
        return elect(state, leader, isr, epoch)
    return replace(state, isr=isr, controller_epoch=epoch)
