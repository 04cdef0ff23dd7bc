"""zero_loss: a loss that drops to exactly zero and stays there."""

import polars as pl
from typer.testing import CliRunner

from logbook.cli import _register, app
from logbook.detectors import DETECTORS, build_context
from logbook.run import Run

ZERO = DETECTORS["zero_loss"]


def found(**cols) -> list[tuple]:
    n = len(next(iter(cols.values())))
    run = Run(metrics=pl.DataFrame({"step": list(range(10, 10 * n + 1, 10)), **cols}))
    return [(f.severity, f.start_step, f.end_step, f.message) for f in ZERO(build_context(run))]


def test_a_loss_zero_from_the_first_record_to_the_last_is_critical():
    assert found(loss=[0.0] * 5) == [
        (
            "critical",
            10,
            50,
            "loss exactly 0 from the first record at step 10, for 5 records; still 0 at the "
            "last record",
        )
    ]


def test_a_drop_to_zero_that_comes_back_is_a_warning():
    loss = [2.1, 2.0, 1.9, 1.9, 1.8, 0.0, 0.0, 0.0, 1.7, 1.7]
    assert found(loss=loss) == [
        (
            "warning",
            60,
            80,
            "loss exactly 0 from 1.9 at step 60, for 3 records; back after step 80",
        )
    ]


def test_quiet_on_convergence_rl_losses_single_zeros_and_missing_values():
    # a loss that fell toward zero before printing 0.0
    assert found(loss=[0.5, 0.05, 0.004, 0.002, 0.001, 0.0, 0.0, 0.0]) == []
    # GRPO: signed, near zero by construction; or with a reward column
    assert found(loss=[0.0, -0.01, 0.0, 0.0, 0.0, 0.02]) == []
    assert found(loss=[0.0] * 4, reward=[0.1, 0.3, 0.2, 0.4]) == []
    # one or two zero records; nulls between
    assert found(loss=[2.0, 0.0, 0.0, 1.9, 1.8]) == []
    assert found(loss=[2.0, None, None, None, 1.9]) == []


def test_detect_names_the_zero_loss_of_a_trainer_log(tmp_path):
    # axolotl's dicts with loss and grad norm 0.0 on every record (no step printed)
    log = tmp_path / "trainer.log"
    log.write_text(
        "".join(
            f"{{'loss': 0.0, 'grad_norm': 0.0, 'learning_rate': {k}e-05, 'epoch': 0.0{k}}}\n"
            for k in range(1, 6)
        )
    )
    _register()
    res = CliRunner().invoke(app, ["detect", str(log), "--fail-on", "critical"])
    assert res.exit_code == 1, res.output
    assert "verdict: damaged: 1 critical incident(s) (zero_loss at 1..5)" in res.output
