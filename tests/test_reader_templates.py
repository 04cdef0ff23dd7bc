"""Templates: which value of an example line is which column, for each layout the
reader knows. Example lines go through the reader's own cleaning first (durations and
time stamps as tokens), as they do in a file."""

from __future__ import annotations

import polars as pl
import pytest

from parsers import dllogger, mmengine, olmo
from parsers.reader import DEFAULT, Spec
from parsers.reader.shapes import prepared
from parsers.reader.templates import Template, read_fields, template


def seen(line: str, spec: Spec = DEFAULT) -> tuple[str, str]:
    """(shape, body) of one line as the reader sees it."""
    df = prepared(pl.DataFrame({"line": [1], "text": [line]}), spec)
    return str(df.item(0, "shape")), df.item(0, "body")


def tmpl(line: str, spec: Spec = DEFAULT) -> Template:
    shape, body = seen(line, spec)
    return template(shape, body, spec.aliases, spec.any_value)


def fields(t: Template) -> list[tuple]:
    """(key, column, role) of each value, in order."""
    return [(f.key, f.column, f.role) for f in t.fields]


def scaled(t: Template) -> dict[str, tuple[str, float]]:
    """column -> (unit, scale) of the kept values."""
    return {f.column: (f.unit, f.scale) for f in t.columns()}


# ---- key layouts -----------------------------------------------------------------------

STEP_LOSS_LR = [("step", "step", "step"), ("loss", "loss", "value"), ("lr", "lr", "value")]


@pytest.mark.parametrize(
    "line",
    [
        "step: 10 loss: 2.5 lr: 3e-4",
        "step=10 loss=2.5 lr=3e-4",
        "step=10, loss=2.5, lr=3e-4",
        "step 10 loss 2.5 lr 3e-4",
        "step 10 | loss 2.5 | lr 3e-4",
        "| step 10 | loss 2.5 | lr 3.0e-04 |",
        "step: 10 \t loss: 2.5 \t lr: 3e-4",
        "INFO:root:step 10 | loss 2.5 | lr 3e-4",
    ],
)
def test_key_layouts(line):
    t = tmpl(line)
    assert t.kind == "record"
    assert fields(t) == STEP_LOSS_LR
    assert not t.dict_line


def test_keys_of_several_words_and_aliases():
    t = tmpl("iter 5 | lm loss 2.5 | learning rate 1e-4 | grad norm 0.9 | loss scale 1024")
    assert fields(t) == [
        ("iter", "step", "step"),
        ("lm loss", "loss", "value"),
        ("learning rate", "lr", "value"),
        ("grad norm", "grad_norm", "value"),
        ("loss scale", "loss_scale", "value"),
    ]


def test_a_one_letter_s_key_of_a_whole_number_is_the_step():
    # RWKV's bar description ``miniE E s STEP prog P% : ppl X loss Y lr Z``
    t = tmpl("miniE 2 s 1666 prog 40.00% : ppl 3.495054 loss 1.251349 lr 1.386290e-04: 100%")
    assert fields(t)[:3] == [("miniE", "minie", "value"), ("s", "step", "step"),
                             ("prog", "prog_pct", "value")]  # fmt: skip
    assert t.kind == "record"
    assert tmpl("s:243 trl:6.1499 lr:0.000209 norm:0.70").step_field().key == "s"  # llm.c
    # a fraction is no step, nor is an ``s`` beside a step key
    assert tmpl("step 3 | loss 2.5 | s 0.25").step_field().key == "step"
    assert fields(tmpl("iter 3 | loss 2.5 | s 7"))[2] == ("s", "s", "value")


def test_digits_in_keys_stay_in_the_key():
    t = tmpl("step 7 | loss 2.0 | layer3 norm 1.5 | mtp_1 loss 2.25")
    assert fields(t) == [
        ("step", "step", "step"),
        ("loss", "loss", "value"),
        ("layer3 norm", "layer3_norm", "value"),
        ("mtp_1 loss", "mtp_1_loss", "value"),
    ]


def test_two_keys_on_one_column_keep_the_first():
    t = tmpl("step 10 | loss 2.5 | train_loss 2.6 | lr 1e-4")
    assert [f.column for f in t.fields] == ["step", "loss", "train_loss", "lr"]


def test_python_dict():
    t = tmpl("{'loss': 2.3115, 'grad_norm': 0.7712, 'learning_rate': 4.9e-05, 'epoch': 0.02}")
    assert t.kind == "record" and t.dict_line
    assert fields(t) == [
        ("loss", "loss", "value"),
        ("grad_norm", "grad_norm", "value"),
        ("learning_rate", "lr", "value"),
        ("epoch", "epoch", "epoch"),
    ]


