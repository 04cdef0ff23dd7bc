import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "fixtures" / "report" / "incident_run.jsonl"
CORPUS = ROOT / ".." / "shared" / "corpus"

# Runs the logbook CLI with the report command registered (whether or not the app's
# own command list has it yet), through the app's error handling.
_MAIN = """
import sys
from logbook import cli, cli_report
registered = cli._register
def register():
    registered()
    if not any(c.name == "report" for c in cli.app.registered_commands):
        cli_report.register(cli.app)
cli._register = register
sys.argv = ["logbook", *sys.argv[1:]]
cli.main()
"""


def logbook(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", _MAIN, *args], capture_output=True, text=True, cwd=ROOT
    )


def one_line_error(p: subprocess.CompletedProcess, fragment: str) -> None:
    assert p.returncode == 2, p.stderr
    assert "Traceback" not in p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("logbook: error: "), p.stderr
    assert fragment in lines[0]


def test_html_report(tmp_path):
    out = tmp_path / "audit.html"
    p = logbook("report", str(FIXTURE), "-o", str(out))
    assert p.returncode == 0, p.stderr
    assert re.fullmatch(
        rf"wrote {re.escape(str(out))}: 1,600 records, \d+ finding\(s\), 1 remedy\(ies\), "
        r"2 figure\(s\)\n",
        p.stdout,
    )
    html = out.read_text()
    assert html.count('<img src="data:image/png;base64,') == 1  # the incident's zoom
    assert html.count('<div class="plot" id="plot-overview"') == 1  # the interactive overview
    assert "<h1>Audit report: incident-demo</h1>" in html


def test_markdown_report_by_suffix_and_no_figures(tmp_path):
    out = tmp_path / "audit.markdown"
    p = logbook("report", str(FIXTURE), "-o", str(out), "--no-figures")
    assert p.returncode == 0, p.stderr
    text = out.read_text()
    assert text.startswith("# Audit report: incident-demo\n")
    assert "Figures were not drawn (--no-figures)." in text
    assert not (tmp_path / "audit_files").exists()


def test_report_log_format_is_dash_f_as_in_parse_and_detect(tmp_path):
    out = tmp_path / "audit.htm"
    p = logbook("report", str(FIXTURE), "-f", "logbook", "-o", str(out), "--no-figures")
    assert p.returncode == 0, p.stderr
    assert out.read_text().startswith("<!DOCTYPE html>")
    one_line_error(
        logbook("report", str(FIXTURE), "-f", "nosuch", "-o", str(out)),
        "unknown format 'nosuch' (known: logbook, megatron,",
    )


def test_usage_errors(tmp_path):
    one_line_error(logbook("report", str(FIXTURE)), "no output given: -o report.html")
    one_line_error(logbook("report", "-o", str(tmp_path / "r.html")), "no log file given")
    one_line_error(
        logbook("report", str(FIXTURE), "-o", str(tmp_path / "r.pdf")),
        "a report is .html (or .htm) or .md (or .markdown), not '.pdf'",
    )
    one_line_error(
        logbook("report", str(FIXTURE), "-o", str(tmp_path / "report")),
        "not 'a name without a suffix'",
    )
    one_line_error(logbook("report", str(FIXTURE), "-o", str(tmp_path)), "is a directory")
    one_line_error(
        logbook("report", str(tmp_path / "nope.log"), "-o", str(tmp_path / "r.html")),
        "no such file",
    )
    assert not (tmp_path / "r.html").exists()


@pytest.mark.skipif(
    not (CORPUS / "logs").is_dir() or importlib.util.find_spec("parsers.chronicle.notes") is None,
    reason="the shared corpus is not next to this checkout",
)
def test_chronicle_notes_appear_in_the_report(tmp_path):
    log = CORPUS / "logs" / "bigscience_tr1_13B_spike_29k.txt"
    notes = CORPUS / "chronicles" / "bigscience_train_tr1-13B-base_chronicles.md"
    out = tmp_path / "tr1.md"
    p = logbook("report", str(log), "--notes", str(notes), "-o", str(out), "--no-figures")
    assert p.returncode == 0, p.stderr
    text = out.read_text()
    assert "| sources | " in text and "bigscience_train_tr1-13B-base_chronicles.md" in text
    events = text.split("## Events")[1]
    assert re.search(r"^\| note \|", events, re.M)
    assert "| loss_scale_collapse |" in text


def test_matplotlib_is_imported_only_to_draw():
    code = (
        "import sys\n"
        "from logbook import cli, cli_detect, cli_report\n"
        "from logbook.report import build_report, render\n"
        "from logbook.run import Run\n"
        "cli._register()\n"
        "cli_report.register(cli.app)\n"
        f"report = build_report(Run.read({str(FIXTURE)!r}), [], figures=False)\n"
        "render(report, 'html')\n"
        "print('matplotlib' in sys.modules)\n"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    assert p.stdout == "False\n"
