/* SPDX-License-Identifier: MIT */
/*
 * pps-swarm: many light viewers of one named stream, for scale tests of
 * pps-relay (or of a pps-server).
 *
 * Each viewer is one TCP connection that speaks the wire protocol
 * (wire/PROTOCOL.md) as a client does: HELLO with the stream flag and the
 * stream's name (no audio flag, so no audio comes), CHALLENGE/AUTH with
 * --token, then it reads STREAM_INFO and the windows with the project's
 * parser and keeps only counters: nothing is reassembled or decoded, and no
 * CLOCK_PING is sent (the sender's capture times and this program's clock are
 * the same CLOCK_REALTIME: the lab's namespaces share it).
 *
 * One thread, one epoll. Connections are opened in a ramp: at most
 * --connect-rate a second, and at most --max-pending between connect() and
 * their STREAM_INFO at once (a relay bounds the handshakes it holds; more
 * would be refused as server-full). A read takes at most 64 KiB from one
 * connection, so a busy one cannot starve the others (the epoll is level
 * triggered: the rest is read on the next turn). The only timers are the
 * ramp's next connect, the status line, the handshake timeouts and the end.
 *
 * What is measured, per window whose first_capture_us lies in the measure
 * span [--measure-from, --measure-until] (capture times, CLOCK_REALTIME):
 * its latency, the time its WINDOW_END arrived here minus first_capture_us,
 * into one fixed histogram merged over all viewers (no per-window storage);
 * and whether it came whole (adus_dropped 0, not flagged dropped). Windows
 * the sender dropped without a WINDOW_BEGIN (a lone WINDOW_END, or a gap in
 * the window ids: windows it discarded) have no capture time on the wire:
 * theirs is estimated from the viewer's last WINDOW_BEGIN and the window's
 * duration (window_frames / fps); they count as dropped and add no latency.
 * A window whose WINDOW_END had not come when the run ends is not counted.
 *
 * The report is one JSON object, written atomically (a temporary file, then
 * rename) to --out or printed on stdout; usage() says what each key means.
 */
#include "pps-socket.h"
#include "pps-time.h"
#include "pps-version.h"
#include "pps-wire.h"

#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <json-glib/json-glib.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#define PROGRAM "pps-swarm"

#define PPS_DEFAULT_SWARM_VIEWERS      100
#define PPS_SWARM_MAX_VIEWERS          60000
#define PPS_DEFAULT_SWARM_CONNECT_RATE 500.0
#define PPS_DEFAULT_SWARM_MAX_PENDING  64
#define PPS_DEFAULT_SWARM_DURATION_S   30.0
#define PPS_DEFAULT_SWARM_STATUS_S     5.0
#define PPS_DEFAULT_SWARM_NAME         "swarm"
/* From connect() to STREAM_INFO at most this long, else the viewer is given up
 * (a SYN a full backlog drops would otherwise be retried for minutes). */
#define PPS_SWARM_HANDSHAKE_TIMEOUT_US 10000000LL
/* The default measure span starts this long after the ramp's end... */
#define PPS_SWARM_SETTLE_US 2000000LL
/* ...and ends this long before the run's. */
#define PPS_SWARM_TAIL_US 1000000LL
/* One read from one connection takes at most this much. */
#define PPS_SWARM_READ_BYTES 65536
/* Descriptors kept for other uses than the viewers' sockets. */
#define PPS_SWARM_SPARE_FDS 32

/* The latency histogram: 0.1 ms buckets below 2 s, 1 ms buckets to 20 s, then
 * one overflow count. */
#define HIST_FINE_US       100
#define HIST_FINE_END_US   2000000
#define HIST_COARSE_US     1000
#define HIST_COARSE_END_US 20000000
#define HIST_FINE_BUCKETS  (HIST_FINE_END_US / HIST_FINE_US)
#define HIST_BUCKETS       (HIST_FINE_BUCKETS + (HIST_COARSE_END_US - HIST_FINE_END_US) / HIST_COARSE_US)

typedef struct {
	uint64_t bucket[HIST_BUCKETS];
	uint64_t overflow;
	uint64_t total;
	int64_t max_us;
	int64_t min_us;
} histogram_t;

typedef enum {
	VIEWER_IDLE = 0,   /* not opened yet */
	VIEWER_CONNECTING, /* connect() in progress */
	VIEWER_HANDSHAKE,  /* HELLO sent, STREAM_INFO not in yet */
	VIEWER_STREAMING,  /* STREAM_INFO in */
	VIEWER_CLOSED,     /* ended (any reason) */
} viewer_state_t;

typedef struct {
	int fd;
	uint8_t state; /* viewer_state_t */
	bool in_window;
	bool have_last; /* last_id holds a window id */
	bool have_ref;  /* ref_id/ref_capture_us hold a WINDOW_BEGIN's */
	bool any_bad;   /* a counted window was not whole */
	bool challenged;
	bool at_end; /* still streaming when the run ended */
	pps_wire_parser_t *parser;
	int64_t opened_us;      /* monotonic, at connect() */
	int64_t stream_info_us; /* realtime, at STREAM_INFO (0: none) */
	int64_t ended_us;       /* realtime, when it was closed (0: open) */
	int64_t window_us;      /* one window's duration, from STREAM_INFO */
	uint32_t last_id;       /* the last window id begun or ended */
	uint32_t cur_id;        /* the open window's */
	int64_t cur_capture_us;
	uint32_t ref_id;
	int64_t ref_capture_us;
	uint32_t counted;    /* windows counted for this viewer */
	uint64_t span_bytes; /* bytes read while the measure span was on */
} viewer_t;

typedef struct {
	/* settings */
	const char *target;
	char address[300];
	char stream[PPS_WIRE_MAX_STREAM_BYTES + 1];
	unsigned viewers;
	const char *bind_address;
	double connect_rate;
	unsigned max_pending;
	double duration_s;
	int64_t measure_from_us; /* 0: default */
	int64_t measure_until_us;
	const char *out_path;
	const char *name;
	const char *token;
	double status_s;

	struct sockaddr_storage dst;
	socklen_t dst_len;
	struct sockaddr_in src;

	viewer_t *v;
	int epfd;

	/* times: monotonic for the timers, realtime for the windows */
	int64_t start_mono_us, start_real_us, end_mono_us;
	int64_t ramp_end_real_us;  /* 0 until the ramp is over */
	int64_t from_us, until_us; /* the measure span in force (from 0: not known yet) */
	double next_connect_mono_us;
	int64_t next_status_mono_us;
	int64_t next_sweep_mono_us;

	/* progress */
	unsigned opened, pending, streaming;
	unsigned connected, got_stream_info, closed, refused_n, connect_failed;
	uint64_t window_ends; /* every WINDOW_END read, for windows/s */
	uint64_t window_ends_at_status;

	/* the stream's figures, from the first STREAM_INFO (every viewer of
	 * one stream gets the same) */
	bool have_info;
	pps_wire_stream_info_t info;

	/* what ended connections, by reason */
	GHashTable *closed_early, *refused, *connect_errors;

	/* windows counted */
	uint64_t w_counted, w_whole, w_with_drops, w_dropped, w_gaps;
	uint64_t bytes, payload_bytes;
	histogram_t hist;   /* counted windows */
	histogram_t recent; /* every window since the last status line */
} swarm_t;

