/* SPDX-License-Identifier: MIT */
/*
 * Integration tests of the MIN_BUF writer on loopback: a bulk producer on the
 * main thread's event loop, a slow reader on a second thread.
 *
 *   test-minbuf bound A B     every packet pulled keeps the kernel within
 *                             A*cwnd + min(B, cwnd) + sacked (checked here with
 *                             SIOCOUTQ and a TCP_INFO of our own, tolerance 0:
 *                             see check_bound), wake-ups stay within a small
 *                             constant of writes, every packet is one segment
 *   test-minbuf mss           the path MTU changes twice mid-stream (private
 *                             network namespace); every packet follows the MSS
 *   test-minbuf tcp           tcp mode buffers far beyond the MIN_BUF bound
 *
 * The reader is rate-limited by an event timer (it plays the bottleneck link);
 * nothing is synchronised by sleeping: completion is signalled through a pipe,
 * and a watchdog timer only turns a hang into a failure.
 */
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <linux/sockios.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <event2/event.h>

#include "pps-minbuf.h"
#include "pps-socket.h"
#include "pps-test.h"

#define SKIP             77
#define TOTAL_BYTES      (12u * 1024u * 1024u)
#define READ_CHUNK_BYTES (24u * 1024u)
#define READ_TICK_US     1000
#define RCVBUF_BYTES     (96 * 1024)
#define MAXSEG_BYTES     1448

typedef enum { TEST_BOUND, TEST_MSS, TEST_TCP } test_kind_t;

typedef struct {
	/* reader thread */
	int rfd;
	int done_pipe[2];
	uint64_t received;
	int read_errors;
	struct event_base *rbase;
	struct event *rtick;

	/* writer side (main thread) */
	test_kind_t kind;
	pps_minbuf_params_t params;
	int wfd;
	struct event_base *base;
	pps_minbuf_t *w;
	uint64_t produced;
	uint32_t batch_fills; /* packets filled since the writer's last sample */
	uint64_t fills;
	uint64_t bound_checks;
	int max_over; /* independent check: held - bound, max over all fills */
	uint32_t max_held_pkts;
	uint32_t max_notsent_pkts;
	uint32_t last_mss;
	uint64_t mss_mismatch;
	uint32_t mss_seen[4];
	unsigned n_mss_seen;
	int mtu_step;
	int ifsock;
	bool finished;
} ctx_t;

static uint8_t
pattern(uint64_t off)
{
	return (uint8_t)(off % 251u);
}

static int
set_lo_mtu(int sock, int mtu)
{
	struct ifreq ifr;
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
	if (mtu == 0) {
		if (ioctl(sock, SIOCGIFFLAGS, &ifr) < 0)
			return -errno;
		ifr.ifr_flags |= IFF_UP;
		return ioctl(sock, SIOCSIFFLAGS, &ifr) < 0 ? -errno : 0;
	}
	ifr.ifr_mtu = mtu;
	return ioctl(sock, SIOCSIFMTU, &ifr) < 0 ? -errno : 0;
}

/* ---- reader thread: reads READ_CHUNK_BYTES per tick and checks the bytes ---- */

static void
read_tick_cb(evutil_socket_t fd, short what, void *arg)
{
	ctx_t *c = arg;
	static uint8_t buf[READ_CHUNK_BYTES];
	(void)fd;
	(void)what;
	size_t want = READ_CHUNK_BYTES;
	while (want > 0) {
		ssize_t k = read(c->rfd, buf, want);
		if (k < 0) {
			if (errno == EAGAIN || errno == EINTR)
				break;
			c->read_errors++;
			event_base_loopbreak(c->rbase);
			return;
		}
		if (k == 0) {
			event_base_loopbreak(c->rbase);
			return;
		}
		for (ssize_t i = 0; i < k; i++) {
			if (buf[i] != pattern(c->received + (uint64_t)i)) {
				c->read_errors++;
				break;
			}
		}
		c->received += (uint64_t)k;
		want -= (size_t)k;
	}
	if (c->received >= TOTAL_BYTES) {
		char b = 1;
		if (write(c->done_pipe[1], &b, 1) != 1)
			c->read_errors++;
		event_base_loopbreak(c->rbase);
	}
}

