"""A conversion keeps what each engine builds (docs/convert.md "What every engine builds").

For every engine profile checked (:data:`eaglehub.profiles.PROFILES` unless ``--profile`` names some), three
readings are made with :func:`eaglehub.profiles.read`: the source as stored, the source with the stated
changes applied (the *intended* drafter: ``--set`` edits, repairs, ``--to 3.1``'s switches and fc_norm
tensors, ``--force`` drops, a fold) and the output. Where a profile reads both the source and the output,
the output's reading must equal the intended one field by field; the differences between the source's and
the intended reading are the changes the report lists per profile. A difference nothing stated explains
refuses the conversion, naming the profile, the field and both values.

One difference is a correction rather than a change: the aux layers an engine captures, where the output
puts the ids the drafter was trained with into the list that engine reads and the source's list was read
another way (vLLM reads a nested C-out list one layer early, or not at all under Model Runner V2).

Fields compared are :data:`eaglehub.profiles.reading.FIELDS` except those that cannot differ by what the
engine builds, only by how the layout spells it (:data:`LAYOUT_ONLY`), plus ``weights``: what the loader
does, per engine parameter, with the stored tensors.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from eaglehub.drafter.canonical import LAYER0
from eaglehub.drafter.settings import apply_settings
from eaglehub.errors import EaglehubError
from eaglehub.formats.base import LEGACY_FC_NORM
from eaglehub.formats.registry import place_settings
from eaglehub.profiles import FIELDS, Profile, Reading, Stored, read
from eaglehub.profiles.reading import FATAL, SKIPPED, WeightFate
from eaglehub.profiles.registry import PROFILES, SGLANG, resolve_all

#: fields left out of the comparison. ``profile`` is the same by construction. ``parameter_names`` lists the
#: parameters the vLLM class registers, which follow from the other fields (vocab_map, norm_before_fc,
#: fc_norm, the layer count, biases): a difference there is always one of theirs, reported once, under
#: its own name; what the loader puts in each parameter is compared as ``weights``
LAYOUT_ONLY = frozenset({"profile", "parameter_names"})
COMPARED = (*(f for f in FIELDS if f not in LAYOUT_ONLY), "weights")
#: reading failures that come from the layout, not from the drafter: a profile with one of these does not
#: read that checkpoint at all (SGLang has no speculators reader; a class name only another engine has)
LAYOUT_FAILURES = frozenset(
    {"speculators_config", "speculators_model_type", "transformer_layer_config", "architectures"}
)
#: stored names whose presence is the layout's choice: derivable vocabulary maps, legacy fc_norm spellings
MAPS = ("d2t", "t2d")


def _canonical(stored: str) -> str:
    return "layers.0." + stored[len(LAYER0) :] if stored.startswith(LAYER0) else stored


def _identity_maps(r: Reading) -> bool:
    """The drafter keeps the whole vocabulary: a stored map would map every id to itself."""
    return r.draft_vocab_size is not None and r.draft_vocab_size == r.vocab_size


def _layout_failure(r: Reading) -> str | None:
    """Why ``r``'s engine does not read the checkpoint because of its layout, or ``None``. An identity vocabulary
    map vLLM has no parameter for (Vd == V) and a legacy fc_norm spelling are the layout's too."""
    for f in r.failures:
        if f.field in LAYOUT_FAILURES:
            return f.message
    for w in r.weights:
        if w.fate == FATAL and (w.stored in MAPS or w.stored in LEGACY_FC_NORM):
            return w.why
    return None


def _weight(w: WeightFate) -> str:
    return f"{w.param or _canonical(w.stored)}: {w.fate}"


def comparable(r: Reading) -> dict:
    """The fields of :data:`COMPARED`, JSON-ready. An identity map is no map (which formats store one is the
    layout's choice); tensors the loader skips are not part of what the engine builds."""
    out = {k: v for k, v in r.as_dict().items() if k not in LAYOUT_ONLY}
    identity = _identity_maps(r)
    out["vocab_map"] = r.vocab_map and not identity
    out["weights"] = sorted(
        _weight(w) for w in r.weights if w.fate != SKIPPED and not (identity and _canonical(w.stored) in MAPS)
    )
    return out


