"""Conversion benchmark: eaglehub convert vs `cp -r` vs the `speculators` converter on full-size drafters.

Run from the repository root (``make bench`` does)::

    .venv/bin/python benchmarks/convert_speed.py [--work DIR] [--repeat N] [--only llama|kimi] [--json OUT]

What it does (benchmarks/README.md):

1. Generates, once, full-size EAGLE-3 drafters under ``--work`` (default ``.work/bench/``, git-ignored),
   tensor by tensor in small chunks (the generator never holds a checkpoint in memory, except to
   ``torch.save`` the ``.bin`` variant in a child process): a Llama-3.1-8B EAGLE-3 drafter in the
   SafeAILab/EAGLE research layout (≈0.85 GB bf16) as ``model.safetensors`` and as
   ``pytorch_model.bin``, and a Kimi-K2.6-style MLA drafter (TorchSpec ``kimi_k25_eagle3_mla``
   shapes, ≈3.7 GB bf16). Values are finite bf16 (float32 normal · 0.02 truncated to bf16),
   deterministic per tensor; ``d2t``/``t2d`` are valid maps.
2. Measures, interleaved per repetition and with the source read into the page cache before every
   command: ``cp -r SRC DST``, ``eaglehub convert SRC DST --to 3.1``, ``eaglehub convert SRC DST
   --format NAME`` (only the names ``eaglehub convert --help`` offers, detected at run time) and
   ``speculators convert`` (separate venv from ``make bench-setup``; Llama input only). Each
   command runs in a fresh process (interpreter start-up included) through ``_measure.py``, which
   reads wall time (``time.perf_counter``) and peak RSS (``os.wait4`` → ``ru_maxrss``) for that
   child only. DST is deleted and the file system synced after each command (outside the timing).
3. Compares every converter output with the source tensor by tensor (sha256 of the raw bytes,
   ``layers.0.`` ≡ ``midlayer.``): identical / changed / added (not in the source) / dropped, and
   the source's config values that the output lost or rewrote.
4. Prints a table (median wall, ratio to ``cp``, peak RSS, RSS / checkpoint size, exit code,
   tensor diff, PASS/FAIL against the targets for eaglehub on safetensors input: wall ≤ 1.5 × cp
   and peak RSS ≤ 200 MB) and writes every raw number to ``--json`` (schemas/bench-convert.schema.json).

Only numpy and rich are needed in the harness (torch only in the child that writes the ``.bin``).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import hashlib
import json
import os
import platform
import re
import shutil
import statistics
import struct
import subprocess
import sys
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

REPO = Path(__file__).resolve().parent.parent
MEASURE = Path(__file__).resolve().parent / "_measure.py"
SCHEMA_ID = "eaglehub.bench-convert/1"
GENERATOR_VERSION = 2  # bump when the generated data changes: cached sources are rebuilt

WALL_RATIO_MAX = 1.5  # eaglehub wall time ≤ 1.5 × cp (safetensors input, start-up included)
STARTUP_MAX_S = 0.15  # `eaglehub --version` (interpreter and CLI start-up) median, seconds
PEAK_RSS_MAX = 200_000_000  # eaglehub peak RSS ≤ 200 MB (10^6 bytes)
CHUNK = 1 << 22  # elements generated per step (16 MiB of float32)
MiB, GB = 1 << 20, 1_000_000_000

# wide enough for the table when the output is a file or a pipe (make bench | tee)
console = Console(width=None if sys.stdout.isatty() else 200)

# --- drafter shapes ------------------------------------------------------------------------------

#: SafeAILab/EAGLE eagle/traineagle3/config.json (LLaMA-3.1-8B), torch_dtype set to bfloat16.
LLAMA_CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "bos_token_id": 128000,
    "eos_token_id": 128001,
    "hidden_act": "silu",
    "hidden_size": 4096,
    "initializer_range": 0.02,
    "intermediate_size": 14336,
    "max_position_embeddings": 2048,
    "model_type": "llama",
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "num_hidden_layers": 1,
    "pad_token_id": 0,
    "rms_norm_eps": 1e-05,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "transformers_version": "4.28.1",
    "use_cache": True,
    "vocab_size": 128256,
    "draft_vocab_size": 32000,
}

#: The verifier config handed to `speculators convert --verifier` (it reads vocab size, architectures
#: and max_position_embeddings from it): the keys of meta-llama/Llama-3.1-8B-Instruct's config.json
#: that the project's reference holds (a subset; nothing is downloaded).
LLAMA_VERIFIER_ID = "meta-llama/Llama-3.1-8B-Instruct"  # recorded by `--format speculators`, never fetched
LLAMA_VERIFIER_CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 4096,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "intermediate_size": 14336,
    "vocab_size": 128256,
    "max_position_embeddings": 131072,
    "rms_norm_eps": 1e-05,
    "rope_theta": 500000.0,
    "bos_token_id": 128000,
    "eos_token_id": [128001, 128008, 128009],
    "tie_word_embeddings": False,
    "rope_scaling": {
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192,
        "rope_type": "llama3",
    },
}

#: lightseekorg/TorchSpec configs/draft_models/kimi_k25_eagle3_mla.json (MLA drafter for Kimi-K2.x).
KIMI_CONFIG = {
    "architectures": ["Eagle3DeepseekV2ForCausalLM"],
    "model_type": "kimi_k2",
    "hidden_size": 7168,
    "intermediate_size": 18432,
    "num_hidden_layers": 1,
    "num_attention_heads": 64,
    "num_key_value_heads": 64,
    "q_lora_rank": 1536,
    "kv_lora_rank": 512,
    "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64,
    "v_head_dim": 128,
    "hidden_act": "silu",
    "rms_norm_eps": 1e-05,
    "vocab_size": 163840,
    "draft_vocab_size": 163840,
    "torch_dtype": "bfloat16",
    "rope_theta": 50000.0,
    "rope_scaling": {
        "beta_fast": 1.0,
        "beta_slow": 1.0,
        "factor": 64.0,
        "mscale": 1.0,
        "mscale_all_dim": 1.0,
        "original_max_position_embeddings": 4096,
        "type": "yarn",
    },
    "eagle_config": {
        "eagle_aux_hidden_state_layer_ids": [1, 29, 57],
        "use_aux_hidden_state": True,
        "use_input_layernorm_in_first_layer": True,
        "use_last_layernorm": True,
        "use_mtp_layernorm": False,
    },
    "bos_token_id": 163584,
    "eos_token_id": 163585,
    "pad_token_id": 0,
}

_ST_ITEMSIZE = {
    "BF16": 2,
    "F16": 2,
    "F32": 4,
    "I64": 8,
    "BOOL": 1,
    "U8": 1,
    "I8": 1,
    "I32": 4,
    "F64": 8,
    "I16": 2,
}


@dataclass(frozen=True)
class TensorSpec:
    name: str
    dtype: str  # safetensors dtype
    shape: tuple[int, ...]
    kind: str  # "weight" (normal·0.02) | "norm" (1 + normal·0.02) | "d2t" | "t2d"

    @property
    def nbytes(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n * _ST_ITEMSIZE[self.dtype]


def _mlp_and_norms(H: int, I: int) -> list[TensorSpec]:
    """Layer 0's dense MLP and norms plus the final norm: the same in Llama and MLA drafters (docs/formats.md §1, §5)."""
    return [
        TensorSpec("midlayer.mlp.gate_proj.weight", "BF16", (I, H), "weight"),
        TensorSpec("midlayer.mlp.up_proj.weight", "BF16", (I, H), "weight"),
        TensorSpec("midlayer.mlp.down_proj.weight", "BF16", (H, I), "weight"),
        *(
            TensorSpec(n, "BF16", (H,), "norm")
            for n in (
                "midlayer.hidden_norm.weight",
                "midlayer.input_layernorm.weight",
                "midlayer.post_attention_layernorm.weight",
                "norm.weight",
            )
        ),
    ]


