"""The ``logbook`` command line. Commands live in small modules; this one wires them.

Exit codes: 0 done, 1 findings at or above ``--fail-on``, 2 bad usage or unreadable
input (a one-line message, never a traceback). ``LOGBOOK_DEBUG=1`` shows tracebacks.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys

# polars' allocator (jemalloc) reads its settings once, when polars loads, from this
# variable. Its default keeps freed memory for 10 s: a command that reads a large log
# block by block would hold on to every block it has let go. A quarter of a second
# gives it back as it goes, at no measured cost in speed. Not over a user's own setting,
# and not passed on to child processes.
_ALLOCATOR = "_RJEM_MALLOC_CONF"
_RELEASE = "dirty_decay_ms:250,muzzy_decay_ms:0"


def _prompt_release() -> None:
    if "polars" in sys.modules or _ALLOCATOR in os.environ:
        return
    os.environ[_ALLOCATOR] = _RELEASE
    try:
        import polars  # noqa: F401
    finally:
        del os.environ[_ALLOCATOR]


_prompt_release()

import typer  # noqa: E402

from logbook.errors import LogbookError  # noqa: E402

app = typer.Typer(
    name="logbook",
    help="Audit large-model training runs from their logs.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _register() -> None:
    from logbook import cli_detect, cli_parse, cli_replay, cli_report

    if app.registered_commands:  # main() called again in one process
        return
    for module in (cli_parse, cli_detect, cli_report, cli_replay):
        module.register(app)


class Terminated(BaseException):
    """SIGTERM, raised where the program is, so that temp files are cleaned up."""


def _on_sigterm(_signum, _frame) -> None:
    raise Terminated


def main() -> None:
    """Entry point of the ``logbook`` console script."""
    with contextlib.suppress(ValueError):  # (only the main thread may set handlers)
        signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        _register()
        app()  # click's standalone mode: usage errors exit 2 with a short message
    except LogbookError as exc:
        _fail(str(exc))
    except KeyboardInterrupt:
        _fail("interrupted", code=130)
    except Terminated:
        _fail("terminated", code=143)
    except Exception as exc:  # a bug: still one line, unless debugging
        if os.environ.get("LOGBOOK_DEBUG"):
            raise
        _fail(f"internal error: {type(exc).__name__}: {exc} (LOGBOOK_DEBUG=1 shows where)")


def run() -> None:
    """The console script: :func:`main`, then an exit that skips tearing the interpreter
    down (freeing a large run's buffers one by one, unloading modules): every output is
    written, closed and renamed by then, and the streams are flushed here."""
    code = 0
    try:
        main()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
        if not isinstance(exc.code, int | None):
            print(exc.code, file=sys.stderr)
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (BrokenPipeError, ValueError):  # a reader that went away (``| head``)
        code = code or 0
    from logbook.textio import remove_spools

    remove_spools()  # (exit handlers do not run on this exit)
    os._exit(code)


def _fail(message: str, code: int = 2) -> None:
    first = message.strip().splitlines()[0] if message.strip() else "failed"
    print(f"logbook: error: {first}", file=sys.stderr)
    sys.exit(code)


if __name__ == "__main__":  # ``python -m logbook.cli``: a plain exit
    main()
