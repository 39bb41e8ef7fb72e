#!/usr/bin/env bash
# Engine environments for the engine-code tier (docs/engine-code.md): one virtualenv per engine release
# whose engine cannot run on this CPU machine, holding the release's own wheel (installed --no-deps) and
# only what its configuration-level modules need to import here.
#
#   scripts/engine_envs.sh [DIR]        # default .work/engines (git-ignored); idempotent
#
# DIR/<engine>-<version>/venv           the environment (python3.11: the SGLang wheel is cp311)
# DIR/<engine>-<version>/.complete      stamp: JSON with the wheel, its sha256, python and package versions;
#                                       a stamp made by another revision of this script is rebuilt
# DIR/wheels/                           the wheels, fetched with `pip download --no-deps` when absent
#                                       (EAGLEHUB_ENGINE_WHEELS: a folder to take them from first)
#
# vLLM 0.32 (the CPU build) is eaglehub's own .venv (`make setup`); it needs nothing here.
# TORCH_PKG (default torch==2.13.0, the CPU build on CPU machines) is the torch both environments get:
# neither engine's pinned torch (2.14.x CUDA) is needed to import their configuration code.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-.work/engines}
python=${PYTHON:-python3.11}
command -v "$python" >/dev/null || python=python3
torch_pkg=${TORCH_PKG:-torch==2.13.0}
recipe=$(sha256sum "$0" | cut -c1-16)
mkdir -p "$dir/wheels"

# Distributions installed next to each wheel, beyond torch and transformers. Each is installed with the
# version specifier the release itself declares (its wheel's Requires-Dist) where it declares one.
# vLLM 0.33.0: what vllm.config / vllm.v1.worker.* / vllm.model_executor.models.* import at module level.
VLLM_DEPS=(cbor2 prometheus_client psutil pyzmq aiohttp requests openai-harmony openai pillow msgspec
  cloudpickle pybase64 cachetools uvloop py-cpuinfo xgrammar fastapi partial-json-parser einops llguidance
  compressed-tensors safetensors)
# SGLang 0.5.23: what sglang.srt.configs / server_args / models.llama_eagle3 / model_loader import
# (triton: imported at module level by its layers, dill by its sampling module; SGLang declares neither), and
# prometheus_client, which its metric collectors import (scripts/sglang_fixtures.py builds /metrics with them).
SGLANG_DEPS=(orjson psutil pybase64 requests triton==3.9.0 pillow starlette msgspec pyzmq IPython aiohttp einops
  openai apache-tvm-ffi compressed-tensors gguf partial-json-parser sentencepiece safetensors dill prometheus_client)

wheel_for() { # engine version -> path of its wheel
  local engine=$1 version=$2 found
  found=$(ls "$dir/wheels/$engine-$version-"*.whl 2>/dev/null | head -1 || true)
  if [ -z "$found" ] && [ -n "${EAGLEHUB_ENGINE_WHEELS:-}" ]; then
    found=$(ls "$EAGLEHUB_ENGINE_WHEELS/$engine-$version-"*.whl 2>/dev/null | head -1 || true)
    [ -n "$found" ] && cp "$found" "$dir/wheels/" && found="$dir/wheels/$(basename "$found")"
  fi
  if [ -z "$found" ]; then
    "$python" -m pip download -q --no-deps --only-binary=:all: --python-version 3.11 -d "$dir/wheels" "$engine==$version" >&2
    found=$(ls "$dir/wheels/$engine-$version-"*.whl | head -1)
  fi
  echo "$found"
}

expected_sha() { # engine version -> the sha256 its committed table records (empty when no table yet)
  local table="eaglehub/data/engines/$1-$2.json"
  [ -f "$table" ] || return 0
  "$python" -c 'import json,sys; print(json.load(open(sys.argv[1]))["source"].get("sha256",""))' "$table"
}

build() { # engine version deps...
  local engine=$1 version=$2
  shift 2
  local home="$dir/$engine-$version" start=$SECONDS
  local stamp="$home/.complete"
  if [ -f "$stamp" ] && grep -q "\"recipe\": \"$recipe\"" "$stamp"; then
    echo "$engine $version: ready ($home/venv)"
    return 0
  fi
  local wheel sha want
  wheel=$(wheel_for "$engine" "$version")
  sha=$(sha256sum "$wheel" | cut -d' ' -f1)
  want=$(expected_sha "$engine" "$version")
  if [ -n "$want" ] && [ "$want" != "$sha" ]; then
    echo "$wheel: sha256 $sha, but eaglehub/data/engines/$engine-$version.json records $want" >&2
    exit 1
  fi
  echo "$engine $version: building $home/venv from $(basename "$wheel")"
  rm -rf "$home"
  mkdir -p "$home"
  "$python" -m venv "$home/venv"
  local py="$home/venv/bin/python"
  local pip=("$py" -m pip install -q --no-input --disable-pip-version-check --no-warn-conflicts)
  "${pip[@]}" --no-deps "$wheel"
  # the release's own specifiers for the distributions named above (and for transformers)
  mapfile -t reqs < <("$py" - "$engine" "$@" <<'PY'
import importlib.metadata as md, re, sys
engine, names = sys.argv[1], sys.argv[2:]
declared = {}
for req in md.requires(engine) or []:
    if "extra ==" in req:
        continue
    m = re.match(r"\s*([A-Za-z0-9_.\-\[\]]+)\s*(.*)", req)
    name = re.sub(r"\[.*\]", "", m.group(1)).lower().replace("_", "-")
    spec, _, marker = m.group(2).partition(";")
    if marker and "platform_machine" in marker and "x86_64" not in marker:
        continue
    declared.setdefault(name, spec.strip().strip("()"))
for name in ["transformers", *names]:
    if re.search(r"[=<>!~]", name):
        print(name)
        continue
    key = name.lower().replace("_", "-")
    print(name + declared.get(key, ""))
PY
)
  "${pip[@]}" "$torch_pkg" "${reqs[@]}"
  # torchvision / torchaudio are never installed: no build on the index matches a CPU torch (the CUDA
  # builds fail at import); engine_reading.py stands in for the few module-level imports of them.
  for p in torchvision torchaudio torchcodec; do
    if "$py" -m pip show -q "$p" >/dev/null 2>&1; then "$py" -m pip uninstall -q -y "$p"; fi
  done
  if ! HF_HUB_OFFLINE=1 "$py" scripts/engine_reading.py --check-imports >"$home/check-imports.json" 2>"$home/check-imports.log"; then
    tail -20 "$home/check-imports.log" >&2
    echo "$engine $version: a module the engine-code tier needs does not import ($home/check-imports.json)" >&2
    exit 1
  fi
  "$py" -I - "$engine" "$version" "$(basename "$wheel")" "$sha" "$recipe" "$stamp" <<'PY'
import importlib.metadata as md, json, sys, platform
engine, version, wheel, sha, recipe, stamp = sys.argv[1:]
assert md.version(engine) == version, (engine, md.version(engine), version)
packages = {d.metadata["Name"].lower(): d.version for d in md.distributions()}
json.dump({"engine": engine, "version": version, "wheel": wheel, "sha256": sha, "recipe": recipe,
           "python": platform.python_version(), "packages": dict(sorted(packages.items()))},
          open(stamp, "w"), indent=1)
PY
  echo "$engine $version: ready in $((SECONDS - start)) s ($home/venv)"
}

build vllm 0.33.0 "${VLLM_DEPS[@]}"
build sglang 0.5.23 "${SGLANG_DEPS[@]}"
