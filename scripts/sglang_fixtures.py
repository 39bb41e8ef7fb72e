"""The replies and ``/metrics`` pages of an SGLang 0.5.23 server, made by SGLang's own code from given counters
(fixtures/servers/sglang-0.5.23/; docs/verify.md, "Measuring a served endpoint"). Run with the SGLang
environment's python (scripts/engine_envs.sh); this script never imports eaglehub:

    .work/engines/sglang-0.5.23/venv/bin/python scripts/sglang_fixtures.py fixtures/servers/sglang-0.5.23

SGLang cannot serve on this CPU machine (its HTTP server, scheduler and serving classes need CUDA-only and
server-only packages), so each piece of a served answer is made by the function or class SGLang itself uses
for it, called with the numbers of :data:`REQUESTS`:

* the per-request histogram: ``Req.update_spec_correct_drafts_histogram`` (managers/schedule_batch.py:1566),
  called once per verify step with that step's accepted draft count, as the scheduler does
  (scheduler_components/batch_result_processor.py:832-836);
* the request's ``meta_info`` speculative fields: ``TokenizerManager._calculate_spec_decoding_metrics``
  (managers/tokenizer_manager.py:3138-3207). Its module does not import here (fastapi), so the method's own
  source is taken from the installed file and compiled alone (annotations dropped);
* ``sglext.spec_tokens_details``: ``process_spec_tokens_details_from_ret`` (entrypoints/openai/utils.py:344);
* the response bodies: ``CompletionResponse`` / ``ChatCompletionResponse`` and their choices
  (entrypoints/openai/protocol.py), filled as ``_build_completion_response`` (serving_completions.py:531-620)
  and ``_build_chat_response`` (serving_chat.py:2832-3050) fill them, serialized with ``model_dump``;
* ``/metrics``: ``TokenizerMetricsCollector.observe_one_finished_request`` once per finished request and
  ``SchedulerMetricsCollector.log_stats`` (observability/metrics_collector.py), exposed by prometheus_client's
  ``generate_latest``. Two things differ from a live server, both for a reproducible page: the registry holds
  only SGLang's collectors (no process / platform / GC metrics) and counters carry no ``_created`` series;
* ``/server_info``: ``build_server_info`` (utils/common.py:3584) of the ``ServerArgs`` the pages were made
  with, plus ``version`` and ``frontend`` as http_server.py:863-891 adds them (no scheduler state).

Each request is a list of verify steps, each the number of draft tokens that step accepted; its first output
token comes from prefill, so its completion tokens are 1 + Σ (accepted + 1). Writes into OUT: ``completions/``,
``chat/``, ``chat-meta-info/`` (a chat request with ``return_meta_info`` only), ``nospec/`` (the target alone:
no speculative fields), ``older/`` (``meta_info`` with the field names SGLang used before 0.5.23's
``spec_num_correct_drafts``: eaglehub's reading of older servers), ``completions-n2.json`` (``n`` = 2: the
details as a list), ``metrics-after-N.prom`` (after N finished requests), ``models.json`` (``/v1/models``),
``server_info.json`` and ``MANIFEST.json``.
"""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
import json
import os
import sys
import tempfile
import types

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import engine_reading  # noqa: E402  (the stand-ins and the tiny target of the engine-code tier)

MODEL = "eaglehub/fixture-target"
STEPS, TOPK, DRAFT_TOKENS = 3, 1, 4
"""``--speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4``: a chain of 3."""
REQUESTS = [
    [3, 1, 0, 2],
    [0, 0, 1],
    [2, 2, 3, 1, 0],
    [1, 0],
    [3, 3],
    [0, 1, 1, 2, 0, 1],
]
"""Per request (the six prompts of ``verify --limit 1``), the accepted draft tokens of each verify step.
Request 1 never accepts more than 1 and request 4 always 3: SGLang's histogram then has 2 and 4 entries."""
PAGES = {f"metrics-after-{n}.prom": n for n in range(len(REQUESTS) + 1)}
"""``/metrics`` after each finished request (after 0: a fresh server, no decode logged yet, gauges unset)."""
PROMPT_TOKENS = 20
LEGACY = {
    "spec_num_correct_drafts": "spec_accepted_drafts",
    "spec_num_proposed_drafts": "spec_proposed_drafts",
    "spec_correct_drafts_histogram": "spec_accept_histogram",
}


def sglang_method(module_file: str, cls: str, name: str, env: dict):
    """The function ``cls.name`` compiled from SGLang's own source file, annotations dropped (its module
    does not import here); ``env`` holds the module-level names it uses."""
    tree = ast.parse(open(module_file).read())
    klass = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls)
    fn = next(n for n in klass.body if isinstance(n, ast.FunctionDef) and n.name == name)
    for a in fn.args.args + fn.args.kwonlyargs:
        a.annotation = None
    fn.returns = None
    module = ast.Module(body=[fn], type_ignores=[])
    ast.fix_missing_locations(module)
    code = compile(module, module_file, "exec")
    exec(code, env)
    return env[name]


