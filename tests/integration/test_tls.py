#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""TLS (server.tls_cert/tls_key, client.tls/tls_ca): the real pps-server and
pps-client on loopback, with a certificate made at test time by openssl(1)."""
import os
import shutil
import socket
import subprocess
import sys
import time

from harness import Client, Server, check, hello, read_records, run, SKIP


def make_cert(workdir, name="server", san="IP:127.0.0.1,DNS:localhost"):
    """A self-signed EC certificate for 127.0.0.1 and localhost: (cert, key)."""
    cert = os.path.join(workdir, name + "-cert.pem")
    key = os.path.join(workdir, name + "-key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:P-256", "-nodes", "-keyout", key, "-out", cert,
                    "-days", "1", "-subj", "/CN=localhost", "-addext",
                    "subjectAltName=" + san], check=True, capture_output=True)
    return cert, key


def tls_server(build, workdir, *settings, **kw):
    cert, key = make_cert(workdir)
    srv = Server(build, workdir, "server.tls_cert=" + cert, "server.tls_key=" + key,
                 *settings, **kw)
    return srv, cert


def tls_stream(build, workdir):
    """A TLS client verifies the server by its IP address and streams as a
    plaintext one does: frames shown, no errors, the server says TLS."""
    srv, cert = tls_server(build, workdir)
    try:
        c = Client(build, workdir, srv.address, "client.tls=true", "client.tls_ca=" + cert,
                   duration=6)
        rc = c.wait()
        log = srv.log()
    finally:
        srv.stop()
    check(rc == 0, "client exit %d: %s" % (rc, c.stderr))
    check("joined (minbuf, TLS)" in log, log)
    s = c.summary()
    print("TLS on loopback: %d of %d frames shown, p50 %.1f ms, p95 %.1f ms"
          % (s["frames_shown"], s["frames_total"], s["frame_latency_p50_ms"],
             s["frame_latency_p95_ms"]))
    check(s["frames_shown"] >= 120, "only %d frames shown" % s["frames_shown"])
    check(s["frames_undecodable"] == 0 and s["frames_lost"] <= 2,
          "undecodable %d lost %d" % (s["frames_undecodable"], s["frames_lost"]))
    check("error" not in c.stderr.lower(), c.stderr)


def tls_wrong_ca(build, workdir):
    """A server whose certificate the client's CA file does not vouch for, or
    that is not for the address asked: a clear error, exit 1, nothing shown."""
    srv, cert = tls_server(build, workdir)
    other, _ = make_cert(workdir, name="other")
    try:
        c = Client(build, workdir, srv.address, "client.tls=true", "client.tls_ca=" + other,
                   duration=5)
        rc = c.wait()
        system = Client(build, workdir, srv.address, "client.tls=true", duration=5,
                        name="system")
        rc_system = system.wait()
        # Right CA, wrong name: the override must match the certificate too.
        named = Client(build, workdir, srv.address, "client.tls=true",
                       "client.tls_ca=" + cert, "client.tls_server_name=example.org",
                       duration=5, name="named")
        rc_named = named.wait()
        missing = Client(build, workdir, srv.address, "client.tls=true",
                         "client.tls_ca=" + os.path.join(workdir, "none.pem"), duration=5,
                         name="missing", extra=["--reconnect"])
        rc_missing = missing.wait()
        log = srv.log()
    finally:
        srv.stop()
    for name, code, err, want in (("other CA", rc, c.stderr, "certificate verification failed"),
                                  ("system store", rc_system, system.stderr,
                                   "certificate verification failed"),
                                  ("wrong name", rc_named, named.stderr,
                                   "certificate verification failed"),
                                  ("missing CA file", rc_missing, missing.stderr,
                                   "cannot read the CA file")):
        check(code == 1, "%s: exit %d: %s" % (name, code, err))
        check(want in err, "%s: not explained: %s" % (name, err))
    check("reconnecting" not in missing.stderr, missing.stderr)
    check("TLS handshake failed" in log, log)


def tls_plain_client_to_tls_server(build, workdir):
    """A plaintext client at a TLS server is told in plaintext to use TLS
    (exit 1), a raw HELLO gets the same BYE, and a good client streams on."""
    srv, cert = tls_server(build, workdir)
    try:
        good = Client(build, workdir, srv.address, "client.tls=true", "client.tls_ca=" + cert,
                      duration=6, name="good")
        time.sleep(1.0)
        plain = Client(build, workdir, srv.address, duration=3, name="plain")
        rc_plain = plain.wait()
        s = socket.create_connection(("127.0.0.1", srv.port))
        s.sendall(hello())
        byes = [body for kind, body in read_records(s, timeout=5) if kind == 8]
        s.close()
        rc_good = good.wait()
        log = srv.log()
    finally:
        srv.stop()
    check(rc_plain == 1, "plaintext client exit %d" % rc_plain)
    check("requires TLS" in plain.stderr, plain.stderr)
    check(byes and b"requires TLS" in byes[-1], "raw HELLO: %r" % byes)
    check("requires TLS" in log, log)
    check(rc_good == 0, good.stderr)
    check(good.summary()["frames_shown"] >= 120, "good client starved")


def tls_client_to_plain_server(build, workdir):
    """A TLS client at a plaintext server: a clear error, exit 1; the server
    keeps serving a good (plaintext) client."""
    srv = Server(build, workdir)
    cert, _ = make_cert(workdir)
    try:
        good = Client(build, workdir, srv.address, duration=6, name="good")
        time.sleep(1.0)
        c = Client(build, workdir, srv.address, "client.tls=true", "client.tls_ca=" + cert,
                   duration=3, name="tls")
        rc = c.wait()
        rc_good = good.wait()
    finally:
        srv.stop()
    check(rc == 1, "TLS client exit %d: %s" % (rc, c.stderr))
    check("does not speak TLS" in c.stderr, c.stderr)
    check(rc_good == 0, good.stderr)
    check(good.summary()["frames_shown"] >= 120, "good client starved")


def tls_config(build, workdir):
    """tls_cert without tls_key (and the reverse) is a config error naming the
    key; a key that does not load names its file; beyond loopback without TLS
    draws a warning, with TLS none."""
    server = os.path.join(build, "server", "pps-server")
    cert, key = make_cert(workdir)
    for settings, want in ((["server.tls_cert=" + cert], "tls_key"),
                           (["server.tls_key=" + key], "tls_cert"),
                           (["server.tls_cert=" + cert, "server.tls_key=" + cert], cert)):
        args = [server, "--duration", "1"]
        for s in settings:
            args += ["--set", s]
        p = subprocess.run(args, capture_output=True, text=True, timeout=30)
        check(p.returncode != 0, "%s: exit 0" % settings)
        check(want in p.stderr, "%s: %s" % (settings, p.stderr))
    warn = "listening beyond loopback without TLS"
    for tls, want in ((False, True), (True, False)):
        extra = ["--set", "server.tls_cert=" + cert, "--set", "server.tls_key=" + key] \
            if tls else []
        srv = Server(build, workdir, "server.access_token=t0ken",
                     extra=["--listen", "0.0.0.0:0"] + extra)
        log = srv.log()
        srv.stop()
        check((warn in log) == want, "tls %s: %s" % (tls, log))


if __name__ == "__main__":
    if not shutil.which("openssl"):
        print("SKIP: no openssl(1) to make a certificate")
        sys.exit(SKIP)
    sys.exit(run({f.__name__: f for f in (tls_stream, tls_wrong_ca,
                                          tls_plain_client_to_tls_server,
                                          tls_client_to_plain_server, tls_config)},
                 sys.argv))
