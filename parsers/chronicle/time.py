"""Dates, times and time zones as people write them in logbooks, normalized to UTC.

A stamp is a date (``2021-11-30``, ``November 17, 2021``, ``Dec 6``, ``Sep 6th``), an
optional time (``10:10am``, ``3pm``, ``11:39``, ``13:34:34``) and an optional zone
(``ET``, ``PST``, ``UTC``, ``CET``, ``UTC+2``). Zone abbreviations name a region, not a
fixed offset: ``ET`` and ``EST`` both mean America/New_York, so the daylight-saving
offset is the one in force on that date (people write ``PST`` in July). A stamp
without a zone is read in the default zone (``--tz``) and reported as assumed. A date
without a year is the latest such date at most two months after the document's last
full date.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta, timezone, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from logbook.errors import UsageError

# Abbreviation -> IANA zone. Daylight and standard spellings share a region on purpose.
ZONES: dict[str, str] = {
    "UTC": "UTC",
    "GMT": "UTC",
    "Z": "UTC",
    "ET": "America/New_York",
    "EST": "America/New_York",
    "EDT": "America/New_York",
    "CT": "America/Chicago",
    "CST": "America/Chicago",
    "CDT": "America/Chicago",
    "MT": "America/Denver",
    "MST": "America/Denver",
    "MDT": "America/Denver",
    "PT": "America/Los_Angeles",
    "PST": "America/Los_Angeles",
    "PDT": "America/Los_Angeles",
    "BST": "Europe/London",
    "WET": "Europe/Lisbon",
    "CET": "Europe/Paris",
    "CEST": "Europe/Paris",
    "EET": "Europe/Helsinki",
    "EEST": "Europe/Helsinki",
    "MSK": "Europe/Moscow",
    "IST": "Asia/Kolkata",
    "SGT": "Asia/Singapore",
    "HKT": "Asia/Hong_Kong",
    "JST": "Asia/Tokyo",
    "KST": "Asia/Seoul",
    "AEST": "Australia/Sydney",
    "AEDT": "Australia/Sydney",
}

MONTHS = {
    m: i + 1
    for i, names in enumerate(
        [
            ("jan", "january"),
            ("feb", "february"),
            ("mar", "march"),
            ("apr", "april"),
            ("may",),
            ("jun", "june"),
            ("jul", "july"),
            ("aug", "august"),
            ("sep", "sept", "september"),
            ("oct", "october"),
            ("nov", "november"),
            ("dec", "december"),
        ]
    )
    for m in names
}

_OFFSET = r"(?:UTC|GMT)\s?[+-]\d{1,2}(?::?\d{2})?"
ZONE_RE = "(?-i:" + _OFFSET + "|" + "|".join(sorted(ZONES, key=len, reverse=True)) + r")(?![\w+-])"
# 10:10am, 10:10 a.m., 3pm, 11:39, 13:34:34 (the am/pm form first so "3pm" is not "3")
TIME_RE = r"\d{1,2}(?::\d{2}){0,2}\s?[ap]\.?m\.?(?![a-z])|\d{1,2}:\d{2}(?::\d{2})?(?:[.,]\d+)?"
ISO_DATE_RE = r"(?<!\d)(\d{4})[-/](\d{1,2})[-/](\d{1,2})(?!\d)"
_MONTH_ALT = "|".join(sorted(MONTHS, key=len, reverse=True))
MONTH_DATE_RE = (
    rf"(?<![\w-])({_MONTH_ALT})\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?(?![\d:])(?:,?\s+(\d{{4}})(?!\d))?"
    rf"|(?<![\w-])(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?({_MONTH_ALT})\.?(?:,?\s+(\d{{4}})(?!\d))?"
)
_ISO = re.compile(ISO_DATE_RE)
_MONTH = re.compile(MONTH_DATE_RE, re.IGNORECASE)
_AFTER = re.compile(
    rf"^(?:[ T_]|,?\s+(?:at\s+|@\s*)?)({TIME_RE})(?:\s*\(?({ZONE_RE})\)?)?", re.IGNORECASE
)
_BEFORE = re.compile(rf"({TIME_RE})(?:\s*({ZONE_RE}))?\s*,?\s+(?:on\s+)?$", re.IGNORECASE)
_ZONE_AFTER_DATE = re.compile(rf"^\s+\(?({ZONE_RE})\)?", re.IGNORECASE)


LOOK_AHEAD = timedelta(days=60)


@dataclass
class Stamp:
    """A point in time read from text: UTC, whether a clock time was written, and the
    zone assumed when none was."""

    utc: datetime
    has_time: bool
    assumed_tz: str | None
    start: int  # offset of the stamp in the text
    end: int


def zone(name: str) -> tzinfo:
    """The zone for an abbreviation (``ET``), an offset (``UTC+2``) or an IANA name."""
    key = name.strip()
    if key.upper() in ZONES:
        return ZoneInfo(ZONES[key.upper()])
    m = re.fullmatch(r"(?:UTC|GMT)\s?([+-])(\d{1,2})(?::?(\d{2}))?", key, re.IGNORECASE)
    if m:
        delta = timedelta(hours=int(m.group(2)), minutes=int(m.group(3) or 0))
        return timezone(-delta if m.group(1) == "-" else delta)
    try:
        return ZoneInfo(key)
    except (ZoneInfoNotFoundError, ValueError):
        msg = f"unknown time zone {name!r} (use e.g. UTC, ET, PT, CET or Europe/Paris)"
        raise UsageError(msg) from None


def parse_clock(text: str) -> time | None:
    """``10:10am`` -> 10:10, ``12am`` -> 00:00, ``13:34:34`` -> 13:34:34; None if invalid."""
    t = text.lower().replace(".", "").replace(" ", "")
    meridiem = t[-2:] if t.endswith(("am", "pm")) else None
    parts = (t[:-2] if meridiem else t).split(":")
    try:
        hour, minute = int(parts[0]), int(parts[1]) if len(parts) > 1 else 0
        second = int(float(parts[2].replace(",", "."))) if len(parts) > 2 else 0
    except ValueError:
        return None
    if meridiem:
        if not 1 <= hour <= 12:
            return None
        hour = hour % 12 + (12 if meridiem == "pm" else 0)
    if hour > 23 or minute > 59 or second > 59:
        return None
    return time(hour, minute, second)


def to_utc(
    day: date, clock: time | None, zone_name: str | None, default_tz: str
) -> tuple[datetime, str | None]:
    """The UTC instant of a local date and time, and the zone assumed (None when the
    zone was written). A date without a time is midnight of that day."""
    name = zone_name or default_tz
    local = datetime.combine(day, clock or time(0)).replace(tzinfo=zone(name))
    return local.astimezone(UTC), (None if zone_name else default_tz)


def nearest_year(month: int, day: int, context: date | None) -> date | None:
    """The latest date with that month and day that is not more than ``LOOK_AHEAD``
    after ``context``: chronicles mostly tell what already happened."""
    if context is None:
        return None
    for year in (context.year + 1, context.year, context.year - 1):
        try:
            cand = date(year, month, day)
        except ValueError:
            continue
        if cand <= context + LOOK_AHEAD:
            return cand
    return None


def _make_date(y: str | None, mo: int, d: str, context: date | None) -> date | None:
    try:
        return date(int(y), mo, int(d)) if y else nearest_year(mo, int(d), context)
    except ValueError:
        return None


def find_dates(text: str, context: date | None) -> list[tuple[date, int, int]]:
    """Every date written in the text (ISO or with a month name), in order, as
    (date, start, end); dates without a year are placed by ``context``."""
    found: list[tuple[date, int, int]] = []
    for m in _ISO.finditer(text):
        d = _make_date(m.group(1), int(m.group(2)), m.group(3), None)
        if d is not None and 1900 < d.year < 2200:
            found.append((d, m.start(), m.end()))
    for m in _MONTH.finditer(text):
        if any(s <= m.start() < e for _, s, e in found):
            continue
        if m.group(1):
            d = _make_date(m.group(3), MONTHS[m.group(1).lower()], m.group(2), context)
        else:
            d = _make_date(m.group(6), MONTHS[m.group(5).lower()], m.group(4), context)
        if d is not None:
            found.append((d, m.start(), m.end()))
    return sorted(found, key=lambda f: f[1])


def find_stamp(
    text: str, context: date | None, default_tz: str, section_day: date | None = None
) -> Stamp | None:
    """The first date in the text with the clock time and zone written next to it
    (``March 11, 2022 11:42am PST``, ``12:46pm PST on January 6``); a lone clock time
    is placed on ``section_day``."""
    for day, start, end in find_dates(text, context):
        after = _AFTER.match(text[end:])
        before = _BEFORE.search(text[max(0, start - 40) : start])
        clock_text, zone_text = None, None
        if after and parse_clock(after.group(1)):
            clock_text, zone_text, end = after.group(1), after.group(2), end + after.end()
        elif before and parse_clock(before.group(1)):
            clock_text, zone_text = before.group(1), before.group(2)
            start = max(0, start - 40) + before.start()
        else:
            z = _ZONE_AFTER_DATE.match(text[end:])
            zone_text = z.group(1) if z else None
        utc, assumed = to_utc(day, parse_clock(clock_text or ""), zone_text, default_tz)
        return Stamp(utc, clock_text is not None, assumed, start, end)
    if section_day is not None:
        m = re.search(rf"(?<![\w:.])({TIME_RE})(?:\s*\(?({ZONE_RE})\)?)?", text, re.IGNORECASE)
        if m and re.search(r"[ap]\.?m|[A-Z]", m.group(0)) and parse_clock(m.group(1)):
            utc, assumed = to_utc(section_day, parse_clock(m.group(1)), m.group(2), default_tz)
            return Stamp(utc, True, assumed, m.start(), m.end())
    return None
