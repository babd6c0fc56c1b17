/* SPDX-License-Identifier: MIT */
/*
 * From every client's path estimate to the settings of the one layered
 * encoding they share.
 *
 * The base layer is what every client must receive whole (a lost base P
 * leaves the rest of its GOP undecodable), so it is sized to fit comfortably
 * inside the slowest client's estimate: base_share_pct of it. The enhancement
 * layers span from there up to probe_pct of the fastest client's estimate (with
 * several enhancement layers, the clients' estimates in between mark the
 * steps), so each client receives as many layers as its path carries and the
 * priority-progress regulator drops the rest at the window deadline: sending
 * a little more than fits is how a path's spare capacity shows up in its
 * delivery rate, and it costs no latency because what does not fit is dropped
 * in priority order, not queued. A client whose estimate is its tcp-friendly
 * rate (rate_capped) gets no probe, and 85% of that rate: its AIMD finds the
 * rate and takes 30% off at a loss, and data beyond it would only keep every
 * window waiting until its deadline.
 *
 * Such a top is a rate to fill, and the AIMD only grows while it is filled
 * (its ceiling is 3/2 of what was acknowledged). So a capped top is shared
 * by what the layers below actually produce (a smoothed encoded rate, 5/4 of
 * it, at most their target), not by their targets: easy content leaves most
 * of the base's share unused (ball's base made 30 of its 165 kbit/s beside
 * 20 cubic flows), and that share goes to the layer above instead of being
 * lost; and a layer under a capped top gets a finer CRF below 80% of its
 * rate instead of 1/2, a coarser one above 95% instead of 85% (a rate held at
 * 3/2 of what was sent leaves a layer at 2/3 of it: above 1/2, the CRF would
 * never move and the rate never grow; and between 1/2 and 85% the stream
 * would leave up to half of its share unsent).
 *
 * The slowest estimate the base is sized to is its lowest over base_memory_us
 * (a GOP by default): a client whose estimate is a tcp-friendly AIMD swings
 * by 30% every few round trips, and a base that followed it up was too large
 * for the path at each trough, where nothing of it may be dropped (the
 * layers above still follow the latest estimates, so the total does not
 * shrink: what the base leaves goes to them, and the regulator drops it if
 * it does not fit).
 *
 * Per-frame bound: the VBV buffer is the largest frame x264 may produce at the
 * VBV rate. The base's is half of what the slowest client can carry between
 * a window's last capture and its deadline (budget - window - min RTT/2), so
 * no base picture, IDR included, can miss the deadline by its size alone.
 * Enhancement layers keep half a second: their pictures may be dropped, and
 * x264 undershoots a rate badly under a buffer of a few frames.
 *
 * CRF: x264 codes each layer at constant quality (CRF) under its VBV cap.
 * Content that needs fewer bits than the cap would leave capacity unused, so
 * a layer producing less than half its rate (80% under a capped top, above)
 * gets a finer CRF (down to min_crf) and a layer pressing on its cap (over
 * 85%, 95% under a capped top) returns towards the configured CRF, which is therefore the coarsest
 * quality the loop ever asks for.
 */
#include "pps-adapt.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define MIN_ENHANCEMENT_KBPS   PPS_RATEALLOC_MIN_ENHANCEMENT_KBPS
#define INCREASE_THRESHOLD_PCT 110
#define DECREASE_THRESHOLD_PCT 90
#define MAX_STEP_UP_PCT        125
/* Under a capped top: a layer below it counts as this % of what it
 * produced (smoothed); a layer below FINER_CAPPED_PCT of its rate gets a
 * finer CRF (FINER_PCT otherwise), one above COARSER_CAPPED_PCT a coarser
 * one (COARSER_PCT otherwise). The band between is wider than one CRF step
 * (about 12% of rate), so a layer settles in it. */
#define USED_MARGIN_PCT 125
/* A capped top is filled to this % of the rate: the AIMD takes 30% off at
 * a loss, and what the pacer then holds back waits for the deadline. */
#define CAPPED_FILL_PCT    85
#define FINER_PCT          50
#define COARSER_PCT        85
#define FINER_CAPPED_PCT   80
#define COARSER_CAPPED_PCT 95
/* Smoothing of the encoded rate: 1/USED_EWMA_DIV of each new update. */
#define USED_EWMA_DIV 4
/* The slowest estimates of the last base_memory_us, one per update: the
 * longest memory over the shortest interval ([adapt] base_memory_ms 10000,
 * interval_ms 50). Past it the oldest goes. */
#define BASE_HISTORY (10000 / 50)

const char *const pps_adapt_mode_names[] = {
    [PPS_ADAPT_MODE_CLOSED_LOOP] = "closed-loop",
    [PPS_ADAPT_MODE_FIXED] = "fixed",
    [PPS_ADAPT_MODE_FIXED + 1] = NULL,
};
/* [adapt] mode's index is the enum value (config refers to this table). */
_Static_assert(sizeof(pps_adapt_mode_names) / sizeof(pps_adapt_mode_names[0]) ==
                   PPS_ADAPT_MODE_FIXED + 2,
               "a name for every pps_adapt_mode_t");

