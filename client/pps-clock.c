/* SPDX-License-Identifier: MIT */
/*
 * The clock: the server's clock offset from CLOCK_PING/CLOCK_PONG samples,
 * keeping the sample with the smallest round trip (its offset error is at
 * most half that round trip), and conversion of server times to ours.
 */
#include "pps-client-internal.h"
#include "pps-names.h"
#include "pps-time.h"

#include <errno.h>
#include <stdlib.h>
#include <time.h>

const char *const pps_clock_mode_names[] = {
    [PPS_CLOCK_AUTO] = "auto",
    [PPS_CLOCK_SHARED] = "shared",
    [PPS_CLOCK_ESTIMATE] = "estimate",
    [PPS_CLOCK_MODE_COUNT] = NULL,
};
_Static_assert(sizeof(pps_clock_mode_names) / sizeof(pps_clock_mode_names[0]) ==
                   PPS_CLOCK_MODE_COUNT + 1,
               "a name for every pps_clock_mode_t");

struct pps_clock {
	pps_clock_mode_t mode;
	bool have_offset;
	int64_t offset_us; /* server clock - client clock */
	int64_t best_rtt_us;
	int64_t last_rtt_us;
};

int64_t
pps_client_realtime_us(void *unused)
{
	(void)unused;
	return pps_time_realtime_us();
}

const char *
pps_clock_mode_name(pps_clock_mode_t mode)
{
	return pps_names_get(pps_clock_mode_names, (int)mode, "unknown");
}

int
pps_clock_mode_from_name(const char *name, pps_clock_mode_t *out)
{
	int i = pps_names_find(pps_clock_mode_names, name);

	if (i < 0)
		return i;
	*out = (pps_clock_mode_t)i;
	return 0;
}

pps_clock_t *
pps_clock_new(pps_clock_mode_t mode)
{
	pps_clock_t *c;

	if ((unsigned)mode >= PPS_CLOCK_MODE_COUNT) {
		errno = EINVAL;
		return NULL;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		errno = ENOMEM;
		return NULL;
	}
	c->mode = mode;
	return c;
}

void
pps_clock_free(pps_clock_t *c)
{
	free(c);
}

void
pps_clock_reset(pps_clock_t *c)
{
	c->have_offset = false;
	c->offset_us = c->best_rtt_us = c->last_rtt_us = 0;
}

int
pps_clock_pong(pps_clock_t *c, const pps_wire_clock_pong_t *p, int64_t now_us)
{
	int64_t rtt = (now_us - p->client_send_us) - (p->server_send_us - p->server_recv_us);
	int64_t offset =
	    ((p->server_recv_us - p->client_send_us) + (p->server_send_us - now_us)) / 2;

	if (rtt < 0 || p->client_send_us > now_us)
		return -EINVAL; /* not a sample we can trust */
	c->last_rtt_us = rtt;
	if (!c->have_offset || rtt < c->best_rtt_us) {
		c->have_offset = true;
		c->best_rtt_us = rtt;
		c->offset_us = offset;
	}
	return 0;
}

int64_t
pps_clock_to_client(const pps_clock_t *c, int64_t server_us)
{
	if (!c->have_offset || c->mode == PPS_CLOCK_SHARED)
		return server_us;
	if (c->mode == PPS_CLOCK_AUTO && llabs(c->offset_us) <= c->best_rtt_us / 2)
		return server_us; /* indistinguishable from a shared clock */
	return server_us - c->offset_us;
}

bool
pps_clock_have_offset(const pps_clock_t *c)
{
	return c->have_offset;
}

int64_t
pps_clock_offset_us(const pps_clock_t *c)
{
	return c->offset_us;
}

int64_t
pps_clock_best_rtt_us(const pps_clock_t *c)
{
	return c->best_rtt_us;
}

int64_t
pps_clock_last_rtt_us(const pps_clock_t *c)
{
	return c->last_rtt_us;
}
