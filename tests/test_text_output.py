"""Every verb's text output as a log gets it: stdout piped (not a terminal) at COLUMNS=80, on real inputs (the
committed fixture drafter, every producer fixture, tiny checkpoints made here). Checked on each: no name that
tells rows apart is cut (each tensor / drafter name the input has appears whole, or with its middle cut to
``…`` and an end no other name has), no command is wrapped inside (a line that starts one, and each command a
finding's hint or a serve line holds, is whole on one line, balanced for the shell and parsed by eaglehub's own
CLI), no Python repr (``None``, ``True``, ``['a']``, ``{'k': 1}``), no trailing blank; and progress is
plain lines on stderr, one per step, when stderr is not a terminal."""

from __future__ import annotations

import io
import json
import os
import re
import shlex
import struct
import subprocess
import sys
from pathlib import Path

import click
import numpy as np
import pytest
from click.testing import CliRunner
from helpers.paths import FIXTURE, ROOT
from helpers.scripted import BASE, GOOD, ScriptedEngine, write_prompts
from test_discovery import hub_tree  # noqa: F401  (fixture: the fake Hub of the drafters tests)
from test_pipeline import tiny  # noqa: F401  (fixture: the pipeline tests' manifest)

from eaglehub.cli import main
from eaglehub.errors import EaglehubError

WIDTH = 80
PRODUCERS = sorted(p.parent for p in (ROOT / "fixtures" / "producers").glob("*/*/config.json"))
TRAINING_RUNS = sorted(
    p for p in (ROOT / "fixtures" / "producers").glob("*/*") if p.is_dir() and not (p / "config.json").exists()
)
"""The producer fixtures that are training checkpoints, not drafters (no config.json): validate and inspect
refuse them with the producer's own export command."""
REPR = re.compile(r"\bNone\b|\bTrue\b|\bFalse\b|\['|\{'|'\]|': '|': [\d\[{]")
"""What only a Python repr prints: its constants, a quoted string in a list or dict, a dict's quoted key
(``model_type 'deepseek_v3': vLLM ...`` is prose)."""
VERBS = "|".join(sorted(main.list_commands(click.Context(main)), key=len, reverse=True))
COMMAND = re.compile(rf"(?:[A-Z_]+=\S+ )*(?:eaglehub (?:{VERBS})\b|vllm serve )")
"""Where a command starts: ``eaglehub`` and one of its verbs (not prose: "eaglehub reads …"), ``vllm serve``."""
RULES = "│┃║|"
QUOTED_COMMAND = re.compile(r"`([\w./=-]+ [^`]+)`")
"""A command in backticks anywhere in a hint (mid-sentence too): a producer's ``python tools/… --input-dir …``."""


@pytest.fixture(autouse=True)
def consoles_follow_columns(monkeypatch):
    """The commands' consoles take their width from COLUMNS when they print (as run80 sets it), unless COLUMNS
    was in the environment when they were made (a shell that exports it): then they are made to follow it."""
    from eaglehub.cli.output import console, err_console

    monkeypatch.setenv("COLUMNS", str(WIDTH))
    for c in (console, err_console):
        if c.width != WIDTH:
            monkeypatch.setattr(c, "_width", None)
        assert c.width == WIDTH


def run80(*args, **env) -> tuple[str, str, int]:
    """The verb as piped at 80 columns: stdout, stderr, exit code (never a traceback)."""
    res = CliRunner(env={"COLUMNS": str(WIDTH), **env}).invoke(main, [str(a) for a in args])
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    return res.stdout, res.stderr, res.exit_code


def run80_ok(*args) -> tuple[str, dict]:
    """The verb's text at 80 columns (it must exit 0) and its report as ``--json`` prints it."""
    out, err, code = run80(*args)
    assert code == 0, out + err
    return out, json.loads(run80(*args, "--json")[0])


def tensor_names(drafter: Path) -> list[str]:
    """The tensor names a drafter's safetensors files store (read from their headers)."""
    names = []
    for f in sorted(drafter.glob("*.safetensors")):
        with f.open("rb") as fh:
            (n,) = struct.unpack("<Q", fh.read(8))
            names += [k for k in json.loads(fh.read(n)) if k != "__metadata__"]
    return names


def _tokens(text: str) -> set[str]:
    return {t for t in re.split(rf"[\s{RULES}]+", text) if t}


def cut_names(text: str, names: list[str]) -> list[str]:
    """The names ``text`` shows neither whole nor as ``head…tail`` with an end that no other name has."""
    tokens = _tokens(text)
    cuts = [tuple(t.split("…", 1)) for t in tokens if "…" in t]
    bad = []
    for name in dict.fromkeys(names):
        if name in tokens:
            continue
        ok = any(
            name.startswith(h) and name.endswith(t) and len(h) + len(t) < len(name)
            for h, t in cuts
            if not any(o != name and o.startswith(h) and o.endswith(t) for o in names)
        )
        if not ok:
            bad.append(name)
    return bad


def commands_in(text: str) -> list[str]:
    """The commands ``text`` (a hint, a line) holds: from ``eaglehub`` / ``vllm serve`` to the end of the
    command (a `` ` ``, a ``;`` or a clause in parentheses after it, or the end of the text)."""
    out = []
    for m in COMMAND.finditer(text):
        if m.start() and text[m.start() - 1] not in " `(\t":
            continue
        rest = text[m.start() :]
        end = len(rest)
        quote = None
        for i, ch in enumerate(rest):  # the command ends where the prose resumes, outside any quotes
            if quote:
                quote = None if ch == quote else quote
            elif ch in "'\"":
                quote = ch
            elif ch in "`;)" or rest.startswith(" (", i) or rest.startswith(", ", i):
                end = i
                break
        out.append(rest[:end].rstrip(". "))
    return out


