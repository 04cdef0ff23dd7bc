import base64
import json
import re
import struct
from pathlib import Path

import numpy as np
import pytest
from matplotlib.collections import LineCollection, PolyCollection

from logbook.detectors import detect
from logbook.report import build_report, render, write_report
from logbook.report.interactive import plotly_js
from logbook.run import Run

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "report" / "incident_run.jsonl"


@pytest.fixture(scope="module")
def built():
    run = Run.read(FIXTURE)
    findings = detect(run)
    return run, findings, build_report(run, findings)


def marks(ax) -> dict[str, list[tuple[float, float]]]:
    """gid -> (first x, last x) of each drawn mark on one axis."""
    out: dict[str, list[tuple[float, float]]] = {}
    for c in ax.collections:
        gid = c.get_gid()
        if isinstance(c, LineCollection):
            spans = [(float(s[0][0]), float(s[0][0])) for s in c.get_segments()]
        elif isinstance(c, PolyCollection):
            spans = [
                (float(p.vertices[:, 0].min()), float(p.vertices[:, 0].max()))
                for p in c.get_paths()
            ]
        else:
            continue
        out.setdefault(gid, []).extend(spans)
    for line in ax.lines:
        x = np.asarray(line.get_xdata(), dtype=float)
        out.setdefault(line.get_gid(), []).extend((float(v), float(v)) for v in x[np.isfinite(x)])
    return out


def test_overview_shows_restarts_lr_cut_collapse_and_spike(built):
    _, _, report = built
    fig = report.figures[0].figure
    labels = [ax.get_ylabel() for ax in fig.axes]
    assert labels == [
        "loss (nats)", "learning rate", "grad norm", "loss scale", "activation norm",
        "step time (s)",
    ]  # fmt: skip
    drawn = {ax.get_ylabel(): marks(ax) for ax in fig.axes}
    for panel in drawn.values():  # event lines on every panel
        assert panel["event:restart"] == [(701.0, 701.0), (1001.0, 1001.0)]
        assert panel["event:hardware_failure"] == [(730.0, 730.0)]
        assert panel["event:lr_change"] == [(1001.0, 1001.0)]  # the manual LR cut
        assert panel["event:note"] == [(1120.0, 1120.0)]
    loss = drawn["loss (nats)"]
    assert (1097.5, 1120.5) in loss["finding:critical"]  # the loss spike, shaded
    assert (1098.0, 1098.0) in loss["target:critical"]  # the spike's marker
    scale = drawn["loss scale"]
    assert (1059.5, 1090.5) in scale["finding:warning"]  # the collapse
    assert [x for x, _ in scale["overflow"]] == [1060.0, 1066.0, 1072.0, 1078.0, 1084.0, 1090.0]
    assert "other" in loss  # the records the rewind recomputed, drawn apart
    assert "other" in drawn["step time (s)"]  # on the panels beyond the core ones too
    # checkpoint saves are ticks on the bottom axis of the figure, whichever panel that
    # is: the fixture logs step_time_s, so the step-time panel is drawn below the
    # activation norm (the last of figures.PANELS), and the ticks are on it, on no other
    assert labels[-1] == "step time (s)"
    ckpt = [x for x, _ in drawn["step time (s)"]["checkpoints"]]
    assert ckpt == [float(s) for s in range(100, 1500, 100)]
    assert [k for k, panel in drawn.items() if "checkpoints" in panel] == ["step time (s)"]


def test_zoom_shades_the_precursors(built):
    _, findings, report = built
    assert [f.name for f in report.figures] == ["overview", "incident_1"]
    zoom = report.figures[1]
    assert zoom.title == "Incident 1: loss_spike, divergence at step 1098"
    pre = [f for f in findings if f.precedes == "loss_spike@1098/seg1"]
    assert {"activation_norm_drift", "loss_scale_collapse", "grad_norm_spike"} <= {
        p.kind for p in pre
    }
    for p in pre:
        assert p.id in zoom.caption
    shaded = {ax.get_ylabel(): marks(ax).get("precursor", []) for ax in zoom.figure.axes}
    act = next(p for p in pre if p.kind == "activation_norm_drift")
    assert (act.start_step - 0.5, act.end_step + 0.5) in shaded["activation norm"]
    assert (1059.5, 1090.5) in shaded["loss scale"]


