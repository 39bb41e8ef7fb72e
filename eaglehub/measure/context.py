"""How long a ``--context`` may be: the target's ``max_position_embeddings`` against a prompt and its output,
the rule a verify run applies and its dry run shares, and ``--context``'s own syntax (``8192``, ``8k``)."""

from __future__ import annotations

from pathlib import Path

from eaglehub.errors import UsageError


def max_context(target: Path) -> int | None:
    """The target's ``max_position_embeddings`` (top level, else ``text_config``), in tokens;
    ``None`` when the config does not say."""
    from eaglehub.io import jsonio

    return config_max_context(jsonio.read_object(Path(target) / "config.json") or {})


def config_max_context(cfg: dict) -> int | None:
    """:func:`max_context` of a config already read (``verify --dry-run`` plans from the config alone)."""
    value = cfg.get("max_position_embeddings") or (cfg.get("text_config") or {}).get("max_position_embeddings")
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def context_overflow(length: int, max_tokens: int, limit: int | None) -> str | None:
    """Why a ``length``-token prompt and its ``max_tokens`` of output do not fit the target's ``limit``, or
    None: the rule a verify run applies (:func:`build_contexts`) and its dry run shares."""
    if limit is not None and length + max_tokens > limit:
        return f"{length} prompt + {max_tokens} output tokens exceed the target's max_position_embeddings {limit}"
    return None


def fit_context(length: int, max_tokens: int, limit: int | None) -> int:
    """A ``k`` length (``--context 8k``): the longest prompt the target holds with its output, at most ``length``."""
    return min(length, limit - max_tokens) if limit is not None and limit > max_tokens else length


def context_error(requested: int, note: str, limit: int | None, max_tokens: int) -> UsageError:
    """The usage error of a ``--context`` the target cannot hold (``note``: why), with the longest that fits."""
    fits = f"; the longest that fits is {limit - max_tokens}" if limit and limit > max_tokens else ""
    return UsageError(
        f"--context {requested}: {note}{fits}",
        hint=f"pass a shorter --context or a smaller --max-tokens, or --context {requested // 1024}k "
        "for the longest prompt the target holds",
    )


def parse_context(text: str) -> tuple[int, bool]:
    """``verify --context``: ``"8192"`` → ``(8192, False)``, an exact prompt length in tokens;
    ``"8k"`` → ``(8192, True)``, ``k`` = 1024 tokens, measured at the longest prompt that fits when the
    target cannot hold it (as :func:`build_contexts` ``fit`` does for diagnose's presets).

    Raises:
        UsageError: not a positive integer with an optional ``k``.
    """
    raw = text.strip().lower()
    fit = raw.endswith("k")
    digits = raw[:-1] if fit else raw
    if not digits.isascii() or not digits.isdigit() or int(digits) == 0:
        raise UsageError(
            f"--context {text!r}: expected a prompt length in tokens like 8192, or 2k / 4k / 8k / 16k / 32k",
            hint="8k is 8192 tokens, or the longest prompt the target holds; a plain number is exact",
        )
    return int(digits) * (1024 if fit else 1), fit
