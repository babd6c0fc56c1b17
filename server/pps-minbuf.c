/* SPDX-License-Identifier: MIT */
/*
 * MIN_BUF socket writer. The rule, the wake-up mechanism and their limits are
 * documented in pps-minbuf.h; this file comments the kernel details they rest on.
 */
#include "pps-minbuf.h"
#include "pps-names.h"
#include "pps-socket.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sys/socket.h>
#include <netinet/in.h>
/* linux/tcp.h, not netinet/tcp.h: glibc's struct tcp_info stops before
 * tcpi_notsent_bytes, which the rule needs. */
#include <linux/tcp.h>
#include <linux/sock_diag.h>

#include <event2/event.h>

/* "Open" values for the two wake-up thresholds: large enough never to gate. */
#define LOWAT_OPEN_BYTES INT_MAX
#define SNDBUF_OPEN_REQ  (INT_MAX / 2) /* the kernel clamps it to net.core.wmem_max */
#define BUF_MIN_BYTES    (256u * 1024u)

/*
 * Fields of struct tcp_info newer than Debian 12's uapi header, read by byte
 * offset from the end of tcpi_snd_wnd when the running kernel returns them:
 * tcpi_rcv_wnd (+0, 6.2), tcpi_rehash (+4, 6.2), tcpi_total_rto (+8, 6.7).
 */
#define TCPI_EXT_OFFSET       (offsetof(struct tcp_info, tcpi_snd_wnd) + sizeof(uint32_t))
#define TCPI_TOTAL_RTO_OFFSET (TCPI_EXT_OFFSET + 8)

typedef enum {
	STATE_IDLE,        /* producer had nothing: the next kick runs */
	STATE_WAIT_KERNEL, /* EV_WRITE armed: the kernel wakes us */
	STATE_FAILED,
} state_t;

/* One batch of packets; [off, len) not yet taken by the kernel. */
typedef struct {
	uint8_t *buf;
	size_t cap_bytes;
	size_t off;
	size_t len;
	bool push; /* uncork once the batch is in the kernel */
} batch_t;

/* The two wake-up thresholds (see the header) and what they were armed for. */
typedef struct {
	int lowat_bytes;        /* current TCP_NOTSENT_LOWAT we set */
	int sndbuf_req;         /* current SO_SNDBUF request we set */
	int sndbuf_min_bytes;   /* the kernel's floor, learnt at creation */
	int64_t wq_bytes;       /* wmem_queued when the SO_SNDBUF gate was armed */
	uint32_t bound_pkts;    /* bound when the last gate was armed */
	bool kept;              /* the armed gate was kept by the steady-state path */
	uint32_t keep_suppress; /* arms left before keeping a gate is tried again */
} gates_t;

/* TCP telemetry: the connection's counters when the writer was created, so
 * that the stats count from then on. */
typedef struct {
	uint32_t total_retrans0;
	uint32_t total_rto0;
	bool have_total_rto;
	uint32_t last_backoff;
} telemetry_t;

/* What the owner steers between writes: the latency cap, the rate cap and
 * the congestion control. */
typedef struct {
	uint32_t cap_pkts;     /* latency cap, 0 = none */
	uint64_t rate_cap_Bps; /* SO_MAX_PACING_RATE set by pps_minbuf_set_rate_cap, 0 = none */
	pps_minbuf_congestion_t congestion; /* in force; DEFAULT: the namespace's */
} control_t;

struct pps_minbuf {
	struct event_base *base;
	int fd;
	pps_minbuf_params_t params;
	pps_minbuf_fill_cb fill;
	pps_minbuf_error_cb error;
	void *user;
	pps_minbuf_sample_cb sample_cb;
	void *sample_user;

	struct event *ev_write;
	bool armed;
	state_t state;
	bool running;
	bool rerun;
	uint32_t mss_bytes;

	batch_t batch;
	gates_t gates;
	telemetry_t telemetry;
	control_t control;
	pps_minbuf_stats_t stats;
};

typedef struct {
	pps_minbuf_sample_t s;
	uint32_t backoff;
	uint32_t total_retrans;
	uint32_t total_rto;
	bool have_total_rto;
	uint8_t options;
	bool capped; /* the latency cap, not cwnd, set the bound */
} info_t;

