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


def _hint_command(f: dict) -> list[str]:
    """The command a hint ends with (``...: eaglehub convert SRC DST ...``), as argv after ``eaglehub``."""
    import shlex

    argv = shlex.split(f["hint"].rsplit(": eaglehub ", 1)[1])
    return argv


def _full_vocab(bad_t2d: bool = True, d2t_shift: int = 0):
    import torch

    def mutate(cfg, t):
        V = cfg["vocab_size"]
        cfg["draft_vocab_size"] = V
        t["lm_head.weight"] = (torch.randn(V, cfg["hidden_size"]) * 0.05).to(torch.bfloat16)
        ids = torch.roll(torch.arange(V), d2t_shift)
        t["d2t"] = ids - torch.arange(V)
        t2d = torch.ones(V, dtype=torch.bool)
        if bad_t2d:
            t2d[5] = False
        t["t2d"] = t2d

    return mutate


def test_the_conversion_a_full_vocabulary_hint_proposes_runs_as_printed_and_validates(make_drafter, tmp_path):
    """A full-vocabulary drafter (Vd == V) shipping an identity d2t and a t2d missing one id: vLLM refuses the d2t
    (E-ENGINE-WEIGHT, whose hint is the vllm layout without the maps) and the t2d is inconsistent (E-T2D-COUNT,
    E-T2D-MISMATCH). convert once refused the very conversion the hint printed; each hint's command now runs as
    printed and its output validates with no error."""
    from eaglehub.checks.validate import validate

    src = make_drafter("full", mutate=_full_vocab())
    report = validate(src)
    codes = sorted(f["code"] for f in report["findings"] if f["severity"] == "error")
    assert codes == ["E-ENGINE-WEIGHT", "E-T2D-COUNT", "E-T2D-MISMATCH"], report["findings"]
    for f in report["findings"]:
        argv = _hint_command(f)
        assert argv[0] == "convert" and argv[1] == str(src), f["hint"]
        if Path(argv[2]).exists():
            shutil.rmtree(argv[2])
        res = _run(*argv)
        assert res.exit_code == 0, (f["code"], res.output)
        after = validate(Path(argv[2]))
        assert [g for g in after["findings"] if g["severity"] == "error"] == [], (f["code"], after["findings"])
        assert read_drafter(Path(argv[2])).names.keys().isdisjoint({"d2t", "t2d"})  # the vllm layout: no maps


def test_rebuild_vocab_maps_writes_both_maps_from_the_one_the_checkpoint_holds(make_drafter, tmp_path):
    import numpy as np
    import torch
    from helpers.checkpoints import vocab_maps

    from eaglehub.checks.validate import validate
    from eaglehub.errors import EaglehubError
    from eaglehub.io.tensorio import read_index

    used = list(range(3, 3 + 64, 2))[:32]
    d2t, t2d = vocab_maps(used, 256)

    def bad_t2d(cfg, t):
        t["d2t"], t["t2d"] = d2t.clone(), t2d.clone()
        t["t2d"][used[0]] = False
        t["t2d"][0] = True  # the same count, another id: only the mismatch tells

    src = make_drafter("bad-t2d", mutate=bad_t2d)
    found = [f for f in validate(src)["findings"] if f["code"] == "E-T2D-MISMATCH"]
    assert len(found) == 1 and "from d2t (the map the engines serve with)" in found[0]["hint"]
    argv = _hint_command(found[0])
    assert argv[-1] == "--rebuild-vocab-maps"
    res = _run(*argv, "--json")
    assert res.exit_code == 0, res.output
    out = Path(argv[2])
    tensors = read_index(out).load_all()
    assert torch.equal(tensors["d2t"], d2t) and torch.equal(tensors["t2d"], t2d)
    assert any(
        w.startswith("--rebuild-vocab-maps: wrote d2t and t2d from d2t") for w in json.loads(res.stdout)["warnings"]
    )
    assert [f for f in validate(out)["findings"] if f["severity"] == "error"] == []

    def dup_d2t(cfg, t):  # d2t names a target id twice; t2d holds the 32 sorted ids
        t["d2t"], t["t2d"] = d2t.clone(), t2d.clone()
        t["d2t"][1] = t["d2t"][0] - 1

    src = make_drafter("dup", mutate=dup_d2t)
    found = [f for f in validate(src)["findings"] if f["code"] == "E-D2T-DUPLICATE"]
    assert len(found) == 1 and "t2d's 32 target ids in ascending order" in found[0]["hint"]
    res = _run(*_hint_command(found[0]))
    assert res.exit_code == 0, res.output
    fixed = read_index(Path(_hint_command(found[0])[2])).load_all()
    assert np.array_equal(fixed["d2t"].numpy(), d2t.numpy())

    def no_maps(cfg, t):
        del t["d2t"], t["t2d"]

    src = make_drafter("none", mutate=no_maps)
    with __import__("pytest").raises(EaglehubError, match="cannot be rebuilt: there is no d2t") as exc:
        convert(src, tmp_path / "none-out", rebuild_vocab_maps=True)
    assert exc.value.exit_code == 1 and not (tmp_path / "none-out").exists()
    res = _run("convert", src, tmp_path / "cal", "--rebuild-vocab-maps", "--to", "3.1", "--calibrate", "--target", "x")
    assert res.exit_code == 2 and "--rebuild-vocab-maps is a plain conversion" in res.output


def test_a_full_vocabulary_d2t_that_is_not_the_identity_is_never_left_out_silently(make_drafter, tmp_path):
    """Leaving out a d2t that moves rows would score every draft row as another token: refused, naming why."""
    from eaglehub.checks.validate import validate
    from eaglehub.errors import EaglehubError

    src = make_drafter("rolled", mutate=_full_vocab(bad_t2d=False, d2t_shift=1))
    hint = next(f["hint"] for f in validate(src)["findings"] if f["code"] == "E-ENGINE-WEIGHT")
    assert "not the identity" in hint and "eaglehub convert" not in hint
    for kw in ({"fmt": "vllm"}, {"fmt": "vllm", "rebuild_vocab_maps": True}):
        with __import__("pytest").raises(
            EaglehubError, match="d2t is not the identity although the vocabulary is full"
        ):
            convert(src, tmp_path / "out", **kw)
        assert not (tmp_path / "out").exists()
