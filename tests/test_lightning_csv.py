"""PyTorch Lightning CSVLogger metrics.csv, written by lightning itself
(fixtures/lightning/make_fixtures.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from _rows import assert_fixture_rows, text_run

from logbook.errors import InputError
from logbook.run import Run
from logbook.textio import read_lines, split_lines
from parsers import lightning_csv

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "lightning"
CASES = ["metrics.csv"]


def run_of(path: Path) -> Run:
    return text_run(lightning_csv, path)


@pytest.mark.parametrize("case", CASES)
def test_fixture_gives_its_expected_rows(case, tmp_path):
    assert_fixture_rows(lightning_csv, FIXTURES, case, tmp_path)


def test_rows_of_one_step_merge_and_evaluations_are_events():
    lines, _ = read_lines(FIXTURES / "metrics.csv")
    p = lightning_csv.parse(lines, "metrics.csv")
    m = p.metrics
    assert m.get_column("step").to_list() == [1, 3, 5, 7, 9, 11, 13, 15]
    assert m.get_column("lr").to_list() == [0.1] * 4 + [0.05] * 4
    assert m.get_column("epoch").to_list() == [0] * 4 + [1] * 4
    assert m.get_column("loss").to_list()[:2] == [5.689682960510254, 2.680354118347168]
    assert m.get_column("line").to_list() == [2, 4, 6, 8, 12, 14, 16, 18]
    assert [(e.step, e.split, e.values) for e in p.events] == [
        (7, "val", {"loss": 0.2114831507205963}),
        (15, "val", {"loss": 0.050655171275138855}),
    ]
    assert p.meta["continued_lines"] == 8
    assert "2 end-of-epoch row(s) (train_loss_epoch)" in p.meta["caveats"][0]
    n = m.height + len(p.events) + p.meta["continued_lines"] + p.ignored
    assert n + p.unrecognized.len() == lines.height


def test_sniff_and_bad_csv():
    head = (FIXTURES / "metrics.csv").read_text().splitlines()
    assert lightning_csv.sniff(head) == 85
    assert lightning_csv.sniff(["step,loss", "1,2.0"]) == 0  # no epoch column
    lines, _ = split_lines(b'epoch,step,loss\n0,1,"2.0\n')
    with pytest.raises(InputError, match="not a readable CSV table|spans several lines"):
        lightning_csv.parse(lines, "m.csv")


def test_written_here_by_lightning(tmp_path):
    pytest.importorskip("lightning", reason="lightning not installed")
    torch = pytest.importorskip("torch", reason="torch not installed")
    import lightning as L
    from lightning.pytorch.loggers import CSVLogger

    class M(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(2, 1)

        def training_step(self, batch, i):
            loss = self.lin(batch[0]).pow(2).mean()
            self.log("loss", loss)
            return loss

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.01)

    torch.manual_seed(0)
    data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(12, 2)), 2)
    L.Trainer(
        max_epochs=1, logger=CSVLogger(str(tmp_path), name="t"), log_every_n_steps=1,
        enable_progress_bar=False, enable_model_summary=False, enable_checkpointing=False,
        accelerator="cpu",
    ).fit(M(), data)  # fmt: skip
    lines, _ = read_lines(tmp_path / "t" / "version_0" / "metrics.csv")
    m = lightning_csv.parse(lines, "m.csv").metrics
    assert m.get_column("step").to_list() == [0, 1, 2, 3, 4, 5]
    assert m.get_column("loss").null_count() == 0
