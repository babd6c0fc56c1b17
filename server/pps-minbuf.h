/* SPDX-License-Identifier: MIT */
/*
 * MIN_BUF TCP socket writer: keeps at most A*cwnd + min(B, cwnd) + sacked_out
 * packets in the kernel (IWQoS 2002 section 2.2, TOMCCAP 2008 sections 4-6),
 * from user space on stock Linux.
 *
 * Why: a kernel send buffer larger than the congestion window holds packets
 * that are already late. MIN_BUF keeps unsent data in the application, where
 * the prioritizer can still reorder or drop it. The writer therefore PULLS
 * packets from a producer callback only when the kernel has room.
 *
 * The exact rule (mode minbuf). Before each write(2) the writer reads TCP_INFO
 * once and computes, in packets of the current MSS (tcpi_snd_mss):
 *
 *     held  = tcpi_unacked + ceil(tcpi_notsent_bytes / mss)
 *     bound = A * tcpi_snd_cwnd + min(B, tcpi_snd_cwnd) + tcpi_sacked
 *     room  = bound - held
 *
 * tcpi_unacked (packets_out) counts every sent, not cumulatively acked packet,
 * including SACKed and lost ones; tcpi_notsent_bytes is the same quantity as
 * SIOCOUTQNSD (write_seq - snd_nxt), so one getsockopt replaces the two
 * ioctls. If room > 0 the writer pulls up to min(room, batch cap) packets and
 * hands them to the kernel in ONE write(2) (each exactly one MSS; the batch is
 * cut after a packet flagged push), so after every write held <= bound as read
 * by that TCP_INFO. The only exception is counted in stats.overshoot_pkts: when
 * cwnd is so small that nothing can arm a wake-up (see below), one packet more
 * than the bound is written.
 *
 * How close this is to the kernel patch: the bound is evaluated when the
 * writer runs, not at every ACK inside the kernel. ACKs that arrive between the
 * TCP_INFO read and the write only lower held or raise bound (the writer is
 * then conservative); a cwnd reduction (loss, ECN) in that window of a few
 * microseconds can leave held above the new bound by the packets of that one
 * write. Nothing is ever dropped from the kernel afterwards: after a cwnd
 * reduction the excess drains as it would in the patched kernel, and no new
 * packet is pulled until held < bound again. Measured adherence is reported by
 * the tests and the benchmark (stats.max_over_bound_pkts).
 *
 * Wake-ups. The writer keeps EV_WRITE registered (level-triggered epoll) only
 * while the producer has data, and makes the kernel's own writability test
 * coincide with "one packet of room appeared" instead of polling:
 *  - unsent data in the kernel (notsent > 0): TCP_NOTSENT_LOWAT = 2*notsent -
 *    mss + 1. Since Linux 5.0 both tcp_poll() and the ACK-path wake-up
 *    (tcp_check_space -> sk_stream_write_space) report writable only when
 *    2*notsent < lowat, i.e. once the kernel has transmitted one more MSS of
 *    the unsent data. That happens exactly when an ACK or a SACK opens cwnd
 *    (the sack correction's case included), or when cwnd grows.
 *  - everything held is in flight (notsent == 0, the MIN_BUF(1,0) steady
 *    state): NOTSENT_LOWAT cannot express "wait" here, so the writer lowers
 *    SO_SNDBUF to 1.5 * (wmem_queued - mss/2) (wmem_queued from SO_MEMINFO):
 *    the kernel's sk_stream_wspace test then turns writable as soon as an ACK
 *    frees half an MSS of acknowledged data. A SACK alone does not free memory,
 *    so in this state room created by SACKs is used at the next cumulative ACK.
 *    When the required SO_SNDBUF is below the kernel's minimum (cwnd of one
 *    packet) the writer writes one packet beyond the bound and waits with the
 *    NOTSENT_LOWAT rule instead (stats.overshoot_pkts).
 * Setting either option calls the kernel's sk_write_space, so no wake-up is
 * lost to an ACK that lands between the TCP_INFO read and the setsockopt.
 * Before a write that could reach a threshold left from the last wait, that
 * threshold is reopened: tcp_sendmsg() refusing part of a write would push the
 * partial packet despite the cork. A refused write still reopens and retries.
 * Steady state: when a wake-up finds the same bound the gate was armed for and
 * the write refills the kernel exactly to it, the gate is kept as armed and
 * the second TCP_INFO skipped (stats.gates_kept); if a kept gate then fires
 * without room, keeping is suspended for the next 64 waits.
 * There is no timer and no busy loop; stats.wakeups_idle counts wake-ups that
 * found no room (the tests require them to stay a small fraction of writes).
 *
 * Framing: TCP_CORK is on for the connection's life, TCP_NODELAY on (so that
 * uncorking pushes a short tail at once rather than Nagle holding it), and
 * every packet the producer returns is at most one MSS (re-read before every
 * write; it changes with the path MTU). A packet flagged push, or shorter than
 * the MSS, ends its batch and is pushed by uncorking and corking again
 * (IWQoS 2002 section 2.3), so it never merges with the next packet.
 *
 * Layers (server/pps-transport.h): the fill callback may be a layer that
 * frames what a producer above it yields, as TLS does by sealing each packet
 * as exactly one record of at most one MSS. The writer knows none of them: it
 * counts and pushes the packets the callback returns, whatever their bytes,
 * and a layer whose records have a largest size (TLS's, below loopback's MSS)
 * says so in params.max_packet_bytes. Everything above (held, bound, gates,
 * pushes) then counts ciphertext bytes and packets exactly as plaintext.
 *
 * Latency cap (mode minbuf, pps_minbuf_set_cap()). MIN_BUF removes the
 * queueing in the sender's kernel; it cannot remove the bottleneck queue that
 * a loss-based congestion window fills on its own (60 packets at 0.6 Mbit/s is
 * 1.2 s). So the owner may cap what is held in the kernel:
 *
 *     bound = min(A * cwnd + min(B, cwnd), cap) + sacked
 *
 * with cap = path estimate * (5/4 * min RTT + queue target) in packets (at
 * least 4), computed by adapt/ (pps_path_inflight_cap_pkts()) from the same
 * TCP_INFO readings and set again after each. Alone on a bottleneck the stream
 * then adds about queue target + min RTT / 4 of queueing; the 5/4 lets the
 * delivery rate, hence the estimate, grow when capacity appears. Named
 * policies ([transport] latency_cap): off (MIN_BUF alone), always, and
 * yielding (the default): when other flows keep the queue above what the cap
 * can cause (its minimum over a second stays above target + margin) or a
 * packet is retransmitted while capped, the cap is lifted - a capped stream
 * beside loss-based flows would see its rate fall with every RTT they add and
 * starve - and tried again for a few round trips every 4 s (backing off to
 * 32 s while the tries fail). With a cap below cwnd everything held is in
 * flight, so the writer waits with the SO_SNDBUF gate above.
 * stats.capped_writes counts write decisions the cap made smaller.
 *
 * Rate control ([transport] rate_control, pps_minbuf_set_rate_cap()). The
 * congestion control decides what may be in flight; with rate_control
 * tcp-friendly the owner also caps the pacing rate at adapt/'s tcp-friendly
 * rate (an AIMD on the retransmissions TCP_INFO reports, +0.53 packet per RTT
 * each RTT and x0.7 per round trip with a loss, the rule a cubic flow follows
 * in a small window) times a pacing gain (pps_path_rate_cap_bps()). Beside
 * loss-based flows the stream then takes about one flow's share, and under a
 * congestion control that keeps its window through losses (bbr) it does so
 * without the retransmission timeouts a cubic window of 2-4 packets runs
 * into. The cap holds only while others hold the queue (the yielding latency
 * cap's "competing"), and then also bounds what the writer keeps in the
 * kernel to rate x min(srtt, min RTT + 2 x queue target) + 2 packets, so
 * nothing waits unsent behind the pacer and the bound does not grow with the
 * stream's own queue: that bound holds the average at the rate, a gain above
 * 1 only lets a picture leave in a shorter burst. Alone on a path there is no
 * cap, and the latency cap above decides the queue. The server uses it in
 * mode minbuf only: in mode tcp the kernel's send buffer would hold what the
 * pacer holds back.
 *
 * Congestion control by path state ([transport] congestion_alone,
 * pps_minbuf_set_congestion()). bbr is what competes well, but alone on a
 * path its ProbeRTT (cwnd 4 for 200 ms when no lower RTT was seen for 10 s)
 * froze a live stream for 150-250 ms every ~10 s. So the server switches the
 * live socket's TCP_CONGESTION: congestion_alone (cubic) while the yielding
 * cap holds or has no estimate yet (the queue is the stream's own),
 * [transport] congestion (bbr) while the cap is lifted or being retested
 * (others share the queue); pps_path_shared() says which. The kernel keeps
 * cwnd across the switch; the new algorithm starts its own state machine. A
 * switch the kernel refuses is reported once and not tried again.
 *
 * Mode tcp: the baseline. The same framing and cork, but packets are written
 * whenever the socket is writable with the kernel's default (autotuned)
 * buffering; TCP_INFO is read once per batch for the MSS only.
 *
 * Options: TCP_CONGESTION (cubic, reno, bbr; default leaves the system's; one
 * the kernel refuses leaves the system's too, in stats.congestion_refused),
 * TCP_THIN_LINEAR_TIMEOUTS. ECN is not a per-socket option on stock Linux: it
 * is negotiated in the handshake under net.ipv4.tcp_ecn of the namespace (or
 * an `ip route ... features ecn` route) of the side that connects; a listener
 * accepts ECN whenever net.ipv4.tcp_ecn >= 1, and the default 2 already
 * accepts it. The writer, bound to an established connection, can only report
 * the outcome: stats.ecn_negotiated.
 *
 * Threading: a writer belongs to the thread that runs its event_base; every
 * function below must be called on that thread.
 */
