"""``python -m rudder.evaluate``: the evaluate command (:mod:`rudder.evaluation.evaluate`)."""

from rudder.evaluation.evaluate import cli

if __name__ == "__main__":
    cli()
