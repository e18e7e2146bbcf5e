"""``python -m rudder.publish``: the publish command, and every public name of
:mod:`rudder.hub.publish` for code that imports them from here (patch them there)."""

from rudder.hub.publish import *  # this module only forwards

if __name__ == "__main__":
    cli()
