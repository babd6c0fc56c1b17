# SPDX-License-Identifier: MIT
"""Every program's conventions (--help, --version, exit statuses, JSON, install), run on the built programs:

  help VERSION PROGRAM...   --help and --version of each: exit 0, stdout not
                            empty, stderr empty; --help finishes in well under
                            the 12 s of pps-codec-bench's benchmark (it ran
                            nothing); a C program's help starts
                            with "Usage:" and documents its exit statuses;
                            every program's --version (the scripts' too) is
                            exactly "<program> VERSION".
  usage PROGRAM...          an unknown option is a usage error: exit 2, a
                            message on stderr, nothing on stdout.
  json PPS_LINKEM           JSON with a string from the user in it parses:
                            pps-linkem --check with a trace whose path has a
                            quote, a backslash and a tab (its settings JSON
                            once printed the path raw and was invalid).
  json-server SERVER CLIENT a pps-client named with quotes, a backslash and a
                            newline: pps-server's --log lines and --stats-json
                            parse, and the log names the client as the server
                            shows it (the newline as '?').
  install MESON BUILD PREFIX BINDIR SYSCONFDIR MANDIR UNITDIR DOCDIR MAN(0|1)
                            `meson install --destdir` into a temporary
                            directory installs the programs, the configuration
                            files, the systemd unit pointing at them, the docs
                            and (MAN=1) the man pages, which name the docs'
                            folder.

A PROGRAM is a path; one ending in .py, .sh or without an ELF header is a
script (run with /usr/bin/python3 or sh).
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import harness  # the one waiting loop

# --help must not run anything: the slowest (a Python tool importing numpy, or
# pps-server under ASan) takes 0.2 s here; 3 s leaves room for a loaded machine
# and is still a quarter of pps-codec-bench's shortest default run (12 s).
HELP_LIMIT_S = 3.0 * (10 if os.environ.get("PPS_UNDER_VALGRIND") else 1)


def is_elf(path):
    with open(path, "rb") as f:
        return f.read(4) == b"\x7fELF"


def command(path):
    if is_elf(path):
        return [path]
    if path.endswith(".sh"):
        return ["sh", path]
    return ["/usr/bin/python3", path]


def name_of(path):
    name = os.path.basename(path)
    return name[:-3] if name.endswith((".py", ".sh")) and not name.endswith("demo.sh") else name


def run(path, *args):
    start = time.monotonic()
    p = subprocess.run(command(path) + list(args), capture_output=True, text=True, timeout=60,
                       stdin=subprocess.DEVNULL)
    return p, time.monotonic() - start


def check_help(version, paths):
    failures = []
    for path in paths:
        name, elf = name_of(path), is_elf(path)
        p, seconds = run(path, "--help")
        what = "%s --help" % name
        if p.returncode != 0:
            failures.append("%s: exit %d (stderr: %s)" % (what, p.returncode, p.stderr.strip()))
        if not p.stdout.strip():
            failures.append("%s: nothing on stdout" % what)
        if p.stderr:
            failures.append("%s: stderr not empty: %s" % (what, p.stderr.strip()))
        if seconds > HELP_LIMIT_S:
            failures.append("%s: took %.1f s (> %.1f s): it ran something" %
                            (what, seconds, HELP_LIMIT_S))
        if elf and not p.stdout.startswith("Usage: " + name):
            failures.append("%s: does not start with 'Usage: %s'" % (what, name))
        if elf and "Exit status: 0" not in p.stdout:
            failures.append("%s: no 'Exit status: 0 ...' line" % what)
        if elf and not ("-V, --version" in p.stdout and "-h, --help" in p.stdout):
            failures.append("%s: -h, --help and -V, --version are not listed" % what)

        p, _ = run(path, "--version")
        what = "%s --version" % name
        if p.returncode != 0 or p.stderr:
            failures.append("%s: exit %d, stderr: %s" % (what, p.returncode, p.stderr.strip()))
        if p.stdout != "%s %s\n" % (name, version):
            failures.append("%s: %r, expected %r" % (what, p.stdout, "%s %s\n" % (name, version)))
    return failures


def check_usage(paths):
    failures = []
    for path in paths:
        name = name_of(path)
        p, _ = run(path, "--no-such-option")
        what = "%s --no-such-option" % name
        if p.returncode != 2:
            failures.append("%s: exit %d, expected 2 (usage error)" % (what, p.returncode))
        if p.stdout:
            failures.append("%s: stdout not empty: %s" % (what, p.stdout.strip()[:200]))
        if not p.stderr.strip():
            failures.append("%s: no message on stderr" % what)
        # A long option only begun ("--durat" for --duration) is refused, not
        # taken for the option it begins (getopt_long's default).
        helped, _ = run(path, "--help")
        if "--duration" in helped.stdout:
            p, _ = run(path, "--durat", "0.5")
            what = "%s --durat 0.5" % name
            if p.returncode != 2 or not p.stderr.strip():
                failures.append("%s: exit %d, expected 2 with a message (an abbreviation)"
                                % (what, p.returncode))
    return failures


def check_json(linkem):
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        trace = os.path.join(tmp, 'a "quoted"\\ trace\t.txt')
        with open(trace, "w") as f:
            f.write("1\n2\n3\n")
        p = subprocess.run([linkem, "--snd-netns", "a", "--rcv-netns", "b", "--trace", trace,
                            "--delay", "10ms", "--check"], capture_output=True, text=True,
                           timeout=30)
        if p.returncode != 0:
            return ["pps-linkem --check: exit %d: %s" % (p.returncode, p.stderr.strip())]
        try:
            settings = json.loads(p.stdout)["settings"]
        except (ValueError, KeyError) as e:
            return ["pps-linkem --check: not JSON with settings (%s): %s" % (e, p.stdout)]
        for direction in ("fwd", "rev"):
            if settings[direction]["trace"] != trace:
                failures.append("pps-linkem --check: %s trace %r, expected %r" %
                                (direction, settings[direction]["trace"], trace))
    # The queue's two counts: 1 BDP (1 Mbit/s x 50 ms = 6,250 bytes) in
    # 1500-byte packets by default, in bytes with --queue-bytes auto.
    for extra, pkts, size in (([], 5, 7500), (["--queue-bytes", "auto"], 6250 // 40 + 1, 6250)):
        p = subprocess.run([linkem, "--snd-netns", "a", "--rcv-netns", "b", "--rate", "1mbit",
                            "--delay", "25ms", "--check"] + extra, capture_output=True, text=True,
                           timeout=30)
        if p.returncode != 0:
            failures.append("pps-linkem --check %s: exit %d: %s" % (extra, p.returncode, p.stderr.strip()))
            continue
        got = json.loads(p.stdout)["settings"]["fwd"]
        if (got["queue_limit_pkts"], got["queue_limit_bytes"]) != (pkts, size):
            failures.append("pps-linkem --check %s: queue %d pkts / %d bytes, expected %d / %d" %
                            (extra, got["queue_limit_pkts"], got["queue_limit_bytes"], pkts, size))
    return failures


def check_json_server(server, client):
    # Anchor windows (the default while nothing drops) are published open
    # and logged when they close; windows with B frames when whole.
    return (check_json_server_run(server, client, [])
            or check_json_server_run(server, client, ["--set", "pps.b_frames=always"]))


def check_json_server_run(server, client, settings):
    name = 'a "quoted" \\ name\nwith a newline'
    with tempfile.TemporaryDirectory() as tmp:
        port_file, log, stats = (os.path.join(tmp, f) for f in ("port", "log.jsonl", "s.json"))
        srv = subprocess.Popen([server, "--listen", "127.0.0.1:0", "--port-file", port_file,
                                "--log", log, "--stats-json", stats, "-q"] + settings,
                               stderr=subprocess.PIPE, text=True)
        try:
            try:
                harness.wait_until(lambda: os.path.exists(port_file) and os.path.getsize(port_file) > 0,
                                   "pps-server's --port-file", 30, srv)
            except harness.Failure as e:
                return ["pps-server did not start: %s" % e]
            port = int(open(port_file).read())
            # The server's log has a "path" line per streaming client once a second.
            p = subprocess.run([client, "127.0.0.1:%d" % port, "--display", "none", "-q",
                                "--duration", "2.5", "--set", "client.name=" + name],
                               capture_output=True, text=True, timeout=60)
            if p.returncode != 0:
                return ["pps-client: exit %d: %s" % (p.returncode, p.stderr)]
        finally:
            srv.send_signal(signal.SIGTERM)
            _, err = srv.communicate(timeout=30)
        if srv.returncode != 0:
            return ["pps-server: exit %d: %s" % (srv.returncode, err)]
        try:
            lines = [json.loads(line) for line in open(log)]
            json.load(open(stats))
        except ValueError as e:
            return ["pps-server --log or --stats-json is not JSON: %s" % e]
        names = [line["name"] for line in lines if line["type"] == "path"]
        if not names:
            return ["pps-server --log: no path line while the client streamed"]
        # The server shows a control character in a peer's name as '?'.
        shown = name.replace("\n", "?")
        if not all(n == shown for n in names):
            return ["pps-server --log: name %r is not %r" % (names[0], shown)]
        return ["%s: %s" % (" ".join(settings) or "defaults", f) for f in check_encoded(lines)]
    return []


def check_encoded(lines):
    """The "encoded" records: one per window in order, frames and layers adding up to the
    same bytes, the first window the stream's first IDR, no more than the encoder made."""
    enc = [line for line in lines if line["type"] == "encoded"]
    summary = [line for line in lines if line["type"] == "summary"]
    if len(enc) < 10:
        return ["pps-server --log: %d encoded lines in a 2.5 s run" % len(enc)]
    ids = [e["window"] for e in enc]
    if ids != sorted(set(ids)):
        return ["pps-server --log: encoded windows not once each in order: %r" % ids[:20]]
    for e in enc:
        if sum(e["frame_bytes"]) != sum(e["layer_bytes"]) or not 0 <= e["idr_bytes"] <= sum(e["layer_bytes"]):
            return ["pps-server --log: encoded bytes do not add up: %r" % e]
    if enc[0]["window"] != 0 or enc[0]["first_frame"] != 0 or enc[0]["idr_bytes"] <= 0:
        return ["pps-server --log: the first encoded window is not the first IDR: %r" % enc[0]]
    if summary:
        made = summary[-1]["layer_bytes"]
        logged = [sum(e["layer_bytes"][q] for e in enc) for q in range(len(made))]
        if any(lg > m for lg, m in zip(logged, made)):
            return ["pps-server --log: encoded lines %r beyond the encoder's layer_bytes %r" % (logged, made)]
    return []


