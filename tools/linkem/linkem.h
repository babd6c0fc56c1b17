/* SPDX-License-Identifier: MIT */
/*
 * The link model of pps-linkem: one direction of an emulated bottleneck link.
 *
 * A packet offered to a link goes through, in order:
 *   1. independent random loss (probability `loss`);
 *   2. the bottleneck FIFO, limited in packets and in bytes, with drop-tail or DRD;
 *   3. the bottleneck itself: a constant rate in bit/s, or a mahimahi trace of
 *      1500-byte delivery opportunities;
 *   4. a propagation delay line (constant one-way delay, no limit but the
 *      overall packet cap PPS_LINKEM_LINK_MAX_PKTS).
 * Because the queue is FIFO and the service is deterministic, a packet's
 * departure from the bottleneck and its delivery time are known the moment it
 * is accepted; the model only needs the caller to come back at
 * pps_linkem_link_next_delivery_ns() to pop it. The caller supplies every
 * timestamp (CLOCK_MONOTONIC nanoseconds in pps-linkem, a fake clock in tests):
 * nothing here reads a clock or sleeps.
 *
 * Threading: a link is used by one thread.
 */
#ifndef PPS_LINKEM_H
#define PPS_LINKEM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Exit status for bad settings, shared by the lab's programs (as PPS_EXIT_USAGE). */
#define PPS_LINKEM_EXIT_USAGE 2

/* A mahimahi delivery opportunity carries this many bytes. */
#define PPS_LINKEM_TRACE_OPPORTUNITY_BYTES 1500

/* Hard cap on packets held by one direction (queue plus delay line). */
#define PPS_LINKEM_LINK_MAX_PKTS 65536

/* Largest packet a link accepts (the TUN MTU is 1500; this leaves room). */
#define PPS_LINKEM_LINK_MAX_PACKET_BYTES 9000

/* ---- parsing of the lab's units; each returns 0 or -EINVAL ---- */

/* "10mbit", "1.5Mbit", "800kbit", "1gbit", "12000" (bit/s), "10mbps" (= mbit). > 0. */
int pps_linkem_parse_rate_bps(const char *text, uint64_t *rate_bps);

/* "25ms", "250us", "1.5s", "0" ; a bare number is milliseconds. Must be >= 0. */
int pps_linkem_parse_duration_ns(const char *text, int64_t *duration_ns);

/* "0", "0.01", "1%" ; must lie in [0, 1]. */
int pps_linkem_parse_probability(const char *text, double *probability);

/* A non-negative decimal integer that fits in uint64_t, with optional k/m suffix (x1000). */
int pps_linkem_parse_count(const char *text, uint64_t *count);

/* ---- traces ---- */

typedef struct pps_linkem_trace pps_linkem_trace_t;

/*
 * Loads a mahimahi trace: one non-negative integer millisecond timestamp per
 * line, non-decreasing; each line is one 1500-byte delivery opportunity; the
 * trace repeats with a period equal to its last timestamp. Refuses (NULL, errno
 * EINVAL, message in @err) a file without opportunities, a last timestamp of 0,
 * decreasing or malformed lines. NULL with errno set on I/O errors too.
 */
pps_linkem_trace_t *pps_linkem_trace_load(const char *path, char *err, size_t err_size);
void pps_linkem_trace_free(pps_linkem_trace_t *trace);

/* Number of opportunities in one period. */
size_t pps_linkem_trace_opportunities(const pps_linkem_trace_t *trace);

/* Length of one period in nanoseconds (> 0). */
int64_t pps_linkem_trace_period_ns(const pps_linkem_trace_t *trace);

/* Time of opportunity @index (counting across repetitions) after the trace's start. */
int64_t pps_linkem_trace_opportunity_ns(const pps_linkem_trace_t *trace, uint64_t index);

/* Smallest index whose opportunity is at or after @offset_ns (>= 0) from the start. */
uint64_t pps_linkem_trace_first_at_or_after(const pps_linkem_trace_t *trace, int64_t offset_ns);

/* Mean rate of the trace in bit/s (for bandwidth-delay products). */
uint64_t pps_linkem_trace_mean_rate_bps(const pps_linkem_trace_t *trace);

/* ---- one direction of the link ---- */

typedef enum {
	PPS_LINKEM_AQM_DROPTAIL,
	PPS_LINKEM_AQM_DRD,
} pps_linkem_aqm_t;

/* "droptail" / "drd"; NULL for an unknown value. */
const char *pps_linkem_aqm_name(pps_linkem_aqm_t aqm);
int pps_linkem_aqm_from_name(const char *name, pps_linkem_aqm_t *aqm);

typedef struct {
	uint64_t rate_bps;               /* constant rate; 0 when trace is set */
	const pps_linkem_trace_t *trace; /* borrowed, must outlive the link; or NULL */
	int64_t trace_epoch_ns;          /* time of the trace's opportunity 0 */
	int64_t delay_ns;                /* one-way propagation delay, >= 0 */
	uint64_t queue_limit_pkts;       /* > 0 */
	uint64_t queue_limit_bytes;      /* > 0 */
	pps_linkem_aqm_t aqm;
	uint64_t drd_min_bytes;     /* DRD: start marking above this queue size */
	uint64_t drd_congest_bytes; /* DRD: drop everything above this (> drd_min) */
	bool drd_drop_not_ect;      /* DRD: drop non-ECT packets where ECT ones are marked */
	double loss_probability;    /* independent random loss, [0, 1] */
	uint64_t seed;              /* seeds loss and DRD decisions */
} pps_linkem_link_config_t;