def llama_specs() -> list[TensorSpec]:
    H, I, V, Vd, nh, nkv, hd = 4096, 14336, 128256, 32000, 32, 8, 128
    w = lambda n, *shape: TensorSpec(n, "BF16", shape, "weight")  # noqa: E731
    return [
        w("fc.weight", H, 3 * H),
        w("midlayer.self_attn.q_proj.weight", nh * hd, 2 * H),
        w("midlayer.self_attn.k_proj.weight", nkv * hd, 2 * H),
        w("midlayer.self_attn.v_proj.weight", nkv * hd, 2 * H),
        w("midlayer.self_attn.o_proj.weight", H, nh * hd),
        *_mlp_and_norms(H, I),
        w("lm_head.weight", Vd, H),
        TensorSpec("d2t", "I64", (Vd,), "d2t"),
        TensorSpec("t2d", "BOOL", (V,), "t2d"),
    ]


def kimi_specs() -> list[TensorSpec]:
    H, I, V, nh = 7168, 18432, 163840, 64
    q_lora, kv_lora, nope, rope, v_head = 1536, 512, 128, 64, 128
    w = lambda n, *shape: TensorSpec(n, "BF16", shape, "weight")  # noqa: E731
    norm = lambda n, d=H: TensorSpec(n, "BF16", (d,), "norm")  # noqa: E731
    a = "midlayer.self_attn."
    return [
        w("fc.weight", H, 3 * H),
        w(a + "q_a_proj.weight", q_lora, 2 * H),
        norm(a + "q_a_layernorm.weight", q_lora),
        w(a + "q_b_proj.weight", nh * (nope + rope), q_lora),
        w(a + "kv_a_proj_with_mqa.weight", kv_lora + rope, 2 * H),
        norm(a + "kv_a_layernorm.weight", kv_lora),
        w(a + "kv_b_proj.weight", nh * (nope + v_head), kv_lora),
        w(a + "o_proj.weight", H, nh * v_head),
        *_mlp_and_norms(H, I),
        w("lm_head.weight", V, H),
    ]


@dataclass
class Source:
    """One generated input checkpoint."""

    id: str
    family: str  # "llama" | "kimi"
    description: str
    weights_file: str  # model.safetensors | pytorch_model.bin
    config: dict
    specs: list[TensorSpec]
    mla: bool = False
    path: Path = Path()
    manifest: dict = field(default_factory=dict)

    @property
    def weights_format(self) -> str:
        return "safetensors" if self.weights_file.endswith(".safetensors") else "pytorch"

    @property
    def tensor_bytes(self) -> int:
        return sum(s.nbytes for s in self.specs)

    @property
    def spec_digest(self) -> str:
        blob = json.dumps(
            [
                GENERATOR_VERSION,
                self.config,
                self.weights_file,
                [(s.name, s.dtype, s.shape, s.kind) for s in self.specs],
            ],
            sort_keys=True,
        )
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


def all_sources() -> list[Source]:
    return [
        Source(
            "llama31-8b-st",
            "llama",
            "Llama-3.1-8B EAGLE-3, research layout, model.safetensors",
            "model.safetensors",
            LLAMA_CONFIG,
            llama_specs(),
        ),
        Source(
            "llama31-8b-bin",
            "llama",
            "Llama-3.1-8B EAGLE-3, research layout, pytorch_model.bin",
            "pytorch_model.bin",
            LLAMA_CONFIG,
            llama_specs(),
        ),
        Source(
            "kimi-k26-mla-st",
            "kimi",
            "Kimi-K2.6 MLA EAGLE-3 (TorchSpec kimi_k25_eagle3_mla shapes), model.safetensors",
            "model.safetensors",
            KIMI_CONFIG,
            kimi_specs(),
            mla=True,
        ),
    ]


# --- generation ----------------------------------------------------------------------------------


def _seed(source_family: str, name: str) -> int:
    return zlib.crc32(f"eaglehub-bench/{GENERATOR_VERSION}/{source_family}/{name}".encode())


