"""Command-line interface: one module per verb that parses its options, calls one library
function and prints the report it returns. No logic lives here (docs/architecture.md).

A verb's module is imported only when that verb runs: the modules pull in rich, numpy, jsonschema,
the engine profiles ..., which ``eaglehub --version``, ``eaglehub --help`` and a mistyped verb do not
need (benchmarks/convert_speed.py measures the start-up)."""

from __future__ import annotations

import importlib
from typing import NamedTuple

import click

from eaglehub import __version__
from eaglehub.cli.errors import Group


class Verb(NamedTuple):
    module: str
    attribute: str
    #: the command's own short help (the first sentence of its docstring), so that ``eaglehub --help``
    #: lists the verbs without importing them; tests/test_startup.py keeps the two equal
    short_help: str


VERBS: dict[str, Verb] = {
    "target": Verb("eaglehub.cli.target", "target", "Targets (verifier models) available offline."),
    "inspect": Verb(
        "eaglehub.cli.inspect",
        "inspect_cmd",
        "Describe drafter SRC (directory or hub repo id) from tensor headers: format with evidence, dims, "
        "flags, aux ids, vocabulary, tensors.",
    ),
    "validate": Verb("eaglehub.cli.validate", "validate_cmd", "Check drafter SRC (and its pairing with --target)."),
    "convert": Verb(
        "eaglehub.cli.convert",
        "convert_cmd",
        "Convert drafter SRC (directory or hub repo id) into DST: another format and/or EAGLE-3.1.",
    ),
    "quantize": Verb(
        "eaglehub.cli.quantize",
        "quantize_cmd",
        "Quantize drafter SRC into DST in the compressed-tensors FP8 layout vLLM loads; lm_head, embed_tokens, "
        "norms, d2t and t2d keep their dtype.",
    ),
    "drafters": Verb(
        "eaglehub.cli.drafters",
        "drafters_cmd",
        "List the drafters for TARGET: the Hub repos whose card names TARGET (or the model TARGET quantizes, "
        "walking up `base_model_relation: quantized`) as `base_model` and whose config is an EAGLE-3 drafter, "
        "with layout, EAGLE version, k, size and the acceptance each claims; plus the drafters a pairing "
        "manifest registers.",
    ),
    "verify": Verb(
        "eaglehub.cli.verify",
        "verify_cmd",
        "Prove TARGET + DRAFTER lossless (greedy) and measure acceptance, in vLLM or the reference engine.",
    ),
    "probe": Verb(
        "eaglehub.cli.probe",
        "probe_cmd",
        "Measure the drafter under every reading of each config field its tensors cannot settle (aux-layer "
        "ids, norm_output, the pre-FC norm, norm_before_residual), by replaying the target's greedy "
        "continuations through the reference engine (drafter passes only), and name the reading the weights "
        "were trained for.",
    ),
    "vocab": Verb(
        "eaglehub.cli.vocab",
        "vocab_cmd",
        "Measure the share of the target's own output tokens (its greedy continuations of the prompts, per "
        "category) that DRAFTER's draft vocabulary holds, against the best vocabulary of the same size on "
        "the same text, and list the tokens it misses most.",
    ),
    "watch": Verb(
        "eaglehub.cli.watch",
        "watch_cmd",
        "Read a running server's speculative-decoding counters every --interval seconds and show, per "
        "interval, the drafts, the acceptance length (AL) and the acceptance rate per position.",
    ),
    "speedup": Verb(
        "eaglehub.cli.speedup",
        "speedup_cmd",
        "Output tokens/s of TARGET alone and with DRAFTER per concurrency level (vLLM, greedy), and the "
        "speedup expected from the measured acceptance length and forward costs (Leviathan et al.",
    ),
    "tune": Verb(
        "eaglehub.cli.tune",
        "tune_cmd",
        "Pick the k to serve at each batch size: acceptance per draft position on your prompts, engine step "
        "costs by batch size and k, and the schedule with the highest predicted throughput, printed as vLLM's "
        "num_speculative_tokens_per_batch_size (the ready vllm serve line) and TensorRT-LLM's draft_len_schedule.",
    ),
    "diagnose": Verb(
        "eaglehub.cli.diagnose",
        "diagnose_cmd",
        "Show the drift EAGLE 3.1 targets: acceptance per draft position (conditional) and acceptance "
        "length at growing context lengths, prompts padded with real text to exact token counts.",
    ),
    "publish": Verb(
        "eaglehub.cli.publish",
        "publish_cmd",
        "Publish drafter SRC to the Hugging Face Hub in one commit (a pull request by default), pinned to "
        "the revision's head: a concurrent change makes it fail, never overwritten.",
    ),
    "pipeline": Verb(
        "eaglehub.cli.pipeline",
        "pipeline_cmd",
        "For each drafter of MANIFEST: validate → convert → (quantize) → verify → publish, as its manifest "
        "entry says (schemas/manifest.schema.json: `convert`, `quantize`, `verify`, `publish`).",
    ),
}


class LazyGroup(Group):
    """The root group: verbs from :data:`VERBS`, each module imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *VERBS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in VERBS:
            verb = VERBS[cmd_name]
            self.add_command(getattr(importlib.import_module(verb.module), verb.attribute), cmd_name)
        return self.commands.get(cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # click's own listing asks every command for its short help, which imports every verb; this one
        # shortens the table's text by the same rule (Command.get_short_help_str) to the same width
        names = self.list_commands(ctx)
        if not names:
            return
        limit = formatter.width - 6 - max(map(len, names))
        rows = []
        for name in names:
            loaded = self.commands.get(name)
            if loaded is not None and loaded.hidden:
                continue
            command = loaded if loaded is not None else click.Command(name, help=VERBS[name].short_help)
            rows.append((name, command.get_short_help_str(limit)))
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="eaglehub")
def main() -> None:
    """Inspect, validate, upgrade and verify EAGLE-3 / EAGLE-3.1 speculative-decoding drafters."""
