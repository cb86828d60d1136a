#!/usr/bin/python3
"""ws-rtt.py - WebSocket round trips to a Jupyter kernel (standard library only).

Opens /.../api/kernels/<id>/channels over TCP or a Unix socket and sends
kernel_info_request messages on the shell channel, each answered by a
kernel_info_reply (plus iopub busy/idle status): a real request/reply through
Jupyter and the kernel, the same workload on every path.  --v1 asks for the
subprotocol v1.kernel.websocket.jupyter.org that JupyterLab 4 uses (binary
frames, Jupyter Server 2); without it, the legacy JSON text frames.

  latency: N round trips after a warm-up, one in flight: p50/p99 in ms
  rate:    MSGS requests with WINDOW in flight: replies/s and frames/s

Prints one JSON object.  Every read has a timeout and the whole run a time limit.
Usage: ws-rtt.py (--tcp PORT | --unix PATH) --path PATH [--header 'K: V']... [--v1]
                 [--n 2000] [--warmup 200] [--window 16] [--msgs 4000] [--limit 60]
"""

import argparse
import base64
import json
import os
import socket
import struct
import sys
import time
import uuid

SUBPROTOCOL_V1 = "v1.kernel.websocket.jupyter.org"


class WS:
    def __init__(self, sock):
        self.sock = sock
        self.buf = bytearray()
        self.frames = 0

    @classmethod
    def connect(cls, args):
        if args.unix:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(10)
            s.connect(args.unix)
            host = "localhost"
        else:
            s = socket.create_connection(("127.0.0.1", args.tcp), timeout=10)
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            host = args.host or f"127.0.0.1:{args.tcp}"
        key = base64.b64encode(os.urandom(16)).decode()
        head = (f"GET {args.path} HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\n"
                f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                f"Sec-WebSocket-Version: 13\r\n")
        for h in args.header:
            head += h + "\r\n"
        s.sendall((head + "\r\n").encode())
        ws = cls(s)
        while b"\r\n\r\n" not in ws.buf:
            ws._fill()
            if len(ws.buf) > 65536:
                raise RuntimeError("handshake reply too long")
        end = ws.buf.index(b"\r\n\r\n") + 4
        status = bytes(ws.buf[:end]).split(b"\r\n", 1)[0]
        if b" 101 " not in status + b" ":
            raise RuntimeError(f"handshake: {bytes(ws.buf[:min(end, 300)])!r}")
        ws.subprotocol = None
        for line in bytes(ws.buf[:end]).decode("latin-1").split("\r\n")[1:]:
            k, _, v = line.partition(":")
            if k.strip().lower() == "sec-websocket-protocol":
                ws.subprotocol = v.strip()
        del ws.buf[:end]
        return ws

    def _fill(self):
        b = self.sock.recv(262144)
        if not b:
            raise RuntimeError("connection closed")
        self.buf += b

    def send_text(self, payload):
        self.send_frame(0x81, payload)

    def send_binary(self, payload):
        self.send_frame(0x82, payload)

    def send_frame(self, first_byte, payload):
        """One masked, unfragmented frame (first_byte: FIN + opcode)."""
        n = len(payload)
        mask = os.urandom(4)
        if n < 126:
            head = struct.pack("!BB", first_byte, 0x80 | n)
        elif n < 65536:
            head = struct.pack("!BBH", first_byte, 0x80 | 126, n)
        else:
            head = struct.pack("!BBQ", first_byte, 0x80 | 127, n)
        m = (mask * (n // 4 + 1))[:n]
        body = (int.from_bytes(payload, "big") ^ int.from_bytes(m, "big")).to_bytes(n, "big")
        self.sock.sendall(head + mask + body)

    def recv(self):
        """The next text/binary message payload (control frames answered)."""
        while True:
            while len(self.buf) < 2:
                self._fill()
            b0, b1 = self.buf[0], self.buf[1]
            n, off = b1 & 0x7F, 2
            if n == 126:
                while len(self.buf) < 4:
                    self._fill()
                n, off = struct.unpack_from("!H", self.buf, 2)[0], 4
            elif n == 127:
                while len(self.buf) < 10:
                    self._fill()
                n, off = struct.unpack_from("!Q", self.buf, 2)[0], 10
            if b1 & 0x80:
                raise RuntimeError("server frame is masked")
            while len(self.buf) < off + n:
                self._fill()
            payload = bytes(self.buf[off:off + n])
            del self.buf[:off + n]
            op = b0 & 0x0F
            if op == 0x9:  # ping: answer with the same data
                mask = os.urandom(4)
                self.sock.sendall(bytes([0x8A, 0x80 | len(payload)]) + mask +
                                  bytes(c ^ mask[i % 4] for i, c in enumerate(payload)))
                continue
            if op == 0x8:
                raise RuntimeError("server closed the WebSocket")
            if op == 0xA:
                continue
            if not b0 & 0x80:
                raise RuntimeError("fragmented messages are not expected here")
            self.frames += 1
            return payload


def message(session, msg_id, msg_type, content):
    """A shell-channel message (a dict in the Jupyter message format)."""
    return {"header": {"msg_id": msg_id, "username": "bench", "session": session,
                       "msg_type": msg_type, "version": "5.3",
                       "date": "2026-01-01T00:00:00.000000Z"},
            "parent_header": {}, "metadata": {}, "content": content, "channel": "shell"}


def encode(msg, v1):
    """The frame payload for msg: JSON text (legacy), or the v1 binary form: the
    count of offsets, the offsets (u64 little-endian), then the parts channel,
    header, parent_header, metadata, content."""
    if not v1:
        return json.dumps(dict(msg, buffers=[])).encode()
    parts = [msg["channel"].encode()] + [json.dumps(msg[k]).encode()
                                         for k in ("header", "parent_header", "metadata", "content")]
    offs = [8 * (len(parts) + 2)]
    for p in parts:
        offs.append(offs[-1] + len(p))
    return b"".join([len(offs).to_bytes(8, "little"), *(o.to_bytes(8, "little") for o in offs),
                     *parts])


def decode(payload):
    """The message (with "channel") in a frame of either protocol."""
    if payload[:1] == b"{":
        m = json.loads(payload)
        m.setdefault("channel", None)
        return m
    n = int.from_bytes(payload[:8], "little")
    offs = [int.from_bytes(payload[8 + 8 * i:16 + 8 * i], "little") for i in range(n)]
    parts = [payload[offs[i]:offs[i + 1]] for i in range(n - 1)]
    return {"channel": parts[0].decode(), "header": json.loads(parts[1]),
            "parent_header": json.loads(parts[2]), "metadata": json.loads(parts[3]),
            "content": json.loads(parts[4])}


def send(ws, msg, v1):
    (ws.send_binary if v1 else ws.send_text)(encode(msg, v1))


def kernel_info(session, msg_id):
    return message(session, msg_id, "kernel_info_request", {})


def reply_to(payload):
    """The msg_id a kernel_info_reply answers, or None for any other message."""
    if b"kernel_info_reply" not in payload:
        return None
    m = decode(payload)
    if m.get("channel") != "shell" or m["header"]["msg_type"] != "kernel_info_reply":
        return None
    return m["parent_header"].get("msg_id")


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round((len(xs) - 1) * p / 100)))] if xs else None


