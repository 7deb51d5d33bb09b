"""`zkcdc report`: an incident's timeline written into the page, one HTML file with everything
inlined (style, script, data), so it opens anywhere without a network: a post-mortem's view."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from zkcdc.ground.private_files import atomic_write
from zkcdc.streaming.rules.rule_settings import RuleSettings
from zkcdc.view.errors import ViewError
from zkcdc.view.incident import Timeline, build
from zkcdc.view.page import render


def incident_page(timeline: Timeline, settings: RuleSettings, title: str) -> str:
    data: dict[str, Any] = {
        "mode": "incident",
        "default_min_isr": settings.default_min_insync_replicas,
        "timeline": timeline.as_json(),
    }
    return render(data, title)


def write_report(
    records: Iterable[dict[str, Any]], out: Path, settings: RuleSettings, title: str
) -> Timeline:
    timeline = build(records, settings)
    if not timeline.records:
        raise ViewError("no change records to report (check the log and the filters)")
    try:
        atomic_write(out, incident_page(timeline, settings, title))
    except OSError as exc:
        raise ViewError(f"cannot write {out}: {exc.strerror or exc}") from exc
    return timeline
