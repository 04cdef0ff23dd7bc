"""``logbook watch``: follow a run's logs while it trains and say what goes wrong, once."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Annotated

import typer

from logbook.cli_detect import ConfigOpt, SetOpt
from logbook.schema import Finding

FAIL_LEVELS = ("warning", "critical")
SEVERITIES = ("info", "warning", "critical")
IDLE_SETTLE_S = 30.0  # a log this long without a record: what is open is complete
ON_FINDING_TIMEOUT_S = 60.0  # an --on-finding command still running after this is killed


def register(app: typer.Typer) -> None:
    """Add the command to the app."""
    app.command("watch")(watch)


def watch(
    logs: Annotated[
        list[Path] | None,
        typer.Argument(help="Log files of one run, or folders where its launch logs appear."),
    ] = None,
    interval: Annotated[
        float, typer.Option("--interval", help="Seconds between reads of the logs.")
    ] = 1.0,
    fail_on: Annotated[
        str | None,
        typer.Option(
            "--fail-on",
            help="Exit 1 as soon as a finding of this severity or worse appears: warning|critical.",
        ),
    ] = None,
    on_finding: Annotated[
        str | None,
        typer.Option(
            "--on-finding", help="Run this shell command for each finding, its JSON on stdin."
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="One finding per line, as JSON.")] = False,
    min_severity: Annotated[
        str, typer.Option("--min-severity", help="Report findings of this severity or worse.")
    ] = "warning",
    fmt: Annotated[
        str | None, typer.Option("--format", "-f", help="Log format; sniffed when not given.")
    ] = None,
    config: ConfigOpt = None,
    sets: SetOpt = None,
    until_idle: Annotated[
        float | None,
        typer.Option("--until-idle", help="Stop when no log has grown for this many seconds."),
    ] = None,
    max_time: Annotated[
        float | None, typer.Option("--max-time", help="Stop after this many seconds.")
    ] = None,
) -> None:
    """Follow growing logs (files, or folders where launch logs appear; rotated files
    too), read only what they append, and print each finding once, as soon as it is in:
    a precursor when it fires ("a spike may follow"), an incident when it is complete.
    Runs until interrupted (Ctrl-C), --until-idle or --max-time; then reports what is
    still open. Exit 1 with --fail-on as soon as a finding of that level appears."""
    from logbook.errors import UsageError
    from logbook.live.detector import LiveDetector
    from logbook.live.watch import Watch

    if not logs:
        raise UsageError("no log given (logbook watch LOG... or a folder of launch logs)")
    if fail_on is not None and fail_on not in FAIL_LEVELS:
        raise UsageError(f"--fail-on {fail_on!r}: use warning or critical")
    if min_severity not in SEVERITIES:
        raise UsageError(f"--min-severity {min_severity!r}: use {', '.join(SEVERITIES)}")
    if not interval > 0:
        raise UsageError(f"--interval {interval}: give a number of seconds above 0")
    for name, v in (("--until-idle", until_idle), ("--max-time", max_time)):
        if v is not None and not v > 0:
            raise UsageError(f"{name} {v}: give a number of seconds above 0")
    if on_finding is not None and not shlex.split(on_finding):
        raise UsageError("--on-finding: the command is empty")
    from logbook.cli_detect import _config

    cfg = _config(config, sets or [])
    lowest = min_severity if fail_on is None else min(min_severity, fail_on, key=_rank)
    detector = LiveDetector(config=cfg, min_severity=lowest)
    w = Watch(list(logs), fmt, detector)
    out = _Output(as_json, on_finding, min_severity, fail_on)
    _status(f"watching {', '.join(str(p) for p in logs)} every {interval:g}s (Ctrl-C to stop)")
    from logbook.cli import Terminated

    try:
        _loop(w, out, interval, until_idle, max_time)
    except (KeyboardInterrupt, Terminated) as exc:
        # stopped by hand or by the job's end: what is open is reported as it stands
        out.emit(w.finish())
        out.close()
        _status(_summary(w, out))
        raise typer.Exit(130 if isinstance(exc, KeyboardInterrupt) else 143) from None
    out.close()
    _status(_summary(w, out))


def _loop(w, out: _Output, interval: float, until_idle: float | None, max_time: float | None):
    start = last_data = time.monotonic()
    announced = settled = False
    while True:
        tick = time.monotonic()
        new = w.poll()
        while not w.caught_up() and new:  # a long log already there: read it all first
            new += w.poll()
        now = time.monotonic()
        if new:
            last_data, settled = now, False
            if not announced:
                _status(_formats(w))
                announced = True
            out.emit(w.check())
        elif now - last_data >= IDLE_SETTLE_S and w.records and not settled:
            out.emit(w.check(final=True))  # quiet for long: what is open is complete
            settled = True
        if until_idle is not None and now - last_data >= until_idle:
            out.emit(w.finish())
            return
        if max_time is not None and now - start >= max_time:
            out.emit(w.finish())
            return
        out.reap()
        time.sleep(max(0.0, interval - (time.monotonic() - tick)))


class _Output:
    """Prints findings (and runs --on-finding); ends the command for --fail-on."""

    def __init__(self, as_json: bool, command: str | None, least: str, fail_on: str | None):
        self.as_json, self.command, self.fail_on = as_json, command, fail_on
        self.least = _rank(least)
        self.printed = 0
        self.jobs: list[subprocess.Popen] = []

    def emit(self, findings: list[Finding]) -> None:
        from logbook.cli_findings import finding_json

        for f in findings:
            row = finding_json(f)
            if _rank(f.severity) >= self.least:
                self.printed += 1
                self._say(json.dumps(row) if self.as_json else _line(f))
                if self.command:
                    self._run(row)
            if self.fail_on is not None and _rank(f.severity) >= _rank(self.fail_on):
                self.close()
                _status(f"stopping: a {f.severity} finding ({f.kind} at step {_at(f)})")
                raise typer.Exit(1)

    def reap(self) -> None:
        now = time.monotonic()
        for job in list(self.jobs):
            if job.poll() is not None:
                self.jobs.remove(job)
                if job.returncode:
                    _status(f"--on-finding exited {job.returncode}")
            elif now - job.started > ON_FINDING_TIMEOUT_S:  # type: ignore[attr-defined]
                job.kill()
                _status(f"--on-finding still running after {ON_FINDING_TIMEOUT_S:g}s: killed")
                self.jobs.remove(job)

    def close(self) -> None:
        """Wait for the --on-finding commands still running (a while at most)."""
        for job in self.jobs:
            try:
                job.wait(timeout=ON_FINDING_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                job.kill()
        self.jobs = []

    def _say(self, text: str) -> None:
        try:
            typer.echo(text)
            sys.stdout.flush()
        except BrokenPipeError:
            from logbook.cli import quiet_stdout

            quiet_stdout()

    def _run(self, row: dict) -> None:
        try:
            job = subprocess.Popen(self.command, shell=True, stdin=subprocess.PIPE)
        except OSError as exc:
            _status(f"--on-finding: cannot run ({exc})")
            return
        job.started = time.monotonic()  # type: ignore[attr-defined]
        try:
            assert job.stdin is not None
            job.stdin.write((json.dumps(row) + "\n").encode())
            job.stdin.close()
        except BrokenPipeError:
            pass  # the command did not read its stdin
        self.jobs.append(job)


def _line(f: Finding) -> str:
    from logbook.cli_findings import COLOURS, colour

    stamp = time.strftime("%H:%M:%S")
    span = ""
    if f.start_step is not None and f.end_step is not None and f.end_step != f.start_step:
        span = f" ({f.start_step}..{f.end_step})"
    head = f"{f.severity.upper():<8} {f.kind}"
    if colour():
        head = typer.style(head, fg=COLOURS.get(f.severity), bold=f.severity == "critical")
    return f"{stamp}  {head}  step {_at(f)}{span}: {f.message}"


def _at(f: Finding) -> str:
    at = f.step if f.step is not None else f.start_step
    return "-" if at is None else str(at)


def _formats(w) -> str:
    parts = [f"{Path(p.name).name} ({p.fmt})" for p in w.parsers() if p.fmt]
    return f"reading {', '.join(parts)}: {w.records:,} records so far"


def _summary(w, out: _Output) -> str:
    unread = sum(p.unrecognized for p in w.parsers())
    tail = ""
    if unread:
        first = next(p for p in w.parsers() if p.unrecognized)
        where = f"{Path(first.name).name}:{','.join(map(str, first.first_unrecognized))}"
        tail = f", {unread:,} line(s) unrecognized ({where})"
    return f"watched {w.records:,} records; {out.printed} finding(s){tail}"


def _status(text: str) -> None:
    typer.echo(text, err=True)


def _rank(severity: str) -> int:
    return SEVERITIES.index(severity)
