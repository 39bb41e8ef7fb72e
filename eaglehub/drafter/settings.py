"""Config edits given as ``KEY=VALUE`` (``convert --set``, ``probe --write``): the config read with them applied.

A key is a top-level ``config.json`` field, or a dotted path into a nested object
(``eagle_config.norm_before_fc``: vLLM reads that one before the top-level key). A value is JSON
(``true``, ``[3, 16, 28]``, ``64``, ``"silu"``); text that is not JSON is a string. The edit changes
what the drafter's config says, never its tensors: each is recorded as ``{key, old, new}``.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from eaglehub.errors import EaglehubError

MISSING = None
"""What ``old`` records for a key the config did not have."""


def parse_setting(text: str) -> tuple[str, Any]:
    """``"norm_output=false"`` → ``("norm_output", False)``.

    Raises:
        EaglehubError: no ``=``, or an empty key (exit 2).
    """
    key, sep, value = text.partition("=")
    key = key.strip()
    if not sep or not key or any(not part for part in key.split(".")):
        raise EaglehubError(
            f"--set takes KEY=VALUE, got {text!r}",
            hint="e.g. --set norm_output=false or --set eagle_aux_hidden_state_layer_ids=[2,15,27]",
        )
    try:
        parsed: Any = json.loads(value)
    except json.JSONDecodeError:
        parsed = value
    return key, parsed


def parse_settings(texts: tuple[str, ...] | list[str]) -> dict[str, Any]:
    """Every ``KEY=VALUE`` of the command line, in order (a repeated key: the last wins)."""
    return dict(parse_setting(t) for t in texts)


def apply_settings(cfg: dict, settings: dict[str, Any] | None) -> tuple[dict, list[dict]]:
    """``cfg`` with ``settings`` applied (a copy; ``cfg`` is left alone), and the changes made.

    Raises:
        EaglehubError: a dotted key whose parent is not an object (exit 2).
    """
    if not settings:
        return cfg, []
    out = copy.deepcopy(cfg)
    changes = []
    for key, value in settings.items():
        *parents, leaf = key.split(".")
        node = out
        for i, part in enumerate(parents):
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise EaglehubError(
                    f"--set {key}: {'.'.join(parents[: i + 1])} is not an object in config.json",
                    hint="set the field itself, e.g. --set " + ".".join(parents[: i + 1]) + "=VALUE",
                )
            node = child
        old = node.get(leaf, MISSING)
        if old != value or leaf not in node:
            changes.append({"key": key, "old": old, "new": value})
        node[leaf] = value
    return out, changes


def setting_arg(key: str, value: Any) -> str:
    """The ``--set`` argument that gives ``value`` to ``key``, quoted for a POSIX shell where needed. A string that
    does not read as other JSON is written bare (``model_type=llama``): :func:`parse_setting` reads it back as that
    string."""
    text = f"{key}={json.dumps(value, separators=(',', ':'))}"
    if isinstance(value, str) and value and value == value.strip():
        try:
            json.loads(value)
        except json.JSONDecodeError:
            text = f"{key}={value}"
    return text if all(c.isalnum() or c in "_.=:-," for c in text) else "'" + text.replace("'", "'\\''") + "'"