const char *const pps_minbuf_mode_names[] = {
    [PPS_MINBUF_MODE_TCP] = "tcp",
    [PPS_MINBUF_MODE_MINBUF] = "minbuf",
    [PPS_MINBUF_MODE_COUNT] = NULL,
};
const char *const pps_minbuf_congestion_names[] = {
    [PPS_MINBUF_CONGESTION_DEFAULT] = "default", [PPS_MINBUF_CONGESTION_CUBIC] = "cubic",
    [PPS_MINBUF_CONGESTION_RENO] = "reno",       [PPS_MINBUF_CONGESTION_BBR] = "bbr",
    [PPS_MINBUF_CONGESTION_COUNT] = NULL,
};
const char *const pps_minbuf_congestion_alone_names[] = {
    [PPS_MINBUF_CONGESTION_DEFAULT] = "same", [PPS_MINBUF_CONGESTION_CUBIC] = "cubic",
    [PPS_MINBUF_CONGESTION_RENO] = "reno",    [PPS_MINBUF_CONGESTION_BBR] = "bbr",
    [PPS_MINBUF_CONGESTION_COUNT] = NULL,
};
_Static_assert(sizeof(pps_minbuf_mode_names) / sizeof(pps_minbuf_mode_names[0]) ==
                   PPS_MINBUF_MODE_COUNT + 1,
               "a name for every pps_minbuf_mode_t");
_Static_assert(sizeof(pps_minbuf_congestion_names) / sizeof(pps_minbuf_congestion_names[0]) ==
                   PPS_MINBUF_CONGESTION_COUNT + 1,
               "a name for every pps_minbuf_congestion_t");

void
pps_minbuf_params_init(pps_minbuf_params_t *params)
{
	memset(params, 0, sizeof(*params));
	params->mode = PPS_MINBUF_MODE_MINBUF;
	params->a = PPS_DEFAULT_MINBUF_A;
	params->b = PPS_DEFAULT_MINBUF_B;
	params->congestion = PPS_MINBUF_CONGESTION_DEFAULT;
	params->batch_pkts = PPS_DEFAULT_MINBUF_BATCH_PKTS;
}

const char *
pps_minbuf_mode_name(pps_minbuf_mode_t mode)
{
	return pps_names_get(pps_minbuf_mode_names, (int)mode, "?");
}

int
pps_minbuf_mode_from_name(const char *name, pps_minbuf_mode_t *out)
{
	int i = pps_names_find(pps_minbuf_mode_names, name);

	if (i < 0)
		return i;
	*out = (pps_minbuf_mode_t)i;
	return 0;
}

const char *
pps_minbuf_congestion_name(pps_minbuf_congestion_t cc)
{
	return pps_names_get(pps_minbuf_congestion_names, (int)cc, "?");
}

int
pps_minbuf_congestion_from_name(const char *name, pps_minbuf_congestion_t *out)
{
	int i = pps_names_find(pps_minbuf_congestion_names, name);

	if (i < 0)
		return i;
	*out = (pps_minbuf_congestion_t)i;
	return 0;
}

static void
hist_add(uint64_t *hist, uint32_t v)
{
	hist[v < PPS_MINBUF_HIST_PKTS - 1 ? v : PPS_MINBUF_HIST_PKTS - 1]++;
}

uint32_t
pps_minbuf_bound_pkts(unsigned a, unsigned b, uint32_t cwnd_pkts)
{
	return a * cwnd_pkts + (b < cwnd_pkts ? b : cwnd_pkts);
}

int
pps_minbuf_check_packet(int fd, size_t mss_bytes, unsigned a, unsigned b, uint32_t pulled_pkts,
                        pps_minbuf_check_t *out)
{
	struct tcp_info ti;
	uint32_t mss = (uint32_t)mss_bytes;
	int outq = 0, r;

	if (mss_bytes == 0 || mss_bytes > UINT32_MAX)
		return -EINVAL;
	if ((r = pps_socket_get_tcp_info(fd, &ti, sizeof(ti), NULL)) < 0 ||
	    (r = pps_socket_get_outq_bytes(fd, &outq)) < 0)
		return r;
	out->held_pkts = ((uint32_t)outq + mss - 1) / mss + pulled_pkts + 1;
	out->notsent_pkts = (ti.tcpi_notsent_bytes + mss - 1) / mss;
	out->bound_pkts = pps_minbuf_bound_pkts(a, b, ti.tcpi_snd_cwnd) + ti.tcpi_sacked;
	out->over_pkts = (int32_t)out->held_pkts - (int32_t)out->bound_pkts;
	out->mss_bytes = ti.tcpi_snd_mss;
	return 0;
}

