"""The TensorBoard plugin: the dashboard's routes in TensorBoard (2.16 to 2.21).

TensorBoard loads third-party dashboards from the ``tensorboard_plugins``
entry point (``tensorboard/default.py``, ``get_dynamic_plugins``): each names a
``TBLoader`` whose ``load(context)`` gives a ``TBPlugin``. The plugin's
``get_plugin_apps()`` maps routes to WSGI apps, served under
``/data/plugin/<plugin_name>/``; ``frontend_metadata().es_module_path`` names
one of those routes, an ES module that TensorBoard's ``plugin_entry.html``
imports in an iframe (with ``<base href="plugin/<name>/">``) and whose
``render()`` it calls; ``is_active()`` decides whether the dashboard is shown
as enabled in ``/data/plugins_listing``. See TensorBoard's
``ADDING_A_PLUGIN.md`` and ``plugins/base_plugin.py``.
"""

from __future__ import annotations

from typing import Any

from tensorboard.plugins import base_plugin

from traceparse.integrations.tensorboard.app import MODULE, PLUGIN_NAME, Dashboard

__all__ = ["TraceparseLoader", "TraceparsePlugin"]


class TraceparsePlugin(base_plugin.TBPlugin):
    """traceparse's report of every run with captures under TensorBoard's logdir."""

    plugin_name = PLUGIN_NAME

    def __init__(self, context: base_plugin.TBContext) -> None:
        # --logdir_spec and data providers without a local logdir leave it empty:
        # the plugin is then inactive.
        self._logdir = getattr(context, "logdir", None) or ""
        self.dashboard = Dashboard(self._logdir) if self._logdir else None
        self._active = False

    def get_plugin_apps(self) -> dict[str, Any]:
        return self.dashboard.apps() if self.dashboard is not None else {}

    def is_active(self) -> bool:
        # Once a capture was seen the plugin stays on; until then each listing looks
        # again (a capture written while TensorBoard runs appears on its next refresh).
        if not self._active and self.dashboard is not None:
            self._active = self.dashboard.has_captures()
        return self._active

    def frontend_metadata(self) -> base_plugin.FrontendMetadata:
        return base_plugin.FrontendMetadata(es_module_path=MODULE, tab_name="traceparse")


class TraceparseLoader(base_plugin.TBLoader):
    """The ``tensorboard_plugins`` entry point: loads the plugin when TensorBoard starts."""

    def load(self, context: base_plugin.TBContext) -> TraceparsePlugin:
        return TraceparsePlugin(context)


def run_tensorboard(argv: list[str]) -> int:
    """``tensorboard ARGV`` with this plugin loaded even where traceparse is not installed
    (a source checkout: no entry point in the environment's metadata), beside every
    plugin TensorBoard would load itself. The tests and benchmarks start it this way."""
    from importlib import metadata

    from tensorboard import default, program

    dynamic = [
        point.load()
        for point in metadata.entry_points(group="tensorboard_plugins")
        if point.name != PLUGIN_NAME  # an installed traceparse: this one replaces it
    ]
    board = program.TensorBoard(plugins=[*default.get_static_plugins(), *dynamic, TraceparseLoader])
    board.configure(argv=["tensorboard", *argv])
    return int(board.main())


if __name__ == "__main__":
    import sys

    sys.exit(run_tensorboard(sys.argv[1:]))
