"""What a drafter format is: how it spells tensors and config, what it can express.

A format reads a stored config into the canonical flat config (:class:`Reading`) and writes the
canonical drafter back (:meth:`Format.write_config`, :meth:`Format.stored_names`). There is no
format-to-format code: every conversion is read → canonical → write. Rules come from
docs/formats.md §1–§8; the flat formats differ only in the parameters of :class:`FlatFormat`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from eaglehub.drafter.canonical import (
    AUX_KEY,
    C_IN,
    C_OUT,
    DEFAULT_ARCHITECTURE,
    LAYER0,
    QWEN3,
    UNKNOWN,
    AuxIds,
    Drafter,
    infer_convention,
    layer_index,
)

#: drafter classes of related methods that vLLM runs through its EAGLE-3 Llama drafter (docs/vllm.md §1); a
#: format that cannot name the class would silently turn them into plain EAGLE-3 drafters
VARIANT_ARCHS = {
    "PEagleDraftModel": "P-EAGLE (parallel drafting)",
    "PeagleLlamaForCausalLM": "P-EAGLE (parallel drafting)",
}
#: legacy TorchSpec/SGLang per-aux norm names, in ascending layer order (docs/formats.md §4).
LEGACY_FC_NORM = ("aux_norm_low.weight", "aux_norm_mid.weight", "aux_norm_high.weight")


@dataclass
class Reading:
    """The canonical view of one stored config: flat config, aux ids, the format's private keys."""

    config: dict
    aux: AuxIds
    carried: dict
    target: dict | None = None


@dataclass(frozen=True)
class Loss:
    """Something a format cannot express. ``tensors`` / ``keys`` are what ``--force`` drops;
    ``fatal`` losses cannot be forced (there is no way to write the drafter at all)."""

    what: str
    tensors: tuple[str, ...] = ()
    keys: tuple[str, ...] = ()
    fatal: bool = False


def read_aux_ids(
    ids,
    key: str,
    top_level: bool,
    fmt_convention: str,
    n_layers: int | None = None,
    override: str | None = None,
) -> AuxIds:
    """Normalise one stored id list to C-in (docs/formats.md §3).

    A top-level list is C-in by definition. A nested list follows the id heuristics (first id 1 ⇒
    C-out, 2 ⇒ C-in, last ``N`` ⇒ C-in, last ``N−4`` ⇒ C-out) and falls back to the producing
    format's convention ``fmt_convention``; ``override`` (``--aux-convention``) wins over both.
    """
    if not (isinstance(ids, list) and all(isinstance(i, int) and not isinstance(i, bool) for i in ids)):
        return AuxIds(None, None, None, "no explicit list: vLLM uses the target default (2, N//2, N-3)", None)
    if override:
        conv, reason = override, "given with --aux-convention"
    else:
        conv, reason = infer_convention(ids, top_level, n_layers)
        if conv == UNKNOWN and fmt_convention != UNKNOWN:
            conv, reason = (
                fmt_convention,
                f"ids match no rule; {fmt_convention} is this producer's convention",
            )
    c_in = [i + 1 for i in ids] if conv == C_OUT else list(ids) if conv == C_IN else None
    return AuxIds(list(ids), key, conv, reason, c_in)


