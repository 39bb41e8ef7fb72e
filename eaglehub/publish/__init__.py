"""``eaglehub publish``: put a validated, verified drafter on the Hugging Face Hub.

:mod:`.plan` gates the checkpoint and builds the plan (reads only), :mod:`.card` writes the
model card, :mod:`.upload` executes the plan in one pinned commit, :mod:`.hub` holds the token,
the client and the error mapping. :func:`publish` ties them together; its report is valid against
``schemas/publish-report.schema.json``.
"""

from __future__ import annotations

from eaglehub.io.hub import default_endpoint, get_token, make_api
from eaglehub.io.schemas import check_output
from eaglehub.publish.plan import PublishOptions, make_plan

__all__ = ["PublishOptions", "publish"]


def publish(opts: PublishOptions) -> dict:
    """Plan, and unless ``opts.dry_run`` execute, the publish of ``opts.src`` to ``opts.repo``.

    The token (:func:`~eaglehub.io.hub.get_token`) is only handed to the client; a dry run
    works without one for public repos and sends no POST.

    Raises:
        EaglehubError: the gate refuses (exit 1), the revision moved (exit 1), no token / no
            permission / repo or revision not found / endpoint unreachable (exit 2), other Hub errors (exit 1).
    """
    from eaglehub.errors import EaglehubError
    from eaglehub.io.source import REPO_ID
    from eaglehub.publish.upload import execute

    if not REPO_ID.match(opts.repo):
        raise EaglehubError(f"--repo {opts.repo!r} is not a Hub repo id", hint="pass ORG/NAME (letters, digits, - _ .)")
    endpoint = (opts.endpoint or default_endpoint()).rstrip("/")
    token = get_token()
    if not opts.dry_run and not token:  # before minutes of hashing and validation
        from eaglehub.io.hub import LOGIN_HINT

        raise EaglehubError("no Hugging Face token found: publishing needs one with write access", hint=LOGIN_HINT)
    api = make_api(endpoint, token)
    plan = make_plan(opts, api, endpoint, token)
    if not opts.dry_run:
        plan.doc["result"] = execute(plan, opts, api, endpoint, token)
    check_output(plan.doc, "publish-report", "publish report")
    return plan.doc
