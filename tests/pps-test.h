/* SPDX-License-Identifier: MIT */
/*
 * Minimal test helpers: CHECK records a failure with its location and goes
 * on, so one run reports every broken expectation; tests return
 * pps_test_result() from main (0 pass, 1 fail, 77 skip).
 */
#ifndef PPS_TEST_H
#define PPS_TEST_H

#include <stdio.h>
#include <stdlib.h>

static int pps_test_failures;

#define CHECK(cond)                                                                                \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);   \
			pps_test_failures++;                                                       \
		}                                                                                  \
	} while (0)

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

static inline int
pps_test_result(void)
{
	if (pps_test_failures)
		fprintf(stderr, "%d check(s) failed\n", pps_test_failures);
	return pps_test_failures ? 1 : 0;
}

#endif /* PPS_TEST_H */
