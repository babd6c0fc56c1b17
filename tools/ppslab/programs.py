# SPDX-License-Identifier: MIT
"""ppstream's programs as the lab runs them: where a build keeps them, the
one place that builds a pps-server / pps-client command line, and starting
one (on loopback or on a side of a lab) with its output in files and, for
the server, its port read from its --port-file once it listens.

    build = Build("build")
    server = Server(build.server, "127.0.0.1", workdir, sets={"source.pattern": "smpte"})
    client = Client(build.client, server.address, workdir, duration_s=10)
    client.wait(30); server.stop()

In a lab, pass lab= and side=: the program runs through `pps-netlab exec`
and the lab's `down` stops it too.
"""
import contextlib
import functools
import json
import os
import re
import select
import signal
import subprocess
import time

from . import process
from .errors import Failure, UsageError

# The build a tool runs by default: the one it was copied into (the package
# sits in BUILD/tools/ppslab), or the source tree's root when run from there.
DEFAULT_BUILD = os.path.realpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
SERVER_READY_TIMEOUT_S = 20.0


class Build:
    """The programs of one meson build directory; any of them may be given
    elsewhere (@overrides: server=, client=, netlab=, ...)."""

    PROGRAMS = {
        "server": ("server", "pps-server"),
        "relay": ("server", "pps-relay"),
        "call": ("call", "pps-call"),
        "client": ("client", "pps-client"),
        "netlab": ("tools", "pps-netlab"),
        "config_doc": ("tools", "pps-config-doc"),
        "peer_send": ("tools", "peers", "pps-peer-send"),
        "peer_recv": ("tools", "peers", "pps-peer-recv"),
        "peer_score": ("tools", "peers", "pps-peer-score"),
        "protolat": ("tools", "protolat", "pps-protolat"),
        "connect_flood": ("tools", "traffic", "pps-connect-flood"),
        "swarm": ("tools", "swarm", "pps-swarm"),
    }

    def __init__(self, path=None, **overrides):
        self.path = os.path.abspath(path or DEFAULT_BUILD)
        given_names = set(overrides)
        for name, parts in self.PROGRAMS.items():
            given = overrides.pop(name, None)
            setattr(self, name, os.path.abspath(given) if given else os.path.join(self.path, *parts))
        if overrides:
            raise TypeError(f"Build: unknown programs {', '.join(overrides)}")
        if "config_doc" not in given_names and not self.has("config_doc"):
            # Builds from before the settings moved to the programs kept it in config/.
            self.config_doc = os.path.join(self.path, "config", "pps-config-doc")
        self.gst_plugins = os.path.join(self.path, "gst")

    def has(self, name):
        path = getattr(self, name)
        return os.access(path, os.X_OK) and not os.path.isdir(path)

    def require(self, *names):
        """UsageError naming the first of @names that is not built."""
        for name in names:
            if not self.has(name):
                raise UsageError(f"missing {getattr(self, name)} (build first, or name the build or program)")
        return self

    def version(self):
        """Its pps-server's --version ("0.1.0"): the build's own version header,
        which a build from an unpacked release (no git) has too."""
        return program_version(self.server)

    def gst_env(self, env=None):
        """The environment that makes GStreamer find this build's ppssink and
        ppssrc, with a registry of its own (the shared one would be rewritten
        by every run with another GST_PLUGIN_PATH)."""
        return dict(env or os.environ, GST_PLUGIN_PATH=self.gst_plugins,
                    GST_REGISTRY=os.path.join(self.gst_plugins, "registry.bin"))


_choices = {}


def config_choices(build, program, section, key):
    """An enum key's names, in the program's order, as its own key table spells
    them (printed by `pps-config-doc <program>` as "(one of a, b, ...)"), so
    that no copy lives here."""
    doc = build.config_doc
    if (doc, program, section, key) not in _choices:
        try:
            text = subprocess.run([doc, program], check=True, capture_output=True, text=True).stdout
        except (OSError, subprocess.CalledProcessError) as error:
            raise UsageError(f"{doc} {program}: {error} (build first, or pass --build)") from None
        current, comment, names = None, "", None
        for line in text.splitlines():
            if line.startswith("["):
                current = line.strip("[] ")
            elif line.startswith("#"):
                comment = line
            elif current == section and line.split("=")[0].strip() == key:
                m = re.search(r"\(one of ([^)]*)\)$", comment)
                names = tuple(n.strip() for n in m.group(1).split(",")) if m else None
        if not names:
            raise UsageError(f"{doc} {program}: no [{section}] {key} choices in its output")
        _choices[doc, program, section, key] = names
    return _choices[doc, program, section, key]


