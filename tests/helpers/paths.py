"""Paths the tests share: the repository root, the committed fixture drafter and manifests, test data."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "fixtures" / "smollm2-eagle3"
"""The committed SmolLM2-135M-Instruct EAGLE-3 drafter (the real pair's drafter)."""
MANIFESTS = ROOT / "fixtures" / "manifests"
DATA = ROOT / "tests" / "data"
FIXTURE_QWEN3 = ROOT / "fixtures" / "smollm2-eagle3-qwen3"
"""The committed Qwen3-style drafter for the same target (q/k-norm attention, a 256-position sliding window)."""
