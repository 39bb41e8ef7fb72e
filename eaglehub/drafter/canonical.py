"""The one canonical in-memory description of a drafter; every layout reads into it and writes from it.

Canonical tensor names are the vLLM-native research names (docs/formats.md §1): ``fc.weight``,
``midlayer.*`` for decoder layer 0, ``layers.{i}.*`` for further layers, ``norm.weight``,
``lm_head.weight``, ``embed_tokens.weight``, ``d2t``, ``t2d``, ``fc_norm.{i}.weight``,
``input_norm.weight``. Dimensions follow the notation of docs/formats.md (H, Ht, A, nh, nkv, head_dim,
I, V, Vd) with the defaults vLLM's ``llama_eagle3.py`` applies (docs/vllm.md §3).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from eaglehub.drafter.training import raise_if_training_checkpoint
from eaglehub.errors import EaglehubError
from eaglehub.io import jsonio
from eaglehub.io.tensorio import TensorIndex, TensorInfo

LAYER0 = "midlayer."
_LAYER_NAME = re.compile(r"layers\.([0-9]{1,6})\.")
AUX_KEY = "eagle_aux_hidden_state_layer_ids"
C_IN, C_OUT, UNKNOWN = "C-in", "C-out", "unknown"


def layer_index(name: str) -> int | None:
    """Decoder-layer index of a canonical tensor name: 0 for ``midlayer.*``, ``i`` for ``layers.{i}.*``
    (ASCII digits only: names are untrusted), else ``None``."""
    if name.startswith(LAYER0):
        return 0
    m = _LAYER_NAME.match(name)
    return int(m[1]) if m else None


def read_config(root: Path, name: str = "config.json") -> dict:
    """Parse ``root/config.json`` keeping every key verbatim.

    Raises:
        EaglehubError: a producer's training checkpoint (``E-INPUT-RAW``), missing directory or file,
            unreadable or non-object JSON (exit 2).
    """
    path = Path(root) / name
    if not path.is_file():  # a producer's training checkpoint is named as one, not as a missing config.json
        raise_if_training_checkpoint(Path(root), "drafter directory")
    if not Path(root).is_dir():
        raise EaglehubError(
            f"{root} is not a directory",
            hint="pass a local checkpoint directory",
            code="E-INPUT-MISSING",
            subject="drafter directory",
        )
    if not path.is_file():
        raise EaglehubError(
            f"{path} is missing",
            hint="a drafter directory needs config.json next to its weights",
            code="E-INPUT-MISSING",
            subject=name,
        )
    try:
        cfg = jsonio.read(path)
    except OSError as exc:
        raise EaglehubError(
            f"cannot read {path}: {exc.strerror or exc}",
            hint="check the file's permissions",
            code="E-INPUT-MISSING",
            subject=name,
        ) from exc
    except ValueError as exc:
        raise EaglehubError(
            f"cannot parse {path}: {exc}", hint="fix the JSON syntax", code="E-INPUT-CONFIG", subject=name
        ) from exc
    if not isinstance(cfg, dict):
        raise EaglehubError(
            f"{path} is not a JSON object",
            hint="config.json must be a JSON object",
            code="E-INPUT-CONFIG",
            subject=name,
        )
    return cfg


def int_field(cfg: dict, key: str) -> int | None:
    """``cfg[key]`` if it is an int (not a bool), else ``None``: config values are untrusted input."""
    v = cfg.get(key)
    return v if isinstance(v, int) and not isinstance(v, bool) else None


#: ``rms_norm_eps`` when a drafter config has none: the default of transformers' ``LlamaConfig`` and
#: ``Qwen3Config``, the classes vLLM parses Llama- and Qwen3-style drafter configs with
DEFAULT_RMS_NORM_EPS = 1e-6


def rms_norm_eps(cfg: dict) -> float:
    """The RMSNorm epsilon vLLM gives the drafter's norms: ``rms_norm_eps``, else :data:`DEFAULT_RMS_NORM_EPS`."""
    v = cfg.get("rms_norm_eps")
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 else DEFAULT_RMS_NORM_EPS


@dataclass
class Dims:
    """Shape fields (docs/formats.md notation); ``None`` where the config lacks a usable value."""

    H: int | None
    Ht: int | None
    A: int
    nh: int | None
    nkv: int | None
    head_dim: int | None
    I: int | None
    V: int | None
    Vd: int | None
    layers: int
    attention_bias: bool
    mlp_bias: bool
    Ht_declared: bool


