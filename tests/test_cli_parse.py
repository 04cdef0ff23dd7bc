import gzip
import subprocess
import sys
from pathlib import Path

import pytest

from logbook.run import Run, RunMeta


def logbook(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "logbook.cli", *args], capture_output=True, text=True
    )


def one_line_error(p: subprocess.CompletedProcess, fragment: str) -> None:
    assert p.returncode == 2, p.stderr
    assert "Traceback" not in p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("logbook: error: ")
    assert fragment in lines[0]


def test_missing_file(tmp_path):
    one_line_error(logbook("parse", str(tmp_path / "nope.log")), "no such file")


def test_directory(tmp_path):
    one_line_error(logbook("parse", str(tmp_path)), "is a directory")


def test_empty_file(tmp_path):
    p = tmp_path / "empty.log"
    p.write_text("\n\n")
    one_line_error(logbook("parse", str(p)), "file is empty")


def test_binary_file(tmp_path):
    p = tmp_path / "model.bin"
    p.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)))
    one_line_error(logbook("parse", str(p)), "not a text log (binary data at byte 8)")


def test_unrecognized_text(tmp_path):
    p = tmp_path / "notes.txt"
    p.write_text("dear diary\nthe loss went up\n")
    one_line_error(logbook("parse", str(p)), "unrecognized log format")


def test_unknown_format_name(tmp_path):
    p = tmp_path / "a.log"
    p.write_text("x\n")
    one_line_error(logbook("parse", str(p), "--format", "nosuch"), "unknown format 'nosuch'")


def test_bad_output_suffix(tmp_path):
    src = tmp_path / "run.jsonl"
    Run(meta=RunMeta(name="r")).write(src)
    one_line_error(logbook("parse", str(src), "-o", str(tmp_path / "x.csv")), "name it .jsonl")


def test_damaged_gzip(tmp_path):
    p = tmp_path / "a.log.gz"
    p.write_bytes(gzip.compress(b"iteration 1\n" * 100)[:40])
    r = logbook("parse", str(p))
    one_line_error(r, "a.log.gz")


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
def test_logbook_file_round_trips_through_parse(tmp_path, suffix):
    src = tmp_path / "run.jsonl"
    Run(meta=RunMeta(name="r", format="megatron")).write(src)
    out = tmp_path / f"out{suffix}"
    p = logbook("parse", str(src), "-o", str(out))
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines()[0] == "megatron: 0 records, 0 segment(s)"
    assert Run.read(out).meta.name == "r"


def test_formats_lists_every_registered_format():
    from parsers import FORMATS

    p = logbook("formats")
    assert p.returncode == 0
    names = [line.split()[0] for line in p.stdout.splitlines() if line and not line[0].isspace()]
    assert names == list(FORMATS)


def test_help_does_not_import_torch():
    code = (
        "import sys, runpy; sys.argv=['logbook','--help'];"
        "\ntry:\n  runpy.run_module('logbook.cli', run_name='__main__')"
        "\nexcept SystemExit: pass"
        "\nassert 'torch' not in sys.modules, 'torch imported'; print('ok')"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert p.stdout.strip().endswith("ok"), p.stderr
    assert Path(__file__).exists()
