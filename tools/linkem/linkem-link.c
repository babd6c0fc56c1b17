/* SPDX-License-Identifier: MIT */
/*
 * One direction of the emulated link. See linkem.h for the model.
 *
 * Packets live in one FIFO ring from arrival to delivery. Since service is
 * FIFO and deterministic, each packet's departure and delivery times are fixed
 * when it is accepted, so a single ring ordered by arrival is also ordered by
 * departure and by delivery. `queue_seq` splits it: packets before it have left
 * the bottleneck and are only propagating; packets from it on are still in the
 * bottleneck queue (the one being sent included, as in a router's buffer) and
 * count against the queue limits.
 */
#include "linkem.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Queue sojourn histogram: 10 us bins up to 10 s, then one overflow bin. */
#define SOJOURN_BIN_NS 10000
#define SOJOURN_BINS   1000001

typedef struct {
	int64_t departure_ns;
	int64_t delivery_ns;
	uint32_t size_bytes;
	uint8_t *data;
} link_packet_t;

struct pps_linkem_link {
	pps_linkem_link_config_t config;

	link_packet_t *ring; /* PPS_LINKEM_LINK_MAX_PKTS slots, indexed by seq % max */
	uint64_t head_seq;   /* oldest packet held */
	uint64_t queue_seq;  /* oldest packet still in the bottleneck */
	uint64_t tail_seq;   /* next free slot */
	uint64_t queue_bytes;

	/* constant rate: when the bottleneck finishes what it has accepted */
	int64_t busy_until_ns;
	/* trace: current opportunity and the bytes it still has */
	uint64_t opportunity_index;
	uint64_t opportunity_credit_bytes;
	bool opportunity_started;

	uint64_t random_state;
	uint8_t *popped; /* the packet handed out by the last pop, freed on the next */

	pps_linkem_link_stats_t stats;
	uint32_t *sojourn_bins;
};

const char *
pps_linkem_aqm_name(pps_linkem_aqm_t aqm)
{
	switch (aqm) {
	case PPS_LINKEM_AQM_DROPTAIL:
		return "droptail";
	case PPS_LINKEM_AQM_DRD:
		return "drd";
	}
	return NULL;
}

int
pps_linkem_aqm_from_name(const char *name, pps_linkem_aqm_t *aqm)
{
	if (strcmp(name, "droptail") == 0)
		*aqm = PPS_LINKEM_AQM_DROPTAIL;
	else if (strcmp(name, "drd") == 0)
		*aqm = PPS_LINKEM_AQM_DRD;
	else
		return -EINVAL;
	return 0;
}

const char *
pps_linkem_verdict_name(pps_linkem_verdict_t verdict)
{
	switch (verdict) {
	case PPS_LINKEM_VERDICT_QUEUED:
		return "queued";
	case PPS_LINKEM_VERDICT_MARKED:
		return "marked";
	case PPS_LINKEM_VERDICT_DROP_LOSS:
		return "drop-loss";
	case PPS_LINKEM_VERDICT_DROP_QUEUE:
		return "drop-queue";
	case PPS_LINKEM_VERDICT_DROP_AQM:
		return "drop-aqm";
	case PPS_LINKEM_VERDICT_DROP_OVERSIZE:
		return "drop-oversize";
	case PPS_LINKEM_VERDICT_DROP_OVERFLOW:
		return "drop-overflow";
	}
	return "unknown";
}

