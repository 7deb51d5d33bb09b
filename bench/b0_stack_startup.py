"""B0: how long the local stack takes to start and stop with the jars cached.

Each run starts a stack of its own (other ports and state, so a running default stack is left
alone): one ZooKeeper and `--brokers` brokers, up until all are registered and answer the Admin
API; then a controlled stop.

Run: `.venv/bin/python bench/b0_stack_startup.py [--quick] [--runs N]`.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from harness import parser, reproduce, save, table

from zkcdc.stack import LocalStack, StackSettings
from zkcdc.stack.probes import free_port_block

NAME = "b0_stack_startup"


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--brokers", type=int, default=3)
    args = p.parse_args()
    runs = 1 if args.quick else args.runs
    ups, downs = [], []
    for run in range(runs):
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
            ups.append(round(time.monotonic() - start, 1))
            start = time.monotonic()
            stack.down()
            downs.append(round(time.monotonic() - start, 1))
        print(f"run {run + 1}/{runs}: up {ups[-1]:.1f}s, down {downs[-1]:.1f}s", flush=True)
    result = {"brokers": args.brokers, "up_s": ups, "down_s": downs}
    print(render(save(NAME, result, args.quick)))


def render(result: dict[str, Any]) -> str:
    def runs(values: list[float]) -> str:
        return f"median {statistics.median(values):.1f} s ({', '.join(f'{v:.1f}' for v in values)})"

    return "\n\n".join([
        reproduce(result),
        table(["what", "measured"], [
            [f"`stack up`, jars cached, 1 ZooKeeper + {result['brokers']} brokers (until all "
             "registered and answering the Admin API)", runs(result["up_s"])],
            [f"`stack down` (controlled shutdown of {result['brokers']} brokers, then ZooKeeper)",
             runs(result["down_s"])],
        ]),
    ])  # fmt: skip


if __name__ == "__main__":
    main()