@functools.lru_cache(maxsize=None)
def has_option(program, option):
    """Whether @program's --help lists @option (e.g. pps-server's per-second --log)."""
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        r = subprocess.run([program, "--help"], capture_output=True, text=True, timeout=10)
        return re.search(r"^\s*" + re.escape(option) + r"\b", r.stdout + r.stderr, re.M) is not None
    return False


def program_version(path):
    """The version @path's --version prints ("pps-server 0.1.0" -> "0.1.0"); "" if it cannot tell."""
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        words = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=10).stdout.split()
        return words[-1] if len(words) == 2 else ""
    return ""


def tree_version():
    """`git describe --always --dirty` of the tree this package sits in ("" outside git)."""
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        return subprocess.run(["git", "-C", os.path.dirname(os.path.abspath(__file__)), "describe", "--always", "--dirty"],
                              capture_output=True, text=True, timeout=10).stdout.strip()
    return ""


# ---------------------------------------------------------------- command lines


def _set_args(sets):
    """--set SECTION.KEY=VALUE for a mapping or for "KEY=VALUE" strings."""
    items = sets.items() if hasattr(sets, "items") else (s.split("=", 1) for s in sets)
    out = []
    for key, value in items:
        out += ["--set", f"{key}={value}"]
    return out


def server_argv(server, listen, port_file=None, duration_s=None, stats_json=None, log=None, quiet=True,
                sets=(), extra=(), publish=None):
    """pps-server's command line: listen on @listen (HOST:PORT, PORT 0 for
    the kernel's choice, written to @port_file), or push the stream to a
    relay as @publish (HOST:PORT/NAME) instead, end after @duration_s,
    counters to @stats_json at exit, per-second events to @log, one --set per
    item of @sets (a mapping or "KEY=VALUE" strings), then @extra. pps-relay
    takes the same command line without @stats_json, @log and @publish."""
    argv = [server] + (["--publish", publish] if publish else ["--listen", listen])
    if port_file:
        argv += ["--port-file", port_file]
    if quiet:
        argv.append("--quiet")
    if duration_s is not None:
        argv += ["--duration", "%g" % duration_s]
    if stats_json:
        argv += ["--stats-json", stats_json]
    if log:
        argv += ["--log", log]
    return argv + _set_args(sets) + [str(a) for a in extra]


def client_argv(client, address, log=None, duration_s=None, output=None, policy=None, tolerance_ms=None,
                quiet=True, display="none", sets=(), extra=()):
    """pps-client's command line: stream from @address (HOST:PORT) for
    @duration_s, the JSON Lines log to @log, the pictures shown to @output
    (y4m), playout @policy with @tolerance_ms, no window unless @display."""
    argv = [client, address, "--display", display]
    if quiet:
        argv.append("--quiet")
    if duration_s is not None:
        argv += ["--duration", "%g" % duration_s]
    if log:
        argv += ["--log", log]
    if policy:
        argv += ["--policy", policy]
    if output:
        argv += ["--output", output]
    if tolerance_ms:
        argv += ["--tolerance", str(tolerance_ms)]
    return argv + _set_args(sets) + [str(a) for a in extra]


# ---------------------------------------------------------------- the server's port


