/* SPDX-License-Identifier: MIT */
/*
 * common/: the clock readers agree with each other and with the system, and
 * every socket option wrapper reports a failure as a negative errno.
 */
#include "pps-log.h"
#include "pps-names.h"
#include "pps-socket.h"
#include "pps-test.h"
#include "pps-time.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sys/socket.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

#include <linux/sock_diag.h>

static void
test_clocks(void)
{
	int64_t before_s = (int64_t)time(NULL);
	int64_t real_us = pps_time_realtime_us();
	int64_t real_ns = pps_time_realtime_ns();
	int64_t after_s = (int64_t)time(NULL);

	/* CLOCK_REALTIME is time(2)'s clock, in the right unit. time(2) reads
	 * the coarse clock, up to a tick behind: right after a second begins it
	 * may still say the one before (failed once in a CI run). */
	CHECK(real_us / PPS_TIME_US_PER_S >= before_s &&
	      real_us / PPS_TIME_US_PER_S <= after_s + 1);
	CHECK(real_ns / PPS_TIME_NS_PER_US >= real_us);
	CHECK(real_ns / PPS_TIME_NS_PER_US - real_us < PPS_TIME_US_PER_S);

	int64_t m0 = pps_time_monotonic_us(), m0_ns = pps_time_monotonic_ns();
	int64_t m1 = pps_time_monotonic_us();
	CHECK(m0 > 0 && m1 >= m0);
	CHECK(m0_ns / PPS_TIME_NS_PER_US >= m0 && m0_ns / PPS_TIME_NS_PER_US <= m1);

	/* The thread's CPU clock moves while the thread computes. */
	int64_t cpu0 = pps_time_thread_cpu_us(), cpu1 = cpu0;
	volatile uint64_t sink = 0;
	for (int i = 0; i < 100000000 && cpu1 < cpu0 + 1000; i++) {
		sink += (uint64_t)i * 2654435761u;
		if (i % 100000 == 0)
			cpu1 = pps_time_thread_cpu_us();
	}
	CHECK(cpu0 >= 0 && cpu1 >= cpu0 + 1000);

	/* Any clock id, and a failure for one the kernel does not know. */
	int64_t ns = -1;
	CHECK_EQ_INT(pps_time_clock_ns(CLOCK_MONOTONIC, &ns), 0);
	CHECK(ns >= m0_ns);
	ns = -1;
	CHECK_EQ_INT(pps_time_clock_ns((clockid_t)0x7ff, &ns), -EINVAL);
	CHECK_EQ_INT(ns, -1);

	struct timespec ts = pps_time_ns_to_timespec(3 * (int64_t)PPS_TIME_NS_PER_S + 5);
	CHECK(ts.tv_sec == 3 && ts.tv_nsec == 5);
	CHECK_EQ_INT(pps_time_timespec_to_ns(&ts), 3 * (int64_t)PPS_TIME_NS_PER_S + 5);

	struct timeval tv = pps_time_us_to_timeval(2 * (int64_t)PPS_TIME_US_PER_S + 250000);
	CHECK(tv.tv_sec == 2 && tv.tv_usec == 250000);
	tv = pps_time_us_to_timeval(-7);
	CHECK(tv.tv_sec == 0 && tv.tv_usec == 0);
}

/* Every wrapper on a closed descriptor: -EBADF, out-parameters untouched. */
static void
test_bad_descriptor(void)
{
	int fd = open("/dev/null", O_RDONLY);
	REQUIRE(fd >= 0);
	close(fd); /* now certainly not open */

	uint8_t info[64];
	uint32_t meminfo[SK_MEMINFO_VARS];
	int v = 12345;
	size_t len = 999;

	CHECK_EQ_INT(pps_socket_get_error(fd, &v), -EBADF);
	CHECK_EQ_INT(pps_socket_set_nonblocking(fd), -EBADF);
	CHECK_EQ_INT(pps_socket_set_reuseaddr(fd), -EBADF);
	CHECK_EQ_INT(pps_socket_set_linger(fd, true, 0), -EBADF);
	CHECK_EQ_INT(pps_socket_set_nodelay(fd, true), -EBADF);
	CHECK_EQ_INT(pps_socket_set_cork(fd, true), -EBADF);
	CHECK_EQ_INT(pps_socket_set_notsent_lowat(fd, 1000), -EBADF);
	CHECK_EQ_INT(pps_socket_set_thin_linear_timeouts(fd, true), -EBADF);
	CHECK_EQ_INT(pps_socket_set_congestion(fd, "reno"), -EBADF);
	CHECK_EQ_INT(pps_socket_set_maxseg(fd, 1000), -EBADF);
	CHECK_EQ_INT(pps_socket_set_sndbuf(fd, 4096), -EBADF);
	CHECK_EQ_INT(pps_socket_get_sndbuf(fd, &v), -EBADF);
	CHECK_EQ_INT(pps_socket_set_rcvbuf(fd, 4096), -EBADF);
	CHECK_EQ_INT(pps_socket_set_max_pacing_rate(fd, 1000000), -EBADF);
	CHECK_EQ_INT(pps_socket_get_tcp_info(fd, info, sizeof(info), &len), -EBADF);
	CHECK_EQ_INT(pps_socket_get_outq_bytes(fd, &v), -EBADF);
	CHECK_EQ_INT(pps_socket_get_meminfo(fd, meminfo, SK_MEMINFO_VARS), -EBADF);
	CHECK_EQ_INT(pps_socket_set_ip_tos(fd, 2), -EBADF);
	CHECK_EQ_INT(pps_socket_set_recv_tos(fd, true), -EBADF);
	CHECK_EQ_INT(pps_socket_set_timestamp_ns(fd, true), -EBADF);
	CHECK_EQ_INT(v, 12345);
	CHECK_EQ_INT(len, 999);
}

