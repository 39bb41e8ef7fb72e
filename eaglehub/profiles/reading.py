"""What one engine profile builds from a drafter checkpoint: the typed description every engine check reads.

A :class:`Reading` is made once per drafter and profile (:func:`eaglehub.profiles.read`) from the files
as stored (the raw config and the tensor names), following that engine's own code path: its config
loading (for vLLM the speculators adapter), the drafter class's ``__init__`` (dimensions, the aux count
``fc`` is sized for, flags, biases), the runner's aux-layer lookup and the weight loader. No check reads
raw config keys for what an engine does; it reads the fields here. ``origin`` names, per field, the
config key the value came from (``"default"`` when the engine's default applied), so a finding can name
the field at fault.
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: fields :meth:`Reading.as_dict` returns; the engine-code tier compares these with the engine's own reading
FIELDS = (
    "profile",
    "model_class",
    "hidden_size",
    "target_hidden_size",
    "num_aux_hidden_states",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "intermediate_size",
    "vocab_size",
    "draft_vocab_size",
    "num_hidden_layers",
    "rms_norm_eps",
    "aux_layer_ids",
    "fc_norm",
    "norm_output",
    "norm_before_fc",
    "norm_before_residual",
    "attention_bias",
    "mlp_bias",
    "vocab_map",
    "tie_word_embeddings",
    "sliding_windows",
    "max_position_embeddings",
    "rope_type",
    "rope_theta",
    "quantization",
    "parameter_names",
    "loads",
    "load_error",
)

# What the weight loader does with one stored tensor name
ACCEPTED, SKIPPED, IGNORED, FATAL = "accepted", "skipped", "ignored", "fatal"


@dataclass(frozen=True)
class LoadFailure:
    """A reason the engine cannot build or load the drafter: the config ``field`` at fault, what the engine
    raises, and where in its code. A stored tensor whose shape the built parameter does not take also names
    the ``tensor`` and the value its shape ``implied`` for ``field`` (``None`` when no single value does)."""

    field: str
    message: str
    cite: str
    tensor: str | None = None
    implied: int | None = None


@dataclass(frozen=True)
class WeightFate:
    """What the engine's loader does with a stored tensor: ``accepted`` (loaded into ``param``),
    ``skipped`` (dropped on purpose, e.g. ``t2d``), ``ignored`` (an unexpected name the loader passes over
    silently, e.g. a stray ``*.bias``), ``fatal`` (the loader raises)."""

    stored: str
    fate: str
    param: str | None
    why: str


@dataclass(frozen=True)
class Reading:
    """One profile's reading of one drafter (see the module docstring). ``None`` for a dimension means the
    engine's config has no usable value (the load then fails; :attr:`failures` says why)."""

    profile: str
    engine: str
    architecture: str | None
    model_class: str | None
    layer_kind: str
    hidden_size: int | None
    target_hidden_size: int | None
    #: the aux states ``fc`` is sized for (``None``: the class the engine builds has no ``fc``)
    num_aux_hidden_states: int | None
    num_attention_heads: int | None
    num_key_value_heads: int | None
    head_dim: int | None
    intermediate_size: int | None
    vocab_size: int | None
    draft_vocab_size: int | None
    num_hidden_layers: int
    rms_norm_eps: float
    #: ids the runner makes the target capture, as it passes them (``None``: the target's default)
    aux_layer_ids: tuple[int, ...] | None
    #: ``"C-in"`` (vLLM: the state entering layer i) or ``"C-out"`` (SGLang: the output of layer i)
    aux_convention: str
    #: the id list the drafter's own config holds (sizes fc in some classes), by key
    aux_lists: dict[str, tuple[int, ...]]
    fc_norm: bool
    norm_output: bool
    norm_before_fc: bool
    norm_before_residual: bool
    attention_bias: bool
    mlp_bias: bool
    fc_bias: bool
    vocab_map: bool
    tie_word_embeddings: bool
    sliding_windows: tuple[int | None, ...]
    max_position_embeddings: int | None
    rope_type: str
    rope_theta: float | None
    quantization: str | None
    parameter_names: tuple[str, ...] | None
    weights: tuple[WeightFate, ...]
    failures: tuple[LoadFailure, ...]
    #: config keys the engine's config loading drops (the speculators adapter copies named keys only)
    dropped_keys: tuple[str, ...] = ()
    #: why ``vllm serve DRAFTER`` of this speculators checkpoint fails (``None``: it serves, or is not one)
    verifier_error: str | None = None
    origin: dict[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    @property
    def loads(self) -> bool:
        """The engine builds the drafter and its loader takes every stored tensor (missing tensors are
        never reported by the engines: they stay uninitialised)."""
        return not self.failures and not any(w.fate == FATAL for w in self.weights)

    @property
    def load_error(self) -> str | None:
        if self.failures:
            return self.failures[0].message
        fatal = [w for w in self.weights if w.fate == FATAL]
        return fatal[0].why if fatal else None

    @property
    def fc_in_features(self) -> int | None:
        if self.target_hidden_size is None or self.num_aux_hidden_states is None:
            return None
        return self.target_hidden_size * self.num_aux_hidden_states

    def as_dict(self) -> dict:
        """The comparable fields (:data:`FIELDS`), JSON-ready."""
        out: dict = {}
        for name in FIELDS:
            value = getattr(self, name)
            if isinstance(value, tuple):
                value = list(value)
            out[name] = value
        return out
