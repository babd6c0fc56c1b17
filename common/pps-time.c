/* SPDX-License-Identifier: MIT */
#include "pps-time.h"

#include <errno.h>

int
pps_time_clock_ns(clockid_t clock, int64_t *ns)
{
	struct timespec ts;

	if (clock_gettime(clock, &ts) < 0)
		return -errno;
	*ns = pps_time_timespec_to_ns(&ts);
	return 0;
}

/* For the clocks every Linux has: clock_gettime cannot fail on them. */
static int64_t
read_ns(clockid_t clock)
{
	struct timespec ts = {0};

	clock_gettime(clock, &ts);
	return pps_time_timespec_to_ns(&ts);
}

int64_t
pps_time_realtime_ns(void)
{
	return read_ns(CLOCK_REALTIME);
}

int64_t
pps_time_realtime_us(void)
{
	return read_ns(CLOCK_REALTIME) / PPS_TIME_NS_PER_US;
}

int64_t
pps_time_monotonic_ns(void)
{
	return read_ns(CLOCK_MONOTONIC);
}

int64_t
pps_time_monotonic_us(void)
{
	return read_ns(CLOCK_MONOTONIC) / PPS_TIME_NS_PER_US;
}

int64_t
pps_time_thread_cpu_us(void)
{
	return read_ns(CLOCK_THREAD_CPUTIME_ID) / PPS_TIME_NS_PER_US;
}

int64_t
pps_time_timespec_to_ns(const struct timespec *ts)
{
	return (int64_t)ts->tv_sec * PPS_TIME_NS_PER_S + ts->tv_nsec;
}

struct timespec
pps_time_ns_to_timespec(int64_t ns)
{
	struct timespec ts = {
	    .tv_sec = (time_t)(ns / PPS_TIME_NS_PER_S),
	    .tv_nsec = (long)(ns % PPS_TIME_NS_PER_S),
	};

	return ts;
}

struct timeval
pps_time_us_to_timeval(int64_t us)
{
	struct timeval tv = {0};

	if (us > 0) {
		tv.tv_sec = (time_t)(us / PPS_TIME_US_PER_S);
		tv.tv_usec = (suseconds_t)(us % PPS_TIME_US_PER_S);
	}
	return tv;
}
