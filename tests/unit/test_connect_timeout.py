"""One connect-timeout setting for every command that talks to Kafka or ZooKeeper."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from zkcdc.ground.connect_timeout import ConnectTimeoutError, connect_timeout_s


def test_without_the_setting_each_command_keeps_its_own_default() -> None:
    assert connect_timeout_s(environ={}) == 30.0
    assert connect_timeout_s(15.0, environ={}) == 15.0
    assert connect_timeout_s(environ={"ZKCDC_CONNECT_TIMEOUT_S": "  "}) == 30.0


def test_the_setting_wins_over_the_default() -> None:
    assert connect_timeout_s(environ={"ZKCDC_CONNECT_TIMEOUT_S": "3"}) == 3.0
    assert connect_timeout_s(15.0, environ={"ZKCDC_CONNECT_TIMEOUT_S": "0.5"}) == 0.5


@pytest.mark.parametrize("bad", ["0", "-1", "nan", "inf", "three", "3s", "1e999"])
def test_a_value_that_is_not_a_positive_number_of_seconds_is_one_clear_error(bad: str) -> None:
    with pytest.raises(ConnectTimeoutError, match=r"ZKCDC_CONNECT_TIMEOUT_S=.* is not a positive"):
        connect_timeout_s(environ={"ZKCDC_CONNECT_TIMEOUT_S": bad})


@given(st.text())
def test_any_text_is_a_timeout_or_that_one_error(text: str) -> None:
    try:
        value = connect_timeout_s(environ={"ZKCDC_CONNECT_TIMEOUT_S": text})
    except ConnectTimeoutError as exc:
        assert "\n" not in str(exc).replace(repr(text), "")
    else:
        assert value > 0
