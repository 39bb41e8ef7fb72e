"""The canonical description of a drafter, independent of the format it is stored in.

:func:`describe` is what "equivalent" means for conversions: two checkpoints are equivalent iff
their descriptions are equal. Resolved semantics are compared (aux ids in C-in, flags with each
format's defaults applied, hidden sizes from the ``fc`` width), structural keys that formats spell
differently are left out of the verbatim part, and the vocabulary maps count only where they carry
information (``t2d`` is derivable from ``d2t``; both are the identity when ``Vd == V``;
docs/formats.md §2).
"""

from __future__ import annotations

from eaglehub.drafter.canonical import AUX_KEY, Drafter

#: keys every format spells its own way; their meaning is in the resolved fields of :func:`describe`.
STRUCTURAL = frozenset(
    {
        "architectures",
        "hidden_size",
        "target_hidden_size",
        "num_aux_hidden_states",
        AUX_KEY,
        "vocab_size",
        "draft_vocab_size",
        "num_hidden_layers",
        "fc_norm",
        "norm_output",
        "norm_before_fc",
        "norm_before_residual",
        "use_aux_norm",
        "eagle_config",
    }
)


def describe(d: Drafter) -> dict:
    """JSON-able canonical description of ``d``: EAGLE version, layer kind, sizes (H, Ht, A, V, Vd,
    layers), aux-layer ids in C-in (``None`` = target defaults), flags, the sliding window vLLM applies
    per layer, dtype, quantization, target
    identity, every non-structural config key verbatim, and ``{canonical tensor: [dtype, shape]}``."""
    dims, f = d.dims, d.flags
    fc = d.tensors.get("fc.weight") if "fc.weight" in d.names else None
    ht = fc.shape[1] // dims.A if fc is not None and len(fc.shape) == 2 and dims.A else dims.Ht
    pruned = dims.V is not None and dims.Vd is not None and dims.Vd < dims.V
    keep = {n for n in d.names if n != "t2d" and (n != "d2t" or pruned)}
    return {
        "version": d.version,
        "layer_kind": d.layer_kind,
        "num_layers": dims.layers,
        "hidden_size": dims.H,
        "target_hidden_size": ht,
        "num_aux_hidden_states": dims.A,
        "vocab_size": dims.V,
        "draft_vocab_size": dims.Vd,
        "aux_layer_ids": d.aux.c_in,
        "flags": {
            "fc_norm": f.fc_norm,
            "norm_output": f.norm_output,
            "norm_before_fc": f.norm_before_fc,
            "norm_before_residual": f.norm_before_residual,
        },
        "attention_windows": d.windows,
        "dtype": d.dtype,
        "target": d.target,
        "config": {k: v for k, v in d.config.items() if k not in STRUCTURAL},
        "tensors": {n: [d.tensors[n].dtype, list(d.tensors[n].shape)] for n in sorted(keep)},
    }
