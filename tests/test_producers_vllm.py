"""The SmolLM2-sized producer fixtures, converted to every layout vLLM serves, run lossless in vLLM.

The committed fixtures under ``fixtures/producers/`` that have SmolLM2-135M's dimensions were written by the
producers' own code (each MANIFEST.json says how) with untrained weights: run as they are, their drafts are
never accepted (the SpecForge one converted: 0 of 471 draft tokens with the settings below), which shows
neither that the drafter's predictions reach the target nor much about losslessness (every token emitted is
then the target's own). So each fixture is first given the values of the committed trained drafter
(``fixtures/smollm2-eagle3``, trained for this target on the states entering layers 2, 15 and 27: the layers
the producers' configs name, SpecForge and ModelOpt as the outputs of 1, 14 and 26, speculators by leaving the
ids null, which is vLLM's default for a 30-layer Llama) in the producer's own layout: config.json byte for
byte, every tensor name, shape and dtype, the safetensors metadata, and the producer's d2t order (ascending,
or in no order as ModelOpt writes it), so that what ``convert`` reads is what the producer wrote. That copy is
converted with ``eaglehub convert`` to each layout vLLM serves (``--format vllm`` and ``--format
speculators``) and verified with ``eaglehub verify`` as a user would, with the real pair's shared settings
(helpers/real_runs.py); the target-alone run and the trained drafter's run are the ones the other real-pair
tests make, so each converted copy costs one engine start.

Asserted per converted copy: eaglehub's ``vllm-0.32-cpu`` reading says it loads and captures layers 2, 15, 27
(acceptance alone would not tell: the SpecForge copy served unconverted, its ids read one layer early, accepts
as many tokens); every prompt token-identical to the target alone; drafts proposed (k tokens each) and
accepted, from vLLM's own counters; both layouts of one source accept exactly the same tokens; and the AL is
at least :data:`MIN_AL_RATIO` of the trained drafter's on the same prompts.

Not here: TorchSpec's SmolLM2-sized export (69 MB, not committed: fixtures/producers/torchspec/.gitignore).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner
from helpers.paths import FIXTURE, ROOT
from helpers.real_runs import PROMPTS, SETTINGS, VERIFIER, K
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from eaglehub.cli import main
from eaglehub.profiles import read

PRODUCERS = ROOT / "fixtures" / "producers"
SOURCES = {
    "speculators": PRODUCERS / "speculators" / "convert-smollm2-eagle3",
    "specforge": PRODUCERS / "specforge" / "smollm2-eagle3-sglang",
    "modelopt": PRODUCERS / "modelopt" / "smollm2-pruned",
}
"""The committed SmolLM2-sized producer fixtures (their MANIFEST.json entries say how each was made)."""
FORMATS = ("vllm", "speculators")
"""The layouts vLLM reads the aux ids of: the others load too, but with SGLang's nested ids read as vLLM's."""
PROFILE = "vllm-0.32-cpu"
LAYER_PREFIXES = ("midlayer.", "layers.0.")
VOCAB_TENSORS = ("d2t", "t2d", "lm_head.weight")
MIN_AL_RATIO = 0.85
"""Least AL of a converted copy over the trained drafter's on the same prompts: the copy drafts from the 2048
lowest ids of the trained drafter's 8192 and in bfloat16 instead of float16 (measured 0.92)."""
CAPTURED = (2, 15, 27)
"""The target layers whose input states the trained drafter was trained on; also what vLLM captures when a
drafter names none (vLLM 0.32, model_executor/models/interfaces.py L1733: 2, L // 2, L - 3 of 30 layers)."""


def _cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def _role(name: str) -> str:
    """A tensor's name without its layer prefix: the speculators / ModelOpt ``layers.0.`` and the
    SpecForge / research ``midlayer.`` name the same single decoder layer."""
    for prefix in LAYER_PREFIXES:
        if name.startswith(prefix):
            return name[len(prefix) :]
    return name


def _header(path: Path) -> tuple[dict[str, tuple[str, tuple[int, ...]]], dict[str, str] | None]:
    with safe_open(str(path), "pt") as f:
        names = {k: (str(f.get_slice(k).get_dtype()), tuple(f.get_slice(k).get_shape())) for k in f.keys()}
        return names, f.metadata()


