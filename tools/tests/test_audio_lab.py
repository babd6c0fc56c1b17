#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""The lab's audio figures and its loss and reverse-path axes (suite unit: no
lab, no network, a few seconds):
- the audio figures from a synthetic client log (slot events) and from a
  synthetic summary with the audio fields; a log and a summary from before
  the audio track give None everywhere, and the report's audio columns an em
  dash; the server's audio counters, and its audio-only connection told apart
  from the video's;
- loss_pct = 1 reaches pps-linkem's loss probability, 0.01 each direction,
  through pps-netlab's own `up` parser and pps-linkem --check;
- reverse_flows = N starts `pps-netlab traffic --reverse --elephants N`
  with cubic, and the sweep finds that run's results apart from the forward one's;
- old presets keep their cell ids; the audio preset loads;
- the audio-beside-video plot is drawn (when matplotlib is there).

    test_audio_lab.py BUILD_DIR   (its pps-config-doc and tools/linkem/pps-linkem)
"""
import argparse
import importlib.machinery
import importlib.util
import json
import os
import sys
import tempfile

from ppslab import matrix, metrics, programs, report, sweep
from ppslab.errors import UsageError
from ppslab.lab import Lab
from ppslab.netlab import lifecycle

failures = 0


def check(ok, what):
    global failures
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    failures += not ok


def close(a, b, tol=1e-6):
    return a is not None and b is not None and abs(a - b) <= tol


def write_jsonl(path, events):
    with open(path, "w") as f:
        f.write("".join(json.dumps(e) + "\n" for e in events))
    return path


# ---------------------------------------------------------------- a synthetic run

T0 = 1_700_000_000_000_000  # capture time of the first frame, us
SLOT_US = 20_000


def synthetic_log(audio=True, summary_audio=True):
    """10 s of video (30 frames/s, 100 ms latency) and, with @audio, 500
    audio slots of 20 ms: every tenth recovered, every twentieth concealed,
    mouth-to-ear 150 ms (+ 100 ms for the last 10), playout delay 120 or 140 ms."""
    events = []
    for k in range(300):
        cap = T0 + k * 33_333
        events.append({"type": "frame", "window": k // 2, "frame": k, "capture_us": cap, "display_us": cap + 100_000,
                       "latency_ms": 100.0, "shown": True})
    slots = []
    if audio:
        for k in range(500):
            cap = T0 + k * SLOT_US
            how = "concealed" if k % 20 == 0 else "recovered" if k % 10 == 0 else "played"
            ear_ms = 150.0 + (100.0 if k >= 490 else 0.0)
            slots.append({"type": "audio", "seq": 1000 + k, "capture_us": cap, "ear_us": cap + int(ear_ms * 1000),
                          "mouth_to_ear_ms": ear_ms, "playout_delay_ms": 120.0 if k % 2 else 140.0, "how": how})
        events += slots
        events += [{"type": "audio_late", "seq": 1000 + k} for k in (100, 200, 300)]
        events += [{"type": "audio_late", "seq": 5}]  # before the span: not counted
        events += [{"type": "audio_skipped", "seq": 1250}]
    summary = {"type": "summary", "frames_shown_pct": 100.0, "frame_latency_p50_ms": 100.0}
    if audio and summary_audio:
        summary.update({"audio_slots": 500, "audio_played": 450, "audio_recovered": 25, "audio_concealed": 25,
                        "audio_late": 3, "audio_skipped": 1, "audio_played_pct": 90.0, "audio_concealed_pct": 10.0,
                        "audio_late_pct": 0.6, "mouth_to_ear_p50_ms": 150.0, "mouth_to_ear_p95_ms": 150.0,
                        "mouth_to_ear_p99_ms": 250.0, "audio_delay_mean_ms": 130.0, "audio_delay_std_ms": 10.0,
                        "av_skew_p50_ms": -50.0, "av_skew_abs_p95_ms": 50.0})
    return events + [summary]


def test_audio_from_events(d):
    path = write_jsonl(os.path.join(d, "client.jsonl"), synthetic_log())
    log = metrics.client_log(path)
    whole = metrics.audio_metrics(log)  # every slot
    check(whole["audio_slots"] == 500 and whole["audio_from"] == "events", f"500 slots from the events: {whole['audio_slots']}")
    check(close(whole["audio_played_pct"], 90.0) and close(whole["audio_recovered_pct"], 5.0)
          and close(whole["audio_concealed_pct"], 5.0),
          f"played / recovered / concealed 90 / 5 / 5 %: {whole['audio_played_pct']} / {whole['audio_recovered_pct']} / "
          f"{whole['audio_concealed_pct']}")
    check(whole["audio_late"] == 3 and close(whole["audio_late_pct"], 0.6),
          f"3 late frames inside the slots' seqs (the one before is left out): {whole['audio_late']}, {whole['audio_late_pct']}%")
    check(whole["audio_skipped"] == 1, "1 skipped")
    check(whole["mouth_to_ear_p50_ms"] == 150.0 and whole["mouth_to_ear_p99_ms"] == 250.0,
          f"mouth-to-ear p50 150, p99 250 (rank 495 of 490 x 150 and 10 x 250): {whole['mouth_to_ear_p50_ms']}, "
          f"{whole['mouth_to_ear_p99_ms']}")
    check(close(whole["audio_delay_mean_ms"], 130.0) and close(whole["audio_delay_std_ms"], 10.0),
          f"playout delay 130 +- 10 ms: {whole['audio_delay_mean_ms']} +- {whole['audio_delay_std_ms']}")
    # Each frame: 100 ms latency against a slot heard 150 ms after capture: -50 ms.
    check(close(whole["av_skew_p50_ms"], -50.0) and close(whole["av_skew_abs_p95_ms"], 50.0),
          f"A/V skew -50 ms, |skew| p95 50: {whole['av_skew_p50_ms']}, {whole['av_skew_abs_p95_ms']}")
    # run_metrics: over the analysed span (first capture + 1 s .. last - 1 s).
    m = metrics.run_metrics(path)
    check(m["audio_from"] == "events" and 350 <= m["audio_slots"] <= 410,
          f"inside the video's analysed span: {m['audio_slots']} slots of 500")
    check(m["mouth_to_ear_p99_ms"] == 150.0, "the span leaves out the last second's late slots")
    check(m["audio_late"] == 3, f"late frames inside the span's seqs: {m['audio_late']}")


def test_audio_from_summary(d):
    # A log with the summary's audio fields but no slot events.
    events = [e for e in synthetic_log() if e["type"] not in ("audio", "audio_late", "audio_skipped")]
    m = metrics.run_metrics(write_jsonl(os.path.join(d, "summary-only.jsonl"), events))
    check(m["audio_from"] == "summary" and m["audio_slots"] == 500, "no slot events: the summary's figures")
    check(close(m["audio_played_pct"], 90.0) and close(m["audio_recovered_pct"], 5.0) and close(m["audio_concealed_pct"], 5.0),
          "shares from the summary's counts (its concealed % of 10 counts the recovered: 5 here)")
    check(m["mouth_to_ear_p95_ms"] == 150.0 and m["av_skew_abs_p95_ms"] == 50.0 and m["audio_delay_std_ms"] == 10.0,
          "percentiles, delay and skew as the summary says")
    # A summary with null figures (the client writes NaN as null).
    s = dict(events[-1], mouth_to_ear_p50_ms=None, av_skew_abs_p95_ms=float("nan"))
    a = metrics.audio_from_summary(s)
    check(a["mouth_to_ear_p50_ms"] is None and a["av_skew_abs_p95_ms"] is None, "null and NaN figures: None")
    # Before the audio track, and a stream without audio.
    for what, log in (("a log from before the audio track", synthetic_log(audio=False)),
                      ("a summary without audio fields", [{"type": "summary", "frames_shown_pct": 99.0}])):
        m = metrics.run_metrics(write_jsonl(os.path.join(d, "old.jsonl"), log))
        check(all(m[k] is None for k in metrics.AUDIO_FIGURES) and m["audio_from"] == "", f"{what}: every audio figure None")
        check(m.get("frames_shown_pct") is not None or what.startswith("a summary"), f"{what}: the video's figures as before")
    check(metrics.audio_from_summary(None)["audio_slots"] is None, "no summary at all: None")


def test_server_counters():
    new = {"audio_frames": 1500, "audio_dropped": 2, "clients": [
        {"client": 1, "windows_complete": 400, "adu_bytes_sent": 9e6, "congestion": "bbr", "audio_sent": 0},
        {"client": 2, "audio_only": True, "windows_complete": 0, "congestion": "bbr", "audio_sent": 1490, "audio_late": 7,
         "audio_overflow": 1, "audio_refused": 0}]}
    a = metrics.server_audio(new)
    check(a["server_audio_sent"] == 1490 and a["server_audio_late"] == 7 and a["server_audio_overflow"] == 1
          and a["server_audio_frames"] == 1500, f"the server's audio counters summed over its sessions: {a}")
    check(metrics.video_client(new)["client"] == 1 and metrics.audio_client(new)["client"] == 2,
          "the video connection and the audio-only one told apart")
    audio_first = {"clients": list(reversed(new["clients"]))}
    check(metrics.video_client(audio_first)["client"] == 1, "the video connection even when the audio one is listed first")
    old = {"clients": [{"client": 1, "windows_complete": 400, "retrans_pkts": 3}]}
    a = metrics.server_audio(old)
    check(all(v is None for v in a.values()), "a server from before the counters: None")
    check(metrics.video_client(old)["client"] == 1 and metrics.audio_client(old) == {}, "one client: the video's")
    check(metrics.video_client({}) == {}, "no server.json: {}")


def test_report_columns():
    m_old = {"frames_shown_pct": 99.0, "frame_latency_p50_ms": 90.0, "frame_latency_p95_ms": 120.0}
    cols = report.audio_cells(m_old)
    check(all(set(c) <= set(report.NO_AUDIO + " /") and report.NO_AUDIO in c for c in cols),
          f"no audio: an em dash in every audio column: {cols}")
    m_new = dict(m_old, **metrics.audio_from_summary(synthetic_log()[-1]))
    cols = report.audio_cells(m_new)
    check(cols[0] == "150 / 150 / 250" and cols[1] == "90.0" and cols[2] == "5.0 / 5.0" and cols[4] == "130 \u00b1 10",
          f"audio columns: {cols}")
    # A sweep of two cells with audio and their baseline without.
    cfg = {"server_sets": {"connection": {"audio.transport": "connection"}, "noaudio": {"audio.source": "off"}}}
    base_cell = {"transport": "minbuf(1,3)", "window_frames": 2, "flows": 0, "rtt_ms": 50, "rate_mbit": 10,
                 "queue": "droptail", "congestion": "bbr", "pattern": "ball", "loss_pct": 1, "rep": 0}
    records = []
    for name, m in (("connection", dict(m_new, frames_shown_pct=98.0)), ("noaudio", dict(m_old, **metrics.no_audio()))):
        cell = dict(base_cell, server_set=name)
        records.append({"cell": dict(cell, id=matrix.cell_id(cell)), "metrics": m})
    check(report.baseline_sets(cfg) == ["noaudio"], "the baseline: the server_set with audio.source = off")
    text = "\n".join(report.audio_section({"config": cfg}, records, {}, None))
    print(text)
    check("## Audio beside video" in text and report.NO_AUDIO in text, "the audio table, an em dash for the run without")
    check("| 98.0 (-1.0) | 90 (+0) | 120 (+0) |" in text, "the video with audio against without: differences")
    check(report.audio_section({"config": {}}, [{"cell": dict(base_cell, id="x"), "metrics": m_old}], {}, None) == [],
          "a sweep without audio and without a baseline: no audio section")
    line = report.cell_line({"cell": {"id": "x"}, "metrics": dict(m_new, windows_transmitted=1, within_300ms_pct=1,
                             within_500ms_pct=1, window_latency_p95_ms=1, sender_dropped_pct=0, server_throughput_bps=1,
                             friendliness_ratio=None, retrans_pkts=0, rto_events=0)})
    check("mouth-to-ear p50/p95/p99 150/150/250 ms" in line, f"the progress line: {line[-80:]}")


# ---------------------------------------------------------------- the axes


def netlab_parser():
    """pps-netlab's own argument parser (tools/pps-netlab.py, beside this folder)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pps-netlab.py")
    loader = importlib.machinery.SourceFileLoader("pps_netlab", path)
    spec = importlib.util.spec_from_loader("pps_netlab", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module.build_parser()


def test_axes(build, d):
    for text, want in (("1", [1]), ("0", [""]), ("0.5, 2", [0.5, 2]), ("", [""])):
        got = matrix.parse_axis("loss_pct", text, build)
        check(got == want, f"loss_pct = {text!r}: {got}")
    for text, want in (("20", [20]), ("0, 4", ["", 4])):
        got = matrix.parse_axis("reverse_flows", text, build)
        check(got == want, f"reverse_flows = {text!r}: {got}")
    for name, bad in (("loss_pct", "-1"), ("loss_pct", "x"), ("loss_pct", "60"), ("reverse_flows", "1.5"),
                      ("reverse_flows", "200")):
        try:
            matrix.parse_axis(name, bad, build)
            check(False, f"{name} = {bad} is refused")
        except UsageError as e:
            check(True, f"{name} = {bad} is refused: {e}")
    cell = {"transport": "minbuf(1,3)", "window_frames": 2, "flows": 0, "rtt_ms": 50, "rate_mbit": 10, "queue": "droptail",
            "congestion": "bbr", "pattern": "ball", "server_set": "window", "rep": 0}
    plain = matrix.cell_id(cell)
    check(plain == "mb13-w2-f0-10mbit-50ms-droptail-bbr-ball-swindow-r0", f"a cell without the new axes keeps its id: {plain}")
    check(matrix.cell_id(dict(cell, loss_pct=1)) == "mb13-w2-f0-10mbit-50ms-droptail-bbr-ball-swindow-l1-r0", "loss 1%: -l1")
    check(matrix.cell_id(dict(cell, loss_pct=0.5)).endswith("-l0p5-r0"), "loss 0.5%: -l0p5")
    check(matrix.cell_id(dict(cell, reverse_flows=20)).endswith("-rf20-r0"), "20 reverse flows: -rf20")

    # loss_pct = 1 -> pps-netlab up --loss 0.01 -> pps-linkem's loss probability 0.01, each direction.
    cfg = {"lab": {}, "traces": {}}
    args = sweep.lab_args(dict(cell, loss_pct=1), cfg, 60, d)
    check(args[args.index("--loss") + 1] == "0.01", f"the lab's --loss: {args[args.index('--loss') + 1]}")
    check("--loss" not in sweep.lab_args(cell, cfg, 60, d), "no loss_pct: no --loss")
    check(args[args.index("--congestion") + 1] == sweep.LAB_CONGESTION == "cubic", "the lab's routes: cubic")
    parser = netlab_parser()
    up = parser.parse_args(["up", "--name", "t"] + args)
    linkem_argv = lifecycle.linkem_args(up)
    check(linkem_argv[linkem_argv.index("--loss") + 1] == "0.01", "pps-netlab up passes --loss 0.01 to pps-linkem")
    linkem = os.path.join(build.path, "tools", "linkem", "pps-linkem")
    if os.access(linkem, os.X_OK):
        os.environ["PPS_LINKEM"] = linkem
        settings = lifecycle.linkem_check(up)
        check(settings["fwd"]["loss"] == 0.01 and settings["rev"]["loss"] == 0.01,
              f"pps-linkem --check: loss probability {settings['fwd']['loss']} forward, {settings['rev']['loss']} reverse")
    else:
        print(f"note: no {linkem}: pps-linkem --check not run", flush=True)

    # reverse_flows = 20 -> pps-netlab traffic --reverse --elephants 20 --congestion cubic.
    lab = Lab("pps-netlab", "t")
    argv = lab.traffic_argv(30, elephants=20, congestion=sweep.ELEPHANT_CONGESTION, reverse=True)
    traffic = parser.parse_args(argv[1:])
    check(traffic.reverse and traffic.elephants == "20" and traffic.congestion == "cubic",
          f"reverse elephants: {' '.join(argv[1:])}")
    flows = sweep.flow_congestion(dict(cell, flows=20, reverse_flows=20), sweep.server_sets(dict(cell, server_set=""),
                                  {"server_set": {}, "server_sets": {}}))
    check(flows == {"stream": "bbr", "routes": "cubic", "elephants": "cubic", "reverse_elephants": "cubic"},
          f"every flow's congestion control: {flows}")
    check(sweep.has_cross_traffic(dict(cell, reverse_flows=4)) and not sweep.has_cross_traffic(cell),
          "reverse flows are cross traffic (a warm-up, a trace's lead)")
    # The runs' results: pps-netlab numbers them as asked; the plan says which way.
    state = os.path.join(d, "state")
    os.makedirs(state)
    for tid, reverse in ((0, True), (1, False)):
        with open(os.path.join(state, f"traffic-{tid}.json"), "w") as f:
            json.dump({"id": tid, "reverse": reverse}, f)
    lab.state_dir = lambda: state
    check(sweep.traffic_result(lab, False) == os.path.join(state, "traffic-1", "elephants-client.json")
          and sweep.traffic_result(lab, True) == os.path.join(state, "traffic-0", "elephants-client.json"),
          "forward and reverse results found by their plans, whichever started first")

    # The client plays audio on its clock where it has audio.output.
    real = programs.config_choices
    try:
        programs.config_choices = lambda b, p, s, k: ("auto", "sdl", "none")
        check(sweep.client_sets({"client_set": {}}, build) == {"audio.output": "none"}, "audio.output = none by default")
        check(sweep.client_sets({"client_set": {"audio.output": "sdl"}}, build) == {"audio.output": "sdl"}, "[client] wins")

        def no_key(*a):
            raise UsageError("no [audio] output choices")
        programs.config_choices = no_key
        check(sweep.client_sets({"client_set": {}}, build) == {}, "a client without audio: nothing added")
    finally:
        programs.config_choices = real


def test_presets(build):
    if not build.has("config_doc"):
        print(f"note: no {build.config_doc}: presets not loaded", flush=True)
        return
    cfg = matrix.load_config(matrix.preset_path("audio"), {}, build)
    cells = matrix.plan_cells(cfg)
    check(len(cells) == 20, f"audio preset: 20 cells ({len(cells)})")
    check(sorted({c["server_set"] for c in cells}) == ["connection", "connection-nothin", "noaudio", "window"],
          "four servers per path")
    check(sum(1 for c in cells if c.get("loss_pct") == 1) == 4 and sum(1 for c in cells if c.get("reverse_flows") == 20) == 4
          and sum(1 for c in cells if c.get("trace")) == 4 and sum(1 for c in cells if c["flows"] == 20) == 4,
          "idle, 20 flows, steps, 1% loss, 20 reverse flows: 4 cells each")
    check(cfg["client_set"].get("audio.output") == "none" and all(c["pattern"] == "ball" for c in cells),
          "audio.output none, ball")
    est = len(cells) * (cfg["warmup_s"] + cfg["duration_s"] + sweep.CELL_OVERHEAD_GUESS_S) / 60
    check(est <= 30, f"about {est:.0f} minutes without the scoring")


def test_plot(d):
    if importlib.util.find_spec("matplotlib") is None:  # Debian's /usr/bin/python3 has it; pyenv's may not
        print("note: no matplotlib: the plot is not drawn", flush=True)
        return
    from ppslab import plots
    path = write_jsonl(os.path.join(d, "plot.jsonl"), synthetic_log())
    png = plots.plot_av_timeline(os.path.join(d, "av.png"), "test", path, step_downs_us=[T0 + 3_000_000])
    ok = png and os.path.getsize(png) > 5000
    with open(png, "rb") as f:
        ok = ok and f.read(8) == b"\x89PNG\r\n\x1a\n"
    check(ok, "the audio-beside-video plot is a PNG")
    old = write_jsonl(os.path.join(d, "plot-old.jsonl"), synthetic_log(audio=False))
    check(plots.plot_av_timeline(os.path.join(d, "none.png"), "test", old) is None and not os.path.exists(os.path.join(d, "none.png")),
          "no audio: no plot")


def test_write_section(d):
    """report --section: one section of a report into a page's figures markers, the
    command that made it first, links into the sweep folder dropped; a page
    without markers, or a section the report lacks, is refused."""
    sweep_dir = os.path.join(d, "sweep-section")
    os.makedirs(sweep_dir)
    with open(os.path.join(sweep_dir, "plan.json"), "w") as f:
        json.dump({"command": "pps-sweep run --preset audio --out /some/where/dir", "created": "2026-01-02T03:04:05"}, f)
    text = ("# Title\n\n## Before\n\nold\n\n## Audio beside video\n\nintro\n\n| a | plot |\n|---|---|\n"
            "| 1 | [A/V](cells/x/av-timeline.png) |\n\n### Sub\n\nmore\n\n## After\n\nnot this\n")
    page = os.path.join(d, "page.md")
    with open(page, "w") as f:
        f.write("head\n<!-- figures:begin -->\nstale\n<!-- figures:end -->\ntail\n")
    report.write_section(text, "Audio beside video", page, sweep_dir)
    with open(page) as f:
        out = f.read()
    check(out.startswith("head\n<!-- figures:begin -->\nGenerated by `pps-sweep report") and out.endswith(
        "<!-- figures:end -->\ntail\n"), "the section goes between the markers:\n" + out)
    check("| 1 | A/V |" in out and "### Sub" in out and "not this" not in out and "stale" not in out
          and "/some/where" not in out and "--preset audio" in out, "the section's content:\n" + out)
    for title, body in (("Nowhere", "<!-- figures:begin -->\n<!-- figures:end -->\n"), ("Audio beside video", "no markers\n")):
        with open(page, "w") as f:
            f.write(body)
        try:
            report.write_section(text, title, page, sweep_dir)
            check(False, "write_section(%r) into %r: no error" % (title, body))
        except UsageError:
            pass


def main():
    p = argparse.ArgumentParser()
    p.add_argument("build")
    build = programs.Build(p.parse_args().build)
    with tempfile.TemporaryDirectory(prefix="pps-audio-lab-") as d:
        test_audio_from_events(d)
        test_audio_from_summary(d)
        test_server_counters()
        test_report_columns()
        test_axes(build, d)
        test_presets(build)
        test_plot(d)
        test_write_section(d)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
