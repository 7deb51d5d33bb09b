"""What every benchmark shares: `--quick`, the machine it ran on, its results file, its plots,
the local stack, and the small measuring helpers (percentiles, a process's CPU and RSS).

A benchmark is a script `bench/bN_*.py` with `main()` (measures, then `save`s a JSON result)
and `render(result) -> str` (that result as the Markdown `bench/report.py` puts into
BENCHMARKS.md). Full runs write `bench/results/<name>.json` and `bench/plots/<name>*.png`;
`--quick` runs write under `bench/results/quick/` and `bench/plots/quick/`, so a smoke run never
replaces the figures BENCHMARKS.md quotes.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import importlib.metadata
import json
import os
import platform
import shlex
import signal
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, cast

import psutil

from zkcdc.ground import child_processes, waiting

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
ZKCDC = [sys.executable, "-m", "zkcdc"]
# The tools the tests and benchmarks share but zkcdc does not ship (Alertmanager, Debian's and
# Go's binaries fetched for them) are the tests' own modules, and the suite's tools.
sys.path.append(str(ROOT / "tests"))
sys.path.append(str(ROOT / "tests" / "support"))
sys.path.append(str(ROOT / "tools"))


def parser(doc: str | None) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--quick", action="store_true", help="a small, fast version (a smoke run)")
    return p


def results_dir(quick: bool) -> Path:
    return BENCH / "results" / "quick" if quick else BENCH / "results"


def plots_dir(quick: bool) -> Path:
    return BENCH / "plots" / "quick" if quick else BENCH / "plots"


def machine() -> dict[str, Any]:
    java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr
    return {
        "cores": os.cpu_count(),
        "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "python": platform.python_version(),
        "java": java.splitlines()[0] if java else None,
        "kernel": platform.release(),
        # Spark's version moves the Spark figures: a result says which it was measured on.
        "pyspark": importlib.metadata.version("pyspark"),
    }


def save(
    name: str, result: dict[str, Any], quick: bool, argv: list[str] | None = None
) -> dict[str, Any]:
    """Writes the result with when, where and how it was measured (`argv`: the command line
    that reproduces it, by default this one); returns it so."""
    result = {
        "measured": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "command": shlex.join([".venv/bin/python", *(sys.argv if argv is None else argv)]),
        "quick": quick,
        "machine": machine(),
        **result,
    }
    out = results_dir(quick) / f"{name}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"results: {out.relative_to(ROOT)}", file=sys.stderr)
    return result


def load(name: str, quick: bool = False) -> dict[str, Any] | None:
    path = results_dir(quick) / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else None


@contextlib.contextmanager
def figure(name: str, quick: bool, size: tuple[float, float] = (7.0, 4.0)) -> Iterator[Any]:
    """A matplotlib figure saved as `bench/plots[/quick]/<name>.png` when the block ends."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = plt.figure(figsize=size)
    try:
        yield fig
        fig.tight_layout()
        out = plots_dir(quick) / f"{name}.png"
        out.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(out, dpi=110)
        print(f"plot: {out.relative_to(ROOT)}", file=sys.stderr)
    finally:
        plt.close(fig)


def spark_built() -> None:
    """A local Spark driver's one-time build on this machine and venv (zkcdc's driver jar and
    the archive of Spark's classes: about a minute, once) done before anything is timed. A
    user's first job pays it once; a benchmark timing a job's start would count it instead."""
    from zkcdc.streaming.job.spark_session import local_driver

    local_driver(wait=True)


@contextlib.contextmanager
def local_stack() -> Iterator[Any]:
    """The default local stack: the running one, or one started here and stopped at the end."""
    from zkcdc.stack import StackSettings
    from zkcdc.stack.cluster import running_or_started

    stack, info, started = running_or_started(StackSettings())
    try:
        yield info
    finally:
        if started:
            stack.down()


@contextlib.contextmanager
def own_stack(brokers: int = 3, zookeeper_heap_mb: int | None = None) -> Iterator[Any]:
    """A stack of the benchmark's own (free ports, a temporary state dir), so a big simulated
    tree never lands in the default stack; stopped and removed at the end."""
    import shutil
    import tempfile

    from zkcdc.stack import LocalStack, StackSettings
    from zkcdc.stack.probes import free_port_block

    state = Path(tempfile.mkdtemp(prefix="zkcdc-bench-stack-"))
    extra: dict[str, Any] = {}
    if zookeeper_heap_mb is not None:
        extra["zookeeper_heap_mb"] = zookeeper_heap_mb
    settings = StackSettings(
        state_dir=state,
        brokers=brokers,
        zookeeper_port=free_port_block(1),
        kafka_port=free_port_block(brokers),
        **extra,
    )
    stack = LocalStack(settings)
    try:
        yield stack.up()
    finally:
        stack.down()
        shutil.rmtree(state, ignore_errors=True)


