"""A Hugging Face Hub-compatible HTTP server for tests (docs/publishing.md §3), on 127.0.0.1:0.

It implements the endpoints huggingface_hub 2.4.0 calls for whoami, create_repo, the README YAML
check, preupload (every file ``regular``, which keeps LFS and xet out), create_commit (NDJSON,
``parentCommit``, ``create_pr`` opening ``refs/pr/N``), create_branch / create_tag, repo info,
tree, refs, file downloads (``resolve``) and model search (``/api/models``: ``filter`` tags, all of
which must match, ``search``, ``author``, ``limit``, ``expand``), so the real client runs end to end
over HTTP. A repo's tags, card data and config are read from its head commit as the Hub derives
them: the card's ``tags``, and for every ``base_model`` the model-tree tags ``base_model:<id>`` and
``base_model:<relation>:<id>``, the relation being the card's ``base_model_relation`` or, as the
Hub infers it, ``adapter`` (an ``adapter_config.json``), ``quantized`` (a ``quantization_config`` in
config.json, or GGUF files), ``merge`` (several base models), else ``finetune``. State is
in memory: repos → refs (branches, tags, ``refs/pr/N``) → commits → files. Every request is logged
(:attr:`FakeHub.log`); :meth:`FakeHub.fail` makes the next matching request fail with a status
(401 / 403 / 409 / 412 / 500), :meth:`FakeHub.before` runs a hook before a route is served (e.g.
move a branch between a plan and its commit). Tokens: ``hf_write_*`` may write, ``hf_read_*`` may
only read, anything else is refused (401).
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit

import pytest
import yaml

USER = "tester"
ORGS = ("org",)


def git_oid(data: bytes) -> str:
    """Git blob id, as the Hub reports it for a regular (non-LFS) file."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@dataclass
class Commit:
    oid: str
    parent: str | None
    message: str
    files: dict[str, bytes]


@dataclass
class Repo:
    repo_id: str
    private: bool
    refs: dict[str, str] = field(default_factory=dict)  # branch / "refs/pr/N" → commit oid
    tags: dict[str, str] = field(default_factory=dict)
    commits: dict[str, Commit] = field(default_factory=dict)
    prs: int = 0

    def resolve(self, rev: str) -> str | None:
        if rev in self.refs:
            return self.refs[rev]
        if rev in self.tags:
            return self.tags[rev]
        if rev in self.commits:
            return rev
        hits = [oid for oid in self.commits if len(rev) >= 7 and oid.startswith(rev)]
        return hits[0] if len(hits) == 1 else None


class HubError(Exception):
    def __init__(self, status: int, message: str, code: str | None = None, extra: dict | None = None):
        super().__init__(message)
        self.status, self.message, self.code, self.extra = status, message, code, extra or {}