def test_json_dict_with_string_values():
    t = tmpl('{"step": 3, "loss": "2.5", "lr": "1e-4"}')
    assert t.kind == "record" and t.dict_line
    assert fields(t) == STEP_LOSS_LR


def test_json_dict_with_string_values_reads_numbers(tmp_path):
    from parsers.reader import read

    text = '{"step": 3, "loss": "2.5", "lr": "1e-4"}\n{"step": 4, "loss": "2.4", "lr": "1e-4"}\n'
    frame = pl.DataFrame({"line": [1, 2], "text": text.splitlines()})
    m = read(frame, "x.log").metrics
    assert m.select("line", "step", "loss", "lr").rows() == [(1, 3, 2.5, 1e-4), (2, 4, 2.4, 1e-4)]


# ---- positions, totals, running means, leading steps -------------------------------------


def test_position_and_total():
    t = tmpl("[ 40/1251] loss: 2.5 lr: 1e-4")
    assert t.kind == "record"
    assert fields(t) == [
        (None, "step", "step"),
        (None, None, "total"),
        ("loss", "loss", "value"),
        ("lr", "lr", "value"),
    ]


def test_epoch_position_total_and_running_mean():
    line = (
        "Epoch: [3]  [  40/1251]  eta: 0:10:00  lr: 0.000100  loss: 6.9104 (6.9312)"
        "  time: 0.5012  data: 0.0100  max mem: 1234"
    )
    shape, body = seen(line)
    assert shape == "Epoch: [#] [ #/#] eta: <dur> lr: # loss: # (#) time: # data: # max mem: #"
    t = tmpl(line)
    assert t.kind == "record"
    assert fields(t) == [
        ("Epoch", "epoch", "epoch"),
        (None, None, "position"),
        (None, None, "total"),
        ("lr", "lr", "value"),
        ("loss", "loss", "value"),
        (None, "loss_avg", "mean"),
        ("time", "step_time_s", "value"),
        ("data", "data", "value"),
        ("max mem", "max_mem", "value"),
    ]


def test_running_mean_of_a_scaled_value_is_scaled_too():
    t = tmpl("step 3 | loss: 6.91 (6.93) | time: 500ms (510ms)")
    assert fields(t) == [
        ("step", "step", "step"),
        ("loss", "loss", "value"),
        (None, "loss_avg", "mean"),
        ("time", "step_time_s", "value"),
        (None, "step_time_s_avg", "mean"),
    ]
    assert scaled(t)["step_time_s_avg"] == ("ms", 1e-3)


def test_leading_step():
    t = tmpl("1230 | loss 1.2345 | lr 1.000000e-04 | 123.45ms | mfu 1.23%")
    assert t.kind == "record"
    assert fields(t) == [
        (None, "step", "step"),
        ("loss", "loss", "value"),
        ("lr", "lr", "value"),
        (None, "step_time_s", "value"),
        ("mfu", "mfu_pct", "value"),
    ]
    assert scaled(t)["step_time_s"] == ("ms", 1e-3)


def test_mmengine_iter_train():
    line = (
        "Iter(train) [ 200/1000]  lr: 1.0000e-04  eta: 0:10:00  time: 0.5000"
        "  data_time: 0.0100  memory: 3000  loss: 2.5000"
    )
    t = tmpl(line, mmengine.SPEC)
    assert t.kind == "record"
    assert fields(t) == [
        ("Iter(train)", "step", "step"),
        (None, None, "total"),
        ("lr", "lr", "value"),
        ("time", "step_time_s", "value"),
        ("data_time", "data_time", "value"),
        ("memory", "memory", "value"),
        ("loss", "loss", "value"),
    ]


def test_mmengine_line_with_its_logger_header():
    line = (
        "2023/05/12 10:11:12 - mmengine - INFO - Iter(train) [  200/1000]  lr: 1.0000e-04"
        "  eta: 0:10:00  time: 0.5012  data_time: 0.0100  memory: 1234  loss: 2.3400"
    )
    shape, _ = seen(line, mmengine.SPEC)
    assert shape == (
        "<time> - mmengine - INFO - Iter(train) [ #/#] lr: # eta: <dur> time: # data_time: #"
        " memory: # loss: #"
    )
    t = tmpl(line, mmengine.SPEC)
    assert t.kind == "record" and t.step_field().key == "Iter(train)"


