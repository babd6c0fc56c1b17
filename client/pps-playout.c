/* SPDX-License-Identifier: MIT */
/*
 * Playout policies.
 *
 *  fixed:    display at capture time + tolerance; what is ready later is late.
 *  asap:     display as soon as the window is decoded.
 *  adaptive: display at capture time + (u + 4 v), where u and v estimate the
 *            delay and its variation (Zhang, Wang, Keshav, section 4.1, after
 *            Ramjee et al.'s algorithm 2), with alpha = 0.998002 and beta = 4.
 *            NORMAL mode: u is a running average of the delay. SPIKE mode,
 *            entered when the delay rises steeply, lets u follow the delay
 *            directly; it ends when the delay's change is no longer violent.
 *            The estimate is updated per window and applied from the next
 *            window on, so playout never jitters inside a window.
 *
 * Spike rule (the papers leave it to the implementation): enter SPIKE when a
 * window's delay exceeds the previous one by more than max(2 v + 100 ms,
 * 100 ms); track spike_var = spike_var / 2 + |2 d_i - d_{i-1} - d_{i-2}| / 8
 * and go back to NORMAL when it falls under 10 ms.
 */
#include "pps-client-internal.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>

#define ALPHA 0.998002
#define BETA 4.0
#define SPIKE_ENTER_US 100000.0
#define SPIKE_EXIT_US 10000.0

struct pps_playout {
	pps_playout_policy_t policy;
	int64_t tolerance_us;
	bool have_estimate;
	bool spike;
	double u, v;       /* delay estimate and variation, microseconds */
	double d1, d2;     /* last two delays */
	double spike_var;
	int64_t delay_us;  /* in force for the next window */
	unsigned windows;
};

const char *
pps_playout_policy_name(pps_playout_policy_t policy)
{
	switch (policy) {
	case PPS_PLAYOUT_FIXED:
		return "fixed";
	case PPS_PLAYOUT_ASAP:
		return "asap";
	case PPS_PLAYOUT_ADAPTIVE:
		return "adaptive";
	}
	return "unknown";
}

pps_playout_t *
pps_playout_new(pps_playout_policy_t policy, int64_t tolerance_us)
{
	pps_playout_t *p = calloc(1, sizeof(*p));

	if (!p) {
		errno = ENOMEM;
		return NULL;
	}
	p->policy = policy;
	p->tolerance_us = tolerance_us;
	/* Until the first window is measured the adaptive policy uses the
	 * tolerance as its guess. */
	p->delay_us = tolerance_us;
	return p;
}

void
pps_playout_free(pps_playout_t *p)
{
	free(p);
}

void
pps_playout_window(pps_playout_t *p, int64_t delay_us)
{
	double d = (double)delay_us;

	p->windows++;
	if (p->policy != PPS_PLAYOUT_ADAPTIVE)
		return;
	if (!p->have_estimate) {
		p->u = d;
		p->v = d / 8; /* a first guess of the variation, shrinks with data */
		p->d1 = p->d2 = d;
		p->have_estimate = true;
	} else {
		if (!p->spike && d - p->d1 > fmax(2 * p->v + SPIKE_ENTER_US, SPIKE_ENTER_US)) {
			p->spike = true;
			p->spike_var = 0;
		}
		if (p->spike) {
			p->spike_var = p->spike_var / 2 + fabs(2 * d - p->d1 - p->d2) / 8;
			p->u = p->u + (d - p->d1);
			if (p->spike_var < SPIKE_EXIT_US)
				p->spike = false;
		} else {
			p->u = ALPHA * p->u + (1 - ALPHA) * d;
		}
		p->v = ALPHA * p->v + (1 - ALPHA) * fabs(p->u - d);
		p->d2 = p->d1;
		p->d1 = d;
	}
	p->delay_us = (int64_t)(p->u + BETA * p->v);
	if (p->delay_us < 0)
		p->delay_us = 0;
}

int64_t
pps_playout_display_time(const pps_playout_t *p, int64_t capture_us, int64_t now_us)
{
	switch (p->policy) {
	case PPS_PLAYOUT_ASAP:
		return now_us;
	case PPS_PLAYOUT_ADAPTIVE:
		return capture_us + p->delay_us;
	case PPS_PLAYOUT_FIXED:
	default:
		return capture_us + p->tolerance_us;
	}
}

int64_t
pps_playout_delay_us(const pps_playout_t *p)
{
	return p->policy == PPS_PLAYOUT_ASAP ? 0 : p->delay_us;
}

const char *
pps_playout_mode(const pps_playout_t *p)
{
	return p->spike ? "spike" : "normal";
}
