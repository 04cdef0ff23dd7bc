"""Audits and counterfactual sweeps on a real local Ray cluster (``ray start --head``):
the same store and the same table as the local path, and a worker killed mid-audit
costs nothing (Ray runs its task again)."""

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import polars as pl
import pytest
from test_store_audit import _launches

from logbook.errors import UsageError
from logbook.executor import ray_argv, wanted
from logbook.store import audit, read_index

pytest.importorskip("ray")

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
LOGBOOK = str(BIN / "logbook")
LOGS = ("crash_restarts.log", "spike_restart.log", "nan_skipped.log")
RECORD = (
    " iteration {i:8d}/  500000 | consumed samples: {s:12d} | elapsed time per iteration "
    "(ms): 5203.8 | learning rate: 1.500E-05 | global batch size:   256 | lm loss: {l:.6E} "
    "| loss scale: 65536.0 | grad norm: 2.593 | number of skipped iterations:   0 | number "
    "of nan iterations:   0 |\n"
)


# a throwaway cluster of this machine: no token (with one, an explicit address needs
# RAY_AUTH_MODE=token and the token, as Ray documents)
ENV = {**{k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}, "RAY_AUTH_MODE": "disabled"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def cluster():
    """A 2-CPU Ray cluster on this machine, as `ray start --head` makes one."""
    port = _free_port()
    subprocess.run(
        [str(BIN / "ray"), "start", "--head", "--num-cpus", "2", "--port", str(port)]
        + ["--include-dashboard", "false", "--disable-usage-stats"],
        check=True,
        capture_output=True,
        env=ENV,
        timeout=120,
    )
    try:
        yield f"127.0.0.1:{port}"
    finally:
        subprocess.run(
            [str(BIN / "ray"), "stop", "--force"], capture_output=True, env=ENV, timeout=120
        )


def _cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [LOGBOOK, *args], capture_output=True, text=True, env=ENV, timeout=timeout
    )


def _store(store: Path) -> tuple[list[dict], dict[str, pl.DataFrame]]:
    """The store's index (times aside) and tables, in a stable order."""
    rows = [
        {k: v for k, v in r.items() if k != "seconds"}
        for r in read_index(store).sort("run_id").to_dicts()
    ]
    tables = {}
    for t in ("metrics", "events", "findings"):
        df = pl.scan_parquet(
            store / t, hive_partitioning=True, missing_columns="insert", extra_columns="ignore"
        ).collect()
        tables[t] = df.sort(df.columns)
    return rows, tables


@pytest.fixture
def fleet(tmp_path):
    d = tmp_path / "fleet"
    d.mkdir()
    for name in LOGS:
        (d / name).write_bytes((ROOT / "fixtures/megatron" / name).read_bytes())
    (d / "corrupt.log").write_bytes(bytes(range(256)) * 40)
    return d


def test_audit_on_ray_gives_the_store_of_the_local_audit(cluster, fleet, tmp_path):
    job = _launches(tmp_path)  # a folder of launch files: on Ray, one task per file
    (fleet / "job").mkdir()
    for f in job.iterdir():
        (fleet / "job" / f.name).write_bytes(f.read_bytes())
    local, on_ray = tmp_path / "local", tmp_path / "ray"
    audit([str(fleet / "*")], local, workers=1)
    args = ["--ray", cluster, "--split-mib", "0"]
    r = _cli("audit", str(fleet / "*"), "--store", str(on_ray), *args)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().endswith("s") and "5 input(s), 5 audited, 0 unchanged" in r.stdout
    assert "5 run(s), 1 unreadable" in r.stdout
    rows, tables = _store(on_ray)
    want_rows, want_tables = _store(local)
    assert rows == want_rows
    for t, df in want_tables.items():
        assert tables[t].equals(df), t
    bad = next(r for r in rows if r["input"].endswith("corrupt.log"))
    assert bad["error"] == f"{fleet / 'corrupt.log'}: not a text log (binary data at byte 0)"
    # nothing changed: nothing read again, also on Ray
    again = _cli("audit", str(fleet / "*"), "--store", str(on_ray), f"--ray={cluster}")
    assert again.returncode == 0 and "0 audited, 5 unchanged" in again.stdout
    job_row = next(r for r in rows if r["input"].endswith("job"))
    assert (job_row["records"], job_row["restarts"], len(job_row["sources"])) == (121, 1, 2)


def _ray_tasks(name: str) -> list[int]:
    """Pids of Ray workers running a task of this function now."""
    pids = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if cmd.startswith(f"ray::{name}".encode()):
            pids.append(int(pid))
    return pids


