"""logbook: audit large-model training runs from their logs."""

from logbook.run import Run, RunMeta
from logbook.schema import SCHEMA_VERSION

__all__ = ["Run", "RunMeta", "SCHEMA_VERSION"]
__version__ = "0.1.0"
