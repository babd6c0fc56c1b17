# SPDX-License-Identifier: MIT
"""ppstream's wire records as a raw peer writes and reads them (the tests'
hostile servers and clients, the attack table): a record is a 4-byte header
(version, kind, length, big-endian) and its body (wire/pps-wire.h)."""
import hashlib
import hmac
import socket
import struct

KIND_HELLO = 1
KIND_STREAM_INFO = 2
KIND_ADU_FRAGMENT = 4
KIND_WINDOW_END = 5
KIND_CLOCK_PING = 6
KIND_BYE = 8
KIND_CHALLENGE = 9
KIND_AUTH = 10
HELLO_CHALLENGE = 0x0001
AUTH_HMAC_SHA256 = 1
BYE_UNAUTHORIZED = 5


def record(kind, body, version=1):
    return struct.pack(">BBH", version, kind, len(body)) + body


def hello(name=b"raw", version=1, flags=0):
    return record(KIND_HELLO, struct.pack(">HHHB", version, flags, 0, len(name)) + name + b"\x00")


def clock_ping(seq, client_send_us):
    return record(KIND_CLOCK_PING, struct.pack(">Iq", seq, client_send_us))


def auth(token, nonce):
    """AUTH answering a CHALLENGE's @nonce with @token (bytes): HMAC-SHA256 over
    the context label and the nonce (wire/PROTOCOL.md, access control)."""
    mac = hmac.new(token, b"ppstream-auth-v1" + nonce, hashlib.sha256).digest()
    return record(KIND_AUTH, bytes([AUTH_HMAC_SHA256]) + mac)


def stream_info(width=128, height=96, window=2):
    return record(KIND_STREAM_INFO, struct.pack(">HBBHHHHHHBBBBII", 1, 1, 1, width, height, width // 2,
                                                height // 2, 30, 1, window, 2, 2, 0, 250, 8))


def window_end(window_id, dropped=True):
    return record(KIND_WINDOW_END, struct.pack(">IHHIIB", window_id, 0, 4, 0, 100, 1 if dropped else 0))


def bye(reason, text):
    return record(KIND_BYE, struct.pack(">HB", reason, len(text)) + text)


def listener():
    """A listening socket on 127.0.0.1 and a port of the kernel's choosing: (socket, "HOST:PORT")."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(4)
    return s, "127.0.0.1:%d" % s.getsockname()[1]


def read_all(sock, timeout=5.0):
    """Reads until EOF, a reset or @timeout seconds of silence; the bytes."""
    sock.settimeout(timeout)
    data = b""
    try:
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    except (socket.timeout, ConnectionResetError):
        pass
    return data


def split_records(data):
    """(kind, body) of every whole record at the start of @data."""
    out = []
    while len(data) >= 4:
        version, kind, length = struct.unpack(">BBH", data[:4])
        if len(data) < 4 + length:
            break
        out.append((kind, data[4:4 + length]))
        data = data[4 + length:]
    return out


def read_records(sock, timeout=5.0):
    """Reads until EOF or timeout; returns (kind, body) of whole records."""
    return split_records(read_all(sock, timeout))
