"""What an engine release builds from EAGLE-3 drafter checkpoints, obtained by running that engine's own code
(docs/engine-code.md). Run with the engine's python; this script never imports eaglehub (the engine's
environment may lack eaglehub's dependencies):

    .venv/bin/python scripts/engine_reading.py --profile vllm-0.32-cpu DIR [DIR ...]
    .work/engines/vllm-0.33.0/venv/bin/python scripts/engine_reading.py --profile vllm-0.33-gpu DIR ...
    .work/engines/sglang-0.5.23/venv/bin/python scripts/engine_reading.py --profile sglang-0.5.23 DIR ...
    PY scripts/engine_reading.py --check-imports      # which engine modules import here (JSON)

stdout: a JSON list, one object per drafter directory, with the keys of ``FIELDS`` (eaglehub's
``eaglehub.profiles.Reading.as_dict()`` uses the same vocabulary) plus ``dir``, ``unavailable`` (fields the
engine's code could not give here) and ``notes`` (why, and anything else worth knowing). Everything the
engines log goes to stderr.

How each engine is driven, per drafter:

* vLLM (0.32 CPU build in .venv; 0.33.0's CUDA wheel with ``VLLM_TARGET_DEVICE=cpu``, which selects its
  CpuPlatform): a tiny Llama target is written next to the drafter's config (hidden size =
  the drafter's ``target_hidden_size``, vocabulary and context = the drafter's, so that nothing the target
  brings changes the reading); ``SpeculativeConfig(model=DIR, method="eagle3", ...)`` builds the draft
  config exactly as ``vllm serve --speculative-config`` does (config loading, the speculators adapter,
  ``EAGLEConfig``); the registry resolves the class; the runner's own aux-layer lookup gives the ids the
  target is made to capture (V1: ``GPUModelRunner._get_eagle3_aux_layers_from_config``, MRV2:
  ``v1/worker/gpu/spec_decode/eagle/eagle3_utils.get_eagle3_aux_layers_from_config``); the model
  loader's ``create_model`` instantiates the drafter on CPU and its ``load_weights`` loads the checkpoint.
  Dimensions and flags are read off the instantiated modules.
* SGLang 0.5.23 (its wheel, CPU): ``ServerArgs(speculative_algorithm="EAGLE3", ...)`` is published to the
  runtime context, ``ModelConfig.from_server_args(..., is_draft_model=True)`` reads the drafter,
  ``resolve_spec_aux_hidden_state_config`` gives the capture ids, ``get_model_architecture`` the class,
  ``_initialize_model`` instantiates it on CPU and ``DefaultModelLoader.load_weights_and_postprocess``
  loads it. Construction-only stand-ins (``STANDINS``) replace three imports that have no CPU build here
  and are only used by code this script never runs (vision/audio preprocessing, a RoPE kernel called
  in forward); calling anything in them raises.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.abc
import importlib.machinery
import json
import os
import shutil
import sys
import tempfile
import traceback
import types


def _reading_fields() -> tuple[str, ...]:
    """``FIELDS`` of eaglehub/profiles/reading.py, parsed (this script never imports eaglehub: the engine's
    environment does not hold its dependencies), so the two vocabularies cannot drift apart."""
    import ast
    from pathlib import Path

    source = Path(__file__).resolve().parent.parent / "eaglehub" / "profiles" / "reading.py"
    for node in ast.parse(source.read_text()).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "FIELDS" for t in node.targets):
            return tuple(ast.literal_eval(node.value))
    raise SystemExit(f"no FIELDS in {source}")


FIELDS = _reading_fields()

#: profile id -> (engine, release prefix, runner)
PROFILES = {
    "vllm-0.32-cpu": ("vllm", "0.32.", "v1"),
    "vllm-0.32-gpu": ("vllm", "0.32.", "mrv2"),
    "vllm-0.33-gpu": ("vllm", "0.33.", "mrv2"),
    "vllm-0.33-v1": ("vllm", "0.33.", "v1"),
    "sglang-0.5.23": ("sglang", "0.5.23", None),
}

#: per engine: the modules this tier relies on (``--check-imports`` fails when one does not import)
REQUIRED_MODULES = {
    "vllm": (
        "vllm.config",
        "vllm.config.speculative",
        "vllm.transformers_utils.config",
        "vllm.transformers_utils.configs.eagle",
        "vllm.transformers_utils.configs.speculators.base",
        "vllm.transformers_utils.configs.speculators.algos",
        "vllm.model_executor.models.registry",
        "vllm.model_executor.models.interfaces",
        "vllm.model_executor.models.llama_eagle3",
        "vllm.model_executor.models.qwen3_eagle3",
        "vllm.model_executor.models.deepseek_eagle3",
        "vllm.model_executor.model_loader",
        "vllm.distributed",
        "vllm.v1.worker.gpu_model_runner",
        "vllm.v1.worker.gpu.spec_decode.eagle.eagle3_utils",
        "vllm.v1.spec_decode.metrics",
    ),
    "sglang": (
        "sglang.srt.configs.model_config",
        "sglang.srt.server_args",
        "sglang.srt.runtime_context",
        "sglang.srt.speculative.spec_info",
        "sglang.srt.speculative.eagle_utils",
        "sglang.srt.model_executor.model_runner_components.spec_aux_hidden_state",
        "sglang.srt.models.llama_eagle3",
        "sglang.srt.models.kimi_k25_eagle3",
        "sglang.srt.model_loader",
        "sglang.srt.model_loader.loader",
        "sglang.srt.distributed.parallel_state",
        "sglang.srt.entrypoints.openai.protocol",
        "sglang.srt.observability.metrics_collector",
    ),
}
#: modules that are reported (not required): what else a reader of the engine would want, and does not get
PROBED_MODULES = {
    "vllm": (
        "vllm._C",
        "vllm.v1.worker.gpu.model_runner",
        "vllm.v1.worker.cpu_model_runner",
        "vllm.v1.spec_decode.eagle",
        "vllm.v1.attention.backends.flash_attn",
        "vllm.v1.attention.backends.flashinfer",
        "vllm.v1.metrics.loggers",
        "vllm.engine.arg_utils",
        "vllm.entrypoints.openai.api_server",
        "vllm.v1.engine.core",
        "vllm.v1.worker.gpu_worker",
    ),
    "sglang": (
        "sgl_kernel",
        "sglang.srt.models.registry",
        "sglang.srt.model_executor.model_runner",
        "sglang.srt.speculative.eagle_worker_v2",
        "sglang.srt.managers.scheduler",
        "sglang.srt.entrypoints.openai.serving_completions",
        "sglang.srt.entrypoints.http_server",
    ),
}

#: construction-only stand-ins per engine: module name -> "package" (any submodule, inert attributes) or
#: "module" (exactly this module, attributes that raise when called). See the module docstring.
STANDINS = {
    "vllm": {},
    "sglang": {
        # sglang.srt.configs/__init__ imports VL configs that import torchvision.transforms at module level;
        # no torchvision build on the index matches a CPU torch (the CUDA build fails at import)
        "torchvision": "package",
        # imported at module level by audio model modules the layers package pulls in
        "torchaudio": "package",
        # RotaryEmbedding.__init__ imports vllm._custom_ops.rotary_embedding on a platform that is neither
        # CUDA nor SGLang's CPU engine (layers/rotary_embedding/base.py); it is only called in forward
        "vllm": "namespace",
        "vllm._custom_ops": "module",
    },
}
STOOD_IN: dict[str, set[str]] = {}


def _free_port() -> int:
    """A port on 127.0.0.1 nothing listens on, for the one-process gloo group the drafter classes need."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _Inert:
    """An attribute of a stood-in package: can be subclassed, called, iterated; does nothing."""

    def __init__(self, *args, **kwargs):
        pass

    def __call__(self, *args, **kwargs):
        return _Inert()

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Inert()

    def __iter__(self):
        return iter(())

    def __mro_entries__(self, bases):
        return (object,)


