"""Output paths and server URLs checked while the options are parsed, before any model, engine or download starts."""

from __future__ import annotations

import shlex
from collections.abc import Callable
from typing import Any

import click


class OutputPathError(click.BadParameter):
    """An output path refused before the command starts; ``hint`` replaces the generic "see --help"."""

    hint = "give a path whose existing parent is a directory you can write (missing directories are created)"


def output_path(kind: str = "file") -> Callable[[click.Context, click.Parameter, Any], Any]:
    """A Click callback that refuses an output path that cannot be written (:func:`eaglehub.io.atomic.output_problem`:
    a parent that is a file, a directory that cannot be written, a directory in a file's place) while the
    options are parsed, before any model, engine or download starts: an hour's run is not lost to a typo."""

    def check(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
        from eaglehub.io.atomic import output_problem

        if value is None or ctx.resilient_parsing:
            return value
        problem = output_problem(value, kind)
        if problem is not None:
            raise OutputPathError(problem, ctx=ctx, param=param)
        return value

    return check


def server_url(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A server given as host:port (no scheme) is taken as http://host:port, as curl does; any scheme but
    http and https is refused (exit 2) with the option as it should read."""
    if value is None or ctx.resilient_parsing:
        return value
    value = value.strip()
    if "://" not in value:
        return "http://" + value
    scheme, rest = value.split("://", 1)
    if scheme.lower() not in ("http", "https"):
        flag = param.opts[0] if param.opts else "--endpoint"
        error = click.BadParameter(
            f"{value}: eaglehub reads a vLLM or SGLang server over http or https, not {scheme}", ctx=ctx, param=param
        )
        error.hint = f"eaglehub {ctx.info_name} {flag} {shlex.quote('http://' + rest)}"  # type: ignore[attr-defined]
        raise error
    return value
