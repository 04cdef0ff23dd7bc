"""Assemble a labelled synthetic run from a plan of incidents (see ``gen_detect``)."""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from bench import _gen_series as gs
from logbook.run import Run, RunMeta
from logbook.segments import stitch

CHECKPOINT_EVERY = 500
T0 = 1_704_067_200.0  # 2024-01-01T00:00:00Z


def build_run(spec: Any, incidents: list[tuple[str, int]], rng: np.random.Generator):
    """The run of ``spec`` with the planned ``incidents``, and its labels."""
    n, iv = spec.steps, spec.interval
    curves = gs.base_curves(n, rng, float(rng.uniform(1.6, 2.4)))
    lr = gs.lr_schedule(n, int(rng.integers(500, 2000)), float(rng.uniform(1e-4, 6e-4)))
    st: dict[str, Any] = {"forced": [], "labels": [], "restarts": [], "spikes": 0, "cuts": 0}
    for kind, slot in incidents:
        at = slot + int(rng.integers(300, gs.SLOT - 900))
        _INJECT[kind](spec, curves, st, at, rng)
    level, skipped = gs.loss_scale(n, rng, st["forced"]) if spec.fp16 else (None, None)
    parts, files = _segments(spec, curves, lr, level, skipped, st, rng)
    metrics, events = stitch(parts, files)
    run = Run(
        metrics=metrics,
        events=events,
        meta=RunMeta(name=spec.name, format="synthetic", sources=files),
    )
    labels = st["labels"] + _nonfinite_labels(run, iv)
    return run, sorted(labels, key=lambda d: (d["start"], d["kind"]))


def _spike(spec, curves, st, at, rng) -> None:
    n, iv = spec.steps, spec.interval
    rise, tau = int(rng.integers(1, 6)), float(rng.uniform(max(3.0, iv), 60.0))
    visible = float(np.exp(rng.uniform(np.log(1.4), np.log(4.0))))
    shape = gs.spike_shape(n, at, rise, tau)
    avg = _record_peak(shape, iv)
    curves["loss"] += np.log1p((visible - 1) / avg * shape)
    onset = at - rise
    options = ["grad"] + (["act", "attn"] if spec.logs_act else []) + (["ls"] if spec.fp16 else [])
    with_pre = st["spikes"] % 2 == 0
    st["spikes"] += 1
    kind, ramp_len = None, None
    s = np.arange(1, n + 1)
    if with_pre:
        kind = options[int(rng.integers(len(options)))]
        ramp_len = int(rng.integers(max(30, 12 * iv), 301))
        up = gs.ramp(n, onset - ramp_len, onset)
        if kind == "ls":
            # overflows come faster and faster: 3 to 5 halvings spread over the ramp
            for h in np.linspace(onset - ramp_len, onset - 1, int(rng.integers(3, 6))):
                st["forced"].append((int(h), 1))
        else:
            col = {"grad": "grad_norm", "act": "act_norm", "attn": "attn_logit_max"}[kind]
            ratio = rng.uniform(3, 10) if kind == "grad" else rng.uniform(1.8, 3.0)
            after = np.clip(s - at, 0, None)
            decay = np.exp(-after / (tau if kind == "grad" else 5 * tau))
            curves[col] += np.log(ratio) * up * decay
    else:
        curves["grad_norm"] += np.log(rng.uniform(1.5, 6.0)) * shape
    end = int(at + 3 * tau)
    st["labels"].append(
        {
            "kind": "loss_spike",
            "start": onset,
            "peak": at,
            "end": end,
            "ratio": round(visible, 3),
            "precursor": kind,
            "ramp": ramp_len,
            "window": [onset - (ramp_len or 0), end],
        }
    )