static int
read_info(pps_minbuf_t *w, info_t *out)
{
	uint8_t raw[sizeof(struct tcp_info) + 128];
	struct tcp_info ti;
	size_t len;
	int r;

	if ((r = pps_socket_get_tcp_info(w->fd, raw, sizeof(raw), &len)) < 0)
		return r;
	memset(&ti, 0, sizeof(ti));
	memcpy(&ti, raw, len < sizeof(ti) ? len : sizeof(ti));

	memset(out, 0, sizeof(*out));
	pps_minbuf_sample_t *s = &out->s;
	s->cwnd_pkts = ti.tcpi_snd_cwnd;
	s->mss_bytes = ti.tcpi_snd_mss ? ti.tcpi_snd_mss : 536;
	s->unacked_pkts = ti.tcpi_unacked;
	s->sacked_pkts = ti.tcpi_sacked;
	s->lost_pkts = ti.tcpi_lost;
	s->retrans_pkts = ti.tcpi_retrans;
	s->notsent_bytes = ti.tcpi_notsent_bytes;
	s->srtt_us = ti.tcpi_rtt;
	s->held_pkts = ti.tcpi_unacked + (ti.tcpi_notsent_bytes + s->mss_bytes - 1) / s->mss_bytes;
	uint32_t bound = pps_minbuf_bound_pkts(w->params.a, w->params.b, ti.tcpi_snd_cwnd);
	if (w->control.cap_pkts && w->control.cap_pkts < bound) {
		bound = w->control.cap_pkts;
		out->capped = true;
	}
	s->bound_pkts = bound + ti.tcpi_sacked;
	s->cap_pkts = w->control.cap_pkts;
	s->min_rtt_us = ti.tcpi_min_rtt;
	s->delivery_rate_bps = ti.tcpi_delivery_rate * 8u;
	s->delivery_app_limited = ti.tcpi_delivery_rate_app_limited;
	s->bytes_acked = ti.tcpi_bytes_acked;
	s->total_retrans_pkts = ti.tcpi_total_retrans;
	out->backoff = ti.tcpi_backoff;
	out->total_retrans = ti.tcpi_total_retrans;
	out->options = ti.tcpi_options;
	if (len >= TCPI_TOTAL_RTO_OFFSET + sizeof(uint16_t)) {
		uint16_t rto;
		memcpy(&rto, raw + TCPI_TOTAL_RTO_OFFSET, sizeof(rto));
		out->total_rto = rto;
		out->have_total_rto = true;
	}
	return 0;
}

/* Folds one reading into the counters (cwnd, srtt, loss recovery, MSS). */
static void
account_info(pps_minbuf_t *w, const info_t *in)
{
	pps_minbuf_stats_t *st = &w->stats;
	const pps_minbuf_sample_t *s = &in->s;

	if (st->samples == 0) {
		st->cwnd_min_pkts = st->cwnd_max_pkts = s->cwnd_pkts;
		st->srtt_min_us = st->srtt_max_us = s->srtt_us;
	}
	st->samples++;
	st->cwnd_last_pkts = s->cwnd_pkts;
	st->cwnd_sum_pkts += s->cwnd_pkts;
	if (s->cwnd_pkts < st->cwnd_min_pkts)
		st->cwnd_min_pkts = s->cwnd_pkts;
	if (s->cwnd_pkts > st->cwnd_max_pkts)
		st->cwnd_max_pkts = s->cwnd_pkts;
	st->srtt_last_us = s->srtt_us;
	st->srtt_sum_us += s->srtt_us;
	if (s->srtt_us < st->srtt_min_us)
		st->srtt_min_us = s->srtt_us;
	if (s->srtt_us > st->srtt_max_us)
		st->srtt_max_us = s->srtt_us;

	st->retrans_pkts = in->total_retrans - w->telemetry.total_retrans0;
	if (in->have_total_rto && w->telemetry.have_total_rto) {
		st->rto_events = (uint16_t)(in->total_rto - w->telemetry.total_rto0);
	} else if (in->backoff > w->telemetry.last_backoff) {
		/* Older kernels: each RTO doubles the timer (icsk_backoff++); an
		 * RTO that fires and recovers between two readings is missed. */
		st->rto_events += in->backoff - w->telemetry.last_backoff;
	}
	w->telemetry.last_backoff = in->backoff;
	if (in->backoff > st->max_backoff)
		st->max_backoff = in->backoff;
	if (in->options & TCPI_OPT_ECN)
		st->ecn_negotiated = true;
}

static int
set_lowat(pps_minbuf_t *w, int val)
{
	if (val == w->gates.lowat_bytes)
		return 0;
	int r = pps_socket_set_notsent_lowat(w->fd, val);
	if (r == 0)
		w->gates.lowat_bytes = val;
	return r;
}

