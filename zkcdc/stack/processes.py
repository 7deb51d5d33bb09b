"""Start, identify and stop the stack's JVMs; every process is recorded so `down` stops exactly those."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from zkcdc.stack.errors import StackError

MARKER_PROPERTY = "zkcdc.stack"


@dataclass(frozen=True)
class ProcessRecord:
    """A started process: its pid plus its kernel start time, so a reused pid is never mistaken."""

    name: str
    pid: int
    start_ticks: int

    def to_json(self) -> dict[str, object]:
        return {"name": self.name, "pid": self.pid, "start_ticks": self.start_ticks}

    @classmethod
    def from_json(cls, raw: dict[str, object]) -> ProcessRecord:
        return cls(str(raw["name"]), int(str(raw["pid"])), int(str(raw["start_ticks"])))


def start_ticks(pid: int) -> int:
    """The kernel start time of `pid`, or -1 when it is gone."""
    stat = _proc_stat(pid)
    return stat[1] if stat else -1


def _proc_stat(pid: int) -> tuple[str, int] | None:
    """(state letter, start time in clock ticks) of a pid, or None when there is no such process."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after its closing paren.
    fields = raw[raw.rindex(")") + 2 :].split()
    return fields[0], int(fields[19])


def _reap(pid: int) -> None:
    """Collect an exited child of ours so it does not linger as a zombie."""
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def is_running(record: ProcessRecord) -> bool:
    _reap(record.pid)
    stat = _proc_stat(record.pid)
    return stat is not None and stat[0] not in ("Z", "X") and stat[1] == record.start_ticks


def java_command(
    *,
    heap_mb: int,
    classpath: Sequence[Path],
    main_class: str,
    args: Sequence[str],
    state_dir: Path,
    log4j_file: Path,
    logs_dir: Path,
    properties: Sequence[str] = (),
) -> list[str]:
    return [
        "java",
        f"-Xmx{heap_mb}m",
        "-Xms64m",
        "-XX:+UseG1GC",
        "-XX:MaxGCPauseMillis=20",
        "-XX:+ExitOnOutOfMemoryError",
        "-Djava.awt.headless=true",
        f"-Dlog4j.configuration=file:{log4j_file}",
        f"-Dkafka.logs.dir={logs_dir}",
        # Names the stack on the command line: `down` finds processes whose record was lost.
        f"-D{MARKER_PROPERTY}={state_dir}",
        *(f"-D{p}" for p in properties),
        "-cp",
        ":".join(str(p) for p in classpath),
        main_class,
        *args,
    ]


def spawn(name: str, command: Sequence[str], log_file: Path) -> ProcessRecord:
    """Start a detached process (own session, so it outlives the CLI) with output to `log_file`."""
    log_file.parent.mkdir(parents=True, exist_ok=True)
    with log_file.open("ab") as log:
        try:
            proc = subprocess.Popen(
                list(command),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        except OSError as exc:
            raise StackError(f"could not start {name}: {exc}") from exc
    return ProcessRecord(name, proc.pid, start_ticks(proc.pid))


def find_marked(state_dir: Path) -> list[int]:
    """Pids of running processes started for exactly this state dir."""
    wanted = f"-D{MARKER_PROPERTY}={state_dir}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if wanted in argv:
            found.append(int(entry.name))
    return found


def terminate(
    records: Sequence[ProcessRecord],
    timeout_s: float,
    sig: int = signal.SIGTERM,
    sleep: Callable[[float], None] = time.sleep,
    now: Callable[[], float] = time.monotonic,
) -> list[ProcessRecord]:
    """Signal every live record, wait up to `timeout_s`, SIGKILL what is left; returns what was killed."""
    live = [r for r in records if is_running(r)]
    for record in live:
        send_signal(record, sig)
    deadline = now() + timeout_s
    while now() < deadline and any(is_running(r) for r in live):
        sleep(0.1)
    killed = [r for r in live if is_running(r)]
    for record in killed:
        send_signal(record, signal.SIGKILL)
    while any(is_running(r) for r in killed):
        sleep(0.05)
    return killed


def send_signal(record: ProcessRecord, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(record.pid, sig)


def tail(path: Path, lines: int = 20) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:])
