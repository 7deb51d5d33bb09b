"""Start, identify and stop the stack's JVMs; every process is recorded so `down` stops exactly those."""

from __future__ import annotations

import contextlib
import signal
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import psutil

from zkcdc.ground import waiting
from zkcdc.stack.errors import StackError

MARKER_PROPERTY = "zkcdc.stack"


# psutil reckons a start time as jiffies since boot plus /proc/stat's `btime`, and the kernel
# moves `btime` whenever the wall clock is slewed or stepped (NTP on a VM): the same process's
# start time can read a second or two apart over a long run. A pid reused within this window of
# the recorded start is not a risk worth a false "process exited".
START_TIME_TOLERANCE_S = 5.0


@dataclass(frozen=True)
class ProcessRecord:
    """A started process: its pid plus its creation time, so a reused pid is never mistaken."""

    name: str
    pid: int
    created: float  # psutil's create_time(): seconds since the epoch

    def to_json(self) -> dict[str, object]:
        return {"name": self.name, "pid": self.pid, "created": self.created}

    @classmethod
    def from_json(cls, raw: dict[str, object]) -> ProcessRecord:
        return cls(str(raw["name"]), int(str(raw["pid"])), float(str(raw.get("created", -1))))


def created(pid: int) -> float:
    """When `pid` was created, or -1 when there is no such process."""
    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
        return -1


def _process(record: ProcessRecord) -> psutil.Process | None:
    """The live process `record` names; None if it ended (or its pid is another's now)."""
    try:
        process = psutil.Process(record.pid)
        if abs(process.create_time() - record.created) > START_TIME_TOLERANCE_S:
            return None
        if process.status() == psutil.STATUS_ZOMBIE:
            with contextlib.suppress(psutil.Error):
                process.wait(0)  # a child of ours: reap it
            return None
        return process
    except (psutil.Error, psutil.TimeoutExpired):
        return None


def is_running(record: ProcessRecord) -> bool:
    return _process(record) is not None


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
    options: Sequence[str] = (),
) -> list[str]:
    return [
        "java",
        f"-Xmx{heap_mb}m",
        "-Xms64m",
        "-XX:+UseG1GC",
        "-XX:MaxGCPauseMillis=20",
        "-XX:+ExitOnOutOfMemoryError",
        "-Djava.awt.headless=true",
        *options,
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
    return ProcessRecord(name, proc.pid, created(proc.pid))


def find_marked(state_dir: Path) -> list[int]:
    """Pids of running processes started for exactly this state dir."""
    wanted = f"-D{MARKER_PROPERTY}={state_dir}"
    return [
        p.info["pid"]
        for p in psutil.process_iter(["pid", "cmdline"])
        if wanted in (p.info["cmdline"] or ())
    ]


def terminate(
    records: Sequence[ProcessRecord], timeout_s: float, sig: int = signal.SIGTERM
) -> list[ProcessRecord]:
    """Signal every live record, wait up to `timeout_s`, SIGKILL what is left; returns what was
    killed."""
    live = {r: p for r in records if (p := _process(r)) is not None}
    for process in live.values():
        with contextlib.suppress(psutil.Error):
            process.send_signal(sig)
    alive = _wait_gone(list(live.values()), timeout_s)
    for process in alive:
        with contextlib.suppress(psutil.Error):
            process.kill()
    _wait_gone(alive, 30)
    return [r for r, p in live.items() if p in alive]


def _wait_gone(processes: list[psutil.Process], timeout_s: float) -> list[psutil.Process]:
    """Waits until each has exited; those still running after `timeout_s` are returned. An
    exited process that another process started (`zkcdc stack migrate` stopping a broker that
    `up` in a test started) stays a zombie until its parent reaps it: gone all the same."""
    alive = processes

    def gone() -> bool:
        nonlocal alive
        _, alive = psutil.wait_procs(alive, timeout=0.2)
        alive = [p for p in alive if not _exited(p)]
        return not alive

    with contextlib.suppress(waiting.WaitFailed):
        waiting.wait_until(gone, timeout_s, what="the processes to exit", interval_s=0)
    return alive


def _exited(process: psutil.Process) -> bool:
    try:
        return bool(process.status() == psutil.STATUS_ZOMBIE)
    except psutil.Error:
        return True


def tail(path: Path, lines: int = 20) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:])
