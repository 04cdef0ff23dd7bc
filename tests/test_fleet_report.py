"""`logbook report STORE -o fleet.html`: the report of a run store, and each run's report."""

import random
import re
import shutil
from html import escape, unescape
from pathlib import Path

import pytest
from _cli import invoke

from logbook.store import audit, read_index

ROOT = Path(__file__).resolve().parents[1]
LOGS = ("spike_restart.log", "megatron_core_timestamps.log", "mcore_1570_truncated.log")
HEADERS = [
    "run", "input", "format", "records", "steps", "restarts", "lost steps", "goodput",
    "worst finding", "critical", "warning", "info", "caveats", "error",
]  # fmt: skip
COUNTS = {  # table column -> runs.parquet column
    "restarts": "restarts", "lost steps": "lost_steps", "critical": "critical",
    "warning": "warning", "info": "info",
}  # fmt: skip
NO_SPIKE = "No loss spike in any of the 1 run(s) with steps: nothing to draw."
NO_LEAD = "No finding precedes a loss spike or divergence in any run: no precursor lead to draw."
NO_RESTART = "No restart in any run: nothing to draw."


def _store(folder: Path, names: tuple[str, ...], corrupt: bool) -> Path:
    logs = folder / "logs"
    logs.mkdir(parents=True)
    for name in names:
        shutil.copy(ROOT / "fixtures/megatron" / name, logs / name)
    if corrupt:
        (logs / "corrupt.log").write_bytes(random.Random(7).randbytes(4096))
    store = folder / "store"
    audit([str(logs / "*")], store, workers=1)
    return store


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    """Four runs (one input holds two) and one unreadable input."""
    return _store(tmp_path_factory.mktemp("fleet"), LOGS, corrupt=True)


def index_rows(store: Path) -> dict[str, dict]:
    return {r["run"] or Path(r["input"]).name: r for r in read_index(store).to_dicts()}


def table_rows(html: str) -> dict[str, dict]:
    """The runs table: name -> {header: (cell text, link or None)}."""
    table = re.search(r'<table class="sortable" id="runs-table">(.*?)</table>', html).group(1)
    heads = [unescape(h) for h in re.findall(r"<th>(.*?)</th>", table)]
    assert heads == HEADERS
    out = {}
    for row in re.findall(r"<tr>(.*?)</tr>", table.split("<tbody>")[1]):
        cells = {}
        for head, td in zip(heads, re.findall(r"<td[^>]*>(.*?)</td>", row), strict=True):
            link = re.fullmatch(r'<a href="([^"]*)">(.*)</a>', td)
            cells[head] = (unescape(link.group(2)), link.group(1)) if link else (unescape(td), None)
        name = cells["run"][0]
        assert name not in out
        out[name] = cells
    return out