static void *
reader_main(void *arg)
{
	ctx_t *c = arg;
	struct timeval tv = {0, READ_TICK_US};
	c->rbase = event_base_new();
	c->rtick = event_new(c->rbase, -1, EV_PERSIST, read_tick_cb, c);
	event_add(c->rtick, &tv);
	event_base_dispatch(c->rbase);
	event_free(c->rtick);
	event_base_free(c->rbase);
	return NULL;
}

/* ---- writer side ---- */

/*
 * Independent bound check, at every packet pulled (just before the write that
 * carries it): held = ceil(SIOCOUTQ / mss) + packets already pulled for this
 * write + this one, against A*cwnd + min(B, cwnd) + sacked from our own
 * TCP_INFO. Tolerance 0: between the writer's TCP_INFO and ours an ACK can
 * only lower held or raise cwnd and sacked (cubic on loopback never lowers
 * cwnd without loss), so any excess is the writer's fault.
 */
static void
check_bound(ctx_t *c, size_t mss)
{
	pps_minbuf_check_t check;
	int r =
	    pps_minbuf_check_packet(c->wfd, mss, c->params.a, c->params.b, c->batch_fills, &check);
	if (r < 0) {
		CHECK(0, "TCP_INFO/SIOCOUTQ: %s", strerror(-r));
		return;
	}
	if (check.held_pkts > c->max_held_pkts)
		c->max_held_pkts = check.held_pkts;
	if (check.notsent_pkts > c->max_notsent_pkts)
		c->max_notsent_pkts = check.notsent_pkts;
	if (c->params.mode != PPS_MINBUF_MODE_MINBUF)
		return;
	if (c->bound_checks == 0 || check.over_pkts > c->max_over)
		c->max_over = check.over_pkts;
	c->bound_checks++;
}

static int
fill(size_t mss, uint8_t *buf, size_t *len, bool *push, void *user)
{
	ctx_t *c = user;
	if (c->produced >= TOTAL_BYTES)
		return 0;

	/* The writer reads the MSS once per write: compare on a batch's first
	 * packet (later ones may see the kernel resync mid-batch). */
	struct tcp_info ti;
	if (c->batch_fills == 0 && pps_socket_get_tcp_info(c->wfd, &ti, sizeof(ti), NULL) == 0 &&
	    ti.tcpi_snd_mss != mss)
		c->mss_mismatch++;
	if (mss != c->last_mss) {
		if (c->n_mss_seen < 4)
			c->mss_seen[c->n_mss_seen++] = (uint32_t)mss;
		c->last_mss = (uint32_t)mss;
	}
	if (c->kind == TEST_BOUND || c->kind == TEST_TCP)
		check_bound(c, mss);

	size_t n = mss;
	if (TOTAL_BYTES - c->produced < n)
		n = (size_t)(TOTAL_BYTES - c->produced);
	for (size_t i = 0; i < n; i++)
		buf[i] = pattern(c->produced + i);
	c->produced += n;
	*len = n;
	*push = c->produced >= TOTAL_BYTES; /* the last packet must not stay corked */
	c->batch_fills++;
	c->fills++;

	/* MSS test: shrink the path MTU a third of the way, grow it back at two
	 * thirds. The kernel re-reads the route MTU on its next transmit. */
	if (c->kind == TEST_MSS) {
		if (c->mtu_step == 0 && c->produced > TOTAL_BYTES / 3) {
			CHECK(set_lo_mtu(c->ifsock, 1200) == 0, "lo mtu 1200");
			c->mtu_step = 1;
		} else if (c->mtu_step == 1 && c->produced > 2 * (uint64_t)TOTAL_BYTES / 3) {
			CHECK(set_lo_mtu(c->ifsock, 1500) == 0, "lo mtu 1500");
			c->mtu_step = 2;
		}
	}
	return 1;
}

static void
sample_cb(const pps_minbuf_sample_t *s, void *user)
{
	ctx_t *c = user;
	(void)s;
	c->batch_fills = 0;
}

static void
error_cb(int err, void *user)
{
	ctx_t *c = user;
	CHECK(0, "writer error %s", strerror(-err));
	event_base_loopbreak(c->base);
}

static void
done_cb(evutil_socket_t fd, short what, void *arg)
{
	ctx_t *c = arg;
	(void)fd;
	(void)what;
	c->finished = true;
	event_base_loopbreak(c->base);
}

