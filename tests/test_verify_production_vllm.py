"""``verify`` of the real pair (SmolLM2-135M-Instruct + fixtures/smollm2-eagle3) in vLLM under production features:
prefix caching, chunked prefill with a small token budget, 8 requests in flight and a k schedule, the target alone
under the same features. 8 prompts padded to 300 tokens with the same text before each question, so they share two
128-token cache blocks (the CPU build's block): the target alone reuses both, an EAGLE run one (vLLM drops the last
matched block to recompute the drafter's hidden states, vllm 0.32.0 ``v1/core/single_type_kv_cache_manager.py``
L815-820)."""

import json

import pytest
from click.testing import CliRunner
from helpers.paths import FIXTURE

from eaglehub.cli import main

SCHEDULE = [[1, 4, 3], [5, 8, 2]]
BLOCK = 128


@pytest.mark.vllm
@pytest.mark.real
def test_verify_real_pair_under_production_features(tmp_path):
    report_path = tmp_path / "verify.json"
    args = ["verify", "--target", "smollm2", "--drafter", str(FIXTURE), "-k", "3", "--max-tokens", "32"]
    args += ["--category", "coding", "--category", "math", "--limit", "4", "--context", "300", "--engine", "vllm"]
    args += ["--prefix-caching", "--chunked-prefill", "--max-num-batched-tokens", "64", "--concurrency", "8"]
    args += ["--k-schedule", json.dumps(SCHEDULE), "--report", str(report_path)]
    res = CliRunner().invoke(main, [*args, "--engine-log", str(tmp_path / "logs")], terminal_width=200)
    report = json.loads(report_path.read_text())
    d = report["drafters"][0]

    # every prompt identical to the target alone under the same features, or its divergence classified; a fault
    # (not a near-tie) would be a real losslessness failure of vLLM's batched, scheduled path
    codes = [f["code"] for f in d["findings"]]
    assert "E-VERIFY-LOSSLESS" not in codes and res.exit_code == 0, res.output
    assert all(r["match"] or r["forensics"]["classification"] == "near_tie" for r in d["prompts"])
    assert d["lossless"] == ("W-VERIFY-NEAR-TIE" not in codes and "W-VERIFY-BATCH-NUMERICS" not in codes)

    # the features each run really had, read from the engine's config
    section = report["settings"]["production_features"]
    assert section["one_batch"] and section["requested"]["max_num_seqs"] == 8
    alone, drafted = section["runs"]
    for run in (alone, drafted):
        assert (run["enable_prefix_caching"], run["enable_chunked_prefill"]) == (True, True)
        assert (run["max_num_batched_tokens"], run["max_num_seqs"], run["block_size"]) == (64, 8, BLOCK)
        assert run["prompts_split"] == 8  # 300-token prompts, a 64-token budget
    assert alone["num_speculative_tokens_per_batch_size"] is None and alone["k_by_batch_size"] is None
    assert drafted["num_speculative_tokens_per_batch_size"] == SCHEDULE
    assert drafted["k_by_batch_size"] == {str(b): 3 if b <= 4 else 2 for b in range(1, 9)}
    # the prefix cache served the shared blocks: whole blocks, two for the target alone, one with EAGLE
    assert alone["prompts_hitting_cache"] >= 1 and alone["prefix_cache_hit_tokens"] % BLOCK == 0
    assert alone["prefix_cache_hit_tokens"] == 2 * BLOCK * alone["prompts_hitting_cache"]
    assert drafted["prompts_hitting_cache"] >= 1
    assert drafted["prefix_cache_hit_tokens"] == BLOCK * drafted["prompts_hitting_cache"]

    # the schedule ran: steps at k 2 (5-8 requests scheduled) and at k 3 (1-4)
    a = d["acceptance"]["overall"]
    assert 2 * a["num_drafts"] < a["num_draft_tokens"] < 3 * a["num_drafts"]
    assert d["speculative_config"]["num_speculative_tokens_per_batch_size"] == SCHEDULE
    assert '"num_speculative_tokens_per_batch_size": [[1, 4, 3], [5, 8, 2]]' in d["serve_command"]
    # its rates mix steps at k 3 and k 2: no acceptance curve (it would dilute position 3)
    assert d["acceptance_curve"] is None
    text = " ".join(res.output.split())  # the text view wraps at the console's width
    assert "vLLM features (from the engine's config): prefix caching on (block 128 tokens;" in text
    assert "k schedule [[1, 4, 3], [5, 8, 2]]; every prompt in one batch" in text
