# SPDX-License-Identifier: MIT
"""The machine-readable output (docs/JSON.md), on the real programs:

  json_start          both logs start with a start record (version, time,
                      addresses, stream), every record has a type and none an
                      "event"; both summaries carry the start block.
  json_clients        the server's summary lists every client served (those
                      that left too), with address and name.
  json_stats_unwritable  --stats-json to a path that cannot be written fails
                      at start, on both sides, saying so.
  json_interval       --stats-interval writes interval records into --log.
  json_reference      every field of every record a real run writes (logs,
                      --stats-json, /metrics?format=json) and every metric of
                      /metrics is in docs/JSON.md.
  metrics_scrape      GET /metrics during a run, parsed by prometheus_client,
                      equals /metrics?format=json of the same snapshot field
                      by field (the mapping of docs/JSON.md); off by default.
  metrics_token       with metrics = token: 401 without the token, 200 with it
                      as a bearer header or ?token=.
"""
import json
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request

import harness
from harness import Client, Server, check

SOURCE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REFERENCE = os.path.join(SOURCE, "docs", "JSON.md")
TOKEN = "Zq3vX8pL2mN7rT5wK9yB"


def read_jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def get(url, headers=None):
    """(status, body text) of a GET."""
    req = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")


def server_with_log(build, workdir, *settings, tag="server"):
    log = os.path.join(workdir, tag + ".jsonl")
    srv = Server(build, workdir, *settings, extra=["--log", log])
    return srv, log, srv.stats_path


def client(build, workdir, srv, name, duration=2, extra=()):
    """One connection per client (no copies of the stream), so that the
    server lists each client once."""
    stats = os.path.join(workdir, "client-%d.json" % time.monotonic_ns())
    c = Client(build, workdir, srv.address, "client.copies=1", duration=duration, name=name,
               extra=["--stats-json", stats] + list(extra))
    return c, c.log_path, stats


def check_start(rec, program, addresses):
    check(rec.get("type") == "start" and rec.get("program") == program, "%s: first record %r" % (program, rec))
    check(re.match(r"^\d+\.\d+", rec.get("version", "")), "%s: no version: %r" % (program, rec))
    check(abs(rec.get("time_us", 0) / 1e6 - time.time()) < 600 and rec.get("time", "").endswith("Z"),
          "%s: start time %r" % (program, rec))
    for key in addresses:
        check(re.match(r"^[\d.]+:\d+$", rec.get(key, "")), "%s: %s %r" % (program, key, rec.get(key)))


def json_start(build, workdir):
    srv, slog, sstats = server_with_log(build, workdir)
    try:
        c, clog, cstats = client(build, workdir, srv, "viewer", extra=["--stats-interval", "0.5"])
        check(c.wait() == 0, "client: %s" % c.stderr)
    finally:
        srv.stop()
    server_lines, client_lines = read_jsonl(slog), read_jsonl(clog)
    check_start(server_lines[0], "pps-server", ["listen"])
    check(server_lines[0]["listen"].endswith(":%d" % srv.port), "listen %r" % server_lines[0]["listen"])
    stream = server_lines[0].get("stream") or {}
    check(stream.get("width") == 640 and stream.get("quality_layers") and stream.get("source") == "test",
          "server start: stream %r" % stream)
    check_start(client_lines[0], "pps-client", ["server"])
    streams = [e for e in client_lines if e["type"] == "stream"]
    check(streams and streams[0]["width"] == 640 and streams[0]["server"] == srv.address,
          "client: stream record %r" % streams)
    for side, lines in (("server", server_lines), ("client", client_lines)):
        check(all("type" in e and "event" not in e for e in lines), "%s: a record without type" % side)
        check(lines[-1]["type"] == "summary", "%s: last record %r" % (side, lines[-1]["type"]))
    for side, path, program in (("server", sstats, "pps-server"), ("client", cstats, "pps-client")):
        with open(path) as f:
            s = json.load(f)
        check(s["type"] == "summary" and s["start"]["program"] == program and "version" in s["start"],
              "%s --stats-json: no start block: %r" % (side, list(s)[:5]))
    with open(cstats) as f:
        check(json.load(f)["start"]["stream"]["width"] == 640, "client --stats-json: start.stream")
    print("server start %s, client start %s" % (server_lines[0]["time"], client_lines[0]["time"]))


