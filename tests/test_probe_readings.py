"""The readings `eaglehub probe` measures, on tiny drafters written by the tests: which values each field
gets, which the tensors rule out, and the config edits that give each one."""

from __future__ import annotations

from eaglehub.formats.registry import read_drafter
from eaglehub.probe.readings import AUX, NORM_BEFORE_RESIDUAL, NORM_OUTPUT, PRE_FC_NORM, field_readings, settings_of


def _values(readings):
    return [(r.value, r.configured) for r in readings]


def test_a_plain_drafter_has_aux_flags_and_no_pre_fc_norm_to_tell_apart(make_drafter):
    fields = field_readings(read_drafter(make_drafter()), num_layers=8)
    assert list(fields) == [AUX, NORM_OUTPUT, NORM_BEFORE_RESIDUAL]  # no norm weights: only "none"
    # [2, 4, 5] is also the 8-layer target's default; a C-in list read as C-out is one layer up
    assert _values(fields[AUX]) == [([2, 4, 5], True), ([3, 5, 6], False), ([1, 3, 4], False)]
    assert [r.label for r in fields[AUX]][1] == "other convention (C-in ↔ C-out)"
    assert fields[AUX][2].settings == {"eagle_aux_hidden_state_layer_ids": [1, 3, 4]}
    assert _values(fields[NORM_OUTPUT]) == [(False, True), (True, False)]
    assert fields[NORM_OUTPUT][1].settings == {"norm_output": True}


def test_aux_readings_stay_inside_the_target(make_drafter):
    fields = field_readings(read_drafter(make_drafter()), num_layers=5)
    assert [v for v, _ in _values(fields[AUX])] == [
        [2, 4, 5],
        [1, 3, 4],
    ]  # one up needs a 6th layer; the defaults (2, 2, 2) repeat ids


def test_a_nested_c_out_list_is_read_as_c_in_with_the_other_convention_written_at_the_top_level(make_drafter):
    def nested(cfg, _tensors):
        del cfg["eagle_aux_hidden_state_layer_ids"]
        cfg["eagle_config"] = {"eagle_aux_hidden_state_layer_ids": [1, 3, 4]}

    fields = field_readings(read_drafter(make_drafter(mutate=nested)), num_layers=8)
    (configured, other, *_rest) = fields[AUX]
    assert configured.value == [2, 4, 5] and configured.configured and configured.settings == {}
    assert other.value == [1, 3, 4] and other.settings == {"eagle_aux_hidden_state_layer_ids": [1, 3, 4]}


def test_fc_norm_weights_allow_fc_norm_and_none_never_a_norm_without_weights(make_drafter):
    fields = field_readings(read_drafter(make_drafter(v31=True)), num_layers=8)
    pre = fields[PRE_FC_NORM]
    assert _values(pre) == [("fc_norm", True), ("none", False)]
    assert pre[1].settings == {"fc_norm": False, "norm_before_fc": False}
    assert _values(fields[NORM_OUTPUT]) == [(True, True), (False, False)]
    merged = settings_of({PRE_FC_NORM: pre[1], NORM_OUTPUT: fields[NORM_OUTPUT][1]})
    assert merged == {"fc_norm": False, "norm_before_fc": False, "norm_output": False}


def test_only_the_fields_asked_for(make_drafter):
    assert list(field_readings(read_drafter(make_drafter()), 8, (NORM_OUTPUT,))) == [NORM_OUTPUT]
