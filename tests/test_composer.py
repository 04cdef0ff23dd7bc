"""MosaicML Composer's console logger: headers, indented metric lines, eval blocks."""

from __future__ import annotations

from pathlib import Path

import parsers

LOG = """\
******************************
Config:
max_duration: 2ep
******************************
[epoch=1][batch=1/2]:
\t Train time/batch: 0
\t Train time/token: 0
\t Train loss/train/total: 10.9736
\t Train lr-DecoupledAdamW/group0: 0.0001
\t Train l2_norm/grad/global: 3.5000
[epoch=1][batch=2/2]:
\t Train time/batch: 1
\t Train time/token: 4096
\t Train loss/train/total: nan
\t Train lr-DecoupledAdamW/group0: 0.0002
[Eval batch=1/4] Eval on eval data
[Eval batch=4/4] Eval on eval data:
\t Eval metrics/eval/LanguageCrossEntropy: 9.5000
0: [epoch=2][batch=1/2]:
0: \t Train time/batch: 2
0: \t Train loss/train/total: 9.1000
something else entirely
"""


def test_records_steps_columns_and_the_eval_block(tmp_path: Path):
    p = tmp_path / "train.log"
    p.write_text(LOG)
    (run,) = parsers.read_logs(p)
    m = run.metrics
    assert run.meta.format == "composer"
    assert m.get_column("step").to_list() == [1, 2, 3]
    loss = m.get_column("loss").to_list()
    assert loss[0] == 10.9736 and loss[1] != loss[1] and loss[2] == 9.1  # (nan kept)
    assert m.get_column("lr").to_list() == [0.0001, 0.0002, None]
    assert m.get_column("grad_norm").to_list() == [3.5, None, None]
    assert m.get_column("tokens").to_list() == [0.0, 4096.0, None]
    (val,) = run.events_of("validation")
    assert (val.step, val.values["loss"], val.split) == (2, 9.5, "eval")
    assert [e.step for e in run.events_of("nonfinite")] == [2]
    stats = run.meta.parse[0]
    assert (stats.records, stats.unrecognized, stats.first_unrecognized) == (3, 1, [22])


def _file_logger(text: str):
    from _rows import parse_accounted

    from parsers import composer

    return parse_accounted(composer, text)


STUCK = (
    "[hyperparameter]: seed: 17 \n"
    "[metric][batch=0]: time/epoch: 2365 \n"
    "[metric][batch=0]: metrics/train/LanguageCrossEntropy: nan \n"
    "[metric][batch=0]: metrics/train/ArXiv_count: 0 \n"
    "[metric][batch=0]: time/epoch: 2366 \n"
    "[metric][batch=0]: metrics/train/LanguageCrossEntropy: 2.5 \n"
    "[metric][batch=0]: metrics/train/ArXiv_count: 3 \n"
    ".... repeat\n"
)


def test_file_logger_lines_a_record_per_call_numbered_when_the_batch_is_stuck():
    from parsers import composer

    parsed = _file_logger(STUCK)
    m = parsed.metrics
    assert m.get_column("step").to_list() == [1, 2]
    assert m.get_column("line").to_list() == [2, 5]
    loss = m.get_column("loss").to_list()
    assert loss[0] != loss[0] and loss[1] == 2.5
    assert m.get_column("time_epoch").to_list() == [2365.0, 2366.0]
    assert m.get_column("metrics_train_arxiv_count").to_list() == [0.0, 3.0]
    assert parsed.meta["caveats"] == [
        "the printed batch (0, ...) does not advance from record to record: the 2 records "
        "are numbered 1.. in order"
    ]
    assert parsed.unrecognized.to_list() == [8] and parsed.ignored == 1
    assert composer.sniff(STUCK.splitlines()) == composer.SNIFF_MAX


def test_file_logger_batch_is_the_step_where_it_advances():
    text = (
        "[metric][batch=1]: loss/train/total: 2.5 \n"
        "[metric][batch=1]: lr-DecoupledAdamW/group0: 0.0006 \n"
        "[metric][batch=2]: loss/train/total: 2.4 \n"
        "[metric][batch=2]: lr-DecoupledAdamW/group0: 0.0005 \n"
    )
    parsed = _file_logger(text)
    m = parsed.metrics
    assert m.get_column("step").to_list() == [1, 2]
    assert m.get_column("line").to_list() == [1, 3]
    assert m.get_column("loss").to_list() == [2.5, 2.4]
    assert m.get_column("lr").to_list() == [0.0006, 0.0005]
    assert parsed.meta["caveats"] == []
