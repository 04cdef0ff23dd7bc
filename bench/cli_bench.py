"""CLI benchmark: ``logbook parse`` as a user runs it, each command in a fresh process.

    python -m bench.cli_bench [--repeat 3] [--records 1000000]

Contenders, each run as its own process (``subprocess``), all of them once a round
(the order rotating from round to round, so that all see the same spells of load),
best of ``--repeat`` rounds:

* ``parse megatron``  ``logbook parse MEGATRON_LOG -o OUT.parquet``
* ``regex loop``      ``python -c "from bench._baselines_parse import regex_megatron;
  regex_megatron(PATH)"`` on the same file (a per-line ``re`` loop into pandas)
* ``awk``             the command line of ``bench._baselines_parse.awk`` (``awk -F'|'
  '/ iteration /{n++; s+=$7} END{print n}' PATH``), run directly
* ``parse text``      ``logbook parse TEXT_LOG -o OUT.parquet`` (the generic ``text``
  reader: no named format claims the layout)
* ``start-up``        ``python -c "import polars, logbook.cli"``, for reference

Wall time is taken around the child process (spawn to reap); CPU time (user + system)
and the peak resident memory come from the kernel: peak RSS is ``/usr/bin/time -f %M``
of the child when GNU time is installed (a small process forks it, so the figure is the
child's own), else ``ru_maxrss`` from ``os.wait4`` (which cannot go below this
interpreter's own peak at the time of the spawn: the child starts as a copy of it).
This process imports no polars or pandas, to keep that floor low.

The logs are ``bench/data/megatron_1m.log`` and ``bench/data/text_1m.log`` (for
``--records 1000000``), generated with ``bench.gen_megatron`` / ``bench.gen_text``
(temp file, then rename) when absent. The parquet outputs are written into a temp folder
under ``bench/data/`` (``logbook`` writes them atomically) and removed, after each run
and at the end. The children run with Python's bytecode caches as on a user's machine
(written once before the first round; ``PYTHONDONTWRITEBYTECODE`` is dropped from their
environment where it is set).

Targets (pass/fail on wall time; exit status 1 when one fails or cannot be measured):
regex loop / parse megatron >= 10x; parse megatron / awk <= 5x; parse text / parse
megatron per record <= 3x; (peak RSS - start-up peak RSS) / file size <= 3x for both
logs. The machine is noisy: only ratios measured in the same run mean something.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import importlib.metadata
import json
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "bench" / "data"
GNU_TIME = Path("/usr/bin/time")

TARGET_REGEX = 10.0  # regex loop time / logbook parse time, at least
TARGET_AWK = 5.0  # logbook parse time / awk time, at most
TARGET_TEXT = 3.0  # text parse time / megatron parse time, per record, at most
TARGET_MEMORY = 3.0  # (peak RSS - start-up peak RSS) / file size, at most

# The awk command line that bench._baselines_parse.awk runs, captured in a child process
# (importing the baselines imports pandas, which this process must not: see above).
_AWK_ARGV = """
import json, subprocess, sys
from bench import _baselines_parse as base
seen = []
class Done:
    stdout = "0"
def fake_run(argv, **kwargs):
    seen.append(list(argv))
    return Done()
