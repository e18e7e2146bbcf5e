"""``python -m rudder.evaluate``: the evaluate command (rudder.evaluation.evaluate)."""

from rudder.evaluation.evaluate import build_parser, cli, evaluate_runs, main

__all__ = ["build_parser", "cli", "evaluate_runs", "main"]

if __name__ == "__main__":
    cli()
