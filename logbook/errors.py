"""Errors that the command line turns into a one-line message and exit code 2."""

from __future__ import annotations


class LogbookError(Exception):
    """Base class: bad usage or unreadable input. The message is one line."""


class InputError(LogbookError):
    """A file that cannot be read as a training log."""


class UsageError(LogbookError):
    """Options that do not fit together, unknown formats or keys."""
