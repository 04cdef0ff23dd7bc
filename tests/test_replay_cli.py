"""The replay commands through the real entry point: lazy torch import, exit codes."""

import subprocess
import sys
from pathlib import Path

import pytest

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "replay" / "segment_run.jsonl"

PROBE = """
import sys
sys.argv = ["logbook", *sys.argv[1:]]
from logbook import cli
try:
    cli.main()
except SystemExit:
    pass
print("torch imported:", "torch" in sys.modules, file=sys.stderr)
"""


def probe(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", PROBE, *args], capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize(
    "args", [("--help",), ("replay", "--help"), ("detect", str(FIXTURE)), ("formats",)]
)
def test_torch_is_not_imported_outside_the_replay_commands(args):
    p = probe(*args)
    assert p.stderr.strip().splitlines()[-1] == "torch imported: False", p.stderr


def test_replay_errors_are_one_line_and_exit_2(tmp_path):
    pytest.importorskip("torch")
    p = subprocess.run(
        [sys.executable, "-m", "logbook.cli", "replay", "verify", str(tmp_path), "--from", "0"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert p.stderr.strip().splitlines() == [
        f"logbook: error: {tmp_path}: no recorded run here (expected run.jsonl)"
    ]
