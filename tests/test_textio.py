import gzip
import random
import tracemalloc

import polars as pl
import pytest

from logbook import textio
from logbook.errors import InputError
from logbook.textio import head_lines, read_lines, split_lines


def _frame(texts: list[str]) -> pl.DataFrame:
    return pl.DataFrame(
        {"line": list(range(1, len(texts) + 1)), "text": texts},
        schema={"line": pl.Int64, "text": pl.String},
    )


def _read(tmp_path, data: bytes, name: str = "x.log"):
    path = tmp_path / name
    path.write_bytes(data)
    return read_lines(path)


def test_lf_lines_are_numbered_from_one(tmp_path):
    frame, stats = _read(tmp_path, b"first line\nsecond\n")
    assert frame.equals(_frame(["first line", "second"]))
    assert (stats.lines, stats.crlf, stats.no_final_newline, stats.gzip) == (2, False, False, False)
    assert stats.invalid_utf8_lines == []


def test_crlf_reads_like_lf(tmp_path):
    frame, stats = _read(tmp_path, b"iteration 1 | loss 2.5\r\n\r\nlast\r\n")
    assert frame.equals(_frame(["iteration 1 | loss 2.5", "", "last"]))
    assert stats.crlf is True and stats.lines == 3


def test_a_lone_carriage_return_ends_a_line(tmp_path):
    # LF, CR LF and a lone CR are all line breaks (a CR before CR LF ends an empty line)
    frame, stats = _read(tmp_path, b"a\rb\nc\r\r\n")
    assert frame["text"].to_list() == ["a", "b", "c", ""]
    assert (stats.crlf, stats.lone_cr, stats.lines) == (True, 2, 4)


def test_no_final_newline(tmp_path):
    frame, stats = _read(tmp_path, b"a\nb")
    assert frame.equals(_frame(["a", "b"]))
    assert stats.no_final_newline is True
    frame, stats = _read(tmp_path, b"a\nb\r")  # (a last lone CR ends the last line)
    assert frame["text"].to_list() == ["a", "b"]
    assert stats.no_final_newline is False and stats.lone_cr == 1


def test_blank_lines_keep_numbering(tmp_path):
    frame, stats = _read(tmp_path, b"a\n\n  \n\nb\n\n")
    assert frame.equals(_frame(["a", "", "  ", "", "b", ""]))
    assert stats.lines == 6


@pytest.mark.parametrize("size", [0, 1, 11, 12, 13, 14, 200])
def test_lines_of_every_length_round_trip(tmp_path, size):
    # views hold lines of up to 12 bytes inline and point into the file for longer ones
    texts = ["x" * size, "é" * size, "ab" + "€" * size, str(size)]
    frame, _ = _read(tmp_path, "\n".join(texts).encode() + b"\n")
    assert frame["text"].to_list() == texts


def test_invalid_utf8_is_replaced_and_counted(tmp_path):
    raw = b"ok\nbad \xff byte in a long line\nfine \xc3\xa9\n\xc3\n\xed\xa0\x80x\nend"
    frame, stats = _read(tmp_path, raw)
    assert frame["text"].to_list() == [
        "ok",
        "bad \ufffd byte in a long line",
        "fine é",
        "\ufffd",
        "\ufffd\ufffd\ufffdx",
        "end",
    ]
    assert stats.invalid_utf8_lines == [2, 4, 5]
    assert frame["line"].to_list() == [1, 2, 3, 4, 5, 6]


def test_invalid_lines_agree_with_python_decoder():
    # valid sequences, truncated ones, surrogates, overlong forms, above U+10FFFF, bad bytes
    good = [b"a", b" ", b"\n", b"\r\n", b"\xc3\xa9", b"\xe2\x82\xac", b"\xf0\x9f\x98\x80"]
    bad = [b"\xff", b"\x80", b"\xc3", b"\xe2\x82", b"\xed\xa0\x80", b"\xf4\x90\x80\x80"]
    bad += [b"\xc0\xaf", b"\xe0\x80\xaf", b"\xf0\x80\x80\xaf", b"\xf5"]
    pieces = [*good, *bad, b"0123456789abcdef"]
    rng = random.Random(7)
    for _ in range(300):
        raw = b"".join(rng.choice(pieces) for _ in range(rng.randint(1, 40)))
        frame, stats = split_lines(raw)
        body = raw[:-1] if raw.endswith(b"\n") else raw
        lines = [x[:-1] if x.endswith(b"\r") else x for x in body.split(b"\n")]
        expect_bad = []
        for i, x in enumerate(lines, 1):
            try:
                x.decode("utf-8")
            except UnicodeDecodeError:
                expect_bad.append(i)
        assert stats.invalid_utf8_lines == expect_bad
        assert frame["text"].to_list() == [x.decode("utf-8", errors="replace") for x in lines]