/* What happened to an offered packet. */
typedef enum {
	PPS_LINKEM_VERDICT_QUEUED,        /* accepted unchanged */
	PPS_LINKEM_VERDICT_MARKED,        /* accepted, CE set by DRD */
	PPS_LINKEM_VERDICT_DROP_LOSS,     /* random loss */
	PPS_LINKEM_VERDICT_DROP_QUEUE,    /* queue limit (packets or bytes) reached */
	PPS_LINKEM_VERDICT_DROP_AQM,      /* DRD: above drd_congest, or early drop of non-ECT */
	PPS_LINKEM_VERDICT_DROP_OVERSIZE, /* larger than PPS_LINKEM_LINK_MAX_PACKET_BYTES, or empty
	                                   */
	PPS_LINKEM_VERDICT_DROP_OVERFLOW, /* PPS_LINKEM_LINK_MAX_PKTS reached (delay line too long)
	                                   */
} pps_linkem_verdict_t;

/* Log word for a verdict: "queued", "marked", "drop-loss", ... */
const char *pps_linkem_verdict_name(pps_linkem_verdict_t verdict);

typedef struct {
	pps_linkem_verdict_t verdict;
	int64_t departure_ns;      /* last bit leaves the bottleneck (accepted packets) */
	int64_t delivery_ns;       /* departure plus delay (accepted packets) */
	uint64_t queue_pkts;       /* queue occupancy after the decision, this packet included */
	uint64_t queue_bytes;      /*   if accepted; the packet in service counts as queued */
	uint64_t queue_bytes_seen; /* occupancy in bytes found by the packet on arrival */
	uint8_t ecn;               /* ECN field on arrival: 0 not-ECT, 1 ECT(1), 2 ECT(0), 3 CE */
} pps_linkem_offer_t;

typedef struct {
	uint64_t arrived_pkts, arrived_bytes;
	uint64_t delivered_pkts, delivered_bytes;
	uint64_t lost_pkts;          /* random loss */
	uint64_t dropped_queue_pkts; /* drop-tail at the limit */
	uint64_t dropped_aqm_pkts;   /* DRD drops */
	uint64_t dropped_other_pkts; /* oversize, overflow */
	uint64_t marked_pkts;        /* CE set by DRD */
	uint64_t max_queue_pkts, max_queue_bytes;
	int64_t sojourn_p50_ns, sojourn_p95_ns, sojourn_p99_ns, sojourn_max_ns;
} pps_linkem_link_stats_t;

typedef struct pps_linkem_link pps_linkem_link_t;

/*
 * Checks @config; 0 or -EINVAL with a one-line reason in @err. Called by
 * pps_linkem_link_new() too, and by pps-linkem before it creates anything.
 */
int pps_linkem_link_config_check(const pps_linkem_link_config_t *config, char *err,
                                 size_t err_size);

/* A new, empty link. NULL with errno set (EINVAL for a bad config, ENOMEM). */
pps_linkem_link_t *pps_linkem_link_new(const pps_linkem_link_config_t *config);
void pps_linkem_link_free(pps_linkem_link_t *link);

/*
 * Offers the IP packet @packet (@size_bytes, copied when accepted; DRD may set
 * CE in the copy and fixes the IPv4 header checksum) arriving at @now_ns.
 * Times must not go backwards between calls. Fills @offer; returns 0, or
 * -ENOMEM (then the packet is counted as dropped, other).
 */
int pps_linkem_link_packet_offer(pps_linkem_link_t *link, int64_t now_ns, const uint8_t *packet,
                                 size_t size_bytes, pps_linkem_offer_t *offer);

/* Delivery time of the oldest accepted packet, or INT64_MAX when the link is empty. */
int64_t pps_linkem_link_next_delivery_ns(const pps_linkem_link_t *link);

/*
 * Pops the oldest packet if its delivery time is <= @now_ns: returns its size
 * and points @packet at its bytes, valid until the next call on @link; returns
 * 0 when nothing is due.
 */
size_t pps_linkem_link_packet_pop(pps_linkem_link_t *link, int64_t now_ns, const uint8_t **packet);

void pps_linkem_link_stats_get(const pps_linkem_link_t *link, pps_linkem_link_stats_t *stats);

/* ---- packet helpers (exposed for tests) ---- */

/* The ECN field of an IPv4 or IPv6 packet; 0 for anything else. */
uint8_t pps_linkem_packet_ecn(const uint8_t *packet, size_t size_bytes);

/* Sets CE on an ECT IPv4/IPv6 packet, fixing the IPv4 header checksum. 0 or -EINVAL. */
int pps_linkem_packet_mark_ce(uint8_t *packet, size_t size_bytes);

#endif /* PPS_LINKEM_H */