def _chunks(spec: TensorSpec, family: str):
    """Yield the tensor's raw little-endian bytes in chunks (deterministic per family and name)."""
    rng = np.random.default_rng(_seed(family, spec.name))
    if spec.kind in ("weight", "norm"):
        left = spec.nbytes // 2
        while left:
            n = min(CHUNK, left)
            x = rng.standard_normal(n, dtype=np.float32)
            x *= np.float32(0.02)
            if spec.kind == "norm":
                x += np.float32(1.0)
            yield (x.view(np.uint32) >> 16).astype("<u2").tobytes()  # truncate to bf16: finite
            left -= n
        return
    Vd, V = LLAMA_CONFIG["draft_vocab_size"], LLAMA_CONFIG["vocab_size"]
    vocab_rng = np.random.default_rng(_seed(family, "vocabulary"))  # one draft vocabulary for d2t and t2d
    ids = np.sort(vocab_rng.choice(V, size=Vd, replace=False)).astype(np.int64)
    if spec.kind == "d2t":  # offsets: target_id = i + d2t[i] (docs/formats.md §2)
        yield (ids - np.arange(Vd, dtype=np.int64)).astype("<i8").tobytes()
    else:
        t2d = np.zeros(V, dtype=np.bool_)
        t2d[ids] = True
        yield t2d.tobytes()


def write_safetensors(path: Path, specs: list[TensorSpec], family: str) -> dict:
    """Write ``path`` tensor by tensor; return ``{name: {dtype, shape, sha256}}``."""
    header: dict = {"__metadata__": {"format": "pt"}}
    off = 0
    for s in specs:
        header[s.name] = {"dtype": s.dtype, "shape": list(s.shape), "data_offsets": [off, off + s.nbytes]}
        off += s.nbytes
    hjson = json.dumps(header, separators=(",", ":")).encode()
    hjson += b" " * (-len(hjson) % 8)
    manifest = {}
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hjson)))
        f.write(hjson)
        for s in specs:
            h = hashlib.sha256()
            for b in _chunks(s, family):
                h.update(b)
                f.write(b)
            manifest[s.name] = {"dtype": s.dtype, "shape": list(s.shape), "sha256": h.hexdigest()}
    return manifest


_BIN_WRITER = """
import sys, torch
from safetensors.torch import load_file
torch.save(load_file(sys.argv[1]), sys.argv[2])
"""


def generate(src: Source, sources_dir: Path, llama_st: Source | None) -> float:
    """Create ``src.path`` (atomic: built in a sibling, renamed) and its manifest; return seconds."""
    t0 = time.perf_counter()
    tmp = sources_dir / f".{src.id}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    (tmp / "config.json").write_text(json.dumps(src.config, indent=2) + "\n")
    if src.weights_format == "safetensors":
        tensors = write_safetensors(tmp / src.weights_file, src.specs, src.family)
    else:  # .bin: torch.save of the same tensors as the safetensors twin (needs them in memory once)
        if llama_st is None or not (llama_st.path / "model.safetensors").is_file():
            raise RuntimeError("the .bin variant is written from the safetensors variant; generate that first")
        subprocess.run(
            [
                sys.executable,
                "-c",
                _BIN_WRITER,
                str(llama_st.path / "model.safetensors"),
                str(tmp / src.weights_file),
            ],
            check=True,
        )
        tensors = llama_st.manifest["tensors"]
    shutil.rmtree(src.path, ignore_errors=True)
    tmp.rename(src.path)
    src.manifest = {
        "generator_version": GENERATOR_VERSION,
        "spec_digest": src.spec_digest,
        "tensors": tensors,
        "files": {p.name: p.stat().st_size for p in sorted(src.path.iterdir())},
    }
    _write_json(_manifest_path(src), src.manifest)
    return time.perf_counter() - t0


def _manifest_path(src: Source) -> Path:
    return src.path.parent / f"{src.id}.manifest.json"


def load_cached(src: Source) -> bool:
    """True if ``src.path`` holds a complete checkpoint from this generator (manifest written last)."""
    mp = _manifest_path(src)
    if not mp.is_file() or not src.path.is_dir():
        return False
    try:
        m = json.loads(mp.read_text())
    except ValueError:
        return False
    files = {p.name: p.stat().st_size for p in sorted(src.path.iterdir())}
    if m.get("spec_digest") != src.spec_digest or m.get("files") != files:
        return False
    src.manifest = m
    return True


def checkpoint_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


# --- measurement ---------------------------------------------------------------------------------


@dataclass
class Row:
    source: Source
    tool: str  # cp | eaglehub | speculators
    label: str  # shown in the table
    argv: list[str] | None  # with {src} / {dst} placeholders; None when skipped
    skip: str | None = None
    runs: list[dict] = field(default_factory=list)
    diff: dict | None = None
    log_tail: str = ""

    @property
    def slug(self) -> str:
        return re.sub(r"[^a-z0-9]+", "-", self.label.lower()).strip("-")

    @property
    def target_applies(self) -> bool:
        return self.tool == "eaglehub" and self.source.weights_format == "safetensors"


def warm_page_cache(path: Path) -> None:
    """Read every file under ``path`` once, so each command starts with the source cached."""
    buf = bytearray(16 * MiB)
    for p in sorted(path.rglob("*")):
        if p.is_file():
            with open(p, "rb", buffering=0) as f:
                while f.readinto(buf):
                    pass


def measure(argv: list[str], log: Path, env: dict, timeout: float) -> dict:
    """Run ``argv`` through _measure.py; return ``{wall_s, exit_code, peak_rss_kib}``."""
    cmd = [sys.executable, "-I", "-S", str(MEASURE), str(log), "--", *argv]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, 9)
        p.communicate()
        return {"wall_s": timeout, "exit_code": 124, "peak_rss_kib": 0, "timed_out": True}
    try:
        wall, code, rss = out.decode().split()
    except ValueError:
        raise RuntimeError(f"measurement launcher failed: {err.decode().strip()[-500:]}") from None
    return {"wall_s": float(wall), "exit_code": int(code), "peak_rss_kib": int(rss), "timed_out": False}