struct pps_ratealloc {
	pps_ratealloc_params_t params;
	pps_layer_rates_t current;
	int64_t last_update_us;
	bool updated;
	/* Each layer's encoded rate, smoothed over the updates (IDRs
	 * included); valid once an update had encoded_bps. */
	uint64_t used_bps[PPS_ADAPT_MAX_LAYERS];
	bool have_used;
	/* The slowest client's estimate at recent updates, oldest first
	 * (ring of BASE_HISTORY from base_head). */
	struct {
		int64_t t_us;
		uint64_t bps;
	} base_history[BASE_HISTORY];
	size_t base_head, base_count;
};

static int
clamp_int(int64_t v, int64_t lo, int64_t hi)
{
	return (int)(v < lo ? lo : v > hi ? hi : v);
}

pps_ratealloc_t *
pps_ratealloc_new(const pps_ratealloc_params_t *params)
{
	pps_ratealloc_t *ra;

	if (!params || params->quality_layers < 1 ||
	    params->quality_layers > PPS_ADAPT_MAX_LAYERS || params->base_share_pct < 1 ||
	    params->base_share_pct > 100 || params->probe_pct < 50 || params->min_base_kbps < 1 ||
	    params->interval_us <= 0 || params->window_us <= 0) {
		errno = EINVAL;
		return NULL;
	}
	for (int q = 0; q < params->quality_layers; q++) {
		if (params->max_kbps[q] < (q ? MIN_ENHANCEMENT_KBPS : params->min_base_kbps) ||
		    params->max_crf[q] < params->min_crf) {
			errno = EINVAL;
			return NULL;
		}
	}
	ra = calloc(1, sizeof(*ra));
	if (!ra) {
		errno = ENOMEM;
		return NULL;
	}
	ra->params = *params;
	for (int q = 0; q < params->quality_layers; q++) {
		ra->current.kbps[q] = params->max_kbps[q];
		ra->current.buffer_kbit[q] = params->max_kbps[q] / 2;
		ra->current.crf[q] = params->max_crf[q];
	}
	return ra;
}

void
pps_ratealloc_free(pps_ratealloc_t *ra)
{
	free(ra);
}

void
pps_ratealloc_get(const pps_ratealloc_t *ra, pps_layer_rates_t *out)
{
	*out = ra->current;
}

typedef struct {
	uint64_t bps;
	bool capped;
} est_t;

/* Adds the slowest estimate of this update (at most one per interval);
 * returns the lowest of those within base_memory_us. */
static uint64_t
base_low(pps_ratealloc_t *ra, int64_t now_us, uint64_t bps)
{
	uint64_t low = bps;

	if (ra->params.base_memory_us <= 0)
		return bps;
	while (ra->base_count > 0 &&
	       (ra->base_count == BASE_HISTORY ||
	        now_us - ra->base_history[ra->base_head].t_us > ra->params.base_memory_us)) {
		ra->base_head = (ra->base_head + 1) % BASE_HISTORY;
		ra->base_count--;
	}
	ra->base_history[(ra->base_head + ra->base_count) % BASE_HISTORY].t_us = now_us;
	ra->base_history[(ra->base_head + ra->base_count) % BASE_HISTORY].bps = bps;
	ra->base_count++;
	for (size_t i = 0; i < ra->base_count; i++) {
		uint64_t v = ra->base_history[(ra->base_head + i) % BASE_HISTORY].bps;

		if (v < low)
			low = v;
	}
	return low;
}

static int
compare_est(const void *a, const void *b)
{
	uint64_t x = ((const est_t *)a)->bps, y = ((const est_t *)b)->bps;

	return x < y ? -1 : x > y;
}

/* Hysteresis: decreases at once, increases of 10% or more, at most x1.25. */
static int
step(int current, int wanted)
{
	if ((int64_t)wanted * 100 <= (int64_t)current * DECREASE_THRESHOLD_PCT)
		return wanted;
	if ((int64_t)wanted * 100 >= (int64_t)current * INCREASE_THRESHOLD_PCT) {
		int64_t most = (int64_t)current * MAX_STEP_UP_PCT / 100;

		return wanted < most ? wanted : (int)most;
	}
	return current;
}