def json_clients(build, workdir):
    srv, slog, sstats = server_with_log(build, workdir, "audio.source=off")
    try:
        for name in ("first", "second", "third"):
            c, _, _ = client(build, workdir, srv, name, duration=1)
            check(c.wait() == 0, "client %s: %s" % (name, c.stderr))
        last, _, _ = client(build, workdir, srv, "last", duration=30)
        srv.wait_for_log("joined")
        harness.wait_until(lambda: srv.log().count("joined") >= 4, "the fourth client to join", 20)
    finally:
        srv.stop()
        last.stop()
    with open(sstats) as f:
        s = json.load(f)
    names = [c["name"] for c in s["clients"]]
    check(names == ["first", "second", "third", "last"], "clients listed: %r" % names)
    check([c["connected"] for c in s["clients"]] == [False, False, False, True], "connected flags")
    check(all(re.match(r"^127\.0\.0\.1:\d+$", c["address"]) for c in s["clients"]), "addresses")
    check(s["clients_left"] == 3 and s["clients_omitted"] == 0, "left %d omitted %d"
          % (s["clients_left"], s["clients_omitted"]))
    check(all(c["windows_complete"] + c["windows_partial"] > 0 and c["adu_bytes_sent"] > 0
              for c in s["clients"][:3]), "figures of the clients that left: %r" % s["clients"][:3])
    check(read_jsonl(slog)[-1] == s, "the log's summary is --stats-json's")
    print("clients:", ", ".join("%s #%d" % (c["name"], c["client"]) for c in s["clients"]))


def json_stats_unwritable(build, workdir):
    bad = os.path.join(workdir, "no-such-dir", "stats.json")
    t0 = time.monotonic()
    p = subprocess.run([os.path.join(build, "server", "pps-server"), "--listen", "127.0.0.1:0",
                        "--duration", "30", "--stats-json", bad], capture_output=True, text=True, timeout=60)
    took = time.monotonic() - t0
    check(p.returncode == 1 and took < 10, "pps-server: exit %d after %.1f s" % (p.returncode, took))
    check("--stats-json %s" % bad in p.stderr and "No such file" in p.stderr, "pps-server: %r" % p.stderr)
    # The client would try to connect first (nothing listens on port 1): it must not.
    p = subprocess.run([os.path.join(build, "client", "pps-client"), "127.0.0.1:1", "--display", "none",
                        "--stats-json", bad], capture_output=True, text=True, timeout=60)
    check(p.returncode == 1, "pps-client: exit %d" % p.returncode)
    lines = p.stderr.strip().splitlines()
    check(len(lines) == 1 and "--stats-json %s" % bad in lines[0], "pps-client: %r" % p.stderr)
    print("both refused at start:", lines[0])


def json_interval(build, workdir):
    srv = Server(build, workdir, "audio.source=off")
    try:
        c, clog, _ = client(build, workdir, srv, "viewer", duration=3, extra=["--stats-interval", "0.5"])
        check(c.wait() == 0, "client: %s" % c.stderr)
    finally:
        srv.stop()
    rec = [e for e in read_jsonl(clog) if e["type"] == "interval"]
    check(4 <= len(rec) <= 7, "%d interval records in 3 s at 0.5 s" % len(rec))
    check(all(0.3 < r["interval_s"] < 0.8 for r in rec), "intervals %r" % [r["interval_s"] for r in rec])
    summary = [e for e in read_jsonl(clog) if e["type"] == "summary"][0]
    check(sum(r["frames_shown"] for r in rec) <= summary["frames_shown"], "intervals count no more than the run")
    late = rec[1:]
    check(late and all(r["frames_shown"] > 0 and r["latency_p50_ms"] is not None and r["received_bps"] > 0
                       for r in late), "figures in the intervals: %r" % late)
    p = subprocess.run([os.path.join(build, "client", "pps-client"), "--stats-interval", "1", "127.0.0.1:1"],
                       capture_output=True, text=True, timeout=30)
    check(p.returncode == 2 and "--log" in p.stderr, "--stats-interval without --log: %d %r"
          % (p.returncode, p.stderr))
    print("%d interval records, fps %s" % (len(rec), [round(r["fps_shown"], 1) for r in rec]))


