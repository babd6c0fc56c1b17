# SPDX-License-Identifier: MIT
"""ppstream: pps-server on the sender's side, a pps-client per receiver;
with `relay`, the same stream through pps-relay: the relay on the sender's
side, pps-server publishing into it from there (a hop over the sender's
loopback), every pps-client taking it from the relay by name.

Settings (all optional):
    sets               the server's --set keys (a mapping)
    port               the port to listen on (0: the kernel's choice)
    server_extra_s     the server's --duration is the run's plus this; None: no
                       --duration (stop() ends it); default 0
    server_log         pass --log server.jsonl when this server has --log
    server_env         extra environment of the server
    policy, tolerance_ms, client_sets     the client's playout and --set keys
    client_extra_s     the client's --duration is the run's plus this (default 0)
    output             write the pictures shown (shown.y4m, for pps-peer-score)
    stop_signal        how stop() ends the server (default SIGTERM)
    relay              1: through one pps-relay; 2: a tree of two (the
                       viewers' relay subscribes to the publisher's); 0: none
    stream             the stream's name on the relay (default "lab/stream")

Files: server.err, server.json (--stats-json), server.jsonl (--log),
client[-TAG].jsonl, client[-TAG].err, shown[-TAG].y4m; with a relay,
relay-K.err (K = 1 from the publisher's side).
"""
import os
import signal

from .. import metrics, programs
from ..files import read_jsonl
from . import Wrapper, register


@register
class Ppstream(Wrapper):
    name = "ppstream"
    label = "ppstream"

    def start_sender(self, lab, duration_s):
        s = self.settings
        extra_s = s.get("server_extra_s", 0)
        log = None
        if s.get("server_log") and programs.has_option(self.build.server, "--log"):
            log = self.path("server", "jsonl")
        env = dict(os.environ, **s["server_env"]) if s.get("server_env") else None
        if s.get("relay"):
            return self.start_relayed(lab, duration_s, log, env)
        server = programs.Server(self.build.server, lab.addr("snd"), self.rundir, lab=lab, side="snd",
                                 port=s.get("port", 0), duration_s=None if extra_s is None else duration_s + extra_s,
                                 stats_json=self.path("server", "json"), log=log, sets=s.get("sets", {}), env=env,
                                 stderr=self.path("server", "err"))
        self.server = server
        self.senders.append(server)
        return server.address

    def start_relayed(self, lab, duration_s, log, env):
        """The publisher's relay, the publisher, then each further relay of
        the tree subscribing to the one before; the address viewers name."""
        s = self.settings
        stream = s.get("stream", "lab/stream")
        n = int(s["relay"])
        extra_s = s.get("server_extra_s", 0)
        # The relays outlive the publisher's --duration by a margin: a viewer
        # sees the stream end as the publisher's, not as the relay's.
        relay_s = None if extra_s is None else duration_s + extra_s + 10

        def relay(k, upstream):
            r = programs.Server(self.build.relay, lab.addr("snd"), self.rundir, lab=lab, side="snd",
                                port=s.get("port", 0) if k == n else 0, tag=f"relay-{k}", duration_s=relay_s,
                                quiet=False, sets=s.get("sets", {}),
                                extra=["--upstream", upstream] if upstream else [],
                                stderr=self.path(f"relay-{k}", "err"))
            self.senders.append(r)
            return r

        last = relay(1, None)
        publisher = programs.Program(
            programs.server_argv(self.build.server, None, publish=f"{last.address}/{stream}",
                                 duration_s=None if extra_s is None else duration_s + extra_s,
                                 stats_json=self.path("server", "json"), log=log, sets=s.get("sets", {})),
            lab, "snd", stderr=self.path("server", "err"), env=env)
        self.server = publisher
        self.senders.insert(0, publisher)  # stopped first
        last.wait_for_log(f"stream {stream}: ")
        for k in range(2, n + 1):
            last = relay(k, f"{last.address}/{stream}")
            last.wait_for_log(f"stream {stream}: ")
        publisher.address = f"{last.address}/{stream}"
        return publisher.address

    def start_receiver(self, lab, address, duration_s, side="rcv", tag=None):
        s = self.settings
        client = programs.Client(self.build.client, address, self.path("client", "jsonl", tag), lab=lab, side=side,
                                 duration_s=duration_s + s.get("client_extra_s", 0),
                                 output=self.path("shown", "y4m", tag) if s.get("output") else None,
                                 policy=s.get("policy"), tolerance_ms=s.get("tolerance_ms"),
                                 sets=s.get("client_sets", {}), stderr=self.path("client", "err", tag))
        return self.receiver_started(client)

    def stop_kw(self, program):
        if program in self.senders:
            return {"sig": self.settings.get("stop_signal", signal.SIGTERM), "timeout_s": 10}
        return {}

    def results(self, tag=None):
        """bits_per_second: every byte the client's video connections
        brought (its copies' too); stream_bits_per_second: the stream's own,
        its windows' bytes once, over the same span."""
        path = self.path("client", "jsonl", tag)
        summary = metrics.client_summary(path) or {}
        wire = summary.get("received_bps")
        stream = wire
        if wire and summary.get("duration_s"):
            _, windows = metrics.client_events(path)
            got = 8.0 * sum(w.get("bytes", 0) for w in windows)
            total = wire * summary["duration_s"]
            if 0 < got < total:
                stream = wire * got / total
        return {"summary": summary, "frames_shown_pct": summary.get("frames_shown_pct"),
                "frame_latency_p50_ms": summary.get("frame_latency_p50_ms"),
                "frame_latency_p95_ms": summary.get("frame_latency_p95_ms"),
                "longest_freeze_ms": summary.get("freeze_longest_ms"),
                "bits_per_second": wire, "stream_bits_per_second": stream}

    def display_times(self, scores, tag=None):
        """The client's `frame` events with shown=true, matched to each picture
        by the capture time its timecode carries (the value the server logged)."""
        shown = {e["capture_us"]: e["display_us"] for e in read_jsonl(self.path("client", "jsonl", tag))
                 if e.get("type") == "frame" and e.get("shown")}
        return [shown.get(int(s["capture_us"])) if s["timecode_ok"] == "1" else None for s in scores]
