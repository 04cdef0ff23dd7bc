"""Precursor linking on hand-made findings."""

from logbook.detectors._precursors import PrecursorConfig, link
from logbook.schema import Finding


def f(kind, step, start, end, id_, *, superseded=False, segment=0, only=False):
    ev = {}
    if superseded:
        ev["superseded"] = True
    if only:
        ev["precursor_only"] = True
    return Finding(
        kind=kind,
        detector=kind,
        step=step,
        start_step=start,
        end_step=end,
        id=id_,
        segment=segment,
        evidence=ev,
    )


def test_linked_within_horizon_and_gap():
    spike = f("loss_spike", 1000, 1000, 1020, "loss_spike@1000")
    drift = f("grad_norm_drift", 940, 930, 1010, "grad_norm_drift@930")
    old = f("activation_norm_drift", 100, 90, 200, "activation_norm_drift@90")  # ended long before
    out = link([drift, old, spike], PrecursorConfig())
    assert (drift.precedes, drift.lead_steps) == ("loss_spike@1000", 60)
    assert old.precedes is None and old in out
    assert spike.evidence["precursors"] == ["grad_norm_drift@930"]
    assert spike.evidence["lead_steps"] == 60
    assert spike.message.endswith("preceded by grad_norm_drift 60 steps before its onset")


def test_not_a_precursor_when_coincident_or_beyond_horizon():
    spike = f("loss_spike", 1000, 1000, 1020, "s")
    same = f("grad_norm_spike", 1000, 995, 1010, "g")  # fired at the onset: coincident
    far = f("loss_scale_collapse", 10, 5, 999, "c")  # fired 990 steps earlier
    link([same, far, spike], PrecursorConfig(horizon_steps=500))
    assert same.precedes is None and far.precedes is None
    assert "precursors" not in spike.evidence


def test_nearest_target_and_precursor_only_dropped():
    a = f("loss_spike", 500, 500, 510, "a")
    b = f("divergence", 900, 880, 1000, "b")
    p = f("attn_logit_drift", 850, 800, 900, "p", only=True)
    q = f("grad_norm_drift", 300, 300, 320, "q", only=True)  # precedes nothing
    out = link([a, b, p, q], PrecursorConfig())
    assert p.precedes == "b" and p.lead_steps == 30
    assert [x.id for x in out] == ["a", "b", "p"]


def test_same_lineage_only_and_disabled():
    spike = f("loss_spike", 700, 700, 720, "s", superseded=True, segment=0)
    p = f("grad_norm_drift", 650, 640, 710, "p")  # in the trajectory, not the rewound stretch
    link([p, spike], PrecursorConfig())
    assert p.precedes is None
    q = f("grad_norm_drift", 650, 640, 710, "q", only=True)
    assert link([q, spike], PrecursorConfig(enabled=False)) == [spike]


def test_a_collapse_that_nothing_worse_follows_is_a_target_itself():
    # fp16 run dying of its loss-scale collapse: the drift before it announced it
    drift = f("attn_logit_drift", 150, 140, 300, "attn_logit_drift@140")
    collapse = f("loss_scale_collapse", 221, 221, 299, "loss_scale_collapse@221")
    link([drift, collapse], PrecursorConfig())
    assert (drift.precedes, drift.lead_steps) == ("loss_scale_collapse@221", 71)
    assert collapse.evidence["precursors"] == ["attn_logit_drift@140"]
    # a collapse followed by a loss spike stays that spike's precursor, the drift too
    drift = f("attn_logit_drift", 150, 140, 300, "attn_logit_drift@140")
    collapse = f("loss_scale_collapse", 221, 221, 260, "loss_scale_collapse@221")
    spike = f("loss_spike", 240, 240, 250, "loss_spike@240")
    link([drift, collapse, spike], PrecursorConfig())
    assert drift.precedes == "loss_spike@240" and collapse.precedes == "loss_spike@240"
    assert "precursors" not in collapse.evidence