def test_large_input_is_split_across_data_buffers(monkeypatch):
    raw = b"".join(b"line %d with some text\n" % i for i in range(50)) + b"\xff\xfe tail"
    whole, whole_stats = split_lines(raw)
    monkeypatch.setattr(textio, "_MAX_BUFFER", 100)
    split, stats = split_lines(raw)
    assert split.equals(whole)
    assert stats.invalid_utf8_lines == whole_stats.invalid_utf8_lines == [51]
    assert split["text"][-1] == "\ufffd\ufffd tail"


def test_line_longer_than_a_buffer_is_refused(monkeypatch):
    monkeypatch.setattr(textio, "_MAX_BUFFER", 10)
    with pytest.raises(InputError, match="^a line is longer than 2 GiB: not a text log$"):
        split_lines(b"short\n" + b"y" * 11 + b"\n")


def test_text_is_not_copied(tmp_path):
    # the frame holds the file's bytes once, plus a 16-byte view and an 8-byte line number
    raw = b"".join(b" iteration %8d/ 1000000 | lm loss: 2.5E+00 |\n" % i for i in range(20000))
    frame, _ = _read(tmp_path, raw)
    assert frame.height == 20000
    assert frame.estimated_size() <= len(raw) + 24 * frame.height + 4096


def test_reading_makes_no_copy_of_the_bytes(monkeypatch):
    # numpy temporaries are traced: splitting costs a few bytes a line, not the file again
    monkeypatch.setattr(textio, "_SCAN_CHUNK", 1 << 16)
    line = b" iteration %8d/ 1000000 | " + b"lm loss: 2.345678E+00 | " * 15 + b"\n"
    raw = b"".join(line % i for i in range(5000))
    split_lines(raw)  # first use initializes libraries
    tracemalloc.start()
    split_lines(raw)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < len(raw) // 3


def _slices_small(monkeypatch) -> None:
    """Files from 64 bytes on are read by the threads, 16 bytes a request."""
    monkeypatch.setattr(textio, "_PARALLEL_READ", 64)
    monkeypatch.setattr(textio, "_READ_SLICE", 16)
    monkeypatch.setattr(textio, "_SCAN_CHUNK", 32)


@pytest.mark.parametrize("how", ["mapped", "threads", "plain"])
def test_large_file_read_gives_the_bytes_in_order(tmp_path, monkeypatch, how):
    raw = b"".join(b"line %d \xc3\xa9 | value %d\r\n" % (i, i * i) for i in range(200)) + b"cut"
    plain, plain_stats = _read(tmp_path, raw)
    _slices_small(monkeypatch)
    if how != "mapped":
        monkeypatch.setenv(textio.NO_MMAP, "1")
    if how == "plain":  # a platform without preadv: one plain read
        monkeypatch.delattr(textio.os, "preadv")
    path = tmp_path / "x.log"
    data = textio.read_buffer(path)[0]
    assert data.tobytes() == raw
    # the file's pages and a plain read's bytes are read-only; the threads' copy is not
    assert data.flags.writeable is (how == "threads")
    frame, stats = read_lines(path)
    assert frame.equals(plain)
    assert (stats.lines, stats.crlf, stats.no_final_newline) == (201, True, True)
    assert frame["text"][1] == "line 1 \u00e9 | value 1"
    zipped = tmp_path / "x.log.gz"
    zipped.write_bytes(gzip.compress(raw))
    unzipped, zstats = read_lines(zipped)
    assert unzipped.equals(plain) and zstats.gzip is True


