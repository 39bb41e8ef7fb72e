"""Execute a publish plan: one commit, parent pinned, a pull request by default.

Order: ``whoami`` (a clear error before anything is written when the token is missing or
invalid), ``create_repo`` when the plan found none (``exist_ok=False``: a repo that appeared since
the plan is a changed plan), a re-read of the revision's head (a moved head fails here, before any
upload: a pull request opened from a stale parent would otherwise succeed quietly), then one
``create_commit`` with every addition and deletion and ``parent_commit`` = the planned head (the
Hub answers 412 when a branch moved in between), then ``create_tag`` on the new commit. ``--tag``
is checked in the plan and again with the head (``list_repo_refs``); a tag another writer creates
in the last moment still fails ``create_tag`` after the commit landed, and the error says so (the
commit's oid and URL, only the tag missing). Never
``upload_folder``: with xet it is a multi-commit pipeline (docs/publishing.md §1).
"""

from __future__ import annotations

from eaglehub.errors import EaglehubError
from eaglehub.io.hub import StaleParentError, hub_errors
from eaglehub.publish.plan import Plan, PublishOptions, remote_tags, tag_exists_error


def execute(plan: Plan, opts: PublishOptions, api, endpoint: str, token: str | None) -> dict:
    """Publish ``plan``; returns the ``result`` section (commit oid and URL, pull request URL and
    number, the revision the files landed on, the tag).

    Raises: EaglehubError / StaleParentError from :func:`~eaglehub.io.hub.hub_errors`;
        EaglehubError (exit 1) when ``opts.tag`` appeared since the plan (nothing sent), or when
        ``create_tag`` fails after the commit (which landed: the message gives its oid and URL).
    """
    from huggingface_hub import CommitOperationAdd, CommitOperationDelete

    doc = plan.doc
    with hub_errors(opts.repo, opts.revision, endpoint, token, writing=True):
        api.whoami()
        parent = doc["parent_commit"]
        if not doc["repo"]["exists"]:
            api.create_repo(opts.repo, private=opts.private, exist_ok=False)
            parent = api.repo_info(opts.repo, revision=opts.revision).sha
        else:
            head = api.repo_info(opts.repo, revision=opts.revision).sha
            if head != parent:
                raise StaleParentError(
                    f"{opts.repo}@{opts.revision} moved since the plan was made (planned parent "
                    f"{parent}, now {head}); nothing was changed",
                    hint="re-run `eaglehub publish` (with --dry-run first) to plan against the new head",
                    exit_code=1,
                )
            tags = remote_tags(api, opts.repo) if opts.tag else {}
            if opts.tag in tags:
                raise tag_exists_error(opts.repo, opts.tag, tags[opts.tag], dry_run=False)
        ops: list[CommitOperationAdd | CommitOperationDelete] = [
            CommitOperationAdd(path_in_repo=rel, path_or_fileobj=c if isinstance(c, bytes) else str(c))
            for rel, c in plan.contents.items()
        ]
        ops += [CommitOperationDelete(path_in_repo=rel) for rel in plan.deletions]
        if not ops:
            if opts.tag:  # the files are there already: the tag names that commit
                api.create_tag(opts.repo, tag=opts.tag, revision=parent)
            return {
                "commit_oid": None,
                "commit_url": None,
                "pr_url": None,
                "pr_num": None,
                "revision": opts.revision,
                "tag": opts.tag,
                "note": f"every file is already on the Hub unchanged: no commit (head {parent})",
            }
        message = (
            opts.message
            or f"Publish {doc['source'].rstrip('/').rsplit('/', 1)[-1]} with eaglehub {doc['tool']['version']}"
        )
        al = doc["gate"]["verify"]["acceptance_length"]
        description = (
            f"Verified: AL {al:.3f} (k = {doc['card']['num_speculative_tokens']}), see eaglehub-verify.json."
            if al is not None
            else "Published with --force: not verified."
        )
        info = api.create_commit(
            opts.repo,
            ops,
            commit_message=message,
            commit_description=description,
            revision=opts.revision,
            create_pr=opts.create_pr,
            parent_commit=parent,
        )
        if opts.tag:
            _tag_landed_commit(api, opts, info, endpoint, token)
    return {
        "commit_oid": info.oid,
        "commit_url": info.commit_url,
        "pr_url": info.pr_url,
        "pr_num": info.pr_num,
        "revision": info.pr_revision or opts.revision,
        "tag": opts.tag,
        "note": None,
    }


def _tag_landed_commit(api, opts: PublishOptions, info, endpoint: str, token: str | None) -> None:
    """``create_tag`` on the commit ``info`` just made; a failure says that the commit landed.

    Raises: EaglehubError (exit 1, or the Hub error's own exit code for 401 / 403): the tag failed.
    """
    try:
        with hub_errors(opts.repo, opts.revision, endpoint, token, writing=True):
            api.create_tag(opts.repo, tag=opts.tag, revision=info.oid)
    except EaglehubError as exc:
        where = info.pr_revision or opts.revision
        raise EaglehubError(
            f"the commit landed on {opts.repo}@{where} ({info.oid}, {info.commit_url}) but tagging it "
            f"{opts.tag!r} failed: {exc.message}",
            hint=f"the files are published: tag that commit with a free name, "
            f"`hf repos tag create {opts.repo} TAG --revision {info.oid}`",
            exit_code=exc.exit_code,
        ) from None