def outputs(i: int, n: int) -> list[int]:
    return [100 + 17 * i + j for j in range(n)]


def main(out: str) -> int:
    engine_reading.quiet_env("sglang")
    import prometheus_client
    from prometheus_client import REGISTRY, generate_latest

    prometheus_client.disable_created_metrics()
    for c in (
        prometheus_client.PROCESS_COLLECTOR,
        prometheus_client.PLATFORM_COLLECTOR,
        prometheus_client.GC_COLLECTOR,
    ):
        REGISTRY.unregister(c)

    import sglang
    from sglang.srt import runtime_context as rc
    from sglang.srt.entrypoints.openai import protocol as p
    from sglang.srt.entrypoints.openai.utils import process_spec_tokens_details_from_ret
    from sglang.srt.managers import schedule_batch
    from sglang.srt.observability import metrics_collector as mc
    from sglang.srt.server_args import ServerArgs
    from sglang.srt.utils.common import build_server_info

    os.makedirs(out, exist_ok=True)
    work = tempfile.mkdtemp(prefix="sglang-fixtures-")
    target = engine_reading.write_target(work, 64, 256, 2048)
    sa = ServerArgs(
        model_path=target,
        device="cpu",
        skip_tokenizer_init=True,
        speculative_algorithm="EAGLE3",
        speculative_draft_model_path=target,
        speculative_num_steps=STEPS,
        speculative_eagle_topk=TOPK,
        speculative_num_draft_tokens=DRAFT_TOKENS,
        mem_fraction_static=0.5,
        enable_metrics=True,
        served_model_name=MODEL,
        random_seed=0,  # else drawn at random: /server_info would differ run to run
    )
    rc.publish(sa, role="scheduler", ranks=rc.SpawnRanks(world_rank=0))

    calc = sglang_method(
        importlib.util.find_spec("sglang.srt.managers.tokenizer_manager").origin,
        "TokenizerManager",
        "_calculate_spec_decoding_metrics",
        {"get_spec": rc.get_spec, "_ragged_verify_cap_accept": lambda: False, "getattr": getattr},
    )
    tok_labels = mc.tokenizer_metric_labels()
    tok = mc.TokenizerMetricsCollector(server_args=sa, labels=tok_labels)
    sched = mc.SchedulerMetricsCollector.init_new(
        server_args=sa, enable_priority_scheduling=False, enable_lora=False, enable_hierarchical_cache=False
    ).collector

    def page() -> str:
        return generate_latest(REGISTRY).decode()

    pages = {0: page()}
    rets = []
    for i, steps in enumerate(REQUESTS):
        req = types.SimpleNamespace(spec_correct_drafts_histogram=[])
        for accepted in steps:
            schedule_batch.Req.update_spec_correct_drafts_histogram(req, accepted)
        completion = 1 + sum(a + 1 for a in steps)
        recv = types.SimpleNamespace(
            spec_verify_ct=[len(steps)],
            spec_num_correct_drafts=[sum(steps)],
            completion_tokens=[completion],
            spec_correct_drafts_histogram=[req.spec_correct_drafts_histogram],
            spec_num_cap_tokens=None,
            spec_cap_lens_histogram=None,
        )
        meta = {
            "id": f"fixture-{i}",
            "finish_reason": {"type": "length", "length": completion},
            "prompt_tokens": PROMPT_TOKENS,
            "completion_tokens": completion,
            "cached_tokens": 0,
        }
        calc(None, meta, recv, 0)
        ids = outputs(i, completion)
        rets.append({"text": " ".join(map(str, ids)), "output_ids": ids, "meta_info": meta})
        tok.observe_one_finished_request(
            tok_labels, PROMPT_TOKENS, completion, 0, 0.5, False, spec_verify_ct=len(steps), is_streaming=False
        )
        done = i + 1
        if done in PAGES.values():
            # the scheduler's decode log since the last page: SGLang's own interval AL and rate
            since = REQUESTS[[n for n in sorted(pages) if n < done][-1] : done]
            forward = sum(len(s) for s in since)
            correct = sum(sum(s) for s in since)
            stats = mc.SchedulerStats(
                spec_accept_length=(correct + forward) / forward,
                spec_accept_rate=correct / (forward * (DRAFT_TOKENS - 1)),
                spec_num_steps=STEPS,
                spec_num_draft_tokens=DRAFT_TOKENS,
            )
            sched.log_stats(stats)
            pages[done] = page()
    for name, n in PAGES.items():
        write(out, name, pages[n])

    def usage(ret):
        return p.UsageInfo(
            prompt_tokens=PROMPT_TOKENS,
            completion_tokens=ret["meta_info"]["completion_tokens"],
            total_tokens=PROMPT_TOKENS + ret["meta_info"]["completion_tokens"],
        )

    def sglext(details):
        return p.SglExt(spec_tokens_details=details) if details else None

    def completion_body(rets_, request):
        details = [d for d in (process_spec_tokens_details_from_ret(r, request) for r in rets_) if d is not None]
        choices = [
            p.CompletionResponseChoice(
                index=j,
                text=r["text"],
                finish_reason=r["meta_info"]["finish_reason"]["type"],
                token_ids=r["output_ids"] if request.return_token_ids else None,
            )
            for j, r in enumerate(rets_)
        ]
        body = p.CompletionResponse(
            id=rets_[0]["meta_info"]["id"],
            model=request.model,
            created=0,
            choices=choices,
            usage=usage(rets_[0]),
            sglext=sglext(details if request.n > 1 else (details[0] if details else None)),
        )
        return body.model_dump()

    def chat_body(ret, request):
        details = process_spec_tokens_details_from_ret(ret, request)
        choice = p.ChatCompletionResponseChoice(
            index=0,
            message=p.ChatMessage(role="assistant", content=ret["text"]),
            finish_reason=ret["meta_info"]["finish_reason"]["type"],
            response_token_ids=ret["output_ids"] if request.return_token_ids else None,
            meta_info=ret["meta_info"] if request.return_meta_info else None,
        )
        body = p.ChatCompletionResponse(
            id=ret["meta_info"]["id"], created=0, model=request.model, choices=[choice], usage=usage(ret),
            sglext=sglext(details),
        )  # fmt: skip
        return body.model_dump()

    def plain(ret):
        meta = {k: v for k, v in ret["meta_info"].items() if not k.startswith("spec_")}
        return {**ret, "meta_info": meta}

    messages = [{"role": "user", "content": "hi"}]
    flags = {"return_token_ids": True, "max_tokens": 64}
    for i, ret in enumerate(rets):
        c = p.CompletionRequest(model=MODEL, prompt=[1, 2, 3], return_spec_tokens_details=True, **flags)
        write(out, f"completions/{i}.json", completion_body([ret], c))
        both = p.ChatCompletionRequest(
            model=MODEL, messages=messages, return_spec_tokens_details=True, return_meta_info=True, **flags
        )
        write(out, f"chat/{i}.json", chat_body(ret, both))
        meta_only = p.ChatCompletionRequest(model=MODEL, messages=messages, return_meta_info=True, **flags)
        write(out, f"chat-meta-info/{i}.json", chat_body(ret, meta_only))
        target_alone = p.ChatCompletionRequest(model=MODEL, messages=messages, **flags)
        write(out, f"nospec/{i}.json", chat_body(plain(ret), target_alone))
        older = chat_body(ret, meta_only)
        older["choices"][0]["meta_info"] = {LEGACY.get(k, k): v for k, v in ret["meta_info"].items()}
        write(out, f"older/{i}.json", older)
    n2 = p.CompletionRequest(model=MODEL, prompt=[1, 2, 3], n=2, return_spec_tokens_details=True, **flags)
    write(out, "completions-n2.json", completion_body(rets[:2], n2))

    models = p.ModelList(data=[p.ModelCard(id=MODEL, root=MODEL, max_model_len=2048, created=0)])
    write(out, "models.json", models.model_dump())

    import msgspec

    info = {**build_server_info(sa, {}), "version": sglang.__version__, "frontend": "python"}
    text = msgspec.json.encode(info, enc_hook=str).decode().replace(work, "/models")
    write(out, "server_info.json", json.loads(text))

    write(
        out,
        "MANIFEST.json",
        {
            "engine": "sglang",
            "version": sglang.__version__,
            "wheel": environment().get("wheel"),
            "sha256": environment().get("sha256"),
            "prometheus_client": importlib.metadata.version("prometheus_client"),
            "made_by": "scripts/sglang_fixtures.py",
            "server_args": {
                "speculative_algorithm": "EAGLE3",
                "speculative_num_steps": STEPS,
                "speculative_eagle_topk": TOPK,
                "speculative_num_draft_tokens": DRAFT_TOKENS,
                "served_model_name": MODEL,
            },
            "inputs": {
                "requests_accepted_per_step": REQUESTS,
                "prompt_tokens": PROMPT_TOKENS,
                "pages_after_requests": PAGES,
            },
        },
    )
    return 0


def environment() -> dict:
    """The stamp scripts/engine_envs.sh wrote beside this environment (wheel and its sha256)."""
    stamp = os.path.join(os.path.dirname(sys.prefix), ".complete")
    try:
        with open(stamp) as f:
            return json.load(f)
    except OSError:
        return {}


def write(out: str, name: str, obj) -> None:
    path = os.path.join(out, name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(obj if isinstance(obj, str) else json.dumps(obj, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__.split("\n\n")[1])
    sys.exit(main(sys.argv[1]))
