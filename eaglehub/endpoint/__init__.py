"""Served endpoints: reading a running OpenAI-compatible server (vLLM, SGLang) from outside.

:mod:`eaglehub.endpoint.metrics` reads the server's speculative-decoding counters from its Prometheus
``/metrics`` page (used by ``verify --endpoint`` and ``watch``).
"""
