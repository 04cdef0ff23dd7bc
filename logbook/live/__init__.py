"""Live mode: logs followed as they grow, detectors run on what they append.

``follow`` reads appended lines, ``stream`` parses them, ``detector`` reports each
finding once when it is in, ``watch`` ties them together for ``logbook watch``.
"""

from logbook.live.detector import LiveDetector

__all__ = ["LiveDetector"]
