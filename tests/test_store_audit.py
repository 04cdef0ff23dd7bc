"""`logbook audit` and `logbook query`: a store of runs, incremental, readable as it is."""

import json
import os
import shutil
from pathlib import Path

import polars as pl
import pytest
from _cli import invoke

from logbook.errors import UsageError
from logbook.store import audit, read_index

ROOT = Path(__file__).resolve().parents[1]
LOGS = ("crash_restarts.log", "spike_restart.log", "nan_skipped.log")
BAD = ROOT / "fixtures/real/fairseq/fairseq_lua_issue26_blstm_epoch_jumps_20_to_100.log"


@pytest.fixture
def fleet(tmp_path):
    d = tmp_path / "fleet"
    d.mkdir()
    for name in LOGS:
        shutil.copy(ROOT / "fixtures/megatron" / name, d / name)
    shutil.copy(BAD, d / "corrupt.log")
    return d


def rows(store: Path) -> dict[str, dict]:
    return {r["run"] or Path(r["input"]).name: r for r in read_index(store).to_dicts()}


def test_every_run_once_with_its_audit_and_the_corrupt_one_with_its_error(fleet, tmp_path):
    store = tmp_path / "store"
    s = audit([str(fleet / "*.log")], store, workers=1)
    assert (s.inputs, s.audited, s.unchanged, s.runs, s.failed) == (4, 4, 0, 4, 1)
    got = rows(store)
    assert sorted(got) == sorted([*LOGS, "corrupt.log"])
    crash = got["crash_restarts.log"]
    assert (crash["format"], crash["records"], crash["restarts"], crash["lost_steps"]) == (
        "megatron", 7, 3, 31
    )  # fmt: skip
    assert (crash["critical"], crash["warning"], crash["info"]) == (1, 2, 1)
    assert crash["worst"] == "critical crash at 530"
    assert json.loads(crash["incidents"]) == {
        "crash": {"critical": 1},
        "restart": {"info": 1, "warning": 2},
    }
    assert crash["error"] is None and crash["sources"] == [str(fleet / "crash_restarts.log")]
    bad = got["corrupt.log"]
    assert bad["records"] is None and bad["error"].endswith(
        "corrupt.log: unrecognized log format (give --format; `logbook formats` lists them)"
    )
    # per-run tables: Hive partitions that polars reads as they are
    findings = pl.scan_parquet(store / "findings", hive_partitioning=True).collect()
    mine = findings.filter(pl.col("run_id") == crash["run_id"])
    assert sorted(mine.get_column("kind").to_list()) == ["crash", "restart", "restart", "restart"]
    events = pl.scan_parquet(store / "events" / "**" / "*.parquet", hive_partitioning=True)
    restarts = events.filter((pl.col("run_id") == crash["run_id"]) & (pl.col("kind") == "restart"))
    assert restarts.select("cause", "lost_steps").collect().rows() == [
        ("ecc", 10), ("oom", 10), (None, 11)
    ]  # fmt: skip
    metrics = pl.read_parquet(store / "metrics" / f"run_id={crash['run_id']}" / "part.parquet")
    assert metrics.height == 7


def test_a_second_audit_reads_only_what_changed(fleet, tmp_path):
    store = tmp_path / "store"
    audit([str(fleet)], store, workers=1)  # a folder of launch files: one run
    audit([str(fleet / "*.log")], store, workers=1)
    before = read_index(store)
    s = audit([str(fleet / "*.log")], store, workers=1)
    assert (s.audited, s.unchanged) == (0, 4)
    assert read_index(store).equals(before)
    # touched but the same bytes: kept (content hash); changed bytes: read again
    os.utime(fleet / "nan_skipped.log", ns=(1, 1))
    assert audit([str(fleet / "*.log")], store, workers=1).audited == 0
    with open(fleet / "spike_restart.log", "a") as fh:
        fh.write("a line that is no record\n")
    s = audit([str(fleet / "*.log")], store, workers=1)
    assert (s.audited, s.unchanged, s.runs) == (1, 3, 4)
    # the folder given first is still in the store, beside the files
    assert read_index(store).get_column("input").n_unique() == 5


def test_two_workers_give_the_same_store(fleet, tmp_path):
    one, two = tmp_path / "one", tmp_path / "two"
    audit([str(fleet / "*.log")], one, workers=1)
    audit([str(fleet / "*.log")], two, workers=2)
    a, b = (read_index(s).drop("seconds") for s in (one, two))
    assert a.equals(b)
    fa = pl.scan_parquet(one / "findings", hive_partitioning=True).collect()
    fb = pl.scan_parquet(two / "findings", hive_partitioning=True).collect()
    assert fa.sort("run_id", "id").equals(fb.sort("run_id", "id"))