def test_a_worker_killed_mid_audit_loses_and_doubles_nothing(cluster, tmp_path):
    d = tmp_path / "big"
    d.mkdir()
    n_inputs, n_records = 6, 80_000
    text = "".join(RECORD.format(i=i, s=256 * i, l=3 + 1 / i**0.3) for i in range(1, n_records + 1))
    for k in range(n_inputs):
        (d / f"run{k}.log").write_text(text)
    store = tmp_path / "store"
    killed: list[int] = []

    def kill_one() -> None:
        deadline = time.monotonic() + 120
        while not killed and time.monotonic() < deadline:
            for pid in _ray_tasks("audit_input"):
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
                break
            time.sleep(0.01)

    killer = threading.Thread(target=kill_one, daemon=True)
    killer.start()
    r = _cli("audit", str(d / "*.log"), "--store", str(store), "--ray", cluster)
    killer.join(timeout=5)
    assert killed, "no audit task was seen running"
    assert r.returncode == 0, r.stderr
    assert f"{n_inputs} audited" in r.stdout and "0 unreadable" in r.stdout
    index = read_index(store)
    assert sorted(Path(p).name for p in index.get_column("input")) == [
        f"run{k}.log" for k in range(n_inputs)
    ]
    assert index.get_column("run_id").n_unique() == n_inputs
    assert index.get_column("records").to_list() == [n_records] * n_inputs
    assert index.get_column("error").null_count() == n_inputs
    metrics = pl.scan_parquet(store / "metrics", hive_partitioning=True)
    per_run = metrics.group_by("run_id").agg(pl.len(), pl.col("step").n_unique()).collect()
    assert per_run.height == n_inputs
    assert per_run.get_column("len").to_list() == [n_records] * n_inputs
    assert per_run.get_column("step").to_list() == [n_records] * n_inputs


def test_counterfactual_sweep_on_ray_gives_the_local_table(cluster, tmp_path):
    rec = tmp_path / "rec"
    r = _cli("replay", "record", "-o", str(rec), "--steps", "24", "--checkpoint-every", "8")
    assert r.returncode == 0, r.stderr
    variants = ["--variant", "baseline=baseline", "--variant", "half_lr=lr_scale:0.5"]
    common = ["replay", "counterfactual", str(rec), "--from", "8", "--until", "24", *variants]
    local = _cli(*common, "--seeds", "2", "-o", str(tmp_path / "local"), "--jobs", "1")
    on_ray = _cli(*common, "--seeds", "2", "-o", str(tmp_path / "ray"), "--ray", cluster)
    assert local.returncode == 0 and on_ray.returncode == 0, local.stderr + on_ray.stderr
    assert (tmp_path / "ray/table.md").read_text() == (tmp_path / "local/table.md").read_text()
    got = json.loads((tmp_path / "ray/results.json").read_text())
    want = json.loads((tmp_path / "local/results.json").read_text())
    assert got == want and len(want) == 4
    for o in want:  # the runs, bit for bit, but for the time each step took
        run = o["run_file"]
        assert _untimed(tmp_path / "ray" / run) == _untimed(tmp_path / "local" / run)


def _untimed(path: Path) -> list[dict]:
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    return [{k: v for k, v in r.items() if k not in ("step_time_s", "time")} for r in rows]


def test_ray_address_on_the_command_line():
    assert ray_argv(["audit", "a.log", "--store", "s", "--ray", "10.0.0.5:6379"]) == [
        "audit", "a.log", "--store", "s", "--ray-address", "10.0.0.5:6379"
    ]  # fmt: skip
    assert ray_argv(["audit", "--ray", "runs/a.log", "--store", "s"]) == [
        "audit", "--ray", "runs/a.log", "--store", "s"
    ]  # fmt: skip
    assert ray_argv(["audit", "--ray", "s3://bucket/runs/*"]) == [
        "audit", "--ray", "s3://bucket/runs/*"
    ]  # fmt: skip
    assert ray_argv(["audit", "x", "--ray=auto"]) == ["audit", "x", "--ray-address", "auto"]
    assert ray_argv(["audit", "x", "--ray", "ray://head:10001"])[-1] == "ray://head:10001"
    assert ray_argv(["audit", "x", "--ray"]) == ["audit", "x", "--ray"]


def test_which_executor(monkeypatch):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    assert wanted(False, None, False) is None
    assert wanted(True, None, False) == ""
    assert wanted(False, "h:1", False) == "h:1"
    monkeypatch.setenv("RAY_ADDRESS", "h:2")
    assert wanted(False, None, False) == "h:2"
    assert wanted(False, None, True) is None  # --workers given: the local pool


def test_ray_missing_is_a_usage_error(monkeypatch, tmp_path, fleet):
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(UsageError, match=r"--ray needs Ray: pip install 'trainlogbook\[ray\]'"):
        audit([str(fleet / "*")], tmp_path / "s", ray="")


def test_an_unreachable_cluster_is_one_line_exit_2(tmp_path, fleet):
    port = _free_port()
    r = _cli("audit", str(fleet / "*"), "--store", str(tmp_path / "s"), "--ray",
             f"127.0.0.1:{port}", timeout=200)  # fmt: skip
    assert r.returncode == 2
    assert r.stderr.startswith(f"logbook: error: --ray 127.0.0.1:{port}: cannot connect")
    assert len(r.stderr.strip().splitlines()) == 1
