"""``python -m traceparse``: the same as the ``traceparse`` command."""

from traceparse.cli.app import run

if __name__ == "__main__":
    run()