class _InertModule(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Inert()


class _RaisingModule(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)

        def unavailable(*args, **kwargs):
            raise RuntimeError(f"{self.__name__}.{name} is a construction-only stand-in (scripts/engine_reading.py)")

        return unavailable


class _StandIns(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Claims the stood-in names only when the engine's own code imports them: other importers (transformers'
    availability probes) keep seeing the package as absent, as it is."""

    def __init__(self, table: dict[str, str], engine: str):
        self.table = table
        self.engine = engine

    def _kind(self, name: str) -> str | None:
        if name in self.table:
            return self.table[name]
        top = name.split(".")[0]
        return "package" if self.table.get(top) == "package" else None

    def find_spec(self, name, path=None, target=None):
        kind = self._kind(name)
        if kind is None:
            return None
        importer = "?"
        frame = sys._getframe(1)
        while frame is not None:
            mod = frame.f_globals.get("__name__", "")
            if mod and not mod.startswith(("importlib", "_frozen_importlib")) and mod != __name__:
                importer = mod
                break
            frame = frame.f_back
        if importer.split(".")[0] != self.engine:
            return None
        STOOD_IN.setdefault(name, set()).add(importer)
        return importlib.machinery.ModuleSpec(name, self, is_package=kind in ("package", "namespace"))

    def create_module(self, spec):
        kind = self._kind(spec.name)
        cls = {"package": _InertModule, "module": _RaisingModule}.get(kind, types.ModuleType)
        module = cls(spec.name)
        if kind in ("package", "namespace"):
            module.__path__ = []
        return module

    def exec_module(self, module):
        pass


def install_standins(engine: str) -> None:
    table = STANDINS.get(engine) or {}
    if table:
        import transformers.utils.import_utils  # noqa: F401  (its availability probes run first, and see none)

        sys.meta_path.insert(0, _StandIns(table, engine))


def installed_engine() -> tuple[str, str]:
    import importlib.metadata as md

    for engine in ("vllm", "sglang"):
        try:
            return engine, md.version(engine)
        except md.PackageNotFoundError:
            continue
    with contextlib.suppress(md.PackageNotFoundError):
        return "vllm", md.version("vllm-cpu")  # the CPU build's distribution name
    raise SystemExit("neither vllm nor sglang is installed in this python")


def quiet_env(engine: str) -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if engine == "vllm":
        os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
        # the CUDA wheel on a machine without a GPU: select its CPU platform (the CPU build has it already)
        os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    install_standins(engine)


def short_error(exc: BaseException, limit: int = 300) -> str:
    text = f"{type(exc).__name__}: {exc}".replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 1] + "…"


# ------------------------------------------------------------------------------------------------
# shared helpers
# ------------------------------------------------------------------------------------------------


def _int(v):
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _rope(hf) -> tuple[str | None, float | None]:
    params = getattr(hf, "rope_parameters", None) or getattr(hf, "rope_scaling", None) or {}
    if isinstance(params, dict) and "full_attention" in params and isinstance(params["full_attention"], dict):
        params = params["full_attention"]
    rtype = params.get("rope_type", params.get("type")) if isinstance(params, dict) else None
    theta = params.get("rope_theta") if isinstance(params, dict) else None
    if theta is None:
        theta = getattr(hf, "rope_theta", None)
    return (rtype if isinstance(rtype, str) else "default"), (float(theta) if isinstance(theta, (int, float)) else None)


def write_target(root: str, hidden: int, vocab: int, context: int) -> str:
    """A tiny Llama target (config only) that changes nothing in the drafter's reading."""
    path = os.path.join(root, "target")
    os.makedirs(path, exist_ok=True)
    cfg = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": hidden,
        "num_hidden_layers": 8,
        "num_attention_heads": 1,
        "num_key_value_heads": 1,
        "head_dim": hidden,
        "intermediate_size": 2 * hidden,
        "vocab_size": vocab,
        "max_position_embeddings": context,
        "rms_norm_eps": 1e-5,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
    }
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(cfg, f)
    return path