#ifndef PPS_MINBUF_H
#define PPS_MINBUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct event_base;

typedef enum {
	PPS_MINBUF_MODE_TCP = 0, /* "tcp": kernel default buffering (baseline) */
	PPS_MINBUF_MODE_MINBUF,  /* "minbuf": A*cwnd + min(B, cwnd) + sacked */
	PPS_MINBUF_MODE_COUNT
} pps_minbuf_mode_t;

typedef enum {
	PPS_MINBUF_CONGESTION_DEFAULT = 0, /* leave the namespace's default */
	PPS_MINBUF_CONGESTION_CUBIC,
	PPS_MINBUF_CONGESTION_RENO,
	PPS_MINBUF_CONGESTION_BBR,
	PPS_MINBUF_CONGESTION_COUNT
} pps_minbuf_congestion_t;

/*
 * The names of the modes and congestion controls, indexed by the enum and
 * NULL-terminated: the one spelling that settings ([transport] mode and
 * congestion take these arrays as their choices, so a choice index is the
 * enum value), CLI, logs and TCP_CONGESTION use.
 */
extern const char *const pps_minbuf_mode_names[];
extern const char *const pps_minbuf_congestion_names[];
/* [transport] congestion_alone: the congestion control while the stream is
 * alone on its path, indexed like pps_minbuf_congestion_names, with "same"
 * (no switch) in the place of "default". */