@dataclass(frozen=True)
class Format:
    """Base of every format. Subclasses implement :meth:`read`, :meth:`write_config`, :meth:`losses`."""

    name: str
    layer0: str  # stored spelling of decoder layer 0
    mla: bool = False
    qwen3: bool = False  # Qwen3-style layers (q_norm / k_norm, Eagle3Qwen3ForCausalLM)
    max_layers: int | None = None
    embed: bool = True
    norm_before_fc: bool = True
    norm_before_residual: bool = True
    #: "pruned": d2t iff Vd < V, t2d optional · "pruned-both": d2t + t2d iff Vd < V ·
    #: "unequal-both": d2t + t2d iff Vd != V · "d2t-only": d2t iff Vd < V, never t2d. None writes maps for
    #: Vd == V: vLLM >= 0.30 refuses a d2t it has no parameter for (llama_eagle3.py L338-345)
    vocab_maps: str = "pruned"
    fc_norm_chunks: int | None = None  # SpecForge normalises exactly 3 aux chunks (docs/formats.md §4)
    #: drafter classes this format writes as they are; others become :func:`default_arch`
    archs: frozenset = frozenset()
    description: str = ""
    #: safetensors metadata keys this format's producer stamps its exports with: kept only in an output of
    #: this format (an output is not the producer's export, and a stamp another format's reader sees would
    #: make the output read as the producer's layout)
    metadata_stamps: tuple[str, ...] = ()
    #: the format's marker is only the producer's stamp, which eaglehub never writes itself: an output of
    #: this format is told by the format eaglehub.json records (:func:`eaglehub.formats.registry.detect`)
    stamp_marker: bool = False

    # -- names ---------------------------------------------------------------------------------

    def canonical_names(self, names: list[str], carried: dict) -> dict[str, str]:
        """``{canonical: stored}``: layer 0 spelled ``midlayer.`` or ``layers.0.`` becomes
        ``midlayer.``; legacy ``aux_norm_*`` become ``fc_norm.{i}``; other names are kept."""
        prefix = LAYER0 if any(n.startswith(LAYER0) for n in names) else "layers.0."
        out: dict[str, str] = {}
        for n in names:
            canon = LAYER0 + n[len(prefix) :] if prefix != LAYER0 and n.startswith(prefix) else n
            if n in LEGACY_FC_NORM:
                canon = f"fc_norm.{LEGACY_FC_NORM.index(n)}.weight"
            out.setdefault(canon, n)
        return out

    def stored_names(self, canonical: list[str], carried: dict) -> dict[str, str]:
        """``{canonical: stored}`` for writing: layer 0 as :attr:`layer0` (or the spelling the
        source used, kept in ``carried["layer0"]``: both engines rename ``midlayer.``). The fc_norm
        gains are always ``fc_norm.{i}.weight``: the legacy ``aux_norm_*`` names are renamed by SGLang's
        loader (``models/llama_eagle3.py`` L338-348 in 0.5.23) but not by vLLM's, which refuses them."""
        prefix = carried.get("layer0", self.layer0)
        return {c: prefix + c[len(LAYER0) :] if c.startswith(LAYER0) else c for c in canonical}

    def style(self, names: list[str]) -> dict:
        """Spelling choices of a stored checkpoint worth restoring when writing this format again."""
        out: dict = {}
        has_mid = any(n.startswith(LAYER0) for n in names)
        stored = LAYER0 if has_mid else ("layers.0." if any(n.startswith("layers.0.") for n in names) else self.layer0)
        if stored != self.layer0:
            out["layer0"] = stored
        return out

    # -- vocabulary maps (docs/formats.md §2, §5) -----------------------------------------------------

    def wants_maps(self, V: int, Vd: int, had: set[str]) -> tuple[bool, bool]:
        """``(d2t, t2d)`` to write for vocab sizes ``V``/``Vd``; ``had`` = maps the original carried
        (decides the optional ones)."""
        pruned, unequal = Vd < V, Vd != V
        return {
            "pruned": (pruned, pruned and "t2d" in had),
            "pruned-both": (pruned, pruned),
            "unequal-both": (unequal, unequal),
            "d2t-only": (pruned, False),
        }[self.vocab_maps]

    # -- capabilities ----------------------------------------------------------------------------

    def losses(self, d: Drafter) -> list[Loss]:
        """What this format cannot express of ``d`` (empty: lossless)."""
        out = []
        names = set(d.names)
        arch = (d.config.get("architectures") or [None])[0]
        if arch in VARIANT_ARCHS and arch not in self.archs:
            out.append(
                Loss(
                    f"{arch} is {VARIANT_ARCHS[arch]}, not a plain EAGLE-3 drafter; {self.name} cannot name it",
                    fatal=True,
                )
            )
        if d.layer_kind == "mla" and not self.mla:
            out.append(
                Loss(
                    f"{self.name} has no MLA drafters (layer kind of {d.config.get('model_type')})",
                    fatal=True,
                )
            )
        if d.layer_kind == QWEN3 and not self.qwen3:
            out.append(
                Loss(
                    f"{self.name} has no Qwen3-style drafter layer: it cannot name Eagle3Qwen3ForCausalLM, and its "
                    "Llama layer would leave the trained q_norm / k_norm unread",
                    fatal=True,
                )
            )
        if self.max_layers is not None and d.dims.layers > self.max_layers:
            extra = tuple(n for n in names if (i := layer_index(n)) is not None and i >= self.max_layers)
            out.append(
                Loss(
                    f"{self.name} drafters have {self.max_layers} decoder layer(s), this one has {d.dims.layers}",
                    tensors=tuple(sorted(extra)),
                    keys=("num_hidden_layers",),
                )
            )
        if not self.embed and "embed_tokens.weight" in names:
            # H != Ht: the drafter cannot share the target's table, so dropping it would break it (F9)
            needed = d.dims.H != d.dims.Ht
            out.append(
                Loss(
                    f"{self.name} does not store embed_tokens"
                    + (f" (required: H {d.dims.H} != Ht {d.dims.Ht})" if needed else ""),
                    tensors=("embed_tokens.weight",),
                    fatal=needed,
                )
            )
        if not self.norm_before_fc and (d.flags.norm_before_fc or "input_norm.weight" in names):
            out.append(
                Loss(
                    f"{self.name} has no norm_before_fc / input_norm",
                    tensors=("input_norm.weight",),
                    keys=("norm_before_fc",),
                )
            )
        if self.fc_norm_chunks is not None and d.flags.fc_norm and d.dims.A != self.fc_norm_chunks:
            out.append(
                Loss(
                    f"{self.name} applies fc_norm to exactly {self.fc_norm_chunks} aux states, this drafter reads {d.dims.A}",
                    tensors=tuple(n for n in names if n.startswith("fc_norm.")),
                    keys=("fc_norm",),
                )
            )
        if not self.norm_before_residual and d.flags.norm_before_residual:
            out.append(Loss(f"{self.name} has no norm_before_residual: true", keys=("norm_before_residual",)))
        return out

    # -- config ----------------------------------------------------------------------------------

    def read(self, raw: dict, names: list[str], aux_override: str | None = None) -> Reading:  # pragma: no cover
        raise NotImplementedError

    def write_config(self, d: Drafter, carried: dict, target: dict | None) -> dict:  # pragma: no cover
        raise NotImplementedError

    def marker(self, raw: dict, metadata: dict) -> str | None:
        """Evidence that only this format leaves in a checkpoint, or ``None``."""
        return None


