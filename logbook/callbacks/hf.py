"""A Hugging Face ``TrainerCallback`` that runs logbook's detectors on each logged step.

    from logbook.callbacks import LogbookCallback
    trainer = Trainer(..., callbacks=[LogbookCallback(stop_on="critical")])

At each log (every ``logging_steps``) the callback feeds the logged values (``loss``,
``grad_norm``, ``learning_rate``, ...) with ``state.global_step`` to the detector; when a
finding of ``stop_on`` severity or worse comes in, it sets
``control.should_training_stop`` and the Trainer stops after the current step (saving
as its arguments say). Only the main process feeds and decides.
"""

from __future__ import annotations

from typing import Any

from transformers import TrainerCallback

from logbook.callbacks._core import Watcher, scalars

# values of the summary a Trainer logs at the end, when they come in another log
_SUMMARY = ("train_runtime", "train_samples_per_second", "train_steps_per_second", "total_flos")


class LogbookCallback(TrainerCallback):
    """Detect instabilities while training; stop at ``stop_on`` (see the module doc).

    ``findings`` lists what was reported, ``stopped_by`` the finding that stopped the
    run (None when none did). Other arguments: as :class:`~logbook.callbacks._core.Watcher`.
    """

    def __init__(self, stop_on: str | None = "critical", **kwargs: Any) -> None:
        self.watcher = Watcher(stop_on=stop_on, **kwargs)

    @property
    def findings(self) -> list:
        return self.watcher.findings

    @property
    def stopped_by(self):
        return self.watcher.stopped_by

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not logs or not state.is_world_process_zero or "train_runtime" in logs:
            return control  # (the summary logged at the end is no step's record)
        values = {k: v for k, v in scalars(logs).items() if k not in _SUMMARY}
        if not values:
            return control
        if self.watcher.feed({"step": state.global_step, **values}):
            control.should_training_stop = True
        return control

    def on_train_end(self, args, state, control, **kwargs):
        if state.is_world_process_zero:
            self.watcher.flush()
        return control
