"""The command line (internal): ``scanbench <command>``, one module per command, each with
its parser beside its handler; `main` assembles them."""
