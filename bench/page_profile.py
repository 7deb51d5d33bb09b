"""Where `zkcdc ui`'s page spends its time at 200,000 partitions, in minutes instead of B8's
quarter of an hour: no Kafka, no Spark, no capture. The ui's own web app serves a LiveModel
filled here (`--topics` x 1,000 partitions on 6 brokers); Debian's chromium loads the page;
then a broker fails here, its partitions turning under-replicated at `--rate` a second and
their alerts firing 10 s behind. Prints the first render, the page's work (as B8 times it),
the main thread's worst delay, and the functions with the most CPU time (chromium's profiler)
for the first render and for the storm. A tool for finding what to change, not a benchmark:
B8 measures the ui in the pipeline users run.

Run: `.venv/bin/python bench/page_profile.py [--topics 200] [--rate 1500]`
"""

from __future__ import annotations

import argparse
import collections
import threading
import time
from typing import Any

import uvicorn
from b8_ui import DRAWN, PAGE_PROBES, TIME_PAGE_WORK
from ui_harness import free_port, wait_for_page

from zkcdc.view.live_model import LiveModel
from zkcdc.view.web_app import app

CLUSTER = "bench"
BROKERS = 6
PER_TOPIC = 1_000


def _partition(topic: str, p: int, replicas: list[int], isr: list[int]) -> dict[str, Any]:
    return {"cluster": CLUSTER, "kind": "partition", "updated_ms": int(time.time() * 1000),
            "topic": topic, "partition": p, "replicas": replicas, "adding": [], "removing": [],
            "leader": isr[0], "isr": isr, "leader_epoch": len(replicas) - len(isr),
            "under_replicated": isr != replicas, "offline": False}  # fmt: skip


def _broker(b: int, alive: bool) -> dict[str, Any]:
    return {
        "kind": "broker",
        "broker_id": b,
        "alive": alive,
        "endpoints": [f"PLAINTEXT://h:{9090 + b}"],
    }


def filled(topics: int) -> tuple[LiveModel, list[tuple[str, int, list[int]]]]:
    model = LiveModel()
    for b in range(1, BROKERS + 1):
        model.put_state(f"{CLUSTER}/broker/{b}", _broker(b, True))
    model.put_state(f"{CLUSTER}/controller", {"kind": "controller", "broker_id": 1, "epoch": 3})
    partitions = []
    for t in range(topics):
        topic = f"topic-{t:04d}"
        model.put_state(f"{CLUSTER}/topic/{topic}",
                        {"kind": "topic", "topic": topic, "partitions": PER_TOPIC, "config": {}})  # fmt: skip
        for p in range(PER_TOPIC):
            replicas = [1 + (p + i) % BROKERS for i in range(3)]
            model.put_state(
                f"{CLUSTER}/partition/{topic}/{p}", _partition(topic, p, replicas, replicas)
            )
            partitions.append((topic, p, replicas))
    for feed in list(model.loaded):
        model.mark_loaded(feed)
    return model, partitions


def broker_failure(
    model: LiveModel, partitions: list[tuple[str, int, list[int]]], rate: float
) -> None:
    victim, started = 1, time.time()
    model.put_state(f"{CLUSTER}/broker/{victim}", _broker(victim, False))
    hit = [(t, p, r) for t, p, r in partitions if victim in r]
    fired = 0
    for i, (topic, p, replicas) in enumerate(hit):
        isr = [b for b in replicas if b != victim]
        model.put_state(f"{CLUSTER}/partition/{topic}/{p}", _partition(topic, p, replicas, isr))
        while fired < i and fired / rate < time.time() - started - 10:
            t, q, _ = hit[fired]
            model.put_alert({"alert_id": f"{CLUSTER}:under_replicated:{t}/{q}:1",
                             "rule": "under_replicated", "severity": "warning", "status": "FIRING",
                             "cluster": CLUSTER, "entity": f"{t}/{q}",
                             "started_ms": int(time.time() * 1000), "ended_ms": None,
                             "summary": "under-replicated", "details": {}})  # fmt: skip
            fired += 1
        ahead = started + i / rate - time.time()
        if ahead > 0:
            time.sleep(ahead)


def hottest(profile: dict[str, Any], n: int) -> None:
    """The functions with the most CPU time of their own (a forced layout counts to the
    function that read a size)."""
    nodes = {node["id"]: node["callFrame"] for node in profile["nodes"]}
    own: collections.Counter[tuple[str, int]] = collections.Counter()
    for sample, took in zip(profile["samples"], profile["timeDeltas"], strict=True):
        frame = nodes[sample]
        own[(frame["functionName"] or "(anonymous)", frame["lineNumber"] + 1)] += took
    total = sum(own.values()) or 1
    for (name, line), us in own.most_common(n):
        print(f"  {us / 1000:8.0f} ms {100 * us / total:5.1f} %  {name} (page line {line})")


def main() -> None:
    from debian_packages import ensure_binary
    from playwright.sync_api import sync_playwright

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--topics", type=int, default=200)
    p.add_argument("--rate", type=float, default=1_500, help="partitions turned a second")
    args = p.parse_args()
    model, partitions = filled(args.topics)
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(app(model), host="127.0.0.1", port=port, log_level="warning")
    )
    threading.Thread(target=server.run, daemon=True).start()
    while not server.started:
        time.sleep(0.05)
    chromium = ensure_binary("chromium", "chromium")
    try:
        with sync_playwright() as driver:
            browser = driver.chromium.launch(executable_path=str(chromium), args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.add_init_script(PAGE_PROBES)
            profiler = page.context.new_cdp_session(page)
            profiler.send("Profiler.enable")
            profiler.send("Profiler.start")
            page.goto(f"http://127.0.0.1:{port}/")
            wait_for_page(page, DRAWN, len(partitions), timeout_s=300, what="every partition drawn")
            print(f"first render: {page.evaluate('performance.now()'):.0f} ms")
            hottest(profiler.send("Profiler.stop")["profile"], 12)
            page.evaluate(TIME_PAGE_WORK)
            profiler.send("Profiler.start")
            since = page.evaluate("performance.now()")
            broker_failure(model, partitions, args.rate)
            time.sleep(5)
            until = page.evaluate("performance.now()")
            profile = profiler.send("Profiler.stop")["profile"]
            ticks = [d for s, d in page.evaluate("window.benchTicks") if since <= s <= until]
            print(f"storm: {(until - since) / 1000:.0f} s; main thread's worst delay "
                  f"{max(ticks, default=50) - 50:.0f} ms")  # fmt: skip
            work = page.evaluate("window.benchWork")
            for name in sorted({w[0] for w in work}):
                took = sorted(d for n, _, d in work if n == name)
                print(f"  {name}: {len(took)} calls, {sum(took):.0f} ms, "
                      f"p50 {took[len(took) // 2]:.1f} ms, longest {took[-1]:.1f} ms")  # fmt: skip
            hottest(profile, 20)
            browser.close()
    finally:
        server.should_exit = True


if __name__ == "__main__":
    main()