def reference():
    """{(side, type): set of documented fields} and the metric table rows."""
    tables, metrics, key = {}, [], None
    with open(REFERENCE) as f:
        for line in f:
            m = re.match(r"^### (server|client) `(\w+)`", line)
            if m:
                key = (m.group(1), m.group(2))
                tables[key] = set()
                continue
            if line.startswith("## "):
                key = None
            m = re.match(r"^\| `([^`]+)` \| (gauge|counter) \| (.*) \|$", line)
            if m:
                metrics.append((m.group(1), m.group(2), m.group(3).replace("`", "")))
                continue
            m = re.match(r"^\| `([^`]+)` \|", line)
            if m and key:
                tables[key].add(m.group(1))
    return tables, metrics


def flatten(obj, prefix=""):
    """Dotted names of every field, arrays of objects as name[]."""
    out = set()
    for k, v in obj.items():
        name = prefix + k
        if not isinstance(v, dict):
            out.add(name)
        if isinstance(v, dict):
            out |= flatten(v, name + ".")
        elif isinstance(v, list) and v and isinstance(v[0], dict):
            for item in v:
                out |= flatten(item, name + "[].")
    return out


def missing_fields(tables, side, rec):
    kind = "summary" if rec["type"] == "snapshot" else rec["type"]
    documented = tables.get((side, kind))
    if documented is None:
        return ["%s record type %r" % (side, rec["type"])]
    out = []
    for name in sorted(flatten(rec)):
        if name.startswith("start."):
            rest = name[len("start."):]
            if side == "client" and rest.startswith("stream."):
                ok = rest[len("stream."):] in tables[("client", "stream")] or rest == "stream"
            else:
                ok = rest in tables[(side, "start")]
        else:
            ok = name in documented
        if not ok:
            out.append("%s %s: %s" % (side, rec["type"], name))
    return out


def scrape_same_moment(url):
    """The text and the JSON of /metrics from one snapshot: (text, json)."""
    for _ in range(10):
        status, text = get(url)
        check(status == 200, "GET /metrics: %d %s" % (status, text[:200]))
        status, body = get(url + "?format=json")
        check(status == 200, "GET /metrics?format=json: %d" % status)
        snap = json.loads(body)
        m = re.search(r"^pps_server_snapshot_time_seconds (\S+)$", text, re.M)
        if m and abs(float(m.group(1)) - snap["time_us"] / 1e6) < 1e-6:
            return text, snap
    raise harness.Failure("no text and JSON of the same snapshot in 10 tries")


def json_reference(build, workdir):
    tables, metric_rows = reference()
    srv, slog, sstats = server_with_log(build, workdir, "server.metrics=on")
    try:
        c, clog, cstats = client(build, workdir, srv, "viewer", duration=4, extra=["--stats-interval", "0.5"])
        harness.wait_until(lambda: os.path.exists(clog) and '"type":"interval"' in open(clog).read(),
                           "an interval record", 20)
        text, snap = scrape_same_moment("http://%s/metrics" % srv.address)
        check(c.wait() == 0, "client: %s" % c.stderr)
    finally:
        srv.stop()
    missing = []
    for side, lines in (("server", read_jsonl(slog)), ("client", read_jsonl(clog))):
        for rec in lines:
            missing += missing_fields(tables, side, rec)
    for side, path in (("server", sstats), ("client", cstats)):
        with open(path) as f:
            missing += missing_fields(tables, side, json.load(f))
    missing += missing_fields(tables, "server", snap)
    documented = {name for name, _, _ in metric_rows}
    for line in text.splitlines():
        if not line.startswith("#"):
            name = re.match(r"^([a-zA-Z0-9_:]+)", line).group(1)
            if name not in documented:
                missing.append("metric " + name)
    missing = sorted(set(missing))
    check(not missing, "not in docs/JSON.md:\n  " + "\n  ".join(missing))
    kinds = {e["type"] for e in read_jsonl(clog)} | {e["type"] for e in read_jsonl(slog)}
    print("every field documented; record types seen: %s" % ", ".join(sorted(kinds)))