extern const char *const pps_minbuf_congestion_alone_names[];

#define PPS_DEFAULT_MINBUF_A 1
#define PPS_DEFAULT_MINBUF_B 3

typedef struct {
	pps_minbuf_mode_t mode;
	unsigned a; /* >= 1 */
	unsigned b; /* >= 0 */
	bool ecn;   /* ECN wanted: only reported, see above */
	pps_minbuf_congestion_t congestion;
	/* While the stream is alone on its path (the session switches; see
	 * pps_minbuf_set_congestion): DEFAULT = "same", no switch. */
	pps_minbuf_congestion_t congestion_alone;
	bool thin_linear_timeouts;
	/* TCP's internal pacing (SO_MAX_PACING_RATE set below "unlimited"): the
	 * kernel spreads packets at about 1.2 x cwnd / srtt instead of sending
	 * what cwnd allows back to back. */
	bool pacing;
	/* Most packets per write(2); 0 = PPS_DEFAULT_MINBUF_BATCH_PKTS. */
	unsigned batch_pkts;
	/* A thin stream (mode tcp only; audio on a connection of its own):
	 * no cork, each packet pushed as it is written (TCP_NODELAY), linear
	 * timeouts whatever thin_linear_timeouts says, the kernel taking at
	 * most PPS_MINBUF_THIN_LOWAT_BYTES unsent (TCP_NOTSENT_LOWAT: the rest
	 * stays with the producer, which can still drop it). */
	bool thin;
	/* > 0: the connection's minimum RTO (TCP_RTO_MIN_US; a kernel without
	 * it keeps its own, stats.rto_min_refused), any mode. */
	uint32_t rto_min_us;
	/* Largest packet, in bytes, when smaller than the MSS; 0 = the MSS. Set
	 * by a layer over the writer whose records have a largest size (TLS:
	 * PPS_TLS_MAX_RECORD_BYTES): each packet still leaves as one segment. */
	size_t max_packet_bytes;
} pps_minbuf_params_t;

