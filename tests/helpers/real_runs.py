"""The real pair's drafters and shared run settings.

Every end-to-end check of the committed SmolLM2 drafter against SmolLM2-135M-Instruct runs ``eaglehub
verify`` (or ``pipeline``) with :data:`SETTINGS` and the ``shared_engine_runs`` fixture
(helpers/engine_runs.py), so the runs they have in common run once per session:

* the target alone in vLLM and the fixture in vLLM: test_real_pair (every layout), test_verify_vllm (the
  tiny drafter), test_pipeline (both manifest drafters);
* the target alone and the fixture in the reference engine: test_real_pair (cross-engine), test_quantize
  (FP8 against its source) and test_reference_real (wrong d2t offsets).

:data:`SETTINGS` are the fixture manifest's (fixtures/manifests/smollm2-pipeline.toml: k 3, one prompt per
category of the default set, 32 tokens), so the pipeline shares them too. :func:`real_drafters` writes the
drafters of those checks once: the fixture's EAGLE-3.1 upgrade, the fixture in the speculators layout and as
vLLM-native shards, the fixture quantized FP8-dynamic, and the tiny random drafter that always drafts a
newline (helpers/vllm_drafter.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from eaglehub.cli import main
from helpers.paths import FIXTURE
from helpers.vllm_drafter import make_tiny_drafter

K = 3
MAX_TOKENS = 32
LIMIT = 1  # prompts per category: 6 prompts in all (6 categories)
PROMPTS = 6
SETTINGS = ("--target", "smollm2", "-k", str(K), "--max-tokens", str(MAX_TOKENS), "--limit", str(LIMIT))
"""``verify`` options of every shared run (module doc)."""
NEWLINE = 198  # SmolLM2 tokenizer id of "\n": what the tiny drafter always drafts
VERIFIER = "HuggingFaceTB/SmolLM2-135M-Instruct"


def cli(*args) -> Result:
    return CliRunner().invoke(main, [str(a) for a in args])


@dataclass(frozen=True)
class RealDrafters:
    """The real pair's drafters and the CLI results that wrote them."""

    upgraded: Path  # convert --to 3.1
    speculators: Path  # convert --format speculators --max-shard-size 5MB: another layout, sharded, in one copy
    fp8: Path  # quantize (fp8-dynamic, the default scheme)
    tiny: Path  # random, a one-token draft vocabulary: always drafts "\n"
    results: dict[str, Result]


@pytest.fixture(scope="session")
def real_drafters(tmp_path_factory) -> RealDrafters:
    root = tmp_path_factory.mktemp("real-pair")
    paths = {name: root / name for name in ("upgraded", "speculators", "fp8")}
    results = {
        "upgraded": cli("convert", FIXTURE, paths["upgraded"], "--to", "3.1", "--json"),
        "speculators": cli(
            "convert",
            FIXTURE,
            paths["speculators"],
            "--format",
            "speculators",
            "--verifier",
            VERIFIER,
            "--max-shard-size",
            "5MB",
            "--json",
        ),
        "fp8": cli("quantize", FIXTURE, paths["fp8"], "--json"),
    }
    for name, res in results.items():
        assert res.exit_code == 0, f"{name}: {res.output}"
    tiny = make_tiny_drafter(root / "tiny.eagle3", constant_token=NEWLINE)
    return RealDrafters(tiny=tiny, results=results, **paths)
