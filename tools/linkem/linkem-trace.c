/* SPDX-License-Identifier: MIT */
/*
 * mahimahi link traces (Netravali et al., "Mahimahi: Accurate Record-and-Replay
 * for HTTP", USENIX ATC 2015, section 3): each line is the millisecond at which
 * one 1500-byte packet may leave; several equal lines are several packets in
 * that millisecond; the file repeats with a period of its last timestamp.
 */
#include "linkem.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct pps_linkem_trace {
	int64_t *opportunity_ns; /* sorted, one per line */
	size_t n_opportunities;
	int64_t period_ns;
};

static pps_linkem_trace_t *
trace_fail(pps_linkem_trace_t *trace, FILE *file, int error)
{
	if (file)
		fclose(file);
	pps_linkem_trace_free(trace);
	errno = error;
	return NULL;
}

pps_linkem_trace_t *
pps_linkem_trace_load(const char *path, char *err, size_t err_size)
{
	pps_linkem_trace_t *trace;
	size_t capacity = 0;
	unsigned line_number = 0;
	char line[256];
	FILE *file;

	trace = calloc(1, sizeof(*trace));
	if (!trace)
		return NULL;
	file = fopen(path, "r");
	if (!file) {
		int error = errno;

		snprintf(err, err_size, "trace %s: %s", path, strerror(error));
		return trace_fail(trace, NULL, error);
	}
	while (fgets(line, sizeof(line), file)) {
		unsigned long long ms;
		char *p = line, *end;

		line_number++;
		while (isspace((unsigned char)*p))
			p++;
		if (!*p || *p == '#')
			continue;
		errno = 0;
		ms = strtoull(p, &end, 10);
		while (isspace((unsigned char)*end))
			end++;
		/* A line of 255 characters is not a timestamp; nor is "-3" or "12x". */
		if (!isdigit((unsigned char)*p) || errno || *end || ms > 86400000ULL) {
			snprintf(err, err_size, "trace %s:%u: expected a millisecond timestamp",
			         path, line_number);
			return trace_fail(trace, file, EINVAL);
		}
		if (trace->n_opportunities &&
		    (int64_t)ms * 1000000 < trace->opportunity_ns[trace->n_opportunities - 1]) {
			snprintf(err, err_size, "trace %s:%u: timestamps must not decrease", path,
			         line_number);
			return trace_fail(trace, file, EINVAL);
		}
		if (trace->n_opportunities == capacity) {
			size_t grown = capacity ? capacity * 2 : 1024;
			int64_t *bigger = realloc(trace->opportunity_ns, grown * sizeof(*bigger));

			if (!bigger)
				return trace_fail(trace, file, ENOMEM);
			trace->opportunity_ns = bigger;
			capacity = grown;
		}
		trace->opportunity_ns[trace->n_opportunities++] = (int64_t)ms * 1000000;
	}
	if (ferror(file)) {
		snprintf(err, err_size, "trace %s: read error", path);
		return trace_fail(trace, file, EIO);
	}
	fclose(file);
	if (trace->n_opportunities == 0) {
		snprintf(err, err_size, "trace %s: no delivery opportunities", path);
		return trace_fail(trace, NULL, EINVAL);
	}
	trace->period_ns = trace->opportunity_ns[trace->n_opportunities - 1];
	if (trace->period_ns <= 0) {
		snprintf(err, err_size,
		         "trace %s: last timestamp must be > 0 ms (it is the period)", path);
		return trace_fail(trace, NULL, EINVAL);
	}
	return trace;
}

void
pps_linkem_trace_free(pps_linkem_trace_t *trace)
{
	if (!trace)
		return;
	free(trace->opportunity_ns);
	free(trace);
}

size_t
pps_linkem_trace_opportunities(const pps_linkem_trace_t *trace)
{
	return trace->n_opportunities;
}

int64_t
pps_linkem_trace_period_ns(const pps_linkem_trace_t *trace)
{
	return trace->period_ns;
}

int64_t
pps_linkem_trace_opportunity_ns(const pps_linkem_trace_t *trace, uint64_t index)
{
	uint64_t period = index / trace->n_opportunities;

	return (int64_t)period * trace->period_ns +
	       trace->opportunity_ns[index % trace->n_opportunities];
}

uint64_t
pps_linkem_trace_first_at_or_after(const pps_linkem_trace_t *trace, int64_t offset_ns)
{
	uint64_t period;
	int64_t within;
	size_t lo = 0, hi = trace->n_opportunities;

	if (offset_ns <= 0)
		return 0;
	period = (uint64_t)(offset_ns / trace->period_ns);
	within = offset_ns % trace->period_ns;
	/*
	 * mahimahi's last line is both the final opportunity of a period and its
	 * length, so an offset of exactly one period lands on that line: the
	 * binary search below finds it in the previous period's slots first.
	 */
	if (within == 0 && period > 0) {
		period--;
		within = trace->period_ns;
	}
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (trace->opportunity_ns[mid] < within)
			lo = mid + 1;
		else
			hi = mid;
	}
	/* lo == n means "none left in this period": the next period's first. */
	return period * trace->n_opportunities + lo;
}

uint64_t
pps_linkem_trace_mean_rate_bps(const pps_linkem_trace_t *trace)
{
	double bits = (double)trace->n_opportunities * PPS_LINKEM_TRACE_OPPORTUNITY_BYTES * 8;

	return (uint64_t)(bits * 1e9 / (double)trace->period_ns);
}
