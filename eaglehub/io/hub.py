"""The Hub client eaglehub's ``publish`` and drafter discovery share: the token, the client, and
huggingface_hub's errors as one-line :class:`~eaglehub.errors.EaglehubError` s with a fix hint.

The token comes from huggingface_hub's own sources, in its order (``get_token``: OIDC Trusted
Publishers when ``HF_OIDC_RESOURCE`` is set, then ``HF_TOKEN``, then the saved login); it is handed
to :class:`huggingface_hub.HfApi` and nowhere else, and every message built here passes through
:func:`scrub`, so it never reaches output, reports, cards or logs.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from eaglehub.errors import EaglehubError

LOGIN_HINT = (
    "set HF_TOKEN (CI: a repository secret, or Trusted Publishers with HF_OIDC_RESOURCE) or run `hf auth login`"
)


class StaleParentError(EaglehubError):
    """The revision moved after the plan was made: nothing was written (exit 1)."""


def default_endpoint() -> str:
    """huggingface_hub's configured endpoint (``HF_ENDPOINT``, read when it was imported)."""
    from huggingface_hub import constants

    return constants.ENDPOINT.rstrip("/")


def get_token() -> str | None:
    """The token huggingface_hub would use, or ``None`` when there is none.

    Raises: EaglehubError (exit 2): ``HF_OIDC_RESOURCE`` is set but the OIDC exchange failed.
    """
    from huggingface_hub import get_token as hf_get_token

    try:
        return hf_get_token()
    except Exception as exc:  # the OIDC exchange raises its own errors; opting in to OIDC is explicit
        raise EaglehubError(
            f"the OIDC token exchange failed ({type(exc).__name__})",
            hint="check HF_OIDC_RESOURCE and the job's `id-token: write` permission, or unset "
            "HF_OIDC_RESOURCE to use HF_TOKEN",
        ) from None


def make_api(endpoint: str, token: str | None):
    """``HfApi`` bound to ``endpoint`` (always explicit: ``HF_ENDPOINT`` is frozen at import) and ``token``
    (``False`` when there is none, so huggingface_hub does not look again and sends no header)."""
    from huggingface_hub import HfApi

    return HfApi(endpoint=endpoint, token=token if token else False)


def scrub(text: str, token: str | None) -> str:
    """``text`` with ``token`` (if any) replaced by ``***``; server messages are never trusted not to echo it."""
    return text.replace(token, "***") if token else text


def _server_line(exc) -> str:
    """The server's own reason, one short line (huggingface_hub puts it after the status line)."""
    msg = getattr(exc, "server_message", None) or ""
    return " ".join(str(msg).split())[:160]


@contextlib.contextmanager
def hub_errors(
    repo_id: str, revision: str, endpoint: str, token: str | None, writing: bool, offline: str | None = None
) -> Iterator[None]:
    """Map huggingface_hub / HTTP failures inside the block to one-line EaglehubErrors.

    401 → token missing or invalid; 403 → no write permission (or read access to a private repo);
    412 → :class:`StaleParentError`; 404 → repo or revision not found; a network failure → endpoint
    unreachable. ``writing``: whether the block writes (it words the 401/403 hints). ``offline``: the
    command that works without the Hub (``HF_HUB_OFFLINE=1 …``), added to the hint when it cannot be reached.
    """
    import httpx2
    from huggingface_hub.errors import (
        HfHubHTTPError,
        LocalTokenNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    ns = repo_id.split("/")[0]
    try:
        yield
    except EaglehubError as exc:
        exc.message, exc.hint = scrub(exc.message, token), exc.hint and scrub(exc.hint, token)
        raise
    except LocalTokenNotFoundError:
        raise EaglehubError("no Hugging Face token found", hint=LOGIN_HINT) from None
    except RevisionNotFoundError:
        raise EaglehubError(
            f"revision {revision!r} does not exist in {repo_id} on {endpoint}",
            hint="pass an existing branch with --revision, or drop it to publish to main",
        ) from None
    except RepositoryNotFoundError:
        raise EaglehubError(
            f"hub repo {repo_id} not found on {endpoint} (or not visible with this token)",
            hint="check the repo id; a private repo needs a token that can read it"
            + ("" if token else f"; {LOGIN_HINT}"),
        ) from None
    except HfHubHTTPError as exc:
        status = exc.response.status_code if exc.response is not None else None
        why = scrub(_server_line(exc), token)
        if status == 401:
            raise EaglehubError(
                f"the Hub at {endpoint} refused the token (401{': ' + why if why else ''})",
                hint=("no token was found: " if not token else "the token is invalid or expired: ") + LOGIN_HINT,
            ) from None
        if status == 403:
            raise EaglehubError(
                f"the token may not {'write to' if writing else 'read'} {repo_id} (403{': ' + why if why else ''})",
                hint=f"use a token with write access to {ns!r} (fine-grained tokens: grant 'write' on the repo "
                "or organisation)",
            ) from None
        if status == 412:
            raise StaleParentError(
                f"{repo_id}@{revision} moved since the plan was made (412{': ' + why if why else ''}); "
                "nothing was changed",
                hint="re-run `eaglehub publish` (with --dry-run first) to plan against the new head",
                exit_code=1,
            ) from None
        if status == 409:
            raise EaglehubError(
                f"conflict on {repo_id} (409{': ' + why if why else ''})",
                hint="a tag or branch of that name exists already: choose another --tag",
                exit_code=1,
            ) from None
        raise EaglehubError(
            f"the Hub at {endpoint} answered {status} for {repo_id}{': ' + why if why else ''}",
            hint="retry later; if it persists, check the endpoint (--endpoint, HF_ENDPOINT)",
            exit_code=1,
        ) from None
    except ValueError as exc:  # huggingface_hub's own refusals before sending (e.g. card metadata the Hub rejects)
        raise EaglehubError(
            f"huggingface_hub refused the request for {repo_id}: {scrub(' '.join(str(exc).split()), token)[:200]}",
            hint="report this as an eaglehub bug with the message above",
            exit_code=1,
        ) from None
    except httpx2.HTTPError as exc:  # connection refused, DNS, timeouts: transport-level
        raise EaglehubError(
            f"cannot reach the Hub at {endpoint} ({type(exc).__name__})",
            hint="check --endpoint / HF_ENDPOINT and the network" + (f"; without one: `{offline}`" if offline else ""),
        ) from None
