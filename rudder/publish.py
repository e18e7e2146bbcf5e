"""``python -m rudder.publish``: the publish command (:mod:`rudder.hub.publish`)."""

from rudder.hub.publish import cli

if __name__ == "__main__":
    cli()
