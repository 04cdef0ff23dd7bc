"""A Lightning ``Callback`` that runs logbook's detectors on each training step.

    from logbook.callbacks import LogbookLightningCallback
    trainer = L.Trainer(..., callbacks=[LogbookLightningCallback(stop_on="critical")])

After each training batch the callback feeds the step's loss (what ``training_step``
returned), the metrics logged with ``self.log`` (``trainer.callback_metrics``) and the
first optimizer's learning rate, under ``trainer.global_step``; the detectors run every
``check_every`` steps (default: the trainer's ``log_every_n_steps``). When a finding of
``stop_on`` severity or worse comes in it sets ``trainer.should_stop``. Works with
``lightning`` and with the older ``pytorch_lightning`` package.
"""

from __future__ import annotations

from typing import Any

try:
    from lightning.pytorch.callbacks import Callback
except ImportError:  # the package's older name
    from pytorch_lightning.callbacks import Callback

from logbook.callbacks._core import Watcher, scalars


class LogbookLightningCallback(Callback):
    """Detect instabilities while training; stop at ``stop_on`` (see the module doc)."""

    def __init__(
        self, stop_on: str | None = "critical", check_every: int | None = None, **kwargs: Any
    ) -> None:
        super().__init__()
        self._kwargs = dict(kwargs, stop_on=stop_on)
        self._check_every = check_every
        self.watcher: Watcher | None = None

    @property
    def findings(self) -> list:
        return [] if self.watcher is None else self.watcher.findings

    @property
    def stopped_by(self):
        return None if self.watcher is None else self.watcher.stopped_by

    def on_train_start(self, trainer, pl_module) -> None:
        every = self._check_every or max(1, int(getattr(trainer, "log_every_n_steps", 1) or 1))
        self.watcher = Watcher(check_every=every, **self._kwargs)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if self.watcher is None or not trainer.is_global_zero:
            return
        record: dict[str, Any] = {"step": int(trainer.global_step)}
        loss = outputs.get("loss") if isinstance(outputs, dict) else outputs
        record.update(scalars({"loss": loss}) if loss is not None else {})
        logged = scalars(trainer.callback_metrics)
        record.update({k: v for k, v in logged.items() if not k.startswith(("val", "test"))})
        if trainer.optimizers:
            groups = trainer.optimizers[0].param_groups
            if groups and "lr" in groups[0]:
                record["lr"] = float(groups[0]["lr"])
        if self.watcher.feed(record):
            trainer.should_stop = True

    def on_train_end(self, trainer, pl_module) -> None:
        if self.watcher is not None and trainer.is_global_zero:
            self.watcher.flush()