/* A file that is not a socket: -ENOTSOCK from the socket options. */
static void
test_not_a_socket(void)
{
	int fds[2];
	int v = 12345;

	REQUIRE(pipe(fds) == 0);
	CHECK_EQ_INT(pps_socket_set_nodelay(fds[0], true), -ENOTSOCK);
	CHECK_EQ_INT(pps_socket_get_sndbuf(fds[0], &v), -ENOTSOCK);
	CHECK_EQ_INT(v, 12345);
	/* O_NONBLOCK applies to any file. */
	CHECK_EQ_INT(pps_socket_set_nonblocking(fds[0]), 0);
	CHECK(fcntl(fds[0], F_GETFL) & O_NONBLOCK);
	close(fds[0]);
	close(fds[1]);
}

/* A real TCP socket (not connected): the options take, and read back. */
static void
test_tcp_socket(void)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct tcp_info ti;
	size_t len = 0;
	int v = 0;

	REQUIRE(fd >= 0);
	CHECK_EQ_INT(pps_socket_set_reuseaddr(fd), 0);
	CHECK_EQ_INT(pps_socket_set_nodelay(fd, true), 0);
	CHECK_EQ_INT(pps_socket_set_cork(fd, true), 0);
	CHECK_EQ_INT(pps_socket_set_cork(fd, false), 0);
	CHECK_EQ_INT(pps_socket_set_notsent_lowat(fd, 16384), 0);
	CHECK_EQ_INT(pps_socket_set_thin_linear_timeouts(fd, true), 0);
	CHECK_EQ_INT(pps_socket_set_congestion(fd, "reno"), 0); /* built into every kernel */
	CHECK_EQ_INT(pps_socket_set_congestion(fd, "no-such-cc"), -ENOENT);
	CHECK_EQ_INT(pps_socket_set_maxseg(fd, 1000), 0);
	CHECK_EQ_INT(pps_socket_set_max_pacing_rate(fd, 1000000), 0);
	CHECK_EQ_INT(pps_socket_set_linger(fd, true, 0), 0);

	v = -1;
	CHECK_EQ_INT(pps_socket_get_error(fd, &v), 0);
	CHECK_EQ_INT(v, 0);

	/* The kernel doubles an SO_SNDBUF request. */
	CHECK_EQ_INT(pps_socket_set_sndbuf(fd, 65536), 0);
	CHECK_EQ_INT(pps_socket_get_sndbuf(fd, &v), 0);
	CHECK_EQ_INT(v, 2 * 65536);

	memset(&ti, 0xff, sizeof(ti));
	CHECK_EQ_INT(pps_socket_get_tcp_info(fd, &ti, sizeof(ti), &len), 0);
	CHECK(len > 0 && len <= sizeof(ti));
	CHECK_EQ_INT(ti.tcpi_state, TCP_CLOSE);
	v = -1;
	CHECK_EQ_INT(pps_socket_get_outq_bytes(fd, &v), 0);
	CHECK_EQ_INT(v, 0);

	/* An IP-level option the TCP socket has, a UDP-only reading it has not. */
	CHECK_EQ_INT(pps_socket_set_ip_tos(fd, 0), 0);
	close(fd);
}