static volatile sig_atomic_t stop_requested;

static void
stop_handler(int signal_number)
{
	(void)signal_number;
	stop_requested = 1;
}

static void
usage(FILE *out)
{
	fprintf(
	    out,
	    "Usage: " PROGRAM " [OPTION]... HOST:PORT/NAME\n"
	    "Many light viewers of one stream of a pps-relay (or pps-server), for scale tests:\n"
	    "each is one connection that speaks the wire protocol (HELLO with the stream's\n"
	    "name, no audio) and counts what it reads, without decoding. One thread, one\n"
	    "epoll. Writes a JSON report at the end.\n"
	    "\n"
	    "  --viewers N            connections, one viewer each (default %d, 1..%d)\n"
	    "  --bind ADDR            source IPv4 address of every connection\n"
	    "  --connect-rate R       new connections per second during the ramp (default %.0f)\n"
	    "  --max-pending P        connections between connect() and STREAM_INFO at once\n"
	    "                         (default %d; a relay holds 64 handshakes at once)\n"
	    "  --duration S           run S seconds from the start, then send BYE on every\n"
	    "                         connection, close it and write the report (default %.0f)\n"
	    "  --measure-from US      count only windows whose first_capture_us (CLOCK_REALTIME,\n"
	    "                         microseconds since 1970) is >= US (default: when the ramp\n"
	    "                         ended, its last viewer admitted or refused, plus 2 s)\n"
	    "  --measure-until US     and <= US (default: the run's end minus 1 s)\n"
	    "  --out FILE             write the report to FILE (atomically), else on stdout\n"
	    "  --name PREFIX          viewers' names in HELLO: PREFIX-K (default %s)\n"
	    "  --token TOKEN          the server's access token (challenge and AUTH)\n"
	    "  --status-interval S    a status line on stderr every S seconds (default %.0f;\n"
	    "                         0: none): connected, streaming, closed, refused, pending,\n"
	    "                         WINDOW_ENDs per second, p99 latency of the windows\n"
	    "                         ended since the last line (counted or not) and of the\n"
	    "                         windows counted so far\n"
	    "  -h, --help             this help\n"
	    "  -V, --version          the version\n"
	    "\n"
	    "A viewer not streaming %lld s after its connect() is given up (closed_early\n"
	    "\"handshake-timeout\", or connect_errors \"timeout\" before the TCP handshake).\n"
	    "The soft RLIMIT_NOFILE is raised to the hard limit; more viewers than it allows\n"
	    "is an error.\n"
	    "\n",
	    PPS_DEFAULT_SWARM_VIEWERS, PPS_SWARM_MAX_VIEWERS, PPS_DEFAULT_SWARM_CONNECT_RATE,
	    PPS_DEFAULT_SWARM_MAX_PENDING, PPS_DEFAULT_SWARM_DURATION_S, PPS_DEFAULT_SWARM_NAME,
	    PPS_DEFAULT_SWARM_STATUS_S, PPS_SWARM_HANDSHAKE_TIMEOUT_US / 1000000);
	fputs("The report's keys:\n"
	      "  target, viewers, name       the command line's\n"
	      "  connected                   viewers whose TCP connect succeeded\n"
	      "  got_stream_info             viewers that got STREAM_INFO (admitted)\n"
	      "  streaming_at_end            viewers still streaming when the run ended\n"
	      "  pending_at_end              viewers between connect() and STREAM_INFO then\n"
	      "  not_started                 viewers the ramp had not opened by the end\n"
	      "  closed_early {reason: n}    admitted or handshaking viewers that ended before\n"
	      "                              the end: eof, eof-before-stream-info (closed\n"
	      "                              without a BYE), read-ERRNO, send-ERRNO,\n"
	      "                              bye-REASON (a BYE after STREAM_INFO),\n"
	      "                              protocol-version|kind|too-long|short|trailing|field\n"
	      "                              (the wire parser's refusals), protocol-order\n"
	      "                              (records out of order), handshake-timeout\n"
	      "  refused {bye reason: n}     viewers sent BYE before STREAM_INFO (no-stream,\n"
	      "                              server-full, unauthorized, ...)\n"
	      "  connect_errors {ERRNO: n}   viewers whose socket()/connect() failed (timeout:\n"
	      "                              no TCP handshake within the handshake timeout)\n"
	      "  ramp_s                      start to the ramp's end (every viewer opened and\n"
	      "                              none pending); null if it did not end\n"
	      "  measure_from_us, measure_until_us  the measure span in force (capture times)\n"
	      "  latency_budget_ms, window_frames, fps  the first STREAM_INFO's\n"
	      "  windows.counted             windows in the span, over all viewers\n"
	      "  windows.whole               of them: adus_dropped 0 and not flagged dropped\n"
	      "  windows.with_drops          begun, some ADUs dropped\n"
	      "  windows.dropped             flagged dropped (lone or begun) or a gap in ids\n"
	      "  windows.gaps                of the dropped: missing ids (discarded windows)\n"
	      "  viewers_full                viewers streaming from before the span's start to\n"
	      "                              past its end, with >= 1 counted window, all whole\n"
	      "  viewers_partial             the other viewers that got STREAM_INFO\n"
	      "  viewers_with_drops          viewers with a counted window not whole\n"
	      "  window_latency_ms           p50/p95/p99/p999 (the upper edge of the histogram\n"
	      "                              bucket: 0.1 ms below 2 s, 1 ms to 20 s), min, max\n"
	      "                              (exact), over counted windows that had a\n"
	      "                              WINDOW_BEGIN: WINDOW_END's arrival here minus\n"
	      "                              first_capture_us; over_20s: beyond the histogram\n"
	      "  per_viewer_kbps             min/p50/max of the bytes each viewer read while the\n"
	      "                              span was on (arrival time in it), over the span's\n"
	      "                              length, of viewers streaming through the whole span\n"
	      "  bytes, payload_bytes        every byte read; ADU fragment payload bytes\n"
	      "  cpu_s {user, sys}, maxrss_kb  this process's (getrusage)\n"
	      "  run_s                       start to end, seconds\n"
	      "\n"
	      "Exit status: 0 done (whatever the viewers saw); 1 runtime error; 2 usage error.\n",
	      out);
}

