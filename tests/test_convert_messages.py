"""Messages of ``convert`` and of the findings whose fix is a conversion name the right cause, and every command
they propose runs as printed (issue #37, item 3): a ``--set`` that breaks the config is the edit's fault, not the
source's; an edit never changes the layout the source is detected as; a key no engine reads is said by name."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from click.testing import CliRunner
from helpers.paths import ROOT

from eaglehub.cli import main
from eaglehub.convert.run import convert
from eaglehub.formats.registry import read_drafter

PRODUCERS = ROOT / "fixtures" / "producers"
SPECFORGE = PRODUCERS / "specforge" / "eagle3-sglang"
AUX = "eagle_aux_hidden_state_layer_ids"


def _run(*args: str):
    return CliRunner().invoke(main, [str(a) for a in args])


def test_a_set_that_breaks_the_config_is_blamed_on_the_edit_by_name(tmp_path):
    """The source validates; ``--set hidden_size=7`` makes E-CONFIG-DIM. The refusal names the edit (and only the
    edit that makes the error, not another one given with it), exits 2 like any bad option, writes nothing."""
    res = _run("convert", SPECFORGE, tmp_path / "out", "--set", "hidden_size=7", "--set", "norm_output=false")
    text = " ".join(res.output.split())
    assert res.exit_code == 2, res.output
    assert "error: --set hidden_size=7 makes the config invalid: E-CONFIG-DIM hidden_size: hidden_size is 7" in text
    assert "tensors imply 64" in text
    assert "hint: drop --set hidden_size=7 or give it a value the tensors agree with" in text
    assert "the source as stored has no error finding" in text
    assert "norm_output" not in text and "refusing to convert" not in text and "validate" not in text
    assert not (tmp_path / "out").exists()
    # an edit that gives the value the tensors imply converts
    assert (
        _run("convert", SPECFORGE, tmp_path / "ok", "--set", "hidden_size=64", "--set", "norm_output=false").exit_code
        == 0
    )


def test_a_key_no_engine_reads_is_warned_by_name_and_a_key_read_as_it_was_is_not_called_unread(tmp_path):
    report = convert(SPECFORGE, tmp_path / "foo", settings={"foo": "bar"})
    warned = [w for w in report["warnings"] if w.startswith("--set foo:")]
    assert len(warned) == 1 and "no engine profile checked" in warned[0] and "reads foo" in warned[0]
    res = _run("convert", SPECFORGE, tmp_path / "foo2", "--set", "foo=bar", "--json")
    assert res.exit_code == 0 and any(w.startswith("--set foo:") for w in json.loads(res.stdout)["warnings"])
    # C-in [1, 3, 4] at the top level: the V1 runner read the nested [1, 3, 4] as C-in already, so it builds the
    # same drafter, but it does read the key (another value changes it): it is not said to ignore it
    report = convert(SPECFORGE, tmp_path / "aux", settings={AUX: [1, 3, 4]})
    v1 = next(e for e in report["profiles"]["readings"] if e["profile"] == "vllm-0.33-v1")
    assert v1["changes"] == [] and v1["unread_settings"] == []
    assert not [w for w in report["warnings"] if w.startswith("--set")]


def test_set_of_aux_ids_keeps_the_source_layout_in_the_report_the_provenance_and_the_output(tmp_path):
    """``--set`` of top-level aux ids on a SpecForge checkpoint (nested ids only) once read the edited config as
    the vLLM layout: the report and eaglehub.json called the source ``vllm`` and the output was written as vllm.
    The source is detected as stored; the output keeps its layout unless --format asks for another."""
    out = tmp_path / "out"
    report = convert(SPECFORGE, out, settings={AUX: [2, 4, 5]})
    assert (report["source_format"], report["format"]) == ("specforge", "specforge")
    prov = json.loads((out / "eaglehub.json").read_text())
    assert prov["producer"] == "specforge"
    assert prov["source"]["format"] == "specforge" and prov["conversion"]["format"] == "specforge"
    assert read_drafter(out).format == "specforge"
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["eagle_config"][AUX] == [1, 3, 4]  # SpecForge's nested C-out list, what SGLang reads
    res = _run("convert", SPECFORGE, tmp_path / "text", "--set", f"{AUX}=[2,4,5]")
    assert res.exit_code == 0 and "(specforge) →" in res.output and "(vllm" not in res.output, res.output
    # --format still chooses another layout
    assert convert(SPECFORGE, tmp_path / "v", fmt="vllm", settings={AUX: [2, 4, 5]})["format"] == "vllm"
    # a copy without eaglehub.json: the stored config decides, not the edited one
    plain = tmp_path / "plain"
    shutil.copytree(SPECFORGE, plain)
    assert read_drafter(Path(plain), settings={AUX: [2, 4, 5]}).format == "specforge"
