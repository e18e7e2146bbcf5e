"""``python -m rudder.evaluate``: the evaluate command, and every public name of
:mod:`rudder.evaluation.evaluate` for code that imports them from here (patch them there)."""

from rudder.evaluation.evaluate import *  # this module only forwards

if __name__ == "__main__":
    cli()