static void __attribute__((noreturn))
die_usage(const char *option, const char *value, const char *expected)
{
	fprintf(stderr, PROGRAM ": %s: '%s' is not %s (see --help)\n", option, value ? value : "",
	        expected);
	exit(2);
}

static double
parse_number(const char *option, const char *value, double low, double high, const char *expected)
{
	char *end = NULL;
	double x;

	errno = 0;
	x = strtod(value, &end);
	if (errno || end == value || *end || !isfinite(x) || x < low || x > high)
		die_usage(option, value, expected);
	return x;
}

static int64_t
parse_unix_us(const char *option, const char *value)
{
	char *end = NULL;
	long long x;

	errno = 0;
	x = strtoll(value, &end, 10);
	if (errno || end == value || *end || x <= 0)
		die_usage(option, value, "microseconds since 1970 (a positive integer)");
	return (int64_t)x;
}

static void
settings_parse(swarm_t *s, int argc, char **argv)
{
	static const struct option options[] = {
	    {"viewers", required_argument, NULL, 'n'},
	    {"bind", required_argument, NULL, 'b'},
	    {"connect-rate", required_argument, NULL, 'r'},
	    {"max-pending", required_argument, NULL, 'p'},
	    {"duration", required_argument, NULL, 'd'},
	    {"measure-from", required_argument, NULL, 'f'},
	    {"measure-until", required_argument, NULL, 'u'},
	    {"out", required_argument, NULL, 'o'},
	    {"name", required_argument, NULL, 'N'},
	    {"token", required_argument, NULL, 't'},
	    {"status-interval", required_argument, NULL, 's'},
	    {"help", no_argument, NULL, 'h'},
	    {"version", no_argument, NULL, 'V'},
	    {0},
	};
	char err[200], host[256], port[16];
	int opt;

	s->viewers = PPS_DEFAULT_SWARM_VIEWERS;
	s->connect_rate = PPS_DEFAULT_SWARM_CONNECT_RATE;
	s->max_pending = PPS_DEFAULT_SWARM_MAX_PENDING;
	s->duration_s = PPS_DEFAULT_SWARM_DURATION_S;
	s->name = PPS_DEFAULT_SWARM_NAME;
	s->status_s = PPS_DEFAULT_SWARM_STATUS_S;
	if (pps_cli_help_or_version(argc, argv, PROGRAM, usage))
		exit(0);
	if (pps_cli_refuse_abbreviated(argc, argv, options, PROGRAM))
		exit(2);
	opterr = 0;
	while ((opt = getopt_long(argc, argv, ":hV", options, NULL)) != -1) {
		switch (opt) {
		case 'n':
			s->viewers = (unsigned)parse_number(
			    "--viewers", optarg, 1, PPS_SWARM_MAX_VIEWERS, "a count 1..60000");
			if ((double)s->viewers != strtod(optarg, NULL))
				die_usage("--viewers", optarg, "a whole number");
			break;
		case 'b':
			s->bind_address = optarg;
			s->src.sin_family = AF_INET;
			if (inet_pton(AF_INET, optarg, &s->src.sin_addr) != 1)
				die_usage("--bind", optarg, "an IPv4 address");
			break;
		case 'r':
			s->connect_rate = parse_number("--connect-rate", optarg, 0.1, 1e6,
			                               "a rate 0.1..1000000 per second");
			break;
		case 'p':
			s->max_pending = (unsigned)parse_number("--max-pending", optarg, 1, 60000,
			                                        "a count 1..60000");
			break;
		case 'd':
			s->duration_s = parse_number("--duration", optarg, 1, 86400,
			                             "a number of seconds 1..86400");
			break;
		case 'f':
			s->measure_from_us = parse_unix_us("--measure-from", optarg);
			break;
		case 'u':
			s->measure_until_us = parse_unix_us("--measure-until", optarg);
			break;
		case 'o':
			s->out_path = optarg;
			break;
		case 'N':
			/* PREFIX-K must fit HELLO's 64-byte name. */
			if (!optarg[0] || strlen(optarg) > PPS_WIRE_MAX_NAME_BYTES - 6)
				die_usage("--name", optarg, "1..58 characters");
			s->name = optarg;
			break;
		case 't':
			if (!optarg[0])
				die_usage("--token", optarg, "a token");
			s->token = optarg;
			break;
		case 's':
			s->status_s = parse_number("--status-interval", optarg, 0, 86400,
			                           "a number of seconds (0: none)");
			break;
		case ':':
			die_usage(argv[optind - 1], "", "given a value");
		default:
			die_usage("option", argv[optind - 1], "known");
		}
	}
	if (optind != argc - 1) {
		fprintf(stderr, PROGRAM ": one HOST:PORT/NAME is needed (see --help)\n");
		exit(2);
	}
	s->target = argv[optind];
	if (pps_stream_location_split(s->target, s->address, sizeof(s->address), s->stream,
	                              sizeof(s->stream), err, sizeof(err)) < 0)
		die_usage("target", s->target, err);
	if (!s->stream[0])
		die_usage("target", s->target, "HOST:PORT/NAME (a stream name is needed)");
	if (pps_socket_split_address(s->address, host, sizeof(host), port, sizeof(port)) < 0 ||
	    !host[0] || !port[0])
		die_usage("target", s->target, "HOST:PORT/NAME");
	if (s->measure_from_us && s->measure_until_us && s->measure_until_us < s->measure_from_us)
		die_usage("--measure-until", "", "at or after --measure-from");
}

/* Resolves the target once; 0 or -1 (said why). */
static int
resolve_target(swarm_t *s)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
	char host[256], port[16];
	int ret;

	pps_socket_split_address(s->address, host, sizeof(host), port, sizeof(port));
	hints.ai_family = s->bind_address ? AF_INET : AF_UNSPEC;
	ret = getaddrinfo(host, port, &hints, &res);
	if (ret || !res) {
		fprintf(stderr, PROGRAM ": %s: %s\n", s->address, gai_strerror(ret));
		return -1;
	}
	memcpy(&s->dst, res->ai_addr, res->ai_addrlen);
	s->dst_len = res->ai_addrlen;
	freeaddrinfo(res);
	return 0;
}

