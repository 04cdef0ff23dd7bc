"""What every command shares: ``--version``, one-line usage errors, ``| head`` on the
output, the same ``-f`` everywhere, ``detect --notes``."""

import json
import subprocess
import sys
from pathlib import Path

from _cli import invoke

from logbook.cli import DISTRIBUTION, version

ROOT = Path(__file__).resolve().parents[1]
SPIKE = ROOT / "fixtures" / "megatron" / "spike_restart.log"
LOGBOOK = [sys.executable, "-c", "from logbook.cli import run; run()"]


def shell(command: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", "-c", f"set -o pipefail; {command}"], capture_output=True, text=True, cwd=ROOT
    )


def test_version_names_the_distribution(monkeypatch, capsys):
    code, out, err = invoke(monkeypatch, capsys, "--version")
    assert (code, err) == (0, "")
    assert out == f"{version()}\n"
    assert DISTRIBUTION == "trainlogbook"
    assert out.startswith("trainlogbook 0.")


def test_usage_errors_are_one_line_with_exit_2(monkeypatch, capsys):
    code, out, err = invoke(monkeypatch, capsys, "detect", "--bogus", str(SPIKE))
    assert (code, out) == (2, "")
    assert err == "logbook: error: No such option: --bogus (see 'logbook detect --help')\n"
    code, out, err = invoke(monkeypatch, capsys, "nosuchcommand")
    assert code == 2
    assert err.startswith("logbook: error: No such command 'nosuchcommand'.")
    assert err.count("\n") == 1


def test_no_arguments_prints_the_help(monkeypatch, capsys):
    code, out, _ = invoke(monkeypatch, capsys)
    assert code == 2
    assert out.startswith("Usage: logbook [OPTIONS] COMMAND [ARGS]...")
    for command in ("parse", "detect", "report", "replay", "formats"):
        assert f"  {command} " in out


def test_help_fits_80_columns():
    p = subprocess.run(
        [*LOGBOOK, "detect", "--help"],
        capture_output=True,
        text=True,
        env={"COLUMNS": "80", "PATH": "/usr/bin:/bin"},
    )
    assert p.returncode == 0, p.stderr
    assert "--min-severity" in p.stdout
    assert max(len(line) for line in p.stdout.splitlines()) <= 80
    assert "╭" not in p.stdout  # plain text, no boxes


def test_a_reader_that_stops_early_is_no_error():
    cmd = " ".join(LOGBOOK[:2]) + f' "{LOGBOOK[2]}"'
    p = shell(f"{cmd} detect --json {SPIKE} | head -1")
    assert p.returncode == 0, p.stderr
    assert p.stderr == ""
    assert json.loads(p.stdout)["kind"]
    # the gate's verdict is still the exit code when the output was cut short
    p = shell(f"{cmd} detect --json --fail-on critical {SPIKE} | head -1")
    assert p.returncode == 1
    assert p.stderr == ""


def test_detect_places_the_teams_notes_on_the_run(monkeypatch, capsys, tmp_path):
    log = tmp_path / "metrics.jsonl"
    rows = [
        {"step": s, "loss": 3.0 - 0.01 * s, "lr": 6e-5 if s < 40 else 3e-5} for s in range(1, 81)
    ]
    log.write_text("".join(json.dumps(r) + "\n" for r in rows))
    notes = tmp_path / "notes.md"
    notes.write_text("# Chronicle\n\nAt iteration 40 we lowered the lr to 3e-5.\n")

    code, out, _ = invoke(monkeypatch, capsys, "detect", str(log), "--json")
    (alone,) = [json.loads(x) for x in out.splitlines()]
    assert (code, alone["kind"], alone["step"], alone["severity"]) == (
        0,
        "lr_change",
        40,
        "warning",
    )

    code, out, _ = invoke(monkeypatch, capsys, "detect", str(log), "--json", "--notes", str(notes))
    (told,) = [json.loads(x) for x in out.splitlines()]
    assert (code, told["kind"], told["step"], told["severity"]) == (0, "lr_change", 40, "info")
    assert told["evidence"]["stated_at"] == f"{notes}:3"
    assert told["message"].endswith(f"a deliberate change, stated at {notes}:3")

    code, _, err = invoke(monkeypatch, capsys, "detect", str(log), "--notes", str(tmp_path / "x"))
    assert (code, err) == (2, f"logbook: error: {tmp_path / 'x'}: no such file\n")


def test_an_output_in_a_missing_folder_is_refused_before_the_work(monkeypatch, capsys, tmp_path):
    missing = tmp_path / "typo"
    for args in (
        ("parse", str(SPIKE), "-o", str(missing / "run.parquet")),
        ("detect", str(SPIKE), "-o", str(missing / "findings.csv")),
        ("report", str(SPIKE), "-o", str(missing / "report.html")),
    ):
        code, out, err = invoke(monkeypatch, capsys, *args)
        assert (code, out) == (2, "")
        assert err == (
            f"logbook: error: output {missing / Path(args[-1]).name}: folder {missing} "
            "does not exist (create it first)\n"
        )
    assert not missing.exists()
    # parse -o DIR/ makes DIR itself, in a folder that exists
    code, out, _ = invoke(monkeypatch, capsys, "parse", str(SPIKE), "-o", f"{tmp_path / 'runs'}/")
    assert code == 0
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == ["spike_restart.log.parquet"]


def test_shell_completion_is_on():
    env = {"PATH": "/usr/bin:/bin", "_LOGBOOK_COMPLETE": "complete_bash"}
    p = subprocess.run(
        LOGBOOK,
        capture_output=True,
        text=True,
        env={**env, "COMP_WORDS": "logbook de", "COMP_CWORD": "1"},
    )
    assert (p.returncode, p.stdout.split()) == (0, ["detect"])
    # the script a user sources (``--show-completion`` prints the same, where it can tell
    # the shell)
    p = subprocess.run(
        LOGBOOK, capture_output=True, text=True, env={**env, "_LOGBOOK_COMPLETE": "source_bash"}
    )
    assert p.returncode == 0
    assert "_logbook_completion()" in p.stdout


def test_a_logbook_file_of_another_schema_version_is_refused(monkeypatch, capsys, tmp_path):
    import pyarrow.parquet as pq

    from logbook.run import Run

    run = Run.read(ROOT / "fixtures" / "report" / "incident_run.jsonl")
    jsonl, parquet = tmp_path / "run.jsonl", tmp_path / "run.parquet"
    run.write(jsonl)
    run.write(parquet)
    lines = jsonl.read_text().splitlines(keepends=True)
    head = json.loads(lines[0])
    assert head["schema"] == "logbook/1"
    jsonl.write_text(json.dumps({**head, "schema": "logbook/2"}) + "\n" + "".join(lines[1:]))
    meta = dict(pq.read_metadata(parquet).metadata)
    header = json.loads(meta[b"logbook"])
    meta[b"logbook"] = json.dumps({**header, "schema": "logbook/2"}).encode()
    pq.write_table(pq.read_table(parquet).replace_schema_metadata(meta), parquet)
    for path in (jsonl, parquet):
        code, out, err = invoke(monkeypatch, capsys, "detect", str(path))
        assert (code, out) == (2, "")
        assert err == (
            f"logbook: error: {path}: written with schema 'logbook/2'; this logbook reads "
            "'logbook/1' (upgrade logbook, or parse the raw log again)\n"
        )