def log_tail(log: Path, lines: int = 6) -> str:
    try:
        text = log.read_text(errors="replace")
    except OSError:
        return ""
    text = re.sub(r"\x1b\[[0-9;]*m", "", text)
    keep = [ln.rstrip() for ln in text.splitlines() if ln.strip() and not set(ln.strip()) <= set("─│╭╮╰╯ ")]
    return "\n".join(keep[-lines:])


# --- output comparison ---------------------------------------------------------------------------


def _canonical(name: str) -> str:
    name = name[len("model.") :] if name.startswith("model.") else name
    return "midlayer." + name[len("layers.0.") :] if name.startswith("layers.0.") else name


def _st_tensors(path: Path) -> dict:
    """``{canonical name: {dtype, shape, sha256, stored}}`` for one safetensors file (streamed)."""
    out = {}
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        base = 8 + n
        for name, info in header.items():
            if name == "__metadata__":
                continue
            b, e = info["data_offsets"]
            f.seek(base + b)
            h, left = hashlib.sha256(), e - b
            while left:
                chunk = f.read(min(16 * MiB, left))
                if not chunk:
                    raise ValueError(f"{path}: truncated at {name}")
                h.update(chunk)
                left -= len(chunk)
            out[_canonical(name)] = {
                "dtype": info["dtype"],
                "shape": info["shape"],
                "sha256": h.hexdigest(),
                "stored": name,
            }
    return out


def output_tensors(dst: Path) -> tuple[dict | None, str | None]:
    """Tensors of a converter's output directory, or ``(None, reason)``."""
    indexes = sorted(dst.glob("*.safetensors.index.json"))
    if (dst / "model.safetensors").is_file():
        files = [dst / "model.safetensors"]
    elif indexes:
        files = [dst / f for f in sorted(set(json.loads(indexes[0].read_text())["weight_map"].values()))]
    else:
        files = sorted(dst.glob("*.safetensors"))
    if not files:
        return None, "no safetensors output (not compared)"
    out: dict = {}
    for f in files:
        out.update(_st_tensors(f))
    return out, None


def _config_of(dst: Path) -> dict | None:
    try:
        return json.loads((dst / "config.json").read_text())
    except (OSError, ValueError):
        return None


_MISSING = "<missing>"


def config_diff(src_cfg: dict, out_cfg: dict | None) -> list[dict]:
    """Source config values that the output lost or rewrote, as dotted keys (nested dicts compared key
    by key). A top-level source key is also looked up in the output's ``transformer_layer_config``
    (speculators format), and ``torch_dtype`` also as ``dtype`` (transformers 5)."""
    if out_cfg is None:
        return [{"key": "config.json", "source": "present", "output": _MISSING}]
    nested = (
        out_cfg.get("transformer_layer_config") if isinstance(out_cfg.get("transformer_layer_config"), dict) else {}
    )
    diffs: list[dict] = []

    def walk(prefix: str, src: dict, outs: list[dict]) -> None:
        for k, v in src.items():
            keys = (k, "dtype") if k == "torch_dtype" else (k,)
            found = [c[kk] for kk in keys for c in outs if kk in c]
            if not found:
                diffs.append({"key": prefix + k, "source": v, "output": _MISSING})
            elif isinstance(v, dict) and isinstance(found[0], dict):
                walk(f"{prefix}{k}.", v, [found[0]])
            elif found[0] != v:
                diffs.append({"key": prefix + k, "source": v, "output": found[0]})

    walk("", src_cfg, [out_cfg, nested])
    return diffs


def compare_output(src: Source, dst: Path) -> dict:
    """Tensor-by-tensor comparison of ``dst`` with the source manifest, plus the config diff."""
    src_t = src.manifest["tensors"]
    out_t, why = output_tensors(dst)
    res: dict = {
        "compared": out_t is not None,
        "reason": why,
        "identical": [],
        "changed": [],
        "added": [],
        "dropped": [],
        "config_changes": config_diff(src.config, _config_of(dst)),
        "output_bytes": checkpoint_bytes(dst) if dst.is_dir() else 0,
    }
    if out_t is None:
        return res
    for name, info in out_t.items():
        s = src_t.get(name)
        if s is None:
            res["added"].append({"name": info["stored"], "dtype": info["dtype"], "shape": info["shape"]})
        elif s["sha256"] == info["sha256"] and s["dtype"] == info["dtype"]:
            res["identical"].append(name)
        else:
            res["changed"].append(
                {
                    "name": info["stored"],
                    "source_dtype": s["dtype"],
                    "dtype": info["dtype"],
                    "shape": info["shape"],
                }
            )
    res["dropped"] = [n for n in src_t if n not in out_t]
    return res


# --- command set ---------------------------------------------------------------------------------

LLAMA_FORMATS = ("speculators", "specforge", "vllm")
MLA_FORMATS = ("vllm", "modelopt")  # speculators / specforge cannot express MLA (docs/formats.md §5)


