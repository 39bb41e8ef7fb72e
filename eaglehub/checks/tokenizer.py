"""Tokenizer and chat-template checks of a drafter against its target."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from eaglehub.checks.context import Context
from eaglehub.drafter.canonical import Drafter
from eaglehub.findings import Finding, finding
from eaglehub.io import jsonio


def _token_ids(v) -> set[int] | None:
    if isinstance(v, int) and not isinstance(v, bool):
        return {v}
    if isinstance(v, list) and v and all(isinstance(i, int) and not isinstance(i, bool) for i in v):
        return set(v)
    return None


def special_token_findings(ctx: Context) -> list[Finding]:
    """bos/eos ids the drafter's config states but the target does not use: a sign a converter rewrote them
    (docs/formats.md §8: ``speculators convert`` 0.9.0 turned 128000/128001 into 1/2). A note, not a fault: no
    engine reads a drafter's special-token ids (vLLM and SGLang stop on the target's ids; the drafter classes
    build no padding index), and the pad id is not compared at all (SpecForge's draft configs carry 0 whatever
    the target's). The target's ids are the union of its (text) config and ``generation_config.json``, since a
    target may list extra stop ids in one of them only (Qwen: ``<|im_end|>`` in generation_config)."""
    d, t = ctx.drafter, ctx.target
    assert t is not None  # check() runs these with a target only
    sources = [
        ("config.json", t.text_config),
        ("config.json", t.config),
        ("generation_config.json", t.side_json("generation_config.json") or {}),
    ]
    out = []
    for key in COMPARED_TOKEN_KEYS:
        mine = _token_ids(d.config.get(key))
        if mine is None:
            continue
        theirs, where = set(), []
        for name, cfg in sources:
            ids = _token_ids(cfg.get(key))
            if ids:
                theirs |= ids
                where.append(name)
        if theirs and not mine <= theirs:
            out.append(
                finding(
                    "I-TOKENS-SPECIAL",
                    key,
                    f"drafter {key} {d.config[key]} is not the target's {sorted(theirs)} "
                    f"({', '.join(dict.fromkeys(where))}): no engine reads it (they stop on the target's ids), "
                    "but a converter may have rewritten the config",
                )
            )
    return out


@dataclass(frozen=True)
class TokenizerFacts:
    """A ``tokenizer.json`` as the engine sees it: ``size`` = highest id + 1 (added tokens included),
    ``vocab`` token → id, and ``digest``, the sha256 of the (token, id) pairs and added-token flags,
    so two files that differ only in formatting or key order compare equal."""

    size: int
    vocab: dict[str, int]
    digest: str


@functools.lru_cache(maxsize=4)
def _tokenizer_facts_cached(path: str, mtime_ns: int, size: int) -> TokenizerFacts | None:
    from tokenizers import Tokenizer  # Rust library, no torch; imported only when a tokenizer is present

    try:
        tok = Tokenizer.from_file(path)
    except Exception:  # tokenizers raises a plain Exception for unreadable or unknown-format files
        return None
    vocab = tok.get_vocab(with_added_tokens=True)
    added = sorted((i, a.content, a.special) for i, a in tok.get_added_tokens_decoder().items())
    digest = hashlib.sha256(
        json.dumps([sorted(vocab.items(), key=lambda kv: (kv[1], kv[0])), added]).encode()
    ).hexdigest()
    return TokenizerFacts(max(vocab.values(), default=-1) + 1, vocab, digest)


def tokenizer_facts(path: Path) -> TokenizerFacts | None:
    """:class:`TokenizerFacts` of ``path`` (parsed once per file version), ``None`` if unreadable."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return _tokenizer_facts_cached(str(path), st.st_mtime_ns, st.st_size)


def tokenizer_findings(ctx: Context) -> list[Finding]:
    """E-TOKENIZER-SIZE: ids the target's tokenizer can produce must index the embedding table and the
    drafter's vocabulary (``t2d`` has ``vocab_size`` rows, vLLM scatters draft logits into a row of that
    width; docs/vllm.md §3, §14). Added tokens count, those of ``tokenizer_config.json``
    ``added_tokens_decoder`` too (transformers adds them on load). W-TOKENIZER-MISMATCH: every engine runs the
    draft on the target's token ids (docs/vllm.md §8; SGLang's one tokenizer is the served model's), so a different tokenizer shipped with the drafter
    means its token ids were learned for another vocabulary (F25)."""
    d, t = ctx.drafter, ctx.target
    assert t is not None  # check() runs these with a target only
    path = t.files.get(TOKENIZER_FILE)
    facts = tokenizer_facts(path) if path else None
    if facts is None:
        return []
    size, extra = facts.size, ""
    decoder = (t.side_json("tokenizer_config.json") or {}).get("added_tokens_decoder")
    if (
        isinstance(decoder, dict)
        and (ids := [int(k) for k in decoder if k.isascii() and k.isdigit() and len(k) < 19])
        and max(ids) + 1 > size
    ):
        size, extra = max(ids) + 1, f"; tokenizer_config.json added_tokens_decoder adds ids up to {max(ids)}"
    out = []
    vocabs = [("vocab_size", "the drafter", d.dims.V)]
    if t.vocab != d.dims.V:  # E-VOCAB-MISMATCH already; the target's own table is then checked too
        vocabs.append(("target vocab_size", "the target", t.vocab))
    for subject, whose, vocab in vocabs:
        if vocab is not None and size > vocab:
            out.append(
                finding(
                    "E-TOKENIZER-SIZE",
                    subject,
                    f"the target's tokenizer produces ids up to {size - 1} ({len(facts.vocab)} tokens in tokenizer.json, added "
                    f"tokens included{extra}) but {whose} has vocab_size {vocab}: ids >= {vocab} fall past the embedding "
                    "table and the drafter's vocabulary",
                )
            )
    own = Path(d.path) / TOKENIZER_FILE
    mine = tokenizer_facts(own) if own.is_file() else None
    if mine is not None and mine.digest != facts.digest:
        differ = len(set(mine.vocab.items()) ^ set(facts.vocab.items()))
        out.append(
            finding(
                "W-TOKENIZER-MISMATCH",
                TOKENIZER_FILE,
                f"the drafter's tokenizer.json ({len(mine.vocab)} tokens) is not the target's ({len(facts.vocab)} tokens; "
                f"{differ} token/id pairs differ"
                + (")" if differ else ", added-token flags differ)")
                + ": no engine reads the drafter's tokenizer (vLLM and SGLang draft on the target's token ids), so a "
                "drafter trained with this one predicts other token ids",
            )
        )
    return out


def template_findings(ctx: Context) -> list[Finding]:
    """F25: the drafter's record of the chat template its training data was rendered with
    (``training.json`` / ``eaglehub.json`` ``chat_template_sha256``: sha256 of the template string,
    utf-8) against the target's current one (:meth:`TargetInfo.chat_template`). A changed template
    changes the token stream served, and acceptance drops (z-lab/dflash #60: ~9.5 → ~3 accepted)."""
    rec = drafter_record(ctx.drafter, TEMPLATE_KEY)
    if rec is None or not isinstance(rec[0], str) or not SHA256_HEX.fullmatch(rec[0].strip().lower()):
        return []  # no record, or not a sha256: nothing to compare with (a malformed record is not a template change)
    recorded, where = rec[0].strip().lower(), rec[1]
    assert ctx.target is not None  # check() runs these with a target only
    current = ctx.target.chat_template()
    if current is None:
        return [
            finding(
                "W-TEMPLATE-CHANGED",
                "chat_template",
                f"the drafter's training data was rendered with chat template sha256 {recorded[:12]}… ({where}), "
                "but the target has no chat template now",
            )
        ]
    digest = hashlib.sha256(
        current[0].encode("utf-8", "surrogatepass")
    ).hexdigest()  # a lone surrogate cannot match, must not crash
    if digest == recorded:
        return []
    return [
        finding(
            "W-TEMPLATE-CHANGED",
            "chat_template",
            f"the drafter's training data was rendered with chat template sha256 {recorded[:12]}… ({where}), the "
            f"target's current template ({current[1]}) hashes to {digest[:12]}…: served prompts are not the token "
            "stream the drafter learned",
        )
    ]


TOKENIZER_FILE = "tokenizer.json"


#: sha256 (hex) of the chat-template string the training data was rendered with (F25)
TEMPLATE_KEY = "chat_template_sha256"


SHA256_HEX = re.compile(r"[0-9a-f]{64}")


#: the ids a rewritten config shows in (the pad id differs between producers by design: SpecForge writes 0)
COMPARED_TOKEN_KEYS = ("bos_token_id", "eos_token_id")


def drafter_record(d: Drafter, key: str) -> tuple[object, str] | None:
    """``(value, file)`` of ``key`` at the top level of the drafter's ``training.json``, else of its
    ``eaglehub.json`` (as read with the drafter, read-only); ``None`` when neither records it. An
    unreadable ``training.json`` counts as absent: it is an optional record, not part of the drafter."""
    for name, data in (
        (TRAINING_FILE, jsonio.read_object(Path(d.path) / TRAINING_FILE)),
        (PROVENANCE_FILE, d.provenance),
    ):
        if isinstance(data, dict) and data.get(key) is not None:
            return data[key], name
    return None


#: the drafter's training record (written by its trainer, e.g. fixtures/smollm2-eagle3-recipe/export.py)
TRAINING_FILE = "training.json"


#: eaglehub's provenance file, also searched (read-only) for the keys below
PROVENANCE_FILE = "eaglehub.json"
