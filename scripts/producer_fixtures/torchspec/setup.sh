#!/usr/bin/env bash
# Build TorchSpec's own environment under DIR/venv (called by scripts/make_producer_fixtures.sh).
#
# TorchSpec is not on a package index. Its source comes from a checkout you provide — nothing of it
# is kept in this repository:
#   TORCHSPEC_SRC=/path/to/TorchSpec   a git checkout (or plain copy) of the TorchSpec repository
#   otherwise DIR/src                  (e.g. `git clone <TorchSpec repository> .work/producers/torchspec/src`)
# The commit used is recorded in DIR/source.json (git rev-parse HEAD of the checkout, or
# $TORCHSPEC_COMMIT when the copy has no .git), and make.py copies it into MANIFEST.json.
#
# Only what its drafter classes, its checkpoint save (torch.distributed.checkpoint), its data
# pipeline (for --prune-vocab) and tools/convert_to_hf.py import is installed (wandb too: its logging
# module imports it at package import): ray, mooncake,
# sglang/vllm, wandb and flash-attn are not (they serve training on GPUs, not the files).
# Idempotent: skipped when DIR/.complete exists.
set -euo pipefail
dir=${1:?usage: setup.sh DIR}
stamp="$dir/.complete"
[ -f "$stamp" ] && { echo "torchspec env ready: $dir ($(cat "$dir/source.json"))"; exit 0; }
mkdir -p "$dir"
src=${TORCHSPEC_SRC:-$dir/src}
if [ ! -f "$src/torchspec/__init__.py" ] || [ ! -f "$src/tools/convert_to_hf.py" ]; then
  echo "no TorchSpec source at '$src': set TORCHSPEC_SRC to a TorchSpec checkout or clone one into $dir/src" >&2
  exit 2
fi
src=$(cd "$src" && pwd)
if git -C "$src" rev-parse HEAD >/dev/null 2>&1; then
  commit=$(git -C "$src" rev-parse HEAD)
else
  commit=${TORCHSPEC_COMMIT:-unknown}
fi
version=$(cat "$src/version.txt" 2>/dev/null || echo unknown)
python3 -m venv "$dir/venv"
pip="$dir/venv/bin/pip"
q() { grep -v "is ignored: it is neither" || true; }
"$pip" install -q --upgrade pip setuptools wheel 2>&1 | q
"$pip" install -q "torch==2.13.0" 2>&1 | q
# transformers as pinned by the SGLang release TorchSpec's docker images build on (v0.5.10.post1),
# plus the modules the export/data/checkpoint paths import (ray: torchspec.config imports it
# through its mooncake helpers at package import).
"$pip" install -q "transformers==4.57.1" safetensors huggingface-hub "numpy<2.4" numba tqdm \
  typing-extensions omegaconf datasets pydantic psutil accelerate wandb ray 2>&1 | q
# TorchSpec is installed editable, as its docker images do (`pip install -e .`): its
# pyproject lists only the top-level package, so a plain install would lack torchspec.models.
"$pip" install -q --no-deps --no-build-isolation -e "$src" 2>&1 | q
"$pip" uninstall -q -y torchvision torchaudio torchcodec 2>/dev/null || true
"$dir/venv/bin/python" - <<PY
import json, torch, transformers
import torchspec.models.draft, torchspec.training.checkpoint, torchspec.data.preprocessing, torchspec.config.utils
json.dump({"src": "$src", "commit": "$commit", "version_txt": "$version"}, open("$dir/source.json", "w"))
print("torchspec env ok: torch", torch.__version__, "transformers", transformers.__version__, "commit $commit")
PY
touch "$stamp"
