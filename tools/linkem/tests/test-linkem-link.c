/* SPDX-License-Identifier: MIT */
/*
 * The link model with a fake clock: rates, queue limits, traces, DRD, loss and
 * the unit parsers. No namespaces, no TUN, no sleeping.
 */
#include "linkem.h"
#include "pps-test.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MS 1000000LL

static uint16_t
ipv4_checksum(const uint8_t *header, size_t header_bytes)
{
	uint32_t sum = 0;

	for (size_t i = 0; i < header_bytes; i += 2)
		sum += (uint32_t)header[i] << 8 | header[i + 1];
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

/* An IPv4/UDP packet of @size_bytes with ECN field @ecn and a valid header checksum. */
static void
ipv4_packet_make(uint8_t *packet, size_t size_bytes, uint8_t ecn)
{
	uint16_t sum;

	memset(packet, 0, size_bytes);
	packet[0] = 0x45;
	packet[1] = ecn;
	packet[2] = (uint8_t)(size_bytes >> 8);
	packet[3] = (uint8_t)size_bytes;
	packet[8] = 64;
	packet[9] = 17;
	memcpy(packet + 12, (uint8_t[]){198, 18, 0, 1, 198, 19, 0, 1}, 8);
	sum = ipv4_checksum(packet, 20);
	packet[10] = (uint8_t)(sum >> 8);
	packet[11] = (uint8_t)sum;
}

static pps_linkem_link_config_t
config_rate(uint64_t rate_bps, int64_t delay_ns, uint64_t limit_pkts)
{
	pps_linkem_link_config_t c = {
	    .rate_bps = rate_bps,
	    .delay_ns = delay_ns,
	    .queue_limit_pkts = limit_pkts,
	    .queue_limit_bytes = limit_pkts * 1500,
	    .aqm = PPS_LINKEM_AQM_DROPTAIL,
	    .seed = 7,
	};
	return c;
}

static void
test_rate_and_delay(void)
{
	pps_linkem_link_config_t c = config_rate(10000000, 25 * MS, 10);
	pps_linkem_link_t *link = pps_linkem_link_new(&c);
	uint8_t packet[1500];
	const uint8_t *out;
	pps_linkem_offer_t offer;

	ipv4_packet_make(packet, sizeof(packet), 0);
	CHECK(pps_linkem_link_packet_offer(link, 0, packet, 1500, &offer) == 0);
	CHECK(offer.verdict == PPS_LINKEM_VERDICT_QUEUED);
	/* 1500 bytes at 10 Mbit/s take 1.2 ms. */
	CHECK(offer.departure_ns == 1200000);
	CHECK(offer.delivery_ns == 26200000);
	CHECK(offer.queue_pkts == 1);
	pps_linkem_link_packet_offer(link, 100000, packet, 1500, &offer);
	CHECK(offer.departure_ns == 2400000);
	CHECK(offer.queue_pkts == 2 && offer.queue_bytes == 3000);
	CHECK(pps_linkem_link_next_delivery_ns(link) == 26200000);
	CHECK(pps_linkem_link_packet_pop(link, 26199999, &out) == 0);
	CHECK(pps_linkem_link_packet_pop(link, 26200000, &out) == 1500);
	CHECK(memcmp(out, packet, 1500) == 0);
	CHECK(pps_linkem_link_next_delivery_ns(link) == 27400000);
	/* An idle link serves a late packet at once. */
	pps_linkem_link_packet_offer(link, 100 * MS, packet, 1000, &offer);
	CHECK(offer.departure_ns == 100 * MS + 800000);
	CHECK(offer.queue_pkts == 1);
	pps_linkem_link_free(link);
}

static void
test_queue_limits(void)
{
	pps_linkem_link_config_t c = config_rate(1000000, 0, 3);
	pps_linkem_link_t *link;
	uint8_t packet[1500];
	pps_linkem_offer_t offer;
	int queued = 0, dropped = 0;

	ipv4_packet_make(packet, sizeof(packet), 0);
	link = pps_linkem_link_new(&c);
	for (int i = 0; i < 5; i++) {
		pps_linkem_link_packet_offer(link, 0, packet, 1500, &offer);
		queued += offer.verdict == PPS_LINKEM_VERDICT_QUEUED;
		dropped += offer.verdict == PPS_LINKEM_VERDICT_DROP_QUEUE;
		CHECK(offer.queue_pkts <= 3);
	}
	CHECK(queued == 3 && dropped == 2);
	/* 12 ms later the first packet has left the bottleneck: room for one. */
	pps_linkem_link_packet_offer(link, 12 * MS, packet, 1500, &offer);
	CHECK(offer.verdict == PPS_LINKEM_VERDICT_QUEUED && offer.queue_pkts == 3);
	pps_linkem_link_packet_offer(link, 12 * MS, packet, 1500, &offer);
	CHECK(offer.verdict == PPS_LINKEM_VERDICT_DROP_QUEUE);
	pps_linkem_link_free(link);

	/* The byte limit binds for large packets, the packet limit for small ones. */
	c.queue_limit_pkts = 100;
	c.queue_limit_bytes = 4000;
	link = pps_linkem_link_new(&c);
	queued = 0;
	for (int i = 0; i < 4; i++) {
		pps_linkem_link_packet_offer(link, 0, packet, 1500, &offer);
		queued += offer.verdict == PPS_LINKEM_VERDICT_QUEUED;
		CHECK(offer.queue_bytes <= 4000);
	}
	CHECK(queued == 2);
	pps_linkem_link_packet_offer(link, 0, packet, 1000, &offer);
	CHECK(offer.verdict == PPS_LINKEM_VERDICT_QUEUED && offer.queue_bytes == 4000);
	pps_linkem_link_free(link);
}

static const char *
trace_write(const char *content)
{
	static char path[64];
	FILE *file;

	snprintf(path, sizeof(path), "/tmp/pps-linkem-test-%d.trace", (int)getpid());
	file = fopen(path, "w");
	fputs(content, file);
	fclose(file);
	return path;
}

static void
test_trace(void)
{
	char err[256];
	pps_linkem_trace_t *trace =
	    pps_linkem_trace_load(trace_write("1\n1\n3\n"), err, sizeof(err));
	pps_linkem_link_config_t c = config_rate(0, 5 * MS, 100);
	const int64_t expected_ms[] = {1, 1, 3, 4, 4, 6, 7};
	pps_linkem_link_t *link;
	uint8_t packet[1500];
	pps_linkem_offer_t offer;

	CHECK(trace != NULL);
	if (!trace)
		return;
	CHECK(pps_linkem_trace_opportunities(trace) == 3);
	CHECK(pps_linkem_trace_period_ns(trace) == 3 * MS);
	CHECK(pps_linkem_trace_mean_rate_bps(trace) == 12000000);
	CHECK(pps_linkem_trace_opportunity_ns(trace, 4) == 4 * MS);
	CHECK(pps_linkem_trace_first_at_or_after(trace, 0) == 0);
	CHECK(pps_linkem_trace_first_at_or_after(trace, 1 * MS) == 0);
	CHECK(pps_linkem_trace_first_at_or_after(trace, 2 * MS) == 2);
	CHECK(pps_linkem_trace_first_at_or_after(trace, 3 * MS) == 2);
	CHECK(pps_linkem_trace_first_at_or_after(trace, 3 * MS + 1) == 3);
	CHECK(pps_linkem_trace_first_at_or_after(trace, 6 * MS) == 5);

	c.trace = trace;
	c.trace_epoch_ns = 0;
	link = pps_linkem_link_new(&c);
	ipv4_packet_make(packet, sizeof(packet), 0);
	/* A backlog of full packets uses each opportunity exactly once. */
	for (size_t i = 0; i < sizeof(expected_ms) / sizeof(expected_ms[0]); i++) {
		pps_linkem_link_packet_offer(link, 0, packet, 1500, &offer);
		CHECK(offer.departure_ns == expected_ms[i] * MS);
		CHECK(offer.delivery_ns == expected_ms[i] * MS + 5 * MS);
	}
	/* Opportunities that found the queue empty are gone: 9 ms is missed, 10 ms is used. */
	pps_linkem_link_packet_offer(link, 9 * MS + MS / 2, packet, 1500, &offer);
	CHECK(offer.departure_ns == 10 * MS);
	/* Two 700-byte packets share one opportunity; the third spills into the next. */
	pps_linkem_link_packet_offer(link, 11 * MS, packet, 700, &offer);
	CHECK(offer.departure_ns == 12 * MS);
	pps_linkem_link_packet_offer(link, 11 * MS, packet, 700, &offer);
	CHECK(offer.departure_ns == 12 * MS);
	pps_linkem_link_packet_offer(link, 11 * MS, packet, 700, &offer);
	CHECK(offer.departure_ns == 13 * MS);
	pps_linkem_link_free(link);
	pps_linkem_trace_free(trace);

	/* Refused traces. */
	CHECK(!pps_linkem_trace_load(trace_write(""), err, sizeof(err)) && errno == EINVAL);
	CHECK(strstr(err, "no delivery opportunities") != NULL);
	CHECK(!pps_linkem_trace_load(trace_write("# nothing\n\n"), err, sizeof(err)));
	CHECK(!pps_linkem_trace_load(trace_write("0\n0\n"), err, sizeof(err)));
	CHECK(!pps_linkem_trace_load(trace_write("5\n3\n"), err, sizeof(err)));
	CHECK(!pps_linkem_trace_load(trace_write("1\n-2\n"), err, sizeof(err)));
	CHECK(!pps_linkem_trace_load(trace_write("1\n2x\n"), err, sizeof(err)));
	CHECK(!pps_linkem_trace_load("/nonexistent/trace", err, sizeof(err)) && errno == ENOENT);
	unlink(trace_write(""));
}

static void
test_drd(void)
{
	pps_linkem_link_config_t c = config_rate(1000000, 10 * MS, 1000);
	pps_linkem_link_t *link;
	uint8_t packet[1000];
	pps_linkem_offer_t offer;
	const uint8_t *out;
	int marked = 0, dropped = 0, marked_ok = 1;

	c.aqm = PPS_LINKEM_AQM_DRD;
	c.drd_min_bytes = 10000;
	c.drd_congest_bytes = 20000;
	link = pps_linkem_link_new(&c);
	ipv4_packet_make(packet, sizeof(packet), 2);
	for (int i = 0; i < 60; i++) {
		pps_linkem_link_packet_offer(link, 0, packet, sizeof(packet), &offer);
		if (offer.verdict == PPS_LINKEM_VERDICT_MARKED) {
			marked++;
			CHECK(offer.queue_bytes_seen > c.drd_min_bytes);
		}
		if (offer.verdict == PPS_LINKEM_VERDICT_DROP_AQM) {
			dropped++;
			CHECK(offer.queue_bytes_seen > c.drd_congest_bytes);
		}
		if (offer.queue_bytes_seen <= c.drd_min_bytes)
			CHECK(offer.verdict == PPS_LINKEM_VERDICT_QUEUED);
	}
	CHECK(marked > 0);
	CHECK(dropped > 0);
	/* What comes out marked is CE with a header checksum that still adds up. */
	for (int64_t t = 0; pps_linkem_link_next_delivery_ns(link) != INT64_MAX; t += MS) {
		size_t size;

		while ((size = pps_linkem_link_packet_pop(link, t, &out)) > 0) {
			if ((out[1] & 3) == 3 && ipv4_checksum(out, 20) != 0)
				marked_ok = 0;
			marked -= (out[1] & 3) == 3;
		}
	}
	CHECK(marked == 0);
	CHECK(marked_ok);
	pps_linkem_link_free(link);

	/* Not-ECT traffic passes the marking region untouched, and is dropped above drdcongest. */
	link = pps_linkem_link_new(&c);
	ipv4_packet_make(packet, sizeof(packet), 0);
	for (int i = 0; i < 60; i++) {
		pps_linkem_link_packet_offer(link, 0, packet, sizeof(packet), &offer);
		CHECK(offer.verdict != PPS_LINKEM_VERDICT_MARKED);
		if (offer.verdict == PPS_LINKEM_VERDICT_DROP_AQM)
			CHECK(offer.queue_bytes_seen > c.drd_congest_bytes);
		else
			CHECK(offer.verdict == PPS_LINKEM_VERDICT_QUEUED);
	}
	pps_linkem_link_free(link);
}

static void
test_loss(void)
{
	pps_linkem_link_config_t c = config_rate(1000000000, 0, 65536);
	pps_linkem_link_t *link;
	pps_linkem_link_stats_t stats;
	uint8_t packet[100];
	pps_linkem_offer_t offer;

	c.loss_probability = 0.25;
	link = pps_linkem_link_new(&c);
	ipv4_packet_make(packet, sizeof(packet), 0);
	for (int i = 0; i < 20000; i++)
		pps_linkem_link_packet_offer(link, (int64_t)i * MS, packet, sizeof(packet), &offer);
	pps_linkem_link_stats_get(link, &stats);
	CHECK(stats.arrived_pkts == 20000);
	CHECK(stats.lost_pkts > 4700 && stats.lost_pkts < 5300);
	CHECK(stats.dropped_queue_pkts == 0);
	pps_linkem_link_free(link);
}

static void
test_config_and_parsers(void)
{
	pps_linkem_link_config_t c = config_rate(0, 0, 10);
	char err[128];
	uint64_t rate, count;
	int64_t ns;
	double p;

	CHECK(pps_linkem_link_config_check(&c, err, sizeof(err)) == -EINVAL);
	CHECK(!pps_linkem_link_new(&c) && errno == EINVAL);
	c = config_rate(1000, -1, 10);
	CHECK(pps_linkem_link_config_check(&c, err, sizeof(err)) == -EINVAL);
	c = config_rate(1000, 0, 10);
	c.aqm = PPS_LINKEM_AQM_DRD;
	c.drd_min_bytes = c.drd_congest_bytes = 5;
	CHECK(pps_linkem_link_config_check(&c, err, sizeof(err)) == -EINVAL);

	CHECK(pps_linkem_parse_rate_bps("10mbit", &rate) == 0 && rate == 10000000);
	CHECK(pps_linkem_parse_rate_bps("1.5Mbit", &rate) == 0 && rate == 1500000);
	CHECK(pps_linkem_parse_rate_bps("800kbit", &rate) == 0 && rate == 800000);
	CHECK(pps_linkem_parse_rate_bps("12000", &rate) == 0 && rate == 12000);
	CHECK(pps_linkem_parse_rate_bps("0", &rate) < 0);
	CHECK(pps_linkem_parse_rate_bps("-1mbit", &rate) < 0);
	CHECK(pps_linkem_parse_rate_bps("10 mbit", &rate) < 0);
	CHECK(pps_linkem_parse_rate_bps("fast", &rate) < 0);
	CHECK(pps_linkem_parse_rate_bps("inf", &rate) < 0);
	CHECK(pps_linkem_parse_duration_ns("25ms", &ns) == 0 && ns == 25 * MS);
	CHECK(pps_linkem_parse_duration_ns("25", &ns) == 0 && ns == 25 * MS);
	CHECK(pps_linkem_parse_duration_ns("250us", &ns) == 0 && ns == 250000);
	CHECK(pps_linkem_parse_duration_ns("1.5s", &ns) == 0 && ns == 1500 * MS);
	CHECK(pps_linkem_parse_duration_ns("0", &ns) == 0 && ns == 0);
	CHECK(pps_linkem_parse_duration_ns("-5ms", &ns) < 0);
	CHECK(pps_linkem_parse_duration_ns("5min", &ns) < 0);
	CHECK(pps_linkem_parse_probability("0.01", &p) == 0 && p == 0.01);
	CHECK(pps_linkem_parse_probability("2%", &p) == 0 && p == 0.02);
	CHECK(pps_linkem_parse_probability("1.5", &p) < 0);
	CHECK(pps_linkem_parse_probability("-0.1", &p) < 0);
	CHECK(pps_linkem_parse_count("42", &count) == 0 && count == 42);
	CHECK(pps_linkem_parse_count("64k", &count) == 0 && count == 64000);
	CHECK(pps_linkem_parse_count("-1", &count) < 0);
	CHECK(pps_linkem_parse_count("1.5", &count) < 0);
}

static void
test_mark_ce(void)
{
	uint8_t packet[60];

	ipv4_packet_make(packet, sizeof(packet), 0);
	CHECK(pps_linkem_packet_mark_ce(packet, sizeof(packet)) == -EINVAL);
	ipv4_packet_make(packet, sizeof(packet), 1);
	CHECK(pps_linkem_packet_ecn(packet, sizeof(packet)) == 1);
	CHECK(pps_linkem_packet_mark_ce(packet, sizeof(packet)) == 0);
	CHECK(pps_linkem_packet_ecn(packet, sizeof(packet)) == 3);
	CHECK(ipv4_checksum(packet, 20) == 0);
	memset(packet, 0, sizeof(packet));
	packet[0] = 0x60;
	packet[1] = 0x20; /* traffic class 0x02: ECT(0) */
	CHECK(pps_linkem_packet_ecn(packet, sizeof(packet)) == 2);
	CHECK(pps_linkem_packet_mark_ce(packet, sizeof(packet)) == 0);
	CHECK(pps_linkem_packet_ecn(packet, sizeof(packet)) == 3);
}

int
main(int argc, char **argv)
{
	pps_test_init(&argc, argv);
	PPS_TEST_RUN(test_rate_and_delay);
	PPS_TEST_RUN(test_queue_limits);
	PPS_TEST_RUN(test_trace);
	PPS_TEST_RUN(test_drd);
	PPS_TEST_RUN(test_loss);
	PPS_TEST_RUN(test_config_and_parsers);
	PPS_TEST_RUN(test_mark_ce);
	if (pps_test_failures) {
		fprintf(stderr, "%d check(s) failed\n", pps_test_failures);
		return 1;
	}
	printf("all link model checks passed\n");
	return 0;
}