static void
watchdog_cb(evutil_socket_t fd, short what, void *arg)
{
	ctx_t *c = arg;
	(void)fd;
	(void)what;
	CHECK(0, "watchdog: only %llu of %u bytes produced", (unsigned long long)c->produced,
	      TOTAL_BYTES);
	event_base_loopbreak(c->base);
}

static int
connect_pair(int *wfd, int *rfd)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t al = sizeof(a);
	int e;
	int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int r = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (l < 0 || r < 0)
		return -errno;
	(void)pps_socket_set_reuseaddr(l); /* an ephemeral port: only tidier */
	/* Loopback's MSS is ~65 KB; 1448 makes packet counts realistic. Both
	 * ends: the accepted socket inherits the listener's user MSS. */
	if ((e = pps_socket_set_maxseg(l, MAXSEG_BYTES)) < 0 ||
	    (e = pps_socket_set_maxseg(r, MAXSEG_BYTES)) < 0 ||
	    (e = pps_socket_set_rcvbuf(r, RCVBUF_BYTES)) < 0)
		return e;
	if (bind(l, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(l, 1) < 0 ||
	    getsockname(l, (struct sockaddr *)&a, &al) < 0)
		return -errno;
	if (connect(r, (struct sockaddr *)&a, sizeof(a)) < 0)
		return -errno;
	*wfd = accept4(l, NULL, NULL, SOCK_CLOEXEC);
	close(l);
	if (*wfd < 0)
		return -errno;
	*rfd = r;
	return pps_socket_set_nonblocking(r);
}

static void
print_hist(const char *name, const uint64_t *h)
{
	printf("  %s:", name);
	for (int i = 0; i < PPS_MINBUF_HIST_PKTS; i++)
		if (h[i])
			printf(" %d:%llu", i, (unsigned long long)h[i]);
	printf("\n");
}

