"""The one exception type the CLI turns into a one-line error with a fix hint (never a traceback)."""

from __future__ import annotations


class EaglehubError(Exception):
    """A user-facing failure: ``message`` says what is wrong, ``hint`` how to fix it.

    ``exit_code`` is what the CLI exits with: 2 for usage errors (bad paths, bad options),
    1 for a check that ran and failed. ``code`` is set where the failure is about the *input's
    content* (a registered ``E-INPUT-*`` finding code of :mod:`eaglehub.findings`): ``validate``
    reports such errors as findings (about ``subject``) instead of stopping.
    """

    candidates: list[str]  # set on an ambiguous-format error only: the formats that matched

    def __init__(
        self,
        message: str,
        hint: str | None = None,
        exit_code: int = 2,
        code: str | None = None,
        subject: str | None = None,
    ):
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.exit_code = exit_code
        self.code = code
        self.subject = subject  # the file a coded error concerns (a finding's subject)

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message} (hint: {self.hint})"