class Reading:
    def __init__(self, profile: str, path: str):
        self.out: dict = dict.fromkeys(FIELDS)
        self.out["profile"] = profile
        self.out["dir"] = path
        self.unavailable: dict[str, str] = {}
        self.notes: list[str] = []

    def set(self, **kw):
        self.out.update(kw)

    def missing(self, why: str, *fields: str) -> None:
        for f in fields:
            self.unavailable.setdefault(f, why)

    def failed(self, stage: str, exc: BaseException) -> None:
        """The engine raised at ``stage``: it builds nothing, so every field still unset has no engine value."""
        self.out["loads"] = False
        self.out["load_error"] = short_error(exc)
        self.notes.append(f"{stage} raised: {short_error(exc, 600)}")
        for f in FIELDS:
            if self.out[f] is None and f not in ("profile", "loads", "load_error"):
                self.unavailable.setdefault(f, f"the engine raised at {stage}")

    def result(self) -> dict:
        out = dict(self.out)
        out["unavailable"] = sorted(self.unavailable)
        reasons: dict[str, list[str]] = {}
        for f, why in self.unavailable.items():
            reasons.setdefault(why, []).append(f)
        out["notes"] = self.notes + [f"{', '.join(sorted(fs))}: {why}" for why, fs in reasons.items()]
        return out


