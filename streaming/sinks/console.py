"""`--console`: each alert's JSON on standard output, for a person watching."""

from __future__ import annotations

from zkcdc.streaming.sinks.sink import AlertKey, AlertText


class ConsoleSink:
    name = "console"
    guarantee = "at least once: a batch re-run after a crash may print some alerts again"

    def deliver(self, alerts: list[AlertText]) -> None:
        for alert in alerts:
            print(alert.text, flush=True)

    def delivered(self, since_ms: int) -> set[AlertKey] | None:
        return None

    def close(self) -> None:
        pass