def _diff(a: dict, b: dict) -> list[tuple[str, Any, Any]]:
    out: list[tuple[str, Any, Any]] = []
    for name in COMPARED:
        if a[name] != b[name]:
            if name == "weights":
                only_a = [w for w in a[name] if w not in b[name]]
                only_b = [w for w in b[name] if w not in a[name]]
                out.append((name, only_a, only_b))
            else:
                out.append((name, a[name], b[name]))
    return out


@dataclass
class Intended:
    """The source with the stated changes applied: its stored config and tensors, and why each key changed."""

    stored: Stored
    causes: dict[str, str] = field(default_factory=dict)
    """config key (or ``tensor:NAME``) → the option or repair that changed it"""


def intended(
    raw: dict,
    tensors: dict[str, tuple[int, ...]],
    changes: list[dict],
    added: dict[str, tuple[tuple[int, ...], str]],
    removed: dict[str, str],
) -> Intended:
    """The stored source ``raw`` / ``tensors`` with config ``changes`` (``{key, new, why}``, written where the
    engines read them: :func:`eaglehub.formats.registry.place_settings`), ``added`` tensors (name → shape,
    why) and the stored names in ``removed`` (name → why) dropped."""
    settings = {c["key"]: c["new"] for c in changes}
    cfg, _ = apply_settings(raw, place_settings(raw, settings))
    stored = {n: s for n, s in tensors.items() if n not in removed}
    stored.update({n: shape for n, (shape, _) in added.items()})
    causes = {c["key"]: c.get("why") or "" for c in changes}
    causes.update({f"tensor:{n}": why for n, (_, why) in added.items()})
    causes.update({f"tensor:{n}": why for n, why in removed.items()})
    return Intended(Stored(cfg, stored), causes)


#: reading field → the config keys whose change explains it (a field not listed is explained by its own key)
FIELD_KEYS = {
    "aux_layer_ids": ("eagle_aux_hidden_state_layer_ids",),
    "model_class": ("architectures", "model_type"),
    "sliding_windows": (
        "sliding_window",
        "layer_types",
        "use_sliding_window",
        "max_window_layers",
        "num_hidden_layers",
    ),
    "loads": (),
    "load_error": (),
    "weights": (),
}


def _why(name: str, causes: dict[str, str]) -> str:
    """The stated causes of a change in reading field ``name``: the changes of the config keys it is read from,
    the added or dropped tensors for ``weights``, else every stated change (the field follows from them)."""
    if name == "weights":
        hit = [w for k, w in causes.items() if k.startswith("tensor:")]
    else:
        keys = FIELD_KEYS.get(name, (name,))
        hit = [w for k, w in causes.items() if not k.startswith("tensor:") and k.rsplit(".", 1)[-1] in keys]
    hit = hit or list(causes.values())
    return "; ".join(dict.fromkeys(w for w in hit if w)) or "a stated change"


def trained_capture(profile: Profile, c_in: list[int] | None) -> tuple[int, ...] | None:
    """The ids ``profile``'s runner must pass for the target to capture the layers the drafter was trained
    with (C-in ``c_in``): vLLM takes C-in ids, SGLang C-out ones (it adds one)."""
    if not c_in:
        return None
    return tuple(i - 1 for i in c_in) if profile.engine == SGLANG else tuple(c_in)


def profiles_to_check(specs: tuple[str, ...] | list[str] | None) -> tuple[tuple[Profile, ...], bool]:
    """The profiles ``--profile`` names, or every named profile (the default), and whether it is the default."""
    if specs:
        return resolve_all(specs), False
    return tuple(PROFILES.values()), True


