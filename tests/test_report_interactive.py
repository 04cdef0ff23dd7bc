"""The HTML report's interactive overview: which panels a run gets, what each trace
holds on the step, wall-time and tokens axes, gaps left as gaps, and JSON that is safe
inside the page."""

import json

import pytest

import parsers
from logbook.report.interactive import overview_spec, panels, to_json


def _run(tmp_path, rows):
    path = tmp_path / "metrics.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return parsers.read_logs(path)[0]


@pytest.fixture
def run(tmp_path):
    rows = []
    for i in range(1, 201):
        if 120 <= i < 150:  # 30 steps absent from the log
            continue
        rows.append({"step": i, "loss": 3 - i / 100, "lr": 1e-4, "tokens_per_sec": 5000.0 + i,
                     "mfu": 0.41, "memory_allocated_gb": 30.5, "time": 1700000000 + 2 * i,
                     "tokens": 4096 * i})  # fmt: skip
        if i % 50 == 0:
            rows.append({"step": i, "eval_loss": 3.1 - i / 200})
    return _run(tmp_path, rows)


def test_a_panel_for_each_metric_group_the_run_has(run, tmp_path):
    got = [(g.title, cols) for g, cols in panels(run)]
    assert got == [
        ("loss (nats)", ["loss"]),
        ("validation loss", []),  # from the validation events
        ("learning rate", ["lr"]),
        ("throughput", ["tokens_per_sec"]),
        ("MFU / TFLOPs", ["mfu"]),
        ("memory", ["memory_allocated_gb"]),
    ]
    bare = _run(tmp_path, [{"step": i, "loss": 2.0} for i in range(1, 20)])
    assert [g.title for g, _ in panels(bare)] == ["loss (nats)"]


def test_traces_on_every_axis_and_gaps_left_as_gaps(run):
    spec = overview_spec(run, [], run.trajectory())
    assert spec["panels"] == 6 and list(spec["axes"]) == ["step", "time", "tokens"]
    names = [t["name"] for t in spec["data"]]
    assert names == [
        "loss", "validation loss", "lr", "tokens_per_sec", "mfu", "memory_allocated_gb"
    ]  # fmt: skip
    val = spec["data"][1]
    assert val["x"] == [50, 100, 150, 200] and val["y"] == [2.85, 2.6, 2.35, 2.1]
    assert (val["xaxis"], val["yaxis"]) == ("x2", "y2")
    loss = spec["data"][0]
    # 170 records and one break where 30 steps are missing (never a line across them)
    assert len(loss["x"]) == 171 and loss["y"].count(None) == 1
    k = loss["y"].index(None)
    assert loss["x"][k - 1 : k + 2] == [119, None, 150]  # the break, as the static figures make it
    time_x = spec["axes"]["time"]["x"][0]
    assert time_x[:2] == [1_700_000_002_000, 1_700_000_004_000]  # ms since the epoch
    assert spec["axes"]["tokens"]["x"][0][:2] == [4096, 8192]
    assert spec["axes"]["time"]["type"] == "date"
    assert spec["axes"]["step"]["x"] is None  # the traces' own x values
    assert spec["layout"]["xaxis6"]["title"] == {"text": "step"}
    assert all(spec["layout"][f"xaxis{i}"]["matches"] == "x" for i in range(2, 7))
    assert spec["caption"].startswith("6 panels over steps 1..200: loss (nats), validation")


def test_findings_and_events_are_shaded_and_hoverable(tmp_path):
    from logbook.detectors import detect

    run = parsers.read_logs("fixtures/megatron/spike_restart.log")[0]
    spec = overview_spec(run, detect(run), run.trajectory())
    hover = {t["name"]: t for t in spec["data"] if t.get("mode") == "markers"}
    assert set(hover) >= {"critical findings", "restart", "hardware failure"}
    assert any("loss_spike (critical)" in s for s in hover["critical findings"]["text"])
    assert hover["restart"]["yaxis"] == "y99" and spec["layout"]["yaxis99"]["visible"] is False
    rects = [s for s in spec["layout"]["shapes"] if s["type"] == "rect"]
    lines = [s for s in spec["layout"]["shapes"] if s["type"] == "line"]
    assert rects and lines and all(s["yref"] == "paper" for s in lines)
    assert len(spec["axes"]["tokens"]["shapes"]) == len(spec["layout"]["shapes"])


def test_json_cannot_close_the_script_element():
    text = to_json({"message": "</script><script>alert(1)</script> <!-- x"})
    assert "<" not in text
    assert json.loads(text) == {"message": "</script><script>alert(1)</script> <!-- x"}