/* Raises the soft RLIMIT_NOFILE to the hard one; -1 (said why) if the viewers
 * do not fit in it. */
static int
raise_fd_limit(const swarm_t *s)
{
	struct rlimit lim;

	if (getrlimit(RLIMIT_NOFILE, &lim) < 0) {
		perror(PROGRAM ": getrlimit(RLIMIT_NOFILE)");
		return -1;
	}
	if (lim.rlim_cur < lim.rlim_max) {
		lim.rlim_cur = lim.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &lim) < 0)
			perror(PROGRAM ": setrlimit(RLIMIT_NOFILE) to the hard limit");
		getrlimit(RLIMIT_NOFILE, &lim);
	}
	if (lim.rlim_cur != RLIM_INFINITY &&
	    (rlim_t)s->viewers + PPS_SWARM_SPARE_FDS > lim.rlim_cur) {
		fprintf(
		    stderr,
		    PROGRAM ": %u viewers need %u descriptors, and RLIMIT_NOFILE allows %llu "
		            "(its hard limit: raise it, e.g. ulimit -Hn, or run fewer viewers per "
		            "process)\n",
		    s->viewers, s->viewers + PPS_SWARM_SPARE_FDS, (unsigned long long)lim.rlim_cur);
		return -1;
	}
	return 0;
}

/* ---- counting ---------------------------------------------------------- */

static void
count_reason(GHashTable *table, const char *reason)
{
	gpointer old = g_hash_table_lookup(table, reason);

	g_hash_table_insert(table, g_strdup(reason), GUINT_TO_POINTER(GPOINTER_TO_UINT(old) + 1));
}

static const char *
errno_name(int error)
{
	const char *name = strerrorname_np(error);

	return name ? name : "unknown";
}

static void
histogram_add(histogram_t *h, int64_t latency_us)
{
	int64_t x = latency_us < 0 ? 0 : latency_us;

	if (!h->total || latency_us > h->max_us)
		h->max_us = latency_us;
	if (!h->total || latency_us < h->min_us)
		h->min_us = latency_us;
	h->total++;
	if (x < HIST_FINE_END_US)
		h->bucket[x / HIST_FINE_US]++;
	else if (x < HIST_COARSE_END_US)
		h->bucket[HIST_FINE_BUCKETS + (x - HIST_FINE_END_US) / HIST_COARSE_US]++;
	else
		h->overflow++;
}

/* The @q quantile in ms: the upper edge of the bucket it falls in (the exact
 * maximum if it falls past the histogram); -1 if empty. */
static double
histogram_quantile_ms(const histogram_t *h, double q)
{
	uint64_t rank, seen = 0;

	if (!h->total)
		return -1;
	rank = (uint64_t)ceil(q * (double)h->total);
	rank = rank < 1 ? 1 : rank;
	for (unsigned i = 0; i < HIST_BUCKETS; i++) {
		seen += h->bucket[i];
		if (seen >= rank) {
			int64_t edge_us =
			    i < HIST_FINE_BUCKETS
			        ? (int64_t)(i + 1) * HIST_FINE_US
			        : HIST_FINE_END_US +
			              (int64_t)(i - HIST_FINE_BUCKETS + 1) * HIST_COARSE_US;
			/* Never above the largest seen. */
			return (double)(edge_us < h->max_us ? edge_us : h->max_us) / 1000.0;
		}
	}
	return (double)h->max_us / 1000.0;
}

static bool
in_span(const swarm_t *s, int64_t capture_us)
{
	return s->from_us && capture_us >= s->from_us && capture_us <= s->until_us;
}

typedef enum { WIN_WHOLE, WIN_WITH_DROPS, WIN_DROPPED, WIN_GAP } window_fate_t;

/* One window of viewer @v ended (or was seen missing): counted if its capture
 * time is in the span. @latency_us < 0: none (no WINDOW_BEGIN). */
static void
window_account(swarm_t *s, viewer_t *v, int64_t capture_us, window_fate_t fate, int64_t latency_us,
               bool has_latency)
{
	if (has_latency)
		histogram_add(&s->recent, latency_us);
	if (!in_span(s, capture_us))
		return;
	s->w_counted++;
	v->counted++;
	switch (fate) {
	case WIN_WHOLE:
		s->w_whole++;
		break;
	case WIN_WITH_DROPS:
		s->w_with_drops++;
		v->any_bad = true;
		break;
	case WIN_GAP:
		s->w_gaps++;
		/* fall through */
	case WIN_DROPPED:
		s->w_dropped++;
		v->any_bad = true;
		break;
	}
	if (has_latency)
		histogram_add(&s->hist, latency_us);
}

/* Windows last_id+1 .. @next_id-1 never came (the sender discarded them):
 * each a dropped window, its capture time estimated from the last
 * WINDOW_BEGIN seen. */
static void
account_gap(swarm_t *s, viewer_t *v, uint32_t next_id)
{
	if (!v->have_last)
		return;
	for (uint32_t id = v->last_id + 1; id < next_id; id++) {
		if (v->have_ref)
			window_account(s, v,
			               v->ref_capture_us + (int64_t)(id - v->ref_id) * v->window_us,
			               WIN_GAP, 0, false);
		/* Without any WINDOW_BEGIN yet (a viewer that just joined), its
		 * capture time is unknown: not counted. */
	}
}

/* ---- connections ------------------------------------------------------- */

static int
send_record(viewer_t *v, const pps_wire_record_t *record)
{
	uint8_t buf[512];
	size_t len = 0;
	ssize_t sent;
	int ret = pps_wire_encode(record, buf, sizeof(buf), &len);

	if (ret < 0)
		return ret;
	sent = send(v->fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);
	if (sent < 0)
		return -errno;
	/* A fresh socket's send buffer takes a small record whole. */
	return (size_t)sent == len ? 0 : -EIO;
}

static void
viewer_close(swarm_t *s, viewer_t *v)
{
	if (v->state == VIEWER_CONNECTING || v->state == VIEWER_HANDSHAKE)
		s->pending--;
	if (v->state == VIEWER_STREAMING)
		s->streaming--;
	if (v->fd >= 0)
		close(v->fd); /* also leaves the epoll set */
	v->fd = -1;
	v->ended_us = pps_time_realtime_us();
	pps_wire_parser_free(v->parser);
	v->parser = NULL;
	v->state = VIEWER_CLOSED;
}

