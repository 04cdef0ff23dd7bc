"""Hugging Face Trainer results tables: a model card's Markdown table and a notebook's
progress table pasted as tab-separated text."""

from __future__ import annotations

import parsers
from logbook.textio import split_lines
from parsers import trainer_table

CARD = """\
### Training hyperparameters
- learning_rate: 0.0001
- num_epochs: 15.0

### Training results

| Training Loss | Epoch | Step | Validation Loss | Wer    |
|:-------------:|:-----:|:----:|:---------------:|:------:|
| No log        | 0.92  | 100  | 3.5932          | 1.0    |
| No log        | 1.83  | 200  | 3.0185          | 0.9999 |
| 3.1829        | 4.59  | 500  | 0.4931          | 0.5265 |
| 3.1829        | 5.5   | 600  | 0.4757          | 0.4784 |
| **0.2215**    | **9.17** | **1000** | **0.2012** | **0.2101** |
| 0.2215        | 10.09 | 1100 | 0.1998          | 0.2050 |

### Framework versions
- Transformers 4.11.3
"""


def _parse(text: str):
    lines, _ = split_lines(text.encode())
    return trainer_table.parse(lines, "README.md"), lines


def test_a_model_card_table_gives_a_record_per_training_log():
    p, lines = _parse(CARD)
    # logged every 500 steps, evaluated every 100: rows 100-200 say "No log" and rows
    # 600 and 1100 repeat the log of 500 and 1000; bold cells are read as numbers
    assert p.metrics.select("line", "step", "loss", "epoch").rows() == [
        (11, 500, 3.1829, 4.59),
        (13, 1000, 0.2215, 9.17),
    ]
    assert [(e.step, e.values) for e in p.events][:1] == [(100, {"loss": 3.5932, "wer": 1.0})]
    assert [e.step for e in p.events] == [100, 200, 500, 600, 1000, 1100]
    assert p.meta["caveats"][0].endswith(
        "4 row(s) repeat an earlier log or say 'No log' and are not records"
    )
    # 2 records, 4 rows that are only validation events, the rest put aside
    assert p.ignored == lines.height - 6


def test_every_row_is_a_record_when_logging_and_evaluation_coincide():
    logs = [(0.25, 1.0, 500), (0.3, 2.0, 1000), (0.0, 3.0, 1500), (0.0, 4.0, 2000)]
    rows = "".join(f"| {v} | {e} | {s} | nan | 1.0 |\n" for v, e, s in logs)
    text = (
        "| Training Loss | Epoch | Step | Validation Loss | Wer |\n|---|---|---|---|---|\n" + rows
    )
    p, _ = _parse(text)
    # the loss collapsed to 0.0 and stays there: a log every 500 steps, each a record
    assert p.metrics.select("step", "loss").rows() == [
        (500, 0.25), (1000, 0.3), (1500, 0.0), (2000, 0.0)
    ]  # fmt: skip


def test_a_notebook_table_by_epoch_pasted_as_tab_separated_text():
    text = (
        "Epoch\tTraining Loss\tValidation Loss\tAccuracy\n"
        "1\tNo log\t0.61\t0.7\n2\t0.52\t0.48\t0.8\n3\t0.31\t0.44\t0.83\n"
    )
    p, _ = _parse(text)
    assert p.metrics.select("line", "step", "loss").rows() == [(3, 2, 0.52), (4, 3, 0.31)]
    assert p.meta["caveats"][1] == "no Step column: the epoch is the step (one row an evaluation)"


def test_sniffed_inside_other_text_and_not_for_other_tables(tmp_path):
    path = tmp_path / "card.txt"
    path.write_text(CARD)
    assert parsers.sniff(path) == "hf-trainer-table"
    assert trainer_table.sniff(["| Step | Loss |", "|---|---|", "| 1 | 2.0 |"]) == 0
    assert trainer_table.sniff(["Training Loss and Step are below"]) == 0
    (run,) = parsers.read_logs(path)
    assert run.metrics.get_column("step").to_list() == [500, 1000]


NOTEBOOK_TRAINING = """\
the logs like:

Step | Training Loss | reward | reward_std | kl | entropy
-- | -- | -- | -- | -- | --
1 | -0.283600 | 13.437500 | 21.810942 | nan | 0
2 | -0.149100 | 6.931818 | 14.526671 | nan | No Log
3 | -0.110500 | 6.250000 | 17.677670 | nan | No Log

Step | Training Loss | reward | reward_std
-- | -- | -- | --
1 | -0.283600 | 13.437500 | 21.810942
"""


def test_a_notebook_table_of_training_logs_without_outer_bars():
    # TRL's GRPO progress table as pasted from a notebook: no evaluation column, so each
    # row is a training log with its own metrics; the table printed again is a repeat
    p, lines = _parse(NOTEBOOK_TRAINING)
    assert trainer_table.sniff(NOTEBOOK_TRAINING.splitlines()) == trainer_table.SNIFF_MAX
    assert p.metrics.select("line", "step", "loss", "reward", "entropy").rows() == [
        (5, 1, -0.2836, 13.4375, 0.0),
        (6, 2, -0.1491, 6.931818, None),
        (7, 3, -0.1105, 6.25, None),
    ]
    assert p.events == []
    assert p.meta["caveats"] == [
        "a Trainer progress table with no evaluation column: a row per training log; "
        "1 row(s) repeat an earlier one and are not records"
    ]
    assert p.ignored == lines.height - 3
