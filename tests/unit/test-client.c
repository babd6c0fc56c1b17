/* SPDX-License-Identifier: MIT */
/* The client's pure parts: reassembly of untrusted window records, and the
 * playout policies (adaptive: NORMAL/SPIKE with window-boundary updates). */
#include "pps-client-internal.h"
#include "pps-test.h"

#include <errno.h>
#include <string.h>

static uint8_t payload[4000];

static pps_wire_record_t
begin(uint32_t window, uint16_t adus, uint32_t bytes, uint32_t first_adu)
{
	pps_wire_record_t r = { .kind = PPS_WIRE_WINDOW_BEGIN };

	r.u.window_begin = (pps_wire_window_begin_t){ .window_id = window,
						      .first_capture_us = 1000000,
						      .deadline_us = 1250000,
						      .frames = 2,
						      .adus = adus,
						      .bytes = bytes,
						      .first_adu_id = first_adu };
	return r;
}

static pps_wire_record_t
fragment(uint32_t window, uint32_t adu, uint32_t offset, uint16_t len, uint32_t total)
{
	pps_wire_record_t r = { .kind = PPS_WIRE_ADU_FRAGMENT };

	r.u.adu_fragment = (pps_wire_adu_fragment_t){.window_id = window,
	                                             .adu_id = adu,
	                                             .frame_index = window * 2, /* W = 2 */
	                                             .capture_us = 1000000,
	                                             .offset = offset,
	                                             .total_bytes = total,
	                                             .payload_len = len,
	                                             .payload = payload + offset};
	return r;
}

static pps_wire_record_t
end(uint32_t window, uint16_t sent, uint16_t dropped, uint8_t flags)
{
	pps_wire_record_t r = { .kind = PPS_WIRE_WINDOW_END };

	r.u.window_end = (pps_wire_window_end_t){ .window_id = window,
						  .adus_sent = sent,
						  .adus_dropped = dropped,
						  .flags = flags };
	return r;
}

static int
feed(pps_reasm_t *r, pps_wire_record_t rec, char *err)
{
	return pps_reasm_record(r, &rec, err, 256);
}

static void
test_reasm_window(void)
{
	pps_reasm_t *r = pps_reasm_new(2);
	pps_reasm_window_t w;
	pps_adu_t **adus, *early;
	size_t n;
	char err[256];

	REQUIRE(r);
	for (size_t i = 0; i < sizeof(payload); i++)
		payload[i] = (uint8_t)i;
	CHECK_EQ_INT(feed(r, begin(5, 3, 3000, 100), err), 0);
	/* Priority order, not id order: ADU 102 first, then 100 in two parts. */
	CHECK_EQ_INT(feed(r, fragment(5, 102, 0, 500, 500), err), 0);
	CHECK_EQ_INT(feed(r, fragment(5, 100, 0, 1000, 2000), err), 0);
	CHECK(pps_reasm_take_next(r, 100) == NULL); /* not whole yet */
	CHECK_EQ_INT(feed(r, fragment(5, 100, 1000, 1000, 2000), err), 0);
	early = pps_reasm_take_next(r, 100);
	CHECK(early && pps_adu_size(early) == 2000 && pps_adu_data(early)[1500] == (uint8_t)1500);
	CHECK(pps_reasm_take_next(r, 100) == NULL); /* handed out once */
	pps_adu_unref(early);
	CHECK_EQ_INT(feed(r, end(5, 2, 1, 0), err), 1);
	pps_reasm_take(r, &w, &adus, &n);
	CHECK_EQ_INT(w.window_id, 5);
	CHECK_EQ_INT(w.first_adu_id, 100);
	CHECK_EQ_INT(w.adus_received, 2);
	CHECK_EQ_INT(w.adus_dropped, 1);
	CHECK_EQ_INT(n, 1); /* 100 went early; 101 never came */
	CHECK(n == 1 && pps_adu_info(adus[0])->id == 102);
	for (size_t i = 0; i < n; i++)
		pps_adu_unref(adus[i]);
	free(adus);
	/* A window the sender never began. */
	CHECK_EQ_INT(feed(r, end(7, 0, 4, PPS_WIRE_WINDOW_END_DROPPED), err), 1);
	pps_reasm_take(r, &w, &adus, &n);
	CHECK(w.dropped && w.window_id == 7 && n == 0);
	free(adus);
	CHECK_EQ_INT(pps_reasm_last_window(r), 7);
	pps_reasm_free(r);
}

/* Each broken rule is refused with a reason naming it. */
static void
expect_error(pps_wire_record_t setup, pps_wire_record_t bad, const char *text)
{
	pps_reasm_t *r = pps_reasm_new(2);
	char err[256] = "";

	REQUIRE(r);
	if (setup.kind)
		REQUIRE(feed(r, setup, err) == 0);
	CHECK_EQ_INT(feed(r, bad, err), -EPROTO);
	if (!strstr(err, text)) {
		fprintf(stderr, "  got: %s\n  expected to contain: %s\n", err, text);
		CHECK(!"error text");
	}
	pps_reasm_free(r);
}

