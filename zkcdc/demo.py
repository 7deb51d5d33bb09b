"""`make demo`: the capture daemon watching the local stack through a small staged incident.

Starts `zkcdc capture` (publishing to `zkcdc.changes` and writing an event log), creates a
topic, stops a follower broker and starts it again, then stops the daemon with SIGTERM and
prints the records that carried typed events. Expects `zkcdc stack up` to have run."""

from __future__ import annotations

import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from capture.event_log import read_records
from zkcdc.stack import LocalStack, StackSettings

_daemon: subprocess.Popen[bytes] | None = None
_log_file: Path | None = None


def _log_tail() -> str:
    return "" if _log_file is None else "\n".join(_log_file.read_text().splitlines()[-10:])


def _wait(what: str, predicate: object, timeout_s: float = 90) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise SystemExit(f"demo: timed out waiting for {what}")
        if _daemon is not None and _daemon.poll() is not None:
            raise SystemExit(f"demo: capture exited {_daemon.returncode}:\n{_log_tail()}")
        time.sleep(0.3)
    print(f"demo: {what}", flush=True)


def main() -> None:
    stack = LocalStack.open(StackSettings().state_dir)
    info = stack.info()
    work = Path(tempfile.mkdtemp(prefix="zkcdc-demo-"))
    log = work / "events"
    global _daemon, _log_file
    _log_file = work / "capture.log"
    daemon = _daemon = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "zkcdc",
            "capture",
            "--zookeeper",
            info.zookeeper_connect,
            "--bootstrap-servers",
            info.bootstrap_servers,
            "--event-log",
            str(log),
            "--state-dir",
            str(work / "state"),
        ],
        stderr=(work / "capture.log").open("wb"),
    )

    def events() -> list[tuple[str, dict[str, Any]]]:
        if not log.exists():
            return []
        return [(r["op"], e) for r in read_records(log, lambda d: None) for e in r["events"]]

    def seen(kind: str, **fields: object) -> bool:
        return any(
            e["type"] == kind and all(e.get(k) == v for k, v in fields.items()) for _, e in events()
        )

    try:
        _wait("capture has its snapshot", lambda: seen("CONTROLLER_ELECTED"))
        topic = f"demo-orders-{int(time.time())}"
        admin = AdminClient({"bootstrap.servers": info.bootstrap_servers})
        for attempt in range(20):  # a fresh cluster may still be settling its controller
            try:
                admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(60)
                break
            except KafkaException as exc:
                if attempt == 19 or not exc.args[0].retriable():
                    raise
                time.sleep(1)
        _wait(f"topic {topic} created", lambda: seen("TOPIC_CREATED", topic=topic))
        _wait(
            "a full ISR",
            lambda: any(
                e.get("topic") == topic and len(e.get("isr") or e.get("isr_after") or []) == 3
                for _, e in events()
            ),
        )
        state = next(
            e for _, e in events() if e.get("topic") == topic and e.get("leader") is not None
        )
        follower = next(b for b in (1, 2, 3) if b != state["leader"])
        stack.stop_broker(follower, signal.SIGTERM)
        _wait(f"broker {follower} stopped: ISR_SHRUNK", lambda: seen("ISR_SHRUNK", topic=topic))
        stack.start_broker(follower)
        _wait(f"broker {follower} back: ISR_EXPANDED", lambda: seen("ISR_EXPANDED", topic=topic))
    finally:
        daemon.send_signal(signal.SIGTERM)
        code = daemon.wait(60)
    print(f"demo: capture stopped with exit code {code}; records with events:\n", flush=True)
    for record in read_records(log):
        if record["events"] and record["op"] != "READ":
            kinds = ", ".join(e["type"] for e in record["events"])
            print(f"  seq {record['seq']:>5}  {record['op']:<6} {record['path']}  {kinds}")
    print(f"\nfull log: zkcdc events cat {log}")
    sys.exit(code)


if __name__ == "__main__":
    main()
