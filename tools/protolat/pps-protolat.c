/* SPDX-License-Identifier: MIT */
/*
 * pps-protolat: the "latency stream" of the IWQoS 2002 section 4 experiments.
 *
 *   pps-protolat send --port P --mode tcp|minbuf [--a A --b B] [--congestion CC]
 *                     [--thin] [--ecn] [--batch N] --duration-s S --stats FILE [--samples FILE]
 *                     [--check-bound]
 *       listens (prints "ready PORT" once bound), accepts one receiver, then
 *       writes timestamped packets through the MIN_BUF writer as fast as it
 *       accepts them, for S seconds; writes the writer's counters and the
 *       process CPU time (getrusage) as JSON to FILE.
 *   pps-protolat recv --connect HOST:PORT --log FILE
 *       connects, reads until EOF and logs one CSV line per packet:
 *       seq,send_ns,recv_ns,bytes.
 *
 * Protocol latency = recv_ns - send_ns (IWQoS 2002 section 2.3: from the
 * application write to the application read that completes the packet).
 * Both ends read CLOCK_MONOTONIC, which network namespaces share.
 * The sender's producer generates a packet only when the writer pulls one,
 * so the send time is the moment the packet is handed to the kernel.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include <event2/event.h>

#include "pps-minbuf.h"
#include "pps-version.h"
#include "pps-socket.h"
#include "pps-time.h"

#define PROGRAM           "pps-protolat"
#define EXIT_USAGE        2
#define MAGIC             0x70706c74u /* "pplt" */
#define ACCEPT_TIMEOUT_MS 30000

/* On the wire, little-endian host order (both ends run on this host). */
typedef struct {
	uint32_t magic;
	uint32_t len_bytes; /* whole packet, header included */
	uint64_t seq;
	int64_t send_ns;
} pkt_header_t;

/* ---------------- sender ---------------- */

typedef struct {
	struct event_base *base;
	pps_minbuf_t *w;
	uint64_t seq;
	bool stopping;
	int err;
	FILE *samples;
	int64_t t0_ns;
	/* --check-bound: the netlab suite's independent check (see check_bound) */
	bool check;
	const pps_minbuf_params_t *params;
	int fd;
	uint32_t batch_fills;
	uint64_t checks, over_pkts_total, checks_over;
	int max_over;
} sender_t;

/* Independent MIN_BUF check at every packet pulled, just before the write
 * that carries it (pps_minbuf_check_packet: what it reads and why a packet
 * may rarely be over). */
static void
check_bound(sender_t *s, size_t mss)
{
	pps_minbuf_check_t c;
	if (pps_minbuf_check_packet(s->fd, mss, s->params->a, s->params->b, s->batch_fills, &c) < 0)
		return; /* a socket error shows on the writer's next write */
	int over = c.over_pkts;
	if (s->checks == 0 || over > s->max_over)
		s->max_over = over;
	if (over > 0) {
		s->checks_over++;
		s->over_pkts_total += (uint64_t)over;
	}
	s->checks++;
}

static int
sender_fill(size_t mss, uint8_t *buf, size_t *len, bool *push, void *user)
{
	sender_t *s = user;
	if (s->stopping)
		return 0;
	if (mss < sizeof(pkt_header_t))
		return -EMSGSIZE;
	if (s->check && s->params->mode == PPS_MINBUF_MODE_MINBUF)
		check_bound(s, mss);
	s->batch_fills++;
	pkt_header_t h = {MAGIC, (uint32_t)mss, s->seq++, pps_time_monotonic_ns()};
	memcpy(buf, &h, sizeof(h));
	memset(buf + sizeof(h), 0x5a, mss - sizeof(h));
	*len = mss;
	*push = false;
	return 1;
}

static void
sender_error(int err, void *user)
{
	sender_t *s = user;
	s->err = err;
	event_base_loopbreak(s->base);
}

static void
sender_sample(const pps_minbuf_sample_t *x, void *user)
{
	sender_t *s = user;
	s->batch_fills = 0;
	if (!s->samples)
		return;
	fprintf(s->samples, "%.6f,%u,%u,%u,%u,%u,%u,%u,%u\n",
	        (double)(pps_time_monotonic_ns() - s->t0_ns) / 1e9, x->cwnd_pkts, x->held_pkts,
	        x->bound_pkts, x->notsent_bytes / (x->mss_bytes ? x->mss_bytes : 1), x->sacked_pkts,
	        x->lost_pkts, x->srtt_us, x->written_pkts);
}

