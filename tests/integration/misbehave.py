"""A runtime socket that misbehaves, for tests/integration/test_availability.py.

    python3 misbehave.py MODE SOCKET_PATH RECORD_PATH UID

Started as root, it binds SOCKET_PATH (in a directory only root may write),
hands the socket file to UID, the user's sandbox uid, and becomes that uid
before listen(): the credentials at listen() are what SO_PEERCRED reports to
labd, so the socket passes as the runtime's own. It prints "ready" and serves
until killed.  Every byte received is appended to RECORD_PATH.  MODE:
  noaccept  listen with a backlog of 1 and never accept
  silent    accept, read, never answer
  trickle   accept, then send a response head one byte every 0.5 s
  upgrade   answer a WebSocket upgrade with 101, then stay silent
"""

import base64
import hashlib
import os
import socket
import sys
import threading
import time

WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


def record(path, data):
    with open(path, "ab") as fh:
        fh.write(data)


def serve(conn, mode, rec):
    got = b""
    try:
        conn.settimeout(None)
        if mode == "trickle":
            for b in b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nX-Slow: " + b"x" * 10000:
                conn.sendall(bytes([b]))
                time.sleep(0.5)
            return
        while True:
            data = conn.recv(65536)
            if not data:
                return
            record(rec, data)
            got += data
            if mode == "upgrade" and b"\r\n\r\n" in got:
                key = ""
                for line in got.split(b"\r\n"):
                    if line.lower().startswith(b"sec-websocket-key:"):
                        key = line.split(b":", 1)[1].strip().decode()
                accept = base64.b64encode(
                    hashlib.sha1((key + WS_GUID).encode()).digest()).decode()
                conn.sendall(("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                              "Connection: Upgrade\r\nSec-WebSocket-Accept: "
                              f"{accept}\r\n\r\n").encode())
                got = b""
                mode = "silent"
    except OSError:
        return


def main():
    mode, path, rec, uid = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(path)
    os.chown(path, uid, uid)
    os.chmod(path, 0o777)  # as Jupyter leaves its own: the directory guards it
    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)
    s.listen(1 if mode == "noaccept" else 512)
    print("ready", flush=True)
    if mode == "noaccept":
        while True:
            time.sleep(3600)
    while True:
        conn, _ = s.accept()
        threading.Thread(target=serve, args=(conn, mode, rec), daemon=True).start()


if __name__ == "__main__":
    main()