def percentile(values: Sequence[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return float(ordered[min(len(ordered) - 1, int(q * len(ordered)))])


def cpu_seconds(pid: int) -> float:
    times = psutil.Process(pid).cpu_times()
    return float(times.user + times.system)


def runqueue_seconds(pid: int) -> float:
    """How long the process's main thread has been runnable but waiting for a CPU."""
    # The kernel's schedstat: psutil has no run-queue wait, the measure B1 and B5 explain with.
    return int(Path(f"/proc/{pid}/task/{pid}/schedstat").read_text().split()[1]) / 1e9


def pin(pids: list[int], cpus: set[int]) -> None:
    """Every thread of `pids` onto `cpus` (affinity is a thread's, not a process's)."""
    for pid in pids:
        try:
            tasks = [t.id for t in psutil.Process(pid).threads()]
        except psutil.Error:
            continue
        for task in tasks:
            with contextlib.suppress(OSError):
                os.sched_setaffinity(task, cpus)


def directory_mb(path: Path) -> float:
    """What the files under `path` take, in MB (a checkpoint, a state store)."""
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 1e6


def wait_for(what: str, check: Any, timeout_s: float, *processes: subprocess.Popen[Any]) -> None:
    """Until `check()`; ends the run with one line if the time is up or one of `processes`
    (each started as `ZKCDC` and its subcommand) exits first."""

    def exited() -> str | None:
        for process in processes:
            if process.poll() is not None:
                command = cast(list[str], process.args)  # started with a list
                return f"{command[3]} exited"
        return None

    try:
        waiting.wait_until(check, timeout_s, what=what, interval_s=0.5, abandon=exited)
    except waiting.WaitFailed as exc:
        raise SystemExit(str(exc)) from None


def vm_hwm_mb(pid: int) -> float | None:
    """Peak resident memory of a live process."""
    # VmHWM: psutil reports the current RSS only, not the kernel's high-water mark.
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return round(int(line.split()[1]) / 1024, 1)
    return None


def stop(process: subprocess.Popen[Any], timeout_s: float = 120) -> int:
    """SIGTERM, then SIGKILL if it does not end in time: nothing is left running."""
    return child_processes.stop(process, timeout_s)


@contextlib.contextmanager
def profiled(pid: int, name: str, quick: bool, seconds: float) -> Iterator[Path]:
    """py-spy samples `pid` for up to `seconds` while the block runs; a flame graph (SVG) lands
    beside the plots. Missing py-spy or ptrace rights only lose the profile, not the run."""
    out = plots_dir(quick) / f"{name}.svg"
    out.parent.mkdir(parents=True, exist_ok=True)
    spy = Path(sys.executable).with_name("py-spy")
    proc = None
    if spy.exists():
        proc = subprocess.Popen(
            [str(spy), "record", "--pid", str(pid), "--duration", str(int(seconds)), "--rate",
             "200", "--nonblocking", "--output", str(out), "--format", "flamegraph"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
    try:
        yield out
    finally:
        if proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(seconds + 30)
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
                proc.wait(30)


def fmt(value: Any, unit: str = "", digits: int = 0) -> str:
    """A figure for a table: thousands separated, `—` for none."""
    if value is None:
        return "—"
    if isinstance(value, float) and digits:
        return f"{value:,.{digits}f}{unit}"
    return f"{round(value):,}{unit}"


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def plot_link(result: dict[str, Any], name: str, alt: str, kind: str = "png") -> str:
    """Markdown for a plot (an image) or a flame graph (a link) of this result's run."""
    path = f"bench/plots/{'quick/' if result.get('quick') else ''}{name}.{kind}"
    return f"![{alt}]({path})" if kind == "png" else f"[`{path}`]({path})"


def reproduce(result: dict[str, Any]) -> str:
    m = result.get("machine", {})
    return (
        f"Measured {result.get('measured', '?')} on {m.get('cores', '?')} cores, "
        f"{m.get('memory_gib', '?')} GiB, Python {m.get('python', '?')}, {m.get('java', '?')}. "
        f"Reproduce: `{result.get('command', '?')}` (or `make bench`)."
    )


def run_at_scale(
    name: str,
    doc: str | None,
    measure: Any,
    render: Any,
    add_args: Any = None,
    result_name: Any = None,
) -> None:
    """The main of a benchmark on a big simulated cluster (B2, B8): its flags (and its own,
    `add_args(parser)`), a stack of its own (one broker, ZooKeeper with a large heap),
    `measure(args, info, work)`, then the result saved (as `name`, or `result_name(args)`) and
    printed."""
    import tempfile

    p = parser(doc)
    p.add_argument("--brokers", type=int, default=6)
    p.add_argument("--topics", type=int, default=200)
    p.add_argument("--partitions-per-topic", type=int, default=1000)
    p.add_argument("--zookeeper-heap-mb", type=int, default=1536)
    p.add_argument(
        "--million", action="store_true",
        help="1,000,000 partitions (1,000 x 1,000) on 10 brokers, a failure across ~300,000 of "
        "them; ZooKeeper's heap 8 GB; saved as <name>_million",
    )  # fmt: skip
    if add_args is not None:
        add_args(p)
    args = p.parse_args()
    if args.quick:
        args.topics, args.zookeeper_heap_mb = 20, 512
    if args.million:
        args.brokers, args.topics, args.partitions_per_topic = 10, 1000, 1000
        args.zookeeper_heap_mb = max(args.zookeeper_heap_mb, 8192)
    work = Path(tempfile.mkdtemp(prefix=f"zkcdc-bench-{name.split('_')[0]}-"))
    with own_stack(brokers=1, zookeeper_heap_mb=args.zookeeper_heap_mb) as info:
        result = measure(args, info, work)
    saved_as = result_name(args) if result_name else name
    print(render(save(saved_as + ("_million" if args.million else ""), result, args.quick)))
