"""The command line (internal): ``scanbench <command>``, one module per command, each with
its parser beside its handler; `main` assembles them.

Every command's parser is built for ``scanbench --help``, so a command module imports at
the top what its parser and its own checks need (plain types and settings), and its
handler imports the engine it runs (the runner, the gate, the history, the reports: SciPy,
pandas, matplotlib, JAX) when it runs.
"""
