"""The runtime-built protobuf schema equals what protoc compiles from asynq.proto (the written
contract), and its field numbers and types are Go asynq's."""

from __future__ import annotations

from pathlib import Path

import pytest

from asyncq._broker._asynq import _schema

protoc = pytest.importorskip("grpc_tools.protoc")
descriptor_pb2 = pytest.importorskip("google.protobuf.descriptor_pb2")

PROTO = Path(_schema.__file__).with_name("asynq.proto")


def compiled(tmp_path: Path) -> object:
    out = tmp_path / "asynq.desc"
    include = Path(protoc.__file__).parent / "_proto"
    code = protoc.main(["protoc", f"-I{PROTO.parent}", f"-I{include}",
                        f"--descriptor_set_out={out}", PROTO.name])
    assert code == 0
    fds = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes())
    [fd] = fds.file
    return fd


def normalized(fd: object) -> bytes:
    copy = descriptor_pb2.FileDescriptorProto()
    copy.CopyFrom(fd)
    copy.ClearField("options")
    copy.ClearField("source_code_info")
    for message in copy.message_type:
        for field in message.field:
            field.ClearField("json_name")
        for nested in message.nested_type:
            for field in nested.field:
                field.ClearField("json_name")
    data: bytes = copy.SerializeToString(deterministic=True)
    return data


def test_built_schema_is_the_proto_file(tmp_path: Path) -> None:
    assert normalized(_schema.file_descriptor()) == normalized(compiled(tmp_path))


def test_task_message_fields_are_asynqs() -> None:
    proto = descriptor_pb2.DescriptorProto()
    _schema.TaskMessagePB.DESCRIPTOR.CopyToProto(proto)
    fields = {f.name: (f.number, f.type, f.label) for f in proto.field}
    fdp = descriptor_pb2.FieldDescriptorProto
    assert fields == {
        "type": (1, fdp.TYPE_STRING, fdp.LABEL_OPTIONAL),
        "payload": (2, fdp.TYPE_BYTES, fdp.LABEL_OPTIONAL),
        "headers": (15, fdp.TYPE_MESSAGE, fdp.LABEL_REPEATED),
        "id": (3, fdp.TYPE_STRING, fdp.LABEL_OPTIONAL),
        "queue": (4, fdp.TYPE_STRING, fdp.LABEL_OPTIONAL),
        "retry": (5, fdp.TYPE_INT32, fdp.LABEL_OPTIONAL),
        "retried": (6, fdp.TYPE_INT32, fdp.LABEL_OPTIONAL),
        "error_msg": (7, fdp.TYPE_STRING, fdp.LABEL_OPTIONAL),
        "last_failed_at": (11, fdp.TYPE_INT64, fdp.LABEL_OPTIONAL),
        "timeout": (8, fdp.TYPE_INT64, fdp.LABEL_OPTIONAL),
        "deadline": (9, fdp.TYPE_INT64, fdp.LABEL_OPTIONAL),
        "unique_key": (10, fdp.TYPE_STRING, fdp.LABEL_OPTIONAL),
        "group_key": (14, fdp.TYPE_STRING, fdp.LABEL_OPTIONAL),
        "retention": (12, fdp.TYPE_INT64, fdp.LABEL_OPTIONAL),
        "completed_at": (13, fdp.TYPE_INT64, fdp.LABEL_OPTIONAL),
    }
    assert _schema.TaskMessagePB.DESCRIPTOR.full_name == "asynq.TaskMessage"


def test_go_encoded_bytes_decode() -> None:
    # TaskMessage{Type:"t", Id:"i", Queue:"q", Retry:25, Timeout:1800} as Go marshals it
    # (field order of the .proto: type, id, queue, retry, timeout)
    go = b"\n\x01t\x1a\x01i\"\x01q(\x19@\x88\x0e"
    pb = _schema.TaskMessagePB.FromString(go)
    assert (pb.type, pb.id, pb.queue, pb.retry, pb.timeout) == ("t", "i", "q", 25, 1800)
