/* SPDX-License-Identifier: MIT */
/*
 * The C tests' helpers (every C test includes this one file): CHECK records
 * a failure with its location and goes on, so one run reports every broken
 * expectation; tests return pps_test_result() from main (0 pass, 1 fail, 77
 * skip).
 *
 * One case at a time: main calls pps_test_init(&argc, argv) first and runs
 * each case with PPS_TEST_RUN(test_name); `-t WORD` (or `--test=WORD`) on
 * the command line runs only the cases whose name contains WORD:
 *
 *   build/tests/test-prioritizer -t windower_early
 *   meson test -C build prioritizer --test-args='-t windower'
 */
#ifndef PPS_TEST_H
#define PPS_TEST_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int pps_test_failures;
static const char *pps_test_filter_; /* -t WORD, or NULL: every case */
static int pps_test_ran_;

/* Takes `-t WORD` / `--test=WORD` out of argv (the rest is the test's own). */
static inline void
pps_test_init(int *argc, char **argv)
{
	int out = 1;

	for (int i = 1; i < *argc; i++) {
		if (strcmp(argv[i], "-t") == 0 && i + 1 < *argc)
			pps_test_filter_ = argv[++i];
		else if (strncmp(argv[i], "--test=", 7) == 0)
			pps_test_filter_ = argv[i] + 7;
		else
			argv[out++] = argv[i];
	}
	argv[out] = NULL;
	*argc = out;
}

/* Runs the case @fn (a void function) unless the filter leaves it out. */
#define PPS_TEST_RUN(fn)                                                                           \
	do {                                                                                       \
		if (!pps_test_filter_ || strstr(#fn, pps_test_filter_)) {                          \
			if (pps_test_filter_)                                                      \
				fprintf(stderr, "-- %s\n", #fn);                                   \
			pps_test_ran_++;                                                           \
			fn();                                                                      \
		}                                                                                  \
	} while (0)

/*
 * CHECK(cond) or CHECK(cond, fmt, ...): the second form says what was wrong
 * in printf style after the condition. The form is chosen by the number of
 * arguments (up to 16; ISO C11 wants at least one for a macro's "..."), and
 * the condition is printed as written (#__VA_ARGS__, macros unexpanded).
 */
#define CHECK(...)                                                                                 \
	PPS_TEST_PICK_(__VA_ARGS__, PPS_CHECK_MSG_, PPS_CHECK_MSG_, PPS_CHECK_MSG_,                \
	               PPS_CHECK_MSG_, PPS_CHECK_MSG_, PPS_CHECK_MSG_, PPS_CHECK_MSG_,             \
	               PPS_CHECK_MSG_, PPS_CHECK_MSG_, PPS_CHECK_MSG_, PPS_CHECK_MSG_,             \
	               PPS_CHECK_MSG_, PPS_CHECK_MSG_, PPS_CHECK_MSG_, PPS_CHECK_MSG_, PPS_CHECK_, \
	               ~)                                                                          \
	(#__VA_ARGS__, __VA_ARGS__)
#define PPS_TEST_PICK_(a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16,      \
                       name, ...)                                                                  \
	name

#define PPS_CHECK_(text, cond)                                                                     \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, text);    \
			pps_test_failures++;                                                       \
		}                                                                                  \
	} while (0)

#define PPS_CHECK_MSG_(text, cond, ...)                                                            \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "%s:%d: CHECK failed: %.*s: ", __FILE__, __LINE__,         \
			        pps_test_first_arg_len_(text), text);                              \
			fprintf(stderr, __VA_ARGS__);                                              \
			fputc('\n', stderr);                                                       \
			pps_test_failures++;                                                       \
		}                                                                                  \
	} while (0)

/* The length of the first argument in the text of a macro's arguments: up to
 * the first comma outside brackets, strings and character constants. */
static inline int
pps_test_first_arg_len_(const char *text)
{
	int depth = 0;
	const char *p = text;

	for (; *p && !(*p == ',' && depth == 0); p++) {
		if (*p == '(' || *p == '[' || *p == '{') {
			depth++;
		} else if (*p == ')' || *p == ']' || *p == '}') {
			depth--;
		} else if (*p == '"' || *p == '\'') {
			char quote = *p;

			for (p++; *p && *p != quote; p++)
				if (*p == '\\' && p[1])
					p++;
			if (!*p)
				break;
		}
	}
	return (int)(p - text);
}

#define CHECK_EQ_INT(a, b)                                                                         \
	do {                                                                                       \
		long long a_ = (long long)(a), b_ = (long long)(b);                                \
		if (a_ != b_) {                                                                    \
			fprintf(stderr, "%s:%d: CHECK failed: %s == %s (%lld != %lld)\n",          \
			        __FILE__, __LINE__, #a, #b, a_, b_);                               \
			pps_test_failures++;                                                       \
		}                                                                                  \
	} while (0)

/* Aborts the test: a precondition for everything after it failed. */
#define REQUIRE(cond)                                                                              \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "%s:%d: REQUIRE failed: %s\n", __FILE__, __LINE__, #cond); \
			exit(1);                                                                   \
		}                                                                                  \
	} while (0)

/* A connected loopback TCP pair: [0] the connecting end, [1] the accepted one. */
static inline void
pps_test_tcp_pair(int fds[2])
{
	struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(sin);
	int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	REQUIRE(lfd >= 0);
	REQUIRE(bind(lfd, (struct sockaddr *)&sin, sizeof(sin)) == 0);
	REQUIRE(listen(lfd, 1) == 0);
	REQUIRE(getsockname(lfd, (struct sockaddr *)&sin, &len) == 0);
	fds[0] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	REQUIRE(fds[0] >= 0);
	REQUIRE(connect(fds[0], (struct sockaddr *)&sin, sizeof(sin)) == 0);
	fds[1] = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	REQUIRE(fds[1] >= 0);
	close(lfd);
}

static inline int
pps_test_result(void)
{
	if (pps_test_filter_ && pps_test_ran_ == 0) {
		fprintf(stderr, "no case matches -t %s\n", pps_test_filter_);
		return 1;
	}
	if (pps_test_failures)
		fprintf(stderr, "%d check(s) failed\n", pps_test_failures);
	return pps_test_failures ? 1 : 0;
}

#endif /* PPS_TEST_H */
