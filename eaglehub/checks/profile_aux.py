"""The aux hidden states as each engine profile builds them: a stored list the profile's runner never reads
(E-/W-AUX-IGNORED) and an fc whose width the class sizes for another aux count (E-AUX-COUNT)."""

from __future__ import annotations

from eaglehub.checks.context import Context, set_command
from eaglehub.checks.holds import Said
from eaglehub.drafter.canonical import AUX_KEY, C_OUT, default_aux_ids, infer_convention
from eaglehub.profiles.reading import Reading
from eaglehub.profiles.registry import MRV2, PROFILES, VLLM, resolve

AUX = "eagle_aux_hidden_state_layer_ids"


def aux_ignored(ctx: Context, r: Reading) -> list[Said]:
    """W1: the drafter stores aux ids the profile's runner does not pass to the target."""
    if r.aux_layer_ids is not None or not r.aux_lists or r.num_aux_hidden_states is None:
        return []  # None: the class the engine builds takes no aux states (its load failure says so)
    n = ctx.target.layers if ctx.target else None
    key, ids = next(iter(r.aux_lists.items()))
    aux = ctx.drafter.aux
    c_in = list(aux.c_in) if aux.c_in is not None else list(ids)
    captured = default_aux_ids(n) if n else None
    shown = f"{captured}" if captured else "the target's default (2, N//2, N-3)"
    if r.engine == VLLM:
        why = (
            "Model Runner V2 never reads eagle_config." + AUX
            if PROFILES.get(r.profile, resolve(r.profile)).runner == MRV2
            else "the runner reads the top-level list first and finds none"
        )
        fix = set_command(ctx, AUX, c_in)
    else:
        why = "SGLang reads only the nested eagle_config list"
        c_out = [i - 1 for i in c_in]
        fix = set_command(ctx, f"eagle_config.{AUX}", c_out)
    if r.num_aux_hidden_states != 3:
        msg = (
            f"{key} {list(ids)} is ignored ({why}): the target captures {shown}, 3 states, but fc is sized for "
            f"{r.num_aux_hidden_states} ({r.origin.get('num_aux_hidden_states', 'num_aux_hidden_states')}): "
            "the first draft step fails on fc's width"
        )
        return [Said("E-AUX-IGNORED", key, msg, fix)]
    if captured is not None and sorted(captured) == sorted(c_in):
        return []
    if captured is None:
        msg = (
            f"{key} {list(ids)} is ignored ({why}): the target captures its default layers (2, N//2, N-3) instead "
            f"of the trained layers (C-in {c_in}, the numbering the fix writes); pass --target to compare"
        )
        return [Said("W-AUX-IGNORED", key, msg, fix)]
    msg = (
        f"{key} {list(ids)} is ignored ({why}): the target captures {captured} instead of the trained layers "
        f"(C-in {c_in}): the drafter reads the wrong hidden states and acceptance collapses"
    )
    return [Said("E-AUX-IGNORED", key, msg, fix)]


def fc_width(ctx: Context, r: Reading) -> list[Said]:
    """W3: the fc width each class expects (its own aux-count rule) against the stored fc."""
    fc = ctx.drafter.tensors.get("fc.weight")
    # a failure other than a stored shape (that is this check's to state) means nothing is built to compare
    if fc is None or len(fc.shape) != 2 or r.fc_in_features is None or any(f.tensor is None for f in r.failures):
        return []
    if any(f.field in ("target_hidden_size", "hidden_size") for f in ctx.dimension_fixes):
        return []  # a wrong width is E-CONFIG-DIM's: one wrong field, one finding
    if fc.shape[1] == r.fc_in_features or not r.target_hidden_size or fc.shape[1] % r.target_hidden_size:
        return []
    a = fc.shape[1] // r.target_hidden_size
    where = r.origin.get("num_aux_hidden_states", "default")
    key = "num_aux_hidden_states" if r.layer_kind != "qwen3" else "num_aux_layers"
    if ctx.drafter.format == "speculators":
        key = f"transformer_layer_config.{key}"
    msg = (
        f"fc.weight reads {a} aux states of width {r.target_hidden_size}; {r.model_class} sizes fc for "
        f"{r.num_aux_hidden_states} (from {where}): loading fails on fc's shape"
    )
    hint = _ids_hint(ctx, where, a) if AUX_KEY in where else set_command(ctx, key, a)
    return [Said("E-AUX-COUNT", "fc.weight", msg, hint)]


def _ids_hint(ctx: Context, where: str, a: int) -> str:
    """E-AUX-COUNT's fix where the class counts an id list (no stored count): a count alone would disagree with
    the short list (checks/aux.py says so), so the list itself gets ``a`` ids, written C-in at the top-level key
    (convert places it where each engine reads it): the target's default layers when they are ``a``, else the
    list as it was before a ``--set`` wrote it (eaglehub.json's ``conversion.config_set``), else words."""
    shape = list(ctx.drafter.tensors["fc.weight"].shape)
    n = ctx.target.layers if ctx.target else None
    if n is not None and len(default_aux_ids(n)) == a:
        why = f"fc.weight {shape} reads {a} states; the {n}-layer target's default layers (list the trained ones if other)"
        return f"{why}: {set_command(ctx, AUX_KEY, default_aux_ids(n))}"
    conversion = (ctx.drafter.provenance or {}).get("conversion") or {}
    for change in conversion.get("config_set") or []:
        key, old = change.get("key"), change.get("old")
        if not isinstance(key, str) or key.rsplit(".", 1)[-1] != AUX_KEY or not isinstance(old, list):
            continue
        if len(old) != a or not all(isinstance(i, int) and not isinstance(i, bool) for i in old):
            continue
        c_in = old if key == AUX_KEY or infer_convention(old, False, n)[0] != C_OUT else [i + 1 for i in old]
        why = f"fc.weight {shape} reads {a} states; {key} held {old} before a --set wrote {where} (eaglehub.json)"
        return f"{why}: {set_command(ctx, AUX_KEY, c_in)}"
    return (
        f"fc.weight {shape} reads {a} states but {where} lists fewer: write the {a} layer ids the drafter was "
        f"trained with (C-in) to {AUX_KEY} with eaglehub convert --set; a count alone leaves the list short"
    )
