"""Parse benchmark: logbook's parsers against the obvious alternatives, as same-run ratios.

    python -m bench.parse_bench [--records 1000000] [--repeat 3] [--formats megatron metaseq]

For each format it generates (once, into ``bench/data/``) a log of ``--records``
training records with restarts and noise, then times, best of ``--repeat`` runs each:

* ``read``      ``logbook.textio.read_lines`` (bytes to a frame of lines)
* ``parse``     the format's ``parse`` on that frame (the parser alone)
* ``read_log``  ``parsers.read_log(path)`` end to end (sniff, read, parse, stitch)
* ``regex``     a per-line Python ``re`` loop into a pandas DataFrame
* ``awk``       ``awk -F'|' '/ iteration /{n++; s+=$7} END{print n}'``
* ``read_json`` (metaseq) ``pandas.read_json(lines=True)`` on the payloads, extracted
  to their own file beforehand

and the peak memory of ``read_lines`` + ``parse`` and of ``read_log`` in a child
process (peak RSS after the parse minus peak RSS after importing polars and logbook;
``VmHWM`` from ``/proc/self/status``, which is ``ru_maxrss`` of the child's own image:
``ru_maxrss`` itself would start at the forking parent's peak), as a ratio to the file
size. The machine is noisy: only ratios measured in the same run mean something.
Contenders take turns (``--repeat`` rounds, each contender once a round) so that all
see the same spells of load, and each keeps its best round; the CPU seconds of that
round (all threads, and awk's) are shown too. Pass/fail is judged on wall time; the
exit status is 1 when a target fails.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import resource
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

import parsers
from bench import _baselines_parse as base
from bench import gen_megatron, gen_metaseq
from logbook.atomic import atomic_open
from logbook.textio import read_lines

DATA = Path(__file__).resolve().parent / "data"
GENERATORS = {"megatron": gen_megatron.generate, "metaseq": gen_metaseq.generate}
TARGET_REGEX = 10.0  # regex loop time / logbook time, at least
TARGET_AWK = 5.0  # logbook time / awk time, at most
TARGET_READ_JSON = 3.0  # read_json time / logbook time, at least
TARGET_MEMORY = 3.0  # (peak RSS - baseline RSS) / file size, at most

_CHILD = """
import json, resource, sys
import polars
import parsers
from logbook.textio import read_lines
def rss():
    # VmHWM: the peak RSS of this process image; ru_maxrss would start at the peak of
    # the (large) parent that forked it
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
path, fmt, mode = sys.argv[1:]
base = rss()
if mode == "parse":
    lines, _ = read_lines(path)
    result = parsers.FORMATS[fmt].parse(lines, path)
else:
    result = parsers.read_log(path)