def test_fleet_report_with_run_reports_and_figures(store, tmp_path, monkeypatch, capsys):
    out = tmp_path / "fleet.html"
    code, stdout, stderr = invoke(monkeypatch, capsys, "report", str(store), "-o", str(out))
    assert code == 0, stderr
    folder = tmp_path / "fleet_runs"
    assert stdout == (
        f"wrote {out}: 5 run(s) (1 unreadable), 3 figure(s)\n"
        f"wrote 4 run report(s) in {folder} (4 read again from their inputs)\n"
    )
    assert stderr.splitlines()[-1] == "reports 4/4"
    html = out.read_text()
    want = index_rows(store)
    assert sorted(want) == sorted(
        ["spike_restart.log", "megatron_core_timestamps.log", "mcore_1570_truncated.log",
         "mcore_1570_truncated.log#2", "corrupt.log"]
    )  # fmt: skip
    got = table_rows(html)
    assert sorted(got) == sorted(want)  # one row per run, no more
    # the worst first, the unreadable last
    assert list(got)[0] == "spike_restart.log" and list(got)[-1] == "corrupt.log"
    for name, row in want.items():
        cells = {k: v[0] for k, v in got[name].items()}
        assert cells["input"] == row["input"]
        if row["error"] is not None:
            continue
        assert got[name]["run"][1] == f"fleet_runs/{row['run_id']}.html"
        assert (folder / f"{row['run_id']}.html").is_file()
        assert cells["format"] == "megatron"
        assert cells["records"] == str(row["records"])
        assert cells["steps"] == f"{row['first_step']:,}..{row['last_step']:,}"
        for col, key in COUNTS.items():
            assert cells[col] == str(row[key]), (name, col)
        assert cells["worst finding"] == (row["worst"] or "")
        assert cells["caveats"] == "; ".join(row["caveats"])
        assert cells["error"] == ""
    spike = {k: v[0] for k, v in got["spike_restart.log"].items()}
    assert (spike["records"], spike["steps"], spike["restarts"], spike["lost steps"]) == (
        "121", "1..100", "1", "21"
    )  # fmt: skip
    assert (spike["critical"], spike["warning"], spike["info"]) == ("3", "2", "2")
    assert spike["worst finding"] == "critical grad_norm_spike at 79"
    assert want["spike_restart.log"]["goodput"] is None and spike["goodput"] == "unknown"
    assert want["megatron_core_timestamps.log"]["goodput"] == pytest.approx(0.0511462)
    assert got["megatron_core_timestamps.log"]["goodput"][0] == "5.11%"
    assert got["mcore_1570_truncated.log#2"]["caveats"][0] == (
        "1 record(s) cut mid-line: only their complete fields were read; run 2 of 2 in this input"
    )
    # the unreadable input: its error, no link, no report
    bad = got["corrupt.log"]
    error = want["corrupt.log"]["error"]
    assert error.endswith("corrupt.log: not a text log (binary data at byte 70)")
    assert bad["error"] == (error, None) and bad["run"] == ("corrupt.log", None)
    assert all(bad[h][0] == "" for h in HEADERS[2:-1])
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        [f"{r['run_id']}.html" for r in want.values() if r["error"] is None] + ["plotly.min.js"]
    )
    # the run reports share one copy of plotly.js, beside them, rather than 4.6 MB each
    one = (folder / f"{want['spike_restart.log']['run_id']}.html").read_text()
    assert '<script src="plotly.min.js"></script>' in one and len(one) < 1_000_000
    assert (folder / "plotly.min.js").stat().st_size > 3_000_000
    # the headline
    assert (
        "<p>5 run(s), 1 unreadable; 1 with critical and 1 with warning findings; 3 restart(s), "
        "31 step(s) computed again after them.</p>"
    ) in html
    assert "<tr><th>readable</th><td>4</td></tr><tr><th>unreadable</th><td>1</td></tr>" in html
    assert "<tr><th>restarts</th><td>3 (in 3 run(s))</td></tr>" in html
    assert "<tr><th>lost steps</th><td>31</td></tr>" in html
    # figures embedded, one sentence for what has no run to show
    assert html.count('<img src="data:image/png;base64,') == 3
    for name in ("spike_rate", "precursor_lead", "restart_cause"):
        assert f'<figure id="fig-{name}">' in html
    assert "<p>3 run(s) with steps have no loss spike.</p>" in html
    assert "2 precursor(s) of 2 kind(s), across 1 run(s)" in html
    assert "3 restart(s) across 3 run(s)" in html
    # self-contained: no address outside the file
    assert not re.search(r"""(?:src|href)\s*=\s*["']?\s*https?://""", html, re.I)
    assert "http://" not in html and "https://" not in html
    # the sort script of the run report sorts this table too
    assert "table.sortable th[aria-sort=ascending]" in html and "function compare(a, b)" in html


def test_run_reports_are_those_of_report_log(store, tmp_path, monkeypatch, capsys):
    out = tmp_path / "fleet.html"
    code, _, err = invoke(monkeypatch, capsys, "report", str(store), "-o", str(out), "--no-figures")
    assert code == 0, err
    html = out.read_text()
    assert "<p>Figures were not drawn (--no-figures).</p>" in html
    assert "<img" not in html
    rows = index_rows(store)
    # byte for byte the report of the log (the second run of its input: with --run)
    for name in ("spike_restart.log", "mcore_1570_truncated.log#2"):
        row = rows[name]
        direct = tmp_path / "direct.html"
        pick = ["--run", name] if name.endswith("#2") else []
        args = [row["input"], "-o", str(direct), "--no-figures", *pick]
        code, _, err = invoke(monkeypatch, capsys, "report", *args)
        assert code == 0, err
        mine = tmp_path / "fleet_runs" / f"{row['run_id']}.html"
        assert mine.read_bytes() == direct.read_bytes(), name


