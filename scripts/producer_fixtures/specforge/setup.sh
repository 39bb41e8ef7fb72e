#!/usr/bin/env bash
# Build SpecForge 0.2.0's own environment under DIR/venv (called by scripts/make_producer_fixtures.sh).
#
# SpecForge pins torch==2.11.0 and sglang; neither is needed to write a drafter: its draft model
# classes, its CheckpointManager and its `specforge export` path run with CPU torch 2.13.0 and the
# transformers it pins. So specforge goes in with --no-deps, plus only what those modules import.
# Idempotent: skipped when DIR/.complete exists.
set -euo pipefail
dir=${1:?usage: setup.sh DIR}
stamp="$dir/.complete"
[ -f "$stamp" ] && { echo "specforge env ready: $dir"; exit 0; }
mkdir -p "$dir"
python3 -m venv "$dir/venv"
pip="$dir/venv/bin/pip"
"$pip" install -q --upgrade pip
"$pip" install -q "torch==2.13.0"
# SpecForge's own pin for transformers, and the modules its export/modeling/training paths import.
"$pip" install -q "transformers==5.8.1" safetensors huggingface-hub numpy pyyaml pydantic psutil tqdm accelerate datasets \
  triton  # specforge.core.loss imports triton at module load (the kernels themselves are not run)
"$pip" install -q --no-deps "specforge==0.2.0"
# Never wanted here (they break `import transformers` with CPU torch when pulled in).
"$pip" uninstall -q -y torchvision torchaudio torchcodec 2>/dev/null || true
"$dir/venv/bin/python" -c "import specforge.modeling.draft, specforge.export, specforge.training.checkpoint, torch, transformers; print('specforge env ok: torch', torch.__version__, 'transformers', transformers.__version__)"
touch "$stamp"
