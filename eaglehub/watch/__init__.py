"""``eaglehub watch``: a served drafter's acceptance per interval, from the server's ``/metrics`` only.

:mod:`eaglehub.watch.intervals` turns polls into interval readings and judges AL drops;
:mod:`eaglehub.watch.reference` picks the reference AL from a verify report; :mod:`eaglehub.watch.run`
polls the server (docs/watch.md).
"""