def eaglehub_formats(eaglehub: str, env: dict) -> tuple[list[str] | None, str, bool]:
    """What ``eaglehub convert --help`` offers: ``(--format names or None, how it was decided, has --verifier)``."""
    try:
        r = subprocess.run([eaglehub, "convert", "--help"], capture_output=True, text=True, env=env, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"`eaglehub convert --help` failed: {exc}", False
    text = r.stdout + r.stderr
    has_verifier = re.search(r"--verifier\b", text) is not None
    if "--format" not in text:
        return (
            None,
            "`eaglehub convert --help` shows no --format (only --to 3.1 exists in this version)",
            has_verifier,
        )
    m = re.search(r"--format\s+\[([^\]]+)\]", text)
    if m:
        names = [n.strip() for n in m.group(1).split("|") if n.strip()]
        return names, f"--format choices from --help: {', '.join(names)}", has_verifier
    return (
        list(dict.fromkeys(LLAMA_FORMATS + MLA_FORMATS)),
        "--format present in --help (choices not listed; all tried)",
        has_verifier,
    )


def eaglehub_tree() -> tuple[str | None, bool | None]:
    """``(HEAD commit, whether eaglehub/ has uncommitted changes)`` of this checkout."""
    try:
        head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=30)
        st = subprocess.run(
            ["git", "-C", str(REPO), "status", "--porcelain", "--", "eaglehub"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None, None
    if head.returncode != 0:
        return None, None
    return head.stdout.strip(), bool(st.stdout.strip())


def speculators_status(spec_bin: Path, env: dict) -> tuple[str | None, str | None]:
    """``(version, None)`` if ``speculators convert --help`` runs, else ``(None, reason)``."""
    if not spec_bin.exists():
        return None, f"not installed: {spec_bin} is missing; run `make bench-setup`"
    py = spec_bin.parent / "python"
    try:
        r = subprocess.run([str(spec_bin), "convert", "--help"], capture_output=True, text=True, env=env, timeout=300)
        v = subprocess.run(
            [str(py), "-c", "import importlib.metadata as m; print(m.version('speculators'))"],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"`speculators convert --help` did not run: {exc}"
    if r.returncode != 0:
        last = (r.stderr.strip().splitlines() or ["no output"])[-1]
        return None, f"`speculators convert --help` exits {r.returncode}: {last}"
    return v.stdout.strip() or "unknown", None


def build_rows(
    src: Source,
    eaglehub: str,
    formats: list[str] | None,
    fmt_note: str,
    eh_verifier: bool,
    spec_bin: Path,
    spec_skip: str | None,
    verifier: Path,
) -> list[Row]:
    rows = [
        Row(src, "cp", "cp -r", ["cp", "-r", "{src}", "{dst}"]),
        # context: interpreter + CLI start-up alone, the floor under every eaglehub row
        Row(src, "eaglehub-startup", "eaglehub --version", [eaglehub, "--version"]),
        Row(src, "eaglehub", "eaglehub --to 3.1", [eaglehub, "convert", "{src}", "{dst}", "--to", "3.1"]),
    ]
    if src.mla:  # the 3.1 upgrade written as vLLM's layout (a format that can express MLA)
        label = "eaglehub --to 3.1 --format vllm"
        if formats is not None and "vllm" in formats:
            rows.append(
                Row(
                    src,
                    "eaglehub",
                    label,
                    [eaglehub, "convert", "{src}", "{dst}", "--to", "3.1", "--format", "vllm"],
                )
            )
        else:
            rows.append(
                Row(
                    src,
                    "eaglehub",
                    label,
                    None,
                    skip=fmt_note
                    if formats is None
                    else f"`vllm` is not among eaglehub's --format choices ({fmt_note})",
                )
            )
    for name in MLA_FORMATS if src.mla else LLAMA_FORMATS:
        label = f"eaglehub --format {name}"
        if formats is None:
            rows.append(Row(src, "eaglehub", label, None, skip=fmt_note))
        elif name not in formats:
            rows.append(
                Row(
                    src,
                    "eaglehub",
                    label,
                    None,
                    skip=f"`{name}` is not among eaglehub's --format choices ({fmt_note})",
                )
            )
        else:
            argv = [eaglehub, "convert", "{src}", "{dst}", "--format", name]
            if name == "speculators" and eh_verifier:  # the research layout records no verifier
                argv += ["--verifier", LLAMA_VERIFIER_ID]
            rows.append(Row(src, "eaglehub", label, argv))
    label = "speculators convert"
    if src.mla:
        rows.append(
            Row(
                src,
                "speculators",
                label,
                None,
                skip=(
                    "does not accept MLA: it builds a Llama layer (transformer_layer_config is Llama/Qwen3 only, "
                    "docs/formats.md §5) and would fill the missing tensors with random values"
                ),
            )
        )
    elif spec_skip:
        rows.append(Row(src, "speculators", label, None, skip=spec_skip))
    else:
        rows.append(
            Row(
                src,
                "speculators",
                label,
                [
                    str(spec_bin),
                    "convert",
                    "{src}",
                    "--algorithm",
                    "eagle3",
                    "--verifier",
                    str(verifier),
                    "--output-path",
                    "{dst}",
                ],
            )
        )
    return rows


# --- reporting -----------------------------------------------------------------------------------


def _portable(s: str, work: Path) -> str:
    """Replace machine paths: the work dir by ``$WORK``, the repository root by ``.``."""
    return s.replace(str(work), "$WORK").replace(str(REPO) + os.sep, "").replace(str(REPO), ".")


def _shown_argv(r: Row, work: Path) -> list[str] | None:
    """The command line as run, with machine paths replaced (see :func:`_portable`)."""
    if not r.argv:
        return None
    dst = work / "out" / r.source.id
    return [_portable(x.replace("{src}", str(r.source.path)).replace("{dst}", str(dst)), work) for x in r.argv]


def summarise(rows: list[Row], sources: list[Source], work: Path) -> dict:
    cp_wall = {r.source.id: statistics.median(x["wall_s"] for x in r.runs) for r in rows if r.tool == "cp" and r.runs}
    out = []
    for r in rows:
        d: dict = {
            "input": r.source.id,
            "tool": r.tool,
            "label": r.label,
            "argv": _shown_argv(r, work),
            "skipped": r.skip,
            "runs": r.runs,
            "wall_s_median": None,
            "wall_s_min": None,
            "wall_s_max": None,
            "peak_rss_bytes_max": None,
            "wall_ratio_cp": None,
            "rss_ratio_checkpoint": None,
            "exit_codes": sorted({x["exit_code"] for x in r.runs}),
            "output_diff": r.diff,
            "log_tail": _portable(r.log_tail, work),
            "target": None,
        }
        if r.runs:
            walls = [x["wall_s"] for x in r.runs]
            d["wall_s_median"], d["wall_s_min"], d["wall_s_max"] = (
                statistics.median(walls),
                min(walls),
                max(walls),
            )
            d["peak_rss_bytes_max"] = max(x["peak_rss_kib"] for x in r.runs) * 1024
            cp = cp_wall.get(r.source.id)
            d["wall_ratio_cp"] = d["wall_s_median"] / cp if cp else None
            d["rss_ratio_checkpoint"] = d["peak_rss_bytes_max"] / r.source.manifest["checkpoint_bytes"]
        if r.target_applies:
            t = {
                "wall_ratio_max": WALL_RATIO_MAX,
                "peak_rss_max_bytes": PEAK_RSS_MAX,
                "ran": bool(r.runs),
                "exit_ok": bool(r.runs) and d["exit_codes"] == [0],
                "wall_ok": None,
                "rss_ok": None,
                "pass": False,
            }
            if r.runs:
                t["wall_ok"] = d["wall_ratio_cp"] is not None and d["wall_ratio_cp"] <= WALL_RATIO_MAX
                t["rss_ok"] = d["peak_rss_bytes_max"] <= PEAK_RSS_MAX
                t["pass"] = bool(t["exit_ok"] and t["wall_ok"] and t["rss_ok"])
            d["target"] = t
        out.append(d)
    return {"rows": out}


def _diff_cell(diff: dict | None) -> str:
    if diff is None:
        return "—"
    if not diff["compared"]:
        return diff["reason"] or "not compared"
    parts = [f"{len(diff['identical'])} same"]
    if diff["changed"]:
        parts.append(f"[red]{len(diff['changed'])} changed[/]")
    if diff["added"]:
        parts.append(f"[yellow]+{len(diff['added'])} added[/]")
    if diff["dropped"]:
        parts.append(f"[red]−{len(diff['dropped'])} dropped[/]")
    return ", ".join(parts)


def print_table(report: dict) -> None:
    t = Table(title="conversion benchmark (wall: median; RSS: max over repetitions)", show_lines=False)
    for col, just in (
        ("input", "left"),
        ("command", "left"),
        ("wall s", "right"),
        ("× cp", "right"),
        ("peak RSS MiB", "right"),
        ("RSS / ckpt", "right"),
        ("exit", "right"),
        ("tensors vs source", "left"),
        ("target", "left"),
    ):
        t.add_column(col, justify=just)
    last = None
    for d in report["rows"]:
        if last is not None and d["input"] != last:
            t.add_section()
        last = d["input"]
        if d["skipped"]:
            t.add_row(d["input"], d["label"], "", "", "", "", "", "[dim]skipped (see below)[/]", "")
            continue
        tgt = ""
        if d["target"]:
            g = d["target"]
            if g["pass"]:
                tgt = "[green]PASS[/]"
            else:
                why = [w for w, ok in (("exit", g["exit_ok"]), ("wall", g["wall_ok"]), ("RSS", g["rss_ok"])) if not ok]
                tgt = f"[red]FAIL[/] ({', '.join(why)})"
        codes = ",".join(str(c) for c in d["exit_codes"])
        t.add_row(
            d["input"],
            d["label"],
            f"{d['wall_s_median']:.2f}",
            f"{d['wall_ratio_cp']:.2f}×" if d["wall_ratio_cp"] is not None else "—",
            f"{d['peak_rss_bytes_max'] / MiB:.0f}",
            f"{d['rss_ratio_checkpoint']:.2f}×",
            codes if codes == "0" else f"[red]{codes}[/]",
            _diff_cell(d["output_diff"]),
            tgt,
        )
    console.print(t)
    console.print(
        f"targets for eaglehub rows on safetensors input: wall ≤ {WALL_RATIO_MAX} × cp, "
        f"peak RSS ≤ {PEAK_RSS_MAX / 1e6:.0f} MB; other rows are context.",
        highlight=False,
    )


def _spread(d: dict) -> str:
    return f"{d['wall_s_median']:.3f} s (min {d['wall_s_min']:.3f}, max {d['wall_s_max']:.3f}, n {len(d['runs'])})"


def print_targets(report: dict) -> None:
    """The two start-up / speed targets, each with what it is measured against in the same run: the
    median of `eaglehub convert --to 3.1` over the median of `cp -r` (and each repetition's own ratio,
    both commands having run back to back), and the median of `eaglehub --version`."""
    console.print("[bold]targets, measured side by side in this run[/]", highlight=False)
    for src in report["inputs"]:
        rows = {d["label"]: d for d in report["rows"] if d["input"] == src["id"] and d["runs"]}
        cp, conv, ver = rows.get("cp -r"), rows.get("eaglehub --to 3.1"), rows.get("eaglehub --version")
        if cp is None:
            continue
        lines = [f"  cp -r                       {_spread(cp)}"]
        if conv is not None:
            per_rep = [
                c["wall_s"] / p["wall_s"]
                for c in conv["runs"]
                for p in cp["runs"]
                if c["rep"] == p["rep"] and p["wall_s"] > 0
            ]
            ok = conv["wall_ratio_cp"] <= WALL_RATIO_MAX
            verdict = ("PASS" if ok else "FAIL") if src["format"] == "safetensors" else "context"
            lines.append(
                f"  eaglehub convert --to 3.1   {_spread(conv)} = {conv['wall_ratio_cp']:.2f}× cp "
                f"(per repetition {', '.join(f'{x:.2f}' for x in per_rep)}; target ≤ {WALL_RATIO_MAX}×: {verdict})"
            )
        if ver is not None:
            ok = ver["wall_s_median"] <= STARTUP_MAX_S
            lines.append(
                f"  eaglehub --version          {_spread(ver)} = {ver['wall_ratio_cp']:.2f}× cp "
                f"(target ≤ {STARTUP_MAX_S} s: {'PASS' if ok else 'FAIL'})"
            )
        console.print(f"[bold]{src['id']}[/]", highlight=False)
        for line in lines:
            console.print(line, highlight=False, markup=False)


def print_notes(report: dict) -> None:
    for d in report["rows"]:
        if d["skipped"]:
            console.print(
                f"[bold]{d['input']} / {d['label']}[/]: skipped — {d['skipped']}",
                highlight=False,
                soft_wrap=True,
            )
    for d in report["rows"]:
        if d["skipped"]:
            continue
        notes = []
        if d["exit_codes"] != [0] and d["log_tail"]:
            notes.append("output (tail):\n    " + d["log_tail"].replace("\n", "\n    "))
        diff = d["output_diff"]
        if diff and diff["compared"]:
            for key, what in (("changed", "changed"), ("added", "added (not in the source)")):
                if diff[key]:
                    items = ", ".join(
                        f"{x['name']} {x.get('source_dtype', '') and x['source_dtype'] + '→'}{x['dtype']}{x['shape']}"
                        for x in diff[key]
                    )
                    notes.append(f"{what}: {items}")
            if diff["dropped"]:
                notes.append(f"dropped: {', '.join(diff['dropped'])}")
        if diff and diff["config_changes"] and d["tool"] != "cp":
            notes.append(
                "config values lost or rewritten: "
                + ", ".join(
                    f"{c['key']} {json.dumps(c['source'])}→{json.dumps(c['output'])}" for c in diff["config_changes"]
                )
            )
        if diff:
            notes.append(f"output size {diff['output_bytes'] / GB:.3f} GB")
        if notes:
            console.print(f"[bold]{d['input']} / {d['label']}[/]", highlight=False)
            for n in notes:
                console.print(f"  {n}", highlight=False, soft_wrap=True, markup=False)


def _write_json(path: Path, obj) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(obj, indent=2) + "\n")
    os.replace(tmp, path)


def _validate_report(report: dict) -> str | None:
    try:
        import jsonschema
    except ImportError:
        return "jsonschema not installed: report not validated"
    schema = json.loads((REPO / "schemas" / "bench-convert.schema.json").read_text())
    try:
        jsonschema.validate(report, schema)
    except jsonschema.ValidationError as exc:
        return f"report violates schemas/bench-convert.schema.json: {exc.message} at {list(exc.absolute_path)}"
    return None


# --- main ----------------------------------------------------------------------------------------


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--work",
        type=Path,
        default=REPO / ".work" / "bench",
        help="work dir: generated sources, speculators venv, scratch outputs (default .work/bench)",
    )
    ap.add_argument("--repeat", type=int, default=3, help="repetitions per command (default 3)")
    ap.add_argument(
        "--only", choices=("llama", "kimi"), help="only the Llama (safetensors + bin) or the Kimi MLA input"
    )
    ap.add_argument(
        "--json",
        type=Path,
        dest="json_out",
        help="write all raw numbers here (schemas/bench-convert.schema.json)",
    )
    ap.add_argument(
        "--eaglehub",
        default=str(Path(sys.executable).parent / "eaglehub"),
        help="eaglehub executable (default: next to this interpreter)",
    )
    ap.add_argument(
        "--speculators",
        type=Path,
        default=None,
        help="speculators executable (default: WORK/speculators-venv/bin/speculators)",
    )
    ap.add_argument("--timeout", type=float, default=3600.0, help="seconds before one command is killed (default 3600)")
    return checked_args(ap, argv)


def checked_args(ap: argparse.ArgumentParser, argv=None) -> argparse.Namespace:
    """Parse, refuse ``--repeat`` < 1, resolve ``--work`` (shared by the benchmarks of this folder)."""
    a = ap.parse_args(argv)
    if a.repeat < 1:
        ap.error("--repeat must be ≥ 1")
    a.work = a.work.resolve()
    return a


def main(argv=None) -> int:
    a = parse_args(argv)
    work, src_dir, scratch, logs = a.work, a.work / "src", a.work / "out", a.work / "logs"
    for d in (src_dir, logs):
        d.mkdir(parents=True, exist_ok=True)
    spec_bin = a.speculators or work / "speculators-venv" / "bin" / "speculators"
    load_start = os.getloadavg()
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "NO_COLOR": "1",
        "TERM": "dumb",
        "COLUMNS": "120",
    }

    console.print(
        f"[bold]eaglehub conversion benchmark[/] · {os.cpu_count()} CPUs · load average "
        f"{load_start[0]:.2f} {load_start[1]:.2f} {load_start[2]:.2f} · work dir {_portable(str(work), work)} = {work}",
        highlight=False,
    )

    sources = [s for s in all_sources() if a.only is None or s.family == a.only]
    for s in sources:
        s.path = src_dir / s.id

    # disk: what is still to generate, plus room for the largest output (fp32 doubling, atomic tmp), plus 1 GB
    missing = [s for s in sources if not load_cached(s)]

    def need(srcs: list[Source]) -> int:
        return sum(s.tensor_bytes for s in srcs if s in missing) + 3 * max(s.tensor_bytes for s in srcs) + GB

    free = shutil.disk_usage(work).free
    console.print(
        f"disk: {free / GB:.1f} GB free; to generate {sum(s.tensor_bytes for s in missing) / GB:.2f} GB; "
        f"needed with scratch for one output ≈ {need(sources) / GB:.1f} GB",
        highlight=False,
    )
    if free < need(sources):
        small = [s for s in sources if not s.mla]
        if small and len(small) < len(sources) and free >= need(small):
            console.print("[yellow]not enough disk for the Kimi MLA input and its output: it is skipped[/]")
            sources, missing = small, [s for s in missing if not s.mla]
        else:
            console.print(f"[red]not enough disk: need ≈ {need(sources) / GB:.1f} GB free under {work}[/]")
            return 2

    gen_seconds: dict[str, float] = {}
    # --only keeps the two Llama variants together; the .bin is written from the safetensors twin
    llama_st = next((s for s in sources if s.id == "llama31-8b-st"), None)
    for s in sources:
        if s in missing:
            with console.status(f"generating {s.id} ({s.tensor_bytes / GB:.2f} GB)"):
                gen_seconds[s.id] = generate(s, src_dir, llama_st)
            console.print(f"generated {s.id} in {gen_seconds[s.id]:.1f} s", highlight=False)
        s.manifest["checkpoint_bytes"] = checkpoint_bytes(s.path)
    for s in sources:
        size = s.manifest["checkpoint_bytes"]
        note = "  [yellow](over 4 GB)[/]" if size > 4 * GB else ""
        files = ", ".join(f"{n} {b / GB:.3f} GB" for n, b in s.manifest["files"].items())
        console.print(
            f"checkpoint {s.id}: {size / GB:.3f} GB ({size / (1 << 30):.3f} GiB), {len(s.specs)} tensors — {files}{note}",
            highlight=False,
        )

    verifier = work / "verifier" / "llama-3.1-8b-instruct"
    verifier.mkdir(parents=True, exist_ok=True)
    (verifier / "config.json").write_text(json.dumps(LLAMA_VERIFIER_CONFIG, indent=2) + "\n")

    # an installed wheel has its modules compiled; a checkout under PYTHONDONTWRITEBYTECODE (or one just
    # edited) would compile eaglehub's modules in every measured process instead, which no user pays
    eh_python = Path(a.eaglehub).parent / "python"
    subprocess.run(
        [str(eh_python if eh_python.exists() else sys.executable), "-m", "compileall", "-q", str(REPO / "eaglehub")],
        capture_output=True,
        timeout=600,
    )
    try:
        eh_version = subprocess.run(
            [a.eaglehub, "--version"], capture_output=True, text=True, env=env, timeout=120
        ).stdout.strip()
    except (OSError, subprocess.TimeoutExpired) as exc:
        console.print(f"[red]eaglehub is not runnable ({exc}); pass --eaglehub PATH or run `make setup`[/]")
        return 2
    formats, fmt_note, eh_verifier = eaglehub_formats(a.eaglehub, env)
    spec_version, spec_skip = (
        (None, "no Llama input in this run") if all(s.mla for s in sources) else speculators_status(spec_bin, env)
    )
    eh_commit, eh_dirty = eaglehub_tree()
    console.print(
        f"eaglehub: {eh_version or 'not runnable'} at {(eh_commit or 'unknown commit')[:12]}"
        f"{' + uncommitted changes in eaglehub/' if eh_dirty else ''}; {fmt_note}",
        highlight=False,
    )
    console.print(f"speculators: {spec_version or spec_skip}", highlight=False)

    rows = [
        r
        for s in sources
        for r in build_rows(s, a.eaglehub, formats, fmt_note, eh_verifier, spec_bin, spec_skip, verifier)
    ]
    live = [r for r in rows if r.argv]

    floor = measure(["true"], logs / "floor.log", env, 60)["peak_rss_kib"]
    console.print(
        f"spawn floor: `true` peaks at {floor / 1024:.1f} MiB through the launcher "
        "(ru_maxrss counts the launcher's pre-exec image; no row can read lower)",
        highlight=False,
    )

    t_all = time.perf_counter()
    for rep in range(a.repeat):
        for s in sources:
            srows = [r for r in live if r.source is s]
            k = rep % len(srows)
            for r in srows[k:] + srows[:k]:  # rotate the order each repetition
                shutil.rmtree(scratch, ignore_errors=True)
                scratch.mkdir(parents=True)
                dst = scratch / s.id
                argv = [x.replace("{src}", str(s.path)).replace("{dst}", str(dst)) for x in r.argv]
                log = logs / f"{s.id}__{r.slug}.rep{rep}.log"
                warm_page_cache(s.path)
                os.sync()
                load1 = os.getloadavg()[0]
                with console.status(f"rep {rep + 1}/{a.repeat} · {s.id} · {r.label}"):
                    res = measure(argv, log, env, a.timeout)
                res.update(rep=rep, load1=round(load1, 2))
                r.runs.append(res)
                if rep == 0 and r.tool in ("eaglehub", "speculators"):
                    r.diff = (
                        compare_output(s, dst)
                        if dst.is_dir()
                        else {
                            "compared": False,
                            "reason": "no output directory",
                            "identical": [],
                            "changed": [],
                            "added": [],
                            "dropped": [],
                            "config_changes": [],
                            "output_bytes": 0,
                        }
                    )
                if res["exit_code"] != 0 or rep == 0:
                    r.log_tail = log_tail(log)
                shutil.rmtree(scratch, ignore_errors=True)
                os.sync()
                console.print(
                    f"  rep {rep + 1} {s.id:<16} {r.label:<28} {res['wall_s']:8.2f} s "
                    f"{res['peak_rss_kib'] / 1024:8.0f} MiB  exit {res['exit_code']}  (load {load1:.2f})",
                    highlight=False,
                )
    load_end = os.getloadavg()

    summary = summarise(rows, sources, work)
    report = {
        "schema": SCHEMA_ID,
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
            "mem_total_bytes": os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"),
            "loadavg_start": [round(x, 2) for x in load_start],
            "loadavg_end": [round(x, 2) for x in load_end],
        },
        "settings": {
            "repeat": a.repeat,
            "only": a.only,
            "timeout_s": a.timeout,
            "targets": {"wall_ratio_max": WALL_RATIO_MAX, "peak_rss_max_bytes": PEAK_RSS_MAX},
            "eaglehub_version": eh_version,
            "eaglehub_commit": eh_commit,
            "eaglehub_dirty": eh_dirty,
            "eaglehub_formats": formats,
            "eaglehub_formats_note": fmt_note,
            "speculators_version": spec_version,
            "speculators_note": spec_skip,
            "spawn_floor_rss_bytes": floor * 1024,
            "measure_seconds": round(time.perf_counter() - t_all, 1),
        },
        "inputs": [
            {
                "id": s.id,
                "description": s.description,
                "format": s.weights_format,
                "checkpoint_bytes": s.manifest["checkpoint_bytes"],
                "tensor_count": len(s.specs),
                "files": [{"name": n, "bytes": b} for n, b in s.manifest["files"].items()],
                "generated_s": round(gen_seconds[s.id], 1) if s.id in gen_seconds else None,
            }
            for s in sources
        ],
        **summary,
    }
    console.print()
    print_table(report)
    print_notes(report)
    print_targets(report)
    console.print(
        f"load average at start {load_start[0]:.2f} {load_start[1]:.2f} {load_start[2]:.2f}, "
        f"at end {load_end[0]:.2f} {load_end[1]:.2f} {load_end[2]:.2f}; measuring took "
        f"{report['settings']['measure_seconds']:.0f} s",
        highlight=False,
    )
    if a.json_out:
        problem = _validate_report(report)
        if problem:
            console.print(f"[red]{problem}[/]")
        _write_json(a.json_out, report)
        console.print(f"raw numbers: {a.json_out}", highlight=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