base.subprocess.run = fake_run
base.awk(sys.argv[1], "megatron")
print(json.dumps(seen[0]))
"""
_RECORDS = re.compile(r"^(\w[\w-]*): ([\d,]+) records", re.M)


@dataclass
class Contender:
    """One command line, and what its runs measured."""

    name: str
    argv: list[str]
    log: Path | None = None  # the log it reads (for per-record and per-byte figures)
    output: Path | None = None  # the file it must write (removed after each run)
    runs: list[tuple[float, float, int]] = field(default_factory=list)  # wall s, cpu s, peak B
    records: int | None = None
    error: str | None = None

    @property
    def walls(self) -> list[float]:
        return [r[0] for r in self.runs]

    @property
    def peaks(self) -> list[int]:
        return [r[2] for r in self.runs]

    @property
    def best(self) -> float | None:
        return min(self.walls) if self.runs else None

    @property
    def best_cpu(self) -> float | None:
        """CPU seconds of the best (fastest) round."""
        return min(self.runs)[1] if self.runs else None


def label(records: int) -> str:
    """``1m`` for 1,000,000, ``50k`` for 50,000, else the number."""
    if records % 1_000_000 == 0:
        return f"{records // 1_000_000}m"
    if records % 1000 == 0:
        return f"{records // 1000}k"
    return str(records)


def data_file(kind: str, records: int) -> Path:
    """``bench/data/{kind}_{label}.log``, generated (temp file, then rename) if absent."""
    path = DATA / f"{kind}_{label(records)}.log"
    if path.exists():
        return path
    DATA.mkdir(parents=True, exist_ok=True)
    tmp = DATA / f".{path.name}.{os.getpid()}.tmp"
    t0 = time.perf_counter()
    try:
        subprocess.run(
            [sys.executable, "-m", f"bench.gen_{kind}", "--records", str(records), "-o", str(tmp)],
            cwd=ROOT,
            check=True,
            stdout=subprocess.DEVNULL,
        )
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
    print(f"generated {path.name} in {time.perf_counter() - t0:.1f} s", flush=True)
    return path


def awk_argv(path: Path) -> list[str]:
    """The awk command line of ``bench._baselines_parse.awk`` on ``path``."""
    out = subprocess.run(
        [sys.executable, "-c", _AWK_ARGV, str(path)],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def logbook_exe() -> str:
    """The ``logbook`` console script of this environment."""
    here = Path(sys.executable).parent / "logbook"
    found = str(here) if here.exists() else shutil.which("logbook")
    if not found:
        raise SystemExit("cli_bench: no `logbook` command next to this Python or on PATH")
    return found


def run_once(c: Contender, scratch: Path) -> tuple[float, float, int, str]:
    """Wall seconds, CPU seconds, peak RSS (bytes) and stdout of one fresh run of ``c``."""
    rss_file = scratch / "maxrss.txt"
    argv = c.argv
    if GNU_TIME.exists():
        argv = [str(GNU_TIME), "-f", "%M", "-o", str(rss_file), *argv]
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            argv, cwd=ROOT, env=child_env(), stdin=subprocess.DEVNULL, stdout=out, stderr=err
        )
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        except BaseException:
            proc.kill()
            proc.wait()
            raise
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        stdout = out.read().decode("utf-8", "replace")
        err.seek(0)
        stderr = err.read().decode("utf-8", "replace")
    if proc.returncode != 0:
        last = (stderr.strip().splitlines() or [""])[-1]
        raise RuntimeError(f"exit {proc.returncode}: {last}")
    if c.output is not None:
        if not c.output.exists() or c.output.stat().st_size == 0:
            raise RuntimeError(f"{c.output.name} was not written")
        c.output.unlink()
    if GNU_TIME.exists():
        peak = int(rss_file.read_text().split()[-1]) * 1024
        rss_file.unlink()
    else:
        peak = usage.ru_maxrss * 1024
    return wall, usage.ru_utime + usage.ru_stime, peak, stdout


def child_env() -> dict[str, str]:
    """The environment of a user's shell: Python writes and reuses its bytecode caches
    (``PYTHONDONTWRITEBYTECODE``, where this machine sets it, is left out, else every
    contender compiles the project's modules from source at each start)."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def compile_once() -> None:
    """Write the bytecode caches before the first round, as a user's first run does."""
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", "logbook", "parsers", "bench"],
        cwd=ROOT,
        env=child_env(),
        check=True,
    )


def warm_cache(paths: list[Path]) -> None:
    """Read the logs once so that no contender pays for the disk."""
    for p in paths:
        with open(p, "rb", buffering=0) as fh:
            while fh.read(1 << 22):
                pass


def bench(contenders: list[Contender], repeat: int, scratch: Path) -> None:
    """``repeat`` rounds, each contender once a round, the order rotating."""
    for k in range(repeat):
        order = contenders[k % len(contenders) :] + contenders[: k % len(contenders)]
        for c in order:
            if c.error:
                continue
            try:
                wall, cpu, peak, stdout = run_once(c, scratch)
            except RuntimeError as exc:
                c.error = str(exc)
                print(f"  round {k + 1} {c.name:<15} failed: {exc}", flush=True)
                continue
            c.runs.append((wall, cpu, peak))
            m = _RECORDS.search(stdout)
            if m:
                c.records = int(m.group(2).replace(",", ""))
            print(
                f"  round {k + 1} {c.name:<15} {wall:8.3f} s  cpu {cpu:7.3f} s"
                f"  peak {peak / 2**20:7.1f} MiB",
                flush=True,
            )


def _ok(x: float | None, target: float, at_least: bool) -> bool:
    if x is None:
        return False
    return x >= target if at_least else x <= target