def nested_config(cfg: dict) -> dict:
    nested = cfg.get("eagle_config")
    return nested if isinstance(nested, dict) else {}


def derive_dims(cfg: dict) -> Dims:
    """Dimensions with vLLM's defaults: ``Ht`` = ``target_hidden_size`` or ``H``; ``A`` =
    ``num_aux_hidden_states``, else the length of the nested id list, else 3; ``nkv`` = ``nh``;
    ``head_dim`` = ``H // nh``; ``Vd`` = ``V`` (docs/vllm.md §3)."""
    H, nh = int_field(cfg, "hidden_size"), int_field(cfg, "num_attention_heads")
    nested_ids = nested_config(cfg).get(AUX_KEY)
    A = int_field(cfg, "num_aux_hidden_states") or (len(nested_ids) if isinstance(nested_ids, list) else 3)
    V = int_field(cfg, "vocab_size")
    return Dims(
        H=H,
        Ht=int_field(cfg, "target_hidden_size") or H,
        A=A,
        nh=nh,
        nkv=int_field(cfg, "num_key_value_heads") or nh,
        head_dim=int_field(cfg, "head_dim") or (H // nh if H and nh else None),
        I=int_field(cfg, "intermediate_size"),
        V=V,
        Vd=int_field(cfg, "draft_vocab_size") or V,
        layers=int_field(cfg, "num_hidden_layers") or 1,
        attention_bias=bool(cfg.get("attention_bias", False)),
        mlp_bias=bool(cfg.get("mlp_bias", False)),
        Ht_declared=int_field(cfg, "target_hidden_size") is not None,
    )


@dataclass
class AuxIds:
    """Aux hidden-state layer ids (docs/formats.md §3).

    ``raw`` is the list vLLM captures (top level, else nested; vLLM reads it as C-in), ``key`` where it
    came from, ``convention`` the producer's convention (top level ⇒ C-in; nested ⇒ heuristic) and
    ``c_in`` the ids normalised to C-in. All ``None`` when the drafter has no explicit list.
    """

    raw: list[int] | None
    key: str | None
    convention: str | None
    reason: str
    c_in: list[int] | None


def default_aux_ids(n_layers: int) -> list[int]:
    """vLLM's capture default for a target with ``n_layers`` layers: ``(2, N//2, N-3)`` (docs/vllm.md §7)."""
    return [2, n_layers // 2, n_layers - 3]


def infer_convention(ids: list[int], top_level: bool, n_layers: int | None = None) -> tuple[str, str]:
    """Guess the convention of ``ids`` (docs/formats.md §3 rules): first id 1 ⇒ C-out, 2 ⇒ C-in, last ``N``
    ⇒ C-in, last ``N-4`` ⇒ C-out; a top-level list is C-in by definition. Returns ``(convention, reason)``."""
    if top_level:
        return C_IN, "top-level key (vLLM/speculators read C-in)"
    if ids and ids[0] == 1:
        return C_OUT, "nested list starting at 1"
    if ids and ids[0] == 2:
        return C_IN, "nested list starting at 2"
    if n_layers and ids and ids[-1] == n_layers:
        return C_IN, "nested list ending at N"
    if n_layers and ids and ids[-1] == n_layers - 4:
        return C_OUT, "nested list ending at N-4"
    return UNKNOWN, "nested list matches no rule"


def read_aux(cfg: dict, n_layers: int | None = None) -> AuxIds:
    """Read the aux-id list the way vLLM does (top level, else ``eagle_config``) and normalise to C-in."""
    for top_level, src, key in ((True, cfg, AUX_KEY), (False, nested_config(cfg), f"eagle_config.{AUX_KEY}")):
        ids = src.get(AUX_KEY)
        if isinstance(ids, list) and all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
            conv, reason = infer_convention(ids, top_level, n_layers)
            return AuxIds(list(ids), key, conv, reason, [i + 1 for i in ids] if conv == C_OUT else list(ids))
    return AuxIds(None, None, None, "no explicit list: vLLM uses the target default (2, N//2, N-3)", None)


@dataclass
class Flags:
    """EAGLE-3.1 and pre-FC norm flags as vLLM reads them (docs/vllm.md §3; nested ``norm_before_fc`` wins)."""

    fc_norm: bool
    norm_output: bool
    norm_before_fc: bool
    norm_before_residual: bool
    use_aux_norm: bool


def read_flags(cfg: dict) -> Flags:
    nested = nested_config(cfg)
    nbf = nested["norm_before_fc"] if "norm_before_fc" in nested else cfg.get("norm_before_fc", False)
    return Flags(
        fc_norm=cfg.get("fc_norm") is True,
        norm_output=cfg.get("norm_output") is True,
        norm_before_fc=nbf is True,
        norm_before_residual=cfg.get("norm_before_residual") is True,
        use_aux_norm=cfg.get("use_aux_norm") is True,
    )


def config_dtype(cfg: dict) -> str | None:
    """``torch_dtype`` (or transformers-5 ``dtype``) of a config, e.g. ``"bfloat16"``."""
    v = cfg.get("torch_dtype", cfg.get("dtype"))
    return v.removeprefix("torch.") if isinstance(v, str) else None


@dataclass
class Drafter:
    """The canonical in-memory drafter every format reads into and writes from.

    ``config`` is the canonical *flat* config: the vLLM-native vocabulary (top-level C-in aux ids,
    top-level flags, Llama/MLA layer keys at the top) with every other key kept verbatim;
    ``raw_config`` is the file as stored. ``names`` maps canonical tensor name → stored
    (un-prefixed) name in ``index``. ``carried`` holds, per format name, the keys only that format
    understands (its ``eagle_config`` extras, markers, the speculators block, the stored spelling),
    so converting back restores them. ``format`` is a format name of :mod:`eaglehub.formats.registry` or a
    rejected kind (``not-a-drafter``, ``eagle1``, ``unsupported``); ``evidence`` says why.
    """

    path: Path
    format: str
    config: dict
    dims: Dims
    aux: AuxIds
    flags: Flags
    index: TensorIndex
    names: dict[str, str] = field(default_factory=dict)
    raw_config: dict = field(default_factory=dict)
    evidence: list[str] = field(default_factory=list)
    carried: dict[str, dict] = field(default_factory=dict)
    target: dict | None = None
    provenance: dict | None = None
    provenance_error: EaglehubError | None = None  # a broken eaglehub.json, when read leniently

    @property
    def layout(self) -> str:
        """Alias of :attr:`format` (reports call it the layout)."""
        return self.format

    @property
    def tensors(self) -> dict[str, TensorInfo]:
        """Canonical name → header info (names not stored yet, e.g. planned additions, are skipped)."""
        return {c: self.index.tensors[s] for c, s in self.names.items() if s in self.index.tensors}

    def load(self, canonical: str, max_rows: int | None = None):
        """Load one tensor by canonical name (see :meth:`TensorIndex.load`)."""
        return self.index.load(self.names[canonical], max_rows=max_rows)

    def load_all(self) -> dict:
        """All tensors by canonical name."""
        by_stored = self.index.load_all()
        return {c: by_stored[s] for c, s in self.names.items()}

    @property
    def is_31(self) -> bool:
        """EAGLE-3.1 per docs/formats.md §6.5: a 3.1 flag is true or ``fc_norm.*`` tensors exist."""
        f = self.flags
        return f.fc_norm or f.use_aux_norm or f.norm_output or any(n.startswith("fc_norm.") for n in self.names)

    @property
    def version(self) -> str:
        """``"3.1"`` or ``"3"`` (the algorithm stays ``eagle3`` in vLLM either way)."""
        return "3.1" if self.is_31 else "3"

    @property
    def layer_kind(self) -> str:
        """``"mla"`` (Kimi-K2.x / DeepSeek-V3 targets, docs/formats.md §5), ``"qwen3"`` (q/k-norm
        attention) or ``"llama"``."""
        return layer_kind(self.config)

    @property
    def windows(self) -> list[int | None]:
        """The sliding window vLLM gives each decoder layer the tensors hold (``None``: full attention);
        :func:`attention_windows`. Counted over the layers present, so a config declaring more layers than
        it ships (validate reports that) cannot make the list, or the report it goes into, that long."""
        held = {i for n in self.tensors if (i := layer_index(n)) is not None}
        return attention_windows(self.config, min(self.dims.layers, max(held) + 1) if held else None)

    @property
    def dtype(self) -> str | None:
        """Config dtype, else the dtype of ``fc.weight``, else of the first float tensor."""
        floats = [i.dtype for n, i in self.tensors.items() if i.is_float]
        fc = self.tensors.get("fc.weight")
        return config_dtype(self.config) or (fc.dtype if fc else (floats[0] if floats else None))


LLAMA, MLA, QWEN3 = "llama", "mla", "qwen3"
#: ``architectures[0]`` values vLLM maps to ``deepseek_eagle3.Eagle3DeepseekV2ForCausalLM`` (docs/vllm.md §1).
MLA_ARCHITECTURES = frozenset({"Eagle3DeepseekV2ForCausalLM", "Eagle3DeepseekV3ForCausalLM"})
#: ``architectures[0]`` values vLLM maps to ``qwen3_eagle3.Eagle3Qwen3ForCausalLM`` (docs/formats.md §10).
QWEN3_ARCHITECTURES = frozenset({"Eagle3Qwen3ForCausalLM"})
#: the class each layer kind is written as where a format names none of its own
DEFAULT_ARCHITECTURE = {
    LLAMA: "LlamaForCausalLMEagle3",
    MLA: "Eagle3DeepseekV2ForCausalLM",
    QWEN3: "Eagle3Qwen3ForCausalLM",
}


def architecture(cfg: dict) -> str | None:
    """``architectures[0]`` when it is a string."""
    archs = cfg.get("architectures")
    return archs[0] if isinstance(archs, list) and archs and isinstance(archs[0], str) else None


def layer_kind(cfg: dict) -> str:
    """``"mla"`` iff ``architectures[0]`` is an MLA drafter class or the config has ``kv_lora_rank``
    (docs/formats.md §6.2); ``"qwen3"`` iff it is ``Eagle3Qwen3ForCausalLM`` (vLLM picks the layer by
    class, so a ``model_type`` alone changes nothing); else ``"llama"``."""
    arch = architecture(cfg)
    if arch in MLA_ARCHITECTURES or cfg.get("kv_lora_rank") is not None:  # null states no MLA rank
        return MLA
    return QWEN3 if arch in QWEN3_ARCHITECTURES else LLAMA


SLIDING = "sliding_attention"
#: transformers' ``Qwen3Config`` default: layers below this index keep full attention when
#: ``layer_types`` is absent
QWEN3_MAX_WINDOW_LAYERS = 28


def window_setting(cfg: dict, layers: int | None = None) -> tuple[object, list | None]:
    """``(sliding_window, layer_types)`` as the drafter's config class leaves them for vLLM.

    vLLM builds the config class from ``model_type``: transformers' ``Qwen3Config`` (``qwen3``) clears
    ``sliding_window`` unless ``use_sliding_window`` is true and, with no ``layer_types``, derives them
    from ``max_window_layers`` (sliding from that index on); every other class keeps both keys as
    written (docs/formats.md §10). ``layers`` bounds the derived list (default ``num_hidden_layers``).
    """
    window, types = cfg.get("sliding_window"), cfg.get("layer_types")
    types = list(types) if isinstance(types, list) else None
    if cfg.get("model_type") == "qwen3":
        if cfg.get("use_sliding_window") is not True:
            window = None
        if types is None:
            first = int_field(cfg, "max_window_layers")
            first = QWEN3_MAX_WINDOW_LAYERS if first is None else first
            layers = layers or int_field(cfg, "num_hidden_layers") or 1
            types = [SLIDING if window is not None and i >= first else "full_attention" for i in range(layers)]
    return window, types


def attention_windows(cfg: dict, layers: int | None = None) -> list[int | None]:
    """Per drafter decoder layer, the sliding window vLLM applies (``None``: full attention).

    vLLM's drafter layers (``llama.py`` / ``qwen3_eagle3.py``) read ``layer_types[i]`` with the
    drafter-relative index ``i`` and take ``sliding_window`` for a ``"sliding_attention"`` layer; a
    window is ``W`` keys including the query's own (keys at positions ``> q − W``). Values that are
    not a positive integer give ``None`` here; validate reports them (E-WINDOW-INVALID). ``layers``: how
    many layers to answer for (default ``num_hidden_layers``).
    """
    layers = layers or int_field(cfg, "num_hidden_layers") or 1
    raw, types = window_setting(cfg, layers)
    window = raw if isinstance(raw, int) and not isinstance(raw, bool) and raw > 0 else None
    return [window if types is not None and i < len(types) and types[i] == SLIDING else None for i in range(layers)]
