"""The exact edit an E-CONFIG-SCHEMA finding proposes where the drafter's own files settle the value: the dimension
its tensors imply, the layer count they store, or a stored text parsed as the JSON type the schema wants."""

from __future__ import annotations

from eaglehub.checks.context import Context, set_command

_TYPES: dict[str, type | tuple[type, ...]] = {
    "integer": int,
    "number": (int, float),
    "boolean": bool,
    "array": list,
    "object": dict,
    "string": str,
}


def _schema_value(ctx: Context, cfg: dict, key: str, msg: str) -> tuple[bool, object, str]:
    """``(found, value, why)``: the value the drafter's own files settle for the violating ``key``: the dimension
    its tensors imply, the layer count they store, or the stored text parsed as the JSON type the schema wants."""
    import json
    import re

    from eaglehub.drafter.shapes import stored_layers

    field = key.rsplit(".", 1)[-1]
    for fix in ctx.dimension_fixes:
        if field in (fix.field, fix.key.rsplit(".", 1)[-1]):
            return True, fix.implied, "the tensors imply it"
    if field == "num_hidden_layers":
        return True, stored_layers(ctx.drafter), "the layers the checkpoint stores"
    from eaglehub.checks.dims import implied_values

    implied = implied_values(ctx.drafter, field)
    if len(implied) == 1:  # an absent dimension: every tensor that sets it agrees on one value
        (value,) = implied
        return True, value, "the tensors imply it"
    wanted = re.search(r"is not of type '(\w+)'", msg)
    node: object = cfg
    for part in key.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    if wanted and isinstance(node, str) and wanted.group(1) in _TYPES:
        try:
            parsed = json.loads(node.strip().lower() if wanted.group(1) == "boolean" else node)
        except json.JSONDecodeError:
            return False, None, ""
        kind = _TYPES[wanted.group(1)]
        if isinstance(parsed, kind) and not (kind is not bool and isinstance(parsed, bool)):
            return True, parsed, f"the stored text {node!r} as a JSON {wanted.group(1)}"
    required = re.fullmatch(r"'(\w+)' is a required property", msg)
    if required and key == "$":
        return _schema_value(ctx, cfg, required.group(1), "")
    return False, None, ""


def schema_hint(ctx: Context, name: str, cfg: dict, path: str, msg: str) -> str:
    """The exact edit where the drafter's files settle the value (:func:`_schema_value`), else the schema. The MLA
    schema of a config whose class the tensors contradict is the class's fault: the class edit."""
    import re

    from eaglehub.checks.attention import fix_hint, foreign_attention

    foreign = foreign_attention(ctx.drafter)
    if foreign is not None:
        return fix_hint(ctx, foreign)

    required = re.fullmatch(r"'(\w+)' is a required property", msg)
    key = required.group(1) if required and path == "$" else path
    if key != "$":
        found, value, why = _schema_value(ctx, cfg, key, msg)
        if found:
            return f"{why}: {set_command(ctx, key, value)}"
    return f"fix config.json (see schemas/{name}.schema.json)"
