"""Integrations: memory budgets where users already are.

- ``keras``: :class:`MemoryCallback`, a Keras callback that profiles a range of
  ``fit`` batches (imports Keras);
- ``pytest_plugin``: the ``tf_memory`` marker and fixture (the ``pytest11``
  entry point).

Neither is imported by ``import traceparse``.
"""