#define PPS_DEFAULT_MINBUF_BATCH_PKTS 64
/* A thin stream's TCP_NOTSENT_LOWAT: a few audio frames. */
#define PPS_MINBUF_THIN_LOWAT_BYTES 512

/* Fills @params with the defaults: minbuf, A=1, B=3, no ECN, default cc. */
void pps_minbuf_params_init(pps_minbuf_params_t *params);

/*
 * The MIN_BUF bound for a congestion window of @cwnd_pkts, in packets:
 * A * cwnd + min(B, cwnd). The packets SACKed out (left the network, still
 * unacked) are added to it by whoever reads them with the window.
 */
uint32_t pps_minbuf_bound_pkts(unsigned a, unsigned b, uint32_t cwnd_pkts);

/* One independent check of the bound (below). */
typedef struct {
	uint32_t held_pkts;    /* ceil(SIOCOUTQ / mss) + packets pulled before + 1 */
	uint32_t notsent_pkts; /* ceil(tcpi_notsent_bytes / mss) */
	uint32_t bound_pkts;   /* pps_minbuf_bound_pkts(a, b, tcpi_snd_cwnd) + tcpi_sacked */
	int32_t over_pkts;     /* held - bound: > 0 is over the bound */
	uint32_t mss_bytes;    /* tcpi_snd_mss */
} pps_minbuf_check_t;

/*
 * Checks from outside the writer, with a TCP_INFO and a SIOCOUTQ of its own,
 * that the packet a fill callback is about to hand over keeps @fd within the
 * bound: called from the callback, before that packet is counted in
 * @pulled_pkts (packets already pulled for the same write, not yet in the
 * kernel). For tests, the protocol benchmark and the web viewer's check. An
 * ACK between the writer's reading and this one only lowers held; a cwnd
 * reduction in between can put one write's packets over (rare, tolerated by
 * the netlab suite). @mss_bytes is the MSS the writer passed to the callback.
 * Returns 0 and fills @out, -EINVAL for @mss_bytes 0, or the socket's -errno.
 */
int pps_minbuf_check_packet(int fd, size_t mss_bytes, unsigned a, unsigned b, uint32_t pulled_pkts,
                            pps_minbuf_check_t *out);

/* Lookups in the tables above. A name for a value out of range is "?"; a
 * name not in the table is -EINVAL (*out untouched), otherwise 0. */
const char *pps_minbuf_mode_name(pps_minbuf_mode_t mode);
int pps_minbuf_mode_from_name(const char *name, pps_minbuf_mode_t *out);
const char *pps_minbuf_congestion_name(pps_minbuf_congestion_t cc);
int pps_minbuf_congestion_from_name(const char *name, pps_minbuf_congestion_t *out);

/*
 * Producer callback. Fills @buf with one packet of whole wire records, at most
 * @mss_bytes bytes: the MSS, or params.max_packet_bytes when smaller (exactly
 * that unless it ends a window: a shorter packet ends its batch and is pushed).
 * Returns 1 and sets *len_bytes (and *push when the packet ends a window and
 * must go out now), 0 if there is nothing to send now (call pps_minbuf_kick()
 * when there is), or a negative errno (reported through the error callback).
 * It may be called several times in a row for one write. It must not free the
 * writer.
 */