static int
set_sndbuf(pps_minbuf_t *w, int req)
{
	if (req == w->gates.sndbuf_req)
		return 0;
	int r = pps_socket_set_sndbuf(w->fd, req);
	if (r == 0)
		w->gates.sndbuf_req = req;
	return r;
}

static int
open_gates(pps_minbuf_t *w)
{
	int r = set_lowat(w, LOWAT_OPEN_BYTES);
	if (r == 0 && w->params.mode == PPS_MINBUF_MODE_MINBUF)
		r = set_sndbuf(w, SNDBUF_OPEN_REQ);
	return r;
}

static int
arm(pps_minbuf_t *w)
{
	w->state = STATE_WAIT_KERNEL;
	if (w->armed)
		return 0;
	/* epoll_ctl runs tcp_poll(), which sets SOCK_NOSPACE when the socket is
	 * not writable: that flag is what makes the ACK path call
	 * sk_stream_write_space() and wake us. */
	if (event_add(w->ev_write, NULL) < 0)
		return -EIO;
	w->armed = true;
	return 0;
}

static void
disarm(pps_minbuf_t *w)
{
	if (w->armed) {
		event_del(w->ev_write);
		w->armed = false;
	}
	w->state = STATE_IDLE;
}

static int
cork_push(pps_minbuf_t *w)
{
	/* Uncorking pushes the partial tail (IWQoS 2002 section 2.3); corking
	 * again keeps the next packets whole. A thin stream is never corked:
	 * TCP_NODELAY sent each packet as it was written. */
	if (w->params.thin)
		return 0;
	int r = pps_socket_set_cork(w->fd, false);
	if (r == 0)
		r = pps_socket_set_cork(w->fd, true);
	if (r == 0)
		w->stats.pushes++;
	return r;
}

/*
 * Arms the wake-up for "one packet of room" when the bound is reached (see the
 * header). Returns 0 when armed, 1 when nothing can express the wait (all held
 * data in flight and too little of it for SO_SNDBUF's minimum): the caller then
 * writes one more packet, which stays unsent and lets NOTSENT_LOWAT gate.
 */
static int
arm_wait(pps_minbuf_t *w, const info_t *in)
{
	const uint32_t mss = in->s.mss_bytes;
	const pps_minbuf_sample_t *s = &in->s;
	int r;

	w->gates.bound_pkts = s->bound_pkts;
	if (w->gates.keep_suppress > 0)
		w->gates.keep_suppress--;
	/* Unsent data leaves the kernel only when cwnd has room, and cwnd room
	 * comes from ACKs and SACKs: exactly the events that create MIN_BUF room.
	 * When the flow is not cwnd-limited (receive window, pacing), unsent
	 * data leaves without room appearing, so wait for acked bytes instead. */
	int64_t in_flight =
	    (int64_t)s->unacked_pkts - s->sacked_pkts - s->lost_pkts + s->retrans_pkts;
	if (s->notsent_bytes > 0 && in_flight >= (int64_t)s->cwnd_pkts) {
		int64_t v = 2 * (int64_t)in->s.notsent_bytes - (int64_t)mss + 1;
		if (v < 1)
			v = 1;
		if (v > LOWAT_OPEN_BYTES - 1)
			v = LOWAT_OPEN_BYTES - 1;
		r = set_sndbuf(w, SNDBUF_OPEN_REQ);
		if (r == 0)
			r = set_lowat(w, (int)v);
		if (r < 0)
			return r;
		w->stats.gate_lowat++;
		return arm(w);
	}

	uint32_t mi[SK_MEMINFO_VARS];
	if ((r = pps_socket_get_meminfo(w->fd, mi, SK_MEMINFO_VARS)) < 0)
		return r;
	int64_t wq = mi[SK_MEMINFO_WMEM_QUEUED];
	w->gates.wq_bytes = wq;
	/* Writable iff sndbuf - wq >= wq / 2 (sk_stream_wspace vs
	 * sk_stream_min_wspace). sndbuf = 1.5 * (wq - mss/2) is not writable now
	 * and turns writable once an ACK frees mss/2 bytes; the kernel doubles
	 * the request, hence the /2. */
	int64_t target = 3 * (wq - (int64_t)mss / 2) / 2;
	if (target <= w->gates.sndbuf_min_bytes + 2 || target / 2 > SNDBUF_OPEN_REQ)
		return 1;
	r = set_lowat(w, LOWAT_OPEN_BYTES);
	if (r == 0)
		r = set_sndbuf(w, (int)(target / 2));
	if (r < 0)
		return r;
	w->stats.gate_sndbuf++;
	return arm(w);
}