def stored_aux_lists(raw: dict) -> tuple[list | None, list | None]:
    """The top-level and nested aux id lists a stored config holds (``None``: not a list)."""
    nested = raw.get("eagle_config")
    top, inner = raw.get(AUX_KEY), nested.get(AUX_KEY) if isinstance(nested, dict) else None
    return (top if isinstance(top, list) else None), (inner if isinstance(inner, list) else None)


def default_arch(kind: str) -> str:
    """The drafter class a layer kind is written as where the source named none this format writes."""
    return DEFAULT_ARCHITECTURE[kind]


@dataclass(frozen=True)
class FlatFormat(Format):
    """Flat-config formats (vllm, specforge, torchspec, modelopt): Llama/MLA keys at the top level.

    ``nested_ids``: aux ids live in ``eagle_config`` in the producer's convention (C-out) instead of
    the top-level C-in key. ``private_keys``: top-level keys only this format writes (markers).
    """

    nested_ids: bool = False
    private_keys: tuple[str, ...] = ()
    default_nested: dict = field(default_factory=dict)

    def read(self, raw: dict, names: list[str], aux_override: str | None = None) -> Reading:
        cfg = dict(raw)
        carried: dict = {"architectures": raw.get("architectures"), **self.style(names)}
        for k in self.private_keys:
            if k in cfg:
                carried[k] = cfg.pop(k)
        nested = cfg.pop("eagle_config", None)
        aux = read_aux_ids(raw.get(AUX_KEY), AUX_KEY, True, C_IN, override=aux_override)
        if isinstance(nested, dict):
            nested = dict(nested)
            ids = nested.pop(AUX_KEY, None)
            if aux.raw is None:
                aux = read_aux_ids(
                    ids,
                    f"eagle_config.{AUX_KEY}",
                    False,
                    C_OUT if self.nested_ids else UNKNOWN,
                    override=aux_override,
                )
                if ids is not None and "num_aux_hidden_states" not in cfg:
                    # vLLM sizes fc from the nested list's length (docs/vllm.md §3): keep that count
                    cfg["num_aux_hidden_states"] = len(ids)
                    carried["implicit_num_aux"] = True
            elif ids is not None:
                carried["nested_ids"] = ids  # both lists stored: keep the nested one verbatim
            if "norm_before_fc" in nested:  # vLLM: the nested flag wins (docs/vllm.md §3)
                carried["nested_norm_before_fc"] = True
                if "norm_before_fc" in cfg:
                    carried["top_norm_before_fc"] = cfg["norm_before_fc"]
                cfg["norm_before_fc"] = nested.pop("norm_before_fc")
            carried["eagle_config"] = nested
        if aux.convention in (C_IN, C_OUT) and aux.key != AUX_KEY:
            carried["aux_convention"] = aux.convention
        if aux.c_in is not None:
            cfg[AUX_KEY] = aux.c_in
        if "use_aux_norm" in cfg:  # SGLang/TorchSpec alias of fc_norm (docs/formats.md §4)
            carried["use_aux_norm"] = cfg.pop("use_aux_norm")
            cfg["fc_norm"] = cfg.get("fc_norm") is True or carried["use_aux_norm"] is True
        return Reading(cfg, aux, carried)

    def write_config(self, d: Drafter, carried: dict, target: dict | None) -> dict:
        cfg = dict(d.config)
        ids = d.aux.c_in
        cfg["architectures"] = self._archs(d, carried)
        if "use_aux_norm" in carried:  # SGLang's alias, kept; fc_norm stays too, the only key vLLM reads
            cfg["use_aux_norm"] = carried["use_aux_norm"]
        # The engines read different lists: vLLM the top-level one (C-in; its V1 runner falls back on the nested
        # one, read as C-in), SGLang only the nested one (as C-out). Besides its own list, the output keeps the
        # list the source stored for the other engines, as stored, so every engine reads the layers it read
        # (docs/formats.md §3; the two name the same layers, which W-AUX-CONFLICT checks)
        stored_top, stored_nested = stored_aux_lists(d.raw_config or {})
        nested = carried.get("eagle_config")
        if self.nested_ids or isinstance(nested, dict) or (stored_nested is not None and ids is not None):
            nested = dict(nested if isinstance(nested, dict) else self.default_nested if self.nested_ids else {})
            if self.nested_ids:
                cfg.pop(AUX_KEY, None)
                if carried.get("implicit_num_aux"):
                    cfg.pop("num_aux_hidden_states", None)
                if ids is not None and stored_nested is not None:
                    nested[AUX_KEY] = list(stored_nested)
                elif ids is not None:
                    conv = carried.get("aux_convention", C_OUT)
                    nested[AUX_KEY] = list(ids) if conv == C_IN else [i - 1 for i in ids]
                if ids is not None and stored_top is not None:
                    cfg[AUX_KEY] = list(ids)
            elif ids is not None and stored_nested is not None:
                nested[AUX_KEY] = list(stored_nested)
            if carried.get("nested_norm_before_fc") and "norm_before_fc" in cfg:
                nested["norm_before_fc"] = cfg.pop("norm_before_fc")
                if "top_norm_before_fc" in carried:
                    cfg["norm_before_fc"] = carried["top_norm_before_fc"]
            if nested:
                cfg["eagle_config"] = nested
        if not self.nested_ids and ids is not None:
            cfg[AUX_KEY] = list(ids)
            cfg.setdefault("num_aux_hidden_states", d.dims.A)  # vLLM sizes fc from this, not from the list
        for k in self.private_keys:  # only what the source carried: a producer's stamp is never made up
            if k in carried:
                cfg[k] = carried[k]
        return cfg

    def _archs(self, d: Drafter, carried: dict) -> list:
        """The source's class when this format writes it, else the format's default for the layer kind."""
        for archs in (carried.get("architectures"), d.config.get("architectures")):
            if isinstance(archs, list) and archs and archs[0] in self.archs | {default_arch(d.layer_kind)}:
                return archs
        return [default_arch(d.layer_kind)]
