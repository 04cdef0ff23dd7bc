"""`logbook audit s3://...`: inputs read from an object store, here a local S3-compatible
server (moto's) that the test starts; the command runs as a user runs it."""

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from logbook.store import read_index

pytest.importorskip("s3fs")
moto_server = pytest.importorskip("moto.server")

ROOT = Path(__file__).resolve().parents[1]
LOGBOOK = str(Path(sys.executable).parent / "logbook")
MEGATRON = ROOT / "fixtures/megatron"


@pytest.fixture(scope="module")
def s3():
    """(endpoint URL, the environment that points boto at it) of a fresh local S3."""
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    url = f"http://{host}:{port}"
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("AWS_")},
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": url,
    }
    try:
        yield url, env
    finally:
        server.stop()


@pytest.fixture
def bucket(s3, request):
    import boto3

    url, _ = s3
    client = boto3.client(
        "s3",
        endpoint_url=url,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        region_name="us-east-1",
    )
    name = request.node.name.replace("_", "-")[:40].strip("-")
    client.create_bucket(Bucket=name)
    return client, name


def _cli(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([LOGBOOK, *args], capture_output=True, text=True, env=env, timeout=120)


def test_audit_of_s3_objects_and_prefixes(s3, bucket, tmp_path):
    _, env = s3
    client, name = bucket
    for log in ("crash_restarts.log", "spike_restart.log"):
        client.upload_file(str(MEGATRON / log), name, f"runs/{log}")
    # a prefix of launch files is one run, as a local folder is
    client.upload_file(str(MEGATRON / "crash_restarts.log"), name, "runs/job7/launch1.log")
    store = tmp_path / "store"
    r = _cli(env, "audit", f"s3://{name}/runs/*", "--store", str(store), "--workers", "1")
    assert r.returncode == 0, r.stderr
    assert "3 input(s), 3 audited, 0 unchanged; 3 run(s), 0 unreadable" in r.stdout
    rows = {Path(r["input"]).name: r for r in read_index(store).to_dicts()}
    assert sorted(rows) == ["crash_restarts.log", "job7", "spike_restart.log"]
    crash = rows["crash_restarts.log"]
    assert crash["input"] == f"s3://{name}/runs/crash_restarts.log"
    assert crash["sources"] == [crash["input"]]
    assert (crash["format"], crash["records"], crash["restarts"], crash["lost_steps"]) == (
        "megatron", 7, 3, 31
    )  # fmt: skip
    assert crash["worst"] == "critical crash at 530"
    job = rows["job7"]
    assert job["input"] == f"s3://{name}/runs/job7"
    assert job["sources"] == [f"s3://{name}/runs/job7/launch1.log"]
    assert (job["records"], job["restarts"]) == (7, 3)
    # hashed as a local folder is: each file's name within the input and its own hash
    data = hashlib.sha256((MEGATRON / "crash_restarts.log").read_bytes()).hexdigest()
    assert job["content_hash"] == hashlib.sha256(f"launch1.log\0{data}\n".encode()).hexdigest()
    want = hashlib.sha256(f"crash_restarts.log\0{data}\n".encode()).hexdigest()
    assert crash["content_hash"] == want
    # events name the objects, not the local copies they were read from
    events = pl.scan_parquet(store / "events", hive_partitioning=True).collect()
    assert sorted(set(events.get_column("file").to_list())) == sorted(
        [crash["input"], job["sources"][0], rows["spike_restart.log"]["input"]]
    )
    # the same store answers as for local files: the second audit reads nothing
    again = _cli(env, "audit", f"s3://{name}/runs/*", "--store", str(store), "--workers", "1")
    assert again.returncode == 0 and "0 audited, 3 unchanged" in again.stdout
    # an object written again with other bytes is read again, alone
    client.upload_file(str(MEGATRON / "nan_skipped.log"), name, "runs/spike_restart.log")
    third = _cli(env, "audit", f"s3://{name}/runs/*", "--store", str(store), "--workers", "1")
    assert third.returncode == 0 and "1 audited, 2 unchanged" in third.stdout
    now = {Path(r["input"]).name: r for r in read_index(store).to_dicts()}
    assert now["spike_restart.log"]["content_hash"] != rows["spike_restart.log"]["content_hash"]
    assert now["crash_restarts.log"]["seconds"] == crash["seconds"]  # kept as it was


def test_a_corrupt_object_keeps_its_row_and_a_missing_one_is_exit_2(s3, bucket, tmp_path):
    _, env = s3
    client, name = bucket
    client.put_object(Bucket=name, Key="bad.log", Body=bytes(range(256)) * 40)
    store = tmp_path / "store"
    r = _cli(env, "audit", f"s3://{name}/bad.log", "--store", str(store), "--workers", "1")
    assert r.returncode == 0 and "1 run(s), 1 unreadable" in r.stdout
    (row,) = read_index(store).to_dicts()
    assert row["error"] == f"s3://{name}/bad.log: not a text log (binary data at byte 0)"
    gone = _cli(env, "audit", f"s3://{name}/nothing/*.log", "--store", str(store))
    assert gone.returncode == 2
    assert gone.stderr == f"logbook: error: s3://{name}/nothing/*.log: no such file or directory\n"
