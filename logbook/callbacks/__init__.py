"""Trainer callbacks that run logbook's detectors on each logged step as training goes.

``LogbookCallback`` is a Hugging Face ``transformers.TrainerCallback``;
``LogbookLightningCallback`` a Lightning ``Callback``. Both feed what the trainer logs to
one :class:`logbook.live.LiveDetector`, report each finding once (a precursor when it
fires, an incident when it is complete) and can stop training at a chosen severity.
Each imports its trainer library only when it is asked for.
"""

from __future__ import annotations

from typing import Any

__all__ = ["LogbookCallback", "LogbookLightningCallback"]


def __getattr__(name: str) -> Any:
    if name == "LogbookCallback":
        from logbook.callbacks.hf import LogbookCallback

        return LogbookCallback
    if name == "LogbookLightningCallback":
        from logbook.callbacks.lightning import LogbookLightningCallback

        return LogbookLightningCallback
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
