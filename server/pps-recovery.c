/* SPDX-License-Identifier: MIT */
/*
 * When to force an IDR for clients that joined or lost base-layer data.
 *
 * Every forced IDR costs every viewer its extra bits (an intra picture is
 * several times a predicted one), so one client on a bad path, or one that
 * joins and leaves in a loop, must not set everyone's bitrate. Three bounds:
 *  - per client: a client's loss requests at least client_interval_us apart
 *    (a join is always heard);
 *  - in time: forced IDRs at least min_interval_us apart;
 *  - in bits: a token bucket filled at budget_pct % of the encoded rate, from
 *    which each forced IDR takes its estimated extra bits, holding at most one
 *    IDR.
 * An IDR's extra bits are measured on the encoder's own IDRs: what the window
 * holding it and the windows right after it carry beyond the usual window of
 * as many frames. Not the IDR pictures alone: the enhancement layers of the
 * picture after an IDR cost as much again (measured on the test pattern,
 * 640x480, 2-frame windows: IDR window +11 kbit, the next +17 kbit, then back
 * to the usual ~13 kbit).
 * A request the bounds hold back is deferred, not dropped: one IDR at the
 * earliest allowed time serves every request made meanwhile, and any IDR the
 * encoder produces after a request (a periodic one included) serves it too.
 *
 * Pure logic on the loop thread: the caller passes the time and arms a timer.
 */
#include "pps-server-lib.h"

#include <errno.h>
#include <stdlib.h>

struct pps_recovery {
	pps_recovery_params_t params;
	pps_recovery_stats_t stats;
	double tokens_bits;
	int64_t refilled_us;     /* tokens are current as of this time (0: never) */
	double encoded_bps;      /* smoothed over windows; 0 until the first */
	double frame_bits;       /* smoothed bits of a predicted picture, all layers */
	double idr_cost_bits;    /* smoothed extra bits of an IDR; 0 until the first */
	unsigned tail_windows;   /* windows of the IDR being measured (0: none) */
	double tail_excess_bits; /* their bits beyond the usual */
	int64_t last_forced_us;  /* 0: never */
	bool pending;
	int64_t pending_since_us; /* the oldest request the pending IDR serves */
};

pps_recovery_t *
pps_recovery_new(const pps_recovery_params_t *params)
{
	pps_recovery_t *r;

	if (!params || params->min_interval_us < 0 || params->client_interval_us < 0 ||
	    params->budget_pct > 100) {
		errno = EINVAL;
		return NULL;
	}
	r = calloc(1, sizeof(*r));
	if (!r) {
		errno = ENOMEM;
		return NULL;
	}
	r->params = *params;
	return r;
}

void
pps_recovery_free(pps_recovery_t *r)
{
	free(r);
}

static double
smooth(double old, double sample, double weight)
{
	return old > 0 ? old + weight * (sample - old) : sample;
}

/* The bucket holds one IDR's cost at most. */
static void
refill(pps_recovery_t *r, int64_t now_us)
{
	if (r->refilled_us && now_us > r->refilled_us)
		r->tokens_bits += (double)r->params.budget_pct / 100.0 * r->encoded_bps *
		                  (double)(now_us - r->refilled_us) / 1e6;
	if (!r->refilled_us || now_us > r->refilled_us)
		r->refilled_us = now_us;
	if (r->tokens_bits > r->idr_cost_bits)
		r->tokens_bits = r->idr_cost_bits;
}

/* An IDR's extra bits spread over at most this many windows. */
#define IDR_TAIL_MAX_WINDOWS 4

static void
finish_tail(pps_recovery_t *r)
{
	bool first = r->idr_cost_bits <= 0;

	if (!r->tail_windows)
		return;
	r->tail_windows = 0;
	r->idr_cost_bits = smooth(r->idr_cost_bits, r->tail_excess_bits, 0.5);
	if (first) /* the bucket starts full: a first joiner does not wait */
		r->tokens_bits = r->idr_cost_bits;
	r->stats.idr_cost_bits = (uint64_t)r->idr_cost_bits;
}

