"""lr_change, restarts/overflow skips and stall."""

from datetime import UTC, datetime, timedelta

import numpy as np
import polars as pl

from logbook.detectors import DETECTORS, build_context
from logbook.run import Run
from logbook.schema import LrChange, OverflowSkip, Restart

LR = DETECTORS["lr_change"]
RESTARTS = DETECTORS["restarts"]
STALL = DETECTORS["stall"]


def schedule(s: np.ndarray, warmup: int = 100, total: int = 3000) -> np.ndarray:
    prog = np.clip((s - warmup) / (total - warmup), 0, 1)
    return np.where(s <= warmup, 3e-4 * s / warmup, 3e-4 * (0.55 + 0.45 * np.cos(np.pi * prog)))


def found(det, run):
    return [(f.kind, f.severity, f.step, f.score) for f in det(build_context(run))]


def test_warmup_and_cosine_are_explained_at_any_log_interval():
    for interval in (1, 10, 100):
        s = np.arange(interval, 3001, interval)
        lr = np.round(schedule(s), 7)  # printed with a few digits
        assert found(LR, Run(metrics=pl.DataFrame({"step": s, "lr": lr}))) == []
    # a two-record excerpt inside the warm-up
    assert found(LR, Run(metrics=pl.DataFrame({"step": [1, 2], "lr": [1.2e-9, 2.4e-9]}))) == []


def test_a_warm_up_paused_by_retried_steps_is_no_lr_change():
    # NVIDIA's BERT pretraining: step 0 printed 3 times (fp16 overflows, the schedule
    # does not move), then a linear warm-up that pauses a record at steps 5 and 13
    steps = [0, 0, 0] + list(range(1, 23))
    k, lr = 1, []
    for s in steps[3:]:
        lr.append(2e-5 * k)
        k += s not in (5, 13)
    run = Run(metrics=pl.DataFrame({"step": steps, "lr": [2e-5] * 3 + lr}))
    assert found(LR, run) == []
    # but a raise after three records of a constant LR is one
    flat = [1e-4] * 10 + [2e-4] * 10
    run = Run(metrics=pl.DataFrame({"step": list(range(1, 21)), "lr": flat}))
    assert [x[:3] for x in found(LR, run)] == [("lr_change", "warning", 11)]


def test_manual_cut_at_a_restart_and_jump_inside_a_segment():
    s = np.arange(1, 2001)
    lr = schedule(s)
    seg = np.zeros(2000, int)
    seg[1200:] = 1
    lr[1200:] *= 0.5  # relaunch at step 1201 with half the learning rate
    run = Run(
        metrics=pl.DataFrame({"step": s, "segment": seg, "lr": lr}),
        events=[Restart(step=1201, segment=1, resume_step=1200)],
    )
    (f,) = LR(build_context(run))
    assert (f.severity, f.step, f.evidence["manual"], round(f.evidence["ratio"], 3)) == (
        "info",
        1201,
        True,
        0.5,
    )
    lr = schedule(s)
    lr[1500:] *= 1.2  # inside a segment
    (f,) = LR(build_context(Run(metrics=pl.DataFrame({"step": s, "lr": lr}))))
    assert (f.severity, f.step, f.evidence["at_restart"]) == ("warning", 1501, False)