int
pps_linkem_link_config_check(const pps_linkem_link_config_t *config, char *err, size_t err_size)
{
	if (!config->trace && config->rate_bps == 0) {
		snprintf(err, err_size, "rate must be > 0 bit/s (or give a trace)");
		return -EINVAL;
	}
	if (config->delay_ns < 0) {
		snprintf(err, err_size, "delay must be >= 0");
		return -EINVAL;
	}
	if (config->queue_limit_pkts == 0 || config->queue_limit_bytes == 0) {
		snprintf(err, err_size, "queue limits must be > 0 packets and > 0 bytes");
		return -EINVAL;
	}
	if (config->queue_limit_pkts > PPS_LINKEM_LINK_MAX_PKTS) {
		snprintf(err, err_size, "queue limit must be <= %d packets",
		         PPS_LINKEM_LINK_MAX_PKTS);
		return -EINVAL;
	}
	if (!(config->loss_probability >= 0 && config->loss_probability <= 1)) {
		snprintf(err, err_size, "loss probability must lie in [0, 1]");
		return -EINVAL;
	}
	if (config->aqm == PPS_LINKEM_AQM_DRD &&
	    config->drd_congest_bytes <= config->drd_min_bytes) {
		snprintf(err, err_size, "DRD needs drdmin < drdcongest (got %llu and %llu bytes)",
		         (unsigned long long)config->drd_min_bytes,
		         (unsigned long long)config->drd_congest_bytes);
		return -EINVAL;
	}
	return 0;
}

pps_linkem_link_t *
pps_linkem_link_new(const pps_linkem_link_config_t *config)
{
	pps_linkem_link_t *link;
	char err[128];

	if (pps_linkem_link_config_check(config, err, sizeof(err)) < 0) {
		errno = EINVAL;
		return NULL;
	}
	link = calloc(1, sizeof(*link));
	if (!link)
		goto err_link;
	link->ring = calloc(PPS_LINKEM_LINK_MAX_PKTS, sizeof(*link->ring));
	if (!link->ring)
		goto err_ring;
	/* calloc'd pages are only touched by the bins a run actually uses. */
	link->sojourn_bins = calloc(SOJOURN_BINS, sizeof(*link->sojourn_bins));
	if (!link->sojourn_bins)
		goto err_bins;
	link->config = *config;
	link->random_state = config->seed ? config->seed : 0x9e3779b97f4a7c15ULL;
	link->opportunity_credit_bytes = PPS_LINKEM_TRACE_OPPORTUNITY_BYTES;
	return link;

err_bins:
	free(link->ring);
err_ring:
	free(link);
err_link:
	errno = ENOMEM;
	return NULL;
}

void
pps_linkem_link_free(pps_linkem_link_t *link)
{
	if (!link)
		return;
	for (uint64_t seq = link->head_seq; seq < link->tail_seq; seq++)
		free(link->ring[seq % PPS_LINKEM_LINK_MAX_PKTS].data);
	free(link->popped);
	free(link->sojourn_bins);
	free(link->ring);
	free(link);
}