def metric_expected(snap, field, labels):
    """The value docs/JSON.md says a sample equals, in the metric's units."""
    if field.startswith("1,"):
        return 1.0
    if field.startswith("clients[]."):
        entry = next(c for c in snap["clients"] if str(c["client"]) == labels["client"])
        check(entry["name"] == labels["name"] and entry["address"] == labels["address"],
              "labels %r against %r" % (labels, entry))
        key, obj = field[len("clients[]."):], entry
    elif "[layer]" in field:
        key, obj = field.replace("[layer]", ""), None
        v = snap[key][int(labels["layer"])]
        return v / 1e3 if key.endswith("_ms_per_frame") else v
    elif field.startswith("start."):
        key, obj = field[len("start."):], snap["start"]
    else:
        key, obj = field, snap
    v = obj.get(key, 0)
    if key.endswith("_us"):
        return v / 1e6
    if key.endswith("_ms"):
        return v / 1e3
    return v


def metrics_scrape(build, workdir):
    from prometheus_client.parser import text_string_to_metric_families

    _, metric_rows = reference()
    # Off by default: a 404 as any unknown path.
    srv = Server(build, workdir, "audio.source=off")
    try:
        status, _ = get("http://%s/metrics" % srv.address)
        check(status == 404, "metrics off: %d" % status)
    finally:
        srv.stop()
    srv, _, sstats = server_with_log(build, workdir, "server.metrics=on", tag="on")
    try:
        c, _, _ = client(build, workdir, srv, 'vi"ew\\er', duration=30)
        srv.wait_for_log("joined")
        harness.wait_until(lambda: '"type":"clock"' in open(c.log_path).read(), "the client to stream", 20)
        text, snap = scrape_same_moment("http://%s/metrics" % srv.address)
    finally:
        c.stop()
        srv.stop()
    families = {f.name: f for f in text_string_to_metric_families(text)}
    rows = {name: (kind, field) for name, kind, field in metric_rows}
    compared, ids = 0, set()
    for name, (kind, field) in rows.items():
        family = name[:-len("_total")] if kind == "counter" else name
        check(family in families, "metric %s not scraped" % name)
        f = families[family]
        check(f.type == kind and f.documentation, "%s: type %s, help %r" % (name, f.type, f.documentation))
        check(f.samples, "%s: no sample" % name)
        for s in f.samples:
            check(s.name == name, "%s: sample named %s" % (name, s.name))
            want = metric_expected(snap, field, s.labels)
            check(abs(s.value - want) <= 1e-9 * max(1.0, abs(want)),
                  "%s%r = %r, the snapshot's %s = %r" % (name, s.labels, s.value, field, want))
            compared += 1
            if "client" in s.labels:
                ids.add(s.labels["client"])
    connected = {str(c["client"]) for c in snap["clients"] if c["connected"]}
    check(ids == connected and len(ids) >= 1, "clients in the text %r, connected %r" % (ids, connected))
    check(any(c["name"] == 'vi"ew\\er' for c in snap["clients"]), "the name with a quote and a backslash")
    print("%d samples of %d families equal the snapshot at %.6f (clients %s)"
          % (compared, len(families), snap["time_us"] / 1e6, sorted(ids)))


def metrics_token(build, workdir):
    srv = Server(build, workdir, "audio.source=off", "server.metrics=token", "server.access_token=" + TOKEN)
    try:
        url = "http://%s/metrics" % srv.address
        cases = [("no token", url, {}, 401), ("wrong bearer", url, {"Authorization": "Bearer " + TOKEN[:-1] + "x"}, 401),
                 ("bearer", url, {"Authorization": "Bearer " + TOKEN}, 200),
                 ("query", url + "?token=" + TOKEN, {}, 200), ("wrong query", url + "?token=nope", {}, 401),
                 ("json with query", url + "?format=json&token=" + TOKEN, {}, 200)]
        for what, u, headers, want in cases:
            status, body = get(u, headers)
            check(status == want, "%s: %d, expected %d: %s" % (what, status, want, body[:200]))
    finally:
        srv.stop()
    p = subprocess.run([os.path.join(build, "server", "pps-server"), "--set", "server.metrics=token"],
                       capture_output=True, text=True, timeout=30)
    check(p.returncode == 2 and "access_token" in p.stderr, "metrics=token without a token: %d %r"
          % (p.returncode, p.stderr))
    print("401 without the token, 200 with it (bearer, ?token=)")


TESTS = {f.__name__: f for f in (json_start, json_clients, json_stats_unwritable, json_interval, json_reference,
                                  metrics_scrape, metrics_token)}

if __name__ == "__main__":
    sys.exit(harness.run(TESTS, sys.argv))