def test_png_figures_have_their_size(built):
    _, _, report = built
    for fig in report.figures:
        assert fig.png[:8] == b"\x89PNG\r\n\x1a\n"
        width, height = struct.unpack(">II", fig.png[16:24])
        assert width == 1200 and height == round(190 * len(fig.figure.axes) + 45)


def _rows(html: str, table_id: str) -> list[str]:
    m = re.search(rf'<table class="sortable" id="{table_id}">(.*?)</table>', html, re.S)
    assert m, table_id
    return re.findall(r"<tr>(.*?)</tr>", m.group(1).split("<tbody>")[1], re.S)


def test_html_is_self_contained_and_lists_everything(built):
    run, findings, report = built
    html = render(report, "html")
    assert html.startswith("<!DOCTYPE html>")
    # plotly.js is embedded whole (its own strings name its web site); the rest of the
    # page refers to nothing outside it
    assert html.count(plotly_js()) == 1
    html = html.replace(plotly_js(), "")
    assert not re.search(r"""(src|href)=["'](?!data:image/png;base64,)""", html)
    assert "http://" not in html and "https://" not in html
    imgs = re.findall(r'<img src="data:image/png;base64,([A-Za-z0-9+/=]+)"', html)
    # the overview is drawn interactively from its spec; the incident zooms are PNGs
    assert [base64.b64decode(i) for i in imgs] == [f.png for f in report.figures[1:]]
    spec = re.search(r'<script type="application/json" id="spec-overview">(.*?)</script>', html)
    assert json.loads(spec.group(1)) == json.loads(json.dumps(report.figures[0].interactive))
    events = _rows(html, "events-table")
    assert len(events) == len(run.events) == 26
    assert all(re.search(r"<td>incident_run\.jsonl:\d+</td>", r) for r in events)
    assert sum("<td>lr_change</td>" in r and "manual=True" in r for r in events) == 1
    found = _rows(html, "findings-table")
    assert len(found) == len(findings)
    kinds = [re.findall(r"<td>([a-z_]+)</td>", r)[0] for r in found]
    assert {"restart", "loss_scale_collapse", "loss_spike", "activation_norm_drift"} <= set(kinds)
    spike = found[kinds.index("loss_spike")]
    assert 'class="sev-critical"' in spike
    drift = found[kinds.index("activation_norm_drift")]
    assert "<td>loss_spike@1098/seg1</td>" in drift
    (remedy,) = _rows(html, "remedies-table")
    cells = re.findall(r"<td[^>]*>(.*?)</td>", remedy)
    assert cells[:2] == ["1", "loss_spike"] and cells[5:8] == ["1000", "1001..1200",
                                                             "256000..307199 (est.)"]  # fmt: skip
    restarts = _rows(html, "restarts-table")
    assert len(restarts) == 2
    assert "<td>ecc</td>" in restarts[0] and "none seen (deliberate?)" in restarts[1]
    for text in (
        "<p>1 critical incident(s) (loss_spike, divergence at step 1098); 2 restart(s), 1 after "
        "a crash, costing 2,100 s (35 min 0 s); goodput 53.16% (53.88% modelled at the "
        "Young–Daly interval).</p>",
        "<td>53.16%</td>",  # measured goodput 2894 / 5444
        "<td>52.93%</td>",  # modelled at the 100-step interval
        "<td>53.88%</td>",  # modelled at the Young-Daly interval
        "<td>571.5 s (9 min 32 s) = 286 steps</td>",
        "rewind to the checkpoint of step 1000 (/checkpoints/incident)",
        "skip the batches of steps 1001..1200 (200 batches; samples 256,000..307,199, estimated)",
        "cut the peak learning rate from 0.0003 to 0.00015",
        "--skip-train-iteration-range 1001-1200",
        "--start 1000 --end 1300 --out remedy_1098",
        "logbook replay segment ",
    ):
        assert text in html, text