def parse_command(command: str) -> None:
    """Fails unless ``command`` is whole: shell quotes balanced, and an eaglehub command eaglehub's own
    parser accepts (its verb, its options with their values), a serve line's JSON whole."""
    argv = shlex.split(command)
    while argv and re.fullmatch(r"[A-Z_]+=\S*", argv[0]):
        argv = argv[1:]
    if argv[0] == "vllm":
        assert argv[1] == "serve", command
        if "--speculative-config" in argv:
            json.loads(argv[argv.index("--speculative-config") + 1])
        return
    assert argv[0] == "eaglehub", command
    group: click.Command = main
    args = argv[1:]
    ctx = click.Context(main, info_name="eaglehub")
    while isinstance(group, click.Group) and args and not args[0].startswith("-"):
        sub = group.get_command(ctx, args[0])
        assert sub is not None, f"no verb {args[0]!r} in: {command}"
        ctx = click.Context(sub, info_name=args[0], parent=ctx)
        group, args = sub, args[1:]
    try:
        group.make_parser(ctx).parse_args(args)
    except click.UsageError as exc:
        raise AssertionError(f"{command}: {exc}") from exc


def check(text: str, names: list[str] = (), hints: list[str] = ()) -> None:  # type: ignore[assignment]
    """The checks of the module doc on one verb's text output (``names``: what tells its rows apart;
    ``hints``: the hints and serve lines of its report, whose commands must each be whole on one line)."""
    lines = text.splitlines()
    problems: dict[str, list[str]] = {"cut names": cut_names(text, list(names)), "wrapped commands": []}
    commands = [c for line in lines for c in commands_in(line)]  # each line's commands, whole or cut
    for hint in hints:
        for command in commands_in(hint):
            if not any(command in line for line in lines):
                problems["wrapped commands"].append(command)
            commands.append(command)
        for command in QUOTED_COMMAND.findall(hint):  # any program's, which eaglehub's parser cannot check
            if not any(command in line for line in lines):
                problems["wrapped commands"].append(command)
    for command in commands:
        try:
            parse_command(command)
        except (AssertionError, ValueError) as exc:
            problems["wrapped commands"].append(f"{command}: {exc}")
    problems["Python reprs"] = [line for line in lines if REPR.search(line)]
    problems["trailing blanks"] = [line for line in lines if line != line.rstrip()]
    problems = {k: v for k, v in problems.items() if v}
    assert problems == {}, text


def hints_of(report: dict) -> list[str]:
    found = [f["hint"] for f in report.get("findings") or [] if f.get("hint")]
    for d in report.get("drafters") or []:
        found += hints_of(d)
        found += [d["serve_command"]] if d.get("serve_command") else []
    return found


# --- the checks themselves, on text that breaks each rule -----------------------------------------------


def test_the_checks_catch_what_they_are_for():
    names = ["midlayer.self_attn.q_proj.weight", "midlayer.self_attn.k_proj.weight"]
    assert cut_names(" midl…q_proj.weight │ x\n midl…k_proj.weight │ y", names) == []
    assert cut_names(" midlayer.self_at… │ x\n midlayer.self_at… │ y", names) == names
    assert cut_names(" midl…weight\n midlayer.self_attn.k_proj.weight", names) == names[:1]  # the end is shared
    hint = (
        "ask the weights: eaglehub probe D --target T --field norm_output; if it wins, eaglehub convert S D --set x=1"
    )
    assert commands_in(hint) == ["eaglehub probe D --target T --field norm_output", "eaglehub convert S D --set x=1"]
    check("fix: " + hint, hints=[hint])
    with pytest.raises(AssertionError, match="wrapped commands"):
        check("fix: ask the weights: eaglehub probe D --target\nT --field norm_output", hints=[hint])
    quoted = "export it with `python tools/convert_to_hf.py --input-dir runs/a/iter_1 --output-dir runs/a/hf`"
    check("fix: " + quoted, hints=[quoted])
    with pytest.raises(AssertionError, match="wrapped commands"):  # mid-sentence, in backticks, not at a start
        check(
            "fix: export it with `python tools/convert_to_hf.py --input-dir\nruns/a/iter_1 --output-dir runs/a/hf`",
            hints=[quoted],
        )
    with pytest.raises(AssertionError):
        parse_command("eaglehub probe D --target")  # cut before its value
    with pytest.raises(AssertionError):
        parse_command("eaglehub convert S D --no-such-option")
    with pytest.raises(ValueError):
        parse_command('vllm serve T --speculative-config \'{"model": ')
    for bad in ("config norm_output: None → True", "aux ['a', 'b']", "{'k': 1}", "table row   "):
        with pytest.raises(AssertionError):
            check(bad)


# --- inspect, validate, quantize, convert on the committed drafters ------------------------------------


@pytest.mark.parametrize("drafter", [FIXTURE, *PRODUCERS], ids=lambda p: "/".join(Path(p).parts[-2:]))
def test_inspect_validate_and_quantize_plan_at_80_columns(drafter):
    names = tensor_names(drafter)
    out, _, code = run80("inspect", drafter)
    assert code == 0 and names
    check(out, names)
    out, _, code = run80("validate", drafter)
    report, _, _ = run80("validate", drafter, "--json")
    check(out, hints=hints_of(json.loads(report)))
    out, _, code = run80("quantize", drafter, "--dry-run")
    if code == 0:  # a drafter quantize refuses has said why in one line (its own tests)
        plan = json.loads(run80("quantize", drafter, "--dry-run", "--json")[0])
        check(out, [t["name"] for t in plan["tensors"]])  # the output's names (vllm-native)


