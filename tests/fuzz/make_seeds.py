#!/usr/bin/env python3
"""Writes the seed corpus of the fuzz targets (tests/fuzz/corpus/<target>/): well-formed
inputs built from the wire layouts (invoke/wire.hpp, dsm/runtime/service_wire.hpp,
coherence/notices.hpp, dsm/fabric/*/..._internal.hpp), so fuzzing starts past every check.
Run from the repository root after a layout changes: python3 tests/fuzz/make_seeds.py"""
import os
import struct

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def fnv1a(name):
    h = 2166136261
    for c in name.encode():
        h = ((h ^ c) * 16777619) & 0xFFFFFFFF
    return h or 1


def write(target, name, data):
    d = os.path.join(ROOT, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def service_wire():
    magic = 0x4C535643
    for kind, payload in [(0, b""), (1, b"hello"), (2, b"\x00" * 16), (3, b"error text")]:
        write("fuzz_service_wire", f"kind{kind}", struct.pack("<IIIIQ", magic, 77, len(payload), kind, 5) + payload)


def notices():
    magic = 0x4C4E4F54
    entries = [(1 << 32 | 3, 9 << 16 | 1), (2 << 32 | 0, 12 << 16 | 3)]
    body = b"".join(struct.pack("<QQ", k, tw) for k, tw in entries)
    write("fuzz_notices", "two", bytes([4, 8]) + struct.pack("<IIQ", magic, len(entries), 7) + body)
    write("fuzz_notices", "empty", bytes([2, 1]) + struct.pack("<IIQ", 0, 0, 0))


def rollout_wire():
    # [board size - 3][threads - 1][kind: 0 rollout, 1 results, 2 results with AMAF][epoch] then the message.
    black, white = [0] * 19, [0] * 19
    black[0] |= 1 << 3   # d1
    white[2] |= 1 << 2   # c3
    black[4] |= 1 << 0   # a5
    state = struct.pack("<19I19IHBB", *black, *white, 3, 5, 1)
    path = struct.pack("<QIHBB", 11, 0, 3, 0, 0) + struct.pack("<QIHBB", 12, 3, 7, 1, 0)
    write("fuzz_rollout_wire", "rollout", bytes([2, 3, 0, 7]) + struct.pack("<IIQII", 2, 7, 99, 2, 0) + state + path)
    write("fuzz_rollout_wire", "leaf", bytes([2, 3, 0, 7]) + struct.pack("<IIQII", 2, 7, 0, 0, 0) + state)
    results = struct.pack("<QIHBB", 5, 3, 1, 0, 0) + struct.pack("<QIHBB", 6, 0, 2, 1, 0)
    write("fuzz_rollout_wire", "results", bytes([2, 3, 1, 7]) + struct.pack("<II", 2, 7) + results)
    # Under RAVE (kind 2): 4 playouts, Black won 3, Black on every cell in 2 of them, both won.
    counts = struct.pack("<25H", *([2] * 25)) * 2
    write("fuzz_rollout_wire", "results-amaf", bytes([2, 3, 2, 7]) + struct.pack("<IIIIII", 2, 7, 2, 25, 4, 3) + results + counts)


def object_batches():
    # [handler: 0 insert, 1 find, 2 push, 3 pop][object id: 0 map, 1 queue][level][reply pointer:
    # how (< 200: the reply area), offset in words] ... then the batch's bytes.
    entries = b"".join(struct.pack("<QQ", k, k * 10) for k in (1, 2, 3))
    write("fuzz_object_batches", "insert", bytes([0, 0, 0, 0, 5]) + entries)
    write("fuzz_object_batches", "find", bytes([1, 0, 2, 0, 9]) + struct.pack("<QQ", 1, 7))
    write("fuzz_object_batches", "push", bytes([2, 1, 0, 0, 3]) + struct.pack("<QQQ", 4, 5, 6))
    write("fuzz_object_batches", "pop", bytes([3, 1, 0, 0, 1, 0, 2]) + struct.pack(">Q", 3))


def settings():
    for i, text in enumerate(["4096", "1G", "2M", "-1", "0", "256K", "9223372036854775807", "18446744073709551616", "1e3", " 5"]):
        write("fuzz_settings", f"v{i}", text.encode())


def endpoint():
    write("fuzz_endpoint", "shm", bytes([1]) + struct.pack("<IiII", 0x4C4D5145, 1, 3, 0))
    write("fuzz_endpoint", "verbs", bytes([2]) + struct.pack("<IiIIHBB", 0x4C4D5645, 2, 9, 100, 1, 1, 5) + bytes(16))


def node_wire():
    magic = 0x4C4E4C31

    def frame(kind, payload):
        return struct.pack("<IBBBBI", magic, kind, 0, 0, 0, len(payload)) + payload

    def text(t):
        return struct.pack("<I", len(t)) + t
    hello = struct.pack("<I", 1) + text(b"0.1.0+abc") + struct.pack("<III", 1, 2, 2) + text(b"loom-node1")
    welcome = text(b"loom-42") + struct.pack("<III", 2, 2, 2) + struct.pack("<I", 2) + text(b"a") + text(b"b")
    fence = struct.pack("<QQ", 3, 4) + b"\x01\x00\x00\x00"
    status = struct.pack("<I", 137) + text(b"lost ranks 2-3 on b")
    write("fuzz_node_wire", "hello", frame(1, hello))
    write("fuzz_node_wire", "welcome", frame(2, welcome))
    write("fuzz_node_wire", "fence", frame(4, fence) + frame(6, b""))
    write("fuzz_node_wire", "abort", frame(8, status))


# ---- invoke channel: chunk 0 of a channel, records at global offset 128 on ----
CHUNK_HEADER = 128
KIND = {"call": 1, "buffer": 2, "written": 3, "read": 4, "return": 5, "broadcast": 6, "named": 7}


def frame(fid, kind, payload, notify=None):
    body = (struct.pack("<QII", *notify) if notify else b"") + payload
    body += bytes((-len(body)) % 8)
    length = 8 + len(body)
    word = (fid << 32) | ((1 if notify else 0) << 31) | (KIND[kind] << 24) | (length >> 3)
    return struct.pack("<Q", word) + body


def record(offset, frames):
    body = b"".join(frames)
    length = 16 + len(body)
    length += (-length) % 16
    pad = (length - 16 - len(body)) // 8
    body += struct.pack("<Q", (0 << 24) | 1) * pad  # pad frames
    word = (((offset >> 3) & ((1 << 44) - 1)) << 20) | (length >> 3)
    return struct.pack("<Q", word) + body + struct.pack("<Q", word), length


def channel(frames_per_record, start=CHUNK_HEADER):
    """A chunk whose records begin at global offset `start`."""
    out = bytearray(CHUNK_HEADER)
    offset = start
    for frames in frames_per_record:
        rec, n = record(offset, frames)
        out += rec
        offset += n
    return bytes(out), offset


def invoke_channel():
    fid = {k: fnv1a("fuzz." + k) for k in ("call", "buffer", "written", "read", "return", "named")}
    call = frame(fid["call"], "call", bytes(range(16)))
    buf = frame(fid["buffer"], "buffer", struct.pack("<Q", 5) + bytes(8) + b"abcde")
    written = frame(fid["written"], "written", struct.pack("<QQ", 0x1000, 8) + bytes(8))
    read = frame(fid["read"], "read", struct.pack("<QIIQ", 0x1000, 3, 0, 64) + bytes(8))
    ret = frame(fid["return"], "return", struct.pack("<QIIQ", 0x1000, 3, 8, 1) + bytes(8))
    named = frame(fid["named"], "named", struct.pack("<Q", 3) + b"xyz")
    notified = frame(fid["call"], "call", bytes(16), notify=(0x2000, 5, 0))
    bcast = frame(0, "broadcast", struct.pack("<II", 0, 0) + call)
    for name, frames in [("call", [call]), ("buffer", [buf]), ("written", [written]), ("read", [read]),
                         ("return", [ret]), ("named", [named]), ("notified", [notified]), ("broadcast", [bcast])]:
        data, _ = channel([frames])
        write("fuzz_invoke_channel", name, data)
        write("fuzz_invoke_channel", "send-" + name, frames[0])  # the send-based form: one frame
    data, _ = channel([[call, named], [buf, call, call]])
    write("fuzz_invoke_channel", "aggregated", data)
    # A rotation: the sender closed chunk 0 at its end and went on in chunk 1.
    data, end = channel([[call]])
    data2, _ = channel([[named]], start=end)
    data = bytearray(data)
    struct.pack_into("<Q", data, 0, end << 8)  # rotation marker: closed at `end`, no chunk inserted
    write("fuzz_invoke_channel", "rotation", bytes(data) + bytes(4096 - len(data)) + data2)


if __name__ == "__main__":
    service_wire()
    notices()
    rollout_wire()
    object_batches()
    settings()
    endpoint()
    node_wire()
    invoke_channel()
    for t in sorted(os.listdir(ROOT)):
        print(t, len(os.listdir(os.path.join(ROOT, t))), "seeds")