def test_same_input_same_bytes(built):
    run, findings, report = built
    again = build_report(run, findings)
    assert render(again, "html") == render(report, "html")
    assert render(again, "md") == render(report, "md")


def test_markdown_links_figure_files(built, tmp_path):
    _, findings, report = built
    written = write_report(report, tmp_path / "audit.md", "md")
    assert [p.name for p in written] == ["audit.md", "overview.png", "incident_1.png"]
    text = written[0].read_text()
    assert "![Overview](audit_files/overview.png)" in text
    assert (tmp_path / "audit_files" / "incident_1.png").read_bytes() == report.figures[1].png
    header = (
        "| severity | kind | step | start | end | score | what | precursor of | lead | segment "
        "| source |\n"
    )
    table = text.split(header)[1].split("\n\n")[0].strip().splitlines()
    assert len(table) == 1 + len(findings)  # rule + one row per finding
    assert oct(written[0].stat().st_mode & 0o777) == "0o644"


def test_report_without_figures_or_findings(tmp_path):
    run = Run.read(FIXTURE)
    report = build_report(run, [], figures=False)
    html = render(report, "html")
    assert "<img" not in html and "Figures were not drawn (--no-figures)." in html
    assert "No critical loss spike or divergence: nothing to rewind." in html
    assert report.remedies == [] and report.incidents == []


def test_empty_run_has_no_figures():
    report = build_report(Run(), [])
    assert report.figures == []
    assert "No metric records with a step: nothing to draw." in render(report, "md")


def test_many_incidents_are_tabled_and_the_largest_detailed():
    import polars as pl

    from logbook.schema import Finding

    steps = list(range(1, 2001))
    run = Run(metrics=pl.DataFrame({"step": steps, "segment": [0] * 2000, "loss": [2.0] * 2000}))
    spikes = [
        Finding(
            kind="loss_spike", detector="loss_spike", severity="critical", step=s,
            start_step=s, end_step=s + 2, score=float(s % 7), id=f"loss_spike@{s}",
        )
        for s in range(100, 1600, 100)
    ]  # fmt: skip
    report = build_report(run, spikes, figures=False, max_zooms=3)
    assert len(report.incidents) == len(report.remedies) == 15
    # score = step % 7: 300 and 1000 score 6, then 600 scores 5 (ties: the earlier first)
    assert report.featured == [3, 6, 10]
    md = render(report, "md")
    assert (
        "Flags and replay commands for the 3 largest incidents; the table above has all 15." in md
    )
    assert md.count("### Incident ") == 3


def test_colours_mean_the_same_in_every_figure(built):
    """Blue is the final trajectory and grey what a restart recomputed, in the overview
    and in a zoom on an incident of a recomputed segment alike."""
    from matplotlib.colors import to_hex

    _, _, report = built
    overview, zoom = report.figures[0].figure, report.figures[1].figure
    assert "segment 1 (later recomputed)" in [t.get_text() for t in zoom.legends[0].texts]

    def colours(fig, gid):
        return {to_hex(ln.get_color()) for ax in fig.axes for ln in ax.lines if ln.get_gid() == gid}

    assert colours(overview, "main") == {"#1f77b4"}
    assert colours(overview, "other") == {"#6f6f6f"}
    assert colours(zoom, "main") == {"#3a3a3a"}  # the recomputed segment in focus: grey
    assert colours(zoom, "other") == {"#1f77b4"}  # the trajectory around it: blue
