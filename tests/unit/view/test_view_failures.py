"""The new commands' failure paths: each bad input is one clear line and a non-zero exit;
hostile names (anyone can write `/consumers`) cannot break out of a report's page; a webhook
URL's credentials and path never show."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from zkcdc.cli import main
from zkcdc.ground.change_types import EventType
from zkcdc.streaming.rules.rule_settings import RuleSettings
from zkcdc.streaming.sinks.webhook import shown
from zkcdc.view.event_rows import rows
from zkcdc.view.incident import build
from zkcdc.view.report import incident_page


def _one_line(args: list[str]) -> str:
    result = CliRunner().invoke(main, args)
    assert result.exit_code != 0, result.output
    assert "Traceback" not in result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert lines, "no error shown"
    return result.output


def test_a_report_of_a_log_that_is_not_there_is_one_line(tmp_path: Path) -> None:
    out = _one_line(["report", str(tmp_path / "missing"), "-o", str(tmp_path / "r.html")])
    assert "does not exist" in out


def test_a_report_of_an_empty_folder_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "log").mkdir()
    out = _one_line(["report", str(tmp_path / "log"), "-o", str(tmp_path / "r.html")])
    assert out.startswith("zkcdc: error: no event log files") and out.count("\n") == 1


def test_a_report_without_its_output_is_one_line(tmp_path: Path) -> None:
    assert "-o" in _one_line(["report", str(tmp_path)])


def test_the_ui_on_a_taken_port_is_one_line() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        out = _one_line(["ui", "--bootstrap-servers", "127.0.0.1:1", "--port", str(port)])
    assert out.startswith(f"zkcdc: error: cannot serve on 127.0.0.1:{port}")
    assert out.count("\n") == 1


def test_the_ui_of_the_lake_and_of_kafka_at_once_is_one_line(tmp_path: Path) -> None:
    out = _one_line(["ui", "--lake", str(tmp_path), "--bootstrap-servers", "127.0.0.1:1"])
    assert out == "zkcdc: error: give --lake (the past) or --bootstrap-servers (now), not both\n"


def test_sparks_settings_without_a_lake_are_one_line() -> None:
    for flag in (["--master", "local[1]"], ["--driver-memory", "2g"]):
        out = _one_line(["ui", "--bootstrap-servers", "127.0.0.1:1", *flag])
        assert out == (
            "zkcdc: error: --master and --driver-memory go with --lake (Spark reads the lake)\n"
        )


def test_the_ui_of_the_lake_on_a_taken_port_is_one_line_before_spark_starts(
    tmp_path: Path,
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        out = _one_line(["ui", "--lake", str(tmp_path), "--port", str(port)])
    assert out.startswith(f"zkcdc: error: cannot serve on 127.0.0.1:{port}")
    assert out.count("\n") == 1


@pytest.mark.parametrize("command", [["ui"], ["alerts", "tail"]])
def test_a_command_without_kafka_is_one_line(command: list[str]) -> None:
    out = _one_line(command)
    assert out == "zkcdc: error: give --bootstrap-servers (or --kafka-config-file with it)\n"


def test_alerts_tail_of_an_unknown_rule_is_one_line_naming_the_rules() -> None:
    out = _one_line(["alerts", "tail", "--bootstrap-servers", "127.0.0.1:1", "--rule", "nosuch"])
    assert "nosuch: no such rule" in out and "under_replicated" in out


def test_alerts_tail_of_a_bad_time_is_one_line() -> None:
    out = _one_line(["alerts", "tail", "--since", "yesterday-ish"])
    assert "not a time" in out


@pytest.mark.parametrize(
    "url",
    [
        "https://user:p4ssw0rd@hooks.example.com/services/SECRET",
        "https://hooks.example.com:notaport/SECRET",
        "hooks.example.com/SECRET",
    ],
)
def test_a_webhook_url_never_shows_credentials_or_path(url: str) -> None:
    text = shown(url)
    assert "SECRET" not in text and "p4ssw0rd" not in text and "user" not in text


def _group_record(name: str, seq: int) -> dict[str, Any]:
    event = {"type": EventType.CONSUMER_REGISTERED, "group": name, "consumer_id": "c",
             "subscription": {name: 1}}  # fmt: skip
    return {"cluster": name or "c", "seq": seq, "ts_ms": 1000 + seq, "path": f"/consumers/{name}",
            "op": "CREATE", "events": [event], "versions_skipped": 0}  # fmt: skip


@settings(max_examples=200, deadline=None)
@given(
    st.text(min_size=1, max_size=40) | st.sampled_from(["<!--<script>", "</script><!--", "<\\/"])
)
def test_no_name_breaks_out_of_a_reports_script(name: str) -> None:
    timeline = build([_group_record(name, 1), _group_record(name + "</script>", 2)])
    page = incident_page(timeline, RuleSettings(), "t")
    body = page.split("<script>", 1)[1]
    assert body.count("</script>") == 2, "the data ended a script element early"
    assert "<" not in body.split("const DATA = ", 1)[1].split("</script>", 1)[0]
    assert len(rows(_group_record(name, 3))) == 1


def test_a_feed_kafka_refuses_is_asked_for_again_not_given_up(monkeypatch: Any) -> None:
    """The ui's state feed once gave up for good when its topic had no leaders yet (CI): a
    feed Kafka refuses is asked for again until the ui stops, then read as usual."""
    import threading

    from zkcdc.view import live_feeds
    from zkcdc.view.errors import ViewError
    from zkcdc.view.live_model import LiveModel

    stop = threading.Event()
    tries: list[int] = []

    class Follower:
        caught_up = True

        def __init__(self, *_: Any, **__: Any) -> None:
            tries.append(1)
            if len(tries) < 3:
                raise ViewError("cannot read zkcdc.state: UNKNOWN_TOPIC_OR_PART")

        def poll(self, _: float) -> list[Any]:
            stop.set()
            return []

        def at_end(self) -> bool:
            return True

        def close(self) -> None:
            pass

    monkeypatch.setattr(live_feeds, "TopicFollower", Follower)
    monkeypatch.setattr(live_feeds, "RETRY_S", 0.01)
    model = LiveModel()
    live_feeds._follow(None, "zkcdc.state", _feed("state"), model, stop)  # type: ignore[arg-type]
    assert len(tries) == 3 and model.loaded["state"]


def test_a_feed_stopped_while_kafka_refuses_it_ends(monkeypatch: Any) -> None:
    import threading

    from zkcdc.view import live_feeds
    from zkcdc.view.errors import ViewError
    from zkcdc.view.live_model import LiveModel

    def refused(*_: Any, **__: Any) -> None:
        raise ViewError("no topic zkcdc.state")

    monkeypatch.setattr(live_feeds, "TopicFollower", refused)
    stop = threading.Event()
    feed = threading.Thread(target=live_feeds._follow,
                            args=(None, "zkcdc.state", _feed("state"), LiveModel(), stop))  # fmt: skip
    feed.start()
    stop.set()
    feed.join(live_feeds.RETRY_S + 5)
    assert not feed.is_alive()


def test_a_feed_that_reads_to_its_topics_end_reports_itself_not_behind(monkeypatch: Any) -> None:
    """`/healthz`'s read lag once held a quiet topic's last message's age (B8 saw 99 s)."""
    import threading

    from zkcdc.view import live_feeds
    from zkcdc.view.live_model import LiveModel

    stop = threading.Event()

    class Message:
        def timestamp(self) -> tuple[int, int]:
            return (1, 1_000)  # a message 99 s old when read

    class Follower:
        caught_up = True

        def __init__(self, *_: Any, **__: Any) -> None:
            self.polls: list[list[Any]] = [[Message()], []]

        def poll(self, _: float) -> list[Any]:
            return self.polls.pop(0)

        def at_end(self) -> bool:
            seen.append(dict(model.read_lag_ms))
            stop.set()
            return True

        def close(self) -> None:
            pass

    seen: list[dict[str, int]] = []
    monkeypatch.setattr(live_feeds, "TopicFollower", Follower)
    model = LiveModel(now_ms=lambda: 100_000)
    live_feeds._follow(None, "zkcdc.changes", _feed("changes"), model, stop)  # type: ignore[arg-type]
    assert seen == [{"changes": 99_000}]  # behind by the message's age until at the end
    assert model.read_lag_ms == {"changes": 0}


def _feed(name: str) -> Any:
    from zkcdc.view.live_feeds import Feed

    return Feed(name, lambda message: message, lambda _: None)
