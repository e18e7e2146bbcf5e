"""``python -m rudder.publish``: the publish command (rudder.hub.publish)."""

from rudder.hub.publish import build_parser, cli, main, publish

__all__ = ["build_parser", "cli", "main", "publish"]

if __name__ == "__main__":
    cli()
