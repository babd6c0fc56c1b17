/* SPDX-License-Identifier: MIT */
/*
 * The one path for log lines a server can cause: at most a burst of lines
 * per interval in front of a stream (as the kernel's printk_ratelimit), and
 * a count of the lines held back. The count is written once, as a line of
 * its own, when the next interval lets a line through, or at
 * pps_peer_log_flush() (exit), so a reader learns what it did not see and a
 * hostile server cannot grow the log faster than burst / interval.
 */
#include "pps-client-internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>

struct pps_peer_log {
	FILE *out;
	pps_peer_log_format_t format;
	unsigned burst, lines; /* lines written in this interval */
	int64_t interval_us;
	int64_t interval_start_us; /* 0: none began */
	uint64_t suppressed, suppressed_total;
};

pps_peer_log_t *
pps_peer_log_new(FILE *out, pps_peer_log_format_t format, unsigned burst, int64_t interval_us)
{
	pps_peer_log_t *pl;

	if (burst == 0 || interval_us <= 0 || (unsigned)format > PPS_PEER_LOG_JSON) {
		errno = EINVAL;
		return NULL;
	}
	pl = calloc(1, sizeof(*pl));
	if (!pl) {
		errno = ENOMEM;
		return NULL;
	}
	pl->out = out;
	pl->format = format;
	pl->burst = burst;
	pl->interval_us = interval_us;
	return pl;
}

void
pps_peer_log_free(pps_peer_log_t *pl)
{
	free(pl);
}

/* The count of the lines held back, as a line of its own. */
static void
write_suppressed(pps_peer_log_t *pl)
{
	if (!pl->suppressed)
		return;
	if (pl->format == PPS_PEER_LOG_JSON)
		fprintf(pl->out, "{\"type\":\"log_suppressed\",\"lines\":%" PRIu64 "}\n",
		        pl->suppressed);
	else
		fprintf(pl->out,
		        "pps-client: %" PRIu64 " more message%s caused by the server not shown "
		        "(at most %u in %.0f s)\n",
		        pl->suppressed, pl->suppressed == 1 ? "" : "s", pl->burst,
		        (double)pl->interval_us / 1e6);
	pl->suppressed = 0;
}

bool
pps_peer_log_allow(pps_peer_log_t *pl, int64_t now_us)
{
	if (!pl->out)
		return false;
	/* A new interval (or a real-time clock that stepped back): the limit
	 * lifts, and what it held back is said first. */
	if (!pl->interval_start_us || now_us < pl->interval_start_us ||
	    now_us - pl->interval_start_us >= pl->interval_us) {
		pl->interval_start_us = now_us;
		pl->lines = 0;
		write_suppressed(pl);
	}
	if (pl->lines >= pl->burst) {
		pl->suppressed++;
		pl->suppressed_total++;
		return false;
	}
	pl->lines++;
	return true;
}

void
pps_peer_log_printf(pps_peer_log_t *pl, int64_t now_us, const char *format, ...)
{
	va_list ap;

	if (!pps_peer_log_allow(pl, now_us))
		return;
	va_start(ap, format);
	vfprintf(pl->out, format, ap);
	va_end(ap);
}

void
pps_peer_log_flush(pps_peer_log_t *pl)
{
	if (pl->out)
		write_suppressed(pl);
}

uint64_t
pps_peer_log_suppressed(const pps_peer_log_t *pl)
{
	return pl->suppressed_total;
}
