"""The typed error tree the CLI turns into a one-line error with a fix hint (never a traceback).

``EaglehubError`` is the root; raise the subclass that says what went wrong, so the exit code
follows from the kind of failure (docs/architecture.md, "Errors"):

- :class:`UsageError` (exit 2): options that contradict each other or miss a companion.
- :class:`InputError` (exit 2): a path, file or repo that cannot be read as what it should be.
- :class:`CheckFailed` (exit 1): a check ran and the input failed it.
- :class:`EngineFailed` (exit 1): an engine (vLLM, the reference engine) could not run the job.
- :class:`EndpointError` (exit 1): a served endpoint did not answer as an OpenAI-compatible server
  with speculative decoding does (refused connection, timeout, an HTTP error status, no metrics).
- :class:`MissingDependency` (exit 2): an optional package a command needs is not installed.
"""

from __future__ import annotations


class EaglehubError(Exception):
    """A user-facing failure: ``message`` says what is wrong, ``hint`` how to fix it.

    ``exit_code`` is what the CLI exits with: 2 for usage errors (bad paths, bad options),
    1 for a check that ran and failed. ``code`` is set where the failure is about the *input's
    content* (a registered ``E-INPUT-*`` finding code of :mod:`eaglehub.findings`): ``validate``
    reports such errors as findings (about ``subject``) instead of stopping.
    """

    default_exit_code = 2
    candidates: list[str]  # set on an ambiguous-format error only: the formats that matched

    def __init__(
        self,
        message: str,
        hint: str | None = None,
        exit_code: int | None = None,
        code: str | None = None,
        subject: str | None = None,
    ):
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.exit_code = self.default_exit_code if exit_code is None else exit_code
        self.code = code
        self.subject = subject  # the file a coded error concerns (a finding's subject)

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message} (hint: {self.hint})"


class UsageError(EaglehubError):
    """Options that contradict each other, or one that needs a companion option."""


class InputError(EaglehubError):
    """An input that cannot be read as what the command expects."""


class CheckFailed(EaglehubError):
    """A check ran and the input failed it."""

    default_exit_code = 1


class EngineFailed(EaglehubError):
    """An engine could not run the job (a crash, a refused configuration, a timeout)."""

    default_exit_code = 1


class EndpointError(EngineFailed):
    """A served endpoint failed a request: refused or dropped connection, timeout, HTTP error status, a
    body that is not what an OpenAI-compatible server returns. The message names the URL path and status
    (never the API key); callers keep the requests already answered."""


class MissingDependency(EaglehubError):
    """An optional package the command needs is not installed; the hint names the extra."""
