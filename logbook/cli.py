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


# ``logbook watch`` runs small queries every second for hours: polars' thread pool
# costs more CPU time there than it saves (measured: a sixth of each check). Its size
# is read once, when polars loads; a user's own setting stands.
_THREADS = "POLARS_MAX_THREADS"


def _prompt_release() -> None:
    if "polars" in sys.modules:
        return
    added = [k for k in (_ALLOCATOR, _THREADS) if k not in os.environ]
    if _ALLOCATOR in added:
        os.environ[_ALLOCATOR] = _RELEASE
    if _THREADS in added and sys.argv[1:2] == ["watch"]:
        os.environ[_THREADS] = "1"
    try:
        import polars  # noqa: F401
    finally:
        for k in added:
            os.environ.pop(k, None)


_prompt_release()

from typing import Annotated  # noqa: E402

import typer  # noqa: E402

from logbook.errors import LogbookError  # noqa: E402

DISTRIBUTION = "trainlogbook"  # the name on PyPI; the command and the package: logbook
HELP_WIDTH = 100  # help text wraps at the terminal's width, at most this

app = typer.Typer(
    name="logbook",
    help="Audit large-model training runs from their logs.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"max_content_width": HELP_WIDTH},
)


def version() -> str:
    """``trainlogbook <version>``: the installed distribution, as ``--version`` prints it."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    from logbook import __version__

    try:
        return f"{DISTRIBUTION} {installed(DISTRIBUTION)}"
    except PackageNotFoundError:  # run from a source tree that is not installed
        return f"{DISTRIBUTION} {__version__}"


def _print_version(value: bool) -> None:
    if value:
        typer.echo(version())
        raise typer.Exit(0)


@app.callback()
def _root(
    show_version: Annotated[
        bool,
        typer.Option(
            "--version",
            callback=_print_version,
            is_eager=True,
            help="Print the version and exit.",
        ),
    ] = False,
) -> None:
    """Audit large-model training runs from their logs."""


def _register() -> None:
    from logbook import (
        cli_audit,
        cli_compare,
        cli_detect,
        cli_parse,
        cli_replay,
        cli_report,
        cli_watch,
    )

    if app.registered_commands:  # main() called again in one process
        return
    modules = (cli_parse, cli_detect, cli_watch, cli_report, cli_replay, cli_compare, cli_audit)
    for module in modules:
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
        from logbook.executor import ray_argv

        _invoke(ray_argv(sys.argv[1:]))
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


def _invoke(args: list[str]) -> None:
    """Run the command line in click's non-standalone mode, so that every way it ends is
    ours to say: a usage error is one line and exit 2, a reader that closed the pipe
    (``| head``) is no error, and an exit code set by a command is kept."""
    command = typer.main.get_command(app)
    try:
        code = command.main(args=args, prog_name="logbook", standalone_mode=False)
    except BrokenPipeError:
        quiet_stdout()
        sys.exit(0)
    except Exception as exc:
        names = {cls.__name__ for cls in type(exc).__mro__}
        if "Abort" in names:
            _fail("interrupted", code=130)
        if "ClickException" not in names:
            raise
        ctx = getattr(exc, "ctx", None)
        if "NoArgsIsHelpError" in names and ctx is not None:  # ``logbook`` alone: its help
            typer.echo(ctx.get_help())
            sys.exit(2)
        hint = f" (see '{ctx.command_path} --help')" if "UsageError" in names and ctx else ""
        _fail(f"{exc.format_message()}{hint}", code=getattr(exc, "exit_code", 2))
    # a command's ``typer.Exit(n)`` comes back as n (commands themselves return None)
    sys.exit(code if isinstance(code, int) else 0)


def quiet_stdout() -> None:
    """After the reader of stdout went away: send what is left to /dev/null, so that the
    final flush raises nothing."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())


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