class FakeHub:
    """The server's state and controls; :attr:`url` is the endpoint to pass to ``HfApi``."""

    def __init__(self, orgs: tuple[str, ...] = ORGS):
        self.orgs = tuple(orgs)  # namespaces the test user may write to, besides its own
        self.repos: dict[str, Repo] = {}
        self.log: list[tuple[str, str]] = []  # (method, path), in arrival order
        self.bodies: list[bytes] = []  # every request body, to check what was sent (never a token)
        self.headers: list[dict] = []
        self._fail: list[tuple[str, int]] = []
        self._before: dict[str, list] = {}
        self._counter = 0
        self.lock = threading.RLock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    # --- controls -------------------------------------------------------------------------------

    def fail(self, route: str, status: int) -> None:
        """The next request of ``route`` (``whoami``, ``create``, ``preupload``, ``commit``, ``info``,
        ``tree``, ``resolve``, …) fails with ``status``."""
        self._fail.append((route, status))

    def before(self, route: str, hook) -> None:
        """Call ``hook(hub)`` once, before the next request of ``route`` is served."""
        self._before.setdefault(route, []).append(hook)

    def posts(self) -> list[str]:
        return [path for method, path in self.log if method == "POST"]

    def create(self, repo_id: str, files: dict[str, bytes] | None = None, private: bool = False) -> Repo:
        """A repo whose ``main`` has one commit with ``.gitattributes`` (as the Hub creates it) + ``files``."""
        with self.lock:
            repo = Repo(repo_id, private)
            self.repos[repo_id] = repo
            self._commit(
                repo,
                "main",
                None,
                "initial commit",
                {".gitattributes": b"*.safetensors filter=lfs\n", **(files or {})},
            )
            return repo

    def push(
        self, repo_id: str, files: dict[str, bytes], branch: str = "main", message: str = "concurrent change"
    ) -> str:
        """Commit ``files`` on ``branch`` from outside (another writer); returns the new oid."""
        with self.lock:
            repo = self.repos[repo_id]
            head = repo.refs[branch]
            return self._commit(repo, branch, head, message, {**repo.commits[head].files, **files})

    def files(self, repo_id: str, rev: str = "main") -> dict[str, bytes]:
        repo = self.repos[repo_id]
        return dict(repo.commits[repo.resolve(rev)].files)

    def _commit(self, repo: Repo, ref: str, parent: str | None, message: str, files: dict[str, bytes]) -> str:
        self._counter += 1
        oid = hashlib.sha1(f"{repo.repo_id}:{self._counter}:{message}".encode()).hexdigest()
        repo.commits[oid] = Commit(oid, parent, message, files)
        repo.refs[ref] = oid
        return oid

    # --- request handling -----------------------------------------------------------------------

    def handle(self, method: str, raw_path: str, headers, body: bytes) -> tuple[int, dict, bytes]:
        parts = urlsplit(raw_path)
        path, query = parts.path, parse_qs(parts.query)
        with self.lock:
            self.log.append((method, path))
            self.bodies.append(body)
            self.headers.append(dict(headers))
        route, args = _route(method, path)
        for hook in self._before.pop(route, []):
            hook(self)
        with self.lock:
            for i, (r, status) in enumerate(self._fail):
                if r == route:
                    del self._fail[i]
                    code = {412: None, 409: None}.get(status)
                    return _error(HubError(status, f"injected {status} for {route}", code))
            try:
                user = self._user(headers)
                return getattr(self, f"_r_{route}")(user, query, body, *args)
            except HubError as exc:
                return _error(exc)

    def _user(self, headers) -> dict | None:
        auth = headers.get("Authorization") or ""
        if not auth:
            return None
        token = auth.removeprefix("Bearer ")
        if token.startswith("hf_write_"):
            return {"name": USER, "role": "write"}
        if token.startswith("hf_read_"):
            return {"name": USER, "role": "read"}
        raise HubError(401, "Invalid credentials in Authorization header")

    def _repo(self, user, ns: str, name: str) -> Repo:
        repo = self.repos.get(f"{ns}/{name}")
        if repo is None or (repo.private and user is None):
            raise HubError(404, "Repository not found", "RepoNotFound")
        return repo

    def _writer(self, user, ns: str) -> None:
        if user is None:
            raise HubError(401, "You must be authenticated to write")
        if user["role"] != "write" or ns not in (USER, *self.orgs):
            raise HubError(403, f"You don't have the rights to write to {ns}")

    def _rev(self, repo: Repo, rev: str) -> str:
        oid = repo.resolve(unquote(rev))
        if oid is None:
            raise HubError(404, f"Invalid rev id: {unquote(rev)}", "RevisionNotFound")
        return oid

    def _r_unknown(self, user, query, body):
        raise HubError(404, "no such endpoint in the fake hub")

    def _r_whoami(self, user, query, body):
        if user is None:
            raise HubError(401, "Invalid credentials in Authorization header")
        return _json(
            {
                "type": "user",
                "name": user["name"],
                "orgs": [{"name": o} for o in self.orgs],
                "auth": {
                    "type": "access_token",
                    "accessToken": {"displayName": "test", "role": user["role"]},
                },
            }
        )

    def _r_create(self, user, query, body):
        doc = json.loads(body)
        ns = doc.get("organization") or (user or {}).get("name")
        self._writer(user, ns)
        repo_id = f"{ns}/{doc['name']}"
        if repo_id in self.repos:
            raise HubError(409, "You already created this model repo", extra={"url": f"{self.url}/{repo_id}"})
        self.create(repo_id, private=doc.get("visibility") == "private" or bool(doc.get("private")))
        return _json({"url": f"{self.url}/{repo_id}", "name": repo_id})

    def _r_validate_yaml(self, user, query, body):
        content = json.loads(body).get("content", "")
        errors = []
        match = re.match(r"^---\n(.*?)\n---\n", content, re.S)
        if match:
            try:
                meta = yaml.safe_load(match.group(1))
                if not isinstance(meta, dict):
                    errors.append({"message": "metadata is not a mapping"})
            except yaml.YAMLError as exc:
                errors.append({"message": str(exc)})
        status, headers, data = _json({"errors": errors, "warnings": []})
        return (400 if errors else status), headers, data  # the Hub answers 400 Bad Request with the errors

    def _r_preupload(self, user, query, body, ns, name, rev):
        repo = self._repo(user, ns, name)
        self._writer(user, ns)
        files = self.repos[repo.repo_id].commits[self._rev(repo, rev)].files
        out = [
            {
                "path": f["path"],
                "uploadMode": "regular",
                "shouldIgnore": False,
                "oid": git_oid(files[f["path"]]) if f["path"] in files else None,
            }
            for f in json.loads(body)["files"]
        ]
        return _json({"files": out, "commitOid": self._rev(repo, rev)})

    def _r_commit(self, user, query, body, ns, name, rev):
        repo = self._repo(user, ns, name)
        self._writer(user, ns)
        ref = unquote(rev)
        head = self._rev(repo, rev)
        lines = [json.loads(line) for line in body.splitlines() if line.strip()]
        header = next(item["value"] for item in lines if item["key"] == "header")
        parent = header.get("parentCommit")
        if parent is not None and repo.resolve(parent) is None:
            raise HubError(404, f"Invalid parent commit {parent}", "RevisionNotFound")
        create_pr = query.get("create_pr") == ["1"]
        if create_pr and ref not in repo.refs:
            raise HubError(404, f"{ref} is not a branch", "RevisionNotFound")
        if parent is not None and not create_pr and repo.resolve(parent) != head:
            raise HubError(
                412,
                f"A commit has happened since. Please refresh and try again. (parent {parent}, head {head})",
            )
        base = repo.resolve(parent) if parent is not None else head
        files = dict(repo.commits[base].files)
        for item in lines:
            value = item["value"]
            if item["key"] == "file":
                files[value["path"]] = base64.b64decode(value["content"])
            elif item["key"] == "deletedFile":
                files.pop(value["path"], None)
            elif item["key"] == "deletedFolder":
                files = {p: b for p, b in files.items() if not p.startswith(value["path"].rstrip("/") + "/")}
            elif item["key"] != "header":
                raise HubError(400, f"unsupported commit operation {item['key']}")
        pr_url = None
        if create_pr:
            repo.prs += 1
            target = f"refs/pr/{repo.prs}"
            pr_url = f"{self.url}/{repo.repo_id}/discussions/{repo.prs}"
        else:
            target = ref if ref in repo.refs else None
            if target is None:
                raise HubError(400, f"cannot commit to {ref}: not a branch")
        oid = self._commit(repo, target, base, header["summary"], files)
        return _json(
            {
                "commitUrl": f"{self.url}/{repo.repo_id}/commit/{oid}",
                "commitOid": oid,
                "pullRequestUrl": pr_url,
                "success": True,
            }
        )

    def _r_branch(self, user, query, body, ns, name, branch):
        repo = self._repo(user, ns, name)
        self._writer(user, ns)
        branch = unquote(branch)
        if branch in repo.refs:
            raise HubError(409, f"Reference {branch} already exists")
        start = (json.loads(body) if body else {}).get("startingPoint") or "main"
        repo.refs[branch] = self._rev(repo, start)
        return _json({})

    def _r_tag(self, user, query, body, ns, name, rev):
        repo = self._repo(user, ns, name)
        self._writer(user, ns)
        tag = json.loads(body)["tag"]
        if tag in repo.tags:
            raise HubError(409, f"Tag {tag} already exists")
        repo.tags[tag] = self._rev(repo, rev)
        return _json({})

    def _r_info(self, user, query, body, ns, name, rev="main"):
        repo = self._repo(user, ns, name)
        return _json(_expand(model_doc(repo, self._rev(repo, rev)), query))

    def _r_models(self, user, query, body):
        wanted = query.get("filter", [])
        search = (query.get("search") or [""])[0].lower()
        author = (query.get("author") or [None])[0]
        limit = int((query.get("limit") or [1000])[0])
        rows = []
        for repo in sorted(self.repos.values(), key=lambda r: r.repo_id):
            if repo.private and user is None:
                continue
            doc = model_doc(repo, repo.refs["main"])
            if all(t in doc["tags"] for t in wanted) and search in repo.repo_id.lower():
                if author is None or repo.repo_id.split("/")[0] == author:
                    rows.append(_expand(doc, query))
        return _json(rows[:limit])

    def _r_tree(self, user, query, body, ns, name, rev, prefix=""):
        repo = self._repo(user, ns, name)
        files = repo.commits[self._rev(repo, rev)].files
        prefix = unquote(prefix).strip("/")
        rows = [
            {"type": "file", "path": p, "size": len(b), "oid": git_oid(b)}
            for p, b in sorted(files.items())
            if not prefix or p.startswith(prefix + "/")
        ]
        return _json(rows)

    def _r_refs(self, user, query, body, ns, name):
        repo = self._repo(user, ns, name)
        branches = [
            {"name": n, "ref": f"refs/heads/{n}", "targetCommit": o}
            for n, o in repo.refs.items()
            if not n.startswith("refs/pr/")
        ]
        prs = [{"name": n, "ref": n, "targetCommit": o} for n, o in repo.refs.items() if n.startswith("refs/pr/")]
        tags = [{"name": n, "ref": f"refs/tags/{n}", "targetCommit": o} for n, o in repo.tags.items()]
        return _json({"branches": branches, "tags": tags, "converts": [], "pullRequests": prs})

    def _r_resolve(self, user, query, body, ns, name, rev, path, head=False):
        repo = self._repo(user, ns, name)
        oid = self._rev(repo, rev)
        files = repo.commits[oid].files
        path = unquote(path)
        if path not in files:
            raise HubError(404, f"Entry not found: {path}", "EntryNotFound")
        data = files[path]
        headers = {
            "X-Repo-Commit": oid,
            "ETag": f'"{git_oid(data)}"',
            "Content-Length": str(len(data)),
            "Content-Type": "application/octet-stream",
        }
        return 200, headers, b"" if head else data


