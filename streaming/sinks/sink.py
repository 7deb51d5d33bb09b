"""What every alert sink is: it takes a micro-batch's alerts, in event-time order, once the
job has them; says what it guarantees when the job crashes mid-batch; and, if it can, reads
back what it already holds, so a re-run batch sends only the rest."""

from __future__ import annotations

from typing import NamedTuple, Protocol


class AlertText(NamedTuple):
    """An alert as the job hands it to the sinks: its JSON text (`Alert.as_text`) and what the
    sinks need of it without parsing it again."""

    alert_id: str
    status: str
    at_ms: int  # event time: the start of a FIRING, the end of a RESOLVED
    text: str


AlertKey = tuple[str, str]  # (alert_id, status): an alert's one delivery


class Sink(Protocol):
    name: str
    guarantee: str
    """One line, for the docs and `--help`: what a crash mid-batch leaves in this sink."""

    def deliver(self, alerts: list[AlertText]) -> None:
        """Takes the alerts (sorted by event time); returns once they are delivered."""

    def delivered(self, since_ms: int) -> set[AlertKey] | None:
        """The alerts this sink holds from `since_ms` (wall time) on, or None if it cannot
        tell (a console, a webhook): what a re-run batch must not send again."""

    def close(self) -> None: ...