int
pps_ratealloc_update(pps_ratealloc_t *ra, int64_t now_us, const pps_ratealloc_client_t *clients,
                     size_t n, const uint64_t *encoded_bps, pps_layer_rates_t *out)
{
	const pps_ratealloc_params_t *p = &ra->params;
	const int layers = p->quality_layers;
	est_t est[PPS_ADAPT_MAX_CLIENTS];
	size_t m = 0;
	uint32_t slow_rtt_us = 0;
	uint64_t slow_bps = 0;
	pps_layer_rates_t next = ra->current;
	int64_t slack_us, below = 0, below_used = 0;
	bool capped[PPS_ADAPT_MAX_LAYERS] = {false};
	int changed = 0;

	if (ra->updated && now_us - ra->last_update_us < p->interval_us)
		return 0;
	ra->updated = true;
	ra->last_update_us = now_us;
	for (int q = 0; encoded_bps && q < layers; q++) {
		if (!ra->have_used)
			ra->used_bps[q] = encoded_bps[q];
		else if (encoded_bps[q] >= ra->used_bps[q])
			ra->used_bps[q] += (encoded_bps[q] - ra->used_bps[q]) / USED_EWMA_DIV;
		else
			ra->used_bps[q] -= (ra->used_bps[q] - encoded_bps[q]) / USED_EWMA_DIV;
	}
	if (encoded_bps)
		ra->have_used = true;

	for (size_t i = 0; i < n && m < sizeof(est) / sizeof(est[0]); i++) {
		if (!clients[i].estimate_bps)
			continue;
		if (!m || clients[i].estimate_bps < slow_bps) {
			slow_bps = clients[i].estimate_bps;
			slow_rtt_us = clients[i].min_rtt_us;
		}
		est[m].bps = clients[i].estimate_bps;
		est[m++].capped = clients[i].rate_capped;
	}
	if (m > 0) {
		uint64_t base_bps;

		qsort(est, m, sizeof(est[0]), compare_est);
		base_bps = base_low(ra, now_us, est[0].bps);
		/* Time the slowest client has to carry one base picture. */
		slack_us = p->latency_budget_us - p->window_us - slow_rtt_us / 2;
		if (slack_us < p->window_us)
			slack_us = p->window_us;

		for (int q = 0; q < layers; q++) {
			int64_t wanted_kbps, buffer;

			if (q == 0) {
				capped[q] = est[0].capped;
				wanted_kbps = (int64_t)(base_bps / 1000u) * p->base_share_pct / 100;
				wanted_kbps =
				    clamp_int(wanted_kbps, p->min_base_kbps, p->max_kbps[0]);
			} else {
				/* Top of layer q: the client at quantile q/(layers-1). */
				size_t idx =
				    (size_t)(((int64_t)(m - 1) * q + layers - 2) / (layers - 1));
				int64_t top = (int64_t)(est[idx].bps / 1000u) *
				              (est[idx].capped ? CAPPED_FILL_PCT : p->probe_pct) /
				              100;

				/* A capped top is filled by what the layers
				 * below produce, not by their targets. */
				capped[q] = est[idx].capped;
				wanted_kbps = clamp_int(top - (capped[q] ? below_used : below),
				                        MIN_ENHANCEMENT_KBPS, p->max_kbps[q]);
			}
			next.kbps[q] = step(ra->current.kbps[q], (int)wanted_kbps);
			below += next.kbps[q];
			if (ra->have_used) {
				int64_t used =
				    (int64_t)(ra->used_bps[q] / 1000u) * USED_MARGIN_PCT / 100;

				below_used += used < next.kbps[q] ? used : next.kbps[q];
			} else {
				below_used += next.kbps[q];
			}
			/* The base must arrive whole; an enhancement picture that
			 * does not fit is dropped, and a tight VBV buffer makes
			 * x264 undershoot its rate badly: half a second. */
			if (q == 0)
				buffer = (int64_t)(est[0].bps / 1000u) * slack_us / 1000000 / 2;
			else
				buffer = next.kbps[q] / 2;
			/* At least one window of the layer's rate, at most one second. */
			buffer = clamp_int(buffer, (int64_t)next.kbps[q] * p->window_us / 1000000,
			                   next.kbps[q]);
			if (buffer < 1)
				buffer = 1;
			next.buffer_kbit[q] = (int)buffer;
		}
	}
	for (int q = 0; encoded_bps && q < layers; q++) {
		uint64_t rate_bps = (uint64_t)next.kbps[q] * 1000u;
		uint64_t finer_pct = capped[q] ? FINER_CAPPED_PCT : FINER_PCT;
		uint64_t coarser_pct = capped[q] ? COARSER_CAPPED_PCT : COARSER_PCT;

		if (encoded_bps[q] * 100 < rate_bps * finer_pct && next.crf[q] > p->min_crf)
			next.crf[q]--;
		else if (encoded_bps[q] * 100 > rate_bps * coarser_pct &&
		         next.crf[q] < p->max_crf[q])
			next.crf[q]++;
	}
	for (int q = 0; q < layers; q++) {
		int old = ra->current.buffer_kbit[q], nb = next.buffer_kbit[q];

		if (next.kbps[q] != ra->current.kbps[q] || next.crf[q] != ra->current.crf[q] ||
		    (int64_t)nb * 10 > (int64_t)old * 11 || (int64_t)nb * 10 < (int64_t)old * 9)
			changed = 1;
		else
			next.buffer_kbit[q] = old;
	}
	if (changed)
		ra->current = next;
	*out = ra->current;
	return changed;
}

int
pps_drain_crf(int64_t wait_us, int64_t window_us, int max_crf)
{
	int64_t excess = wait_us - 2 * window_us, crf;

	if (max_crf <= 0 || excess <= 0)
		return 0;
	crf = PPS_DRAIN_FIRST_CRF + excess * PPS_DRAIN_CRF_PER_100MS / 100000;
	return crf > max_crf ? max_crf : (int)crf;
}
