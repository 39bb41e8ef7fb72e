#!/usr/bin/env bash
# Build speculators' own environment: setup.sh DIR  (venv at DIR/venv, stamp DIR/.setup-complete).
# speculators is installed with --no-deps, then only what its convert / model / train code imports.
# Its declared torchvision / torchaudio dependencies are left out: nothing on these paths uses
# them, and a torchvision that does not match torch breaks `import transformers`.
set -euo pipefail
dir=${1:?usage: setup.sh DIR}
stamp="$dir/.setup-complete"
if [ -f "$stamp" ]; then echo "speculators environment ready ($dir/venv)"; exit 0; fi
python=${PYTHON:-python3.11}
command -v "$python" >/dev/null || python=python3
mkdir -p "$dir"
rm -rf "$dir/venv"
"$python" -m venv "$dir/venv"
pip=("$dir/venv/bin/python" -m pip install --no-input --disable-pip-version-check)
"${pip[@]}" "torch==2.13.0"
"${pip[@]}" --no-deps "speculators==0.9.0" "hs-connectors==0.9.0"
# What speculators imports on the convert, model, save and train paths (transformers is pinned
# to its own upper bound, <=5.19.0).
"${pip[@]}" "transformers==5.19.0" "safetensors" "pydantic>=2" "pydantic-settings>=2" \
  "loguru>=0.7.2,<=0.7.3" "typer>=0.12" "click" "rich" "tqdm>=4.66.3,<=4.70.1" \
  "numpy>=2,<=2.5.4" "huggingface-hub" "datasets>=4,<=5.1.0" "psutil" "protobuf" "pyyaml" \
  "httpx" "aiohttp" "openai>=2"
for p in torchvision torchaudio torchcodec; do
  if "$dir/venv/bin/python" -m pip show -q "$p" >/dev/null 2>&1; then
    "$dir/venv/bin/python" -m pip uninstall -y "$p"
  fi
done
"$dir/venv/bin/python" - <<'PY'
import importlib.metadata as m
import torch, transformers, speculators  # noqa: F401
from speculators.models.eagle3 import Eagle3SpeculatorConfig  # noqa: F401
print("speculators", m.version("speculators"), "torch", torch.__version__,
      "transformers", transformers.__version__)
assert m.version("speculators") == "0.9.0"
PY
touch "$stamp"