/*
 * Pulls up to @max_pkts packets into the batch buffer. A packet is at most one
 * unit: the MSS, or params.max_packet_bytes when smaller (a layer over the
 * writer that frames each packet as one record of bounded size: TLS on paths
 * whose MSS exceeds its largest record, as loopback's does).
 */
static int
pull(pps_minbuf_t *w, uint32_t max_pkts, uint32_t mss, uint32_t *got)
{
	size_t off = 0;
	uint32_t n = 0;
	size_t unit = mss;

	if (w->params.max_packet_bytes && unit > w->params.max_packet_bytes)
		unit = w->params.max_packet_bytes;
	if (w->batch.cap_bytes < unit) {
		uint8_t *nb = realloc(w->batch.buf, unit);
		if (!nb)
			return -ENOMEM;
		w->batch.buf = nb;
		w->batch.cap_bytes = unit;
	}
	if (max_pkts > w->batch.cap_bytes / unit)
		max_pkts = (uint32_t)(w->batch.cap_bytes / unit);
	w->batch.push = false;
	while (n < max_pkts) {
		size_t len = 0;
		bool push = false;
		int r = w->fill(unit, w->batch.buf + off, &len, &push, w->user);
		if (r < 0)
			return r;
		if (r == 0)
			break;
		if (len == 0 || len > unit)
			return -EMSGSIZE; /* producer bug: a packet must fit one unit */
		off += len;
		n++;
		/* A short packet left corked would merge with the next one on the
		 * wire, so it is pushed even if the producer did not ask. */
		if (push || len < unit) {
			w->batch.push = true;
			break;
		}
	}
	w->batch.off = 0;
	w->batch.len = off;
	w->stats.packets += n;
	*got = n;
	return 0;
}

/*
 * A write the kernel refuses part-way is worse than a wasted syscall: on
 * refusal tcp_sendmsg() pushes the partial tail (TCP_NAGLE_PUSH) despite the
 * cork, which splits a packet on the wire. tcp_sendmsg() refuses a new skb
 * while notsent >= lowat or wmem_queued >= sndbuf, so open a gate left from
 * the last wait when this batch could reach it. wmem_queued only fell since the
 * gate was armed (ACKs) except when the kernel splits an skb it transmits in
 * part, so the arming value bounds it loosely; each packet may cost a new skb
 * (overhead under SKB_OVERHEAD_BYTES). The margin is doubled for that slack.
 */
#define SKB_OVERHEAD_BYTES 1024
static int
prepare_write(pps_minbuf_t *w, const info_t *in, size_t len_bytes, uint32_t pkts)
{
	int r = 0;
	if (w->gates.lowat_bytes != LOWAT_OPEN_BYTES &&
	    (int64_t)in->s.notsent_bytes + (int64_t)len_bytes >= w->gates.lowat_bytes)
		r = set_lowat(w, LOWAT_OPEN_BYTES);
	if (r == 0 && w->gates.sndbuf_req != SNDBUF_OPEN_REQ &&
	    w->gates.wq_bytes + 2 * ((int64_t)len_bytes + (int64_t)pkts * SKB_OVERHEAD_BYTES) >=
	        2 * (int64_t)w->gates.sndbuf_req)
		r = set_sndbuf(w, SNDBUF_OPEN_REQ);
	return r;
}

/* Writes the pending batch. 0 when all of it is in the kernel, -EAGAIN when
 * the kernel refused the rest (EV_WRITE armed), or a negative errno. */
static int
flush(pps_minbuf_t *w)
{
	bool reopened = false;

	while (w->batch.off < w->batch.len) {
		/* MSG_NOSIGNAL: a peer gone is an error here, not a SIGPIPE for a
		 * program that embeds the server (ppssink in gst-launch). */
		ssize_t k = send(w->fd, w->batch.buf + w->batch.off, w->batch.len - w->batch.off,
		                 MSG_NOSIGNAL);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				return -errno;
			k = 0;
		}
		if (k > 0) {
			w->stats.writes++;
			w->stats.bytes += (uint64_t)k;
			w->batch.off += (size_t)k;
		}
		if (w->batch.off == w->batch.len)
			break;
		w->stats.partial_writes++;
		/* tcp_sendmsg() refuses a new skb while notsent >= lowat or
		 * wmem_queued >= sndbuf: a threshold we set for the last wait can
		 * be tighter than the room TCP_INFO shows now. */
		if (w->params.mode == PPS_MINBUF_MODE_MINBUF && !reopened &&
		    (w->gates.lowat_bytes != LOWAT_OPEN_BYTES ||
		     w->gates.sndbuf_req != SNDBUF_OPEN_REQ)) {
			int r = open_gates(w);
			if (r < 0)
				return r;
			w->stats.gate_reopens++;
			reopened = true;
			continue;
		}
		int r = arm(w);
		return r < 0 ? r : -EAGAIN;
	}
	w->batch.off = w->batch.len = 0;
	if (w->batch.push) {
		w->batch.push = false;
		return cork_push(w);
	}
	return 0;
}

