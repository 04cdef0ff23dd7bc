"""The static overview (the Markdown report's PNG, ``Run.plot``): a panel for each metric
group beyond the core ones (validation loss, step time, throughput, MFU / TFLOPs,
memory) only when the run has it, found as the interactive overview finds it, and drawn
with gaps left as gaps."""

import json

import numpy as np
import polars as pl
import pytest

import parsers
from logbook.report import figures as fg
from logbook.report._groups import GROUPS
from logbook.report.interactive import panels
from logbook.run import Run

EXTRA = ("validation loss", "step time (s)", "throughput", "MFU / TFLOPs", "memory")


def _run(tmp_path, rows, name="metrics.jsonl"):
    path = tmp_path / name
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return parsers.read_logs(path)[0]


def _labels(fig) -> list[str]:
    return [ax.get_ylabel() for ax in fig.axes]


def _axis(fig, label: str):
    (ax,) = [ax for ax in fig.axes if ax.get_ylabel() == label]
    return ax


def _lines(ax, gid: str) -> list:
    return [ln for ln in ax.lines if ln.get_gid() == gid]


@pytest.fixture
def rich(tmp_path):
    """Throughput, MFU and memory columns, validation records, 30 steps absent."""
    rows = []
    for i in range(1, 201):
        if 120 <= i < 150:
            continue
        rows.append({"step": i, "loss": 3 - i / 100, "lr": 1e-4, "tokens_per_sec": 5000.0 + i,
                     "mfu": 0.41, "memory_allocated_gb": 30.5 + i / 1000})  # fmt: skip
        if i % 50 == 0:
            rows.append({"step": i, "eval_loss": 3.1 - i / 200})
    return _run(tmp_path, rows)


def test_extra_panels_for_the_metrics_the_run_has(rich):
    fig, shown, _ = fg.overview_figure(rich, [])
    assert _labels(fig) == [
        "loss (nats)", "validation loss", "learning rate", "throughput", "MFU / TFLOPs", "memory",
    ]  # fmt: skip
    assert [(t, cols) for t, _, cols in shown] == [
        ("loss (nats)", ["loss"]),
        ("validation loss", []),  # from the validation records
        ("learning rate", ["lr"]),
        ("throughput", ["tokens_per_sec"]),
        ("MFU / TFLOPs", ["mfu"]),
        ("memory", ["memory_allocated_gb"]),
    ]
    # the same panels, in the same order, as the HTML report's interactive overview
    assert _labels(fig) == [g.title for g, _ in panels(rich)]
    rendered = fg.overview(rich, [])
    assert rendered.caption.startswith("6 panels over steps 1..200;")
    assert int.from_bytes(rendered.png[20:24], "big") == 190 * 6 + 45  # panels as tall as ever


def test_no_extra_panel_without_the_metric(tmp_path):
    rows = [{"step": i, "loss": 2.0 + 1 / i, "lr": 1e-4, "grad_norm": 0.5} for i in range(1, 50)]
    fig, _, _ = fg.overview_figure(_run(tmp_path, rows), [])
    assert _labels(fig) == ["loss (nats)", "learning rate", "grad norm"]
    assert not set(EXTRA) & set(_labels(fig))


def test_an_extra_panel_draws_its_values_with_the_gap_left_blank(rich):
    fig, _, _ = fg.overview_figure(rich, [])
    steps = [*range(1, 120), *range(150, 201)]
    (line,) = _lines(_axis(fig, "throughput"), "main")
    x = np.asarray(line.get_xdata(), dtype=float)
    y = np.asarray(line.get_ydata(), dtype=float)
    gap = 119  # one NaN where the 30 absent steps are: never a line across them
    np.testing.assert_array_equal(x, [*steps[:gap], np.nan, *steps[gap:]])
    np.testing.assert_array_equal(y, [*(5000.0 + s for s in steps[:gap]), np.nan,
                                      *(5000.0 + s for s in steps[gap:])])  # fmt: skip
    (mem,) = _lines(_axis(fig, "memory"), "main")
    np.testing.assert_array_equal(
        np.asarray(mem.get_ydata(), dtype=float),
        [*(30.5 + s / 1000 for s in steps[:gap]), np.nan, *(30.5 + s / 1000 for s in steps[gap:])],
    )
    (val,) = _lines(_axis(fig, "validation loss"), "validation")
    assert list(val.get_xdata()) == [50.0, 100.0, 150.0, 200.0]
    assert list(val.get_ydata()) == [3.1 - s / 200 for s in (50, 100, 150, 200)]
    assert val.get_marker() == "o"


def test_a_panel_of_several_columns_names_them(tmp_path):
    rows = [{"step": i, "loss": 2.0, "tokens_per_sec": 5000.0, "samples_per_sec": 2.5}
            for i in range(1, 40)]  # fmt: skip
    fig, _, _ = fg.overview_figure(_run(tmp_path, rows), [])
    ax = _axis(fig, "throughput")
    assert [ln.get_color() for ln in _lines(ax, "main")] == ["#1f77b4", "#2ca02c"]
    assert [t.get_text() for t in ax.get_legend().texts] == ["samples_per_sec", "tokens_per_sec"]
    assert _axis(fig, "loss (nats)").get_legend() is None  # one line: the title names it


def test_validation_and_step_time_columns_and_the_step_time_findings():
    from logbook.schema import Finding

    n = 300
    val = [None if s % 100 else 2.5 - s / 1000 for s in range(1, n + 1)]
    run = Run(
        metrics=pl.DataFrame(
            {
                "step": range(1, n + 1),
                "segment": [0] * n,
                "loss": [2.0] * n,
                "val_loss": val,
                "step_time_s": [1.5] * n,
            }  # fmt: skip
        )
    )
    drop = Finding(kind="throughput_drop", detector="throughput_drop", severity="warning",
                   step=150, start_step=150, end_step=180, score=1.0)  # fmt: skip
    fig, _, _ = fg.overview_figure(run, [drop])
    assert _labels(fig) == ["loss (nats)", "validation loss", "step time (s)"]
    (line,) = _lines(_axis(fig, "validation loss"), "main")
    assert list(line.get_xdata()) == [100.0, 200.0, 300.0]  # a sparse column, not broken
    assert list(line.get_ydata()) == [2.4, 2.3, 2.2]
    (shade,) = [c for c in _axis(fig, "step time (s)").collections if c.get_gid()]
    assert shade.get_gid() == "finding:warning"  # the step-time finding, on its panel
    assert all(
        not [c for c in _axis(fig, t).collections if c.get_gid()]
        for t in ("loss (nats)", "validation loss")
    )


def test_picked_columns_pick_the_extra_panels_too(rich):
    assert _labels(rich.plot(metrics=["loss", "mfu"])) == ["loss (nats)", "MFU / TFLOPs"]
    assert _labels(rich.plot(metrics=["memory_allocated_gb"])) == ["memory"]
    # the validation panel of the validation records alone is drawn by default only
    assert "validation loss" not in _labels(rich.plot(metrics=["loss", "lr"]))


def test_the_core_panels_are_groups_of_the_interactive_overview():
    titles = [g.title for g in GROUPS]
    core = [label for _, label, _ in fg.PANELS]
    assert [t for t in titles if t in core] == core  # the same titles, in the same order
    assert [t for t in titles if t not in core] == list(EXTRA)
