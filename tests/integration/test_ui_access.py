"""`zkcdc ui` safe to expose: with a web config it serves over TLS to the users it names only
(checked in real chromium), and a non-loopback address without authentication is refused in
one line unless the operator says `--insecure-no-auth`."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import bcrypt
import pytest
from conftest import wait_until
from debian_packages import ensure_binary
from ui_harness import answers, free_port

from zkcdc.ground.child_processes import stop
from zkcdc.stack.certificates import CertificateAuthority

pytestmark = pytest.mark.integration


def test_the_ui_over_tls_refuses_a_browser_without_credentials_and_serves_one_with_them(
    cluster: Any, tmp_path: Path
) -> None:
    from playwright.sync_api import Error as PlaywrightError
    from playwright.sync_api import sync_playwright

    pair = CertificateAuthority(tmp_path).issue("ui")
    hashed = bcrypt.hashpw(b"s3cret-pw", bcrypt.gensalt(rounds=4)).decode()
    web = tmp_path / "web.yml"
    web.write_text(json.dumps({
        "tls_server_config": {"cert_file": str(pair.certificate), "key_file": str(pair.key)},
        "basic_auth_users": {"operator": hashed},
    }))  # fmt: skip
    web.chmod(0o600)
    port = free_port()
    log = (tmp_path / "ui.log").open("wb")
    ui = subprocess.Popen(
        [sys.executable, "-m", "zkcdc", "ui", "--bootstrap-servers", cluster.bootstrap_servers,
         "--no-changes", "--port", str(port), "--host", "127.0.0.1", "--web-config", str(web)],
        stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    chromium = ensure_binary("chromium", "chromium")
    try:
        wait_until(lambda: answers(port), 60, what="the ui serving")
        url = f"https://127.0.0.1:{port}/"
        with sync_playwright() as driver:
            browser = driver.chromium.launch(executable_path=str(chromium), args=["--no-sandbox"])
            stranger = browser.new_context(ignore_https_errors=True)
            try:  # chromium without credentials to give ends the navigation on the 401
                refused = stranger.new_page().goto(url)
                assert refused is not None and refused.status == 401
            except PlaywrightError as exc:
                assert "ERR_INVALID_AUTH_CREDENTIALS" in str(exc), exc
            api = stranger.request.get(f"{url}api/snapshot")
            assert api.status == 401
            wrong = browser.new_context(ignore_https_errors=True,
                                        http_credentials={"username": "operator",
                                                          "password": "wrong"})  # fmt: skip
            assert wrong.request.get(f"{url}api/snapshot").status == 401
            operator = browser.new_context(ignore_https_errors=True,
                                           http_credentials={"username": "operator",
                                                             "password": "s3cret-pw"})  # fmt: skip
            page = operator.new_page()
            served = page.goto(url)
            assert served is not None and served.status == 200
            assert served.url.startswith("https://")
            page.wait_for_selector("#brokers", state="attached", timeout=30_000)
            assert operator.request.get(f"{url}api/snapshot").status == 200
            browser.close()
        plain = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}",
                                f"http://127.0.0.1:{port}/"], capture_output=True, text=True)  # fmt: skip
        assert plain.stdout != "200"  # no plain HTTP beside TLS
    finally:
        stop(ui, 10, signal.SIGTERM)
        log.close()


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.0.2.7"])
def test_a_non_loopback_ui_without_authentication_is_refused_in_one_line(
    tmp_path: Path, host: str
) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "zkcdc", "ui", "--bootstrap-servers", "127.0.0.1:1",
         "--host", host], capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "--insecure-no-auth" in lines[0] and host in lines[0], lines