static int
run(test_kind_t kind, pps_minbuf_mode_t mode, unsigned a, unsigned b)
{
	ctx_t c;
	memset(&c, 0, sizeof(c));
	c.kind = kind;
	c.ifsock = -1;

	/* A private network namespace keeps MTU changes and load off the host's
	 * loopback. The MSS test needs it; the others fall back to the host. */
	if (unshare(CLONE_NEWNET) == 0) {
		c.ifsock = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		if (c.ifsock < 0 || set_lo_mtu(c.ifsock, 0) < 0) {
			fprintf(stderr, "cannot bring up lo in a new namespace\n");
			return kind == TEST_MSS ? SKIP : 1;
		}
	} else if (kind == TEST_MSS) {
		fprintf(stderr, "SKIP: unshare(CLONE_NEWNET): %s\n", strerror(errno));
		return SKIP;
	}

	int r = connect_pair(&c.wfd, &c.rfd);
	if (r < 0) {
		fprintf(stderr, "connect_pair: %s\n", strerror(-r));
		return 1;
	}
	if (pipe2(c.done_pipe, O_CLOEXEC | O_NONBLOCK) < 0)
		return 1;

	pps_minbuf_params_init(&c.params);
	c.params.mode = mode;
	c.params.a = a;
	c.params.b = b;
	/* cubic: BBR lowers cwnd without loss (PROBE_RTT), which would make the
	 * zero-tolerance check racy; the netlab suite runs the default. */
	c.params.congestion = PPS_MINBUF_CONGESTION_CUBIC;

	c.base = event_base_new();
	c.w = pps_minbuf_new(c.base, c.wfd, &c.params, fill, error_cb, &c);
	if (!c.w) {
		fprintf(stderr, "pps_minbuf_new: %s\n", strerror(errno));
		return 1;
	}
	pps_minbuf_set_sample_cb(c.w, sample_cb, &c);
	struct event *done = event_new(c.base, c.done_pipe[0], EV_READ, done_cb, &c);
	struct event *dog = evtimer_new(c.base, watchdog_cb, &c);
	struct timeval dog_tv = {60, 0};
	event_add(done, NULL);
	event_add(dog, &dog_tv);

	pthread_t reader;
	if (pthread_create(&reader, NULL, reader_main, &c) != 0)
		return 1;
	pps_minbuf_kick(c.w);
	event_base_dispatch(c.base);
	if (!c.finished) {
		/* unblock the reader so that join returns */
		shutdown(c.rfd, SHUT_RDWR);
	}
	pthread_join(reader, NULL);

	pps_minbuf_stats_t st;
	pps_minbuf_get_stats(c.w, &st);
	struct tcp_info ti;
	(void)pps_socket_get_tcp_info(c.wfd, &ti, sizeof(ti), NULL); /* zeros if it fails */

	printf("%s mode=%s A=%u B=%u: produced %llu received %llu\n",
	       kind == TEST_BOUND ? "bound"
	       : kind == TEST_MSS ? "mss"
	                          : "tcp",
	       pps_minbuf_mode_name(mode), a, b, (unsigned long long)c.produced,
	       (unsigned long long)c.received);
	printf("  writes %llu packets %llu wakeups %llu idle %llu kicks %llu pushes %llu partial "
	       "%llu\n",
	       (unsigned long long)st.writes, (unsigned long long)st.packets,
	       (unsigned long long)st.wakeups, (unsigned long long)st.wakeups_idle,
	       (unsigned long long)st.kicks, (unsigned long long)st.pushes,
	       (unsigned long long)st.partial_writes);
	printf("  gates: lowat %llu sndbuf %llu reopens %llu overshoot %llu mss_changes %llu\n",
	       (unsigned long long)st.gate_lowat, (unsigned long long)st.gate_sndbuf,
	       (unsigned long long)st.gate_reopens, (unsigned long long)st.overshoot_pkts,
	       (unsigned long long)st.mss_changes);
	printf("  writer max over bound %d, max held after write %u; independent: %llu checks, max "
	       "over %d, max held %u, max unsent %u\n",
	       st.max_over_bound_pkts, st.max_held_after_pkts, (unsigned long long)c.bound_checks,
	       c.max_over, c.max_held_pkts, c.max_notsent_pkts);
	printf(
	    "  cwnd min/max %u/%u, data_segs_out %u, retrans %llu, mss mismatches %llu, mss seen",
	    st.cwnd_min_pkts, st.cwnd_max_pkts, ti.tcpi_data_segs_out,
	    (unsigned long long)st.retrans_pkts, (unsigned long long)c.mss_mismatch);
	for (unsigned i = 0; i < c.n_mss_seen; i++)
		printf(" %u", c.mss_seen[i]);
	printf("\n");
	print_hist("held at write", st.held_hist);
	print_hist("unsent at write", st.unsent_hist);

	CHECK(c.finished, "transfer did not complete");
	CHECK(c.read_errors == 0, "reader saw %d corrupt or failed reads", c.read_errors);
	CHECK(c.received == TOTAL_BYTES, "received %llu", (unsigned long long)c.received);
	CHECK(st.bytes == TOTAL_BYTES, "writer bytes %llu", (unsigned long long)st.bytes);
	/* No spinning: a wake-up finds no room rarely, and wake-ups never
	 * outnumber writes by more than a small constant. */
	CHECK(st.wakeups <= 2 * st.writes + 16, "wakeups %llu vs writes %llu",
	      (unsigned long long)st.wakeups, (unsigned long long)st.writes);
	CHECK(st.wakeups_idle <= st.writes / 10 + 16, "idle wakeups %llu vs writes %llu",
	      (unsigned long long)st.wakeups_idle, (unsigned long long)st.writes);

	if (kind == TEST_BOUND) {
		CHECK(c.bound_checks == c.fills, "bound checked at every packet");
		CHECK(c.max_over <= 0, "kernel held %d packets over the bound", c.max_over);
		CHECK(st.max_over_bound_pkts <= 0, "writer's own view: %d over",
		      st.max_over_bound_pkts);
		CHECK(st.overshoot_pkts == 0, "overshoot %llu",
		      (unsigned long long)st.overshoot_pkts);
		CHECK(c.mss_mismatch == 0, "mss mismatches %llu",
		      (unsigned long long)c.mss_mismatch);
		/* MSS framing: each packet leaves as one segment. Tolerance: when
		 * the slow reader's window opens by less than an MSS, the kernel's
		 * window probe (tcp_write_wakeup) may send part of a packet. A
		 * misaligned writer would double the count instead. */
		CHECK(ti.tcpi_data_segs_out <=
		              st.packets + st.retrans_pkts + st.packets / 500 + 2 &&
		          ti.tcpi_data_segs_out >= st.packets,
		      "data segments %u vs packets %llu", ti.tcpi_data_segs_out,
		      (unsigned long long)st.packets);
		CHECK(st.gate_lowat + st.gate_sndbuf > 0, "the writer never had to wait");
	} else if (kind == TEST_MSS) {
		CHECK(st.mss_changes >= 2, "mss changes %llu", (unsigned long long)st.mss_changes);
		CHECK(c.n_mss_seen >= 3 && c.mss_seen[1] < c.mss_seen[0] &&
		          c.mss_seen[2] > c.mss_seen[1],
		      "mss did not follow the MTU (seen %u values)", c.n_mss_seen);
		/* Between the writer's TCP_INFO and ours the kernel may resync its
		 * MSS at most once per change. */
		CHECK(c.mss_mismatch <= 2, "mss mismatches %llu",
		      (unsigned long long)c.mss_mismatch);
	} else {
		/* tcp mode is the kernel's default buffering: it holds far more
		 * than any MIN_BUF bound would allow (cwnd + 3 packets here). */
		uint32_t minbuf13 = st.cwnd_max_pkts + 3;
		CHECK(c.max_held_pkts > 2 * minbuf13, "tcp held only %u packets (cwnd max %u)",
		      c.max_held_pkts, st.cwnd_max_pkts);
		CHECK(st.gate_lowat + st.gate_sndbuf == 0, "tcp mode must not gate");
	}

	pps_minbuf_free(c.w);
	event_free(done);
	event_free(dog);
	event_base_free(c.base);
	close(c.wfd);
	close(c.rfd);
	close(c.done_pipe[0]);
	close(c.done_pipe[1]);
	if (c.ifsock >= 0)
		close(c.ifsock);
	return pps_test_failures ? 1 : 0;
}

