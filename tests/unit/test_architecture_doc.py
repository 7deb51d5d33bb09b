"""ARCHITECTURE.md draws every package import-linter's graph of zkcdc has, and every module its
contracts name, so the drawing cannot leave one out; and both data paths, ZooKeeper's and
KRaft's, are in the path of a change record."""

from __future__ import annotations

import tomllib
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[2]
TEXT = (ROOT / "ARCHITECTURE.md").read_text()


def folder(module: str) -> str:
    """zkcdc.capture.watch -> capture/watch/, zkcdc.view -> zkcdc/view/ (the repository's
    folders: capture and streaming sit at its root)."""
    parts = module.split(".")[1:]
    if parts[0] in ("capture", "streaming"):
        return "/".join(parts) + "/"
    return "zkcdc/" + "/".join(parts) + "/"


def test_every_package_of_the_import_graph_is_in_the_architecture() -> None:
    graph = grimp.build_graph("zkcdc")
    packages = sorted(m for m in graph.modules if graph.find_children(m) and m != "zkcdc")
    assert len(packages) > 10
    missing = [m for m in packages if folder(m) not in TEXT and m not in TEXT]
    assert missing == [], f"ARCHITECTURE.md does not draw: {missing}"


def test_every_module_an_import_contract_names_is_in_the_architecture() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    named = set()
    for contract in config["contracts"]:
        for layer in contract.get("layers", []):
            named |= {m.strip() for m in layer.split("|")}
        named |= set(contract.get("source_modules", []))
    missing = sorted(
        m for m in named
        if m not in TEXT and folder(m).rstrip("/") not in TEXT and folder(m).rstrip("/") + ".py" not in TEXT
    )  # fmt: skip
    assert missing == [], f"ARCHITECTURE.md does not name: {missing}"


def test_the_path_of_a_change_record_has_both_data_paths() -> None:
    path = TEXT[
        TEXT.index("## The path of one change record") : TEXT.index("## The path of one alert")
    ]
    for source in ("watch source", "txnlog source", "kraft source"):
        assert source in path
    alert = TEXT[TEXT.index("## The path of one alert") :]
    assert "shard_stage.py" in alert and "--shards 0" in alert
