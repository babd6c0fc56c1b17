#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""TLS (server.tls_cert/tls_key, client.tls/tls_ca): the real pps-server and
pps-client on loopback, with a certificate made at test time by openssl(1)."""
import base64
import os
import re
import shutil
import socket
import ssl
import struct
import subprocess
import sys
import time

from harness import Client, Server, check, hello, read_records, run, SKIP
from ppslab.programs import make_cert


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
        # Loading the system store takes ~10 s of CPU under ASan with the slow
        # unwinder (integration_env): a long --duration, the failure ends it.
        system = Client(build, workdir, srv.address, "client.tls=true", duration=60,
                        name="system")
        rc_system = system.wait(timeout=90)
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


def tls_reconnect(build, workdir):
    """--reconnect over TLS: the client survives its TLS server going away and
    comes back, handshake and verification included, to the next one."""
    cert, key = make_cert(workdir)
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    server = [os.path.join(build, "server", "pps-server"), "--listen", "127.0.0.1:%d" % port,
              "--quiet", "--set", "server.tls_cert=" + cert, "--set", "server.tls_key=" + key]
    first = subprocess.Popen(server + ["--duration", "3"], stderr=subprocess.DEVNULL)
    time.sleep(0.5)
    c = Client(build, workdir, "127.0.0.1:%d" % port, "client.tls=true", "client.tls_ca=" + cert,
               duration=10, extra=["--reconnect"])
    first.wait(timeout=20)
    time.sleep(1.5)  # the client retries into a closed port meanwhile
    second = subprocess.Popen(server + ["--duration", "8"], stderr=subprocess.DEVNULL)
    try:
        rc = c.wait()
    finally:
        second.terminate()
        second.wait(timeout=20)
    check(rc == 0, "client exit %d: %s" % (rc, c.stderr))
    check("reconnecting in" in c.stderr, c.stderr)
    connects = c.stderr.count("pps-client: connected to")
    check(connects >= 2, "connected %d times: %s" % (connects, c.stderr))
    shown = [e for e in c.events("frame") if e["shown"]]
    check(len(shown) >= 120, "only %d frames shown over both servers" % len(shown))


def tls_silent(build, workdir):
    """A connection that never starts its TLS handshake is dropped by the
    handshake timeout ("no TLS handshake in time"); a client streams meanwhile."""
    srv, cert = tls_server(build, workdir)
    try:
        silent = socket.create_connection(("127.0.0.1", srv.port))
        good = Client(build, workdir, srv.address, "client.tls=true", "client.tls_ca=" + cert,
                      duration=7, name="good")
        silent.settimeout(10)
        t0 = time.monotonic()
        try:
            closed = silent.recv(100) == b""
        except (socket.timeout, ConnectionResetError):
            closed = False
        waited = time.monotonic() - t0
        silent.close()
        rc = good.wait()
        log = srv.log()
    finally:
        srv.stop()
    check(closed and waited < 8, "silent connection closed %s after %.1f s" % (closed, waited))
    check("no TLS handshake in time" in log, log)
    check(rc == 0 and good.summary()["frames_shown"] >= 150, good.stderr)


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
        srv = Server(build, workdir, "server.access_token=t0ken-over-tls-1",
                     extra=["--listen", "0.0.0.0:0"] + extra)
        log = srv.log()
        srv.stop()
        check((warn in log) == want, "tls %s: %s" % (tls, log))


def tls_https(build, workdir):
    """Browsers on a TLS listener, without a browser (python ssl): https://
    serves the viewer page, wss:// upgrades and streams wire records, and
    http:// is answered in HTTP with a pointer to https://."""
    srv, cert = tls_server(build, workdir, "server.max_clients_per_address=16")
    ctx = ssl.create_default_context(cafile=cert)  # verifies 127.0.0.1 against the SAN

    def connect():
        raw = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
        return ctx.wrap_socket(raw, server_hostname="127.0.0.1")

    from test_browser import read_all  # a ragged TLS EOF reads as b"" (ssl's default)

    try:
        s = connect()
        s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        r = read_all(s)
        check(r.startswith(b"HTTP/1.1 200 ") and b"text/html" in r and b"viewer.js" in r,
              "https GET /: %r" % r[:200])
        s = connect()
        s.sendall(b"GET /viewer.js HTTP/1.1\r\nHost: x\r\n\r\n")
        r = read_all(s)
        length = int(r.split(b"Content-Length: ")[1].split(b"\r\n")[0])
        check(r.startswith(b"HTTP/1.1 200 ") and len(r.split(b"\r\n\r\n", 1)[1]) == length,
              "https viewer.js: %d bytes of %r" % (len(r), r[:100]))
        # wss: the upgrade, then a masked HELLO brings STREAM_INFO and windows.
        s = connect()
        key = base64.b64encode(os.urandom(16))
        s.sendall(b"GET /stream HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n"
                  b"Connection: Upgrade\r\nSec-WebSocket-Key: " + key +
                  b"\r\nSec-WebSocket-Version: 13\r\n\r\n")
        body = struct.pack(">BBH", 1, 1, 11) + struct.pack(">HHHB", 1, 0, 0, 3) + b"raw\x00"
        mask = b"\x11\x22\x33\x44"
        s.sendall(bytes([0x82, 0x80 | len(body)]) + mask +
                  bytes(b ^ mask[i % 4] for i, b in enumerate(body)))
        data = b""
        while len(data) < 4000:
            c = s.recv(65536)
            check(c, "wss stream ended early: %r" % data[:200])
            data += c
        s.close()
        check(data.startswith(b"HTTP/1.1 101 "), "no 101: %r" % data[:100])
        frames = data.split(b"\r\n\r\n", 1)[1]
        check(frames[0] == 0x82 and frames[4:6] == bytes([1, 2]) or
              frames[0] == 0x82 and frames[2:4] == bytes([1, 2]),
              "first message is not STREAM_INFO: %r" % frames[:16])
        # http:// at a TLS listener: HTTP 400 that says https.
        raw = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
        raw.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        r = read_all(raw)
        check(r.startswith(b"HTTP/1.1 400 ") and b"https://" in r, "http://: %r" % r[:200])
        log = srv.log()
    finally:
        srv.stop()
    check("WebSocket /stream" in log and "joined (minbuf, TLS)" in log, log)
    check("plain HTTP on a TLS listener" in log, log)