def test_an_input_changed_since_the_audit_is_rebuilt_from_the_tables(tmp_path, monkeypatch, capsys):
    store = _store(tmp_path, ("spike_restart.log",), corrupt=False)
    log = tmp_path / "logs" / "spike_restart.log"
    before = tmp_path / "before.html"
    assert (
        invoke(monkeypatch, capsys, "report", str(log), "-o", str(before), "--no-figures")[0] == 0
    )
    with open(log, "a") as fh:
        fh.write("a line the audit did not see\n")
    out = tmp_path / "fleet.html"
    code, stdout, err = invoke(
        monkeypatch, capsys, "report", str(store), "-o", str(out), "--no-figures"
    )
    assert code == 0, err
    assert stdout.splitlines()[1].endswith("(1 rebuilt from the store's tables)")
    (rid,) = read_index(store).get_column("run_id").to_list()
    rebuilt = (tmp_path / "fleet_runs" / f"{rid}.html").read_text()
    assert "report rebuilt from the run store&#x27;s tables" in rebuilt
    # the findings and events (restart cause, lost steps) as the audit saw them
    original = before.read_text()
    for table in ("findings-table", "events-table"):
        pick = rf'<table class="sortable" id="{table}">.*?</table>'
        assert re.search(pick, rebuilt).group(0) == re.search(pick, original).group(0)
    assert "resume_step=75, last_step_before=96, lost_steps=21, cause=nccl_timeout" in rebuilt


def test_no_run_reports_and_figures_without_data(tmp_path, monkeypatch, capsys):
    store = _store(tmp_path, ("megatron_lm_2020.log",), corrupt=False)
    out = tmp_path / "quiet.html"
    code, stdout, err = invoke(
        monkeypatch, capsys, "report", str(store), "-o", str(out), "--no-run-reports"
    )
    assert code == 0, err
    assert stdout == f"wrote {out}: 1 run(s) (0 unreadable), 0 figure(s)\n"
    assert "reports" not in err
    assert not (tmp_path / "quiet_runs").exists()
    html = out.read_text()
    for sentence in (NO_SPIKE, NO_LEAD, NO_RESTART):
        assert f"<p>{escape(sentence)}</p>" in html
    assert "<img" not in html and "<a href" not in html
    got = table_rows(html)
    assert list(got) == ["megatron_lm_2020.log"]
    assert got["megatron_lm_2020.log"]["run"] == ("megatron_lm_2020.log", None)
    assert got["megatron_lm_2020.log"]["restarts"] == ("0", None)


def test_markdown_fleet_report(store, tmp_path, monkeypatch, capsys):
    out = tmp_path / "fleet.md"
    code, _, err = invoke(monkeypatch, capsys, "report", str(store), "-o", str(out), "--no-figures")
    assert code == 0, err
    text = out.read_text()
    rows = index_rows(store)
    rid = rows["spike_restart.log"]["run_id"]
    assert f"| [spike_restart.log](fleet_runs/{rid}.md) | " in text
    assert (tmp_path / "fleet_runs" / f"{rid}.md").is_file()
    assert "| corrupt.log | " in text
    assert text.count("\n| ") == 2 + 8 + 5  # the headline's rows and table's, one per run


def test_errors(store, tmp_path, monkeypatch, capsys):
    out = str(tmp_path / "fleet.html")
    damaged = tmp_path / "damaged"
    damaged.mkdir()
    (damaged / "runs.parquet").write_bytes(b"not parquet")
    code, _, err = invoke(monkeypatch, capsys, "report", str(damaged), "-o", out)
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert err.startswith(f"logbook: error: {damaged / 'runs.parquet'}: not a readable run index")
    code, _, err = invoke(monkeypatch, capsys, "report", str(store), "-o", out, "--run", "x")
    assert (code, err.strip()) == (
        2, "logbook: error: --run: not for a run store (its findings are stored)"
    )  # fmt: skip
    code, _, err = invoke(monkeypatch, capsys, "report", str(store), "-o", str(tmp_path / "f.txt"))
    assert code == 2 and "a report is .html (or .htm) or .md" in err
    log = str(ROOT / "fixtures/megatron/spike_restart.log")
    code, _, err = invoke(monkeypatch, capsys, "report", log, "-o", out, "--no-run-reports")
    assert (code, err.strip()) == (
        2, "logbook: error: --no-run-reports: for a run store (logbook report STORE -o fleet.html)"
    )  # fmt: skip
    # a folder without runs.parquet is read as a run's logs, as before
    code, stdout, err = invoke(
        monkeypatch, capsys, "report", str(ROOT / "fixtures/tensorboard/restart"), "-o", out,
        "--no-figures",
    )  # fmt: skip
    assert code == 0, err
    assert stdout.startswith(f"wrote {out}: ") and "records" in stdout
    assert not (tmp_path / "fleet_runs").exists()
