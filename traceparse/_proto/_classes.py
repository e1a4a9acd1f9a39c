"""Message classes built at import time from a serialized FileDescriptorProto.

Hand-written (the *_pb2.py modules beside it are generated and call it). protoc's
own Python output checks the protobuf runtime against the protoc that made it
(``runtime_version``, 5.26 and later) and calls internal builder functions whose
contract changes between majors, so one generated file cannot serve every
protobuf that TensorFlow 2.16 to 2.21 accept (3.20.3 to 7.x). This builds the
same classes through public API alone: ``DescriptorPool.AddSerializedFile`` and
``message_factory.GetMessageClass`` (``MessageFactory.GetPrototype`` before
4.22). The classes are the runtime's own (upb, C++ or pure Python, whichever it
uses), so the fast parser stays wherever the runtime has one.
"""

from __future__ import annotations

from typing import Any

import google.protobuf
from google.protobuf import descriptor_pool, message_factory
from google.protobuf.descriptor import Descriptor, FileDescriptor
from google.protobuf.internal import enum_type_wrapper

from traceparse.version import PROTOBUF, check

# A runtime outside the tested range fails here, in one line, not in a parse.
check(PROTOBUF, google.protobuf.__version__)

_get_class = getattr(message_factory, "GetMessageClass", None)
_factory = None if _get_class is not None else message_factory.MessageFactory()


def _message_class(desc: Descriptor) -> type:
    if _get_class is not None:
        return _get_class(desc)  # type: ignore[no-any-return]
    assert _factory is not None
    return _factory.GetPrototype(desc)  # type: ignore[attr-defined,no-any-return]


def _with_nested(desc: Descriptor, module: str, qualname: str) -> type:
    """The class of ``desc`` named as protoc's would be (module, qualified name),
    with its nested messages as attributes."""
    cls = _message_class(desc)
    cls.__module__ = module
    cls.__qualname__ = qualname
    for nested in desc.nested_types:
        nested_cls = _with_nested(nested, module, f"{qualname}.{nested.name}")
        if getattr(cls, nested.name, None) is not nested_cls:
            setattr(cls, nested.name, nested_cls)
    return cls


def build(serialized: bytes, namespace: dict[str, Any]) -> FileDescriptor:
    """Add one file to the default pool and put its messages, enums and enum
    values into ``namespace`` (a module's globals), as protoc's output does."""
    pool = descriptor_pool.Default()
    added = pool.AddSerializedFile(serialized)
    # Some runtimes return the descriptor, others (3.20's C++ pool) nothing.
    file_desc = added if isinstance(added, FileDescriptor) else None
    if file_desc is None:
        from google.protobuf import descriptor_pb2

        name = descriptor_pb2.FileDescriptorProto.FromString(serialized).name
        file_desc = pool.FindFileByName(name)
    namespace["DESCRIPTOR"] = file_desc
    for name, enum_desc in file_desc.enum_types_by_name.items():
        namespace[name] = enum_type_wrapper.EnumTypeWrapper(enum_desc)
        for value in enum_desc.values:
            namespace[value.name] = value.number
    for name, desc in file_desc.message_types_by_name.items():
        namespace[name] = _with_nested(desc, namespace["__name__"], name)
    return file_desc