@pytest.mark.parametrize("run", TRAINING_RUNS, ids=lambda p: "/".join(Path(p).parts[-2:]))
def test_training_checkpoints_at_80_columns(run):
    """validate and inspect of a producer's training checkpoint: the export command its hint gives (in
    backticks, mid-sentence) is whole on one line."""
    assert len(TRAINING_RUNS) >= 2
    out, _, code = run80("validate", run)
    hints = hints_of(json.loads(run80("validate", run, "--json")[0]))
    assert code == 1 and [h for h in hints if QUOTED_COMMAND.search(h)], out
    check(out, hints=hints)
    _, err, code = run80("inspect", run)
    assert code == 2
    check(err, hints=hints)


@pytest.mark.parametrize("drafter", PRODUCERS, ids=lambda p: "/".join(Path(p).parts[-2:]))
def test_convert_to_31_at_80_columns(drafter, tmp_path):
    """convert --to 3.1 of each producer's drafter: the changes, what each engine builds from the output (with
    its `eaglehub validate …` where one will not serve it), the warnings on stderr."""
    out, err, code = run80("convert", drafter, tmp_path / "v31", "--to", "3.1")
    assert code in (0, 1, 2)
    check(out)
    check(err)  # a refusal too: its error line and its hint's command whole


def _sparse_8b_drafter(path: Path) -> Path:
    """The fixture drafter at Llama-3.1-8B's sizes (H 4096, I 14336, draft vocabulary 32,000 of 128,256), bfloat16:
    its config and a safetensors header with those shapes over a sparse file (no bytes written, 0.8 GB long)."""
    scale = {576: 4096, 1536: 14336, 1728: 12288, 8192: 32000, 49152: 128256, 1152: 8192, 192: 1024}
    cfg = json.loads((FIXTURE / "config.json").read_text())
    cfg.update(hidden_size=4096, target_hidden_size=4096, num_attention_heads=32, num_key_value_heads=8)
    cfg.update(head_dim=128, intermediate_size=14336, vocab_size=128256, draft_vocab_size=32000)
    path.mkdir()
    (path / "config.json").write_text(json.dumps(cfg))
    with (FIXTURE / "model.safetensors").open("rb") as fh:
        (n,) = struct.unpack("<Q", fh.read(8))
        header = {k: v for k, v in json.loads(fh.read(n)).items() if k != "__metadata__"}
    out, offset = {}, 0
    for name, t in header.items():
        dtype, itemsize = {"F16": ("BF16", 2), "I64": ("I64", 8), "BOOL": ("BOOL", 1)}[t["dtype"]]
        shape = [scale.get(d, d) for d in t["shape"]]
        size = itemsize * int(np.prod(shape))
        out[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    raw = json.dumps(out).encode()
    raw += b" " * (-len(raw) % 8)
    with (path / "model.safetensors").open("wb") as fh:
        fh.write(struct.pack("<Q", len(raw)) + raw)
        fh.truncate(8 + len(raw) + offset)
    return path


def test_inspect_rows_stay_one_line_at_8b_sizes(tmp_path):
    """inspect of a drafter with an 8B target's shapes, bfloat16: each tensor's row one line (its shape and size
    one word each, ``4096×12288`` and ``96M``), the size's units defined under the table."""
    drafter = _sparse_8b_drafter(tmp_path / "llama-8b-drafter")
    out, _, code = run80("inspect", drafter)
    assert code == 0, out
    check(out, tensor_names(drafter))
    tensors = json.loads(run80("inspect", drafter, "--json")[0])["tensors"]
    rows = [line for line in out.splitlines() if "│" in line]
    assert len(rows) == len(tensors) == 15, out
    by_name = {row.split()[0]: row.split("│") for row in rows}
    for t in tensors:
        _, shape, dtype, size = (cell.strip() for cell in by_name[t["stored_name"]])
        assert shape == "×".join(map(str, t["shape"])) and dtype == t["dtype"]
        assert size[-1] in "BKMG" and float(size[:-1]) * 1024 ** "BKMG".index(size[-1]) == pytest.approx(
            t["bytes"], rel=0.06
        )
    assert [cell.strip() for cell in by_name["fc.weight"][1:]] == ["4096×12288", "bfloat16", "96M"]
    assert "size: B = bytes, K = KiB, M = MiB, G = GiB" in out


def test_quantize_and_convert_write_at_80_columns(tmp_path):
    out, _, code = run80("quantize", FIXTURE, tmp_path / "fp8")
    assert code == 0
    check(out, tensor_names(FIXTURE))
    # the rows the issue saw cut to one look: every midlayer.* name of the fixture, told apart
    assert len([n for n in tensor_names(FIXTURE) if n.startswith("midlayer.")]) == 10
    out, err, code = run80("convert", FIXTURE, tmp_path / "v31", "--to", "3.1")
    assert code == 0
    check(out)
    assert "config norm_output: unset → true" in out or "norm_output" not in out
    out, _, code = run80("inspect", tmp_path / "v31")
    check(out, tensor_names(tmp_path / "v31"))


def test_names_table_keeps_the_ends_that_differ():
    """Narrower than the names: each loses its middle, keeps an end no other has; where only the start
    differs, no cut keeps them apart and they are shown whole (folded), never made to look the same."""

    from eaglehub.views.tables import fit_names, names_table

    names = tensor_names(FIXTURE)
    from eaglehub.views.console import TextConsole

    console = TextConsole(width=50, file=io.StringIO())
    console.print(names_table(console, ["tensor", "shape"], [[n, "[576, 1536]"] for n in names]))
    text = console.file.getvalue()
    check(text, names)
    assert max(map(len, text.splitlines())) <= 50
    assert "midlayer.post_attention_layernorm.weight" not in text  # cut, as 50 columns need
    starts = ["run-a/checkpoint/final", "run-b/checkpoint/final"]
    assert fit_names(starts, 12) == {n: n for n in starts}


def test_piped_for_real(tmp_path):
    """The same as a shell pipe gives it: a process whose stdout is a pipe, COLUMNS=80."""
    env = {**os.environ, "COLUMNS": str(WIDTH)}
    for args in (["inspect", str(FIXTURE)], ["quantize", str(FIXTURE), str(tmp_path / "q")]):
        res = subprocess.run(
            [sys.executable, "-m", "eaglehub", *args], capture_output=True, text=True, env=env, check=False
        )
        assert res.returncode == 0, res.stderr
        check(res.stdout, tensor_names(FIXTURE))


# --- verify: drafters told apart by the ends of long paths, hints and the serve line whole, CPU figures ---


@pytest.fixture
def verify_setup(tmp_path, monkeypatch, make_target):
    """A tiny target; three drafters under one long directory (the start of every path the same); the
    scripted engine as vLLM on a CPU."""
    from helpers.checkpoints import make_drafter_in

    target = make_target(n_layers=8)
    root = tmp_path / "experiments" / "llama-3.1-8b-instruct-eagle3-sweep-2026-12" / "checkpoints"
    root.mkdir(parents=True)
    drafters = [make_drafter_in(root, name) for name in ("drafter-lr-3e-4", "drafter-lr-1e-4", "drafter-lr-1e-3")]
    prompts = tmp_path / "p.jsonl"
    write_prompts(prompts)
    monkeypatch.setattr("eaglehub.engines.chat.encode_chat", lambda t, msgs: [[1, 2, 3]] * len(msgs))
    engine = ScriptedEngine({d.name: (BASE, GOOD) for d in drafters})
    monkeypatch.setattr("eaglehub.engines.vllm_engine.VllmEngine", lambda **kw: engine)
    monkeypatch.setattr("eaglehub.verify.report._vllm_cpu_build", lambda: True, raising=False)
    return target, drafters, prompts


def test_verify_at_80_columns(verify_setup):
    target, drafters, prompts = verify_setup
    args = ["verify", "--target", target, "--prompts", prompts, "--max-tokens", "4"]
    for d in drafters[:2]:
        args += ["--drafter", d]
    args += ["--baseline-drafter", drafters[2]]
    out, err, code = run80(*args)
    report = json.loads(run80(*args, "--json")[0])
    assert code == 0, out + err
    paths = [str(d) for d in drafters]
    check(out, paths, hints_of(report))
    assert "vllm serve" in out
    # the CPU figures are labelled in the text and in --json
    assert report["speed_figures"] == {
        "device": "cpu",
        "speed_claim": False,
        "note": report["speed_figures"]["note"],
    }
    assert "not a speed claim" in report["speed_figures"]["note"]
    flat = " ".join(out.split())  # prose wraps at words
    assert "on a CPU 6.0 tok/s" in flat and "CPU figures, not a speed claim" in flat
    assert "on a CPU, not a speedup claim: 6.0 tok/s, 1.00 × the target alone's" in flat
    # every column heading defined: no abbreviations left unexplained
    for undefined in ("uncond.", "acc. rate"):
        assert undefined not in out
    assert "given the one before:" in flat and "accepted per position:" in flat


def test_verify_on_a_gpu_makes_no_cpu_caveat(verify_setup, monkeypatch):
    target, drafters, prompts = verify_setup
    monkeypatch.setattr("eaglehub.verify.report._vllm_cpu_build", lambda: False)
    args = ["verify", "--target", target, "--prompts", prompts, "--max-tokens", "4", "--drafter", drafters[0]]
    out, _, code = run80(*args)
    assert code == 0 and "CPU" not in out
    assert json.loads(run80(*args, "--json")[0])["speed_figures"]["speed_claim"] is True


def test_verify_findings_hints_whole(verify_setup, make_drafter, monkeypatch):
    """A drafter whose d2t breaks acceptance (W-VERIFY-LOW-AL and its probe / convert hints) at 80 columns."""
    target, drafters, prompts = verify_setup
    from helpers.scripted import DEAD

    engine = ScriptedEngine({drafters[0].name: (BASE, DEAD)})
    monkeypatch.setattr("eaglehub.engines.vllm_engine.VllmEngine", lambda **kw: engine)
    args = ["verify", "--target", target, "--prompts", prompts, "--max-tokens", "4", "--drafter", drafters[0]]
    out, _, _ = run80(*args)
    report = json.loads(run80(*args, "--json")[0])
    assert hints_of(report)
    check(out, [str(drafters[0])], hints_of(report))


def test_verify_says_a_shared_hint_once(verify_setup, monkeypatch):
    """W-VERIFY-LOW-AL on the overall AL and on each category gives one fix: printed once, not once a category."""
    from test_verify import counters_with_al

    target, drafters, prompts = verify_setup
    engine = ScriptedEngine({drafters[0].name: (BASE, counters_with_al(1.25))})
    monkeypatch.setattr("eaglehub.engines.vllm_engine.VllmEngine", lambda **kw: engine)
    args = ["verify", "--target", target, "--prompts", prompts, "--max-tokens", "4", "--drafter", drafters[0]]
    out, _, _ = run80(*args)
    report = json.loads(run80(*args, "--json")[0])
    low = [f for f in report["drafters"][0]["findings"] if f["code"] == "W-VERIFY-LOW-AL"]
    assert len(low) == 3 and len({f["hint"] for f in low}) == 1
    check(out, [str(drafters[0])], hints_of(report))
    (command,) = commands_in(low[0]["hint"])
    assert out.count(command) == 1 and out.count("hint: as above") == 2


def _on_fake_engine(tmp_path, monkeypatch, engine) -> Path:
    """A prompt file, chat encoding without a tokenizer and ``engine`` in place of vLLM: a verb's text on a fake run."""
    prompts = tmp_path / "p.jsonl"
    write_prompts(prompts)
    monkeypatch.setattr("eaglehub.engines.chat.encode_chat", lambda t, msgs: [[1, 2, n] for n in range(len(msgs))])
    monkeypatch.setattr("eaglehub.engines.vllm_engine.VllmEngine", lambda **kw: engine())
    return prompts


def test_verify_distribution_table_fits_80_columns(tmp_path, monkeypatch, make_drafter, make_target):
    """The acceptance distribution (greedy and sampled rows, test_verify_sampled's counting engine): short
    headings each whole, a row a line with its percentiles and step shares whole, a legend line defining them."""
    from test_verify_sampled import CountingEngine

    target = make_target(n_layers=8)
    drafter = make_drafter("good")
    prompts = _on_fake_engine(tmp_path, monkeypatch, CountingEngine)
    args = ["verify", "--target", target, "--drafter", drafter, "--prompts", prompts, "--max-tokens", "4"]
    args += ["--temperature", "0.7", "--samples", "2", "--seed", "3"]
    out, report = run80_ok(*args)
    check(out, [str(drafter)], hints_of(report))
    lines = out.splitlines()
    top = lines.index("acceptance distribution")
    header, _, greedy, sampled = lines[top + 1 : top + 5]
    assert "…" not in "".join(lines[top : top + 5]) and max(len(line) for line in lines[top : top + 5]) <= WIDTH
    for heading in ("run", "reqs", "AL", "AL 95% CI", "pos. %", "AL p10/50/90", "steps %"):
        assert heading in header
    d = report["drafters"][0]
    for line, pr in ((greedy, d["acceptance"]["per_request"]), (sampled, d["sampled_acceptance"]["per_request"])):
        assert f"{pr['p10']:.2f}/{pr['p50']:.2f}/{pr['p90']:.2f}" in line
        assert "/".join(f"{100 * x:.0f}" for x in pr["accepted_histogram"]["shares"]) in line
    ci = d["sampled_acceptance"]["acceptance_length_ci"]
    assert sampled.split()[0] == "sampled" and f"{ci['low']:.3f}–{ci['high']:.3f}" in sampled
    flat = " ".join(out.split())
    assert "sampled: T=0.7 p=1 k=off x2 (T: temperature" in flat
    assert "steps %: the share of verify steps that accepted 0/1/2/3 draft tokens" in flat


# --- speedup's and diagnose's headings ----------------------------------------------------------------


def test_speedup_headings_are_defined():

    from eaglehub.views import speedup

    source = Path(speedup.__file__).read_text()
    from eaglehub.views.console import TextConsole

    console = TextConsole(width=WIDTH, file=io.StringIO())
    level = {
        "concurrency": 1,
        "prompts": 1,
        "batches": 1,
        "target_alone": {"output_tokens_per_second": 10.0, "output_tokens": 16},
        "with_drafter": {"output_tokens_per_second": 12.0, "output_tokens": 16},
        "measured_speedup": 1.2,
        "acceptance": {"acceptance_length": 2.0},
        "implied_alpha": 0.6,
        "expected_speedup_leviathan": 1.5,
        "expected_speedup_general": 1.4,
    }
    costs = dict(
        device="cpu", threads=2, prefix_tokens=256, repeats=10, t_target_1_ms=1, t_verify_k1_ms=2, t_draft_1_ms=0.5
    )
    report = {
        "drafter": "d",
        "settings": {"num_speculative_tokens": 3, "max_tokens": 8, "dtype": "float32"},
        "engine": {"name": "vllm", "version": "0.32.0"},
        "levels": [level],
        "costs": {**costs, "c": 0.5, "v": 2.0},
        "speedup_bound": 1.1,
        "notes": [],
        "serve_command": "vllm serve T",
    }
    speedup.render_report(report, console)
    text = console.file.getvalue()
    for heading in ("conc.", "α", "exp. Leviathan", "exp. general"):
        assert heading in source and f"{heading}:" in text, heading
    check(text)
    assert "conc. 1: 1 prompt in 1 batch, 16 output tokens" in " ".join(text.split())


def _headings(text: str) -> list[list[str]]:
    """Each boxed table's column headings in ``text`` (the cells between its top rule and the rule under its
    header, a column's lines joined): an untitled column is an empty heading."""
    tables, lines = [], text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("┏"):
            end = next(j for j in range(i, len(lines)) if lines[j].startswith("┡"))
            cells = [row.strip("┃").split("┃") for row in lines[i + 1 : end]]
            tables.append([" ".join(c[n].strip() for c in cells).strip() for n in range(len(cells[0]))])
    return tables


def test_probe_tables_title_every_column():
    """probe's table per field: every column has a heading (the configured / trained marks' too), each
    defined on the line under the tables."""
    from eaglehub.views import probe
    from eaglehub.views.console import TextConsole

    def reading(value, label, configured, trained, al):
        return dict(value=value, label=label, configured=configured, trained=trained, acceptance_length=al,
                    acceptance_rate_per_position=[0.5, 0.25, 0.1], num_drafts=48)  # fmt: skip

    fields = [
        {"field": "norm_output", "config_keys": "norm_output", "verdict": "beaten",
         "readings": [reading(True, "final norm on", False, True, 1.85), reading(False, "off", True, False, 1.2)]},
        {"field": "aux_layer_ids", "config_keys": "eagle_aux_hidden_state_layer_ids", "verdict": "inconclusive",
         "readings": [reading([1, 14, 27], "as stored", True, True, 1.8), reading([2, 15, 28], "+1", False, False, 1.7)]},
    ]  # fmt: skip
    report = {
        "drafter": "d", "target": "t", "format": "vllm", "num_speculative_tokens": 3, "readings_measured": 4,
        "prompts": {"count": 6, "max_tokens": 16}, "seconds": {"total": 15.0}, "fields": fields,
        "acceptance": {"configured": {"acceptance_length": 1.2}, "trained": {"acceptance_length": 1.85}},
        "settings": {"norm_output": True}, "findings": [], "counts": {"error": 0, "warning": 0, "info": 0},
        "passed": False, "verdict": "beaten", "written": None, "engine": {"name": "reference", "version": "0.1.0"},
    }  # fmt: skip
    console = TextConsole(width=WIDTH, file=io.StringIO())
    probe.render_report(report, console)
    text = console.file.getvalue()
    check(text)
    tables = _headings(text)
    assert len(tables) == 2 and all(all(tables_heading for tables_heading in t) for t in tables), tables
    assert tables[0][:2] == ["reading", "status"]
    flat = " ".join(text.split())
    # one word a cell, a row a line: the status and the rates per position whole on each reading's line
    assert [line.split("│")[2].strip() for line in text.splitlines() if "0.50/0.25/0.10" in line] == [
        "trained",
        "configured",
        "configured,kept",
        "—",
    ]
    assert "status: configured = the reading the config gives; trained = " in flat


# --- progress on stderr, a plain line per step, off a terminal -----------------------------------------


def test_progress_is_plain_lines_on_stderr_off_a_terminal(monkeypatch, tmp_path):
    """``probe`` (and ``convert --calibrate``, ``vocab``: the same status console) print each step as a line."""

    def fake_probe(drafter, opts, progress=None):
        for step in ("loading the target", "recording 6 prompts", "round 1: norm_output (2 readings)"):
            progress(step)
        raise EaglehubError("stopped here", hint="nothing to do")

    monkeypatch.setattr("eaglehub.probe.run.probe", fake_probe)
    out, err, code = run80("probe", FIXTURE, "--target", "smollm2")
    assert code != 0
    lines = [line for line in err.splitlines() if not line.startswith(("error", "hint"))]
    assert [re.sub(r" \(\d+ s\)$", "", line) for line in lines] == [
        "probing",
        "loading the target",
        "recording 6 prompts",
        "round 1: norm_output (2 readings)",
    ], err
    assert "\r" not in err and "\x1b" not in err


def test_engine_runs_report_a_line_per_batch_off_a_terminal(verify_setup):
    target, drafters, prompts = verify_setup
    _, err, code = run80(
        "verify", "--target", target, "--prompts", prompts, "--max-tokens", "4", "--drafter", drafters[0]
    )
    assert code == 0
    assert "\r" not in err and "\x1b" not in err
    steps = [line for line in err.splitlines() if "requests" in line]
    assert any(line.startswith("target alone  2/4 requests (math done") for line in steps), err
    assert any(f"target + drafter {drafters[0].name} (k=3)  4/4 requests (coding done" in line for line in steps), err


def test_status_off_a_terminal_is_a_line_per_new_step(capsys):
    """convert --calibrate's phases and vocab's steps go through the consoles' status: a line each, piped."""
    from eaglehub.cli.output import console, err_console

    with err_console.status("calibration data: 4 prompts x 8 target tokens") as status:
        status.update("measuring the source and the plain upgrade on held-out prompts")
        status.update("measuring the source and the plain upgrade on held-out prompts")  # the same: once
    with console.status("converting the target"):  # a stdout console's status goes to stderr too
        pass
    captured = capsys.readouterr()
    assert captured.out == ""
    assert [re.sub(r" \(\d+ s\)$", "", line) for line in captured.err.splitlines()] == [
        "calibration data: 4 prompts x 8 target tokens",
        "measuring the source and the plain upgrade on held-out prompts",
        "converting the target",
    ]


def test_byte_progress_off_a_terminal(capsys):
    from rich.console import Console

    from eaglehub.views.common import byte_progress

    with byte_progress(Console(file=sys.stderr), "converting", min_bytes=10) as start:
        advance = start(100)
        for _ in range(4):
            advance(25)
    err = capsys.readouterr().err.splitlines()
    assert err == [
        "converting: 100 B",
        "converting: 25 B of 100 B (25 %)",
        "converting: 50 B of 100 B (50 %)",
        "converting: 75 B of 100 B (75 %)",
        "converting: 100 B of 100 B (100 %)",
    ]


# --- speedup, diagnose, publish --dry-run, watch: their own tests' inputs, at 80 columns -----------------


def test_speedup_at_80_columns(tmp_path, monkeypatch, make_drafter, make_target):
    """speedup on its own tests' fake engine (test_speedup.FakeEngine): table, legend, notes, serve line."""
    from test_speedup import FakeEngine

    target = make_target(n_layers=8, weights=True)
    drafter = make_drafter("drafter-with-a-long-name")
    prompts = _on_fake_engine(tmp_path, monkeypatch, FakeEngine)
    args = ["speedup", "--target", target, "--drafter", drafter, "--prompts", prompts, "--concurrency", "4,1"]
    args += ["--max-tokens", "8", "--prefix-tokens", "16", "--repeats", "2"]
    out, report = run80_ok(*args)
    check(out, hints=[report["serve_command"]])
    flat = " ".join(out.split())
    assert "conc.: concurrency" in flat
    # each speedup with its sample: prompts, batches, output tokens, one timed run each (FakeEngine: 8 a prompt)
    sample = "sample: each speedup is one timed run without and one with the drafter; "
    sample += "; ".join(
        f"conc. {lv['concurrency']}: {lv['prompts']} prompts in {lv['batches']} batch{'es' * (lv['batches'] > 1)}, "
        f"{lv['target_alone']['output_tokens']} output tokens"
        for lv in report["levels"]
    )
    assert sample in flat
    assert [(lv["concurrency"], lv["prompts"], lv["batches"]) for lv in report["levels"]] == [(1, 4, 4), (4, 4, 1)]
    assert out.index("sample:") < out.index("conc.: concurrency")  # under the table, before the legend


def test_diagnose_at_80_columns(tmp_path, monkeypatch, make_drafter, make_target):
    """diagnose on its own tests' fake engine (test_diagnose.FakeEngine) and tiny tokenizer."""
    from test_diagnose import FakeEngine, add_tokenizer
    from test_diagnose import write_prompts as diagnose_prompts

    target = add_tokenizer(make_target(n_layers=8, max_position_embeddings=1200))
    d3, d31 = make_drafter("d3"), make_drafter("d31", v31=True)
    prompts = diagnose_prompts(tmp_path / "p.jsonl")
    monkeypatch.setattr("eaglehub.diagnose.run.make_engine", lambda name, device: FakeEngine())
    args = ["diagnose", "--target", target, "--drafter", d3, "--drafter", d31, "--prompts", prompts]
    out, err, code = run80(*args, "--depth", "3", "--contexts", "0,512", "--max-tokens", "8")
    assert code == 0, out + err
    check(out, [str(d3), str(d31)])
    assert "accepted at i / accepted at i − 1" in " ".join(out.split())


def test_publish_dry_run_at_80_columns(tmp_path, monkeypatch, make_drafter, make_target, fake_hub, hf_env):
    """publish --dry-run: the file table, the card, the gate; the drafter verified by the scripted engine."""
    from eaglehub.verify import run as verify
    from eaglehub.verify.report import write_report

    target = make_target(n_layers=8)
    prompts = tmp_path / "p.jsonl"
    write_prompts(prompts)
    monkeypatch.setattr("eaglehub.engines.chat.encode_chat", lambda t, msgs: [[1, 2, 3]] * len(msgs))
    drafter = make_drafter("good")
    (drafter / "README.md").write_text("---\nlicense: apache-2.0\n---\n# good\n\nTrained on tests.\n")
    opts = verify.VerifyOptions(
        target=str(target), drafters=[str(drafter)], k=3, max_tokens=4, prompts_file=str(prompts)
    )
    write_report(verify.run_verify(opts, engine=ScriptedEngine({"good": (BASE, GOOD)})), tmp_path / "good.verify.json")
    args = ["publish", drafter, "--repo", "org/tiny", "--endpoint", fake_hub.url, "--dry-run"]
    out, report = run80_ok(*args)
    check(out, [f["path"] for f in report["files"]], hints_of(report))


def test_watch_at_80_columns():
    """watch on a scripted metrics server (helpers/metrics_text.py) with a failed poll in the middle."""
    from helpers.metrics_text import MetricsServer
    from test_watch import Script, text

    script = Script(text(0, (0, 0, 0)), text(40, (20, 8, 0)), 500, text(80, (40, 16, 0)))
    with MetricsServer(script) as srv:
        out, err, code = run80("watch", "--endpoint", srv.base_url + "/v1", "--interval", "0.2", "--count", "3")
    assert code == 0, out + err
    check(out)
    assert "W-WATCH-UNREACHABLE" in out
    assert "s: the seconds an interval spans" in out and "pos i: the share" in " ".join(out.split())


def test_drafters_at_80_columns(hub_tree):
    """drafters on the fake Hub of its own tests (test_discovery.hub_tree): the lineage, the table, the hints."""
    hub = hub_tree["hub"]
    args = ["drafters", "--target", "org/tiny-target-fp8", "--endpoint", hub.url]
    out, report = run80_ok(*args)
    check(
        out, [d["repo_id"] for d in report["drafters"]], ["verify them: eaglehub verify --target org/tiny-target-fp8"]
    )


@pytest.mark.slow
def test_pipeline_at_80_columns(tiny, fake_hub, hf_env):
    """pipeline on its own tests' manifest (test_pipeline.tiny): a drafter that passes, one validation fails."""
    tmp_path, _, _ = tiny
    args = ["pipeline", tmp_path / "pipeline.toml", "--work-dir", tmp_path / "work", "--endpoint", fake_hub.url]
    out, err, code = run80(*args)
    assert code == 1, out + err
    summary = json.loads(run80(*args, "--json")[0])
    check(out, [f"{d['target']}--{d['drafter']}" for d in summary["drafters"]])


# --- the real pair: probe in the reference engine, verify in vLLM (the session's shared runs) ------------


@pytest.mark.slow
@pytest.mark.real
def test_probe_at_80_columns_with_progress_piped(tmp_path):
    """probe of the committed drafter on one prompt per category × 16 tokens (about 15 s on a CPU): its tables,
    findings and hints at 80 columns, and a line on stderr per step while it measures."""
    report_path = tmp_path / "probe.json"
    args = ["probe", FIXTURE, "--target", "smollm2", "--limit", "1", "--max-tokens", "16", "--report", report_path]
    out, err, _ = run80(*args)
    report = json.loads(report_path.read_text())
    check(out, hints=hints_of(report))
    # the engine its ALs come from (verify's on the same prompts are vLLM's and may differ a little)
    engine = f"({report['engine']['name']} engine {report['engine']['version']})"
    assert " ".join(engine.split()) in " ".join(out.split("aux_layer_ids")[0].split()), out
    steps = [re.sub(r" \(\d+ s\)$", "", line) for line in err.splitlines()]
    assert steps[:3] == ["probing", "loading the target", "recording the target's greedy continuations of 6 prompts"]
    assert any(s.startswith("round 1: norm_output") for s in steps) and "\r" not in err


@pytest.mark.slow
@pytest.mark.real
def test_vocab_at_80_columns_with_progress_piped(tmp_path):
    """vocab of the committed drafter on one prompt per category × 16 tokens (seconds): a line per step."""
    report_path = tmp_path / "vocab.json"
    args = ["vocab", FIXTURE, "--target", "smollm2", "--limit", "1", "--max-tokens", "16", "--report", report_path]
    out, err, code = run80(*args)
    assert code == 0, out + err
    check(out, hints=hints_of(json.loads(report_path.read_text())))
    steps = [re.sub(r" \(\d+ s\)$", "", line) for line in err.splitlines()]
    assert steps[:2] == ["measuring", "loading the target"] and len(steps) >= 3 and "\r" not in err


@pytest.mark.slow
@pytest.mark.real
def test_calibrate_at_80_columns_with_progress_piped(tmp_path):
    """convert --calibrate of the committed drafter, smallest settings (about 30 s on a CPU): a line per phase on
    stderr as it goes, the fitted tensors and the acceptance table at 80 columns."""
    args = ["convert", FIXTURE, tmp_path / "cal", "--to", "3.1", "--calibrate", "--target", "smollm2"]
    out, err, code = run80(*args, "--calibration-limit", "3", "--calibration-tokens", "8", "--steps", "0")
    assert code == 0, out + err
    check(out)
    assert "config fc_norm: unset → true" in out
    steps = [re.sub(r" \(\d+ s\)$", "", line) for line in err.splitlines()]
    assert (
        steps[0].startswith("calibration data: ")
        and "measuring the source and the plain upgrade on held-out prompts" in steps
    )
    assert "\r" not in err


@pytest.mark.vllm
@pytest.mark.real
def test_real_pair_verify_at_80_columns(real_drafters, shared_engine_runs, tmp_path):
    """test_real_pair's verify (the same request: its engine runs are shared) at 80 columns: three drafters, two
    engines, the cross-engine table's drafter paths, the serve lines; CPU figures labelled where vLLM is the CPU
    build."""
    from helpers.real_runs import SETTINGS

    drafters = [FIXTURE, real_drafters.upgraded, real_drafters.speculators]
    report_path = tmp_path / "verify.json"
    args = ["verify", *SETTINGS, *[a for d in drafters for a in ("--drafter", d)], "--report", report_path]
    out, err, code = run80(*args, "--engine", "vllm", "--engine", "reference")
    assert code == 0, out + err
    report = json.loads(report_path.read_text())
    check(out, [str(d) for d in drafters], hints_of(report))
    assert out.count("vllm serve ") == 3
    cpu = report["speed_figures"]["device"] == "cpu"
    assert ("CPU figures, not a speed claim" in " ".join(out.split())) == cpu


def test_verify_dry_run_plan_at_80_columns(verify_setup):
    """verify --dry-run: the launch plan, the preflight's findings, the ready serve line, whole."""
    target, drafters, _ = verify_setup
    args = ["verify", "--dry-run", "--target", target, "--drafter", drafters[0], "--gpus", "2", "--gpu-memory", "80"]
    out, err, code = run80(*args)
    plan = json.loads(run80(*args, "--json")[0])
    assert "vllm serve " in out, out + err
    check(out, hints=[v for k, v in _walk(plan) if k in ("serve_command", "hint") and v])
    block = out[out.index("LLM(...) arguments") :].split("\n", 1)[1]
    json.loads(block[: block.index("\n}\n") + 2])  # the LLM(...) arguments paste as JSON
    check(err)


def _walk(obj):
    """Every (key, value) pair of a JSON document, depth first."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield k, v
            yield from _walk(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _walk(v)


def test_the_cli_consoles_read_columns_at_each_use(monkeypatch):
    """The module-level consoles are made once per process; a width given later by COLUMNS (a test runner
    invoking commands one after another with their own environment) must be the one a command prints at."""
    from eaglehub.views.console import TextConsole

    monkeypatch.setenv("COLUMNS", "200")
    console = TextConsole(file=io.StringIO())
    assert console.width == 200
    monkeypatch.setenv("COLUMNS", "63")
    assert console.width == 63
    assert TextConsole(file=io.StringIO(), width=99).width == 99  # a width given in code stays
