"""pytorch-CycleGAN-and-pix2pix's ``loss_log.txt``: the step from the epoch and the
images seen in it, the epoch's length read off the prints, launches at the headers."""

from __future__ import annotations

import parsers
from tests._rows import column as _col
from tests._rows import one_run as _one

_HEAD = "================ Training Loss (Sat Mar 23 18:15:36 2024) ================\n"


def _line(epoch: int, iters: int, g: float = 0.8, d: float = 0.5) -> str:
    return (
        f"(epoch: {epoch}, iters: {iters}, time: 1.027, data: 0.113) D_A: {d} G_A: {g} "
        f"cycle_A: 1.5 idt_A: 0.25 \n"
    )


def test_the_epochs_length_is_read_off_the_prints_across_its_end(tmp_path):
    # prints every 100 images: epoch 1 at 100..1300, epoch 2 at 64 (1336 - 1300 = 36
    # images of epoch 1 after its last print, then 64 of epoch 2)
    p = tmp_path / "loss_log.txt"
    p.write_text(_HEAD + "".join(_line(1, i) for i in range(100, 1400, 100)) + _line(2, 64))
    assert parsers.sniff(p) == "cyclegan"
    run = _one(p)
    assert _col(run, "step")[-3:] == [1200, 1300, 1336 + 64]
    assert _col(run, "epoch")[-1] == 2.0
    assert _col(run, "loss")[0] == 0.8 + 1.5 + 0.25  # G_A + cycle_A + idt_A
    assert _col(run, "d_a")[0] == 0.5
    assert _col(run, "compute_s")[0] == 1.027
    assert any("1336 images an epoch" in c for c in run.meta.caveats)
    (st,) = run.meta.parse
    assert (st.record_lines, st.ignored, st.unrecognized) == (14, 1, 0)


def test_one_epoch_alone_is_stepped_by_the_images_seen(tmp_path):
    p = tmp_path / "loss_log.txt"
    p.write_text(_HEAD + "".join(_line(355, i) for i in (100, 200, 300)))
    run = _one(p)
    assert _col(run, "step") == [100, 200, 300]
    assert any("images seen in epoch 355" in c for c in run.meta.caveats)


def test_a_launch_past_the_first_epoch_is_a_restart_at_its_header(tmp_path):
    p = tmp_path / "loss_log.txt"
    first = "".join(_line(1, i) for i in range(100, 800, 100)) + _line(2, 57) + _line(2, 157)
    # resumed with --epoch_count 2: the prints count from the launch again
    second = _HEAD + _line(2, 100, g=0.7) + _line(2, 200, g=0.7)
    p.write_text(_HEAD + first + second)
    run = _one(p)
    assert _col(run, "step") == [*range(100, 800, 100), 800, 900, 843, 943]
    (restart,) = [e for e in run.events if e.kind == "restart"]
    assert restart.source.line == 11
    assert _col(run, "segment") == [0] * 9 + [1] * 2


def test_empty_launch_headers_are_ignored_lines(tmp_path):
    p = tmp_path / "loss_log.txt"
    p.write_text(_HEAD * 3 + "".join(_line(1, i) for i in (100, 200, 300)))
    run = _one(p)
    assert [e.kind for e in run.events] == []
    (st,) = run.meta.parse
    assert (st.lines, st.record_lines, st.ignored) == (6, 3, 3)


def test_the_2017_layout_without_the_data_time_is_read(tmp_path):
    p = tmp_path / "loss_log.txt"
    p.write_text(
        _HEAD
        + "".join(
            f"(epoch: 1, iters: {i}, time: 0.329) D_A: 0.21 G_A: 0.43 Cyc_A: 1.9 D_B: 0.2 "
            "G_B: 0.5 Cyc_B: 2.1 \n"
            for i in (100, 200, 300)
        )
    )
    run = _one(p)
    assert _col(run, "step") == [100, 200, 300]
    assert _col(run, "data_s") == [None, None, None]
    assert _col(run, "loss") == [0.43 + 1.9 + 0.5 + 2.1] * 3  # G_A + Cyc_A + G_B + Cyc_B
