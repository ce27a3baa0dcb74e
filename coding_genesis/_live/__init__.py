"""A live CLI: one process across turns, spoken to through its control protocol.

The link, its opening (and the one-turn transport of a two-way ``run()``), the
turn and what comes between turns, and the runtimes of what the CLI asks for in a
turn: approvals, hooks and the caller's functions as tools.  Above the pipeline,
which knows a link only as a ``Transport`` (``_pipeline/transport.py``).
"""