def card_metadata(files: dict[str, bytes]) -> dict:
    """The YAML metadata of the repo's ``README.md`` ({} without one)."""
    match = re.match(r"^---\n(.*?)\n---\n", files.get("README.md", b"").decode("utf-8", "replace"), re.S)
    meta = yaml.safe_load(match.group(1)) if match else None
    return meta if isinstance(meta, dict) else {}


def model_tree_tags(meta: dict, files: dict[str, bytes], config: dict | None) -> list[str]:
    """``base_model:<id>`` and ``base_model:<relation>:<id>`` for every base model of the card."""
    bases = meta.get("base_model") or []
    bases = [bases] if isinstance(bases, str) else [b for b in bases if isinstance(b, str)]
    relation = meta.get("base_model_relation")
    if relation is None:
        if "adapter_config.json" in files:
            relation = "adapter"
        elif (config or {}).get("quantization_config") or any(p.endswith(".gguf") for p in files):
            relation = "quantized"
        else:
            relation = "merge" if len(bases) > 1 else "finetune"
    return [tag for b in bases for tag in (f"base_model:{b}", f"base_model:{relation}:{b}")]


def safetensors_info(files: dict[str, bytes]) -> dict | None:
    """Parameter counts by dtype from the safetensors headers, as the Hub reports them."""
    params: dict[str, int] = {}
    for path, data in files.items():
        if not path.endswith(".safetensors") or len(data) < 8:
            continue
        try:
            header = json.loads(data[8 : 8 + int.from_bytes(data[:8], "little")])
        except ValueError:  # a placeholder a test pushed: the Hub shows no parameters for it
            continue
        for key, t in header.items():
            if key != "__metadata__":
                n = 1
                for d in t["shape"]:
                    n *= d
                params[t["dtype"]] = params.get(t["dtype"], 0) + n
    return {"parameters": params, "total": sum(params.values())} if params else None