/* Ends @v early for @reason (closed_early). */
static void
viewer_fail(swarm_t *s, viewer_t *v, const char *reason)
{
	count_reason(s->closed_early, reason);
	s->closed++;
	viewer_close(s, v);
}

static void
viewer_fail_errno(swarm_t *s, viewer_t *v, const char *what, int error)
{
	char reason[64];

	snprintf(reason, sizeof(reason), "%s-%s", what, errno_name(error));
	viewer_fail(s, v, reason);
}

static void
viewer_connect_error(swarm_t *s, viewer_t *v, const char *name)
{
	count_reason(s->connect_errors, name);
	s->connect_failed++;
	viewer_close(s, v);
}

/* Opens viewer @index: a nonblocking connect. */
static void
viewer_open(swarm_t *s, unsigned index)
{
	viewer_t *v = &s->v[index];
	struct epoll_event ev = {.events = EPOLLOUT, .data.u32 = index};
	int one = 1;

	s->opened++;
	s->pending++;
	v->state = VIEWER_CONNECTING;
	v->opened_us = pps_time_monotonic_us();
	v->fd = socket(s->dst.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (v->fd < 0) {
		viewer_connect_error(s, v, errno_name(errno));
		return;
	}
	if (s->bind_address) {
		/* The port is chosen at connect(), by the whole 4-tuple: more of them. */
		setsockopt(v->fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof(one));
		if (bind(v->fd, (struct sockaddr *)&s->src, sizeof(s->src)) < 0) {
			viewer_connect_error(s, v, errno_name(errno));
			return;
		}
	}
	if (connect(v->fd, (struct sockaddr *)&s->dst, s->dst_len) < 0 && errno != EINPROGRESS) {
		viewer_connect_error(s, v, errno_name(errno));
		return;
	}
	if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, v->fd, &ev) < 0)
		viewer_connect_error(s, v, errno_name(errno));
}

static void
viewer_connected(swarm_t *s, viewer_t *v, unsigned index)
{
	pps_wire_record_t hello = {.kind = PPS_WIRE_HELLO};
	struct epoll_event ev = {.events = EPOLLIN, .data.u32 = index};
	int error = 0, ret;

	if (pps_socket_get_error(v->fd, &error) < 0 || error) {
		viewer_connect_error(s, v, errno_name(error ? error : errno));
		return;
	}
	s->connected++;
	v->parser = pps_wire_parser_new(PPS_WIRE_DEFAULT_MAX_RECORD_BYTES);
	if (!v->parser) {
		viewer_fail(s, v, "out-of-memory");
		return;
	}
	pps_wire_parser_set_sender(v->parser, PPS_WIRE_FROM_SERVER);
	hello.u.hello.protocol_version = PPS_WIRE_VERSION;
	hello.u.hello.flags = PPS_WIRE_HELLO_STREAM | (s->token ? PPS_WIRE_HELLO_CHALLENGE : 0);
	hello.u.hello.name_len = (uint8_t)snprintf(hello.u.hello.name, sizeof(hello.u.hello.name),
	                                           "%s-%u", s->name, index);
	hello.u.hello.stream_len =
	    (uint8_t)snprintf(hello.u.hello.stream, sizeof(hello.u.hello.stream), "%s", s->stream);
	ret = send_record(v, &hello);
	if (ret < 0) {
		viewer_fail_errno(s, v, "send", -ret);
		return;
	}
	if (epoll_ctl(s->epfd, EPOLL_CTL_MOD, v->fd, &ev) < 0) {
		viewer_fail_errno(s, v, "epoll", errno);
		return;
	}
	v->state = VIEWER_HANDSHAKE;
}

static const char *
parser_error_reason(pps_wire_error_t code)
{
	switch (code) {
	case PPS_WIRE_ERR_VERSION:
		return "protocol-version";
	case PPS_WIRE_ERR_KIND:
		return "protocol-kind";
	case PPS_WIRE_ERR_TOO_LONG:
		return "protocol-too-long";
	case PPS_WIRE_ERR_SHORT:
		return "protocol-short";
	case PPS_WIRE_ERR_TRAILING:
		return "protocol-trailing";
	default:
		return "protocol-field";
	}
}

/* One record for @v, read at @now_us (realtime). false: @v was closed. */
static bool
viewer_record(swarm_t *s, viewer_t *v, const pps_wire_record_t *r, int64_t now_us)
{
	switch (r->kind) {
	case PPS_WIRE_BYE: {
		char reason[64];
		const char *name = pps_wire_bye_reason_name(r->u.bye.reason);

		if (v->state != VIEWER_STREAMING) {
			count_reason(s->refused, name);
			s->refused_n++;
			viewer_close(s, v);
		} else {
			snprintf(reason, sizeof(reason), "bye-%s", name);
			viewer_fail(s, v, reason);
		}
		return false;
	}
	case PPS_WIRE_CHALLENGE: {
		pps_wire_record_t auth = {.kind = PPS_WIRE_AUTH};
		int ret;

		if (v->state != VIEWER_HANDSHAKE || !s->token || v->challenged)
			break;
		v->challenged = true;
		auth.u.auth.method = PPS_WIRE_AUTH_HMAC_SHA256;
		pps_wire_auth_mac(s->token, strlen(s->token), r->u.challenge.nonce,
		                  auth.u.auth.mac);
		ret = send_record(v, &auth);
		if (ret < 0) {
			viewer_fail_errno(s, v, "send", -ret);
			return false;
		}
		return true;
	}
	case PPS_WIRE_STREAM_INFO: {
		const pps_wire_stream_info_t *info = &r->u.stream_info;

		if (v->state != VIEWER_HANDSHAKE || !info->fps_num || !info->fps_den)
			break;
		s->pending--;
		s->streaming++;
		s->got_stream_info++;
		v->state = VIEWER_STREAMING;
		v->stream_info_us = now_us;
		if (!s->have_info) {
			s->have_info = true;
			s->info = *info;
		}
		v->window_us =
		    (int64_t)info->window_frames * 1000000LL * info->fps_den / info->fps_num;
		return true;
	}
	case PPS_WIRE_CLOCK_PONG: /* never asked for; harmless */
		if (v->state != VIEWER_STREAMING)
			break;
		return true;
	case PPS_WIRE_WINDOW_BEGIN: {
		const pps_wire_window_begin_t *b = &r->u.window_begin;

		if (v->state != VIEWER_STREAMING || v->in_window ||
		    (v->have_last && b->window_id <= v->last_id))
			break;
		account_gap(s, v, b->window_id);
		v->in_window = true;
		v->have_last = v->have_ref = true;
		v->cur_id = v->last_id = v->ref_id = b->window_id;
		v->cur_capture_us = v->ref_capture_us = b->first_capture_us;
		return true;
	}
	case PPS_WIRE_ADU_FRAGMENT:
		if (v->state != VIEWER_STREAMING || !v->in_window ||
		    r->u.adu_fragment.window_id != v->cur_id)
			break;
		s->payload_bytes += r->u.adu_fragment.payload_len;
		return true;
	case PPS_WIRE_WINDOW_END: {
		const pps_wire_window_end_t *e = &r->u.window_end;
		bool dropped = e->flags & PPS_WIRE_WINDOW_END_DROPPED;

		if (v->state != VIEWER_STREAMING)
			break;
		s->window_ends++;
		if (v->in_window) {
			if (e->window_id != v->cur_id)
				break;
			v->in_window = false;
			window_account(s, v, v->cur_capture_us,
			               dropped           ? WIN_DROPPED
			               : e->adus_dropped ? WIN_WITH_DROPS
			                                 : WIN_WHOLE,
			               now_us - v->cur_capture_us, true);
			return true;
		}
		/* A lone WINDOW_END: a window the sender dropped before it began. */
		if (!dropped || (v->have_last && e->window_id <= v->last_id))
			break;
		account_gap(s, v, e->window_id);
		if (v->have_ref)
			window_account(s, v,
			               v->ref_capture_us +
			                   (int64_t)(e->window_id - v->ref_id) * v->window_us,
			               WIN_DROPPED, 0, false);
		v->have_last = true;
		v->last_id = e->window_id;
		return true;
	}
	default:
		break;
	}
	/* What a server sends, out of order (or AUDIO_FRAME, never asked for). */
	viewer_fail(s, v, "protocol-order");
	return false;
}

