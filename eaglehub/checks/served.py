"""What each engine serves of a drafter paired with its target (``--target``), per judged profile: the
embedding table it uses (the drafter's own or the target's) and the context length it runs the drafter at
(F9, F13). :mod:`.target` runs these; they are here to keep that module small."""

from __future__ import annotations

from eaglehub.checks.context import Context, set_command
from eaglehub.checks.holds import Said, per_profile
from eaglehub.checks.tokenizer import drafter_record
from eaglehub.drafter.canonical import int_field
from eaglehub.errors import EaglehubError
from eaglehub.findings import Finding, finding
from eaglehub.io.tensorio import READ_CHUNK, TensorIndex
from eaglehub.profiles.reading import Reading
from eaglehub.profiles.registry import SGLANG

EMBED = "embed_tokens.weight"
#: longest training sequence in tokens (F13); only an explicit record counts, never a guess from batch settings
TRAIN_LENGTH_KEY = "max_seq_len"


def tensors_equal(a: TensorIndex, a_name: str, b: TensorIndex, b_name: str) -> bool:
    """Element-wise equality of two same-shape tensors, like ``torch.equal`` (NaN != NaN, -0 == +0),
    compared in row blocks of about :data:`READ_CHUNK` bytes so two big embedding tables
    ([V, H], often > 1 GB) are never in memory at once. Reads with numpy only (safetensors inputs)."""
    import numpy as np

    info = a.tensors[a_name]
    if not info.shape:
        return bool(np.array_equal(a.load_numpy(a_name), b.load_numpy(b_name)))
    rows = max(1, READ_CHUNK // max(1, info.nbytes // max(1, info.shape[0])))
    for start in range(0, info.shape[0], rows):
        if not np.array_equal(
            a.load_numpy(a_name, max_rows=rows, start_row=start),
            b.load_numpy(b_name, max_rows=rows, start_row=start),
        ):
            return False
    return True


def constant_value(index: TensorIndex, name: str) -> float | None:
    """The one value every element of ``name`` holds (an all-zero or constant table), else ``None``; read in row
    blocks like :func:`tensors_equal`, and a trained table differs within its first block, so it costs one block."""
    import numpy as np

    info = index.tensors[name]
    if not info.numel:
        return None
    rows = max(1, READ_CHUNK // max(1, info.nbytes // max(1, info.shape[0]))) if info.shape else 1
    first = None
    for start in range(0, info.shape[0] if info.shape else 1, rows):
        block = np.asarray(index.load_numpy(name, max_rows=rows, start_row=start))
        if first is None:
            first = block.flat[0]
        if not bool((block == first).all()):
            return None
    return float(first) if first is not None else None


#: SGLang's EAGLE-3 worker puts the target's embedding in place of the drafter's whenever the drafter's config
#: does not state a target_hidden_size other than its hidden_size (0.5.23 srt/speculative/eagle_worker_v2.py
#: L354-363, srt/models/llama.py L910-918); vLLM shares it only when the drafter ships none or an identical one
#: of the same width (0.33.0 v1/spec_decode/llm_base_proposer.py L1437-1497)
_SGLANG_SET_EMBED = "sglang srt/speculative/eagle_worker_v2.py L363, srt/models/llama.py L910-918"


def _own_embedding(ctx: Context, head: str) -> list[Finding]:
    """A drafter table that differs from the target's, per judged profile: vLLM keeps it (I-EMBED-TRAINED);
    SGLang replaces it with the target's, so the trained table is not used (W-ENGINE-EMBED), unless the
    config's target_hidden_size differs from hidden_size (then it keeps it too). A table whose every value is
    the same (all zeros: a failed export) was never trained: where the engine keeps it, every token embeds
    alike, which is W-TENSOR-INIT here (and E-TENSOR-ZERO under --deep for zeros), never I-EMBED-TRAINED."""
    d = ctx.drafter
    constant = constant_value(d.index, d.names[EMBED])

    def say(r: Reading) -> list[Said]:
        if r.model_class is None:  # stopped at its config: no embedding is ever set
            return []
        replaced = r.engine == SGLANG and r.target_hidden_size == r.hidden_size
        if constant is not None:
            if replaced:  # SGLang serves the target's table: the constant one is never read
                return []
            return [
                Said(
                    "W-TENSOR-INIT",
                    EMBED,
                    f"{head}, but every value of it is {constant:g}: no trained table is constant; the engine keeps "
                    "the drafter's own table, so every token embeds alike and the drafter accepts little",
                    f"re-export {EMBED} from the training checkpoint",
                )
            ]
        if replaced:
            return [
                Said(
                    "W-ENGINE-EMBED",
                    EMBED,
                    f"{head}: SGLang replaces it with the target's table ({_SGLANG_SET_EMBED}), so the trained "
                    "table is not used",
                )
            ]
        return [Said("I-EMBED-TRAINED", EMBED, f"{head}: the engine keeps the drafter's own table")]

    return per_profile(ctx, say)


def embedding(ctx: Context) -> list[Finding]:
    d, t = ctx.drafter, ctx.target
    assert t is not None  # check() runs these with a target only
    if EMBED not in d.names:
        if d.dims.H == d.dims.Ht and d.dims.H != t.hidden:  # not already required by shapes.py
            return [
                finding(
                    "E-EMBED-MISSING",
                    EMBED,
                    f"drafter hidden {d.dims.H} != target hidden {t.hidden}: no engine can use the target's "
                    "embedding in its place (vLLM shares it only at the same width and leaves the drafter's "
                    "uninitialised; SGLang puts the target's in at its own width)",
                    "ship embed_tokens.weight [V, H] trained with the drafter",
                )
            ]
        return []
    info = d.tensors[EMBED]
    try:
        tidx = t.index()
    except EaglehubError as exc:  # the target's files, not the drafter's: say so in the finding
        exc.subject = f"target {exc.subject or 'weight files'}"
        raise
    if tidx is None:  # no target weights on disk (a hub id resolves config + side files only): nothing to compare
        return []
    tinfo = tidx.tensors.get(EMBED)
    if tinfo is None or tinfo.shape != info.shape:
        shown = list(tinfo.shape) if tinfo else "absent"
        return _own_embedding(ctx, f"drafter ships its own embed_tokens {list(info.shape)} (target's: {shown})")
    same = tinfo.dtype == info.dtype and tensors_equal(d.index, d.names[EMBED], tidx, EMBED)
    if same:
        return [
            finding(
                "I-EMBED-SHARED",
                EMBED,
                "embed_tokens equals the target's: every engine serves the target's table in its place "
                "(vLLM shares identical tables, SGLang puts the target's in)",
                "the tensor can be dropped to save space",
            )
        ]
    return _own_embedding(ctx, "embed_tokens differs from the target's")


#: keys SGLang takes a config's context length from, first found wins, times a ``rope_scaling`` factor
#: (sglang 0.5.23 srt/utils/hf_transformers/common.py L668-694; 2048 when none is stated)
_SGLANG_CONTEXT_KEYS = (
    "max_sequence_length",
    "seq_length",
    "max_seq_len",
    "model_max_length",
    "max_position_embeddings",
)
_SGLANG_CONTEXT = "sglang srt/configs/model_config.py L1291-1316"


def sglang_context(cfg: dict) -> tuple[int, str, float]:
    """SGLang's derived context length of a config: ``(length, key, rope factor)`` (``key`` ``""`` for 2048)."""
    rs = cfg.get("rope_scaling")
    factor = 1.0
    if isinstance(rs, dict) and rs:
        f = rs.get("factor", 1)
        factor = float(f) if isinstance(f, (int, float)) and not isinstance(f, bool) else 1.0
        if "original_max_position_embeddings" in rs or rs.get("rope_type") == "llama3":
            factor = 1.0
    for key in _SGLANG_CONTEXT_KEYS:
        v = cfg.get(key)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return int(factor * v), key, factor
    return 2048, "", factor


def _sglang_refuses(ctx: Context) -> Said | None:
    """SGLang builds the drafter at the target's context length and raises when the drafter's own derived
    length is shorter, unless SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1 (then it raises the drafter's
    max_position_embeddings to the target's): eagle_worker_v2.py L229, model_config.py L1291-1316."""
    d, t = ctx.drafter, ctx.target
    assert t is not None
    served, _, _ = sglang_context(t.text_config)
    own, key, factor = sglang_context(d.raw_config or d.config)
    if own >= served:
        return None
    stated = f"{key} {d.raw_config.get(key) if d.raw_config else d.config.get(key)}" if key else "no context key (2048)"
    needed = -(-served // int(factor)) if factor == int(factor) else served
    return Said(
        "E-ENGINE-LOAD",
        key or "max_position_embeddings",
        f"the drafter's context length is {own} ({stated}) and the target's {served}: SGLang builds the drafter "
        f"at the target's and raises ValueError unless SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1 ({_SGLANG_CONTEXT})",
        set_command(ctx, key or "max_position_embeddings", needed),
    )


def context(ctx: Context) -> list[Finding]:
    """F13: a drafter configured or trained for fewer positions than the target serves, per judged profile.

    vLLM 0.32 raises the draft's ``max_position_embeddings`` to the target's ``max_model_len`` at load
    (``SpeculativeConfig._maybe_override_draft_max_position_embeddings``: without it the draft's rotary
    cache is indexed out of bounds, #48894), 0.33 only for the RoPE types that merely size the cache (else
    W-CONTEXT-LOWERED), so long prompts are served; SGLang refuses a drafter whose own context length is
    shorter than the target's (:func:`_sglang_refuses`). Either way positions past what the drafter saw in
    training are out of distribution and acceptance falls with prompt length (speculators PR #684: AL 2.30 at
    2k → 1.09 at 16–20k tokens).
    """
    d, t = ctx.drafter, ctx.target
    assert t is not None  # check() runs these with a target only
    serves = int_field(t.text_config, "max_position_embeddings") or int_field(t.config, "max_position_embeddings") or 0
    refused = _sglang_refuses(ctx)
    limits = []
    stored = int_field(d.config, "max_position_embeddings")
    if stored is not None:
        limits.append((stored, "max_position_embeddings", f"drafter max_position_embeddings {stored}"))
    rec = drafter_record(d, TRAIN_LENGTH_KEY)
    if rec and isinstance(rec[0], int) and not isinstance(rec[0], bool) and rec[0] > 0:
        limits.append(
            (
                rec[0],
                f"{rec[1]} {TRAIN_LENGTH_KEY}",
                f"training sequences of at most {rec[0]} tokens ({rec[1]} {TRAIN_LENGTH_KEY})",
            )
        )
    n, subject, what = min(limits) if limits else (0, "", "")
    short = bool(serves) and bool(limits) and n < serves
    tail = f"positions past {n} are outside the drafter's training: acceptance falls on longer prompts"

    def say(r: Reading) -> list[Said]:
        if r.model_class is None:  # stopped at its config
            return []
        if r.engine == SGLANG:
            if refused is not None:
                return [refused]
            # it loaded, so it runs the drafter at the target's length
            ran = f"{what} < the target's {serves} positions: serving works; {tail}"
            return [Said("W-CONTEXT-SHORT", subject, ran)] if short else []
        if not short:
            return []
        if r.max_position_embeddings is not None and r.max_position_embeddings < serves:
            clause = "the engine does not raise max_position_embeddings for this RoPE type (W-CONTEXT-LOWERED)"
        elif stored is not None and stored < serves:
            clause = (
                "vLLM raises the drafter's max_position_embeddings to the target's max_model_len "
                "(SpeculativeConfig._maybe_override_draft_max_position_embeddings, #48894), so serving works"
            )
        else:
            clause = "serving works"
        return [Said("W-CONTEXT-SHORT", subject, f"{what} < the target's {serves} positions: {clause}; {tail}")]

    if any(r.model_class is not None for r in ctx.readings.values()):
        return per_profile(ctx, say)
    # no judged profile builds the drafter: what the files say, true of every engine
    return [finding("W-CONTEXT-SHORT", subject, f"{what} < the target's {serves} positions: {tail}")] if short else []
