/* SPDX-License-Identifier: MIT */
/*
 * The clocks ppstream reads, in one place. Every time in the tree is an
 * int64_t count of microseconds (or nanoseconds, _ns) since the clock's epoch:
 *
 *   realtime   CLOCK_REALTIME: capture times, the clock the pixel timecode,
 *              the wire's capture_us and the clients' latency logs share
 *              (two hosts agree on it only as well as NTP/PTP, or after the
 *              client's PING/PONG offset).
 *   monotonic  CLOCK_MONOTONIC: intervals, deadlines and pacing within one
 *              host; network namespaces share it, so the lab tools compare
 *              it across namespaces.
 *   thread CPU CLOCK_THREAD_CPUTIME_ID: CPU time the calling thread used.
 *
 * Code whose timing is tested takes its clock as a callback (the server
 * session's clock_cb, the client's pps_client_clock_cb); these functions are
 * the programs' default implementation of those callbacks, never called
 * behind a test's back.
 *
 * Thread: all are safe from any thread. The fixed-clock readers cannot fail on
 * Linux (clock_gettime fails only for an unknown clock id) and return the
 * value directly.
 */
#ifndef PPS_TIME_H
#define PPS_TIME_H

#include <stdint.h>
#include <sys/time.h>
#include <time.h>

#define PPS_TIME_NS_PER_US 1000
#define PPS_TIME_US_PER_S  1000000
#define PPS_TIME_NS_PER_S  1000000000

/* CLOCK_REALTIME in microseconds / nanoseconds. */
int64_t pps_time_realtime_us(void);
int64_t pps_time_realtime_ns(void);

/* CLOCK_MONOTONIC in microseconds / nanoseconds. */
int64_t pps_time_monotonic_us(void);
int64_t pps_time_monotonic_ns(void);

/* CPU time of the calling thread (CLOCK_THREAD_CPUTIME_ID), microseconds. */
int64_t pps_time_thread_cpu_us(void);

/*
 * Reads @clock (any clockid_t) into *ns (nanoseconds). Returns 0, or -EINVAL
 * for a clock the kernel does not know (*ns untouched).
 */
int pps_time_clock_ns(clockid_t clock, int64_t *ns);

/* Conversions between a struct timespec and nanoseconds (ns >= 0). */
int64_t pps_time_timespec_to_ns(const struct timespec *ts);
struct timespec pps_time_ns_to_timespec(int64_t ns);

/* A wait of @us microseconds as a struct timeval (libevent's timers); a
 * negative wait is 0 (the timer fires at once). */
struct timeval pps_time_us_to_timeval(int64_t us);

#endif /* PPS_TIME_H */
