"""Golden step values of the debug config, and the same guarantees on CUDA when present.

The golden file catches any change in the engine's numerics (model, data, optimizer,
schedule). Bitwise equality is asserted within one machine by the verify tests; across
CPUs a vendor BLAS may round differently, so the golden comparison allows 1e-4.
"""

import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from replay.checkpoint import snapshot, trainer_from  # noqa: E402
from replay.config import tiny  # noqa: E402
from replay.engine import Trainer  # noqa: E402

GOLDEN = Path(__file__).resolve().parents[1] / "fixtures" / "replay" / "golden_tiny.json"
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")


def test_debug_config_matches_the_golden_values():
    golden = json.loads(GOLDEN.read_text())
    trainer = Trainer(tiny())
    trainer.run(20)
    m = trainer.to_run().metrics
    assert m.get_column("step").to_list() == golden["steps"]
    for col in ("loss", "attn_logit_max", "grad_norm"):
        assert m.get_column(col).to_list() == pytest.approx(golden[col], rel=1e-4), col


@needs_cuda
def test_cuda_runs_are_bitwise_reproducible_and_resumable():
    cfg = tiny()
    cfg.train.device = "cuda"
    a, b = Trainer(cfg), Trainer(cfg)
    a.run(10)
    snap = snapshot(a)
    a.run(20)
    b.run(20)
    cols = ["loss", "grad_norm", "param_norm", "attn_logit_max", "logz", "act_norm"]
    assert a.to_run().metrics.select(cols).equals(b.to_run().metrics.select(cols))
    resumed = trainer_from(snap)
    resumed.run(20)
    tail = a.to_run().metrics.select(cols).slice(10)
    assert resumed.to_run().metrics.select(cols).equals(tail)