def insecure_chrome(found, workdir, window):
    """Headless Chromium that accepts the test's self-signed certificate
    (acceptInsecureCerts); @found is test_browser.find_browser()'s."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = found[0]
    options.accept_insecure_certs = True
    for arg in ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                "--window-size=" + window, "--enable-unsafe-swiftshader",
                "--use-angle=swiftshader", "--no-first-run", "--disable-extensions",
                "--user-data-dir=" + os.path.join(workdir, "chromium")]:
        options.add_argument(arg)
    return webdriver.Chrome(service=Service(executable_path=found[1]), options=options)


def tls_browser(build, workdir):
    """The viewer page in headless Chromium over https:// and wss:// (the test
    certificate accepted with acceptInsecureCerts): it streams and shows frames,
    and the server's independent MIN_BUF check holds for the TLS WebSocket."""
    import test_browser
    found = test_browser.find_browser()
    if not found:
        print("SKIP: chromium, chromedriver or python3-selenium not installed")
        sys.exit(SKIP)
    os.environ["PPS_WEB_CHECK_BOUND"] = "1"
    srv, _ = tls_server(build, workdir, *test_browser.server_settings())
    driver = None
    try:
        driver = insecure_chrome(found, workdir, "720,600")
        driver.get("https://127.0.0.1:%d/?name=selenium-tls" % srv.port)
        check(driver.execute_script("return window.isSecureContext"), "not a secure context")
        stats = test_browser.wait_for(driver, lambda s: s["frames_shown"] >= 90,
                                      "90 frames shown over wss://", 30)
    finally:
        if driver:
            driver.quit()
        srv.stop()
    log = srv.log()
    print("browser over TLS: shown %d/%d, latency p50 %.1f ms" % (
        stats["frames_shown"], stats["frames_total"], stats["frame_latency_p50_ms"] or -1))
    check("joined (minbuf, TLS)" in log and "WebSocket /stream" in log, log)
    bound = re.search(r"MIN_BUF check: (\d+) packets, max held - bound (-?\d+) packets", log)
    check(bound and int(bound.group(1)) >= 50 and int(bound.group(2)) <= 0,
          "MIN_BUF check: %s" % (bound.group(0) if bound else log))


def tls_relay_browser(build, workdir):
    """A relay's room over https:// and wss:// in headless Chromium (the test
    certificate accepted): the room page of a TLS relay shows its two
    participants, each tile streaming through the relay's door over TLS."""
    import test_browser
    from test_relay import Relay, publish, stop_all
    found = test_browser.find_browser()
    if not found:
        print("SKIP: chromium, chromedriver or python3-selenium not installed")
        sys.exit(SKIP)
    cert, key = make_cert(workdir)
    relay = Relay(build, workdir, "server.tls_cert=" + cert, "server.tls_key=" + key,
                  "server.max_clients_per_address=16")
    settings = ("source.type=test", "source.width=320", "source.height=240", "source.fps=15",
                "audio.source=off")
    pubs = []
    driver = None
    try:
        for name in ("call/alice", "call/bob"):
            pubs.append(publish(build, workdir, relay, name, *settings, duration=60))
        driver = insecure_chrome(found, workdir, "900,600")
        driver.get("https://%s/room.html?room=call" % relay.address)
        check(driver.execute_script("return window.isSecureContext"), "not a secure context")
        test_browser.wait_until(
            lambda: driver.execute_script(
                "return [...document.querySelectorAll('iframe')].map((f) => f.title).sort()")
            == ["call/alice", "call/bob"], lambda: "two tiles", timeout_s=15, poll_s=0.2)
        for name in ("call/alice", "call/bob"):
            driver.switch_to.frame(driver.find_element("css selector", 'iframe[title="%s"]' % name))
            try:
                stats = test_browser.wait_for(driver, lambda st: st["frames_shown"] >= 20,
                                              "the tile of %s over wss://" % name, 30)
            finally:
                driver.switch_to.default_content()
            print("tile %s over TLS: %d frames shown" % (name, stats["frames_shown"]))
    finally:
        if driver:
            driver.quit()
        stop_all(*pubs, relay)
    log = relay.log()
    check(log.count("joined (minbuf, TLS)") >= 2 and "WebSocket /stream/call/alice" in log, log[-2000:])


if __name__ == "__main__":
    if not shutil.which("openssl"):
        print("SKIP: no openssl(1) to make a certificate")
        sys.exit(SKIP)
    sys.exit(run({f.__name__: f for f in (tls_stream, tls_wrong_ca,
                                          tls_plain_client_to_tls_server,
                                          tls_client_to_plain_server, tls_config,
                                          tls_https, tls_reconnect, tls_silent,
                                          tls_browser, tls_relay_browser)},
                 sys.argv))
