"""The comparison page in a real headless browser (Chromium): it renders with nothing on
the console, one figure per metric holds both runs, and both runs' incidents are there."""

import html
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from matplotlib import image

ROOT = Path(__file__).resolve().parents[1]
RUNS = [ROOT / "fixtures" / "nanogpt" / "shakespeare_char.log",
        ROOT / "fixtures" / "nanogpt" / "tiny_spike.log"]  # fmt: skip
NAMES = ["shakespeare_char.log", "tiny_spike.log"]
BROWSER_TIMEOUT_S = 120

# Appended to a copy of the page: once it has loaded, write what a reader would see (each
# overlay's metric, runs, legend and decoded image size; each run's incident rows) into
# the page, for --dump-dom to print.
PROBE = """<script>
window.addEventListener("load", function () {
  var map = Array.prototype.map;
  var figures = map.call(document.querySelectorAll("figure.overlay"), function (f) {
    var img = f.querySelector("img");
    return {
      metric: f.getAttribute("data-metric"),
      runs: JSON.parse(f.getAttribute("data-runs")),
      legend: map.call(f.querySelectorAll("ul.legend li"), function (li) {
        return li.getAttribute("data-run");
      }),
      image: [img.naturalWidth, img.naturalHeight, img.complete]
    };
  });
  var incidents = map.call(document.querySelectorAll("section.run-incidents"), function (s) {
    return {
      run: s.getAttribute("data-run"),
      rows: map.call(s.querySelectorAll("tbody tr"), function (r) {
        return [r.cells[0].textContent, r.cells[1].textContent, r.cells[2].textContent];
      })
    };
  });
  var side = document.querySelectorAll("section.run-incidents");
  var out = document.createElement("pre");
  out.id = "probe";
  out.textContent = JSON.stringify({
    figures: figures,
    incidents: incidents,
    // side by side: the second run's column starts right of the first's, at its top
    side: [side[0].getBoundingClientRect().left < side[1].getBoundingClientRect().left,
           side[0].getBoundingClientRect().top === side[1].getBoundingClientRect().top]
  });
  document.body.appendChild(out);
});
</script>
"""


@pytest.fixture(scope="session")
def chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        pytest.skip("chromium is not on PATH")
    return exe


@pytest.fixture(scope="module")
def page(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("compare") / "compare.html"
    cmd = [sys.executable, "-c", "from logbook.cli import run; run()", "compare",
           *map(str, RUNS), "-o", str(out)]  # fmt: skip
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert p.returncode == 0, p.stderr
    assert p.stderr == ""
    return out


def _browse(exe: str, profile: Path, *args: str) -> subprocess.CompletedProcess:
    cmd = [exe, "--headless", "--disable-gpu", "--no-sandbox", "--enable-logging=stderr",
           "--v=0", f"--user-data-dir={profile}", "--hide-scrollbars", *args]  # fmt: skip
    return subprocess.run(cmd, capture_output=True, text=True, timeout=BROWSER_TIMEOUT_S)


def _console(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "CONSOLE" in line]


def test_screenshot_shows_both_runs(chromium, page, tmp_path):
    shot = tmp_path / "shot.png"
    p = _browse(chromium, tmp_path / "profile", f"--screenshot={shot}",
                "--window-size=1300,1400", page.as_uri())  # fmt: skip
    assert p.returncode == 0, p.stderr[-2000:]
    assert _console(p.stderr) == []
    pixels = image.imread(shot)[:, :, :3]
    assert pixels.shape[:2] == (1400, 1300)
    # the first run's blue (#1f77b4) and the second's orange (#ff7f0e) are both drawn
    for rgb in ([0x1F, 0x77, 0xB4], [0xFF, 0x7F, 0x0E]):
        near = np.abs(pixels - np.array(rgb) / 255).max(axis=2) < 0.08
        assert near.sum() > 300


def test_dom_has_one_figure_per_metric_with_both_runs_and_their_incidents(chromium, page, tmp_path):
    probe = tmp_path / "probe.html"
    probe.write_text(page.read_text().replace("</body>", PROBE + "</body>"))
    p = _browse(chromium, tmp_path / "profile", "--virtual-time-budget=10000", "--dump-dom",
                probe.as_uri())  # fmt: skip
    assert p.returncode == 0, p.stderr[-2000:]
    assert _console(p.stderr) == []
    found = p.stdout.split('<pre id="probe">')[1].split("</pre>")[0]
    result = json.loads(html.unescape(found))
    figures = result["figures"]
    assert [f["metric"] for f in figures] == ["loss", "step_time_s", "mfu_pct"]
    for f in figures:
        assert f["runs"] == NAMES
        assert f["legend"] == NAMES
        width, height, complete = f["image"]
        assert complete and (width, height) == (1200, 300)
    assert result["incidents"] == [
        {"run": NAMES[0], "rows": [["restart", "warning", "250"], ["divergence", "critical", "260"],
                                   ["nonfinite", "critical", "260"]]},
        {"run": NAMES[1], "rows": [["loss_spike", "critical", "51"],
                                   ["divergence", "critical", "52"]]},
    ]  # fmt: skip
    assert result["side"] == [True, True]
