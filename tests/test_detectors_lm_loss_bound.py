"""lm_loss_bound: a language model's first records far above a uniform guess's loss."""

import polars as pl

from logbook.detectors import DETECTORS, build_context, detect
from logbook.run import Run, RunMeta

BOUND = DETECTORS["lm_loss_bound"]


def run_of(loss: list, fmt: str = "megatron") -> Run:
    steps = list(range(30, 30 + 10 * len(loss), 10))
    return Run(metrics=pl.DataFrame({"step": steps, "loss": loss}), meta=RunMeta(format=fmt))


def found(loss: list, fmt: str = "megatron") -> list[tuple]:
    return [
        (f.kind, f.severity, f.step, f.start_step, f.end_step, f.message)
        for f in BOUND(build_context(run_of(loss, fmt)))
    ]


def test_a_megatron_excerpt_that_starts_blown_up_is_a_critical_spike():
    # BigScience's 2021 GPT-2 run: lm loss 76.77 at iteration 30, then falling
    assert found([76.77, 31.7, 21.1, 17.0]) == [
        (
            "loss_spike",
            "critical",
            30,
            30,
            40,
            "loss 76.77 at the first record (step 30): above 25 nats, twice what a uniform "
            "guess over the largest vocabularies scores; under it from step 50",
        )
    ]


def test_a_loss_that_climbs_on_from_above_the_bound_is_not_recovered():
    assert found([30.0, 41.5, 60.25], "nanogpt+text") == [
        (
            "loss_spike",
            "critical",
            50,
            30,
            50,
            "loss 30 at the first record (step 30), 60.25 at step 50: above 25 nats, twice "
            "what a uniform guess over the largest vocabularies scores; not recovered by "
            "the last record",
        )
    ]


def test_quiet_under_the_bound_on_other_trainers_and_on_a_later_rise():
    assert found([11.2, 10.1, 9.0]) == []  # an LM's start: ln(50,257) = 10.8
    assert found([76.77, 31.7, 21.1], "text") == []  # a sum of detection losses may be 76
    assert found([76.77, 31.7, 21.1], "hf-trainer") == []
    assert found([11.0, 9.0, 40.0, 8.0]) == []  # loss_spike judges that one


def test_the_first_finite_record_is_the_one_judged_and_detect_reports_it():
    assert [x[2:5] for x in found([None, float("nan"), 26.0, 12.0])] == [(50, 50, 50)]
    kinds = [(f.detector, f.kind) for f in detect(run_of([76.77, 31.7, 21.1, 17.0]))]
    assert ("lm_loss_bound", "loss_spike") in kinds


def test_quiet_at_the_first_steps_where_the_loss_is_the_initializations():
    # BigScience's untrained 200B test models: lm loss 63.8 at iteration 2
    run = Run(
        metrics=pl.DataFrame({"step": [2, 4], "loss": [63.84, 63.7]}),
        meta=RunMeta(format="megatron"),
    )
    assert BOUND(build_context(run)) == []