def test_nemo_global_step_wins_over_the_iteration():
    line = (
        "Training epoch 1, iteration 3/29 | lr: 5.389e-06 | global_step: 32"
        " | reduced_train_loss: 10.22"
    )
    t = tmpl(line)
    assert t.kind == "record"
    assert fields(t) == [
        ("Training epoch", "epoch", "epoch"),
        ("iteration", "iteration", "value"),
        (None, None, "total"),
        ("lr", "lr", "value"),
        ("global_step", "step", "step"),
        ("reduced_train_loss", "loss", "value"),
    ]
    assert t.step_field().index == 4


def test_mlx_lm_line():
    line = (
        "Iter 25: Train loss 2.345, Learning Rate 1.000e-05, It/sec 0.512, Tokens/sec 123.400,"
        " Trained Tokens 1234, Peak mem 12.300 GB"
    )
    t = tmpl(line)
    assert t.kind == "record"
    assert fields(t) == [
        ("Iter", "step", "step"),
        ("Train loss", "loss", "value"),
        ("Learning Rate", "lr", "value"),
        ("It/sec", "it_sec", "value"),
        ("Tokens/sec", "tokens_sec", "value"),
        ("Trained Tokens", "tokens", "value"),
        ("Peak mem", "peak_mem", "value"),
    ]


def test_megatron_key_that_names_its_unit():
    line = (
        " iteration       10/     100 | elapsed time per iteration (ms): 1500.0"
        " | lm loss: 2.500000E+00 |"
    )
    t = tmpl(line)
    assert fields(t) == [
        ("iteration", "step", "step"),
        (None, None, "total"),
        ("elapsed time per iteration (ms)", "step_time_s", "value"),
        ("lm loss", "loss", "value"),
    ]
    assert scaled(t)["step_time_s"] == ("", 1e-3)


def test_dllogger_tuple_is_rewritten_into_keys():
    t = tmpl("DLLL 2021-03-12 10:00:00 - (0, 1787) loss : 1.2345  lr : 0.0001", dllogger.SPEC)
    assert t.kind == "record"
    assert [(f.column, f.role) for f in t.fields] == [
        ("epoch", "epoch"),
        ("step", "step"),
        ("loss", "value"),
        ("lr", "value"),
    ]


# ---- kinds -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "line",
    [
        "step 100 | val loss 2.31",
        "step 100 | val_loss 2.31 | val_ppl 10.07",
        "eval step=100 val_loss=2.31",
        "{'eval_loss': 2.4, 'eval_runtime': 1.0, 'epoch': 1.0}",
        "Test:  [ 10/100]  eta: 0:00:10  loss: 1.2345 (1.2000)  acc1: 76.5 (75.0)",
        "Epoch(val) [1][10/10]  accuracy/top1: 76.5  accuracy/top5: 93.1",
        "step 0: train loss 4.2874, val loss 4.2823",
        "validation loss at iteration 100 | lm loss value: 2.31 | lm loss PPL: 10.07 |",
    ],
)
def test_evaluation_lines_are_validation(line):
    assert tmpl(line).kind == "validation"


def test_validation_values_keep_their_columns():
    t = tmpl("{'eval_loss': 2.4, 'eval_runtime': 1.0, 'epoch': 1.0}")
    assert fields(t) == [
        ("eval_loss", "eval_loss", "value"),
        ("eval_runtime", "eval_runtime", "value"),
        ("epoch", "epoch", "epoch"),
    ]


def test_a_training_line_with_validation_values_appended_stays_a_record():
    t = tmpl("step 3 | loss 2.5 | lr 1e-4 | grad_norm 0.5 | val_loss 2.7")
    assert t.kind == "record"
    assert [f.column for f in t.fields] == ["step", "loss", "lr", "grad_norm", "val_loss"]


def test_hf_train_runtime_dict_is_a_summary():
    line = (
        "{'train_runtime': 12.5, 'train_samples_per_second': 3.2, 'train_loss': 2.1, 'epoch': 1.0}"
    )
    t = tmpl(line)
    assert t.kind == "summary" and t.dict_line


def test_olmo_step_line_is_a_header_and_metric_lines_are_pairs():
    head = tmpl("[step=1/739328,epoch=0]", olmo.SPEC)
    assert head.kind == "header"
    assert fields(head) == [
        ("step", "step", "step"),
        (None, None, "total"),
        ("epoch", "epoch", "epoch"),
    ]
    pair = tmpl("    train/CrossEntropyLoss=10.9", olmo.SPEC)
    assert pair.kind == "pair"
    assert fields(pair) == [("train/CrossEntropyLoss", "loss", "value")]
    lr = tmpl("    optim/learning_rate_group0=4.0e-07", olmo.SPEC)
    assert (lr.kind, fields(lr)) == ("pair", [("optim/learning_rate_group0", "lr", "value")])