def trained_in_layout(producer: Path, dst: Path) -> Path:
    """``producer``'s files with the trained drafter's values (module doc), written to ``dst``.

    The draft vocabulary keeps the producer's size: the trained drafter's lowest target ids (BPE merges come in
    frequency order, so low ids are common tokens) with their lm_head rows, in ascending order where the
    producer's d2t ascends and in a fixed shuffled order where it does not (ModelOpt). t2d is written only where
    the producer stores one."""
    trained = load_file(str(FIXTURE / "model.safetensors"))
    src = load_file(str(producer / "model.safetensors"))
    _, metadata = _header(producer / "model.safetensors")
    by_role = {_role(k): v for k, v in trained.items() if k not in VOCAB_TENSORS}

    size = src["d2t"].numel()
    trained_ids = torch.arange(trained["d2t"].numel()) + trained["d2t"]  # ascending target ids (d2t offsets)
    rows = torch.arange(size)  # the lowest ``size`` target ids of the trained draft vocabulary
    producer_ids = torch.arange(size) + src["d2t"]
    if not bool((producer_ids[1:] > producer_ids[:-1]).all()):
        rows = rows[torch.randperm(size, generator=torch.Generator().manual_seed(0))]
    ids = trained_ids[rows]

    out: dict[str, torch.Tensor] = {}
    for name, tensor in src.items():
        if name == "d2t":
            value = ids - torch.arange(size)
        elif name == "t2d":
            value = torch.zeros_like(tensor)
            value[ids] = True
        elif name == "lm_head.weight":
            value = trained["lm_head.weight"][rows]
        else:
            value = by_role[_role(name)]
        assert value.shape == tensor.shape, name
        out[name] = value.to(tensor.dtype).contiguous()
    dst.mkdir(parents=True)
    save_file(out, str(dst / "model.safetensors"), metadata=metadata)
    (dst / "config.json").write_bytes((producer / "config.json").read_bytes())
    return dst


@pytest.fixture(scope="module")
def trained_copies(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("producers-trained")
    return {name: trained_in_layout(src, root / name) for name, src in SOURCES.items()}


@pytest.mark.parametrize("producer", sorted(SOURCES))
def test_trained_copy_keeps_the_producers_layout(producer, trained_copies):
    """What convert reads of the copy is what the producer wrote: config bytes, tensor names, shapes and
    dtypes, the safetensors metadata and the d2t order (ascending or not); only the values differ."""
    src, copy = SOURCES[producer], trained_copies[producer]
    assert (copy / "config.json").read_bytes() == (src / "config.json").read_bytes()
    assert _header(copy / "model.safetensors") == _header(src / "model.safetensors")
    ids = {}
    for name, path in (("src", src), ("copy", copy)):
        d2t = load_file(str(path / "model.safetensors"))["d2t"]
        ids[name] = torch.arange(d2t.numel()) + d2t
        assert len(set(ids[name].tolist())) == d2t.numel()
    ascending = {k: bool((v[1:] > v[:-1]).all()) for k, v in ids.items()}
    assert ascending["copy"] == ascending["src"]
    assert ascending["src"] == (producer != "modelopt")  # ModelOpt writes its d2t in frequency order


@pytest.mark.vllm
@pytest.mark.real
@pytest.mark.parametrize("producer", sorted(SOURCES))
def test_converted_producer_drafter_is_lossless_in_vllm(producer, trained_copies, shared_engine_runs, tmp_path):
    source = trained_copies[producer]
    converted = {}
    for fmt in FORMATS:
        dst = tmp_path / f"{producer}-as-{fmt}"
        res = _cli("convert", source, dst, "--format", fmt, "--verifier", VERIFIER, "--json")
        assert res.exit_code == 0, f"{SOURCES[producer]} --format {fmt}: {res.output}"
        reading = read(dst, PROFILE)
        assert reading.loads, f"{producer} as {fmt}: {reading.load_error}"
        assert (reading.aux_layer_ids or CAPTURED) == CAPTURED, (fmt, reading.aux_layer_ids)
        converted[fmt] = dst

    report_path = tmp_path / "verify.json"
    res = _cli(
        "verify",
        *SETTINGS,
        *[a for d in converted.values() for a in ("--drafter", d)],
        "--baseline-drafter",
        FIXTURE,
        "--engine",
        "vllm",
        "--report",
        report_path,
    )
    report = json.loads(report_path.read_text())
    assert res.exit_code == 0, res.output
    assert report["passed"] and len(report["drafters"]) == len(FORMATS) + 1  # the baseline runs as one more
    counts = []
    for fmt, d in zip(converted, report["drafters"]):
        assert Path(d["drafter"]) == converted[fmt]
        assert d["lossless"] and d["num_prompts"] == d["num_prompts_matched"] == PROMPTS, (fmt, d["prompts"])
        assert all(p["match"] for p in d["prompts"])
        a = d["acceptance"]["overall"]
        assert a["num_drafts"] > 0 and a["num_draft_tokens"] == K * a["num_drafts"], (fmt, a)
        assert a["num_accepted_tokens"] > 0 and a["acceptance_rate_per_position"][0] > 0.05, (fmt, a)
        counts.append((a["num_drafts"], a["num_accepted_tokens"], a["accepted_per_pos"]))
    assert counts[0] == counts[1], dict(zip(converted, counts))
    assert Path(report["drafters"][-1]["drafter"]) == FIXTURE
    for row in report["baseline_drafter"]["comparisons"]:
        assert row["al_ratio"] >= MIN_AL_RATIO, row
