/* SPDX-License-Identifier: MIT */
/*
 * Whether the windows carry B frames: the droppable temporal layer pays only
 * where a regulator drops (under competition, on a collapsing path); on an
 * idle or steady path it only makes each window wait for its last frame.
 * Competing for a queue, a window can be cut any moment (the stream's share
 * is a few packets a round trip): that counts as a drop before the first.
 * A client's start is the same until its path has been read: the first
 * windows go out at the encoder's first rates, before the loop knows the
 * path, and a base anchor cut then costs the client its GOP.
 */
#include "pps-adapt.h"

#include <errno.h>
#include <stdlib.h>

const char *const pps_b_frames_names[] = {
    [PPS_B_FRAMES_ALWAYS] = "always",
    [PPS_B_FRAMES_ON_DROPS] = "on-drops",
    [PPS_B_FRAMES_ON_CUTS] = "on-cuts",
    [PPS_B_FRAMES_POLICY_COUNT] = NULL,
};
_Static_assert(sizeof(pps_b_frames_names) / sizeof(pps_b_frames_names[0]) ==
                   PPS_B_FRAMES_POLICY_COUNT + 1,
               "a name for every pps_b_frames_policy_t");

struct pps_b_frames {
	pps_b_frames_params_t params;
	bool on;
	int64_t last_drop_us;     /* while on: the last drop */
	int64_t anchors_since_us; /* while off: when the anchors came back */
	int64_t hold_us;          /* the hold in force */
	bool for_start;           /* on only for a client's start: no drop since */
	uint64_t switches;
};

pps_b_frames_t *
pps_b_frames_new(const pps_b_frames_params_t *params)
{
	pps_b_frames_t *b;

	if ((unsigned)params->policy >= PPS_B_FRAMES_POLICY_COUNT || params->hold_us <= 0) {
		errno = EINVAL;
		return NULL;
	}
	b = calloc(1, sizeof(*b));
	if (!b) {
		errno = ENOMEM;
		return NULL;
	}
	b->params = *params;
	b->on = params->policy == PPS_B_FRAMES_ALWAYS;
	b->hold_us = params->hold_us;
	return b;
}

void
pps_b_frames_free(pps_b_frames_t *b)
{
	free(b);
}

bool
pps_b_frames_update(pps_b_frames_t *b, int64_t now_us, bool dropped, bool competing, bool starting)
{
	if (b->params.policy != PPS_B_FRAMES_ON_CUTS)
		dropped = dropped || competing;
	if (b->params.policy == PPS_B_FRAMES_ALWAYS)
		return b->on;
	if (dropped) {
		b->last_drop_us = now_us;
		b->for_start = false;
		if (!b->on) {
			/* The anchors did not last one hold: hold longer next time. */
			if (now_us - b->anchors_since_us < b->hold_us &&
			    b->hold_us < b->params.hold_us * PPS_B_FRAMES_MAX_HOLDS)
				b->hold_us *= 2;
			b->on = true;
			b->switches++;
		}
	} else if (starting) {
		(void)pps_b_frames_join(b);
	} else if (b->on && b->for_start) {
		/* Every start read clean, and nothing dropped since: no hold. */
		b->on = false;
		b->for_start = false;
		b->anchors_since_us = now_us;
		b->switches++;
	} else if (b->on && now_us - b->last_drop_us >= b->hold_us) {
		b->on = false;
		b->anchors_since_us = now_us;
		b->switches++;
	} else if (!b->on && now_us - b->anchors_since_us >= b->hold_us) {
		b->hold_us = b->params.hold_us; /* clean for a whole hold: back to the first */
	}
	return b->on;
}

bool
pps_b_frames_join(pps_b_frames_t *b)
{
	if (b->params.policy == PPS_B_FRAMES_ALWAYS || b->on)
		return false;
	b->on = true;
	b->for_start = true;
	b->switches++;
	return true;
}

bool
pps_b_frames_on(const pps_b_frames_t *b)
{
	return b->on;
}

bool
pps_b_frames_for_start(const pps_b_frames_t *b)
{
	return b->on && b->for_start;
}

int64_t
pps_b_frames_hold_us(const pps_b_frames_t *b)
{
	return b->hold_us;
}

uint64_t
pps_b_frames_switches(const pps_b_frames_t *b)
{
	return b->switches;
}