def test_olmo_pair_with_the_common_aliases():
    t = tmpl("train/CrossEntropyLoss=10.9")
    assert (t.kind, fields(t)) == ("pair", [("train/CrossEntropyLoss", "loss", "value")])
    t = tmpl("optim/total_grad_norm=3.21")
    assert (t.kind, fields(t)) == ("pair", [("optim/total_grad_norm", "grad_norm", "value")])


def test_a_step_alone_is_a_header():
    assert tmpl("step=5").kind == "header"
    assert tmpl("[step=1/100]").kind == "header"


def test_a_value_without_a_step_or_metric_is_nothing():
    assert tmpl("Num examples = 1000").kind == "pair"  # one key=value: a pair candidate
    assert tmpl("Loading 3 shards").kind is None
    assert tmpl("memory 1234 MiB").kind is None


# ---- units -----------------------------------------------------------------------------


def test_units():
    t = tmpl("step 3 | loss 2.5 | time 412.5ms | mfu 38.5% | mem 11.66GiB | tok 5.2k | dt 1.5s")
    assert fields(t) == [
        ("step", "step", "step"),
        ("loss", "loss", "value"),
        ("time", "step_time_s", "value"),
        ("mfu", "mfu_pct", "value"),
        ("mem", "mem", "value"),
        ("tok", "tok", "value"),
        ("dt", "dt", "value"),
    ]
    assert scaled(t) == {
        "step": ("", 1.0),
        "loss": ("", 1.0),
        "step_time_s": ("ms", 1e-3),
        "mfu_pct": ("%", 1.0),
        "mem": ("GiB", 1.0),
        "tok": ("k", 1e3),
        "dt": ("s", 1.0),
    }


def test_time_units_scale_to_seconds():
    for unit, scale in [("ms", 1e-3), ("s", 1.0), ("us", 1e-6), ("min", 60.0)]:
        t = tmpl(f"step 1 | loss 2.5 | step_time 4{unit}")
        assert scaled(t)["step_time_s"] == (unit, scale)


def test_a_count_suffix_on_a_time_scales_the_unit_its_key_names():
    # nanotron's human_format: ``elapsed_time_per_iteration_ms: 28.2K`` is 28,200 ms
    t = tmpl("iteration: 3 / 10 | lm_loss: 2.5 | elapsed_time_per_iteration_ms: 28.2K")
    assert scaled(t)["step_time_s"] == ("K", 1.0)
    t = tmpl("iteration: 3 / 10 | lm_loss: 2.5 | elapsed_time_per_iteration_ms: 1.5M")
    assert scaled(t)["step_time_s"] == ("M", 1000.0)
    t = tmpl("step 3 | loss 2.5 | step_time: 2K")  # (no unit in the key: seconds)
    assert scaled(t)["step_time_s"] == ("K", 1000.0)


def test_percent_on_an_aliased_key_keeps_the_alias():
    t = tmpl("step 1 | loss 2.5 | lr 1e-4 | mfu 40%")
    assert scaled(t)["mfu_pct"] == ("%", 1.0)


def test_unnamed_ms_value_is_the_step_time():
    t = tmpl("step 3 | loss 2.5 | 412.5ms")
    assert fields(t)[2] == (None, "step_time_s", "value")
    assert scaled(t)["step_time_s"] == ("ms", 1e-3)


# ---- degenerate lines ----------------------------------------------------------------------


def test_empty_line():
    assert read_fields("") == []
    t = template("", "")
    assert (t.kind, t.fields, t.dict_line) == (None, [], False)


def test_line_without_numbers():
    assert read_fields("no numbers here at all") == []
    assert tmpl("no numbers here at all").kind is None
    assert tmpl("Traceback (most recent call last):").kind is None


def test_line_of_only_numbers():
    t = tmpl("1 2 3")
    assert t.kind is None
    assert fields(t) == [(None, None, "lead"), (None, None, "value"), (None, None, "value")]
    assert tmpl("12").kind is None
    assert tmpl("1.5 2.5").kind is None


def test_field_indexes_follow_the_values():
    fs = read_fields("step 3 | loss 2.5 | lr 1e-4")
    assert [f.index for f in fs] == [0, 1, 2]
    assert [f.unit for f in fs] == ["", "", ""]


def test_extra_aliases_win():
    fs = read_fields("tl 2.5 step 3", {"tl": "loss"})
    assert [(f.key, f.column) for f in fs] == [("tl", "loss"), ("step", "step")]
