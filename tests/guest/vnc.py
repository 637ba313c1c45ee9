"""A guest's screen port as a VNC client first meets it: VNC over WebSocket (QEMU's own, or noVNC's websockify)."""

from __future__ import annotations

import base64
import os
import socket


def websocket_vnc_greeting(host: str, port: int) -> bytes:
    """Open a WebSocket (binary subprotocol) and return the payload of the server's first frame."""
    key = base64.b64encode(os.urandom(16)).decode()
    request = (f"GET / HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
               f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: binary\r\n\r\n")
    with socket.create_connection((host, port), timeout=30) as sock:
        sock.sendall(request.encode())
        data = b""
        while b"\r\n\r\n" not in data:
            data += sock.recv(4096) or b"!"
            assert not data.endswith(b"!"), "the connection closed during the handshake"
        head, frame = data.split(b"\r\n\r\n", 1)
        assert head.startswith(b"HTTP/1.1 101"), head[:200]
        while len(frame) < 2 + 12:
            more = sock.recv(4096)
            assert more, "the connection closed before the VNC greeting"
            frame += more
    length = frame[1] & 0x7F
    return frame[2:2 + length]
