"""The one table from failures to what the user sees: a one-line error, a fix hint, an exit code.

Every command is wrapped by :func:`handle_errors`; Click's own usage errors, an interrupt and a broken pipe
go through :class:`Group`. Nothing reaches the user as a traceback.

Exit codes (docs/cli.md, ``eaglehub --help``): 0 ok, 1 a check ran and failed, 2 a usage or input error,
130 interrupted (SIGINT, Ctrl-C) and 143 terminated (SIGTERM), as a shell reports a command a signal
stopped, and 141 when the reader of the output went away (a broken pipe, as ``| head`` does), silently.
With ``--json`` an error is also printed on stdout as one JSON object (schemas/error.schema.json).
"""

from __future__ import annotations

import errno
import functools
import json
import signal
import sys
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

import click

from eaglehub.cli.exits import (
    EXIT_BROKEN_PIPE,
    EXIT_CODES_HELP,
    EXIT_INTERRUPTED,
    Run,
    exit_broken_pipe,
    exit_watchdog,
    install_stop_handlers,
    interrupt_exit_code,
    stdout_broken,
)
from eaglehub.errors import EaglehubError

F = TypeVar("F", bound=Callable[..., Any])

#: optional packages → the extra that installs them (pyproject.toml [project.optional-dependencies])
EXTRAS = {
    "torch": "torch",
    "transformers": "torch",
    "compressed_tensors": "quant",
    "vllm": "vllm-cpu",
    "gguf": "smollm2",
    "accelerate": "smollm2",
}


def _json_error(message: str, hint: str | None, code: int, finding: str | None = None) -> None:
    from eaglehub.findings import printable

    obj = {"kind": "error", "error": printable(message), "hint": printable(hint) if hint else None, "exit_code": code}
    if finding:
        obj["code"] = finding
    try:
        click.echo(json.dumps(obj))
        sys.stdout.flush()
    except OSError:  # stdout itself is what failed: the text on stderr still says it
        pass


def fail(message: str, hint: str | None, code: int, finding: str | None = None, as_json: bool = True) -> NoReturn:
    """The one-line error and its hint on stderr, with ``--json`` also the JSON object on stdout (``as_json``
    false: stdout already holds the report), then exit ``code``."""
    # imported here: `eaglehub --version` / `--help` import this module and need no rich
    from rich.markup import escape

    from eaglehub.cli.output import err_console
    from eaglehub.findings import printable

    if Run.json_errors and as_json:
        _json_error(message, hint, code, finding)
    # escape(): messages carry paths and package names like `vllm[cpu]` that rich would eat as markup
    err_console.print(f"[bold red]error:[/] {escape(printable(message))}", highlight=False, soft_wrap=True)
    if hint:
        err_console.print(f"[dim]hint: {escape(printable(hint))}[/]", highlight=False, soft_wrap=True)
    sys.exit(code)


def _interrupted() -> NoReturn:
    from eaglehub.cli.output import err_console

    code = interrupt_exit_code()
    what = "interrupted (SIGINT)" if code == EXIT_INTERRUPTED else "terminated (SIGTERM)"
    if Run.json_errors:
        _json_error(what, None, code)
    try:
        err_console.print(f"[bold red]{what}[/]", highlight=False)
    except OSError:
        pass
    sys.exit(code)