static void
viewer_readable(swarm_t *s, viewer_t *v)
{
	static uint8_t buf[PPS_SWARM_READ_BYTES];
	ssize_t n = recv(v->fd, buf, sizeof(buf), MSG_DONTWAIT);
	const uint8_t *data = buf;
	size_t len;
	int64_t now_us;

	if (n < 0) {
		if (errno == EAGAIN || errno == EINTR)
			return;
		viewer_fail_errno(s, v, "read", errno);
		return;
	}
	if (n == 0) {
		/* Closed without a BYE: before STREAM_INFO, a refusal that did not
		 * say why. */
		viewer_fail(s, v, v->state == VIEWER_STREAMING ? "eof" : "eof-before-stream-info");
		return;
	}
	now_us = pps_time_realtime_us();
	len = (size_t)n;
	s->bytes += (uint64_t)n;
	if (v->state == VIEWER_STREAMING && s->from_us && now_us >= s->from_us &&
	    now_us <= s->until_us)
		v->span_bytes += (uint64_t)n;
	for (;;) {
		pps_wire_record_t record;
		int ret = pps_wire_parser_next(v->parser, &data, &len, &record);

		if (ret == -EAGAIN)
			return;
		if (ret < 0) {
			viewer_fail(s, v,
			            parser_error_reason(pps_wire_parser_error_code(v->parser)));
			return;
		}
		if (!viewer_record(s, v, &record, now_us))
			return;
	}
}

/* ---- the loop ---------------------------------------------------------- */

/* Opens what the ramp allows now. */
static void
ramp_step(swarm_t *s, int64_t now_mono_us)
{
	double burst_us = 1e6 / s->connect_rate;

	/* A burst of at most 50 ms' worth (or one) after the pending bound held
	 * the ramp back. */
	if (s->next_connect_mono_us < (double)now_mono_us - 50000.0 - burst_us)
		s->next_connect_mono_us = (double)now_mono_us - 50000.0 - burst_us;
	while (s->opened < s->viewers && s->pending < s->max_pending &&
	       s->next_connect_mono_us <= (double)now_mono_us) {
		viewer_open(s, s->opened);
		s->next_connect_mono_us += burst_us;
	}
}

/* Every viewer opened and none pending: the ramp is over; the default measure
 * span starts 2 s later. */
static void
ramp_check_end(swarm_t *s)
{
	if (s->ramp_end_real_us || s->opened < s->viewers || s->pending)
		return;
	s->ramp_end_real_us = pps_time_realtime_us();
	if (!s->from_us)
		s->from_us = s->ramp_end_real_us + PPS_SWARM_SETTLE_US;
}

/* Gives up viewers not streaming PPS_SWARM_HANDSHAKE_TIMEOUT_US after connect(). */
static void
sweep_handshakes(swarm_t *s, int64_t now_mono_us)
{
	if (!s->pending)
		return;
	for (unsigned i = 0; i < s->opened; i++) {
		viewer_t *v = &s->v[i];

		if ((v->state != VIEWER_CONNECTING && v->state != VIEWER_HANDSHAKE) ||
		    now_mono_us - v->opened_us < PPS_SWARM_HANDSHAKE_TIMEOUT_US)
			continue;
		if (v->state == VIEWER_CONNECTING)
			viewer_connect_error(s, v, "timeout");
		else
			viewer_fail(s, v, "handshake-timeout");
	}
}

static void
status_line(swarm_t *s, int64_t now_mono_us, double interval_s)
{
	double p99 = histogram_quantile_ms(&s->recent, 0.99);
	double p99_counted = histogram_quantile_ms(&s->hist, 0.99);
	char p99_text[32] = "-", p99_counted_text[32] = "-";

	if (p99 >= 0)
		snprintf(p99_text, sizeof(p99_text), "%.1f ms", p99);
	if (p99_counted >= 0)
		snprintf(p99_counted_text, sizeof(p99_counted_text), "%.1f ms", p99_counted);
	fprintf(stderr,
	        PROGRAM ": %.0f s: connected %u, streaming %u, closed %u, refused %u, pending %u, "
	                "%.0f windows/s, p99 %s (since the last line), %s (counted so far)\n",
	        (double)(now_mono_us - s->start_mono_us) / 1e6, s->connected, s->streaming,
	        s->closed, s->refused_n, s->pending,
	        (double)(s->window_ends - s->window_ends_at_status) / interval_s, p99_text,
	        p99_counted_text);
	s->window_ends_at_status = s->window_ends;
	memset(&s->recent, 0, sizeof(s->recent));
}