# ------------------------------------------------------------------------------------------------
# vLLM
# ------------------------------------------------------------------------------------------------


class VllmReader:
    def __init__(self, profile: str, runner: str):
        import torch  # noqa: F401
        from vllm.config import (
            ModelConfig,
            ParallelConfig,
            SpeculativeConfig,
            VllmConfig,
            set_current_vllm_config,
        )
        from vllm.model_executor.model_loader import get_model_loader
        from vllm.model_executor.models.registry import ModelRegistry
        from vllm.transformers_utils.config import get_config

        self.profile, self.runner = profile, runner
        self.ModelConfig, self.ParallelConfig, self.SpeculativeConfig = ModelConfig, ParallelConfig, SpeculativeConfig
        self.VllmConfig, self.set_current_vllm_config = VllmConfig, set_current_vllm_config
        self.get_model_loader, self.registry, self.get_config = get_model_loader, ModelRegistry, get_config
        if runner == "v1":
            from vllm.v1.worker.gpu_model_runner import GPUModelRunner

            def lookup(spec_config):
                # an unbound call: the method reads self.speculative_config only
                return GPUModelRunner._get_eagle3_aux_layers_from_config(
                    types.SimpleNamespace(speculative_config=spec_config)
                )

        else:
            from vllm.v1.worker.gpu.spec_decode.eagle.eagle3_utils import get_eagle3_aux_layers_from_config

            lookup = get_eagle3_aux_layers_from_config
        self.aux_lookup = lookup
        self.distributed = False

    def _init_distributed(self) -> None:
        if self.distributed:
            return
        from vllm.distributed import init_distributed_environment, initialize_model_parallel

        port = _free_port()
        init_distributed_environment(
            world_size=1, rank=0, local_rank=0, distributed_init_method=f"tcp://127.0.0.1:{port}", backend="gloo"
        )
        initialize_model_parallel(1, 1)
        self.distributed = True

    def read(self, path: str, work: str) -> dict:
        import torch

        r = Reading(self.profile, path)
        # 1. the config as vLLM loads it (speculators adapter included): sizes the tiny target
        try:
            raw = self.get_config(path, trust_remote_code=False)
        except Exception as exc:
            r.failed("config loading (vllm.transformers_utils.config.get_config)", exc)
            return r.result()
        hidden = _int(getattr(raw, "target_hidden_size", None)) or _int(getattr(raw, "hidden_size", None)) or 64
        vocab = _int(getattr(raw, "vocab_size", None)) or 256
        context = _int(getattr(raw, "max_position_embeddings", None)) or 2048
        target = write_target(work, hidden, vocab, min(context, 1 << 20))
        # 2. the draft config exactly as the engine builds it for --speculative-config
        try:
            tmc = self.ModelConfig(model=target, tokenizer=target, skip_tokenizer_init=True, dtype="bfloat16")
            sc = self.SpeculativeConfig(
                model=path,
                method="eagle3",
                num_speculative_tokens=3,
                target_model_config=tmc,
                target_parallel_config=self.ParallelConfig(),
            )
        except Exception as exc:
            r.failed("SpeculativeConfig", exc)
            return r.result()
        dmc = sc.draft_model_config
        hf = dmc.hf_config
        rtype, theta = _rope(hf)
        r.set(
            max_position_embeddings=_int(getattr(hf, "max_position_embeddings", None)),
            rope_type=rtype,
            rope_theta=theta,
            quantization=dmc.quantization,
        )
        try:
            ids = self.aux_lookup(sc)
            r.set(aux_layer_ids=list(ids) if ids else None)
        except Exception as exc:
            r.notes.append(f"aux-layer lookup raised: {short_error(exc)}")
            r.missing("the runner's aux-layer lookup raised", "aux_layer_ids")
        try:
            cls, _arch = self.registry.resolve_model_cls(dmc.architectures, dmc)
            r.set(model_class=cls.__name__)
        except Exception as exc:
            r.failed("registry resolution", exc)
            return r.result()
        # 3. instantiate the drafter on CPU with the loader the proposer uses, then load its weights
        try:
            vc = self.VllmConfig(model_config=tmc, speculative_config=sc)
            loader = self.get_model_loader(vc.load_config)
            from vllm.utils.torch_utils import set_default_torch_dtype

            with self.set_current_vllm_config(vc):
                self._init_distributed()
                with set_default_torch_dtype(dmc.dtype), torch.device("cpu"):
                    model = loader.create_model(vllm_config=vc, model_config=dmc)
        except Exception as exc:
            r.notes.append("".join(traceback.format_exception_only(type(exc), exc)).strip()[:600])
            r.failed("drafter construction", exc)
            return r.result()
        self._from_model(r, model, hf)
        try:
            with self.set_current_vllm_config(vc):
                loader.load_weights(model, dmc)
            r.set(loads=True, load_error=None)
        except Exception as exc:
            r.set(loads=False, load_error=short_error(exc))
        return r.result()

    @staticmethod
    def _from_model(r: Reading, model, hf) -> None:
        inner = getattr(model, "model", model)
        layers = list(getattr(inner, "layers", []))
        fc = getattr(inner, "fc", None)
        # Llama / MLA classes: num_aux_hidden_states; the Qwen3 class: num_aux_layers
        A = _int(getattr(inner, "num_aux_hidden_states", None)) or _int(getattr(inner, "num_aux_layers", None))
        fc_in = _int(getattr(fc, "input_size", None)) if fc is not None else None
        r.set(
            parameter_names=sorted(n for n, _ in model.named_parameters()),
            num_hidden_layers=len(layers),
            num_aux_hidden_states=A,
            target_hidden_size=fc_in // A if fc_in and A else None,
            hidden_size=_int(getattr(fc, "output_size", None)) or _int(getattr(hf, "hidden_size", None)),
            fc_norm=getattr(inner, "fc_norm", None) is not None,
            norm_output=bool(getattr(inner, "norm_output", False)),
            norm_before_fc=bool(getattr(inner, "norm_before_fc", False)),
            vocab_map=getattr(model, "draft_id_to_target_id", None) is not None,
        )
        if fc is None:
            r.missing("the drafter has no fc (use_aux_hidden_state false)", "target_hidden_size")
        embed, head = getattr(inner, "embed_tokens", None), getattr(model, "lm_head", None)
        r.set(
            vocab_size=_int(getattr(embed, "org_vocab_size", None)),
            draft_vocab_size=_int(getattr(head, "org_vocab_size", None)),
            tie_word_embeddings=head is not None
            and embed is not None
            and getattr(head, "weight", None) is getattr(embed, "weight", object()),
        )
        norm = getattr(inner, "norm", None)
        eps = getattr(norm, "variance_epsilon", None)
        r.set(rms_norm_eps=float(eps) if isinstance(eps, (int, float)) else None)
        if layers:
            attn = layers[0].self_attn
            r.set(
                num_attention_heads=_int(getattr(attn, "total_num_heads", None))
                or _int(getattr(attn, "num_heads", None)),
                num_key_value_heads=_int(getattr(attn, "total_num_kv_heads", None)),
                head_dim=_int(getattr(attn, "head_dim", None)),
            )
            if r.out["num_key_value_heads"] is None:
                r.missing("MLA attention has no key/value heads of its own", "num_key_value_heads")
            if r.out["head_dim"] is None:
                r.missing("MLA attention has no single head_dim", "head_dim")
            qkv = getattr(attn, "qkv_proj", None)
            o = getattr(attn, "o_proj", None)
            if qkv is not None:
                r.set(attention_bias=getattr(qkv, "bias", None) is not None)
                o_bias = getattr(o, "bias", None) is not None
                if o_bias != r.out["attention_bias"]:
                    r.notes.append(f"o_proj bias built: {o_bias} (q/k/v bias: {r.out['attention_bias']})")
            else:
                r.set(attention_bias=any(getattr(m, "bias", None) is not None for m in attn.modules() if m is not attn))
            mlp = layers[0].mlp
            gate_up = getattr(mlp, "gate_up_proj", None)
            down = getattr(mlp, "down_proj", None)
            r.set(
                mlp_bias=getattr(gate_up, "bias", None) is not None,
                intermediate_size=_int(getattr(down, "input_size", None)),
            )
            residual = getattr(layers[0], "_residual_norm", None)
            if residual is not None:
                r.set(norm_before_residual=getattr(residual, "__name__", "") == "_norm_before_residual")
            else:
                r.set(norm_before_residual=bool(getattr(hf, "norm_before_residual", False)))
                r.notes.append("norm_before_residual: this class has no _residual_norm; read from its config")
            windows = []
            for layer in layers:
                inner_attn = getattr(layer.self_attn, "attn", None)
                windows.append(_int(getattr(inner_attn, "sliding_window", None)))
            r.set(sliding_windows=windows)