def model_doc(repo: Repo, oid: str) -> dict:
    """What the Hub's model API knows of ``repo`` at commit ``oid``."""
    files = repo.commits[oid].files
    meta = card_metadata(files)
    try:
        config = json.loads(files["config.json"]) if "config.json" in files else None
    except ValueError:
        config = None
    card_tags = meta.get("tags") or []
    tags = [t for t in ([card_tags] if isinstance(card_tags, str) else card_tags) if isinstance(t, str)]
    if any(p.endswith(".safetensors") for p in files):
        tags.append("safetensors")
    tags += model_tree_tags(meta, files, config)
    return {
        "id": repo.repo_id,
        "modelId": repo.repo_id,
        "author": repo.repo_id.split("/")[0],
        "sha": oid,
        "private": repo.private,
        "tags": list(dict.fromkeys(tags)),
        "cardData": meta or None,
        "config": config,
        "library_name": meta.get("library_name"),
        "pipeline_tag": meta.get("pipeline_tag"),
        "safetensors": safetensors_info(files),
        "siblings": [{"rfilename": p, "size": len(files[p])} for p in sorted(files)],
        "downloads": 0,
        "likes": 0,
    }


def _expand(doc: dict, query: dict) -> dict:
    """``doc`` narrowed to the ``expand`` properties asked for (the id always stays), as the Hub does."""
    wanted = query.get("expand") or query.get("expand[]")
    return doc if not wanted else {k: v for k, v in doc.items() if k in ("id", "modelId") or k in wanted}