/* Runs until the producer is empty or the kernel has no room. */
static int
run_once(pps_minbuf_t *w, bool woken)
{
	bool first = true;
	bool keep_gate = false;

	for (;;) {
		if (w->batch.off < w->batch.len) {
			int r = flush(w);
			if (r == -EAGAIN)
				return 0;
			if (r < 0)
				return r;
			first = false;
			if (keep_gate && w->armed) {
				w->stats.gates_kept++;
				w->gates.kept = true;
				w->state = STATE_WAIT_KERNEL;
				return 0;
			}
		}

		info_t in;
		int r = read_info(w, &in);
		if (r < 0)
			return r;
		account_info(w, &in);
		const uint32_t mss = in.s.mss_bytes;
		if (w->mss_bytes && mss != w->mss_bytes) {
			w->stats.mss_changes++;
			/* Data queued at the old MSS is re-segmented; with the cork on,
			 * a sub-MSS tail would wait for the next write. */
			if (in.s.notsent_bytes > 0) {
				r = cork_push(w);
				if (r < 0)
					return r;
			}
		}
		w->mss_bytes = mss;
		w->stats.mss_bytes = mss;

		uint32_t max_pkts = w->params.batch_pkts;
		bool overshoot = false;
		if (w->params.mode == PPS_MINBUF_MODE_MINBUF) {
			if (in.capped)
				w->stats.capped_writes++;
			if (in.s.held_pkts >= in.s.bound_pkts) {
				r = arm_wait(w, &in);
				if (r < 0)
					return r;
				if (r == 0) {
					if (woken && first) {
						w->stats.wakeups_idle++;
						/* A kept gate that fires without room means
						 * the state drifts (receive-window limited,
						 * pacing): re-arm exactly for a while. */
						if (w->gates.kept)
							w->gates.keep_suppress = 64;
					}
					w->gates.kept = false;
					if (w->sample_cb)
						w->sample_cb(&in.s, w->sample_user);
					return 0;
				}
				overshoot = true;
				max_pkts = 1;
			} else if (in.s.bound_pkts - in.s.held_pkts < max_pkts) {
				max_pkts = in.s.bound_pkts - in.s.held_pkts;
			}
		}
		first = false;

		uint32_t got = 0;
		r = pull(w, max_pkts, mss, &got);
		if (r < 0)
			return r;
		in.s.written_pkts = got;
		if (w->sample_cb)
			w->sample_cb(&in.s, w->sample_user);
		if (got == 0) {
			disarm(w);
			return 0;
		}
		if (overshoot)
			w->stats.overshoot_pkts += got;
		if (w->params.mode == PPS_MINBUF_MODE_MINBUF) {
			int lowat = w->gates.lowat_bytes, sndbuf = w->gates.sndbuf_req;
			r = prepare_write(w, &in, w->batch.len, got);
			if (r < 0)
				return r;
			/*
			 * Steady state: woken with the same bound the gate was armed
			 * for, and this write refills the kernel exactly to it, so the
			 * kernel returns to the state the gate was computed for (same
			 * packets held, about the same unsent and queued bytes). Keep
			 * the gate and skip the second TCP_INFO. If the state drifted,
			 * the gate fires early and the next wake-up (counted idle) re-arms.
			 */
			keep_gate =
			    woken && !overshoot && w->armed && !w->batch.push &&
			    w->gates.keep_suppress == 0 && in.s.bound_pkts == w->gates.bound_pkts &&
			    in.s.held_pkts + got == in.s.bound_pkts &&
			    lowat == w->gates.lowat_bytes && sndbuf == w->gates.sndbuf_req &&
			    (lowat != LOWAT_OPEN_BYTES || sndbuf != SNDBUF_OPEN_REQ);
		}
		hist_add(w->stats.held_hist, in.s.held_pkts);
		hist_add(w->stats.unsent_hist, (in.s.notsent_bytes + mss - 1) / mss);
		uint32_t after = in.s.held_pkts + got;
		if (after > w->stats.max_held_after_pkts)
			w->stats.max_held_after_pkts = after;
		if (w->params.mode == PPS_MINBUF_MODE_MINBUF) {
			int32_t over = (int32_t)after - (int32_t)in.s.bound_pkts;
			if (over > w->stats.max_over_bound_pkts)
				w->stats.max_over_bound_pkts = over;
		}
	}
}

