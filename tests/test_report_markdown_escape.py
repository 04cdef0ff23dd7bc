"""A Markdown report keeps every text that comes from a log inert: HTML in a file name,
a crash line or a note is written as character references, never as live tags."""

from __future__ import annotations

import re
from pathlib import Path

from _cli import invoke

from logbook.report.blocks import Code, Document, Heading, Items, Para
from logbook.report.markdown import cell, safe, to_markdown

ROOT = Path(__file__).resolve().parents[1]
PAYLOAD = "<script>alert(1)</script>"


def test_plain_text_is_made_inert():
    assert safe("a <b> & c") == "a &lt;b&gt; &amp; c"
    assert cell("x | <i>\ny") == "x \\| &lt;i&gt; y"


def test_every_block_escapes_and_a_fence_outlasts_the_backticks_in_it():
    doc = Document(
        title="t",
        blocks=[
            Heading(2, f"run {PAYLOAD}"),
            Para(f"note {PAYLOAD}"),
            Items([PAYLOAD]),
            Code(["```", "<b>kept as code</b>"], title=PAYLOAD),
        ],
    )
    md = to_markdown(doc, "figs")
    outside = re.sub(r"````bash\n.*?\n````", "", md, flags=re.S)
    assert "<script" not in outside and "&lt;script&gt;" in outside
    assert "````bash\n```\n<b>kept as code</b>\n````" in md


def test_report_md_of_a_log_with_html_in_its_name_and_crash_line(tmp_path, monkeypatch, capsys):
    text = (ROOT / "fixtures/megatron/spike_restart.log").read_text()
    text = text.replace("Watchdog caught", f"Watchdog {PAYLOAD} caught")
    log = tmp_path / "run<img src=x onerror=alert(1)>.log"
    log.write_text(text)
    out = tmp_path / "r.md"
    code, _, err = invoke(monkeypatch, capsys, "report", str(log), "-o", str(out))
    assert (code, err) == (0, "")
    md = out.read_text()
    outside = re.sub(r"`{3,4}bash\n.*?\n`{3,4}", "", md, flags=re.S)
    assert "<img" not in outside and "<script" not in md
    assert "run&lt;img src=x onerror=alert(1)&gt;.log" in outside
    # inside a code block (literal text in Markdown) the replay command names the log as
    # a shell takes it
    assert f"logbook replay segment '{log}' --start 75" in md