/* A UDP socket: the datagram options take; TCP's do not. */
static void
test_udp_socket(void)
{
	int fd = socket(AF_INET, SOCK_DGRAM, 0);
	struct tcp_info ti;

	REQUIRE(fd >= 0);
	CHECK_EQ_INT(pps_socket_set_ip_tos(fd, 2), 0);
	CHECK_EQ_INT(pps_socket_set_recv_tos(fd, true), 0);
	CHECK_EQ_INT(pps_socket_set_timestamp_ns(fd, true), 0);
	CHECK(pps_socket_set_nodelay(fd, true) < 0);
	CHECK(pps_socket_get_tcp_info(fd, &ti, sizeof(ti), NULL) < 0);
	close(fd);
}

/* A non-blocking connect to a port nobody listens on: SO_ERROR tells. */
static void
test_connect_error(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t al = sizeof(a);
	int l = socket(AF_INET, SOCK_STREAM, 0), fd = socket(AF_INET, SOCK_STREAM, 0), err = -1;

	REQUIRE(l >= 0 && fd >= 0);
	/* A free port: bound, then closed without listening. */
	REQUIRE(bind(l, (struct sockaddr *)&a, sizeof(a)) == 0);
	REQUIRE(getsockname(l, (struct sockaddr *)&a, &al) == 0);
	close(l);
	CHECK_EQ_INT(pps_socket_set_nonblocking(fd), 0);
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0 && errno == EINPROGRESS) {
		struct pollfd p = {.fd = fd, .events = POLLOUT};
		CHECK_EQ_INT(poll(&p, 1, 5000), 1);
		CHECK_EQ_INT(pps_socket_get_error(fd, &err), 0);
		CHECK_EQ_INT(err, ECONNREFUSED);
		/* Reading it cleared it. */
		CHECK_EQ_INT(pps_socket_get_error(fd, &err), 0);
		CHECK_EQ_INT(err, 0);
	} else {
		CHECK_EQ_INT(errno, ECONNREFUSED); /* refused at once: nothing pending */
	}
	close(fd);
}

static void
test_names(void)
{
	static const char *const names[] = {"zero", "one", "two", NULL};
	static const char *const empty[] = {NULL};

	CHECK_EQ_INT(pps_names_find(names, "zero"), 0);
	CHECK_EQ_INT(pps_names_find(names, "two"), 2);
	CHECK_EQ_INT(pps_names_find(names, "Two"), -EINVAL);
	CHECK_EQ_INT(pps_names_find(names, ""), -EINVAL);
	CHECK_EQ_INT(pps_names_find(empty, "zero"), -EINVAL);
	CHECK(strcmp(pps_names_get(names, 1, "?"), "one") == 0);
	CHECK(strcmp(pps_names_get(names, 3, "?"), "?") == 0);
	CHECK(strcmp(pps_names_get(names, -1, "?"), "?") == 0);
	CHECK(strcmp(pps_names_get(empty, 0, "none"), "none") == 0);
}

typedef struct {
	int64_t now_us;
	unsigned lines;
	char last[PPS_LOG_MAX_MESSAGE_BYTES];
} log_sink_t;

static int64_t
sink_clock(void *user)
{
	return ((log_sink_t *)user)->now_us;
}

static void
sink_cb(pps_log_level_t level, const char *message, void *user)
{
	log_sink_t *sink = user;

	sink->lines++;
	snprintf(sink->last, sizeof(sink->last), "%s", message);
}

static void
test_log_limit(void)
{
	log_sink_t sink = {.now_us = 1000000};
	pps_log_t out = {.cb = sink_cb, .user = &sink};
	pps_log_limit_t lim = {.clock_cb = sink_clock, .clock_user = &sink};
	pps_log_t log;

	pps_log_limit_init(&lim, &out, 5, 20);
	log = pps_log_limit_log(&lim);
	/* A flood: the burst passes, the rest is counted. */
	for (unsigned i = 0; i < 10000; i++)
		pps_log(&log, PPS_LOG_INFO, "refused %u", i);
	CHECK_EQ_INT(sink.lines, 20);
	CHECK(strcmp(sink.last, "refused 19") == 0);
	CHECK(lim.unlogged == 9980 && lim.unlogged_total == 9980);
	/* 1 s later: five more lines' worth; the first says what was dropped. */
	sink.now_us += 1000000;
	pps_log(&log, PPS_LOG_INFO, "refused again");
	CHECK_EQ_INT(sink.lines, 22);
	CHECK(strcmp(sink.last, "refused again") == 0);
	CHECK_EQ_INT(lim.unlogged, 0);
	/* Sustained: never more than the rate over a long flood. */
	for (unsigned s = 0; s < 60; s++) {
		sink.now_us += 1000000;
		for (unsigned i = 0; i < 1000; i++)
			pps_log(&log, PPS_LOG_ERROR, "flood");
	}
	CHECK(sink.lines <= 22 + 60 * 5 + 60 + 4);
	CHECK(sink.lines >= 22 + 60 * 5);
	/* The end of a run says what is left. */
	pps_log_limit_flush(&lim);
	CHECK(strstr(sink.last, "lines not logged") != NULL);
	pps_log_limit_flush(&lim); /* nothing new: nothing said */
	CHECK(strstr(sink.last, "lines not logged") != NULL);
	/* A quiet spell refills only up to the burst. */
	sink.now_us += 3600 * (int64_t)1000000;
	sink.lines = 0;
	for (unsigned i = 0; i < 100; i++)
		pps_log(&log, PPS_LOG_INFO, "again %u", i);
	CHECK_EQ_INT(sink.lines, 20);
}

