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
