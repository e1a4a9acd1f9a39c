"""The traceparse dashboard: the report of every run under a logdir, in TensorBoard or on its own.

- ``app``: :class:`Dashboard`, the WSGI routes (``runs``, ``report``, ``record``,
  ``index.js``) over a logdir, with the analyses cached and run in a worker
  thread; ``serve_app`` mounts them for ``traceparse serve``;
- ``plugin``: the TensorBoard plugin and its loader (the ``tensorboard_plugins``
  entry point; imports tensorboard).

The pages are the ones ``traceparse report`` writes (``report.formats``), not
a second rendering. Nothing imports this package but the command line.
"""

from __future__ import annotations

from traceparse.integrations.tensorboard.app import PLUGIN_NAME, ROUTE_PREFIX, Dashboard, serve_app

__all__ = ["PLUGIN_NAME", "ROUTE_PREFIX", "Dashboard", "serve_app"]