static void
sender_stop(evutil_socket_t fd, short what, void *arg)
{
	sender_t *s = arg;
	(void)fd;
	(void)what;
	s->stopping = true;
	event_base_loopbreak(s->base);
}

static void
json_hist(FILE *f, const char *name, const uint64_t *h)
{
	fprintf(f, "  \"%s\": [", name);
	for (int i = 0; i < PPS_MINBUF_HIST_PKTS; i++)
		fprintf(f, "%s%" PRIu64, i ? ", " : "", h[i]);
	fprintf(f, "],\n");
}

static int
write_stats(const char *path, const pps_minbuf_params_t *p, const pps_minbuf_stats_t *st,
            double duration_s, uint64_t seq, int err, const sender_t *s)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	double user_s = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6;
	double sys_s = (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
	FILE *f = fopen(path, "w");
	if (!f)
		return -errno;
	fprintf(f, "{\n  \"mode\": \"%s\", \"a\": %u, \"b\": %u, \"congestion\": \"%s\",\n",
	        pps_minbuf_mode_name(p->mode), p->a, p->b,
	        pps_minbuf_congestion_name(p->congestion));
	fprintf(f, "  \"thin_linear_timeouts\": %s, \"ecn_wanted\": %s, \"ecn_negotiated\": %s,\n",
	        p->thin_linear_timeouts ? "true" : "false", p->ecn ? "true" : "false",
	        st->ecn_negotiated ? "true" : "false");
	fprintf(f, "  \"error\": %d, \"duration_s\": %.3f, \"packets_generated\": %" PRIu64 ",\n",
	        err, duration_s, seq);
	fprintf(f,
	        "  \"user_s\": %.6f, \"sys_s\": %.6f, \"voluntary_ctxsw\": %ld, "
	        "\"involuntary_ctxsw\": %ld,\n",
	        user_s, sys_s, ru.ru_nvcsw, ru.ru_nivcsw);
	fprintf(f,
	        "  \"writes\": %" PRIu64 ", \"packets\": %" PRIu64 ", \"bytes\": %" PRIu64
	        ", \"wakeups\": %" PRIu64 ", \"wakeups_idle\": %" PRIu64 ",\n",
	        st->writes, st->packets, st->bytes, st->wakeups, st->wakeups_idle);
	fprintf(f,
	        "  \"pushes\": %" PRIu64 ", \"partial_writes\": %" PRIu64
	        ", \"gate_lowat\": %" PRIu64 ", \"gate_sndbuf\": %" PRIu64
	        ", \"gate_reopens\": %" PRIu64 ", \"gates_kept\": %" PRIu64
	        ", \"overshoot_pkts\": %" PRIu64 ", \"mss_changes\": %" PRIu64
	        ", \"mss_bytes\": %u,\n",
	        st->pushes, st->partial_writes, st->gate_lowat, st->gate_sndbuf, st->gate_reopens,
	        st->gates_kept, st->overshoot_pkts, st->mss_changes, st->mss_bytes);
	fprintf(f, "  \"max_held_after_pkts\": %u, \"max_over_bound_pkts\": %d,\n",
	        st->max_held_after_pkts, st->max_over_bound_pkts);
	fprintf(f, "  \"cwnd_min_pkts\": %u, \"cwnd_max_pkts\": %u, \"cwnd_mean_pkts\": %.2f,\n",
	        st->cwnd_min_pkts, st->cwnd_max_pkts,
	        st->samples ? (double)st->cwnd_sum_pkts / (double)st->samples : 0.0);
	fprintf(f, "  \"srtt_min_us\": %u, \"srtt_max_us\": %u, \"srtt_mean_us\": %.1f,\n",
	        st->srtt_min_us, st->srtt_max_us,
	        st->samples ? (double)st->srtt_sum_us / (double)st->samples : 0.0);
	fprintf(f,
	        "  \"retrans_pkts\": %" PRIu64 ", \"rto_events\": %" PRIu64
	        ", \"max_backoff\": %u,\n",
	        st->retrans_pkts, st->rto_events, st->max_backoff);
	json_hist(f, "held_hist", st->held_hist);
	json_hist(f, "unsent_hist", st->unsent_hist);
	if (s->check)
		fprintf(f,
		        "  \"check_packets\": %" PRIu64 ", \"check_over_packets\": %" PRIu64
		        ", \"check_over_total_pkts\": %" PRIu64 ", \"check_max_over_pkts\": %d,\n",
		        s->checks, s->checks_over, s->over_pkts_total, s->max_over);
	fprintf(f, "  \"samples\": %" PRIu64 "\n}\n", st->samples);
	return fclose(f) == 0 ? 0 : -errno;
}