/* Stream names and HOST:PORT/NAME locations. */
static void
test_stream_names(void)
{
	char address[64], stream[PPS_STREAM_NAME_MAX_BYTES + 1], err[160];
	char longest[PPS_STREAM_NAME_MAX_BYTES + 2];

	CHECK_EQ_INT(pps_stream_name_check("room/alice", NULL, 0), 0);
	CHECK_EQ_INT(pps_stream_name_check("a.b_c-D9", err, sizeof(err)), 0);
	CHECK_EQ_INT(pps_stream_name_check("", err, sizeof(err)), -EINVAL);
	CHECK_EQ_INT(pps_stream_name_check("/room", err, sizeof(err)), -EINVAL);
	CHECK_EQ_INT(pps_stream_name_check("room/", err, sizeof(err)), -EINVAL);
	CHECK_EQ_INT(pps_stream_name_check("room//a", err, sizeof(err)), -EINVAL);
	CHECK_EQ_INT(pps_stream_name_check("room/../a", err, sizeof(err)), -EINVAL);
	CHECK_EQ_INT(pps_stream_name_check(".", err, sizeof(err)), -EINVAL);
	CHECK_EQ_INT(pps_stream_name_check("...", err, sizeof(err)), 0);
	CHECK_EQ_INT(pps_stream_name_check("room alice", err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "character 5") != NULL);
	CHECK_EQ_INT(pps_stream_name_check("caf\xc3\xa9", err, sizeof(err)), -EINVAL);
	memset(longest, 'x', PPS_STREAM_NAME_MAX_BYTES);
	longest[PPS_STREAM_NAME_MAX_BYTES] = '\0';
	CHECK_EQ_INT(pps_stream_name_check(longest, err, sizeof(err)), 0);
	longest[PPS_STREAM_NAME_MAX_BYTES] = 'x';
	longest[PPS_STREAM_NAME_MAX_BYTES + 1] = '\0';
	CHECK_EQ_INT(pps_stream_name_check(longest, err, sizeof(err)), -EINVAL);

	CHECK_EQ_INT(pps_stream_location_split("127.0.0.1:9000/room/alice", address,
	                                       sizeof(address), stream, sizeof(stream), err,
	                                       sizeof(err)),
	             0);
	CHECK(strcmp(address, "127.0.0.1:9000") == 0);
	CHECK(strcmp(stream, "room/alice") == 0);
	CHECK_EQ_INT(pps_stream_location_split("[::1]:9000", address, sizeof(address), stream,
	                                       sizeof(stream), err, sizeof(err)),
	             0);
	CHECK(strcmp(address, "[::1]:9000") == 0);
	CHECK(strcmp(stream, "") == 0);
	CHECK_EQ_INT(pps_stream_location_split("host:1/", address, sizeof(address), stream,
	                                       sizeof(stream), err, sizeof(err)),
	             -EINVAL);
	CHECK_EQ_INT(pps_stream_location_split("host:1/a b", address, sizeof(address), stream,
	                                       sizeof(stream), err, sizeof(err)),
	             -EINVAL);
	CHECK_EQ_INT(pps_stream_location_split("host:1/abc", address, 4, stream, sizeof(stream),
	                                       err, sizeof(err)),
	             -EINVAL);
}

int
main(int argc, char **argv)
{
	pps_test_init(&argc, argv);
	PPS_TEST_RUN(test_names);
	PPS_TEST_RUN(test_log_limit);
	PPS_TEST_RUN(test_connect_error);
	PPS_TEST_RUN(test_clocks);
	PPS_TEST_RUN(test_bad_descriptor);
	PPS_TEST_RUN(test_not_a_socket);
	PPS_TEST_RUN(test_tcp_socket);
	PPS_TEST_RUN(test_udp_socket);
	PPS_TEST_RUN(test_stream_names);
	return pps_test_result();
}
