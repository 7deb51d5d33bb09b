"""How long the local stack takes to start and stop with the jars cached (B0 in BENCHMARKS.md).

Run: `make bench` or `.venv/bin/python bench/stack_startup.py [--runs N]`.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from zkcdc.stack import LocalStack, StackSettings
from zkcdc.stack.probes import free_port_block


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--brokers", type=int, default=3)
    args = parser.parse_args()
    ups, downs = [], []
    for run in range(args.runs):
        with tempfile.TemporaryDirectory() as state:
            settings = StackSettings(
                state_dir=Path(state),
                brokers=args.brokers,
                zookeeper_port=free_port_block(1),
                kafka_port=free_port_block(args.brokers),
            )
            stack = LocalStack(settings, announce=lambda _: None)
            start = time.monotonic()
            stack.up()
            ups.append(time.monotonic() - start)
            start = time.monotonic()
            stack.down()
            downs.append(time.monotonic() - start)
        print(f"run {run + 1}/{args.runs}: up {ups[-1]:.1f}s, down {downs[-1]:.1f}s", flush=True)
    print(
        f"stack up (jars cached, {args.brokers} brokers): median {statistics.median(ups):.1f}s; "
        f"stack down: median {statistics.median(downs):.1f}s"
    )


if __name__ == "__main__":
    main()
