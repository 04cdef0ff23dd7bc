"""The HTML report in a real headless browser (Chromium): it renders, shows its figures,
sorts its tables and logs nothing to the console."""

import html
import json
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from matplotlib import image

from logbook.detectors import detect
from logbook.report import build_report, write_report
from logbook.run import Run

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "report" / "incident_run.jsonl"
BROWSER_TIMEOUT_S = 120

# Appended to a copy of the report: once the page has loaded, write what a reader would
# see (each image's decoded size, the findings' steps after one and two clicks on the
# "step" heading) into the page, for --dump-dom to print.
PROBE = """<script>
window.addEventListener("load", function () {
  var sizes = Array.prototype.map.call(document.images, function (i) {
    return [i.naturalWidth, i.naturalHeight, i.complete];
  });
  var table = document.getElementById("findings-table");
  var th = table.tHead.rows[0].cells[2];
  function steps() {
    return Array.prototype.map.call(table.tBodies[0].rows, function (r) {
      return r.cells[2].textContent;
    });
  }
  th.click(); var up = steps();
  th.click(); var down = steps();
  var plot = document.getElementById("plot-overview");
  var drawn = plot.querySelectorAll("g.trace").length;
  function finish(extra) {
    var out = document.createElement("pre");
    out.id = "probe";
    extra.images = sizes; extra.up = up; extra.down = down; extra.traces = drawn;
    out.textContent = JSON.stringify(extra);
    document.body.appendChild(out);
  }
  // zoom the first panel as a drag would: every panel follows (shared x axis)
  Plotly.relayout(plot, {"xaxis.range": [1000, 1100]}).then(function () {
    var zoomed = [plot._fullLayout.xaxis.range, plot._fullLayout.xaxis3.range];
    document.querySelector("button[data-axis=time]").click();
    setTimeout(function () {
      var got = {zoomed: zoomed, time_axis: plot._fullLayout.xaxis.type,
                 time_x0: plot.data[1].x[0]};
      document.querySelector("button[data-axis=step]").click();
      setTimeout(function () {
        got.step_axis = plot._fullLayout.xaxis.type; got.step_x0 = plot.data[1].x[0];
        finish(got);
      }, 500);
    }, 500);
  });
});
</script>
"""


def _install() -> str | None:
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        return "chromium is not on PATH and cannot be installed here (needs root and apt-get)"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    cmd = ["apt-get", "install", "-y", "-q", "chromium"]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1200)
    if r.returncode != 0:
        subprocess.run(["apt-get", "update", "-q"], env=env, capture_output=True, timeout=600)
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1200)
    if r.returncode != 0:
        tail = (r.stderr.strip().splitlines() or ["?"])[-1]
        return f"apt-get install -y chromium failed: {tail}"
    return None


@pytest.fixture(scope="session")
def chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        why = _install()
        exe = shutil.which("chromium")
        if exe is None:
            pytest.skip(why or "chromium could not be installed")
    return exe


@pytest.fixture(scope="module")
def report_html(tmp_path_factory) -> tuple[Path, int]:
    run = Run.read(FIXTURE)
    report = build_report(run, detect(run))
    out = tmp_path_factory.mktemp("report") / "report.html"
    write_report(report, out, "html")
    return out, len(report.figures)


def _browse(exe: str, profile: Path, *args: str) -> subprocess.CompletedProcess:
    cmd = [exe, "--headless", "--disable-gpu", "--no-sandbox", "--enable-logging=stderr",
           "--v=0", f"--user-data-dir={profile}", "--hide-scrollbars", *args]  # fmt: skip
    return subprocess.run(cmd, capture_output=True, text=True, timeout=BROWSER_TIMEOUT_S)


def _console(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "CONSOLE" in line]


def test_screenshot_shows_the_figures(chromium, report_html, tmp_path):
    page, _ = report_html
    shot = tmp_path / "shot.png"
    p = _browse(chromium, tmp_path / "profile", f"--screenshot={shot}",
                "--virtual-time-budget=10000", "--window-size=1300,2200",
                page.as_uri())  # fmt: skip
    assert p.returncode == 0, p.stderr[-2000:]
    assert _console(p.stderr) == []
    pixels = image.imread(shot)[:, :, :3]
    assert pixels.shape[:2] == (2200, 1300)
    assert pixels.std() > 0.05  # not a blank page
    # the trajectory's blue (#1f77b4) is drawn over many pixels: the figures rendered
    blue = np.abs(pixels - np.array([0x1F, 0x77, 0xB4]) / 255).max(axis=2) < 0.08
    assert blue.sum() > 2000


def test_dom_images_decode_and_tables_sort(chromium, report_html, tmp_path):
    page, figures = report_html
    probe = tmp_path / "probe.html"
    probe.write_text(page.read_text().replace("</body>", PROBE + "</body>"))
    p = _browse(chromium, tmp_path / "profile", "--virtual-time-budget=10000", "--dump-dom",
                probe.as_uri())  # fmt: skip
    assert p.returncode == 0, p.stderr[-2000:]
    assert _console(p.stderr) == []
    found = p.stdout.split('<pre id="probe">')[1].split("</pre>")[0]
    result = json.loads(html.unescape(found))
    # the overview is interactive (a Plotly figure), the incident zoom a PNG
    assert len(result["images"]) == figures - 1 == 1
    assert result["traces"] >= 6
    assert [[round(v) for v in r] for r in result["zoomed"]] == [[1000, 1100]] * 2
    assert result["time_axis"] == "date"
    assert result["time_x0"] == 1_704_067_200_000  # 2024-01-01 00:00 UTC, in ms
    assert (result["step_axis"], result["step_x0"]) == ("linear", 1)  # and back to steps
    for w, h, complete in result["images"]:
        assert complete and w == 1200 and h > 400
    up = [int(s) for s in result["up"]]
    assert up == sorted(up) and len(up) > 5
    assert [int(s) for s in result["down"]] == sorted(up, reverse=True)