def _record_peak(shape: np.ndarray, iv: int) -> float:
    m = shape[: shape.size // iv * iv].reshape(-1, iv).mean(axis=1)
    return float(m.max()) if m.size else 1.0


def _collapse(spec, curves, st, at, rng) -> None:
    to_min = rng.uniform() < 0.25
    k = 20 if to_min else int(rng.integers(3, 9))
    width = max(int(rng.integers(10, 200)), k + 2)
    steps = np.sort(rng.choice(np.arange(at + 1, at + width), size=k - 1, replace=False))
    for h in [at, *steps.tolist()]:
        st["forced"].append((int(h), 1))
    st["labels"].append(
        {
            "kind": "loss_scale_collapse",
            "start": at,
            "peak": at,
            "end": int(steps[-1]),
            "window": [at, int(steps[-1]) + 500],
            "to_min": bool(to_min),
        }
    )


def _drift(spec, curves, st, at, rng) -> None:
    n = spec.steps
    dur, hold = int(rng.integers(100, 1000)), int(rng.integers(500, 1200))
    ratio = rng.uniform(2.0, 4.0)
    shape = gs.ramp(n, at, at + dur) - gs.ramp(n, at + dur + hold, at + dur + hold + 500)
    curves["act_norm"] += np.log(ratio) * shape
    st["labels"].append(
        {
            "kind": "activation_norm_drift",
            "start": at,
            "peak": at + dur,
            "end": at + dur,
            "window": [at, at + dur + hold + 500],
        }
    )


def _slowdown(spec, curves, st, at, rng) -> None:
    dur = int(rng.integers(1000, 2000))
    curves["step_time_s"][at - 1 : at - 1 + dur] *= rng.uniform(1.4, 2.0)
    st["labels"].append(
        {
            "kind": "throughput_drop",
            "start": at,
            "peak": at,
            "end": at + dur,
            "window": [at, at + dur],
        }
    )


def _restart(spec, curves, st, at, rng, mod: dict | None = None) -> None:
    # the checkpoint resumed from precedes the crash (and whatever went wrong before it)
    back = int(rng.integers(0, 600)) if mod is None else int(rng.integers(100, 600))
    ref = at if mod is None else mod["start"]
    resume = max(CHECKPOINT_EVERY, (ref - back) // CHECKPOINT_EVERY * CHECKPOINT_EVERY)
    cut = None
    if st["cuts"] < spec.lr_cuts and mod is None:
        cut = float(rng.uniform(0.3, 0.9))
        st["cuts"] += 1
    cause = "ecc" if rng.uniform() < 0.5 else None
    st["restarts"].append({"crash": at, "resume": resume, "cut": cut, "cause": cause, "mod": mod})
    first = (resume // spec.interval + 1) * spec.interval
    st["labels"].append(
        {"kind": "restart", "start": first, "peak": first, "end": first, "window": [first, first]}
    )
    if cut is not None:
        st["labels"].append(
            {
                "kind": "lr_change",
                "start": first,
                "peak": first,
                "end": first,
                "window": [first, first],
            }
        )


def _nan(spec, curves, st, at, rng) -> None:
    iv = spec.interval
    at = (at // iv + 1) * iv - iv + 1  # the first step of a record
    stop = at + int(rng.integers(1, 4)) * iv - 1
    _restart(spec, curves, st, stop, rng, mod={"kind": "nan", "start": at, "end": stop})
    # non-finite from some step on, until the team rewound: a divergence as well
    st["labels"].append(
        {"kind": "divergence", "start": at, "peak": stop, "end": stop, "window": [at, stop]}
    )


def _divergence(spec, curves, st, at, rng) -> None:
    dur = int(rng.integers(100, 600))
    stop = at + dur + int(rng.integers(50, 300))
    mod = {
        "kind": "divergence",
        "start": at,
        "end": stop,
        "dur": dur,
        "ratio": rng.uniform(1.5, 3.0),
    }
    _restart(spec, curves, st, stop, rng, mod=mod)
    st["labels"].append(
        {"kind": "divergence", "start": at, "peak": stop, "end": stop, "window": [at, stop]}
    )


_INJECT = {
    "spike": _spike,
    "collapse": _collapse,
    "drift": _drift,
    "slowdown": _slowdown,
    "restart": _restart,
    "nan": _nan,
    "divergence": _divergence,
}


def _segments(spec, curves, lr, level, skipped, st, rng):
    from bench._gen_records import segment_part

    n = spec.steps
    rs = sorted(st["restarts"], key=lambda r: r["crash"])
    bounds = []
    start = 1
    for r in rs:
        bounds.append((start, r["crash"], r))
        start = r["resume"] + 1
    bounds.append((start, n, None))
    parts, files = [], []
    t = T0
    done = 0  # highest step computed so far: later segments recompute up to it
    factor = 1.0
    for j, (a, c, r) in enumerate(bounds):
        prev = rs[j - 1] if j else None
        if prev and prev["cut"]:
            factor *= prev["cut"]
        part, t = segment_part(
            spec, curves, lr * factor, level, skipped, a, c, done, prev, r, t, rng
        )
        done = max(done, c)
        parts.append(part)
        files.append(f"{spec.name}.attempt{j}.log")
        t += float(rng.uniform(300, 3600))
    return parts, files


def _nonfinite_labels(run: Run, iv: int) -> list[dict]:
    m = run.metrics
    bad = m.filter(pl.col("loss").is_null() | pl.col("loss").is_nan()).select("segment", "step")
    if bad.height == 0:
        return []
    new = (pl.col("segment") != pl.col("segment").shift(1)) | (pl.col("step").diff() > iv)
    eps = (
        bad.with_columns(new.fill_null(True).cast(pl.Int64).cum_sum().alias("e"))
        .group_by("e", maintain_order=True)
        .agg(pl.col("step").first().alias("start"), pl.col("step").last().alias("end"))
    )
    return [
        {"kind": "nonfinite", "start": s, "peak": s, "end": e, "window": [s, e]}
        for s, e in eps.select("start", "end").iter_rows()
    ]