/* splitmix64: small, seedable, and good enough for Bernoulli trials. */
static double
link_random_uniform(pps_linkem_link_t *link)
{
	uint64_t z = (link->random_state += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	z ^= z >> 31;
	return (double)(z >> 11) * 0x1.0p-53;
}

/* Moves packets whose last bit has left the bottleneck by @now_ns into the delay line. */
static void
link_queue_advance(pps_linkem_link_t *link, int64_t now_ns)
{
	while (link->queue_seq < link->tail_seq) {
		link_packet_t *p = &link->ring[link->queue_seq % PPS_LINKEM_LINK_MAX_PKTS];

		if (p->departure_ns > now_ns)
			break;
		link->queue_bytes -= p->size_bytes;
		link->queue_seq++;
	}
}

/*
 * Departure time of a packet of @size_bytes accepted at @now_ns behind
 * everything already accepted, and the bottleneck's state updated for it.
 */
static int64_t
link_departure_schedule(pps_linkem_link_t *link, int64_t now_ns, uint32_t size_bytes)
{
	const pps_linkem_trace_t *trace = link->config.trace;
	uint64_t need_bytes = size_bytes;
	int64_t start_ns;

	if (!trace) {
		/* size * 8e9 fits easily: sizes are < 2^14 bytes. */
		int64_t serialization_ns =
		    (int64_t)(((uint64_t)size_bytes * 8000000000ULL + link->config.rate_bps / 2) /
		              link->config.rate_bps);

		start_ns = now_ns > link->busy_until_ns ? now_ns : link->busy_until_ns;
		link->busy_until_ns = start_ns + serialization_ns;
		return link->busy_until_ns;
	}

	/*
	 * mahimahi: an opportunity that finds the queue empty is wasted, and so is
	 * what is left of one after the queue empties. A packet arriving after the
	 * current opportunity therefore starts on the first opportunity at or after
	 * its arrival with a full 1500 bytes. A packet larger than what is left
	 * spends the rest and continues on the following opportunities.
	 */
	if (!link->opportunity_started ||
	    link->config.trace_epoch_ns +
	            pps_linkem_trace_opportunity_ns(trace, link->opportunity_index) <
	        now_ns) {
		link->opportunity_index =
		    pps_linkem_trace_first_at_or_after(trace, now_ns - link->config.trace_epoch_ns);
		link->opportunity_credit_bytes = PPS_LINKEM_TRACE_OPPORTUNITY_BYTES;
		link->opportunity_started = true;
	}
	while (need_bytes > link->opportunity_credit_bytes) {
		need_bytes -= link->opportunity_credit_bytes;
		link->opportunity_index++;
		link->opportunity_credit_bytes = PPS_LINKEM_TRACE_OPPORTUNITY_BYTES;
	}
	link->opportunity_credit_bytes -= need_bytes;
	return link->config.trace_epoch_ns +
	       pps_linkem_trace_opportunity_ns(trace, link->opportunity_index);
}

/*
 * DRD, the RED variant of the papers: no early action below drdmin; between
 * drdmin and drdcongest mark CE on a fraction of ECN-capable packets that grows
 * linearly with the instantaneous queue, from 0 at drdmin to 1 at drdcongest;
 * drop every packet that finds the queue above drdcongest. Packets that are not
 * ECN-capable pass in the marking region unless drd_drop_not_ect asks for
 * RED's early drop instead.
 */
static pps_linkem_verdict_t
link_drd_decide(pps_linkem_link_t *link, uint8_t ecn)
{
	const pps_linkem_link_config_t *c = &link->config;
	double fraction;

	if (link->queue_bytes > c->drd_congest_bytes)
		return PPS_LINKEM_VERDICT_DROP_AQM;
	if (link->queue_bytes <= c->drd_min_bytes)
		return PPS_LINKEM_VERDICT_QUEUED;
	fraction = (double)(link->queue_bytes - c->drd_min_bytes) /
	           (double)(c->drd_congest_bytes - c->drd_min_bytes);
	if (ecn == 3)
		return PPS_LINKEM_VERDICT_QUEUED; /* already CE: nothing to add */
	if (link_random_uniform(link) >= fraction)
		return PPS_LINKEM_VERDICT_QUEUED;
	if (ecn != 0)
		return PPS_LINKEM_VERDICT_MARKED;
	return c->drd_drop_not_ect ? PPS_LINKEM_VERDICT_DROP_AQM : PPS_LINKEM_VERDICT_QUEUED;
}

static void
link_count_drop(pps_linkem_link_t *link, pps_linkem_verdict_t verdict)
{
	switch (verdict) {
	case PPS_LINKEM_VERDICT_DROP_LOSS:
		link->stats.lost_pkts++;
		break;
	case PPS_LINKEM_VERDICT_DROP_QUEUE:
		link->stats.dropped_queue_pkts++;
		break;
	case PPS_LINKEM_VERDICT_DROP_AQM:
		link->stats.dropped_aqm_pkts++;
		break;
	default:
		link->stats.dropped_other_pkts++;
		break;
	}
}

int
pps_linkem_link_packet_offer(pps_linkem_link_t *link, int64_t now_ns, const uint8_t *packet,
                             size_t size_bytes, pps_linkem_offer_t *offer)
{
	const pps_linkem_link_config_t *c = &link->config;
	pps_linkem_verdict_t verdict = PPS_LINKEM_VERDICT_QUEUED;
	link_packet_t *slot;
	uint64_t sojourn_bin;
	uint8_t *copy;

	memset(offer, 0, sizeof(*offer));
	link->stats.arrived_pkts++;
	link->stats.arrived_bytes += size_bytes;
	link_queue_advance(link, now_ns);
	offer->ecn = pps_linkem_packet_ecn(packet, size_bytes);
	offer->queue_bytes_seen = link->queue_bytes;

	if (size_bytes == 0 || size_bytes > PPS_LINKEM_LINK_MAX_PACKET_BYTES)
		verdict = PPS_LINKEM_VERDICT_DROP_OVERSIZE;
	else if (c->loss_probability > 0 && link_random_uniform(link) < c->loss_probability)
		verdict = PPS_LINKEM_VERDICT_DROP_LOSS;
	else if (link->tail_seq - link->queue_seq + 1 > c->queue_limit_pkts ||
	         link->queue_bytes + size_bytes > c->queue_limit_bytes)
		verdict = PPS_LINKEM_VERDICT_DROP_QUEUE;
	else if (c->aqm == PPS_LINKEM_AQM_DRD)
		verdict = link_drd_decide(link, offer->ecn);
	if (verdict == PPS_LINKEM_VERDICT_QUEUED || verdict == PPS_LINKEM_VERDICT_MARKED) {
		if (link->tail_seq - link->head_seq >= PPS_LINKEM_LINK_MAX_PKTS)
			verdict = PPS_LINKEM_VERDICT_DROP_OVERFLOW;
	}
	if (verdict != PPS_LINKEM_VERDICT_QUEUED && verdict != PPS_LINKEM_VERDICT_MARKED) {
		link_count_drop(link, verdict);
		offer->verdict = verdict;
		offer->queue_pkts = link->tail_seq - link->queue_seq;
		offer->queue_bytes = link->queue_bytes;
		return 0;
	}

	copy = malloc(size_bytes);
	if (!copy) {
		link->stats.dropped_other_pkts++;
		offer->verdict = PPS_LINKEM_VERDICT_DROP_OVERFLOW;
		return -ENOMEM;
	}
	memcpy(copy, packet, size_bytes);
	if (verdict == PPS_LINKEM_VERDICT_MARKED) {
		pps_linkem_packet_mark_ce(copy, size_bytes);
		link->stats.marked_pkts++;
	}

	slot = &link->ring[link->tail_seq % PPS_LINKEM_LINK_MAX_PKTS];
	slot->data = copy;
	slot->size_bytes = (uint32_t)size_bytes;
	slot->departure_ns = link_departure_schedule(link, now_ns, slot->size_bytes);
	slot->delivery_ns = slot->departure_ns + c->delay_ns;
	link->tail_seq++;
	link->queue_bytes += size_bytes;

	offer->verdict = verdict;
	offer->departure_ns = slot->departure_ns;
	offer->delivery_ns = slot->delivery_ns;
	offer->queue_pkts = link->tail_seq - link->queue_seq;
	offer->queue_bytes = link->queue_bytes;
	if (offer->queue_pkts > link->stats.max_queue_pkts)
		link->stats.max_queue_pkts = offer->queue_pkts;
	if (offer->queue_bytes > link->stats.max_queue_bytes)
		link->stats.max_queue_bytes = offer->queue_bytes;

	sojourn_bin = (uint64_t)(slot->departure_ns - now_ns) / SOJOURN_BIN_NS;
	link->sojourn_bins[sojourn_bin < SOJOURN_BINS - 1 ? sojourn_bin : SOJOURN_BINS - 1]++;
	if (slot->departure_ns - now_ns > link->stats.sojourn_max_ns)
		link->stats.sojourn_max_ns = slot->departure_ns - now_ns;
	return 0;
}

int64_t
pps_linkem_link_next_delivery_ns(const pps_linkem_link_t *link)
{
	if (link->head_seq == link->tail_seq)
		return INT64_MAX;
	return link->ring[link->head_seq % PPS_LINKEM_LINK_MAX_PKTS].delivery_ns;
}

size_t
pps_linkem_link_packet_pop(pps_linkem_link_t *link, int64_t now_ns, const uint8_t **packet)
{
	link_packet_t *p;

	free(link->popped);
	link->popped = NULL;
	if (link->head_seq == link->tail_seq)
		return 0;
	p = &link->ring[link->head_seq % PPS_LINKEM_LINK_MAX_PKTS];
	if (p->delivery_ns > now_ns)
		return 0;
	/* Delivered means departed: keep the queue boundary behind the head. */
	if (link->queue_seq == link->head_seq) {
		link->queue_bytes -= p->size_bytes;
		link->queue_seq++;
	}
	link->head_seq++;
	link->popped = p->data;
	p->data = NULL;
	link->stats.delivered_pkts++;
	link->stats.delivered_bytes += p->size_bytes;
	*packet = link->popped;
	return p->size_bytes;
}

/* Upper edge of the bin holding the @fraction quantile, in ns. */
static int64_t
link_sojourn_quantile_ns(const pps_linkem_link_t *link, uint64_t total, double fraction)
{
	uint64_t rank = (uint64_t)((double)total * fraction + 0.5), seen = 0;

	if (total == 0)
		return 0;
	if (rank == 0)
		rank = 1;
	for (uint64_t bin = 0; bin < SOJOURN_BINS; bin++) {
		seen += link->sojourn_bins[bin];
		if (seen >= rank) {
			int64_t edge_ns = (int64_t)((bin + 1) * SOJOURN_BIN_NS);

			return edge_ns < link->stats.sojourn_max_ns ? edge_ns
			                                            : link->stats.sojourn_max_ns;
		}
	}
	return link->stats.sojourn_max_ns;
}

void
pps_linkem_link_stats_get(const pps_linkem_link_t *link, pps_linkem_link_stats_t *stats)
{
	uint64_t accepted = 0;

	*stats = link->stats;
	for (uint64_t bin = 0; bin < SOJOURN_BINS; bin++)
		accepted += link->sojourn_bins[bin];
	stats->sojourn_p50_ns = link_sojourn_quantile_ns(link, accepted, 0.50);
	stats->sojourn_p95_ns = link_sojourn_quantile_ns(link, accepted, 0.95);
	stats->sojourn_p99_ns = link_sojourn_quantile_ns(link, accepted, 0.99);
}

uint8_t
pps_linkem_packet_ecn(const uint8_t *packet, size_t size_bytes)
{
	if (size_bytes >= 20 && (packet[0] >> 4) == 4)
		return packet[1] & 3;
	if (size_bytes >= 40 && (packet[0] >> 4) == 6)
		return (packet[1] >> 4) & 3;
	return 0;
}

int
pps_linkem_packet_mark_ce(uint8_t *packet, size_t size_bytes)
{
	if (size_bytes >= 20 && (packet[0] >> 4) == 4) {
		size_t header_bytes = (size_t)(packet[0] & 0x0f) * 4;
		uint32_t sum = 0;

		if ((packet[1] & 3) == 0 || header_bytes < 20 || header_bytes > size_bytes)
			return -EINVAL;
		packet[1] |= 3;
		/* Recomputed in full (RFC 791) rather than incrementally: 20-60 bytes. */
		packet[10] = packet[11] = 0;
		for (size_t i = 0; i < header_bytes; i += 2)
			sum += (uint32_t)packet[i] << 8 | packet[i + 1];
		while (sum >> 16)
			sum = (sum & 0xffff) + (sum >> 16);
		sum = ~sum & 0xffff;
		packet[10] = (uint8_t)(sum >> 8);
		packet[11] = (uint8_t)sum;
		return 0;
	}
	if (size_bytes >= 40 && (packet[0] >> 4) == 6) {
		if (((packet[1] >> 4) & 3) == 0)
			return -EINVAL;
		packet[1] |= 0x30;
		return 0;
	}
	return -EINVAL;
}
