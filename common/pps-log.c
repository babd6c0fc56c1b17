/* SPDX-License-Identifier: MIT */
#include "pps-log.h"
#include "pps-time.h"

#include <inttypes.h>

#include <stdio.h>
#include <string.h>

void
pps_logv(const pps_log_t *log, pps_log_level_t level, const char *format, va_list ap)
{
	char message[PPS_LOG_MAX_MESSAGE_BYTES];
	int n;

	if (!log || !log->cb)
		return;
	n = vsnprintf(message, sizeof(message), format, ap);
	if (n < 0)
		return;
	if ((size_t)n >= sizeof(message))
		memcpy(message + sizeof(message) - 4, "...", 4);
	log->cb(level, message, log->user);
}

void
pps_log(const pps_log_t *log, pps_log_level_t level, const char *format, ...)
{
	va_list ap;

	va_start(ap, format);
	pps_logv(log, level, format, ap);
	va_end(ap);
}

const char *
pps_log_level_name(pps_log_level_t level)
{
	switch (level) {
	case PPS_LOG_ERROR:
		return "error";
	case PPS_LOG_WARNING:
		return "warning";
	case PPS_LOG_INFO:
		return "info";
	}
	return "?";
}

/* ---- the rate limit ------------------------------------------------------ */

static int64_t
limit_now(const pps_log_limit_t *lim)
{
	return lim->clock_cb ? lim->clock_cb(lim->clock_user) : pps_time_monotonic_us();
}

void
pps_log_limit_init(pps_log_limit_t *lim, const pps_log_t *out, unsigned lines_per_s, unsigned burst)
{
	int64_t (*clock_cb)(void *) = lim->clock_cb;
	void *clock_user = lim->clock_user;

	memset(lim, 0, sizeof(*lim));
	lim->clock_cb = clock_cb;
	lim->clock_user = clock_user;
	if (out)
		lim->out = *out;
	lim->lines_per_s = lines_per_s ? lines_per_s : 1;
	lim->burst = burst ? burst : 1;
	lim->tokens = lim->burst;
	lim->last_us = limit_now(lim);
}

static void
say_unlogged(pps_log_limit_t *lim, int64_t now)
{
	if (!lim->unlogged)
		return;
	pps_log(&lim->out, PPS_LOG_WARNING,
	        "%" PRIu64 " lines not logged in the last %.1f s (at most %u a second)",
	        lim->unlogged, (double)(now - lim->first_unlogged_us) / 1e6, lim->lines_per_s);
	lim->unlogged = 0;
}

static void
limit_cb(pps_log_level_t level, const char *message, void *user)
{
	pps_log_limit_t *lim = user;
	int64_t now = limit_now(lim);

	if (now > lim->last_us) {
		lim->tokens += (double)(now - lim->last_us) * lim->lines_per_s / 1e6;
		if (lim->tokens > lim->burst)
			lim->tokens = lim->burst;
		lim->last_us = now;
	}
	if (lim->tokens < 1.0) {
		if (!lim->unlogged)
			lim->first_unlogged_us = now;
		lim->unlogged++;
		lim->unlogged_total++;
		return;
	}
	lim->tokens -= 1.0;
	say_unlogged(lim, now);
	if (lim->out.cb)
		lim->out.cb(level, message, lim->out.user);
}

pps_log_t
pps_log_limit_log(pps_log_limit_t *lim)
{
	return (pps_log_t){.cb = limit_cb, .user = lim};
}

void
pps_log_limit_flush(pps_log_limit_t *lim)
{
	say_unlogged(lim, limit_now(lim));
}