static int
listen_on(const char *bind_addr, int port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	if (inet_pton(AF_INET, bind_addr, &a.sin_addr) != 1)
		return -EINVAL;
	int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (l < 0)
		return -errno;
	(void)pps_socket_set_reuseaddr(l); /* only spares a wait between runs */
	if (bind(l, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(l, 4) < 0) {
		int e = -errno;
		close(l);
		return e;
	}
	return l;
}

static int
run_send(int argc, char **argv)
{
	pps_minbuf_params_t p;
	const char *stats_path = NULL, *samples_path = NULL, *bind_addr = "0.0.0.0";
	int port = 0;
	double duration_s = 20;
	bool check = false;

	pps_minbuf_params_init(&p);
	for (int i = 2; i < argc; i++) {
		const char *o = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(o, "--thin")) {
			p.thin_linear_timeouts = true;
			continue;
		}
		if (!strcmp(o, "--check-bound")) {
			check = true;
			continue;
		}
		if (!strcmp(o, "--ecn")) {
			p.ecn = true;
			continue;
		}
		if (!v)
			goto usage;
		i++;
		if (!strcmp(o, "--port"))
			port = atoi(v);
		else if (!strcmp(o, "--bind"))
			bind_addr = v;
		else if (!strcmp(o, "--mode")) {
			if (pps_minbuf_mode_from_name(v, &p.mode) < 0)
				goto usage;
		} else if (!strcmp(o, "--a"))
			p.a = (unsigned)atoi(v);
		else if (!strcmp(o, "--b"))
			p.b = (unsigned)atoi(v);
		else if (!strcmp(o, "--congestion")) {
			if (pps_minbuf_congestion_from_name(v, &p.congestion) < 0)
				goto usage;
		} else if (!strcmp(o, "--batch"))
			p.batch_pkts = (unsigned)atoi(v);
		else if (!strcmp(o, "--duration-s") || !strcmp(o, "--duration"))
			duration_s = atof(v);
		else if (!strcmp(o, "--stats") || !strcmp(o, "--stats-json"))
			stats_path = v;
		else if (!strcmp(o, "--samples"))
			samples_path = v;
		else
			goto usage;
	}
	if (!stats_path || duration_s <= 0 || p.a < 1)
		goto usage;

	int l = listen_on(bind_addr, port);
	if (l < 0) {
		fprintf(stderr, PROGRAM ": listen %s:%d: %s\n", bind_addr, port, strerror(-l));
		return 1;
	}
	struct sockaddr_in a;
	socklen_t al = sizeof(a);
	getsockname(l, (struct sockaddr *)&a, &al);
	printf("ready %d\n", ntohs(a.sin_port));
	fflush(stdout);

	struct pollfd pfd = {l, POLLIN, 0};
	if (poll(&pfd, 1, ACCEPT_TIMEOUT_MS) != 1) {
		fprintf(stderr, PROGRAM ": no receiver within %d ms\n", ACCEPT_TIMEOUT_MS);
		return 1;
	}
	int fd = accept4(l, NULL, NULL, SOCK_CLOEXEC);
	close(l);
	if (fd < 0) {
		fprintf(stderr, PROGRAM ": accept: %s\n", strerror(errno));
		return 1;
	}

	sender_t s;
	memset(&s, 0, sizeof(s));
	s.check = check;
	s.params = &p;
	s.fd = fd;
	s.base = event_base_new();
	s.w = pps_minbuf_new(s.base, fd, &p, sender_fill, sender_error, &s);
	if (!s.w) {
		fprintf(stderr, PROGRAM ": writer (%s, A=%u B=%u, %s): %s\n",
		        pps_minbuf_mode_name(p.mode), p.a, p.b,
		        pps_minbuf_congestion_name(p.congestion), strerror(errno));
		return 1;
	}
	s.t0_ns = pps_time_monotonic_ns();
	if (samples_path) {
		s.samples = fopen(samples_path, "w");
		if (!s.samples) {
			fprintf(stderr, PROGRAM ": %s: %s\n", samples_path, strerror(errno));
			return 1;
		}
		fprintf(s.samples, "t_s,cwnd_pkts,held_pkts,bound_pkts,unsent_pkts,sacked_pkts,"
		                   "lost_pkts,srtt_us,written_pkts\n");
	}
	if (s.samples || s.check)
		pps_minbuf_set_sample_cb(s.w, sender_sample, &s);
	struct event *stop = evtimer_new(s.base, sender_stop, &s);
	struct timeval tv = {(time_t)duration_s,
	                     (suseconds_t)((duration_s - (double)(time_t)duration_s) * 1e6)};
	evtimer_add(stop, &tv);
	pps_minbuf_kick(s.w);
	event_base_dispatch(s.base);
	double elapsed_s = (double)(pps_time_monotonic_ns() - s.t0_ns) / 1e9;

	pps_minbuf_stats_t st;
	pps_minbuf_get_stats(s.w, &st);
	int r = write_stats(stats_path, &p, &st, elapsed_s, s.seq, s.err, &s);
	if (r < 0)
		fprintf(stderr, PROGRAM ": %s: %s\n", stats_path, strerror(-r));
	if (s.err)
		fprintf(stderr, PROGRAM ": socket failed: %s\n", strerror(-s.err));
	pps_minbuf_free(s.w);
	event_free(stop);
	event_base_free(s.base);
	if (s.samples)
		fclose(s.samples);
	/* Discard what is still queued: the measurement ended with the timer. */
	(void)pps_socket_set_linger(fd, true, 0); /* else close() waits for it, no harm */
	close(fd);
	return r < 0 ? 1 : 0;

usage:
	fprintf(
	    stderr,
	    "usage: " PROGRAM " send --port P [--bind ADDR] --mode tcp|minbuf [--a A] [--b B]\n"
	    "          [--congestion default|cubic|reno|bbr] [--thin] [--ecn] --duration-s S\n"
	    "          --stats FILE [--samples FILE] [--batch PKTS_PER_WRITE] [--check-bound]\n");
	return EXIT_USAGE;
}

