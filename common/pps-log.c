/* SPDX-License-Identifier: MIT */
#include "pps-log.h"

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