def main():
    ap = argparse.ArgumentParser()
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--tcp", type=int)
    g.add_argument("--unix")
    ap.add_argument("--path", required=True)
    ap.add_argument("--host", help="Host header (default 127.0.0.1:PORT; labd: <user>.localhost:PORT)")
    ap.add_argument("--header", action="append", default=[])
    ap.add_argument("--v1", action="store_true", help=f"subprotocol {SUBPROTOCOL_V1}")
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--warmup", type=int, default=200)
    ap.add_argument("--window", type=int, default=16)
    ap.add_argument("--msgs", type=int, default=4000)
    ap.add_argument("--limit", type=float, default=60)
    args = ap.parse_args()

    deadline = time.monotonic() + args.limit
    sid = uuid.uuid4().hex
    out = {"ok": False}
    try:
        hdrs = args.header + ([f"Sec-WebSocket-Protocol: {SUBPROTOCOL_V1}"] if args.v1 else [])
        ws = WS.connect(argparse.Namespace(**{**vars(args), "header": hdrs,
                                              "path": f"{args.path}?session_id={sid}"}))
        if args.v1 and ws.subprotocol != SUBPROTOCOL_V1:
            raise RuntimeError(f"the server chose subprotocol {ws.subprotocol!r}")
        out["subprotocol"] = ws.subprotocol
        # latency: one request in flight
        rtts = []
        for i in range(args.warmup + args.n):
            if time.monotonic() > deadline:
                out["truncated"] = True
                break
            mid = f"{sid}-l{i}"
            msg = kernel_info(sid, mid)
            t0 = time.perf_counter()
            send(ws, msg, args.v1)
            while reply_to(ws.recv()) != mid:
                pass
            if i >= args.warmup:
                rtts.append((time.perf_counter() - t0) * 1000)
        out.update(rtt_n=len(rtts), rtt_p50=pct(rtts, 50), rtt_p99=pct(rtts, 99),
                   rtt_mean=sum(rtts) / len(rtts) if rtts else None)
        # rate: WINDOW requests in flight
        frames0, sent, done = ws.frames, 0, 0
        t0 = time.perf_counter()
        while done < args.msgs and time.monotonic() < deadline:
            while sent < args.msgs and sent - done < args.window:
                send(ws, kernel_info(sid, f"{sid}-r{sent}"), args.v1)
                sent += 1
            if reply_to(ws.recv()) is not None:
                done += 1
        dt = time.perf_counter() - t0
        out.update(rate_msgs=done, rate_s=dt, replies_per_s=done / dt if dt else None,
                   frames_per_s=(ws.frames - frames0) / dt if dt else None,
                   truncated=out.get("truncated", False) or done < args.msgs)
        out["ok"] = bool(rtts) and done > 0
        try:
            ws.sock.sendall(bytes([0x88, 0x82]) + b"\0\0\0\0" + struct.pack("!H", 1000))
        except OSError:
            pass
        ws.sock.close()
    except (OSError, RuntimeError, ValueError, KeyError) as e:
        out["error"] = f"{type(e).__name__}: {e}"
    print(json.dumps(out))
    return 0 if out["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
