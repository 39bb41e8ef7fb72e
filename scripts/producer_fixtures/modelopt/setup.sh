#!/usr/bin/env bash
# Build nvidia-modelopt's own environment: setup.sh DIR  (venv at DIR/venv, stamp DIR/.setup-complete).
# modelopt is installed with --no-deps, then its core requirements and the part of its [hf] extra
# that the EAGLE convert + Hugging Face export path imports (transformers within modelopt's tested
# range <5.15, accelerate). No torchvision / torchaudio / torchcodec: they break `import transformers`
# when they do not match torch.
set -euo pipefail
dir=${1:?usage: setup.sh DIR}
stamp="$dir/.setup-complete"
if [ -f "$stamp" ]; then echo "modelopt environment ready ($dir/venv)"; exit 0; fi
python=${PYTHON:-python3.11}
command -v "$python" >/dev/null || python=python3
mkdir -p "$dir"
rm -rf "$dir/venv"
"$python" -m venv "$dir/venv"
pip=("$dir/venv/bin/python" -m pip install --no-input --disable-pip-version-check)
"${pip[@]}" "torch==2.13.0"
"${pip[@]}" --no-deps "nvidia-modelopt==0.47.0"
# modelopt's core requirements (less ninja: no extension is built on this path) ...
"${pip[@]}" "numpy" "nvidia-ml-py>=12" "packaging" "setuptools>=80" "tqdm" "PyYAML>=6.0" \
  "omegaconf>=2.3.0" "pulp<4.0" "pydantic>=2.0" "regex" "rich" "safetensors" "scipy"
# ... and from its [hf] extra what convert/export import (requests: modelopt.torch.utils imports it).
"${pip[@]}" "transformers>=4.57,<5.15" "accelerate>=1.0.0" "huggingface_hub>=0.24.0" "requests"
for p in torchvision torchaudio torchcodec; do
  if "$dir/venv/bin/python" -m pip show -q "$p" >/dev/null 2>&1; then
    "$dir/venv/bin/python" -m pip uninstall -y "$p"
  fi
done
"$dir/venv/bin/python" - <<'PY'
import importlib.metadata as m
import torch, transformers  # noqa: F401
import modelopt.torch.speculative as mtsp  # noqa: F401
import modelopt.torch.opt as mto  # noqa: F401
from modelopt.recipe import load_recipe  # noqa: F401
from modelopt.torch.export import export_hf_checkpoint, export_speculative_decoding  # noqa: F401
print("nvidia-modelopt", m.version("nvidia-modelopt"), "torch", torch.__version__,
      "transformers", transformers.__version__)
assert m.version("nvidia-modelopt") == "0.47.0"
PY
touch "$stamp"