/* ---------------- receiver ---------------- */

static int
connect_to(const char *hostport)
{
	char host[256];
	const char *colon = strrchr(hostport, ':');
	if (!colon || (size_t)(colon - hostport) >= sizeof(host))
		return -EINVAL;
	memcpy(host, hostport, (size_t)(colon - hostport));
	host[colon - hostport] = '\0';
	struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *res;
	if (getaddrinfo(host, colon + 1, &hints, &res) != 0)
		return -EINVAL;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, res->ai_addr, res->ai_addrlen) < 0) {
		int e = -errno;
		freeaddrinfo(res);
		if (fd >= 0)
			close(fd);
		return e;
	}
	freeaddrinfo(res);
	return fd;
}

static int
run_recv(int argc, char **argv)
{
	const char *peer = NULL, *log_path = NULL;
	for (int i = 2; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--connect"))
			peer = argv[i + 1];
		else if (!strcmp(argv[i], "--log"))
			log_path = argv[i + 1];
		else
			goto usage;
	}
	if (!peer || !log_path)
		goto usage;

	int fd = connect_to(peer);
	if (fd < 0) {
		fprintf(stderr, PROGRAM ": connect %s: %s\n", peer, strerror(-fd));
		return 1;
	}
	FILE *log = fopen(log_path, "w");
	if (!log) {
		fprintf(stderr, PROGRAM ": %s: %s\n", log_path, strerror(errno));
		return 1;
	}
	setvbuf(log, NULL, _IOFBF, 1 << 20);
	fprintf(log, "seq,send_ns,recv_ns,bytes\n");

	/* Packets are parsed out of the byte stream: a packet's read time is
	 * the time of the read that completed it. */
	static uint8_t buf[1 << 18];
	size_t have = 0;
	uint64_t packets = 0, bytes = 0;
	int rc = 0;
	for (;;) {
		ssize_t k = read(fd, buf + have, sizeof(buf) - have);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			if (errno != ECONNRESET)
				rc = 1;
			break;
		}
		if (k == 0)
			break;
		int64_t t = pps_time_monotonic_ns();
		have += (size_t)k;
		size_t off = 0;
		while (have - off >= sizeof(pkt_header_t)) {
			pkt_header_t h;
			memcpy(&h, buf + off, sizeof(h));
			if (h.magic != MAGIC || h.len_bytes < sizeof(h) ||
			    h.len_bytes > sizeof(buf)) {
				fprintf(stderr, PROGRAM ": corrupt stream at packet %" PRIu64 "\n",
				        packets);
				rc = 1;
				goto out;
			}
			if (have - off < h.len_bytes)
				break;
			fprintf(log, "%" PRIu64 ",%" PRId64 ",%" PRId64 ",%u\n", h.seq, h.send_ns,
			        t, h.len_bytes);
			packets++;
			bytes += h.len_bytes;
			off += h.len_bytes;
		}
		memmove(buf, buf + off, have - off);
		have -= off;
	}