static void
test_reasm_rejections(void)
{
	pps_wire_record_t none = { .kind = 0 };
	pps_wire_record_t open = begin(5, 2, 1000, 100);

	expect_error(none, fragment(5, 100, 0, 10, 10), "outside its window");
	expect_error(open, fragment(6, 100, 0, 10, 10), "outside its window");
	expect_error(open, fragment(5, 103, 0, 10, 10), "outside window 5's ids 100..101");
	expect_error(open, fragment(5, 99, 0, 10, 10), "outside window 5's ids");
	expect_error(open, fragment(5, 100, 0, 10, 5000), "over the 1000 bytes");
	expect_error(open, fragment(5, 100, 10, 10, 100), "first fragment at offset 10");
	expect_error(open, begin(6, 1, 10, 200), "inside window 5");
	expect_error(none, end(5, 1, 0, 0), "without its WINDOW_BEGIN");
	expect_error(none, begin(1, 2000, 10, 0), "over the limits");
	{
		/* A fragment that does not continue its ADU. */
		pps_reasm_t *r = pps_reasm_new(2);
		char err[256];

		REQUIRE(r && feed(r, open, err) == 0);
		CHECK_EQ_INT(feed(r, fragment(5, 100, 0, 10, 100), err), 0);
		CHECK_EQ_INT(feed(r, fragment(5, 100, 50, 10, 100), err), -EPROTO);
		CHECK(strstr(err, "does not continue it") != NULL);
		pps_reasm_free(r);
	}
	{
		/* Window ids only go forward. */
		pps_reasm_t *r = pps_reasm_new(2);
		char err[256];

		REQUIRE(r);
		CHECK_EQ_INT(feed(r, end(7, 0, 1, PPS_WIRE_WINDOW_END_DROPPED), err), 1);
		CHECK_EQ_INT(feed(r, begin(7, 1, 10, 0), err), -EPROTO);
		CHECK(strstr(err, "ids must increase") != NULL);
		pps_reasm_free(r);
	}
	{
		/* The announced total bounds the sum of all ADUs, not each alone. */
		pps_reasm_t *r = pps_reasm_new(2);
		char err[256];

		REQUIRE(r && feed(r, open, err) == 0);
		CHECK_EQ_INT(feed(r, fragment(5, 100, 0, 10, 800), err), 0);
		CHECK_EQ_INT(feed(r, fragment(5, 101, 0, 10, 800), err), -EPROTO);
		pps_reasm_free(r);
	}
}

static void
test_playout(void)
{
	pps_playout_t *fixed = pps_playout_new(PPS_PLAYOUT_FIXED, 200000, NULL, NULL);
	pps_playout_t *asap = pps_playout_new(PPS_PLAYOUT_ASAP, 200000, NULL, NULL);
	pps_playout_t *adaptive = pps_playout_new(PPS_PLAYOUT_ADAPTIVE, 200000, NULL, NULL);
	int64_t before, during;

	REQUIRE(fixed && asap && adaptive);
	CHECK_EQ_INT(pps_playout_display_time(fixed, 1000000, 1050000), 1200000);
	CHECK_EQ_INT(pps_playout_display_time(asap, 1000000, 1050000), 1050000);
	/* Before any window the adaptive policy uses the tolerance. */
	CHECK_EQ_INT(pps_playout_display_time(adaptive, 1000000, 0), 1200000);
	/* Steady 100 ms windows: the delay settles near u + 4 v. */
	for (int i = 0; i < 2000; i++)
		pps_playout_window(adaptive, i % 2 ? 90000 : 110000);
	before = pps_playout_delay_us(adaptive);
	CHECK(before > 100000 && before < 160000);
	CHECK(strcmp(pps_playout_mode(adaptive), "normal") == 0);
	/* A spike: a steep rise switches to SPIKE and the estimate follows it. */
	pps_playout_window(adaptive, 600000);
	CHECK(strcmp(pps_playout_mode(adaptive), "spike") == 0);
	during = pps_playout_delay_us(adaptive);
	CHECK(during > before + 400000);
	/* It decays back; once the change is no longer violent, NORMAL again. */
	for (int64_t d = 550000; d > 100000; d -= 50000)
		pps_playout_window(adaptive, d);
	for (int i = 0; i < 20; i++)
		pps_playout_window(adaptive, 100000);
	CHECK(strcmp(pps_playout_mode(adaptive), "normal") == 0);
	CHECK(pps_playout_delay_us(adaptive) < during);
	CHECK_EQ_INT(pps_playout_delay_us(asap), 0);
	pps_playout_free(fixed);
	pps_playout_free(asap);
	pps_playout_free(adaptive);
}

int
main(void)
{
	test_reasm_window();
	test_reasm_rejections();
	test_playout();
	return pps_test_result();
}
