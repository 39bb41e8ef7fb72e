"""``python -m eaglehub.cli``: the same CLI as the ``eaglehub`` command."""

from eaglehub.cli import main

main()
