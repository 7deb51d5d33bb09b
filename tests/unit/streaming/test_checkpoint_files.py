"""A checkpoint's files checked before Spark starts (streaming/job/checkpoint_files.py): today's
release's checkpoint (tests/fixtures/checkpoint_v2) is whole; each damage a disk, a copy or a
hand can do to a file a resume reads is named, file and why; nothing in a file makes the check
itself fail. The commands' one line over such a checkpoint: tests/integration/test_command_errors.py."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from zkcdc.streaming.job.checkpoint_files import damage, delivered_unplanned

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
WHOLE = FIXTURES / "checkpoint_v2" / "shards-2" / "alerts"


@pytest.fixture
def query(tmp_path: Path) -> Path:
    copy = tmp_path / "alerts"
    shutil.copytree(WHOLE, copy)
    return copy


def _sst(query: Path) -> Path:
    return sorted((query / "state" / "0" / "0" / "SSTs").glob("0*.sst"))[0]


def _cut(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _garbage(path: Path) -> None:
    path.write_bytes(b"\x00\xff not what Spark wrote\n")


def test_every_checkpoint_a_release_wrote_is_whole() -> None:
    for layout in (FIXTURES / "checkpoint_v1").iterdir():
        if (layout / "alerts").is_dir():
            assert damage(layout / "alerts") is None, layout
    assert damage(WHOLE) is None


def test_a_new_checkpoint_has_nothing_to_be_damaged(tmp_path: Path) -> None:
    assert damage(tmp_path / "not-there") is None
    planned = tmp_path / "planned"
    (planned / "offsets").mkdir(parents=True)
    (planned / "offsets" / "0").write_text('v1\n{"batchWatermarkMs":0}\n{"t":{"0":5}}')
    (planned / "sources" / "0").mkdir(parents=True)
    (planned / "sources" / "0" / "0").write_bytes(b'\x00v1\n{"t":{"0":0}}')  # Kafka's form
    (planned / "metadata").write_text('{"id":"5f0c"}')
    assert damage(planned) is None  # nothing committed yet: no state to load


@pytest.mark.parametrize(
    ("harm", "named"),
    [
        (lambda q: _garbage(q / "metadata"), "metadata: not the query's id"),
        (lambda q: (q / "metadata").write_text("{}"), "metadata: not the query's id"),
        (lambda q: _garbage(q / "offsets" / "0"), "offsets/0: not text"),
        (lambda q: (q / "offsets" / "0").write_text(""), "offsets/0: no version line"),
        (lambda q: (q / "offsets" / "0").write_text("v1\n"), "offsets/0: cut short"),
        (lambda q: _cut(q / "offsets" / "0"), "offsets/0: a line is not JSON"),
        (lambda q: _garbage(q / "commits" / "0"), "commits/0: not text"),
        (lambda q: _cut(q / "sources" / "0" / "0"), "sources/0/0: a line is not JSON"),
        (lambda q: shutil.rmtree(q / "state"), "state/: missing"),
        (lambda q: shutil.rmtree(q / "offsets"), "offsets/: missing, though the query committed"),
        (lambda q: shutil.rmtree(q / "sources"), "sources/: missing, though the query planned"),
        (lambda q: (q / "metadata").unlink(), "metadata: missing"),
        (lambda q: _garbage(q / "state" / "0" / "_metadata" / "v2" / "0"),
         "state/0/_metadata/v2/0: not text"),
        (lambda q: _garbage(next((q / "state" / "0" / "_stateSchema").rglob("0_*"))),
         "not a state schema"),
        (lambda q: _cut(q / "state" / "0" / "1" / "1.zip"),
         "state/0/1/1.zip: not a whole RocksDB snapshot"),
        (lambda q: _cut(_sst(q)), "bytes, state/0/0/1.zip says"),
        (lambda q: _sst(q).unlink(), "missing (state/0/0/1.zip names it)"),
        (lambda q: shutil.rmtree(q / "state" / "0" / "1"),
         "state/0/1/: no state, though state/0/_metadata/v2/0 counts 2 store partitions"),
        (lambda q: [f.unlink() for f in (q / "state" / "0" / "0").glob("1.*")],
         "state/0/0/: no state"),
        (lambda q: shutil.rmtree(q / "state" / "0" / "_metadata"),
         "state/0/_metadata/: missing, though the query committed micro-batch 0"),
        (lambda q: (q / "state" / "0" / "_metadata" / "v2" / "0").write_text("v2\n[]\n"),
         "state/0/_metadata/v2/0: not the operator's metadata"),
        (lambda q: next((q / "state" / "0" / "_stateSchema").rglob("0_*")).unlink(),
         "_stateSchema/default/0_84aa179a-b155-4b07-b934-041e33d608fe: missing "
         "(state/0/_metadata/v2/0 names it)"),
    ],
)  # fmt: skip
def test_each_damage_is_named_with_its_file(
    query: Path, harm: Callable[[Path], None], named: str
) -> None:
    harm(query)
    found = damage(query)
    assert found is not None and named in found, found


def test_a_changelog_and_the_files_a_resume_does_not_read_are_left_to_spark(query: Path) -> None:
    """The newest snapshot is what a resume loads; a changelog's insides are Spark's to read."""
    _garbage(query / "state" / "0" / "0" / "1.changelog")
    assert damage(query) is None
    (query / "state" / "0" / "0" / "9.zip").write_bytes(b"of a micro-batch not committed")
    assert damage(query) is None


def test_a_stateless_querys_checkpoint_needs_no_state(query: Path) -> None:
    shutil.rmtree(query / "state")
    assert damage(query, stateful=False) is None


# Files of the release's checkpoint a resume does without (run with each removed: the same
# alerts as the checkpoint whole), or whose loss only Spark can see (a snapshot whose
# changelog is left: Spark's CANNOT_LOAD_STATE_STORE, said with how to start afresh).
LEFT_TO_SPARK = {
    "commits/0",  # the micro-batch is run again
    "state/0/0/1.changelog", "state/0/1/1.changelog",  # the snapshot beside it is loaded
    "state/0/0/1.zip", "state/0/1/1.zip",  # Spark's CANNOT_LOAD_STATE_STORE, with the advice
    "state/0/0/SSTs/000008-8338941b-dd37-411f-8c09-94a5605540de.sst",  # no snapshot names it
    "state/0/1/SSTs/000008-bd4b61fc-12f1-418d-959b-c0270ca2736c.sst",
}  # fmt: skip


def test_any_one_file_removed_is_named_unless_a_resume_does_without_it(query: Path) -> None:
    for path in sorted(f for f in WHOLE.rglob("*") if f.is_file() and f.suffix != ".crc"):
        name = str(path.relative_to(WHOLE))
        shutil.rmtree(query)
        shutil.copytree(WHOLE, query)
        (query / name).unlink()
        found = damage(query)
        if name in LEFT_TO_SPARK:
            assert found is None, (name, found)
        else:
            assert found is not None, name


def test_a_ledger_names_only_micro_batches_its_query_planned(query: Path) -> None:
    """A sink ledger beside a query checkpoint removed or replaced would have the new query's
    first micro-batches taken for delivered: their alerts dropped."""
    ledger = int((WHOLE.parent / "sink-ledger").read_text())
    assert delivered_unplanned(query, ledger) is None  # the release's own, as it wrote it
    assert delivered_unplanned(query, -1) is None  # nothing delivered yet
    found = delivered_unplanned(query, ledger + 1)
    assert found is not None and f"micro-batch {ledger + 1} was delivered" in found, found
    assert f"planned up to micro-batch {ledger}" in found
    shutil.rmtree(query)  # the query's checkpoint removed, its ledger left
    found = delivered_unplanned(query, ledger)
    assert found is not None and "alerts/ has no offsets log" in found, found
    assert "alerts dropped" in found


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(which=st.integers(min_value=0), data=st.binary(max_size=64),
       keep=st.floats(min_value=0, max_value=1))  # fmt: skip
def test_nothing_in_a_file_makes_the_check_fail(
    tmp_path_factory: pytest.TempPathFactory, which: int, data: bytes, keep: float
) -> None:
    """Any file of the checkpoint cut anywhere and followed by any bytes: a reason or None,
    never an exception of the check's own."""
    query = tmp_path_factory.mktemp("cp") / "alerts"
    shutil.copytree(WHOLE, query)
    files = sorted(f for f in query.rglob("*") if f.is_file())
    target = files[which % len(files)]
    original = target.read_bytes()
    target.write_bytes(original[: int(len(original) * keep)] + data)
    found = damage(query)
    assert found is None or isinstance(found, str)