def test_drops_of_one_factor_with_a_flat_lr_between_are_a_step_schedule():
    # the DDP tutorial's StepLR(gamma=0.95) stepped each epoch: 5.0 -> 4.75 -> 4.51
    s = np.arange(10, 160, 10)
    lr = np.where(s < 60, 5.0, np.where(s < 110, 4.75, 4.51))
    run = Run(metrics=pl.DataFrame({"step": s, "lr": lr}))
    fs = LR(build_context(run))
    assert [(f.step, f.severity, f.evidence.get("schedule")) for f in fs] == [
        (60, "info", "step"),
        (110, "info", "step"),
    ]
    assert "a step schedule (2 drops of x0.95, flat between)" in fs[0].message
    # one drop alone, or two of different factors: nothing says schedule
    lr1 = np.where(s < 60, 5.0, 4.75)
    fs = LR(build_context(Run(metrics=pl.DataFrame({"step": s, "lr": lr1}))))
    assert [(f.step, f.severity) for f in fs] == [(60, "warning")]
    lr2 = np.where(s < 60, 5.0, np.where(s < 110, 4.75, 2.5))
    fs = LR(build_context(Run(metrics=pl.DataFrame({"step": s, "lr": lr2}))))
    assert [(f.step, f.severity) for f in fs] == [(60, "warning"), (110, "warning")]


def test_the_tail_of_a_decay_to_zero_and_a_gap_in_the_log_are_no_jumps():
    # LLaMA-Factory's trainer_log.jsonl of a cosine decay to 0: 8.1e-10 -> 6.7e-12 at
    # the end is a large ratio of nothing; rows 1000 -> 6730 were cut from the file
    s = np.r_[np.arange(10, 1010, 10), [6730, 6740, 6750]]
    lr = np.r_[
        1e-4 * np.cos(np.pi / 2 * np.arange(10, 1010, 10) / 6750), [2.95e-9, 8.09e-10, 6.69e-12]
    ]
    assert found(LR, Run(metrics=pl.DataFrame({"step": s, "lr": lr}))) == []


def test_a_decay_that_steepens_between_records_of_one_epoch_each_is_no_jump():
    # Keras 3 with a warm-up then a cosine, logged once an epoch: 4.8e-6 -> 4.723e-6 ->
    # 4.498e-6 steepens by 3% of the LR between two records: the schedule's curvature
    s = [183, 366, 549, 732, 915]
    lr = [1e-06, 2.9e-06, 4.8e-06, 4.723e-06, 4.4984e-06]
    assert found(LR, Run(metrics=pl.DataFrame({"step": s, "lr": lr}))) == []
    # a cut to half after a fall is a jump still
    lr2 = [1e-06, 2.9e-06, 4.8e-06, 4.723e-06, 2.36e-06]
    assert [f[:3] for f in found(LR, Run(metrics=pl.DataFrame({"step": s, "lr": lr2})))] == [
        ("lr_change", "warning", 915)
    ]


def test_lr_constant_null_single_zero_and_parser_event():
    assert found(LR, Run(metrics=pl.DataFrame({"step": [1, 2, 3], "lr": [1e-4] * 3}))) == []
    nulls = pl.DataFrame({"step": [1, 2]}).with_columns(pl.lit(None, pl.Float64).alias("lr"))
    assert found(LR, Run(metrics=nulls)) == []
    assert found(LR, Run(metrics=pl.DataFrame({"step": [5], "lr": [1e-4]}))) == []
    # lr printed as 0 on skipped start-up iterations is not a value
    zeros = pl.DataFrame({"step": [10, 20, 30], "lr": [0.0, 1e-5, 2e-5]})
    assert found(LR, Run(metrics=zeros)) == []
    ev = LrChange(step=7, old=1e-4, new=5e-5, manual=True)
    run = Run(metrics=pl.DataFrame({"step": [5, 6, 7], "lr": [1e-4] * 3}), events=[ev])
    assert [(k, s, st) for k, s, st, _ in found(LR, run)] == [("lr_change", "info", 7)]