static int64_t
min64(int64_t a, int64_t b)
{
	return a < b ? a : b;
}

static void
run(swarm_t *s)
{
	static struct epoll_event events[1024];
	int64_t status_us = (int64_t)(s->status_s * 1e6);

	s->next_status_mono_us = status_us ? s->start_mono_us + status_us : INT64_MAX;
	s->next_sweep_mono_us = s->start_mono_us + 1000000;
	for (;;) {
		int64_t now = pps_time_monotonic_us(), wake;
		int ready, timeout_ms;

		if (stop_requested || now >= s->end_mono_us)
			break;
		if (now >= s->next_sweep_mono_us) {
			sweep_handshakes(s, now);
			s->next_sweep_mono_us = now + 1000000;
		}
		ramp_step(s, now);
		ramp_check_end(s);
		if (now >= s->next_status_mono_us) {
			status_line(s, now, s->status_s);
			s->next_status_mono_us += status_us;
		}
		/* Sleep until the next timer: the end, a status line, a sweep, and
		 * the ramp's next connect if the pending bound allows one. */
		wake = min64(s->end_mono_us, min64(s->next_status_mono_us, s->next_sweep_mono_us));
		if (s->opened < s->viewers && s->pending < s->max_pending)
			wake = min64(wake, (int64_t)ceil(s->next_connect_mono_us));
		timeout_ms = wake <= now ? 0 : (int)((wake - now + 999) / 1000);
		ready = epoll_wait(s->epfd, events, (int)(sizeof(events) / sizeof(events[0])),
		                   timeout_ms);
		if (ready < 0) {
			if (errno == EINTR)
				continue;
			perror(PROGRAM ": epoll_wait");
			break;
		}
		for (int k = 0; k < ready; k++) {
			unsigned index = events[k].data.u32;
			viewer_t *v = &s->v[index];

			if (v->fd < 0)
				continue;
			if (v->state == VIEWER_CONNECTING)
				viewer_connected(s, v, index);
			else
				viewer_readable(s, v);
		}
	}
}

/* The run is over: BYE on every connection still open, then close it. */
static void
close_all(swarm_t *s, unsigned *streaming_at_end, unsigned *pending_at_end)
{
	pps_wire_record_t bye = {.kind = PPS_WIRE_BYE};

	bye.u.bye.reason = PPS_WIRE_BYE_NORMAL;
	*streaming_at_end = s->streaming;
	*pending_at_end = s->pending;
	for (unsigned i = 0; i < s->opened; i++) {
		viewer_t *v = &s->v[i];

		if (v->state == VIEWER_CLOSED)
			continue;
		if (v->state == VIEWER_STREAMING || v->state == VIEWER_HANDSHAKE)
			(void)send_record(v, &bye);
		v->at_end = v->state == VIEWER_STREAMING;
		viewer_close(s, v);
	}
}

/* ---- the report -------------------------------------------------------- */

static void
add_table(JsonBuilder *b, const char *key, GHashTable *table)
{
	GHashTableIter it;
	gpointer k, val;

	json_builder_set_member_name(b, key);
	json_builder_begin_object(b);
	g_hash_table_iter_init(&it, table);
	while (g_hash_table_iter_next(&it, &k, &val)) {
		json_builder_set_member_name(b, k);
		json_builder_add_int_value(b, GPOINTER_TO_UINT(val));
	}
	json_builder_end_object(b);
}

static void
add_int(JsonBuilder *b, const char *key, int64_t value)
{
	json_builder_set_member_name(b, key);
	json_builder_add_int_value(b, value);
}

static void
add_double_or_null(JsonBuilder *b, const char *key, double value, bool present)
{
	json_builder_set_member_name(b, key);
	if (present)
		json_builder_add_double_value(b, round(value * 1000.0) / 1000.0);
	else
		json_builder_add_null_value(b);
}

static int
compare_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

typedef struct {
	unsigned streaming_at_end, pending_at_end;
	int64_t end_real_us;
	double run_s;
	const pps_wire_stream_info_t *info;
} report_extra_t;