/* The pieces without a transfer (suite unit): the bound, the independent
 * check's errors and its reading of an idle connection, the name tables'
 * lookups, and the constructor's refusals. */
static int
run_unit(void)
{
	pps_minbuf_check_t check;
	int wfd = -1, rfd = -1, r;

	CHECK(pps_minbuf_bound_pkts(1, 0, 10) == 10, "A=1 B=0");
	CHECK(pps_minbuf_bound_pkts(1, 3, 10) == 13, "A=1 B=3");
	CHECK(pps_minbuf_bound_pkts(2, 3, 2) == 6, "B is capped at cwnd");
	CHECK(pps_minbuf_bound_pkts(1, 3, 0) == 0, "no window, no room");

	r = connect_pair(&wfd, &rfd);
	CHECK(r == 0, "connect_pair: %s", strerror(-r));
	if (r == 0) {
		r = pps_minbuf_check_packet(wfd, 0, 1, 3, 0, &check);
		CHECK(r == -EINVAL, "mss 0: %d", r);
		r = pps_minbuf_check_packet(wfd, MAXSEG_BYTES, 1, 3, 2, &check);
		CHECK(r == 0, "check: %s", strerror(-r));
		/* Nothing written: held is the packets pulled (2) plus this one. */
		CHECK(check.held_pkts == 3, "held %u", check.held_pkts);
		CHECK(check.notsent_pkts == 0, "notsent %u", check.notsent_pkts);
		CHECK(check.mss_bytes > 0 && check.mss_bytes <= MAXSEG_BYTES, "mss %u",
		      check.mss_bytes);
		CHECK(check.bound_pkts >= 4, "bound %u (initial cwnd >= 1, B = 3)",
		      check.bound_pkts);
		CHECK(check.over_pkts == (int32_t)check.held_pkts - (int32_t)check.bound_pkts,
		      "over %d", check.over_pkts);
		close(wfd);
		close(rfd);
		r = pps_minbuf_check_packet(wfd, MAXSEG_BYTES, 1, 3, 0, &check);
		CHECK(r == -EBADF, "closed socket: %d", r);
	}

	/* The rate cap is the socket's SO_MAX_PACING_RATE, in bytes/s; changes
	 * under 2% are not applied; 0 lifts it. */
	r = connect_pair(&wfd, &rfd);
	CHECK(r == 0, "connect_pair: %s", strerror(-r));
	if (r == 0) {
		struct event_base *eb = event_base_new();
		pps_minbuf_params_t pp;
		pps_minbuf_t *w;
		unsigned rate = 0;

		pps_minbuf_params_init(&pp);
		w = eb ? pps_minbuf_new(eb, wfd, &pp, fill, NULL, NULL) : NULL;
		CHECK(w != NULL, "pps_minbuf_new: %s", strerror(errno));
		if (w) {
			CHECK(pps_minbuf_set_rate_cap(w, 800000) == 0, "set 800 kbit/s");
			CHECK(pps_socket_get_max_pacing_rate(wfd, &rate) == 0 && rate == 100000,
			      "pacing cap %u B/s, want 100000", rate);
			CHECK(pps_minbuf_set_rate_cap(w, 808000) == 0, "set +1%%");
			CHECK(pps_socket_get_max_pacing_rate(wfd, &rate) == 0 && rate == 100000,
			      "a 1%% change is not applied: %u", rate);
			CHECK(pps_minbuf_set_rate_cap(w, 1200000) == 0, "set 1.2 Mbit/s");
			CHECK(pps_socket_get_max_pacing_rate(wfd, &rate) == 0 && rate == 150000,
			      "pacing cap %u B/s, want 150000", rate);
			CHECK(pps_minbuf_set_rate_cap(w, 0) == 0, "lift");
			CHECK(pps_socket_get_max_pacing_rate(wfd, &rate) == 0 && rate == ~0U,
			      "lifted: %u", rate);
		}
		if (w) {
			/* The congestion control switches on the live socket, once
			 * per change; "default" is not a target. */
			char cc[16] = "";
			pps_minbuf_stats_t st;

			CHECK(pps_minbuf_set_congestion(w, PPS_MINBUF_CONGESTION_CUBIC) == 0,
			      "cubic");
			CHECK(pps_socket_get_congestion(wfd, cc, sizeof(cc)) == 0 &&
			          strcmp(cc, "cubic") == 0,
			      "in force: %s", cc);
			CHECK(pps_minbuf_set_congestion(w, PPS_MINBUF_CONGESTION_CUBIC) == 0,
			      "again");
			CHECK(pps_minbuf_set_congestion(w, PPS_MINBUF_CONGESTION_RENO) == 0,
			      "reno");
			CHECK(pps_socket_get_congestion(wfd, cc, sizeof(cc)) == 0 &&
			          strcmp(cc, "reno") == 0,
			      "in force: %s", cc);
			CHECK(pps_minbuf_set_congestion(w, PPS_MINBUF_CONGESTION_DEFAULT) ==
			          -EINVAL,
			      "default is refused");
			pps_minbuf_get_stats(w, &st);
			CHECK(st.congestion_switches == 2 && strcmp(st.congestion, "reno") == 0,
			      "%llu switches, stats say %s",
			      (unsigned long long)st.congestion_switches, st.congestion);
		}
		if (w) {
			pps_minbuf_free(w);
		}
		if (eb)
			event_base_free(eb);
		close(wfd);
		close(rfd);
	}

	/* A thin stream (the audio connection): no cork, its NOTSENT_LOWAT,
	 * linear timeouts, the minimum RTO where the kernel has it; only in
	 * mode tcp. */
	r = connect_pair(&wfd, &rfd);
	CHECK(r == 0, "connect_pair: %s", strerror(-r));
	if (r == 0) {
		struct event_base *eb = event_base_new();
		pps_minbuf_params_t tp;
		pps_minbuf_t *w;
		int v = -1;
		socklen_t len = sizeof(v);

		pps_minbuf_params_init(&tp);
		tp.thin = true;
		tp.rto_min_us = 20000;
		errno = 0;
		CHECK(!pps_minbuf_new(eb, wfd, &tp, fill, NULL, NULL) && errno == EINVAL,
		      "thin in mode minbuf: %s", strerror(errno));
		tp.mode = PPS_MINBUF_MODE_TCP;
		w = eb ? pps_minbuf_new(eb, wfd, &tp, fill, NULL, NULL) : NULL;
		CHECK(w != NULL, "thin writer: %s", strerror(errno));
		CHECK(getsockopt(wfd, IPPROTO_TCP, TCP_CORK, &v, &len) == 0 && v == 0, "cork %d",
		      v);
		len = sizeof(v);
		CHECK(getsockopt(wfd, IPPROTO_TCP, TCP_NODELAY, &v, &len) == 0 && v == 1,
		      "nodelay %d", v);
		len = sizeof(v);
		CHECK(getsockopt(wfd, IPPROTO_TCP, TCP_NOTSENT_LOWAT, &v, &len) == 0 &&
		          v == PPS_MINBUF_THIN_LOWAT_BYTES,
		      "notsent lowat %d", v);
		len = sizeof(v);
		CHECK(getsockopt(wfd, IPPROTO_TCP, TCP_THIN_LINEAR_TIMEOUTS, &v, &len) == 0 &&
		          v == 1,
		      "thin linear timeouts %d", v);
		if (w) {
			pps_minbuf_stats_t st;

			len = sizeof(v);
			pps_minbuf_get_stats(w, &st);
			/* 45 is TCP_RTO_MIN_US (Linux 6.15); an older kernel refuses it. */
			CHECK(st.rto_min_refused ||
			          (getsockopt(wfd, IPPROTO_TCP, 45, &v, &len) == 0 && v == 20000),
			      "rto min %d (refused: %s)", v, strerror(st.rto_min_refused));
			pps_minbuf_free(w);
		}
		if (eb)
			event_base_free(eb);
		close(wfd);
		close(rfd);
	}

	for (int m = 0; m < PPS_MINBUF_MODE_COUNT; m++) {
		pps_minbuf_mode_t back = PPS_MINBUF_MODE_COUNT;
		CHECK(pps_minbuf_mode_from_name(pps_minbuf_mode_name((pps_minbuf_mode_t)m),
		                                &back) == 0 &&
		          back == (pps_minbuf_mode_t)m,
		      "mode %d", m);
	}
	for (int cc = 0; cc < PPS_MINBUF_CONGESTION_COUNT; cc++) {
		pps_minbuf_congestion_t back = PPS_MINBUF_CONGESTION_COUNT;
		CHECK(pps_minbuf_congestion_from_name(
		          pps_minbuf_congestion_name((pps_minbuf_congestion_t)cc), &back) == 0 &&
		          back == (pps_minbuf_congestion_t)cc,
		      "congestion %d", cc);
	}
	CHECK(strcmp(pps_minbuf_mode_name(PPS_MINBUF_MODE_COUNT), "?") == 0, "mode out of range");
	pps_minbuf_mode_t untouched = PPS_MINBUF_MODE_TCP;
	CHECK(pps_minbuf_mode_from_name("fast", &untouched) == -EINVAL &&
	          untouched == PPS_MINBUF_MODE_TCP,
	      "unknown mode name");

	/* Constructors return NULL and set errno. */
	struct event_base *base = event_base_new();
	pps_minbuf_params_t params;
	pps_minbuf_params_init(&params);
	CHECK(base != NULL, "event_base_new");
	errno = 0;
	CHECK(!pps_minbuf_new(base, -1, &params, fill, NULL, NULL) && errno == EINVAL, "fd -1: %s",
	      strerror(errno));
	params.mode = PPS_MINBUF_MODE_COUNT;
	errno = 0;
	CHECK(!pps_minbuf_new(base, 0, &params, fill, NULL, NULL) && errno == EINVAL,
	      "mode out of range: %s", strerror(errno));
	if (base)
		event_base_free(base);
	return pps_test_failures ? 1 : 0;
}

int
main(int argc, char **argv)
{
	if (argc >= 2 && strcmp(argv[1], "unit") == 0)
		return run_unit();
	if (argc >= 4 && strcmp(argv[1], "bound") == 0)
		return run(TEST_BOUND, PPS_MINBUF_MODE_MINBUF, (unsigned)atoi(argv[2]),
		           (unsigned)atoi(argv[3]));
	if (argc >= 2 && strcmp(argv[1], "mss") == 0)
		return run(TEST_MSS, PPS_MINBUF_MODE_MINBUF, 1, 3);
	if (argc >= 2 && strcmp(argv[1], "tcp") == 0)
		return run(TEST_TCP, PPS_MINBUF_MODE_TCP, 1, 3);
	fprintf(stderr, "usage: %s bound A B | mss | tcp | unit\n", argv[0]);
	return 2;
}