def _route(method: str, path: str) -> tuple[str, tuple]:
    if path == "/api/models" and method == "GET":
        return "models", ()
    if path == "/api/whoami-v2":
        return "whoami", ()
    if path == "/api/repos/create" and method == "POST":
        return "create", ()
    if path == "/api/validate-yaml" and method == "POST":
        return "validate_yaml", ()
    m = re.fullmatch(r"/api/models/([^/]+)/([^/]+)(?:/(.*))?", path)
    if m:
        ns, name, rest = m.group(1), m.group(2), m.group(3) or ""
        head, _, tail = rest.partition("/")
        if method == "POST" and head in ("preupload", "commit", "branch", "tag"):
            return head, (ns, name, tail)
        if method == "GET" and head == "":
            return "info", (ns, name)
        if method == "GET" and head == "revision":
            return "info", (ns, name, tail)
        if method == "GET" and head == "tree":
            rev, _, prefix = tail.partition("/")
            return "tree", (ns, name, rev, prefix)
        if method == "GET" and head == "refs":
            return "refs", (ns, name)
    m = re.fullmatch(r"/([^/]+)/([^/]+)/resolve/([^/]+)/(.+)", path)
    if m and method in ("GET", "HEAD"):
        return "resolve", (*m.groups(), method == "HEAD")
    return "unknown", ()


def _json(obj) -> tuple[int, dict, bytes]:
    return 200, {"Content-Type": "application/json"}, json.dumps(obj).encode()


def _error(exc: HubError) -> tuple[int, dict, bytes]:
    headers = {"Content-Type": "application/json", "X-Error-Message": exc.message}
    if exc.code:
        headers["X-Error-Code"] = exc.code
    return exc.status, headers, json.dumps({"error": exc.message, **exc.extra}).encode()


def _handler(hub: FakeHub):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):  # quiet: the hub's own log is hub.log
            pass

        def _serve(self):
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            status, headers, data = hub.handle(self.command, self.path, self.headers, body)
            self.send_response(status)
            for k, v in headers.items():
                self.send_header(k, v)
            if "Content-Length" not in headers:
                self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)

        do_GET = do_POST = do_HEAD = do_PUT = do_DELETE = _serve

    return Handler


# --- pytest fixtures (import them into a test module: `from fakehub import fake_hub, hf_env`) -------

TOKEN = "hf_write_s3cr3t-t0ken-never-printed"


@pytest.fixture
def fake_hub():
    """A running :class:`FakeHub` (the test user may write to ``tester``, ``org``, ``eaglehub-fixtures``)."""
    hub = FakeHub(orgs=("org", "eaglehub-fixtures"))
    hub.thread.start()
    yield hub
    hub.server.shutdown()
    hub.server.server_close()


@pytest.fixture
def hf_env(tmp_path, monkeypatch):
    """huggingface_hub pointed at temporary directories (no real login, cache or endpoint is used),
    telemetry off, ``HF_TOKEN`` = :data:`TOKEN` (a write token of the fake hub). Returns the token."""
    from huggingface_hub import constants

    home = tmp_path / "hf-home"
    home.mkdir()
    for var in ("HF_OIDC_RESOURCE", "HF_ENDPOINT", "HUGGING_FACE_HUB_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HF_HOME", str(home))
    monkeypatch.setenv("HF_HUB_CACHE", str(home / "hub"))
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    # read once at import: point them at the temporary home too
    monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(home / "token"))
    monkeypatch.setattr(constants, "HF_STORED_TOKENS_PATH", str(home / "stored_tokens"))
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(home / "hub"))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "HF_HUB_DISABLE_TELEMETRY", True)
    return TOKEN


if __name__ == "__main__":  # a hub for trying `eaglehub publish --endpoint URL` by hand (state is lost on exit)
    hub = FakeHub(orgs=("org", "eaglehub-fixtures"))
    print(hub.url, flush=True)
    hub.server.serve_forever()