static char *
report_json(swarm_t *s, const report_extra_t *x)
{
	JsonBuilder *b = json_builder_new();
	JsonGenerator *gen;
	JsonNode *root;
	struct rusage ru;
	uint64_t *kbits = g_new0(uint64_t, s->viewers);
	unsigned full = 0, with_drops = 0, through = 0;
	int64_t span_end = min64(s->until_us, x->end_real_us);
	double span_s = s->from_us ? (double)(span_end - s->from_us) / 1e6 : 0;
	char *text;

	for (unsigned i = 0; i < s->opened; i++) {
		const viewer_t *v = &s->v[i];
		with_drops += v->any_bad;
		/* Streaming from before the span's start to past its end (or to
		 * the run's end, if the span's end is later). */
		if (!v->stream_info_us || !s->from_us || v->stream_info_us > s->from_us ||
		    (!v->at_end && v->ended_us <= span_end))
			continue;
		full += v->counted && !v->any_bad;
		if (span_s > 0)
			kbits[through++] = v->span_bytes;
	}
	qsort(kbits, through, sizeof(*kbits), compare_u64);

	getrusage(RUSAGE_SELF, &ru);
	json_builder_begin_object(b);
	json_builder_set_member_name(b, "program");
	json_builder_add_string_value(b, PROGRAM);
	json_builder_set_member_name(b, "version");
	json_builder_add_string_value(b, PPS_VERSION);
	json_builder_set_member_name(b, "target");
	json_builder_add_string_value(b, s->target);
	json_builder_set_member_name(b, "name");
	json_builder_add_string_value(b, s->name);
	add_int(b, "viewers", s->viewers);
	add_int(b, "connected", s->connected);
	add_int(b, "got_stream_info", s->got_stream_info);
	add_int(b, "streaming_at_end", x->streaming_at_end);
	add_int(b, "pending_at_end", x->pending_at_end);
	add_int(b, "not_started", s->viewers - s->opened);
	add_table(b, "closed_early", s->closed_early);
	add_table(b, "refused", s->refused);
	add_table(b, "connect_errors", s->connect_errors);
	add_double_or_null(b, "ramp_s", (double)(s->ramp_end_real_us - s->start_real_us) / 1e6,
	                   s->ramp_end_real_us != 0);
	json_builder_set_member_name(b, "measure_from_us");
	if (s->from_us)
		json_builder_add_int_value(b, s->from_us);
	else
		json_builder_add_null_value(b);
	add_int(b, "measure_until_us", s->until_us);
	json_builder_set_member_name(b, "latency_budget_ms");
	if (x->info)
		json_builder_add_int_value(b, x->info->latency_budget_ms);
	else
		json_builder_add_null_value(b);
	json_builder_set_member_name(b, "window_frames");
	if (x->info)
		json_builder_add_int_value(b, x->info->window_frames);
	else
		json_builder_add_null_value(b);
	add_double_or_null(b, "fps", x->info ? (double)x->info->fps_num / x->info->fps_den : 0,
	                   x->info != NULL);

	json_builder_set_member_name(b, "windows");
	json_builder_begin_object(b);
	add_int(b, "counted", (int64_t)s->w_counted);
	add_int(b, "whole", (int64_t)s->w_whole);
	add_int(b, "with_drops", (int64_t)s->w_with_drops);
	add_int(b, "dropped", (int64_t)s->w_dropped);
	add_int(b, "gaps", (int64_t)s->w_gaps);
	json_builder_end_object(b);
	add_int(b, "viewers_full", full);
	add_int(b, "viewers_partial", s->got_stream_info - full);
	add_int(b, "viewers_with_drops", with_drops);

	json_builder_set_member_name(b, "window_latency_ms");
	json_builder_begin_object(b);
	{
		static const struct {
			const char *key;
			double q;
		} qs[] = {{"p50", 0.5}, {"p95", 0.95}, {"p99", 0.99}, {"p999", 0.999}};
		bool any = s->hist.total > 0;

		for (unsigned i = 0; i < sizeof(qs) / sizeof(qs[0]); i++)
			add_double_or_null(b, qs[i].key, histogram_quantile_ms(&s->hist, qs[i].q),
			                   any);
		add_double_or_null(b, "min", (double)s->hist.min_us / 1000.0, any);
		add_double_or_null(b, "max", (double)s->hist.max_us / 1000.0, any);
		add_int(b, "over_20s", (int64_t)s->hist.overflow);
		add_int(b, "samples", (int64_t)s->hist.total);
	}
	json_builder_end_object(b);

	json_builder_set_member_name(b, "per_viewer_kbps");
	json_builder_begin_object(b);
	add_double_or_null(b, "min", through ? (double)kbits[0] * 8 / span_s / 1000 : 0,
	                   through > 0);
	add_double_or_null(b, "p50",
	                   through ? (double)kbits[(through - 1) / 2] * 8 / span_s / 1000 : 0,
	                   through > 0);
	add_double_or_null(b, "max", through ? (double)kbits[through - 1] * 8 / span_s / 1000 : 0,
	                   through > 0);
	add_int(b, "viewers", through);
	json_builder_end_object(b);
	add_int(b, "bytes", (int64_t)s->bytes);
	add_int(b, "payload_bytes", (int64_t)s->payload_bytes);
	json_builder_set_member_name(b, "cpu_s");
	json_builder_begin_object(b);
	add_double_or_null(b, "user", (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6, true);
	add_double_or_null(b, "sys", (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6, true);
	json_builder_end_object(b);
	add_int(b, "maxrss_kb", ru.ru_maxrss);
	add_double_or_null(b, "run_s", x->run_s, true);
	json_builder_end_object(b);

	root = json_builder_get_root(b);
	gen = json_generator_new();
	json_generator_set_root(gen, root);
	json_generator_set_pretty(gen, TRUE);
	text = json_generator_to_data(gen, NULL);
	json_node_unref(root);
	g_object_unref(gen);
	g_object_unref(b);
	g_free(kbits);
	return text;
}

/* @text to @path through PATH.tmp and rename; 0 or -1 (said why). */
static int
write_atomically(const char *path, const char *text)
{
	char *tmp = g_strdup_printf("%s.tmp", path);
	FILE *f = fopen(tmp, "w");
	int ret = 0;

	if (!f || fputs(text, f) < 0 || fputc('\n', f) < 0 || fclose(f) != 0) {
		fprintf(stderr, PROGRAM ": cannot write %s: %s\n", tmp, strerror(errno));
		ret = -1;
	} else if (rename(tmp, path) < 0) {
		fprintf(stderr, PROGRAM ": cannot rename %s to %s: %s\n", tmp, path,
		        strerror(errno));
		ret = -1;
	}
	if (ret < 0)
		unlink(tmp);
	g_free(tmp);
	return ret;
}

int
main(int argc, char **argv)
{
	static swarm_t s;
	report_extra_t extra = {0};
	struct sigaction sa = {.sa_handler = stop_handler};
	char *text;
	int ret = 0;

	settings_parse(&s, argc, argv);
	if (raise_fd_limit(&s) < 0 || resolve_target(&s) < 0)
		return 1;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	s.epfd = epoll_create1(EPOLL_CLOEXEC);
	s.v = calloc(s.viewers, sizeof(*s.v));
	if (s.epfd < 0 || !s.v) {
		perror(PROGRAM ": setting up");
		return 1;
	}
	for (unsigned i = 0; i < s.viewers; i++)
		s.v[i].fd = -1;
	s.closed_early = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
	s.refused = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
	s.connect_errors = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);

	s.start_mono_us = pps_time_monotonic_us();
	s.start_real_us = pps_time_realtime_us();
	s.end_mono_us = s.start_mono_us + (int64_t)(s.duration_s * 1e6);
	s.next_connect_mono_us = (double)s.start_mono_us;
	s.from_us = s.measure_from_us;
	s.until_us = s.measure_until_us
	                 ? s.measure_until_us
	                 : s.start_real_us + (int64_t)(s.duration_s * 1e6) - PPS_SWARM_TAIL_US;

	run(&s);

	extra.end_real_us = pps_time_realtime_us();
	extra.run_s = (double)(pps_time_monotonic_us() - s.start_mono_us) / 1e6;
	close_all(&s, &extra.streaming_at_end, &extra.pending_at_end);
	extra.info = s.have_info ? &s.info : NULL;
	text = report_json(&s, &extra);
	if (s.out_path)
		ret = write_atomically(s.out_path, text) < 0 ? 1 : 0;
	else
		printf("%s\n", text);
	g_free(text);
	g_hash_table_unref(s.closed_early);
	g_hash_table_unref(s.refused);
	g_hash_table_unref(s.connect_errors);
	free(s.v);
	close(s.epfd);
	return ret;
}