out:
	fclose(log);
	close(fd);
	printf("{\"packets\": %" PRIu64 ", \"bytes\": %" PRIu64 "}\n", packets, bytes);
	return rc;

usage:
	fprintf(stderr, "usage: " PROGRAM " recv --connect HOST:PORT --log FILE\n");
	return EXIT_USAGE;
}

static void
usage(FILE *out)
{
	fprintf(out,
	        "Usage: " PROGRAM " send --port P --mode tcp|minbuf --stats-json FILE [OPTION]...\n"
	        "  or:  " PROGRAM " recv --connect HOST:PORT --log FILE\n"
	        "The latency stream of the protocol-latency benchmark (IWQoS 2002 section 4).\n"
	        "send listens (prints \"ready PORT\" once bound), accepts one receiver and writes\n"
	        "timestamped packets through the MIN_BUF writer as fast as it takes them; recv\n"
	        "connects, reads until EOF and logs seq,send_ns,recv_ns,bytes per packet.\n"
	        "\n"
	        "send:\n"
	        "  --port P                 TCP port to listen on (0 = any free one)\n"
	        "  --bind ADDR              address to listen on (default 0.0.0.0)\n"
	        "  --mode tcp|minbuf        the kernel's buffering or MIN_BUF(A, B)\n"
	        "  --a A, --b B             MIN_BUF parameters\n"
	        "  --congestion NAME        default, cubic, reno or bbr\n"
	        "  --thin, --ecn            thin-stream linear timeouts; ECN\n"
	        "  --batch N                packets per write\n"
	        "  --duration SECONDS       seconds to send (also --duration-s)\n"
	        "  --stats-json FILE        the writer's counters and CPU time as JSON (also\n"
	        "                           --stats)\n"
	        "  --samples FILE           per-write samples\n"
	        "  --check-bound            check the MIN_BUF bound at every packet (in --stats)\n"
	        "recv:\n"
	        "  --connect HOST:PORT      the sender\n"
	        "  --log FILE               CSV, one line per packet\n"
	        "\n"
	        "  -h, --help               this help\n"
	        "  -V, --version            the version\n"
	        "\n"
	        "Exit status: 0 done; 1 runtime error; 2 usage error.\n");
}

int
main(int argc, char **argv)
{
	signal(SIGPIPE, SIG_IGN);
	if (pps_cli_help_or_version(argc, argv, PROGRAM, usage))
		return 0;
	if (argc >= 2 && !strcmp(argv[1], "send"))
		return run_send(argc, argv);
	if (argc >= 2 && !strcmp(argv[1], "recv"))
		return run_recv(argc, argv);
	fprintf(stderr, "usage: " PROGRAM " send|recv ... (see --help)\n");
	return EXIT_USAGE;
}