def test_file_that_shrinks_while_read_is_read_again(tmp_path, monkeypatch):
    _slices_small(monkeypatch)
    monkeypatch.setenv(textio.NO_MMAP, "1")
    path = tmp_path / "x.log"
    path.write_bytes(b"0123456789abcde\n" * 20)
    real = textio.os.preadv
    calls = []

    def shrinking(fd, buffers, offset):
        calls.append(offset)
        if len(calls) == 3:  # the file is cut while its slices are read
            path.write_bytes(b"short\n")
        return real(fd, buffers, offset)

    monkeypatch.setattr(textio.os, "preadv", shrinking)
    data, was_gzip = textio.read_buffer(path)
    assert (data.tobytes(), was_gzip) == (b"short\n", False)


def test_gzip_reads_like_plain(tmp_path):
    raw = b"a\r\n\nb \xff\n"
    plain, plain_stats = _read(tmp_path, raw)
    frame, stats = _read(tmp_path, gzip.compress(raw), "x.log.gz")
    assert frame.equals(plain)
    assert stats.gzip is True and plain_stats.gzip is False
    assert (stats.crlf, stats.invalid_utf8_lines) == (True, [3])


def test_damaged_gzip_is_refused(tmp_path):
    path = tmp_path / "x.log.gz"
    path.write_bytes(gzip.compress(b"a\n" * 100)[:20])
    with pytest.raises(InputError, match=r"x\.log\.gz: damaged gzip file"):
        read_lines(path)


@pytest.mark.parametrize("data", [b"", b"\n\n", b" \r\n\t\n"])
def test_empty_file_is_refused(tmp_path, data):
    with pytest.raises(InputError, match=r"x\.log: file is empty$"):
        _read(tmp_path, data)


def test_binary_file_is_refused(tmp_path):
    with pytest.raises(InputError, match=r"x\.log: not a text log \(binary data at byte 3\)$"):
        _read(tmp_path, b"abc\x00def\n")


def test_directory_and_missing_file_are_refused(tmp_path):
    with pytest.raises(InputError, match=r": is a directory, not a log file$"):
        read_lines(tmp_path)
    with pytest.raises(InputError, match=r"nope\.log: no such file$"):
        read_lines(tmp_path / "nope.log")


def test_split_lines_of_no_bytes_is_an_empty_frame():
    frame, stats = split_lines(b"")
    assert frame.equals(_frame([]))
    assert stats.lines == 0


def test_head_lines_reads_plain_and_gzip(tmp_path):
    raw = b"one\r\ntwo \xff\nthree\nfour\n"
    plain = tmp_path / "a.log"
    plain.write_bytes(raw)
    packed = tmp_path / "a.log.gz"
    packed.write_bytes(gzip.compress(raw))
    assert head_lines(plain, 3) == ["one", "two \ufffd", "three"]
    assert head_lines(packed, 3) == ["one", "two \ufffd", "three"]


def test_a_file_without_line_feeds_is_split_on_carriage_returns():
    frame, stats = split_lines(b"step 1 loss 2.5\rstep 2 loss 2.4\rstep 3 loss 2.3\r")
    assert frame.get_column("text").to_list() == [
        "step 1 loss 2.5",
        "step 2 loss 2.4",
        "step 3 loss 2.3",
    ]
    assert (stats.lines, stats.cr_only, stats.crlf, stats.no_final_newline) == (
        3,
        True,
        False,
        False,
    )


def test_carriage_returns_beside_line_feeds_are_line_breaks_too():
    frame, stats = split_lines(b"a\rb\nc\r\n")
    assert frame.get_column("text").to_list() == ["a", "b", "c"]
    assert (stats.cr_only, stats.crlf, stats.lone_cr) == (False, True, 1)


def test_sniffing_sees_the_lines_the_reader_reads(tmp_path):
    from logbook.textio import head_lines

    raw = b"a 1\rb 2\r\nc 3\x0bstill c\xe2\x80\xa8\nd 4"  # U+2028 in the line
    p = tmp_path / "x.log"
    p.write_bytes(raw)
    frame, _ = split_lines(raw)
    assert head_lines(p) == frame.get_column("text").to_list()
    assert head_lines(p)[:2] == ["a 1", "b 2"] and len(head_lines(p)) == 4