void
pps_minbuf_set_cap(pps_minbuf_t *w, uint32_t cap_pkts)
{
	w->control.cap_pkts = cap_pkts;
}

int
pps_minbuf_set_rate_cap(pps_minbuf_t *w, uint64_t bits_per_s)
{
	uint64_t want = bits_per_s / 8u, have = w->control.rate_cap_Bps;
	int r, arg;

	if (bits_per_s && want < 1)
		want = 1;
	if (want > INT_MAX)
		want = INT_MAX;
	/* A change under 2% is not worth a system call. */
	if (want == have || (want && have && want * 50 > have * 49 && want * 50 < have * 51))
		return 0;
	/* No cap: "unlimited" (~0U), or far above any path when pacing is on. */
	arg = want ? (int)want : w->params.pacing ? INT_MAX : -1;
	if ((r = pps_socket_set_max_pacing_rate(w->fd, arg)) < 0)
		return r;
	w->control.rate_cap_Bps = want;
	return 0;
}

int
pps_minbuf_set_congestion(pps_minbuf_t *w, pps_minbuf_congestion_t cc)
{
	int r;

	if (cc <= PPS_MINBUF_CONGESTION_DEFAULT || cc >= PPS_MINBUF_CONGESTION_COUNT)
		return -EINVAL;
	if (cc == w->control.congestion)
		return 0;
	if ((r = pps_socket_set_congestion(w->fd, pps_minbuf_congestion_names[cc])) < 0)
		return r;
	w->control.congestion = cc;
	w->stats.congestion_switches++;
	if (pps_socket_get_congestion(w->fd, w->stats.congestion, sizeof(w->stats.congestion)) < 0)
		strcpy(w->stats.congestion, "?");
	return 0;
}

static void
fail(pps_minbuf_t *w, int err)
{
	disarm(w);
	w->state = STATE_FAILED;
	w->running = false;
	if (w->error)
		w->error(err, w->user); /* may free w */
}

static void
run(pps_minbuf_t *w, bool woken)
{
	if (w->state == STATE_FAILED)
		return;
	if (w->running) {
		w->rerun = true; /* kicked from inside fill: loop once more */
		return;
	}
	w->running = true;
	do {
		w->rerun = false;
		int r = run_once(w, woken);
		if (r < 0) {
			fail(w, r);
			return;
		}
		woken = false;
	} while (w->rerun);
	w->running = false;
}

static void
writable_cb(evutil_socket_t fd, short what, void *arg)
{
	pps_minbuf_t *w = arg;
	(void)fd;
	(void)what;
	w->stats.wakeups++;
	run(w, true);
}

void
pps_minbuf_kick(pps_minbuf_t *w)
{
	if (!w)
		return;
	w->stats.kicks++;
	/* While waiting for room the kernel's wake-up will pull the new data. */
	if (w->state == STATE_WAIT_KERNEL && !w->running)
		return;
	run(w, false);
}

