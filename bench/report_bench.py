"""Report benchmark: ``logbook report`` against ``logbook detect`` on the same large log.

    python -m bench.report_bench [--records 1000000] [--variant deepspeed] [--repeat 2]
                                 [--write-results]

Generates (once, into ``bench/data/``, with ``bench.gen_megatron``) a Megatron log of
``--records`` training records, then runs each command end to end in a fresh
interpreter, as a user would (reading, detecting, and for the report drawing and
writing the HTML), and reports the best wall time of ``--repeat`` runs and the peak
resident memory of the process (``ru_maxrss``). Targets: report time < 2x detect time,
report peak memory < 2 GiB. ``--write-results`` replaces the ``## Report`` section of
``bench/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import gen_megatron
from logbook.atomic import atomic_open

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "bench" / "data"
RESULTS = ROOT / "bench" / "RESULTS.md"
TARGET_RATIO = 2.0
TARGET_PEAK = 2 * 1024**3
SECTION = "## Report"

# Runs one logbook command in this interpreter, then writes its exit code and peak RSS
# to the JSON file named by the first argument. The report command is registered here
# when the app does not list it.
_CHILD = """
import json, resource, sys
out = sys.argv[1]
from logbook import cli, cli_report
registered = cli._register
def register():
    registered()
    if not any(c.name == "report" for c in cli.app.registered_commands):
        cli_report.register(cli.app)
cli._register = register
sys.argv = ["logbook", *sys.argv[2:]]
code = 0
try:
    cli.main()
except SystemExit as e:
    code = e.code or 0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
with open(out, "w") as fh:
    json.dump({"code": code, "peak": peak}, fh)
"""


def data_file(records: int, variant: str) -> Path:
    """The benchmark log, generated on first use (same name as the parse benchmark's)."""
    path = DATA / f"megatron_{variant}_{records}.log"
    if not path.exists():
        DATA.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        tmp = path.with_suffix(".tmp")
        gen_megatron.generate(tmp, records, variant)
        tmp.replace(path)
        print(f"generated {path.name} in {time.perf_counter() - t0:.1f} s", flush=True)
    return path


def run_once(args: list[str]) -> tuple[float, int]:
    """Wall seconds and peak RSS (bytes) of one fresh ``logbook ARGS`` process."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    with tempfile.TemporaryDirectory() as tmp:
        stats = Path(tmp) / "stats.json"
        t0 = time.perf_counter()
        p = subprocess.run(
            [sys.executable, "-c", _CHILD, str(stats), *args],
            capture_output=True,
            text=True,
            env=env,
            cwd=ROOT,
        )
        seconds = time.perf_counter() - t0
        if not stats.exists():
            raise SystemExit(f"logbook {' '.join(args)} failed:\n{p.stderr[-2000:]}")
        info = json.loads(stats.read_text())
    if info["code"] not in (0, 1):  # detect exits 1 only with --fail-on
        raise SystemExit(f"logbook {' '.join(args)} exited {info['code']}:\n{p.stderr[-2000:]}")
    return seconds, int(info["peak"])


def best_of(args: list[str], repeat: int) -> tuple[float, int]:
    runs = [run_once(args) for _ in range(repeat)]
    return min(r[0] for r in runs), max(r[1] for r in runs)


def measure(records: int, variant: str, repeat: int) -> dict:
    log = data_file(records, variant)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "report.html"
        detect_s, detect_peak = best_of(["detect", str(log)], repeat)
        report_s, report_peak = best_of(["report", str(log), "-o", str(out)], repeat)
        size = out.stat().st_size
    return {
        "log": log.name,
        "log_bytes": log.stat().st_size,
        "records": records,
        "detect_s": detect_s,
        "detect_peak": detect_peak,
        "report_s": report_s,
        "report_peak": report_peak,
        "ratio": report_s / detect_s,
        "html_bytes": size,
        "repeat": repeat,
    }


def table(r: dict) -> str:
    gib = 1024**3
    ok_ratio = "yes" if r["ratio"] < TARGET_RATIO else "NO"
    ok_peak = "yes" if r["report_peak"] < TARGET_PEAK else "NO"
    return "\n".join(
        [
            f"Log: `{r['log']}` ({r['log_bytes'] / 1e6:.0f} MB, {r['records']:,} records); "
            f"best of {r['repeat']} fresh processes each; {platform.machine()}, "
            f"{os.cpu_count()} CPU(s), Python {platform.python_version()}.",
            "",
            "| command | wall time | peak RSS |",
            "|---|---:|---:|",
            f"| `logbook detect LOG` | {r['detect_s']:.1f} s | {r['detect_peak'] / gib:.2f} GiB |",
            f"| `logbook report LOG -o report.html` | {r['report_s']:.1f} s | "
            f"{r['report_peak'] / gib:.2f} GiB |",
            "",
            f"- report / detect time: **{r['ratio']:.2f}x** (target < {TARGET_RATIO:g}x: "
            f"{ok_ratio})",
            f"- report peak memory: **{r['report_peak'] / gib:.2f} GiB** (target < 2 GiB: "
            f"{ok_peak})",
            f"- HTML written: {r['html_bytes'] / 1e6:.1f} MB (target < 10 MB; 4.8 MB of it is the "
            "embedded plotly.js)",
        ]
    )


def write_section(body: str, command: str = "python -m bench.report_bench") -> None:
    """Replace (or append) the ``## Report`` section of RESULTS.md, leaving the others."""
    text = RESULTS.read_text() if RESULTS.exists() else "# Benchmark results\n"
    section = f"{SECTION}\n\n`{command}`\n\n{body}\n"
    if SECTION in text:
        head, rest = text.split(SECTION, 1)
        nxt = rest.find("\n## ")
        tail = rest[nxt + 1 :] if nxt >= 0 else ""
        text = head + section + ("\n" + tail if tail else "")
    else:
        text = text.rstrip("\n") + "\n\n" + section
    with atomic_open(RESULTS, "w") as fh:
        fh.write(text)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--variant", choices=gen_megatron.VARIANTS, default="deepspeed")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--write-results", action="store_true", help="update bench/RESULTS.md")
    args = ap.parse_args(argv)
    result = measure(args.records, args.variant, args.repeat)
    body = table(result)
    print(body)
    if args.write_results:
        given = sys.argv[1:] if argv is None else argv
        write_section(body, " ".join(["python -m bench.report_bench", *given]))
        print(f"updated {RESULTS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
