"""What the tests that drive `zkcdc ui` share: a free loopback port, whether it answers, and a
wait for a condition on the page.

The page refuses `eval` (its Content-Security-Policy allows no 'unsafe-eval'), and Playwright's
`wait_for_function` polls inside the page through `eval` once its first look has failed. Here
the whole wait is one function that Playwright hands to the browser through its debugging
protocol, where the policy does not apply; the condition is still looked at in the page every
`polling_ms`, so what is timed stays the page's own time."""

from __future__ import annotations

import socket
from typing import Any

from zkcdc.ground.waiting import WaitFailed
from zkcdc.stack.probes import free_port

__all__ = ["answers", "free_port", "wait_for_page"]


def answers(port: int) -> bool:
    """Whether a server listens on the loopback port. A connection to its own port (a client
    whose kernel-given port is the one polled) is no server."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as conn:
            return bool(conn.getsockname() != conn.getpeername())
    except OSError:
        return False


_WAIT = """
async ([arg, timeoutMs, pollingMs]) => {
  const holds = (CONDITION);
  const end = performance.now() + timeoutMs;
  while (!(await holds(arg))) {
    if (performance.now() > end) return false;
    await new Promise((resolve) => setTimeout(resolve, pollingMs));
  }
  return true;
}
"""


def wait_for_page(
    page: Any, condition: str, arg: Any = None, *, timeout_s: float, what: str,
    polling_ms: int = 20,
) -> None:  # fmt: skip
    """Returns once the JavaScript function `condition` (source text, given `arg`) holds on
    `page`; WaitFailed naming `what` after `timeout_s`."""
    waiter = _WAIT.replace("CONDITION", condition.strip())
    if not page.evaluate(waiter, [arg, timeout_s * 1000, polling_ms]):
        raise WaitFailed(f"waited for {what} on the page: not within {timeout_s:g} s")