def check_readings(
    source: Stored,
    want: Intended,
    output: Stored,
    profiles: tuple[Profile, ...],
    c_in: list[int] | None,
    fmt: str,
    settings: dict | None = None,
) -> list[dict]:
    """One entry per profile (the report's ``profiles.readings``); raises when a profile that reads both the
    source and the output builds something else from the output than the stated changes make of the source.

    Raises:
        EaglehubError (exit 1): the field, both values and the profile.
    """
    out = []
    for p in profiles:
        r_src, r_want, r_out = read(source, p), read(want.stored, p), read(output, p)
        src_fail, out_fail = _layout_failure(r_src), _layout_failure(r_out)
        entry: dict = {
            "profile": p.id,
            "title": p.title,
            "source_reads": src_fail is None,
            "output_reads": out_fail is None,
            "source_failure": src_fail,
            "output_failure": out_fail,
            "changes": [],
            "unread_settings": [],
        }
        out.append(entry)
        if src_fail is not None or out_fail is not None:
            continue
        a, b, c = comparable(r_src), comparable(r_want), comparable(r_out)
        expected = trained_capture(p, c_in)
        for name, want_v, got in _diff(b, c):
            if name == "aux_layer_ids" and expected is not None and tuple(got or ()) == expected:
                continue  # a correction, listed below with the stated changes
            raise EaglehubError(
                f"the {fmt} output would change what {p.title} builds ({p.id}): {name} is {_show(want_v)} "
                f"from the source{' with the stated changes' if a != b else ''}, {_show(got)} from the output",
                hint="report this bug; to check only the engines you serve with, name them with --profile "
                f"(e.g. --profile {p.id if p.id != 'sglang-0.5.23' else 'vllm-0.33-gpu'})",
                exit_code=1,
            )
        for name, before, after in _diff(a, c):
            if name == "aux_layer_ids" and expected is not None and tuple(after or ()) == expected and b[name] != after:
                why = (
                    f"the layers the drafter was trained with (C-in {list(c_in or [])}), now in the list this engine "
                    "reads" + ("; it read no list of the source's" if before is None else ", not the source's list")
                )
            else:
                why = _why(name, want.causes)
            entry["changes"].append({"field": name, "source": before, "output": after, "why": why})
        for key, value in (settings or {}).items():
            if _changes_config(source.config, key, value) and not _reads(source, p, key, value, a):
                entry["unread_settings"].append(key)
    return out


def unread_warnings(readings: list[dict], settings: dict | None) -> list[str]:
    """One warning per ``--set`` key that no checked profile reading both the source and the output reads (a
    misspelt key, or one only other tools read): written all the same, but said by name."""
    judged = [e for e in readings if e["source_reads"] and e["output_reads"]]
    out = []
    for key, value in (settings or {}).items():
        if judged and all(key in e["unread_settings"] for e in judged):
            names = ", ".join(e["profile"] for e in judged)
            spelling = "" if value is None else " (check the key's spelling)"
            out.append(
                f"--set {key}: no engine profile checked ({names}) reads {key}, so the edit changes nothing they "
                f"build; it is written to config.json all the same{spelling}"
            )
    return out


def _changes_config(raw: dict, key: str, value) -> bool:
    return bool(apply_settings(raw, place_settings(raw, {key: value}))[1])


def _other(value: Any) -> Any:
    """A value of the same kind as ``value`` that differs from it, to ask whether an engine reads a key at all."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int | float):
        return value * 2 + 1
    if isinstance(value, list) and value and isinstance(value[0], str):  # a class list: engines read the first
        return [value[0] + "-other", *value[1:]]
    if isinstance(value, list):
        return [i + 1 if isinstance(i, int) and not isinstance(i, bool) else i for i in value] + [len(value) + 1]
    if isinstance(value, str):
        return value + "-other"
    if isinstance(value, dict):
        return {**value, "__other__": 1}
    return 1


def _reads(source: Stored, p: Profile, key: str, value: Any, before: dict) -> bool:
    """Whether ``p`` reads ``--set key``: this value or another one changes what it builds. A value that gives
    what the profile built from the source already (the same aux layers under another key) is read all the
    same, so it is not said to be ignored."""
    for v in (value, _other(value)):
        alone = intended(source.config, source.tensors, [{"key": key, "new": v}], {}, {})
        if comparable(read(alone.stored, p)) != before:
            return True
    return False


def _show(v) -> str:
    return "absent" if v is None else repr(v)