print(json.dumps({"base": base, "peak": rss()}))
"""


@dataclass
class Result:
    """What one format's run measured: best wall seconds per contender (and the CPU
    seconds of that run), counts, peak memory."""

    fmt: str
    path: Path
    size: int
    seconds: dict[str, float] = field(default_factory=dict)
    cpu: dict[str, float] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    memory: dict[str, float] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)


def _cpu() -> float:
    """CPU seconds of this process (all threads) and of its finished children."""
    me, kids = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def timed(fn: Callable[[], Any]) -> tuple[float, float, Any]:
    """Wall and CPU seconds of one call, and its result."""
    gc.collect()
    c0, t0 = _cpu(), time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, _cpu() - c0, out


def data_file(fmt: str, records: int, data_dir: Path, variant: str) -> Path:
    """The benchmark log for ``fmt``, generated on first use."""
    path = data_dir / f"{fmt}_{variant}_{records}.log"
    if not path.exists():
        t0 = time.perf_counter()
        tmp = path.with_suffix(".tmp")
        GENERATORS[fmt](tmp, records, variant)
        tmp.replace(path)
        print(f"generated {path.name} in {time.perf_counter() - t0:.1f} s", flush=True)
    return path


def child_memory(path: Path, fmt: str, mode: str) -> float:
    """Peak RSS growth of a fresh interpreter doing ``mode`` on ``path``, in bytes."""
    root = Path(__file__).resolve().parents[1]
    env = dict(os.environ, PYTHONPATH=str(root) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, str(path), fmt, mode],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    got = json.loads(out.stdout.strip().splitlines()[-1])
    return float(got["peak"] - got["base"])


def _contenders(fmt: str, path: Path, frame: pl.DataFrame | None, payloads: Path | None):
    """(name, call, what to count in its result) for one format."""
    module = parsers.FORMATS[fmt]

    def parsed_counts(p: Any) -> dict[str, int]:
        return {
            "records": p.metrics.height,
            "unrecognized": p.unrecognized.len(),
            "ignored": p.ignored,
            "events": len(p.events),
        }

    out = [("read", lambda: read_lines(path)[0], lambda f: {"lines": f.height})]
    if frame is not None:
        out.append(("parse", lambda: module.parse(frame, str(path)), parsed_counts))
    out += [
        (
            "read_log",
            lambda: parsers.read_log(path),
            lambda run: {"restarts": sum(1 for e in run.events if e.kind == "restart")},
        ),
        ("regex", lambda: base.REGEX[fmt](path), lambda df: {"regex_records": len(df)}),
        ("awk", lambda: base.awk(path, fmt), lambda n: {"awk_lines": n}),
    ]
    if payloads is not None:
        out.append(
            (
                "read_json",
                lambda: base.read_json(payloads),
                lambda df: {"read_json_records": len(df)},
            )
        )
    return out


def bench_format(fmt: str, path: Path, repeat: int) -> Result:
    """Time every contender on one file: ``repeat`` rounds, each contender once per
    round (so that all of them see the same spells of load), best round kept."""
    res = Result(fmt, path, path.stat().st_size)
    print(f"{fmt}: {path.name} ({res.size / 1e6:.1f} MB)", flush=True)
    frame = read_lines(path)[0]
    payloads = None
    if fmt == "metaseq":
        payloads = path.with_suffix(".payloads.jsonl")
        base.extract_payloads(path, payloads)
    try:
        for k in range(repeat):
            for name, call, count in _contenders(fmt, path, frame, payloads):
                if name in res.errors:
                    continue
                try:
                    wall, cpu, out = timed(call)
                except Exception as exc:  # a parser being written must not stop the rest
                    res.errors[name] = f"{type(exc).__name__}: {exc}"
                    continue
                res.counts.update(count(out))
                del out
                if wall < res.seconds.get(name, float("inf")):
                    res.seconds[name], res.cpu[name] = wall, cpu
                print(f"  round {k + 1} {name:<10} {wall:8.3f} s  cpu {cpu:8.3f} s", flush=True)
    finally:
        if payloads is not None:
            payloads.unlink()
    del frame
    for mode in ("parse", "read_log"):
        try:
            res.memory[mode] = child_memory(path, fmt, mode)
        except subprocess.CalledProcessError as exc:
            res.errors[f"memory {mode}"] = ((exc.stderr or "").strip().splitlines() or [""])[-1]
    return res


Row = tuple[str, str, float | None, float | None, str, bool | None]


def _ratio_rows(res: Result) -> list[Row]:
    """(check, logbook contender, wall ratio, cpu ratio, target text, pass) for a format."""
    rows: list[Row] = []
    checks = [("regex loop / logbook", "regex", True, TARGET_REGEX)]
    checks.append(("logbook / awk", "awk", False, TARGET_AWK))
    if res.fmt == "metaseq":
        checks.append(("read_json / logbook", "read_json", True, TARGET_READ_JSON))
    for who in ("parse", "read_log"):
        for check, other, slower, target in checks:
            wall = _ratio(res.seconds, who, other, slower)
            cpu = _ratio(res.cpu, who, other, slower)
            sign = ">=" if slower else "<="
            rows.append((check, who, wall, cpu, f"{sign} {target:g}", _ok(wall, target, slower)))
    for mode, label in (("parse", "read + parse"), ("read_log", "read_log")):
        m = res.memory.get(mode)
        r = m / res.size if m is not None else None
        ok = _ok(r, TARGET_MEMORY, False)
        rows.append(("peak memory / file size", label, r, None, f"<= {TARGET_MEMORY:g}", ok))
    return rows


def _ratio(s: dict[str, float], who: str, other: str, other_over_who: bool) -> float | None:
    if not s.get(who) or not s.get(other):
        return None
    return s[other] / s[who] if other_over_who else s[who] / s[other]


def _ok(ratio: float | None, target: float, at_least: bool) -> bool | None:
    if ratio is None:
        return None
    return ratio >= target if at_least else ratio <= target


def _num(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def report(results: list[Result], args: argparse.Namespace) -> str:
    """A markdown report of one run: machine, files, seconds, ratios with PASS/FAIL."""
    out = [
        f"command: `python -m bench.parse_bench --records {args.records} --repeat {args.repeat}"
        f" --megatron-variant {args.megatron_variant} --metaseq-variant {args.metaseq_variant}`",
        f"machine: {platform.machine()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}, polars {pl.__version__}; best of {args.repeat} rounds",
        "",
        "| format | file MB | lines | records | unrecognized | ignored | events | restarts |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        c = r.counts
        cols = ["lines", "records", "unrecognized", "ignored", "events", "restarts"]
        cells = " | ".join(str(c.get(k, "-")) for k in cols)
        out.append(f"| {r.fmt} | {r.size / 1e6:.1f} | {cells} |")
    out += ["", "| format | contender | wall s | cpu s |", "|---|---|---|---|"]
    for r in results:
        for name, wall in r.seconds.items():
            out.append(f"| {r.fmt} | {name} | {wall:.3f} | {r.cpu[name]:.3f} |")
    out += [
        "",
        "| format | check | logbook | ratio (wall) | ratio (cpu) | target | result |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results:
        for check, who, wall, cpu, target, ok in _ratio_rows(r):
            verdict = {True: "PASS", False: "FAIL", None: "n/a"}[ok]
            out.append(
                f"| {r.fmt} | {check} | {who} | {_num(wall)} | {_num(cpu)} | {target} | {verdict} |"
            )
    for r in results:
        out += [f"- {r.fmt} {k}: {v}" for k, v in sorted(r.errors.items())]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--formats", nargs="+", choices=list(GENERATORS), default=list(GENERATORS))
    ap.add_argument("--megatron-variant", choices=gen_megatron.VARIANTS, default="deepspeed")
    ap.add_argument("--metaseq-variant", choices=gen_metaseq.VARIANTS, default="plain")
    ap.add_argument("--data", type=Path, default=DATA, help="where generated logs are kept")
    ap.add_argument("--json", type=Path, help="also write the measurements here")
    args = ap.parse_args(argv)
    if args.records < 1 or args.repeat < 1:
        ap.error("--records and --repeat must be at least 1")
    args.data.mkdir(parents=True, exist_ok=True)
    variants = {"megatron": args.megatron_variant, "metaseq": args.metaseq_variant}
    files = {f: data_file(f, args.records, args.data, variants[f]) for f in args.formats}
    results = [bench_format(f, files[f], args.repeat) for f in args.formats]
    text = report(results, args)
    print("\n" + text)
    if args.json:
        rows = [{**r.__dict__, "path": str(r.path)} for r in results]
        with atomic_open(args.json, "w") as fh:
            fh.write(json.dumps(rows, indent=1, sort_keys=True) + "\n")
    failed = any(ok is False for r in results for *_, ok in _ratio_rows(r))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
