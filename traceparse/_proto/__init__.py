"""Protobuf modules for the profiler's wire formats.

Every ``*_pb2.py`` and ``*_pb2.pyi`` here is generated from ``protos/*.proto``
by ``make protos`` (``python protos/generate.py``) and is never edited by hand.
"""