typedef int (*pps_minbuf_fill_cb)(size_t mss_bytes, uint8_t *buf, size_t *len_bytes, bool *push,
                                  void *user);

/* The socket (or the producer) failed with @err (negative errno); the writer
 * has stopped. The owner removes the connection; it may free the writer here. */
typedef void (*pps_minbuf_error_cb)(int err, void *user);

/* One TCP_INFO reading, as seen before a write decision (minbuf mode). */
typedef struct {
	uint32_t cwnd_pkts;
	uint32_t mss_bytes;
	uint32_t unacked_pkts;
	uint32_t sacked_pkts;
	uint32_t lost_pkts;
	uint32_t retrans_pkts;
	uint32_t notsent_bytes;
	uint32_t held_pkts;  /* unacked + ceil(notsent / mss) */
	uint32_t bound_pkts; /* A*cwnd + min(B, cwnd) + sacked */
	uint32_t srtt_us;
	uint32_t written_pkts; /* packets written on this reading (0 = waited) */
	/* For path estimation (adapt/): */
	uint32_t min_rtt_us;         /* tcpi_min_rtt */
	uint64_t delivery_rate_bps;  /* tcpi_delivery_rate * 8 */
	bool delivery_app_limited;   /* tcpi_delivery_rate_app_limited */
	uint64_t bytes_acked;        /* tcpi_bytes_acked */
	uint32_t total_retrans_pkts; /* tcpi_total_retrans */
	uint32_t cap_pkts;           /* latency cap in force (0 = none) */
} pps_minbuf_sample_t;

/* Optional observer of every reading (path estimation, benchmarks, tests).
 * It may call pps_minbuf_set_cap() and pps_minbuf_set_rate_cap() and nothing
 * else of the writer. */
typedef void (*pps_minbuf_sample_cb)(const pps_minbuf_sample_t *sample, void *user);

#define PPS_MINBUF_HIST_PKTS 256 /* buckets 0..254 exact, 255 = 255 or more */

/*
 * The writer's counters, in four parts: the writer's mechanics (writes,
 * wake-ups, gates), the connection's TCP telemetry (what TCP_INFO said), what
 * the owner steered (congestion control, latency cap), and the TLS layer's
 * records, which that layer fills in over the writer's (server/pps-transport.h;
 * the writer itself leaves them 0).
 */
typedef struct {
	/* -- writer mechanics */
	uint64_t writes;         /* write(2) calls that moved data */
	uint64_t packets;        /* packets pulled from the producer */
	uint64_t bytes;          /* bytes accepted by the kernel */
	uint64_t wakeups;        /* EV_WRITE callbacks */
	uint64_t wakeups_idle;   /* callbacks that found no room and nothing pending */
	uint64_t kicks;          /* pps_minbuf_kick() calls */
	uint64_t pushes;         /* uncork + cork pairs */
	uint64_t partial_writes; /* writes the kernel took only in part */
	uint64_t gate_lowat;     /* waits armed with TCP_NOTSENT_LOWAT */
	uint64_t gate_sndbuf;    /* waits armed with SO_SNDBUF */
	uint64_t gate_reopens;   /* writes refused by a stale threshold */
	uint64_t gates_kept;     /* steady-state refills that kept the armed gate */
	uint64_t overshoot_pkts; /* packets written beyond the bound (cwnd too small to arm) */
	uint64_t mss_changes;
	uint32_t mss_bytes;           /* last MSS read */
	uint32_t max_held_after_pkts; /* largest held + written right after a write */
	int32_t max_over_bound_pkts;  /* largest (held + written) - bound; <= 0 in bound;
	                               * INT32_MIN before the first write */
	/* At write time (the reading the write was decided on), in packets. */
	uint64_t held_hist[PPS_MINBUF_HIST_PKTS];
	uint64_t unsent_hist[PPS_MINBUF_HIST_PKTS];

	/* -- TCP telemetry: cwnd and smoothed RTT over all readings */
	uint64_t samples;
	uint32_t cwnd_min_pkts, cwnd_max_pkts, cwnd_last_pkts;
	uint64_t cwnd_sum_pkts;
	uint32_t srtt_min_us, srtt_max_us, srtt_last_us;
	uint64_t srtt_sum_us;
	/* Loss recovery since the writer was created (tcpi_total_retrans delta),
	 * RTO events (tcpi_total_rto delta on kernels >= 6.7, otherwise counted
	 * from increases of tcpi_backoff between readings) and the largest backoff. */
	uint64_t retrans_pkts;
	uint64_t rto_events;
	uint32_t max_backoff;
	bool ecn_negotiated;

	/* -- congestion control and latency cap */
	/* errno when [transport] congestion was refused (the system's runs) */
	int congestion_refused;
	char congestion[16]; /* the congestion control in force (TCP_CONGESTION read back) */
	uint64_t congestion_switches; /* pps_minbuf_set_congestion() changes applied */
	uint64_t capped_writes;       /* write decisions the latency cap made smaller */
	int rto_min_refused;          /* errno when a thin stream's TCP_RTO_MIN_US was refused */

	/* -- TLS, filled by the TLS layer over the writer */
	uint64_t tls_records;          /* packets sealed as TLS records */
	uint32_t tls_max_record_bytes; /* largest record written: <= mss_bytes */
} pps_minbuf_stats_t;

