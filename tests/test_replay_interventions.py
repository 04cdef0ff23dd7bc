"""Intervention specs: parsing, errors, and what the engine does with each."""

import pytest

from logbook.errors import UsageError

torch = pytest.importorskip("torch")

from replay.config import tiny  # noqa: E402
from replay.engine import Trainer  # noqa: E402
from replay.interventions import Intervention, Plan, parse_spec, parse_variant  # noqa: E402


def test_parse_items_and_defaults():
    name, plan = parse_variant("cut=lr_scale:0.5@12, clip:1.0 ,skip:+3,reset_opt@9,qk_norm")
    assert name == "cut"
    assert plan.items == [
        Intervention(kind="lr_scale", value=0.5, start=12),
        Intervention(kind="clip", value=1.0),
        Intervention(kind="skip", count=3),
        Intervention(kind="reset_opt", start=9),
        Intervention(kind="qk_norm"),
    ]
    assert plan.qk_norm
    resolved = plan.resolved(first_step=6)
    assert resolved.items[1].start == 6  # "from the first step after the checkpoint"
    assert (resolved.items[2].start, resolved.items[2].end) == (6, 8)
    assert resolved.items[0].start == 12 and resolved.items[4].start is None
    assert parse_spec("baseline").items == [] and parse_spec("none").items == []
    assert parse_spec("skip:4-7").items == [Intervention(kind="skip", start=4, end=7)]
    assert Plan.from_list(resolved.to_list()) == resolved


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("x=warp:2", "unknown intervention 'warp:2'"),
        ("x=lr_scale", "give a value, e.g. lr_scale:0.5"),
        ("x=reset_opt:3", "reset_opt takes no value"),
        ("x=skip:9-3", "need 1 <= A <= B"),
        ("x=skip:+0", "skip at least one batch"),
        ("x=skip:3@4", "write a skip as skip:A-B or skip:+N"),
        ("x=clip:abc", "'abc' is not a number"),
        ("x=clip:-1", "finite number >= 0"),
        ("x=lr_scale:nan", "finite number >= 0"),
        ("x=data_seed:1.5", "the seed must be an integer"),
        ("x=qk_norm@5", "always applies from step 0"),
        ("x=", "empty intervention spec"),
        ("half lr=lr_scale:0.5", "write NAME=SPEC"),
        ("lr_scale:0.5", "write NAME=SPEC"),
    ],
)
def test_bad_specs_are_usage_errors(text, fragment):
    with pytest.raises(UsageError) as err:
        parse_variant(text)
    assert fragment in str(err.value)


def test_plan_queries_and_launch_scoping():
    plan = Plan(
        [
            Intervention(kind="lr_scale", value=0.5, start=5),
            Intervention(kind="lr_scale", value=0.5, start=8),
            Intervention(kind="clip", value=2.0, start=3),
            Intervention(kind="clip", value=0.5, start=6, segment=1),
            Intervention(kind="skip", start=4, end=5, segment=1),
        ]
    )
    assert [plan.lr_factor(k) for k in (4, 5, 8)] == [1.0, 0.5, 0.25]
    assert [plan.clip(k, 0.0) for k in (2, 3, 7)] == [0.0, 2.0, 2.0]
    assert plan.clip(7, 0.0, segment=1) == 0.5  # the relaunch's clip applies after it only
    assert not plan.skipped(4) and plan.skipped(4, segment=1) and not plan.skipped(6, 1)


def run_tiny(spec: str | None = None, steps: int = 12):
    cfg = tiny()
    plan = parse_spec(spec).resolved(1) if spec else Plan()
    trainer = Trainer(cfg, plan)
    trainer.run(steps)
    return trainer.to_run()


@pytest.fixture(scope="module")
def base():
    return run_tiny()


def test_lr_scale_changes_the_lr_from_its_step_and_logs_a_manual_change(base):
    run = run_tiny("lr_scale:0.25@7")
    lr, lr0 = run.metrics.get_column("lr"), base.metrics.get_column("lr")
    assert lr.head(6).to_list() == lr0.head(6).to_list()
    assert lr.slice(6).to_list() == [x * 0.25 for x in lr0.slice(6).to_list()]
    (change,) = run.events_of("lr_change")
    assert (change.step, change.manual) == (7, True)
    assert change.new == pytest.approx(change.old * 0.25)


def test_skip_leaves_no_record_for_skipped_steps_and_other_batches_unchanged(base):
    run = run_tiny("skip:4-6")
    steps = run.metrics.get_column("step").to_list()
    assert steps == [1, 2, 3, 7, 8, 9, 10, 11, 12]
    (skip,) = run.events_of("data_skip")
    assert (skip.start_step, skip.end_step) == (4, 6)
    # Steps 1-3 are the same training; after the skip the model differs (3 fewer updates).
    same = run.metrics.head(3).get_column("loss").to_list()
    assert same == base.metrics.head(3).get_column("loss").to_list()


def test_clip_reset_and_z_loss_are_logged_as_config_changes(base):
    run = run_tiny("clip:0.01@3,reset_opt@5,z_loss:0.001@6")
    changes = {(e.key, e.step, e.old, e.new) for e in run.events_of("config_change")}
    assert changes == {
        ("clip", 3, 0.0, 0.01),
        ("optimizer_state", 5, "kept", "reset"),
        ("z_loss", 6, 0.0, 0.001),
    }
    # Clipping acts on the update of step 3: the loss (computed before it) departs at step 4.
    loss, loss0 = run.metrics.get_column("loss"), base.metrics.get_column("loss")
    assert loss.head(3).to_list() == loss0.head(3).to_list() and loss[3] != loss0[3]


def test_beta2_and_eps_set_the_optimizer_from_their_step_and_are_config_changes(base):
    trainer = Trainer(tiny(), parse_spec("beta2:0.999@3,eps:1e-6@5"))
    seen = []
    trainer.run(6, on_step=lambda t: seen.append(
        (t.step, t.optimizer.param_groups[0]["betas"][1], t.optimizer.param_groups[1]["eps"])
    ))  # fmt: skip
    base_cfg = tiny().train
    assert seen[:2] == [(1, base_cfg.beta2, base_cfg.eps), (2, base_cfg.beta2, base_cfg.eps)]
    assert seen[2:] == [(3, 0.999, base_cfg.eps), (4, 0.999, base_cfg.eps), (5, 0.999, 1e-6),
                        (6, 0.999, 1e-6)]  # fmt: skip
    changes = {(e.key, e.step, e.old, e.new) for e in trainer.to_run().events_of("config_change")}
    assert changes == {("beta2", 3, base_cfg.beta2, 0.999), ("eps", 5, base_cfg.eps, 1e-6)}
    with pytest.raises(UsageError, match=r"beta2 must be in \(0, 1\)"):
        parse_spec("beta2:1.5")
    with pytest.raises(UsageError, match=r"eps must be in \(0, 1\]"):
        parse_spec("eps:0")


def test_qk_norm_variant_builds_the_other_architecture():
    trainer = Trainer(tiny(), parse_spec("qk_norm"))
    assert trainer.model_cfg.qk_norm and trainer.model.blocks[0].attn.q_norm is not None
