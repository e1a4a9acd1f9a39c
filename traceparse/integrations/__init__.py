"""Integrations: memory budgets where users already are.

- ``keras``: :class:`MemoryCallback`, a Keras callback that profiles a range of
  ``fit`` batches (imports Keras);
- ``pytest_plugin``: the ``tf_memory`` marker and fixture (the ``pytest11``
  entry point);
- ``tensorboard``: the dashboard, a TensorBoard plugin (the ``tensorboard_plugins``
  entry point) and ``traceparse serve``'s WSGI app.

None is imported by ``import traceparse``.
"""
