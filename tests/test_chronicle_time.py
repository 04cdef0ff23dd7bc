from datetime import UTC, date, datetime, time

import pytest

from logbook.errors import UsageError
from parsers.chronicle.time import find_dates, find_stamp, nearest_year, parse_clock, to_utc


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("10:10am", time(10, 10)),
        ("10:50 am", time(10, 50)),
        ("3pm", time(15, 0)),
        ("7:43p.m.", time(19, 43)),
        ("12am", time(0, 0)),
        ("12:30pm", time(12, 30)),
        ("11:39", time(11, 39)),
        ("13:34:34", time(13, 34, 34)),
        ("13pm", None),
        ("25:00", None),
    ],
)
def test_clock(text, expected):
    assert parse_clock(text) == expected


def test_zones_follow_daylight_saving_of_the_date():
    # US daylight saving began 2023-03-12; Paris 2023-03-26.
    assert to_utc(date(2023, 3, 11), time(22), "ET", "UTC") == (utc(2023, 3, 12, 3), None)
    assert to_utc(date(2023, 3, 13), time(22), "ET", "UTC") == (utc(2023, 3, 14, 2), None)
    assert to_utc(date(2021, 11, 30), time(10, 10), "PT", "UTC") == (
        utc(2021, 11, 30, 18, 10),
        None,
    )
    assert to_utc(date(2023, 7, 1), time(9), "PST", "UTC") == (utc(2023, 7, 1, 16), None)
    assert to_utc(date(2023, 3, 20), time(10), "CET", "UTC") == (utc(2023, 3, 20, 9), None)
    assert to_utc(date(2023, 3, 27), time(10), "CET", "UTC") == (utc(2023, 3, 27, 8), None)
    assert to_utc(date(2023, 3, 27), time(10), "UTC+2", "UTC") == (utc(2023, 3, 27, 8), None)


def test_missing_zone_uses_default_and_is_marked():
    assert to_utc(date(2021, 11, 23), time(10, 50), None, "UTC") == (
        utc(2021, 11, 23, 10, 50),
        "UTC",
    )
    assert to_utc(date(2021, 11, 23), time(10, 50), None, "ET") == (utc(2021, 11, 23, 15, 50), "ET")
    got = to_utc(date(2021, 11, 23), None, None, "Europe/Paris")
    assert got == (utc(2021, 11, 22, 23), "Europe/Paris")


def test_unknown_zone_is_a_usage_error():
    with pytest.raises(UsageError, match="unknown time zone 'Mars/Olympus'"):
        to_utc(date(2021, 1, 1), None, None, "Mars/Olympus")


def test_year_of_a_date_written_without_one_is_the_nearest():
    assert nearest_year(12, 21, date(2022, 1, 7)) == date(2021, 12, 21)
    assert nearest_year(1, 6, date(2022, 1, 7)) == date(2022, 1, 6)
    assert nearest_year(1, 2, date(2022, 12, 28)) == date(2023, 1, 2)
    assert nearest_year(2, 30, date(2022, 1, 1)) is None
    assert nearest_year(5, 1, None) is None


def test_find_dates_in_prose():
    text = "on November 5, 2021 and Dec 6, then Sep 6th; see 2022-03-21_13:34:34 or 17 May"
    got = [d for d, _, _ in find_dates(text, date(2021, 11, 17))]
    assert got == [
        date(2021, 11, 5),
        date(2021, 12, 6),
        date(2021, 9, 6),
        date(2022, 3, 21),
        date(2021, 5, 17),
    ]
    assert find_dates("May 2020 was long", date(2021, 1, 1)) == []


def test_stamp_time_after_or_before_the_date():
    s = find_stamp("The training launched on March 11, 2022 11:42am PST", None, "UTC")
    assert (s.utc, s.has_time, s.assumed_tz) == (utc(2022, 3, 11, 19, 42), True, None)
    s = find_stamp(
        "As of yesterday, at 12:46pm PST on January 6, it ended", date(2022, 1, 7), "UTC"
    )
    assert (s.utc, s.assumed_tz) == (utc(2022, 1, 6, 20, 46), None)
    s = find_stamp("One of the GPUs crashed at 2022-03-21_13:34:34 JZ time", None, "CET")
    assert (s.utc, s.assumed_tz) == (utc(2022, 3, 21, 12, 34, 34), "CET")
    s = find_stamp("deleted on December 21.", date(2022, 1, 7), "UTC")
    assert (s.utc, s.has_time, s.assumed_tz) == (utc(2021, 12, 21), False, "UTC")


def test_stamp_lone_clock_time_on_the_section_day():
    s = find_stamp("at 10:30am ET we restarted", None, "UTC", date(2023, 1, 5))
    assert (s.utc, s.assumed_tz) == (utc(2023, 1, 5, 15, 30), None)
    assert find_stamp("ratio 3:2 of the data", None, "UTC", date(2023, 1, 5)) is None
    assert find_stamp("no date here at 10:30am", None, "UTC") is None