def _div(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def _num(x: float | None, spec: str = ".2f") -> str:
    return "-" if x is None else format(x, spec)


def checks(by: dict[str, Contender], sizes: dict[str, int]) -> list[tuple]:
    """(check, wall ratio, cpu ratio, target text, pass) per target."""
    meg, text, regex, awk, start = (
        by[n] for n in ("parse megatron", "parse text", "regex loop", "awk", "start-up")
    )
    rows = [
        (
            "regex loop / parse megatron",
            _div(regex.best, meg.best),
            _div(regex.best_cpu, meg.best_cpu),
            TARGET_REGEX,
            True,
        ),
        (
            "parse megatron / awk",
            _div(meg.best, awk.best),
            _div(meg.best_cpu, awk.best_cpu),
            TARGET_AWK,
            False,
        ),
    ]
    per_rec = [
        (_div(x.best, x.records), _div(x.best_cpu, x.records)) for x in (text, meg)
    ]  # seconds per record
    rows.append(
        (
            "parse text / parse megatron, per record",
            _div(per_rec[0][0], per_rec[1][0]),
            _div(per_rec[0][1], per_rec[1][1]),
            TARGET_TEXT,
            False,
        )
    )
    base = min(start.peaks) if start.peaks else None
    for c, kind in ((meg, "megatron"), (text, "text")):
        grow = max(c.peaks) - base if c.peaks and base is not None else None
        rows.append(
            (
                f"(peak RSS - start-up RSS) / file size, {kind}",
                _div(grow, sizes[kind]),
                None,
                TARGET_MEMORY,
                False,
            )
        )
    return [
        (name, wall, cpu, f"{'>=' if least else '<='} {t:g}", _ok(wall, t, least))
        for name, wall, cpu, t, least in rows
    ]


def report(
    contenders: list[Contender],
    sizes: dict[str, int],
    args: argparse.Namespace,
    started: dt.datetime,
    loads: tuple[tuple[float, ...], tuple[float, ...]],
) -> tuple[str, bool]:
    """The markdown report of the run, and whether every target passed."""
    by = {c.name: c for c in contenders}
    rss_how = "`/usr/bin/time -f %M`" if GNU_TIME.exists() else "`os.wait4` `ru_maxrss`"
    try:
        polars = importlib.metadata.version("polars")
    except importlib.metadata.PackageNotFoundError:
        polars = "?"
    out = [
        f"command: `python -m bench.cli_bench --repeat {args.repeat} --records {args.records}`",
        f"date: {started:%Y-%m-%d %H:%M} (local), load average {loads[0][0]:.2f} at the start, "
        f"{loads[1][0]:.2f} at the end",
        f"machine: {platform.machine()}, {os.cpu_count()} cores, Linux {platform.release()}, "
        f"Python {platform.python_version()}, polars {polars}; best of {args.repeat} rounds, "
        f"each command a fresh process; peak RSS by {rss_how}",
        "",
        "| contender | log | records | wall s (best) | cpu s | peak RSS MiB | wall s, all rounds |",
        "|---|---|---|---|---|---|---|",
    ]
    for c in contenders:
        log = f"{c.log.name} ({sizes[_kind(c)] / 1e6:.1f} MB)" if c.log else "-"
        peak = _num(max(c.peaks) / 2**20, ".1f") if c.peaks else "-"
        rounds = ", ".join(f"{w:.3f}" for w in c.walls) or "-"
        recs = f"{c.records:,}" if c.records is not None else "-"
        out.append(
            f"| {c.name} | {log} | {recs} | {_num(c.best, '.3f')} | {_num(c.best_cpu, '.3f')}"
            f" | {peak} | {rounds} |"
        )
    out += ["", "| check | ratio (wall) | ratio (cpu) | target | result |", "|---|---|---|---|---|"]
    rows = checks(by, sizes)
    for name, wall, cpu, target, ok in rows:
        verdict = "PASS" if ok else ("FAIL" if wall is not None else "FAIL (not measured)")
        out.append(f"| {name} | {_num(wall)} | {_num(cpu)} | {target} | {verdict} |")
    meg, start = by["parse megatron"], by["start-up"]
    share = _div(start.best, meg.best)
    if share is not None:
        out += [
            "",
            f"start-up (`import polars, logbook.cli`) is {start.best:.3f} s, "
            f"{100 * share:.0f}% of `logbook parse` on the megatron log; "
            f"start-up peak RSS {min(start.peaks) / 2**20:.1f} MiB.",
        ]
    out += [f"- {c.name}: {c.error}" for c in contenders if c.error]
    passed = all(ok for *_, ok in rows) and not any(c.error for c in contenders)
    return "\n".join(out), passed


def _kind(c: Contender) -> str:
    return "text" if c.log is not None and c.log.name.startswith("text") else "megatron"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--records", type=int, default=1_000_000)
    args = ap.parse_args(argv)
    if args.records < 1 or args.repeat < 1:
        ap.error("--records and --repeat must be at least 1")
    started, load0 = dt.datetime.now(), os.getloadavg()
    megatron, text = data_file("megatron", args.records), data_file("text", args.records)
    sizes = {"megatron": megatron.stat().st_size, "text": text.stat().st_size}
    logbook = logbook_exe()
    DATA.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=".cli_bench.", dir=DATA))
    try:
        meg_out, text_out = scratch / "megatron.parquet", scratch / "text.parquet"
        regex_code = (
            "from bench._baselines_parse import regex_megatron; "
            f"regex_megatron({json.dumps(str(megatron))})"
        )
        contenders = [
            Contender(
                "parse megatron",
                [logbook, "parse", str(megatron), "-o", str(meg_out)],
                megatron,
                meg_out,
            ),
            Contender("regex loop", [sys.executable, "-c", regex_code], megatron),
            Contender("awk", awk_argv(megatron), megatron),
            Contender(
                "parse text", [logbook, "parse", str(text), "-o", str(text_out)], text, text_out
            ),
            Contender("start-up", [sys.executable, "-c", "import polars, logbook.cli"]),
        ]
        for c in contenders:
            print(f"{c.name}: {shlex.join(c.argv)}", flush=True)
        compile_once()
        warm_cache([megatron, text])
        bench(contenders, args.repeat, scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    text_report, passed = report(contenders, sizes, args, started, (load0, os.getloadavg()))
    print("\n" + text_report)
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
