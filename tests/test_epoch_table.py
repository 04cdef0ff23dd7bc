"""Epoch tables (fastai, Chainer, nolearn, YOLO): a header, a row per epoch under it."""

from __future__ import annotations

import math
from pathlib import Path

import parsers
from parsers.epoch_table import sniff


def _runs(tmp_path: Path, text: str):
    p = tmp_path / "fit.log"
    p.write_text(text)
    return parsers.read_logs(p)


FASTAI = (
    "epoch     train_loss  valid_loss  accuracy  time\n"
    "0         2.723684    2.148748    0.571206  00:05\n"
    "1         2.157829    1.937637    0.601026  01:02:57\n"
    "2         nan         #na#        0.601026  00:04\n"
)


def test_fastai_rows_are_records_with_their_columns(tmp_path):
    (run,) = _runs(tmp_path, FASTAI)
    assert run.meta.format == "epoch-table"
    m = run.metrics
    assert m.get_column("step").to_list() == [0, 1, 2]
    loss = m.get_column("loss").to_list()
    assert loss[:2] == [2.723684, 2.157829] and math.isnan(loss[2])
    assert m.get_column("valid_loss").to_list() == [2.148748, 1.937637, None]
    assert m.get_column("step_time_s").to_list() == [5.0, 3777.0, 4.0]
    assert [e.step for e in run.events_of("nonfinite")] == [2]
    (st,) = run.meta.parse
    assert (st.records, st.ignored, st.unrecognized) == (3, 1, 0)
    (run,) = _runs(tmp_path, FASTAI + "Total time: 1:03:06\n")  # (fastai 1's trailer)
    (st,) = run.meta.parse
    assert (st.records, st.ignored, st.unrecognized) == (3, 2, 0)


def test_a_bar_table_with_rules_and_units(tmp_path):
    text = (
        "fitting classifier... nolearn\n"
        "  DenseLayer            (None, 2)               produces       2 outputs\n\n"
        " Epoch  |  Train loss  |  Valid loss  |  Valid acc  |  Dur\n"
        "--------|--------------|--------------|-------------|-------\n"
        "     1  |     0.69310  |     0.69000  |     45.05%  |  0.7s\n"
        "     2  |     0.68120  |     0.68500  |     46.47%  |  0.6s\n"
    )
    (run,) = _runs(tmp_path, text)
    m = run.metrics
    assert m.get_column("step").to_list() == [1, 2]
    assert m.get_column("loss").to_list() == [0.6931, 0.6812]
    assert m.get_column("valid_acc_pct").to_list() == [45.05, 46.47]
    assert m.get_column("dur").to_list() == [0.7, 0.6]
    assert run.meta.format == "epoch-table"


def test_yolo_rows_count_the_batches_of_the_epochs_before(tmp_path):
    header = "      Epoch    GPU_mem   box_loss   cls_loss   dfl_loss  Instances       Size\n"
    rows = [
        "       1/20      10.1G      1.777      2.573      1.302         79        640: "
        "100%|##########| 298/298 [08:35<00:00,  1.73s/it]\n",
        "       2/20      10.4G      1.734       2.13      1.308         60        640: "
        " 22%|##        | 67/298 [01:55<06:38,  1.72s/it]\n",
    ]
    (run,) = _runs(tmp_path, header + rows[0] + "\n" + header + rows[1])
    m = run.metrics
    assert m.get_column("step").to_list() == [298, 365]
    assert m.get_column("loss").to_list() == [1.777, 1.734]  # (the first loss column)
    assert m.get_column("gpu_mem").to_list() == [10.1, 10.4]


def test_rows_without_their_header_are_read_with_the_tables_header(tmp_path):
    # an excerpt that starts inside a table, then another fit's table with its header
    before = "".join(f"{e}         2.{9 - e}12496    2.877055    0.468569\n\n" for e in (3, 4, 5))
    text = (
        before
        + "Total time: 15:49:20\n"
        + FASTAI.replace("  time", "")
        .replace("  00:05", "")
        .replace("  01:02:57", "")
        .replace("  00:04", "")
    )
    runs = _runs(tmp_path, text)
    assert [r.metrics.get_column("step").to_list() for r in runs] == [[3, 4, 5], [0, 1, 2]]


def test_sniffing_wants_a_step_column_a_training_loss_and_a_row():
    assert sniff(FASTAI.splitlines()) == 45
    assert sniff(["epoch     train_loss  valid_loss"]) == 0  # (no row)
    assert sniff(["name      size   loss", "a   3   0.5"]) == 0  # (no step column)
    assert sniff(["epoch   valid_loss   accuracy", "1   0.5   0.9"]) == 0  # (no training loss)


def test_yolov5_counts_epochs_from_zero_and_its_total_is_the_loss(tmp_path):
    # YOLOv5 5.0: bare loss names, ``{epoch}/{epochs - 1}``
    header = "     Epoch   gpu_mem       box       obj       cls     total    labels  img_size\n"
    rows = [
        "     0/299     3.39G   0.04553   0.04545   0.02316    0.1141        43       640: "
        "100%|##########| 235/235 [01:02<00:00,  3.76it/s]\n",
        "     1/299     3.52G       nan       nan       nan       nan        38       640: "
        "100%|##########| 235/235 [01:01<00:00,  3.81it/s]\n",
    ]
    (run,) = _runs(tmp_path, header + rows[0] + header + rows[1])
    m = run.metrics
    assert m.get_column("step").to_list() == [235, 470]
    loss = m.get_column("loss").to_list()
    assert loss[0] == 0.1141 and math.isnan(loss[1])
    assert [e.step for e in run.events_of("nonfinite")][:1] == [470]
    # YOLOv5 7.0 names them ``box_loss obj_loss cls_loss``, epochs still from 0
    v7 = "      Epoch    GPU_mem   box_loss   obj_loss   cls_loss  Instances       Size\n"
    row = "       2/99      2.64G    0.05012    0.02218    0.01830         4        416: "
    row += "100%|##########| 7/7 [00:15<00:00,  2.27s/it]\n"
    (run,) = _runs(tmp_path, v7 + row)
    assert run.metrics.get_column("step").to_list() == [21]
    assert run.metrics.get_column("loss").to_list() == [0.05012]


def test_yolos_validation_after_an_epoch_is_an_event_of_its_step(tmp_path):
    text = (
        "      Epoch    GPU_mem   box_loss   cls_loss   dfl_loss  Instances       Size\n"
        "       1/20      10.1G      1.777      2.573      1.302         79        640: "
        "100%|##########| 298/298 [08:35<00:00,  1.73s/it]\n"
        "                 Class     Images  Instances      Box(P          R      mAP50  "
        "mAP50-95): 100%|##########| 38/38 [00:44<00:00,  1.17s/it]\n"
        "                   all       1189       4779       0.34     0.0303     0.0157    0.00773\n"
        "\n"
    )
    (run,) = _runs(tmp_path, text)
    (val,) = run.events_of("validation")
    assert (val.step, val.source.line) == (298, 4)
    assert val.values == {
        "images": 1189.0,
        "instances": 4779.0,
        "p": 0.34,
        "r": 0.0303,
        "map50": 0.0157,
        "map50_95": 0.00773,
    }
    (st,) = run.meta.parse
    assert (st.records, st.event_lines, st.ignored, st.unrecognized) == (1, 1, 3, 0)
