# SPDX-License-Identifier: MIT
"""pps-idr-amplification's run: what one misbehaving client costs another.
A pps-server on loopback with one headless pps-client (the viewer) and,
unless the scenario is none, an attacker (attacks.Attacker: slow-reader or
churner); from the server's --log, the viewer's mean sent bitrate after a
warm-up, the encoder's output and the forced IDRs per second."""
import json
import os
import subprocess

from . import metrics, programs
from .attacks import Attacker
from .errors import Failure

WARMUP_S = 4.0


def one_run(build, workdir, scenario, budget, seconds, settings):
    """One run of @scenario (none, slow-reader, churner) with
    server.recovery_budget_pct @budget; its figures."""
    tag = "%s-%s" % (scenario, budget)
    log_file = os.path.join(workdir, "server-%s.jsonl" % tag)
    stats_file = os.path.join(workdir, "server-%s.json" % tag)
    server = programs.Server(build.server, "127.0.0.1", workdir, tag="server-" + tag, duration_s=seconds + 2,
                             stats_json=stats_file, log=log_file, ready_timeout_s=30, new_session=False,
                             sets=["server.recovery_budget_pct=%d" % budget] + list(settings))
    viewer = attacker = None
    try:
        viewer = programs.Client(build.client, server.address, os.path.join(workdir, "viewer-%s.jsonl" % tag),
                                 duration_s=seconds, quiet=False, sets=["client.name=viewer"], stderr=subprocess.DEVNULL,
                                 new_session=False)
        if scenario != "none":
            attacker = Attacker(scenario, server.port)
            attacker.start()
        viewer.wait(timeout=seconds + 30)
    finally:
        if attacker:
            attacker.stop()
        if viewer:
            viewer.stop(timeout_s=10)
        server.stop(timeout_s=10)
    viewer_bps, encoded_bps, idr = [], [], []
    t0 = None
    with open(log_file) as f:
        for line in f:
            e = json.loads(line)
            t0 = t0 or e["t_us"]
            if (e["t_us"] - t0) / 1e6 < WARMUP_S:
                continue
            if e["type"] == "path" and e["name"] == "viewer":
                viewer_bps.append(sum(e["sent_layer_bps"]))
            elif e["type"] == "rates":
                encoded_bps.append(sum(e["encoded_layer_bps"]))
                idr.append((e["t_us"], e["idr_requests"]))
    try:
        stats = server.stats()
    except (OSError, ValueError) as error:
        raise Failure(f"pps-server's counters: {error}") from None
    idr_per_s = ((idr[-1][1] - idr[0][1]) / ((idr[-1][0] - idr[0][0]) / 1e6)
                 if len(idr) > 1 and idr[-1][0] > idr[0][0] else float("nan"))

    def mbps(values):
        m = metrics.mean(values)
        return float("nan") if m is None else m / 1e6

    return {
        "scenario": scenario, "budget_pct": budget,
        "viewer_mbps": mbps(viewer_bps), "encoded_mbps": mbps(encoded_bps),
        "forced_idr_per_s": idr_per_s, "attacker_joins": attacker.joins if attacker else 0,
        "recovery_deferred": stats.get("recovery_deferred"),
        "recovery_dropped_client": stats.get("recovery_dropped_client"),
        "idr_cost_bits": stats.get("idr_cost_bits"),
    }