void
pps_recovery_add_window(pps_recovery_t *r, const pps_recovery_window_t *w)
{
	double usual_bits = r->frame_bits * w->frames;
	double excess_bits = (double)w->bits - usual_bits;

	refill(r, w->now_us);
	if (w->duration_us > 0)
		r->encoded_bps =
		    smooth(r->encoded_bps, (double)w->bits * 1e6 / (double)w->duration_us, 0.25);
	if (w->idr_bits > 0) {
		finish_tail(r);
		/* Any IDR encoded after the pending requests were made serves them. */
		if (r->pending && w->idr_capture_us >= r->pending_since_us) {
			r->pending = false;
			r->stats.served_by_encoder++;
		}
		/* Measured against the usual window, once there is one. */
		if (r->frame_bits > 0) {
			r->tail_windows = 1;
			r->tail_excess_bits = excess_bits > 0 ? excess_bits : 0;
		}
		return;
	}
	if (r->tail_windows && r->tail_windows < IDR_TAIL_MAX_WINDOWS &&
	    (double)w->bits > 1.25 * usual_bits) {
		r->tail_windows++;
		r->tail_excess_bits += excess_bits;
		return;
	}
	finish_tail(r);
	if (w->frames)
		r->frame_bits = smooth(r->frame_bits, (double)w->bits / w->frames, 0.25);
}

/* Earliest time the bounds let a forced IDR out, at or after @now_us. */
static int64_t
earliest_us(pps_recovery_t *r, int64_t now_us)
{
	int64_t when = now_us;

	if (r->last_forced_us && r->last_forced_us + r->params.min_interval_us > when)
		when = r->last_forced_us + r->params.min_interval_us;
	if (r->params.budget_pct > 0 && r->tokens_bits < r->idr_cost_bits) {
		double rate_bps = (double)r->params.budget_pct / 100.0 * r->encoded_bps;
		int64_t fill_us =
		    rate_bps > 0
		        ? (int64_t)((r->idr_cost_bits - r->tokens_bits) * 1e6 / rate_bps) + 1
		        : r->params.min_interval_us + 1;

		if (now_us + fill_us > when)
			when = now_us + fill_us;
	}
	return when;
}

/* Grants now if the bounds allow, else leaves the request pending. */
static int
decide(pps_recovery_t *r, int64_t now_us, int64_t *when_us)
{
	int64_t when;

	refill(r, now_us);
	when = earliest_us(r, now_us);
	if (when <= now_us) {
		if (r->params.budget_pct > 0)
			r->tokens_bits -= r->idr_cost_bits;
		r->last_forced_us = now_us;
		r->pending = false;
		r->stats.granted++;
		return PPS_RECOVERY_NOW;
	}
	*when_us = when;
	return PPS_RECOVERY_DEFERRED;
}

int
pps_recovery_request(pps_recovery_t *r, pps_recovery_client_t *client, bool join, int64_t now_us,
                     int64_t *when_us)
{
	int ret;

	r->stats.requests++;
	if (!join && client->last_request_us &&
	    now_us - client->last_request_us < r->params.client_interval_us) {
		r->stats.dropped_client++;
		return PPS_RECOVERY_DROPPED;
	}
	client->last_request_us = now_us;
	if (r->pending) {
		/* One IDR serves every request made before it. */
		r->stats.deferred++;
		*when_us = earliest_us(r, now_us);
		return PPS_RECOVERY_DEFERRED;
	}
	ret = decide(r, now_us, when_us);
	if (ret == PPS_RECOVERY_DEFERRED) {
		r->pending = true;
		r->pending_since_us = now_us;
		r->stats.deferred++;
	}
	return ret;
}

int
pps_recovery_poll(pps_recovery_t *r, int64_t now_us, int64_t *when_us)
{
	if (!r->pending)
		return PPS_RECOVERY_NONE;
	return decide(r, now_us, when_us);
}

void
pps_recovery_get_stats(const pps_recovery_t *r, pps_recovery_stats_t *stats)
{
	*stats = r->stats;
	stats->tokens_bits = r->tokens_bits > 0 ? (uint64_t)r->tokens_bits : 0;
}