def handle_errors(fn: F) -> F:
    """Turn EaglehubError into a one-line error plus hint, never a traceback; an output stream that
    cannot be written (a full disk) is one line too, and so is a missing optional package (the hint
    names the extra that installs it). A closed pipe on stdout ends the run quietly (exit 141)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if kwargs.get("as_json"):
            Run.json_errors = True
        try:
            return fn(*args, **kwargs)
        except EaglehubError as exc:
            # a report already printed on stdout (--json) is not followed by a second JSON document
            fail(exc.message, exc.hint, exc.exit_code, exc.code, not getattr(exc, "shown", False))
        except ModuleNotFoundError as exc:
            top = (exc.name or "").split(".")[0]
            if top not in EXTRAS:
                raise
            extra = EXTRAS[top]
            fail(
                f"this command needs the package {top}, which is not installed",
                f"pip install 'eaglehub[{extra}]'",
                2,
            )
        except OSError as exc:  # mostly output (reads raise EaglehubError); a path the OS refuses outright too
            if exc.errno == errno.EPIPE and stdout_broken():
                exit_broken_pipe()
            if exc.errno == errno.ENAMETOOLONG:
                fail(f"a path is too long: {exc.strerror}", "shorten the file or directory names given", 2)
            fail(
                f"cannot write the output: {exc.strerror or exc}",
                "check the disk or the pipe the output goes to",
                2,
            )
        except (RuntimeError, ValueError) as exc:
            # pathlib's own refusals of a path argument, before any eaglehub check sees it
            if "home directory" in str(exc) or "null byte" in str(exc):
                fail(
                    f"unusable path: {exc}",
                    "give a plain path (no ~user of an unknown user, no NUL character)",
                    2,
                )
            raise

    return wrapper  # type: ignore[return-value]  # functools.wraps keeps the signature F describes


class Group(click.Group):
    """Click's usage errors as eaglehub's own errors (one line and a hint, exit 2); an interrupt, a
    termination and a broken pipe as their own exit codes (module doc), listed under its --help."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("epilog", EXIT_CODES_HELP)
        super().__init__(*args, **kwargs)

    def main(self, args: Any = None, *rest: Any, **kwargs: Any) -> Any:
        # the process's own command line only: a caller that passes args (CliRunner) keeps its signal handlers
        as_process = args is None
        argv = list(sys.argv[1:] if args is None else args)
        argv = argv[: argv.index("--")] if "--" in argv else argv
        Run.json_errors, Run.stop_signal = "--json" in argv, None
        previous = install_stop_handlers() if as_process else {}
        kwargs["standalone_mode"] = False
        try:
            result = self._main(args, *rest, **kwargs)
            if stdout_broken():
                exit_broken_pipe()
            return result
        except SystemExit as exc:
            # what is still buffered for a reader that went away: the interpreter's own flush would print a
            # traceback-like "Exception ignored" and exit 120
            if exc.code != EXIT_BROKEN_PIPE and stdout_broken():
                exit_broken_pipe()
            if as_process and Run.stop_signal is not None:
                exit_watchdog(interrupt_exit_code())
            raise
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def _main(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().main(*args, **kwargs)
        except click.exceptions.NoArgsIsHelpError as exc:  # bare `eaglehub`: the help, as click itself prints it
            click.echo(exc.ctx.get_help())
            sys.exit(2)
        except click.UsageError as exc:
            cmd = exc.ctx.command_path if exc.ctx else "eaglehub"
            fail(exc.format_message(), getattr(exc, "hint", None) or f"see `{cmd} --help`", 2)
        except click.Abort as exc:
            if isinstance(exc.__cause__, KeyboardInterrupt) or Run.stop_signal is not None:
                _interrupted()
            if isinstance(exc.__cause__, EOFError):
                fail("the input ended before an answer was read", "give the answer as an option instead", 2)
            fail("aborted", None, 2)
        except KeyboardInterrupt:  # raised outside click's own handling
            _interrupted()

    # click turns a broken pipe into exit 1 itself (core.py, BaseCommand.main): caught here first, where --help
    # and the commands write
    def make_context(self, *args: Any, **kwargs: Any) -> click.Context:
        try:
            return super().make_context(*args, **kwargs)
        except OSError as exc:
            _raise_unless_pipe(exc)
            raise

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except OSError as exc:
            _raise_unless_pipe(exc)
            raise


def _raise_unless_pipe(exc: OSError) -> None:
    if exc.errno == errno.EPIPE and stdout_broken():
        exit_broken_pipe()