# ------------------------------------------------------------------------------------------------
# SGLang
# ------------------------------------------------------------------------------------------------


class SglangReader:
    def __init__(self, profile: str):
        import torch  # noqa: F401
        from sglang.srt import runtime_context
        from sglang.srt.configs.load_config import LoadConfig
        from sglang.srt.configs.model_config import ModelConfig
        from sglang.srt.model_executor.model_runner_components.spec_aux_hidden_state import (
            resolve_spec_aux_hidden_state_config,
        )
        from sglang.srt.server_args import ServerArgs
        from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

        self.profile = profile
        self.rc, self.LoadConfig, self.ModelConfig, self.ServerArgs = (
            runtime_context,
            LoadConfig,
            ModelConfig,
            ServerArgs,
        )
        self.resolve_aux = resolve_spec_aux_hidden_state_config
        self.algorithm = SpeculativeAlgorithm.EAGLE3
        self.distributed = False

    def _init_distributed(self) -> None:
        if self.distributed:
            return
        from sglang.srt.distributed.parallel_state import init_distributed_environment, initialize_model_parallel

        port = _free_port()
        init_distributed_environment(
            backend="gloo", world_size=1, rank=0, local_rank=0, distributed_init_method=f"tcp://127.0.0.1:{port}"
        )
        initialize_model_parallel(backend="gloo")
        self.distributed = True

    def read(self, path: str, work: str) -> dict:
        import torch

        r = Reading(self.profile, path)
        try:
            with open(os.path.join(path, "config.json")) as f:
                raw = json.load(f)
        except Exception as exc:
            r.failed("reading config.json", exc)
            return r.result()
        hidden = _int(raw.get("target_hidden_size")) or _int(raw.get("hidden_size")) or 64
        target = write_target(
            work, hidden, _int(raw.get("vocab_size")) or 256, _int(raw.get("max_position_embeddings")) or 2048
        )
        try:
            sa = self.ServerArgs(
                model_path=target,
                device="cpu",
                speculative_algorithm="EAGLE3",
                speculative_draft_model_path=path,
                skip_tokenizer_init=True,
                speculative_num_steps=3,
                speculative_eagle_topk=1,
                speculative_num_draft_tokens=4,
                mem_fraction_static=0.5,
            )
            self.rc.publish(sa, role="scheduler", ranks=self.rc.SpawnRanks(world_rank=0))
            tmc = self.ModelConfig.from_server_args(sa)
            dmc = self.ModelConfig.from_server_args(sa, model_path=path, is_draft_model=True)
        except Exception as exc:
            r.failed("ServerArgs / ModelConfig", exc)
            return r.result()
        hf = dmc.hf_config
        rtype, theta = _rope(hf)
        r.set(
            max_position_embeddings=_int(getattr(hf, "max_position_embeddings", None)),
            rope_type=rtype,
            rope_theta=theta,
            quantization=dmc.quantization,
        )
        try:
            aux = self.resolve_aux(
                server_args=sa, model_config=tmc, spec_algorithm=self.algorithm, is_draft_worker=False
            )
            ids = aux.eagle_aux_hidden_state_layer_ids
            r.set(aux_layer_ids=list(ids) if ids else None)
        except Exception as exc:
            r.notes.append(f"resolve_spec_aux_hidden_state_config raised: {short_error(exc)}")
            r.missing("the runner's aux-layer resolution raised", "aux_layer_ids")
        try:
            from sglang.srt.model_loader.utils import get_model_architecture

            cls, _arch = get_model_architecture(dmc)
            r.set(model_class=cls.__name__)
        except Exception as exc:
            r.failed("get_model_architecture", exc)
            return r.result()
        from sglang.srt.model_loader import get_model_loader
        from sglang.srt.model_loader import loader as loader_mod

        try:
            load_config = self.LoadConfig(load_format="auto")
            loader = get_model_loader(load_config, dmc)
            self._init_distributed()
            quant = loader_mod._get_quantization_config(dmc, load_config)
            with loader_mod.set_default_torch_dtype(dmc.dtype), torch.device("cpu"):
                model = loader_mod._initialize_model(dmc, load_config, quant)
        except Exception as exc:
            r.failed("drafter construction (_initialize_model)", exc)
            return r.result()
        self._from_model(r, model, hf)
        try:
            loader.load_weights_and_postprocess(model, loader._get_all_weights(dmc, model), torch.device("cpu"))
            # right after loading, the EAGLE-3 worker reads the drafter's hot-token map
            # (speculative/eagle_worker_v2.py L366, `self.draft_runner.model.hot_token_id`): a class the registry
            # builds that is no EAGLE-3 drafter (a target class) has none and raises there
            hot = model.hot_token_id
            r.set(loads=True, load_error=None, vocab_map=hot is not None)
        except Exception as exc:
            r.set(loads=False, load_error=short_error(exc))
            r.missing("SGLang's d2t map (hot_token_id) exists only after a load that succeeds", "vocab_map")
        return r.result()

    @staticmethod
    def _from_model(r: Reading, model, hf) -> None:
        import inspect

        inner = getattr(model, "model", model)
        # the Llama drafter keeps its decoder layers in `layers`; the MLA (Kimi-K2.5) drafter has one `midlayer`
        layers = list(getattr(inner, "layers", None) or [])
        if not layers and getattr(inner, "midlayer", None) is not None:
            layers = [inner.midlayer]
            r.notes.append("the drafter class builds a single midlayer whatever num_hidden_layers says")
        fc = getattr(inner, "fc", None)
        A = _int(getattr(inner, "num_aux_hidden_states", None))
        fc_in = _int(getattr(fc, "in_features", None)) or _int(getattr(fc, "input_size", None))
        fc_out = _int(getattr(fc, "out_features", None)) or _int(getattr(fc, "output_size", None))
        embed, head = getattr(inner, "embed_tokens", None), getattr(model, "lm_head", None)
        eps = getattr(getattr(inner, "norm", None), "variance_epsilon", None)
        r.set(
            parameter_names=sorted(n for n, _ in model.named_parameters()),
            num_hidden_layers=len(layers),
            num_aux_hidden_states=A,
            target_hidden_size=fc_in // A if fc_in and A else None,
            hidden_size=fc_out or _int(getattr(hf, "hidden_size", None)),
            fc_norm=getattr(inner, "fc_norm", None) is not None,
            norm_output=bool(getattr(inner, "norm_output", False)),
            norm_before_fc=bool(getattr(inner, "norm_before_fc", False)),
            vocab_size=_int(getattr(embed, "org_vocab_size", None)),
            draft_vocab_size=_int(getattr(head, "org_vocab_size", None)),
            tie_word_embeddings=head is not None and head is embed,
            rms_norm_eps=float(eps) if isinstance(eps, (int, float)) else None,
        )
        if fc is not None and getattr(fc, "bias", None) is not None:
            r.notes.append("fc has a bias (config key 'bias')")
        if layers:
            attn = layers[0].self_attn
            qkv = getattr(attn, "qkv_proj", None)
            mlp = layers[0].mlp
            heads = next(
                (
                    _int(getattr(attn, k, None))
                    for k in ("total_num_heads", "num_heads", "num_local_heads")
                    if _int(getattr(attn, k, None))
                ),
                None,
            )
            r.set(
                num_attention_heads=heads,
                num_key_value_heads=_int(getattr(attn, "total_num_kv_heads", None)),
                head_dim=_int(getattr(attn, "head_dim", None)),
                attention_bias=getattr(qkv, "bias", None) is not None
                if qkv is not None
                else any(getattr(m, "bias", None) is not None for m in attn.modules() if m is not attn),
                mlp_bias=getattr(getattr(mlp, "gate_up_proj", None), "bias", None) is not None,
                intermediate_size=_int(getattr(getattr(mlp, "down_proj", None), "input_size", None)),
            )
            if r.out["num_key_value_heads"] is None:
                r.missing("MLA attention has no key/value heads of its own", "num_key_value_heads")
            if r.out["head_dim"] is None:
                r.missing("MLA attention has no single head_dim", "head_dim")
            windows = []
            for layer in layers:
                w = _int(getattr(getattr(layer.self_attn, "attn", None), "sliding_window_size", None))
                windows.append(w if w is not None and w > 0 else None)
            r.set(sliding_windows=windows)
        # SGLang's EAGLE-3 drafters have no norm_before_residual switch: their input layer takes the residual
        # before hidden_norm (models/llama_eagle3.py, kimi_k25_eagle3.py forward), i.e. false whatever the
        # config says. Checked on the installed source: the class's module never reads the key.
        source = inspect.getsource(sys.modules[type(model).__module__])
        if "norm_before_residual" in source:
            r.missing(
                "the drafter module reads norm_before_residual: this script does not know how", "norm_before_residual"
            )
        else:
            r.set(norm_before_residual=False)
            r.notes.append(
                f"norm_before_residual: {type(model).__module__} never reads the key (its forward takes the residual before hidden_norm)"
            )