def test_a_run_an_input_no_longer_has_loses_its_tables(tmp_path):
    log = tmp_path / "two.log"
    text = (ROOT / "fixtures/megatron/mcore_1570_truncated.log").read_text()
    log.write_text(text)
    store = tmp_path / "store"
    audit([str(log)], store, workers=1)
    ids = dict(read_index(store).select("run", "run_id").iter_rows())
    assert sorted(ids) == ["two.log", "two.log#2"]  # this log holds two runs
    log.write_text((ROOT / "fixtures/megatron/nan_skipped.log").read_text())
    audit([str(log)], store, workers=1)
    assert read_index(store).get_column("run_id").to_list() == [ids["two.log"]]
    assert (store / "findings" / f"run_id={ids['two.log']}").exists()
    assert not (store / "findings" / f"run_id={ids['two.log#2']}").exists()


def test_documented_queries(fleet, tmp_path, monkeypatch, capsys):
    store = tmp_path / "store"
    audit([str(fleet / "*.log")], store, workers=1)
    q = (
        "select cause, sum(lost_steps) as lost, count(*) as restarts from events "
        "where kind = 'restart' group by cause order by cause nulls last"
    )
    code, out, _ = invoke(monkeypatch, capsys, "query", str(store), q, "--csv")
    assert (code, out) == (0, "cause,lost,restarts\necc,10,1\nnccl_timeout,21,1\noom,10,1\n,11,1\n")
    q = (
        "select kind, median(lead_steps) as lead from findings where precedes is not null "
        "group by kind order by kind"
    )
    code, out, _ = invoke(monkeypatch, capsys, "query", str(store), q, "--csv")
    assert (code, out) == (0, "kind,lead\ngrad_norm_drift,3.0\ngrad_norm_spike,4.0\n")
    out_file = tmp_path / "runs.csv"
    q = "select run, records from runs where error is null order by run"
    code, out, _ = invoke(monkeypatch, capsys, "query", str(store), q, "-o", str(out_file))
    assert (code, out.strip()) == (0, f"wrote 3 row(s) to {out_file}")
    assert out_file.read_text().splitlines() == [
        "run,records", "crash_restarts.log,7", "nan_skipped.log,6", "spike_restart.log,121"
    ]  # fmt: skip


def test_bad_requests(fleet, tmp_path, monkeypatch, capsys):
    code, _, err = invoke(monkeypatch, capsys, "query", str(tmp_path), "select 1")
    assert (code, err.strip()) == (
        2,
        f"logbook: error: {tmp_path}: not a run store (no runs.parquet)",
    )
    store = tmp_path / "store"
    audit([str(fleet / "nan_skipped.log")], store, workers=1)
    code, _, err = invoke(monkeypatch, capsys, "query", str(store), "selec 1")
    assert code == 2 and err.startswith("logbook: error: query: sql parser error")
    code, _, err = invoke(
        monkeypatch, capsys, "audit", str(tmp_path / "none*.log"), "--store", str(store)
    )
    assert (code, err.strip()) == (
        2,
        f"logbook: error: {tmp_path / 'none*.log'}: no such file or directory",
    )
    with pytest.raises(UsageError, match="--workers must be >= 1"):
        audit([str(fleet)], store, workers=0)
    (tmp_path / "afile").write_text("x")
    with pytest.raises(UsageError, match="is a file, not a folder"):
        audit([str(fleet)], tmp_path / "afile")


def _launches(tmp_path: Path) -> Path:
    """A folder of two launch files: a run's log cut in two at its restart."""
    lines = (ROOT / "fixtures/megatron/spike_restart.log").read_text().splitlines(True)
    cut = next(i for i, line in enumerate(lines) if i > 10 and "WORLD INFO DICT" in line)
    d = tmp_path / "inputs" / "job"
    d.mkdir(parents=True)
    (d / "launch1.log").write_text("".join(lines[:cut]))
    (d / "launch2.log").write_text("".join(lines[cut:]))
    return d


def test_a_large_input_parsed_file_by_file_gives_the_same_store(tmp_path):
    job = _launches(tmp_path)
    whole, split = tmp_path / "whole", tmp_path / "split"
    audit([str(job)], whole, workers=1)
    s = audit([str(job)], split, workers=2, split_mib=0)  # every folder split
    assert (s.inputs, s.audited, s.runs, s.failed) == (1, 1, 1, 0)
    (row,) = read_index(split).to_dicts()
    assert (row["records"], row["restarts"], row["segments"]) == (121, 1, 2)
    assert row["sources"] == [str(job / "launch1.log"), str(job / "launch2.log")]
    (want,) = read_index(whole).to_dicts()
    assert {k: v for k, v in row.items() if k != "seconds"} == {
        k: v for k, v in want.items() if k != "seconds"
    }
    for t in ("metrics", "events", "findings"):
        got = pl.read_parquet(split / t / f"run_id={row['run_id']}" / "part.parquet")
        assert got.equals(pl.read_parquet(whole / t / f"run_id={row['run_id']}" / "part.parquet"))
    # a file of it unreadable: the input's row, with that file's error
    (job / "launch2.log").write_bytes(bytes(range(256)) * 40)
    audit([str(job)], split, workers=2, split_mib=0)
    (row,) = read_index(split).to_dicts()
    assert row["error"] == f"{job / 'launch2.log'}: not a text log (binary data at byte 0)"