def open_port_fifo(path):
    """A FIFO for `pps-server --port-file`: the server writes its bound port
    there once it listens, so a driver waits for that event, not for time."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    os.mkfifo(path, 0o600)
    return os.open(path, os.O_RDONLY | os.O_NONBLOCK)


def read_port(fifo_fd, proc, timeout_s):
    """The port the server wrote to the FIFO; Failure if it exits first or
    says nothing within @timeout_s."""
    deadline = time.monotonic() + timeout_s
    try:
        pidfd = os.pidfd_open(proc.pid)
    except ProcessLookupError:
        raise Failure("the server exited before listening") from None
    data = b""
    try:
        while time.monotonic() < deadline:
            readable, _, _ = select.select([fifo_fd, pidfd], [], [], max(0.0, deadline - time.monotonic()))
            if fifo_fd in readable:
                chunk = os.read(fifo_fd, 64)
                data += chunk
                if b"\n" in data or not chunk:
                    break
            elif pidfd in readable:
                raise Failure("the server exited before listening")
    finally:
        os.close(pidfd)
    text = data.decode(errors="replace").strip()
    if not text.isdigit():
        raise Failure(f"the server did not report a port within {timeout_s:.0f} s")
    return int(text)


LISTENING = re.compile(r"listening on \[?[^\]\s]*\]?:(\d+)")


def port_from_log(path, proc, timeout_s, pattern=LISTENING):
    """The port a program announces in its log @path (pps-server's "listening
    on HOST:PORT" line unless @pattern says otherwise: its first group);
    Failure if @proc exits first or says nothing within @timeout_s."""
    def found():
        with contextlib.suppress(OSError):
            with open(path) as f:
                m = pattern.search(f.read())
            return m and int(m.group(1))
        return None

    return process.wait_until(found, lambda: f"a port in {path}: {process.tail(path, 5)}", timeout_s, proc)


# ---------------------------------------------------------------- running programs


class Program:
    """One program, started on loopback or on @side of @lab (through `pps-netlab
    exec`; the lab stops it at `down`), stdin closed, @stdout and @stderr to
    files (paths) or discarded. `exited(timeout_s)` and `stop()` keep its
    resource usage (wait4) and the wall-clock times it ran."""

    def __init__(self, argv, lab=None, side=None, stdout=None, stderr=None, env=None, new_session=None):
        self.argv = [str(a) for a in argv]
        self.stdout_path = stdout if isinstance(stdout, str) else None
        self.stderr_path = stderr if isinstance(stderr, str) else None
        self.lab, self.side = lab, side
        self.stdout = self.stderr = ""  # its output, once wait() saw it exit
        self.rusage = None
        self.start_unix = time.time()
        self.end_unix = None
        full = lab.exec_argv(side, self.argv) if lab else self.argv
        self.proc = process.popen(full, stdout=stdout, stderr=stderr, env=env,
                                  start_new_session=lab is not None if new_session is None else new_session)
        if lab:
            lab.track(self.proc)

    @property
    def returncode(self):
        return self.proc.returncode

    def _ended(self, usage):
        if usage is not None and self.end_unix is None:
            self.rusage, self.end_unix = usage, time.time()
        return usage is not None

    def exited(self, timeout_s):
        """True once the program has exited (waiting @timeout_s at most)."""
        return self._ended(process.reap(self.proc, timeout_s))

    def wait(self, timeout=None):
        """Its exit status once it exits, as Popen.wait (subprocess.TimeoutExpired
        after @timeout s); then .stdout and .stderr hold what it wrote."""
        if timeout is None:
            self.proc.wait()
            self._ended(process.NO_USAGE)
        elif not self.exited(timeout):
            raise subprocess.TimeoutExpired(self.argv, timeout)
        self.stdout, self.stderr = self.output()
        return self.proc.returncode

    def stop(self, sig=signal.SIGTERM, timeout_s=process.STOP_TIMEOUT_S):
        """@sig, a bounded wait, SIGKILL; its exit status."""
        self._ended(process.stop(self.proc, timeout_s, sig))
        return self.proc.returncode

    def stderr_text(self):
        """What it wrote to its stderr file so far."""
        return self.output()[1]

    def output(self):
        """(stdout, stderr) so far, from their files ("" for one not kept)."""
        texts = []
        for path in (self.stdout_path, self.stderr_path):
            text = ""
            with contextlib.suppress(OSError, TypeError):
                with open(path) as f:
                    text = f.read()
            texts.append(text)
        return tuple(texts)


class Server(Program):
    """A pps-server (or pps-relay) listening on @host (port @port, 0 for the
    kernel's choice); returns once it listens, with .port and .address. The port
    comes through a FIFO given as --port-file: the wait is on that event.
    @tag names its files in @workdir (TAG.err unless @stderr says)."""

    def __init__(self, server, host, workdir, lab=None, side="snd", port=0, tag="server", duration_s=None,
                 stats_json=None, log=None, sets=(), extra=(), quiet=True, env=None, stderr=None,
                 ready_timeout_s=SERVER_READY_TIMEOUT_S, new_session=None):
        self.stats_path = stats_json
        self.log_path = log
        fifo = os.path.join(workdir, "%s-port-%d.fifo" % (tag, time.monotonic_ns()))
        fd = open_port_fifo(fifo)
        try:
            super().__init__(server_argv(server, f"{host}:{port}", fifo, duration_s, stats_json, log, quiet, sets, extra),
                             lab, side, stderr=stderr or os.path.join(workdir, tag + ".err"), env=env,
                             new_session=new_session)
            try:
                self.port = read_port(fd, self.proc, ready_timeout_s)
            except Failure as error:
                self.stop()
                raise Failure(f"{os.path.basename(server)}: {error}: {process.tail(self.stderr_path, 5)}") from None
        finally:
            os.close(fd)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(fifo)
        self.host = host
        self.address = f"{host}:{self.port}"

    def stop(self, sig=signal.SIGTERM, timeout_s=15.0):
        """@sig, a bounded wait (a sanitizer's leak check takes its time), SIGKILL; its exit status."""
        return super().stop(sig, timeout_s)

    def log(self):
        """Its stderr so far."""
        return self.stderr_text()

    def wait_for_log(self, text, timeout_s=20.0):
        """Waits until the server's stderr holds @text (the event: "joined", ...)."""
        process.wait_until(lambda: text in self.log(),
                           lambda: "the server to log %r:\n%s" % (text, self.log()[-2000:]),
                           timeout_s=timeout_s, proc=self.proc)

    def stats(self):
        """Its --stats-json (written at exit)."""
        with open(self.stats_path) as f:
            return json.load(f)

    def rss_kib(self):
        with open("/proc/%d/status" % self.proc.pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0


class Client(Program):
    """A pps-client of @address with a JSON Lines log (@log), its output in
    files; `events()` and `summary()` read the log."""

    def __init__(self, client, address, log, lab=None, side="rcv", duration_s=None, output=None, policy=None,
                 tolerance_ms=None, quiet=True, sets=(), extra=(), stdout=None, stderr=None, env=None,
                 new_session=None):
        self.log_path = log
        self.address = address
        super().__init__(client_argv(client, address, log, duration_s, output, policy, tolerance_ms, quiet,
                                     sets=sets, extra=extra),
                         lab, side, stdout=stdout, stderr=stderr, env=env, new_session=new_session)

    def events(self, kind=None):
        """The log's events (of type @kind)."""
        out = []
        with open(self.log_path) as f:
            for line in f:
                e = json.loads(line)
                if kind is None or e["type"] == kind:
                    out.append(e)
        return out

    def summary(self):
        """The client's one `summary` event; Failure if there is not exactly one."""
        s = self.events("summary")
        if len(s) != 1:
            raise Failure("expected one summary event, got %d" % len(s))
        return s[0]

    def wait_for_stderr(self, text, timeout_s=20.0):
        """Waits until the client's stderr holds @text (the event)."""
        process.wait_until(lambda: text in self.output()[1],
                           lambda: "the client to say %r:\n%s" % (text, self.output()[1][-2000:]),
                           timeout_s=timeout_s, proc=self.proc)

    def has_summary(self):
        """Whether the log ends with the client's summary (it ran to its end)."""
        with contextlib.suppress(OSError):
            with open(self.log_path, "rb") as f:
                f.seek(max(0, os.path.getsize(self.log_path) - 4096))
                return b'"type":"summary"' in f.read()
        return False


# ---------------------------------------------------------------- on loopback


class LoopbackServer(Server):
    """A pps-server on 127.0.0.1 and a port of the kernel's choosing (or
    @port: a restarted server where the last one was), as the tests and the
    loopback tools run it: a status line a second on its stderr (log()), its
    counters to a file (stats()), one --set per item of @settings
    ("KEY=VALUE"). @build: a Build or its directory."""

    def __init__(self, build, workdir, *settings, duration_s=None, extra=(), port=0):
        build = build if isinstance(build, Build) else Build(build)
        ns = time.monotonic_ns()
        super().__init__(build.server, "127.0.0.1", workdir, port=port, tag="server-%d" % ns,
                         duration_s=duration_s,
                         stats_json=os.path.join(workdir, "server-stats-%d.json" % ns), quiet=False,
                         sets=["server.status_interval_s=1"] + list(settings), extra=extra, new_session=False)


class LoopbackClient(Client):
    """A headless pps-client named @name with a JSON Lines log and its output
    in files (NAME-N.jsonl, .out, .err in @workdir). @build: a Build or its directory."""

    def __init__(self, build, workdir, address, *settings, duration_s=10, name="client", extra=()):
        build = build if isinstance(build, Build) else Build(build)
        log = os.path.join(workdir, "%s-%d.jsonl" % (name, time.monotonic_ns()))
        stem = log[:-len(".jsonl")]
        super().__init__(build.client, address, log, duration_s=duration_s, quiet=False,
                         sets=["client.name=" + name] + list(settings), extra=extra, stdout=stem + ".out",
                         stderr=stem + ".err", new_session=False)


def make_cert(workdir, name="server", san="IP:127.0.0.1,DNS:localhost"):
    """A self-signed EC certificate for 127.0.0.1 and localhost (openssl(1)): (cert, key)."""
    cert = os.path.join(workdir, name + "-cert.pem")
    key = os.path.join(workdir, name + "-key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:P-256", "-nodes", "-keyout", key, "-out", cert,
                    "-days", "1", "-subj", "/CN=localhost", "-addext",
                    "subjectAltName=" + san], check=True, capture_output=True)
    return cert, key