# ------------------------------------------------------------------------------------------------


def check_imports() -> int:
    engine, version = installed_engine()
    quiet_env(engine)
    report = {"engine": engine, "version": version, "python": sys.version.split()[0], "modules": {}}
    failed = []
    for group, names in (("required", REQUIRED_MODULES[engine]), ("probed", PROBED_MODULES[engine])):
        for name in names:
            try:
                importlib.import_module(name)
                status = "ok"
            except BaseException as exc:  # a module may call sys.exit or raise anything at import
                status = short_error(exc, 240)
                if group == "required":
                    failed.append(name)
            report["modules"][name] = {"group": group, "status": status}
    report["stand_ins"] = {k: sorted(v) for k, v in sorted(STOOD_IN.items())}
    report["torch"] = sys.modules["torch"].__version__ if "torch" in sys.modules else None
    emit(report)
    return 1 if failed else 0


_OUT = None


def emit(obj) -> None:
    out = _OUT or sys.stdout
    out.write(json.dumps(obj, indent=1) + "\n")
    out.flush()


def main(argv=None) -> int:
    global _OUT
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", choices=sorted(PROFILES))
    ap.add_argument("--check-imports", action="store_true", help="report which engine modules import here")
    ap.add_argument("dirs", nargs="*")
    args = ap.parse_args(argv)
    # the engines log to stdout: keep it for the JSON, send everything else to stderr
    _OUT = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    if args.check_imports:
        return check_imports()
    if not args.profile:
        ap.error("--profile is required")
    engine, prefix, runner = PROFILES[args.profile]
    have, version = installed_engine()
    if have != engine or not version.startswith(prefix):
        raise SystemExit(f"profile {args.profile} needs {engine} {prefix}*, this python has {have} {version}")
    quiet_env(engine)
    reader = VllmReader(args.profile, runner) if engine == "vllm" else SglangReader(args.profile)
    results = []
    for path in args.dirs:
        work = tempfile.mkdtemp(prefix="engine-reading-")
        try:
            item = reader.read(os.path.abspath(path), work)
        except Exception as exc:  # a bug here, not the engine's verdict: say so in the reading
            r = Reading(args.profile, path)
            r.failed("engine_reading.py itself", exc)
            r.notes.append(traceback.format_exc()[-1500:])
            item = r.result()
        finally:
            shutil.rmtree(work, ignore_errors=True)
        item["dir"] = path
        results.append(item)
    emit(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
