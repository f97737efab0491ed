"""``python -m privgraph.cli``: the ``privgraph`` command."""

from privgraph.cli import main

main()