pps_minbuf_t *
pps_minbuf_new(struct event_base *base, int fd, const pps_minbuf_params_t *params,
               pps_minbuf_fill_cb fill, pps_minbuf_error_cb error, void *user)
{
	pps_minbuf_t *w;
	int r;

	if (!base || fd < 0 || !params || !fill || params->a < 1 || params->a > 1024 ||
	    params->b > 1u << 20 || (unsigned)params->mode >= PPS_MINBUF_MODE_COUNT ||
	    (unsigned)params->congestion >= PPS_MINBUF_CONGESTION_COUNT ||
	    (params->thin && params->mode != PPS_MINBUF_MODE_TCP)) {
		errno = EINVAL;
		return NULL;
	}
	w = calloc(1, sizeof(*w));
	if (!w) {
		errno = ENOMEM;
		return NULL;
	}
	w->base = base;
	w->fd = fd;
	w->params = *params;
	if (w->params.batch_pkts == 0)
		w->params.batch_pkts = PPS_DEFAULT_MINBUF_BATCH_PKTS;
	w->fill = fill;
	w->error = error;
	w->user = user;
	w->state = STATE_IDLE;
	w->gates.lowat_bytes = -1;
	w->gates.sndbuf_req = -1;
	w->stats.max_over_bound_pkts = INT32_MIN;

	w->batch.cap_bytes = BUF_MIN_BYTES;
	w->batch.buf = malloc(w->batch.cap_bytes);
	if (!w->batch.buf) {
		r = -ENOMEM;
		goto err_free;
	}

	if ((r = pps_socket_set_nonblocking(fd)) < 0)
		goto err_buf;
	/* TCP_NODELAY on: uncorking then sends the sub-MSS tail at once. With
	 * Nagle on, the kernel's Minshall check holds that tail while an earlier
	 * short packet is unacked; corking again right after keeps it held until
	 * the next push, one window later, where it merges with the next
	 * window's first packet. On loopback the ACK comes back before the next
	 * write, which is why only real RTTs showed it (a frame interval). */
	if ((r = pps_socket_set_nodelay(fd, true)) < 0 ||
	    (r = pps_socket_set_cork(fd, !params->thin)) < 0)
		goto err_buf;
	/* A thin stream (seed 002's case, on today's Linux): little unsent in
	 * the kernel, so what is late stays with the producer, and a lower
	 * minimum RTO where the kernel has it. */
	if (params->thin &&
	    (r = pps_socket_set_notsent_lowat(fd, PPS_MINBUF_THIN_LOWAT_BYTES)) < 0)
		goto err_buf;
	if (params->rto_min_us && (r = pps_socket_set_rto_min_us(fd, params->rto_min_us)) < 0)
		w->stats.rto_min_refused = -r;
	/* A kernel without the module (or that does not allow it to this user)
	 * keeps its own: the connection still works, the owner says so. */
	if (params->congestion != PPS_MINBUF_CONGESTION_DEFAULT &&
	    (r = pps_socket_set_congestion(fd, pps_minbuf_congestion_names[params->congestion])) <
	        0)
		w->stats.congestion_refused = -r;
	else
		w->control.congestion = params->congestion;
	if (pps_socket_get_congestion(fd, w->stats.congestion, sizeof(w->stats.congestion)) < 0)
		strcpy(w->stats.congestion, "?");
	if ((params->thin_linear_timeouts || params->thin) &&
	    (r = pps_socket_set_thin_linear_timeouts(fd, true)) < 0)
		goto err_buf;
	/* Any SO_MAX_PACING_RATE but ~0U ("unlimited") marks the socket as
	 * needing pacing, and without the fq qdisc TCP then paces itself at
	 * its congestion control's rate; this cap is far above any path. */
	if (params->pacing && (r = pps_socket_set_max_pacing_rate(fd, INT_MAX)) < 0)
		goto err_buf;

	if (params->mode == PPS_MINBUF_MODE_MINBUF) {
		/* Learn the kernel's SO_SNDBUF floor (SOCK_MIN_SNDBUF), below which
		 * the SO_SNDBUF wake-up cannot be armed, then open the buffer. */
		int v = 0;
		if ((r = pps_socket_set_sndbuf(fd, 1)) < 0 ||
		    (r = pps_socket_get_sndbuf(fd, &v)) < 0)
			goto err_buf;
		w->gates.sndbuf_min_bytes = v;
		if ((r = open_gates(w)) < 0)
			goto err_buf;
	}

	info_t in;
	if ((r = read_info(w, &in)) < 0)
		goto err_buf;
	w->telemetry.total_retrans0 = in.total_retrans;
	w->telemetry.total_rto0 = in.total_rto;
	w->telemetry.have_total_rto = in.have_total_rto;
	w->telemetry.last_backoff = in.backoff;
	w->stats.ecn_negotiated = (in.options & TCPI_OPT_ECN) != 0;
	w->mss_bytes = in.s.mss_bytes;
	w->stats.mss_bytes = in.s.mss_bytes;

	w->ev_write = event_new(base, fd, EV_WRITE | EV_PERSIST, writable_cb, w);
	if (!w->ev_write) {
		r = -ENOMEM;
		goto err_buf;
	}
	return w;

err_buf:
	free(w->batch.buf);
err_free:
	free(w);
	errno = -r;
	return NULL;
}

void
pps_minbuf_set_sample_cb(pps_minbuf_t *w, pps_minbuf_sample_cb cb, void *user)
{
	if (!w)
		return;
	w->sample_cb = cb;
	w->sample_user = user;
}

int
pps_minbuf_get_stats(const pps_minbuf_t *w, pps_minbuf_stats_t *out)
{
	if (!w || !out)
		return -EINVAL;
	*out = w->stats;
	return 0;
}

size_t
pps_minbuf_pending_bytes(const pps_minbuf_t *w)
{
	return w ? w->batch.len - w->batch.off : 0;
}

void
pps_minbuf_free(pps_minbuf_t *w)
{
	if (!w)
		return;
	if (w->ev_write)
		event_free(w->ev_write);
	free(w->batch.buf);
	free(w);
}