def check_install(meson, build, prefix, bindir, sysconfdir, mandir, unitdir, docdir, man):
    failures = []
    source = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

    def under(root, directory, *names):
        return os.path.join(root + os.path.join(prefix, directory), *names)

    with tempfile.TemporaryDirectory() as root:
        p = subprocess.run([meson, "install", "-C", build, "--no-rebuild", "--quiet",
                            "--destdir", root], capture_output=True, text=True, timeout=120)
        if p.returncode != 0:
            return ["meson install: exit %d: %s%s" % (p.returncode, p.stdout, p.stderr)]
        for name in ("pps-server", "pps-client", "pps-relay", "pps-call", "pps-linkem", "pps-mice",
                     "pps-probe", "pps-swarm", "pps-netlab"):
            path = under(root, bindir, name)
            if not os.access(path, os.X_OK):
                failures.append("not installed (or not executable): %s" % path)
        for name in ("server.ini", "client.ini"):
            path = under(root, sysconfdir, "ppstream", name)
            if not os.path.exists(path):
                failures.append("not installed: %s" % path)
            elif open(path).read() != open(os.path.join(source, "config", name)).read():
                failures.append("%s differs from config/%s" % (path, name))
        # The docs, laid out as in the tree (their links and the man pages' SEE ALSO hold).
        for name in ("README.md", os.path.join("docs", "CONFIGURATION.md"),
                     os.path.join("docs", "RUNNING.md"), os.path.join("wire", "PROTOCOL.md")):
            if not os.path.exists(under(root, docdir, name)):
                failures.append("not installed: %s" % under(root, docdir, name))
        unit = under(root, unitdir, "pps-server.service")
        want = "ExecStart=%s --config %s\n" % (os.path.join(prefix, bindir, "pps-server"),
                                               os.path.join(prefix, sysconfdir, "ppstream",
                                                            "server.ini"))
        if not os.path.exists(unit):
            failures.append("not installed: %s" % unit)
        else:
            text = open(unit).read()
            if want not in text:
                failures.append("%s: no line %r" % (unit, want))
            for setting in ("DynamicUser=yes", "NoNewPrivileges=yes", "ProtectSystem=strict"):
                if setting + "\n" not in text:
                    failures.append("%s: no %s" % (unit, setting))
            if "@bindir@" in text or "@sysconfdir@" in text:
                failures.append("%s: a placeholder left" % unit)
            analyze = shutil.which("systemd-analyze")
            if analyze and want in text:
                # Its syntax and settings, with ExecStart at the files under the destdir.
                copy = os.path.join(root, "pps-server.service")
                with open(copy, "w") as f:
                    f.write(text.replace(want, "ExecStart=%s --config %s\n" % (
                        under(root, bindir, "pps-server"),
                        under(root, sysconfdir, "ppstream", "server.ini"))))
                p = subprocess.run([analyze, "verify", "--man=no", copy], capture_output=True,
                                   text=True, timeout=60)
                if p.returncode != 0 or p.stderr.strip():
                    failures.append("systemd-analyze verify %s: exit %d: %s" %
                                    (unit, p.returncode, p.stderr.strip()))
        if man == "1":
            for name in ("pps-server", "pps-client", "pps-relay", "pps-call", "pps-linkem",
                         "pps-mice", "pps-probe", "pps-swarm", "pps-netlab"):
                path = under(root, mandir, "man1", name + ".1")
                if not os.path.exists(path):
                    failures.append("no man page: %s" % path)
                    continue
                page = open(path).read()
                if ".TH " not in page or ".SH DESCRIPTION" not in page:
                    failures.append("%s: not a help2man page" % path)
                if os.path.join(prefix, docdir) not in page:
                    failures.append("%s: does not name the installed docs (%s)" %
                                    (path, os.path.join(prefix, docdir)))
            server_page = under(root, mandir, "man1", "pps-server.1")
            if os.path.exists(server_page) and (
                    ".SH SETTINGS" not in open(server_page).read()
                    or "server.listen" not in open(server_page).read()):
                failures.append("%s: no SETTINGS section with server.listen" % server_page)
        else:
            print("help2man not found at configure time: man pages not checked")
    return failures


def main(argv):
    if len(argv) >= 3 and argv[1] == "help":
        failures, paths = check_help(argv[2], argv[3:]), argv[3:]
    elif len(argv) == 3 and argv[1] == "json":
        failures, paths = check_json(argv[2]), argv[2:]
    elif len(argv) == 4 and argv[1] == "json-server":
        failures, paths = check_json_server(argv[2], argv[3]), argv[2:]
    elif len(argv) == 11 and argv[1] == "install":
        failures, paths = check_install(*argv[2:]), [argv[3]]
    elif len(argv) >= 2 and argv[1] == "usage":
        failures, paths = check_usage(argv[2:]), argv[2:]
    else:
        print(__doc__, file=sys.stderr)
        return 2
    for f in failures:
        print("FAIL " + f)
    print("%d programs checked, %d failures" % (len(paths), len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
