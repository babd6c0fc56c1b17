/* SPDX-License-Identifier: MIT */
/* Units of the lab's command lines: rates, durations, probabilities, counts. */
#include "linkem.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/*
 * Splits "12.5mbit" into 12.5 and "mbit". strtod alone would accept "inf",
 * "nan" and hex floats; the lab only wants plain decimals.
 */
static int
parse_number_suffix(const char *text, double *value, const char **suffix)
{
	const char *p = text;
	char *end;

	if (!text || !*text)
		return -EINVAL;
	if (*p == '+' || *p == '-')
		p++;
	if (!isdigit((unsigned char)*p) && !(*p == '.' && isdigit((unsigned char)p[1])))
		return -EINVAL;
	errno = 0;
	*value = strtod(text, &end);
	if (errno || end == text || !isfinite(*value))
		return -EINVAL;
	*suffix = end;
	return 0;
}

int
pps_linkem_parse_rate_bps(const char *text, uint64_t *rate_bps)
{
	static const struct {
		const char *suffix;
		double scale;
	} units[] = {
	    {"", 1},    {"bit", 1},    {"bps", 1},    {"k", 1e3}, {"kbit", 1e3}, {"kbps", 1e3},
	    {"m", 1e6}, {"mbit", 1e6}, {"mbps", 1e6}, {"g", 1e9}, {"gbit", 1e9}, {"gbps", 1e9},
	};
	const char *suffix;
	double value;

	if (parse_number_suffix(text, &value, &suffix) < 0)
		return -EINVAL;
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (strcasecmp(suffix, units[i].suffix) != 0)
			continue;
		value *= units[i].scale;
		/* Below 1 bit/s a 1500-byte packet takes hours: certainly a typo. */
		if (value < 1 || value > 1e12)
			return -EINVAL;
		*rate_bps = (uint64_t)llround(value);
		return 0;
	}
	return -EINVAL;
}

int
pps_linkem_parse_duration_ns(const char *text, int64_t *duration_ns)
{
	static const struct {
		const char *suffix;
		double scale;
	} units[] = {
	    {"", 1e6}, {"ms", 1e6}, {"us", 1e3}, {"ns", 1}, {"s", 1e9},
	};
	const char *suffix;
	double value;

	if (parse_number_suffix(text, &value, &suffix) < 0)
		return -EINVAL;
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (strcasecmp(suffix, units[i].suffix) != 0)
			continue;
		value *= units[i].scale;
		/* A day of delay is far past anything the lab emulates. */
		if (value < 0 || value > 86400e9)
			return -EINVAL;
		*duration_ns = (int64_t)llround(value);
		return 0;
	}
	return -EINVAL;
}

int
pps_linkem_parse_probability(const char *text, double *probability)
{
	const char *suffix;
	double value;

	if (parse_number_suffix(text, &value, &suffix) < 0)
		return -EINVAL;
	if (strcmp(suffix, "%") == 0)
		value /= 100;
	else if (*suffix)
		return -EINVAL;
	if (value < 0 || value > 1)
		return -EINVAL;
	*probability = value;
	return 0;
}

int
pps_linkem_parse_count(const char *text, uint64_t *count)
{
	unsigned long long value;
	uint64_t scale = 1;
	char *end;

	if (!text || !isdigit((unsigned char)*text))
		return -EINVAL;
	errno = 0;
	value = strtoull(text, &end, 10);
	if (errno)
		return -EINVAL;
	if (strcasecmp(end, "k") == 0)
		scale = 1000;
	else if (strcasecmp(end, "m") == 0)
		scale = 1000000;
	else if (*end)
		return -EINVAL;
	if (value > UINT64_MAX / scale)
		return -EINVAL;
	*count = (uint64_t)value * scale;
	return 0;
}
