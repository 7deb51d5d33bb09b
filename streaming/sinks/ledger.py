"""The last micro-batch every sink took, kept in the job's checkpoint folder.

Spark re-runs the last micro-batch after a crash: a batch the ledger names is not delivered
again. A batch the job died in the middle of delivering is marked pending (with the wall time
it began): its re-run asks the sinks what they hold since then and sends only the rest."""

from __future__ import annotations

from pathlib import Path

from zkcdc.ground import logs
from zkcdc.ground.private_files import atomic_write

log = logs.get("zkcdc.stream")


class BatchLedger:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._warned = False

    def last(self) -> int:
        try:
            return int(self.path.read_text())
        except FileNotFoundError:
            return -1
        except (OSError, ValueError) as exc:
            # Written whole or not at all (atomic_write): damage from outside the job. What it
            # would have said is only which micro-batch not to deliver again after a crash.
            if not self._warned:
                self._warned = True
                log.warning(
                    "the sink ledger cannot be read: a micro-batch Spark runs again after a "
                    "crash may be delivered again (its alerts under the same alert_id)",
                    ledger=str(self.path), reason=type(exc).__name__,
                )  # fmt: skip
            return -1

    def mark(self, batch_id: int) -> None:
        """Every sink took `batch_id`."""
        atomic_write(self.path, str(batch_id))
        self._pending_file.unlink(missing_ok=True)

    def begin(self, batch_id: int, now_ms: int) -> None:
        """`batch_id` is about to be delivered (at wall time `now_ms`)."""
        atomic_write(self._pending_file, f"{batch_id} {now_ms}")

    def pending(self) -> tuple[int, int] | None:
        """(batch, wall ms) of a delivery that began and never finished."""
        try:
            batch, ms = self._pending_file.read_text().split()
            return int(batch), int(ms)
        except (OSError, ValueError):
            return None

    @property
    def _pending_file(self) -> Path:
        return self.path.with_name(self.path.name + ".pending")