typedef struct pps_minbuf pps_minbuf_t;

/*
 * Binds a writer to @fd, a connected TCP socket (made non-blocking here; the
 * caller keeps ownership and closes it after pps_minbuf_free()). Sets TCP_CORK,
 * sets TCP_NODELAY, applies congestion control and thin linear timeouts
 * (a thin stream: no cork, its NOTSENT_LOWAT and minimum RTO).
 * Nothing is written until the first pps_minbuf_kick(). Returns NULL with
 * errno set: EINVAL (bad params), ENOENT (congestion control not available),
 * ENOMEM, or the setsockopt error.
 */
pps_minbuf_t *pps_minbuf_new(struct event_base *base, int fd, const pps_minbuf_params_t *params,
                             pps_minbuf_fill_cb fill, pps_minbuf_error_cb error, void *user);

/* The producer has new data: write now if there is room, else when room appears. */
void pps_minbuf_kick(pps_minbuf_t *w);

void pps_minbuf_set_sample_cb(pps_minbuf_t *w, pps_minbuf_sample_cb cb, void *user);

/*
 * The latency cap (see above; mode minbuf only, ignored in mode tcp): at most
 * @cap_pkts packets held in the kernel, in flight or unsent, whatever the
 * MIN_BUF bound allows. 0 lifts it. Takes effect at the next write decision.
 */
void pps_minbuf_set_cap(pps_minbuf_t *w, uint32_t cap_pkts);

/*
 * The rate cap (either mode): the kernel paces the connection at no more than
 * @bits_per_s (SO_MAX_PACING_RATE), the tcp-friendly rate of adapt/ (see the
 * rate control above). 0 lifts it. Changes under 2% are not applied. Returns 0
 * or -errno from setsockopt (the cap then stays as it was).
 */
int pps_minbuf_set_rate_cap(pps_minbuf_t *w, uint64_t bits_per_s);

/*
 * Switches the connection's congestion control (TCP_CONGESTION on the live
 * socket: the kernel keeps cwnd and starts the new one's state machine).
 * A no-op when @cc is the one in force; PPS_MINBUF_CONGESTION_DEFAULT is not
 * a target (what it names depends on the namespace). Returns 0 or -errno
 * (the one in force then stays).
 */
int pps_minbuf_set_congestion(pps_minbuf_t *w, pps_minbuf_congestion_t cc);

/* Copies the counters. Returns 0 or -EINVAL. */
int pps_minbuf_get_stats(const pps_minbuf_t *w, pps_minbuf_stats_t *out);

/* Packets waiting in the writer (a partly written batch), in bytes. */
size_t pps_minbuf_pending_bytes(const pps_minbuf_t *w);

/* Stops and frees; bytes of a partly written batch are dropped. NULL is a no-op. */
void pps_minbuf_free(pps_minbuf_t *w);

#endif /* PPS_MINBUF_H */