def test_restart_findings_give_lost_steps_and_time():
    df = pl.DataFrame(
        {
            "step": np.r_[np.arange(1, 101), np.arange(61, 121)],
            "segment": np.r_[np.zeros(100, int), np.ones(60, int)],
            "step_time_s": np.full(160, 2.0),
        }
    )
    events = [
        Restart(
            step=61,
            segment=1,
            resume_step=60,
            last_step_before=100,
            lost_steps=40,
            gap_s=600.0,
            cause="ecc",
        ),
        Restart(segment=2, resume_step=None),  # launched, crashed before any record
    ]
    fs = RESTARTS(build_context(Run(metrics=df, events=events)))
    assert [(f.severity, f.step, f.start_step, f.evidence.get("lost_time_s")) for f in fs] == [
        ("warning", 61, 61, 680.0),
        ("info", None, None, None),
    ]
    assert fs[0].message == (
        "restart at step 61, resumed after step 60, last step before 100, "
        "40 steps recomputed, 11.3 min of wall time lost, cause: ecc"
    )
    assert fs[1].message == "restart (no record after it)"


def test_overflow_skips_merged_from_column_and_events():
    df = pl.DataFrame({"step": np.arange(1, 501), "skipped": np.zeros(500, dtype=np.int64)})
    df = df.with_columns(
        pl.when(pl.col("step").is_in([100, 150, 400])).then(1).otherwise(0).alias("skipped")
    )
    run = Run(metrics=df, events=[OverflowSkip(step=150), OverflowSkip(step=160)])
    fs = RESTARTS(build_context(run))
    assert [(f.kind, f.start_step, f.end_step, f.evidence["count"]) for f in fs] == [
        ("overflow_skip", 100, 160, 3),
        ("overflow_skip", 400, 400, 1),
    ]


def times(n: int, hang_at: int | None = None) -> list[datetime]:
    t0 = datetime(2024, 1, 1, tzinfo=UTC)
    out, t = [], t0
    for i in range(n):
        t += timedelta(seconds=3600 if i == hang_at else 2)
        out.append(t)
    return out


def test_hang_and_frozen_loss():
    loss = 2.0 + 0.01 * np.sin(np.arange(300))
    base = {"step": np.arange(1, 301), "loss": loss}
    assert found(STALL, Run(metrics=pl.DataFrame({**base, "time": times(300)}))) == []
    hang = Run(metrics=pl.DataFrame({**base, "time": times(300, hang_at=150)}))
    (f,) = STALL(build_context(hang))
    assert (f.severity, f.start_step, f.end_step, f.evidence["gap_s"]) == (
        "warning",
        150,
        151,
        3600.0,
    )
    frozen = loss.copy()
    frozen[100:130] = 2.5
    (f,) = STALL(build_context(Run(metrics=pl.DataFrame({"step": base["step"], "loss": frozen}))))
    assert (f.evidence["rule"], f.start_step, f.end_step, f.evidence["records"]) == (
        "frozen",
        101,
        130,
        30,
    )


def test_stall_needs_time_and_ignores_restart_gaps():
    assert found(STALL, Run(metrics=pl.DataFrame({"step": [1, 2], "loss": [2.0, 2.1]}))) == []
    df = pl.DataFrame(
        {
            "step": np.r_[np.arange(1, 101), np.arange(51, 151)],
            "segment": np.r_[np.zeros(100, int), np.ones(100, int)],
            "loss": 2.0 + 0.01 * np.sin(np.arange(200)),
            "time": times(200, hang_at=100),
        }
    )
    assert found(STALL, Run(metrics=df, events=[Restart(step=51, segment=1)])) == []


def test_throughput_is_not_watched_on_replayed_runs():
    import numpy as np
    import polars as pl

    from logbook.detectors import detect
    from logbook.run import Run, RunMeta

    steps = np.arange(1, 601)
    step_time = np.where(steps > 400, 2.0, 1.0)  # a sustained 2x slowdown
    metrics = pl.DataFrame({"step": steps, "loss": 2.0 + 0 * steps, "step_time_s": step_time})
    kinds = {
        fmt: [f.kind for f in detect(Run(metrics=metrics, meta=RunMeta(format=fmt)))]
        for fmt in ("megatron", "replay")
    }
    assert "throughput_drop" in kinds["megatron"]
    assert "throughput_drop" not in kinds["replay"]
