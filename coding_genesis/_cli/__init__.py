"""One module per ``genesis`` subcommand, each with ``register(subparsers)``."""
