/* SPDX-License-Identifier: MIT */
/*
 * adapt/: the path estimate, the latency cap and the rate allocator, driven
 * by an injected clock and TCP_INFO samples of a modelled bottleneck (a
 * fluid queue: what the stream keeps in flight beyond rate * min RTT waits
 * in the queue), including a recorded trace of a real connection.
 */
#include "pps-adapt.h"
#include "pps-test.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#define MSS 1448

/* A bottleneck of @rate_bps with @min_rtt_us, the stream holding
 * @inflight_pkts, @cross_queue_us of other flows' queue in front of it. */
typedef struct {
	int64_t now_us;
	uint64_t acked;
	uint32_t retrans;
} model_t;

static pps_path_sample_t
model_step(model_t *m, int64_t dt_us, uint64_t rate_bps, uint32_t min_rtt_us,
           uint32_t inflight_pkts, uint32_t cross_queue_us, bool app_limited)
{
	pps_path_sample_t s = {0};
	uint64_t bdp_bytes = rate_bps / 8 * min_rtt_us / 1000000;
	uint64_t inflight_bytes = (uint64_t)inflight_pkts * MSS;
	uint64_t own_queue_us =
	    inflight_bytes > bdp_bytes ? (inflight_bytes - bdp_bytes) * 8000000 / rate_bps : 0;
	uint64_t rtt = min_rtt_us + own_queue_us + cross_queue_us;
	/* Little's law: the stream gets inflight / RTT, at most the rate. */
	uint64_t got_bps = inflight_bytes * 8 * 1000000 / rtt;

	if (got_bps > rate_bps)
		got_bps = rate_bps;
	m->now_us += dt_us;
	m->acked += got_bps / 8 * (uint64_t)dt_us / 1000000;
	s.now_us = m->now_us;
	s.delivery_rate_bps = app_limited ? got_bps / 2 : got_bps;
	s.delivery_app_limited = app_limited;
	s.min_rtt_us = min_rtt_us;
	s.srtt_us = (uint32_t)rtt;
	s.bytes_acked = m->acked;
	s.total_retrans_pkts = m->retrans;
	s.cwnd_pkts = inflight_pkts;
	s.unacked_pkts = inflight_pkts;
	s.mss_bytes = MSS;
	return s;
}

/* Runs @seconds of the closed loop: the stream keeps what the cap allows
 * in flight (or @uncapped_pkts without a cap). */
static void
run_loop(pps_path_t *p, model_t *m, double seconds, uint64_t rate_bps, uint32_t min_rtt_us,
         uint32_t cross_queue_us, uint32_t uncapped_pkts)
{
	for (int64_t t = 0; t < (int64_t)(seconds * 1e6); t += 10000) {
		uint32_t cap = pps_path_inflight_cap_pkts(p);
		uint32_t inflight = cap ? cap : uncapped_pkts;
		pps_path_sample_t s =
		    model_step(m, 10000, rate_bps, min_rtt_us, inflight, cross_queue_us, false);

		pps_path_add_sample(p, &s);
	}
}

/* The server's default: a yielding cap, 50 ms queue target (250 ms / 5). */
static pps_path_t *
new_yielding_path(void)
{
	pps_path_params_t pp = {.cap_policy = PPS_LATENCY_CAP_YIELDING, .queue_target_us = 50000};
	pps_path_t *p = pps_path_new(&pp);

	REQUIRE(p);
	return p;
}

static void
test_alone_estimate_and_cap(void)
{
	pps_path_t *p = new_yielding_path();
	pps_path_estimate_t e;
	model_t m = {.now_us = 1000000};

	pps_path_get_estimate(p, &e);
	CHECK(!e.valid);
	CHECK_EQ_INT(pps_path_inflight_cap_pkts(p), 0);
	/* Start with a congestion window's worth: 60 packets, 2 Mbit/s, 50 ms. */
	run_loop(p, &m, 5.0, 2000000, 50000, 0, 60);
	pps_path_get_estimate(p, &e);
	CHECK(e.valid);
	CHECK(e.estimate_bps > 1800000 && e.estimate_bps <= 2000000);
	CHECK_EQ_INT(e.cap_state, PPS_PATH_CAP_SELF);
	/* cap = 2 Mbit/s * (62.5 + 50 ms) = 28125 bytes = 20 packets */
	CHECK(e.inflight_cap_pkts >= 19 && e.inflight_cap_pkts <= 21);
	/* The stream's own queue stays near its target (+ min RTT / 4), far
	 * below the 60 packets (300 ms) a window-limited flow keeps. */
	CHECK(e.queue_delay_us <= 50000 + 12500 + 5000);
	CHECK_EQ_INT(e.min_rtt_us, 50000);
	pps_path_free(p);
}

static void
test_step_down_follows_within_a_second(void)
{
	pps_path_t *p = new_yielding_path();
	pps_path_estimate_t e;
	model_t m = {.now_us = 1000000};

	run_loop(p, &m, 5.0, 8000000, 50000, 0, 200);
	pps_path_get_estimate(p, &e);
	CHECK(e.estimate_bps > 7000000);
	/* Capacity falls to 0.8 Mbit/s: within a second the estimate and the
	 * cap follow, and the queue the stream built drains. */
	run_loop(p, &m, 1.0, 800000, 50000, 0, 200);
	pps_path_get_estimate(p, &e);
	CHECK(e.estimate_bps < 1200000);
	run_loop(p, &m, 2.0, 800000, 50000, 0, 200);
	pps_path_get_estimate(p, &e);
	CHECK(e.estimate_bps >= 600000 && e.estimate_bps <= 900000);
	CHECK(e.queue_delay_us <= 50000 + 12500 + 10000);
	CHECK_EQ_INT(e.cap_state, PPS_PATH_CAP_SELF);
	/* And back up: the 5/4 gain lets the estimate grow with capacity. */
	run_loop(p, &m, 4.0, 4000000, 50000, 0, 200);
	pps_path_get_estimate(p, &e);
	CHECK(e.estimate_bps > 3000000);
	pps_path_free(p);
}

static void
test_yields_to_cross_traffic_and_retests(void)
{
	pps_path_t *p = new_yielding_path();
	pps_path_estimate_t e;
	model_t m = {.now_us = 1000000};

	CHECK(!pps_path_shared(p)); /* alone until a path says otherwise */
	run_loop(p, &m, 3.0, 2000000, 50000, 0, 60);
	pps_path_get_estimate(p, &e);
	CHECK_EQ_INT(e.cap_state, PPS_PATH_CAP_SELF);
	CHECK(!pps_path_shared(p));
	/* Loss-based flows keep 400 ms of queue whatever the stream does. */
	run_loop(p, &m, 1.5, 2000000, 50000, 400000, 60);
	pps_path_get_estimate(p, &e);
	CHECK_EQ_INT(e.cap_state, PPS_PATH_CAP_COMPETING);
	CHECK_EQ_INT(e.inflight_cap_pkts, 0);
	CHECK(pps_path_shared(p));
	CHECK(!e.others_confirmed); /* no test yet: it may be a moment of its own */
	/* While they do, retests (every 4 s) find the queue still full: shared
	 * throughout, a test included (no congestion control switch per test). */
	run_loop(p, &m, 9.0, 2000000, 50000, 400000, 60);
	pps_path_get_estimate(p, &e);
	CHECK(e.cap_state == PPS_PATH_CAP_COMPETING || e.cap_state == PPS_PATH_CAP_TEST);
	CHECK(pps_path_shared(p));
	CHECK(e.others_confirmed);
	/* They leave: a later retest (failed ones back off up to 32 s) finds
	 * the queue drained and caps again. */
	run_loop(p, &m, 33.0, 2000000, 50000, 0, 60);
	pps_path_get_estimate(p, &e);
	CHECK_EQ_INT(e.cap_state, PPS_PATH_CAP_SELF);
	CHECK(e.inflight_cap_pkts > 0);
	CHECK(!pps_path_shared(p));
	CHECK(!e.others_confirmed);
	pps_path_free(p);
}

static void
test_policies_off_and_always(void)
{
	pps_path_params_t off = {.cap_policy = PPS_LATENCY_CAP_OFF, .queue_target_us = 50000};
	pps_path_params_t always = {.cap_policy = PPS_LATENCY_CAP_ALWAYS, .queue_target_us = 50000};
	pps_path_params_t bad = {.cap_policy = (pps_latency_cap_policy_t)9};
	pps_path_t *a = pps_path_new(&off), *b = pps_path_new(&always);
	model_t ma = {.now_us = 1}, mb = {.now_us = 1};
	pps_path_estimate_t e;

	REQUIRE(a && b);
	errno = 0;
	CHECK(!pps_path_new(&bad) && errno == EINVAL);
	run_loop(a, &ma, 3.0, 2000000, 50000, 400000, 60);
	run_loop(b, &mb, 3.0, 2000000, 50000, 400000, 60);
	pps_path_get_estimate(a, &e);
	CHECK(e.valid);
	CHECK_EQ_INT(e.cap_state, PPS_PATH_CAP_NONE);
	CHECK_EQ_INT(e.inflight_cap_pkts, 0);
	pps_path_get_estimate(b, &e);
	CHECK_EQ_INT(e.cap_state, PPS_PATH_CAP_SELF);
	CHECK(e.inflight_cap_pkts >= 4);
	/* Neither policy knows whether others share the path. */
	CHECK(!pps_path_shared(a) && !pps_path_shared(b));
	CHECK(strcmp(pps_latency_cap_names[PPS_LATENCY_CAP_YIELDING], "yielding") == 0);
	CHECK(strcmp(pps_path_cap_state_name(PPS_PATH_CAP_COMPETING), "competing") == 0);
	pps_path_free(a);
	pps_path_free(b);
}

/* The seconds with a retransmission: a burst (a capacity step down) counts
 * once and ages out; losses second after second count each. */
static void
test_retrans_seconds(void)
{
	pps_path_t *p = new_yielding_path();
	pps_path_estimate_t e;
	pps_path_sample_t s = {.now_us = 1000000,
	                       .min_rtt_us = 50000,
	                       .srtt_us = 60000,
	                       .mss_bytes = MSS,
	                       .cwnd_pkts = 10};

	REQUIRE(p);
	for (int i = 0; i < 200; i++) { /* 20 s, a sample every 100 ms */
		int64_t t = i * 100000;

		s.now_us += 100000;
		s.bytes_acked += 25000;
		s.delivery_rate_bps = 2000000;
		if (t >= 2000000 && t < 2400000)
			s.total_retrans_pkts += 5; /* 20 packets within 0.4 s */
		if (t >= 10000000 && t % 1000000 == 500000)
			s.total_retrans_pkts++; /* one a second from 10.5 s */
		pps_path_add_sample(p, &s);
		pps_path_get_estimate(p, &e);
		if (t == 3000000)
			CHECK_EQ_INT(e.retrans_seconds, 1);
		if (t == 9000000)
			CHECK_EQ_INT(e.retrans_seconds, 0); /* the burst aged out */
		if (t == 11600000)
			CHECK_EQ_INT(e.retrans_seconds, 2);
		if (t == 12600000)
			CHECK_EQ_INT(e.retrans_seconds, 3);
		if (t >= 16000000) /* + 1 once the current second had its own */
			CHECK(e.retrans_seconds == PPS_PATH_RETRANS_SECONDS ||
			      e.retrans_seconds == PPS_PATH_RETRANS_SECONDS + 1);
	}
	CHECK_EQ_INT(e.retrans_pkts, 20 + 10);
	pps_path_free(p);
}

/* A stream that sends at its tcp-friendly rate over a path of @srtt_us that
 * loses one packet in every @loss_every (none when 0); returns the mean rate
 * over the last @seconds - 10 s. */
static double
run_tcp_friendly(pps_path_t *p, pps_path_sample_t *state, double seconds, uint32_t srtt_us,
                 double loss_every, uint64_t start_bps)
{
	pps_path_sample_t s = *state;
	double sent_pkts = 0, sum = 0;
	int n = 0;

	s.srtt_us = s.min_rtt_us = srtt_us;
	s.mss_bytes = MSS;
	if (!s.now_us)
		s.now_us = 1000000;
	for (int64_t t = 0; t < (int64_t)(seconds * 1e6); t += 10000) {
		uint64_t rate = pps_path_rate_cap_bps(p);

		if (!rate)
			rate = start_bps;
		s.now_us += 10000;
		s.bytes_acked += rate / 8 / 100;
		s.delivery_rate_bps = rate;
		sent_pkts += (double)rate / 100 / (MSS * 8);
		if (loss_every > 0 && sent_pkts >= loss_every) {
			sent_pkts -= loss_every;
			s.total_retrans_pkts++;
		}
		pps_path_add_sample(p, &s);
		if (t >= 10000000) {
			sum += (double)pps_path_rate_cap_bps(p);
			n++;
		}
	}
	*state = s;
	return n ? sum / n : 0;
}

static void
test_tcp_friendly_rate(void)
{
	pps_path_params_t pp = {.cap_policy = PPS_LATENCY_CAP_OFF,
	                        .rate_control = PPS_RATE_CONTROL_TCP_FRIENDLY};
	pps_path_params_t off = {.cap_policy = PPS_LATENCY_CAP_OFF};
	pps_path_estimate_t e;
	pps_path_sample_t st = {0};
	pps_path_t *p;
	uint64_t before, after;
	double mean, mathis;

	CHECK(strcmp(pps_rate_control_names[PPS_RATE_CONTROL_TCP_FRIENDLY], "tcp-friendly") == 0);
	pp.rate_control = (pps_rate_control_t)7;
	CHECK(!pps_path_new(&pp) && errno == EINVAL);
	pp.rate_control = PPS_RATE_CONTROL_TCP_FRIENDLY;

	/* Off: no rate, the estimate is the path's. */
	p = pps_path_new(&off);
	REQUIRE(p);
	run_tcp_friendly(p, &st, 2.0, 100000, 0, 1000000);
	pps_path_get_estimate(p, &e);
	CHECK(e.valid);
	CHECK_EQ_INT(e.fair_rate_bps, 0);
	CHECK_EQ_INT(pps_path_rate_cap_bps(p), 0);
	pps_path_free(p);

	/* No loss: ALPHA packets per RTT more every RTT (10 RTTs a second). */
	p = pps_path_new(&pp);
	REQUIRE(p);
	memset(&st, 0, sizeof(st));
	run_tcp_friendly(p, &st, 1.0, 100000, 0, 1000000);
	before = pps_path_rate_cap_bps(p);
	CHECK(before > 0);
	run_tcp_friendly(p, &st, 1.0, 100000, 0, 1000000);
	after = pps_path_rate_cap_bps(p);
	{
		double grown = (double)(after - before);
		double want = 10.0 * PPS_PATH_FAIR_ALPHA_MILLI / 1000.0 * MSS * 8 / 0.1;

		CHECK(grown > want * 0.9 && grown < want * 1.1);
	}
	pps_path_get_estimate(p, &e);
	CHECK(e.estimate_bps <= e.fair_rate_bps);
	CHECK_EQ_INT(e.loss_events, 0);
	CHECK_EQ_INT(e.fair_rate_bps, after);
	pps_path_free(p);

	/* A pacing gain raises the pacing rate alone: the rate reported, the
	 * estimate and the window stay at the tcp-friendly rate's. */
	{
		pps_path_params_t g = pp;
		pps_path_sample_t sg = {0};
		pps_path_t *q;
		pps_path_estimate_t eg;

		g.pacing_gain_pct = 250;
		q = pps_path_new(&g);
		p = pps_path_new(&pp);
		REQUIRE(p && q);
		memset(&st, 0, sizeof(st));
		run_tcp_friendly(p, &st, 1.0, 100000, 0, 1000000);
		run_tcp_friendly(q, &sg, 1.0, 100000, 0, 1000000);
		pps_path_get_estimate(p, &e);
		pps_path_get_estimate(q, &eg);
		CHECK(e.fair_rate_bps > 0);
		CHECK_EQ_INT(eg.fair_rate_bps, e.fair_rate_bps);
		CHECK_EQ_INT(eg.estimate_bps, e.estimate_bps);
		CHECK_EQ_INT(pps_path_inflight_cap_pkts(q), pps_path_inflight_cap_pkts(p));
		CHECK_EQ_INT(pps_path_rate_cap_bps(q), e.fair_rate_bps * 5 / 2);
		CHECK_EQ_INT(pps_path_rate_cap_bps(p), e.fair_rate_bps);
		pps_path_free(q);
		pps_path_free(p);
	}

	/* At a steady loss rate the mean is a Reno flow's (Mathis et al.:
	 * 1.22 MSS / (RTT sqrt(p))), here 2% and 6% loss at 100 ms. */
	for (int i = 0; i < 2; i++) {
		double loss = i ? 0.06 : 0.02;

		p = pps_path_new(&pp);
		REQUIRE(p);
		memset(&st, 0, sizeof(st));
		mean = run_tcp_friendly(p, &st, 120.0, 100000, 1.0 / loss, 2000000);
		mathis = 1.22 * MSS * 8 / 0.1 / sqrt(loss);
		CHECK(mean > mathis * 0.8 && mean < mathis * 1.25);
		pps_path_get_estimate(p, &e);
		CHECK(e.loss_events > 10);
		pps_path_free(p);
	}

	/* Several retransmissions in one round trip are one decrease. */
	p = pps_path_new(&pp);
	REQUIRE(p);
	{
		model_t m = {.now_us = 1000000};
		pps_path_sample_t s;

		for (int k = 0; k < 100; k++) {
			s = model_step(&m, 10000, 8000000, 100000, 100, 0, false);
			pps_path_add_sample(p, &s);
		}
		before = pps_path_rate_cap_bps(p);
		for (int k = 0; k < 3; k++) {
			m.retrans++;
			s = model_step(&m, 10000, 8000000, 100000, 100, 0, false);
			pps_path_add_sample(p, &s);
		}
		after = pps_path_rate_cap_bps(p);
		CHECK(after <= before * PPS_PATH_FAIR_BETA_PCT / 100 + 1);
		CHECK(after >= before * PPS_PATH_FAIR_BETA_PCT / 100 - 1);
		pps_path_get_estimate(p, &e);
		CHECK_EQ_INT(e.loss_events, 1);
		/* Losses in every round trip: down to two packets per RTT, no lower. */
		for (int k = 0; k < 200; k++) {
			m.retrans++;
			s = model_step(&m, 100000, 8000000, 100000, 100, 0, false);
			pps_path_add_sample(p, &s);
		}
		CHECK_EQ_INT(pps_path_rate_cap_bps(p), 2ull * MSS * 8 * 1000000 / s.srtt_us);
	}
	pps_path_free(p);

	/* Under the yielding cap the rate is in force only while others hold
	 * the queue: alone, the path estimate and the latency cap decide. */
	{
		pps_path_params_t yp = {.cap_policy = PPS_LATENCY_CAP_YIELDING,
		                        .queue_target_us = 50000,
		                        .rate_control = PPS_RATE_CONTROL_TCP_FRIENDLY};
		model_t m = {.now_us = 1000000};

		p = pps_path_new(&yp);
		REQUIRE(p);
		run_loop(p, &m, 3.0, 2000000, 50000, 0, 60);
		pps_path_get_estimate(p, &e);
		CHECK_EQ_INT(e.cap_state, PPS_PATH_CAP_SELF);
		CHECK_EQ_INT(pps_path_rate_cap_bps(p), 0);
		CHECK_EQ_INT(e.fair_rate_bps, 0);
		run_loop(p, &m, 1.5, 2000000, 50000, 400000, 60);
		pps_path_get_estimate(p, &e);
		CHECK_EQ_INT(e.cap_state, PPS_PATH_CAP_COMPETING);
		CHECK(pps_path_rate_cap_bps(p) > 0);
		CHECK_EQ_INT(e.estimate_bps, e.fair_rate_bps);
		/* rate x min(srtt, min RTT + 2 x queue target) + 2 packets held at
		 * most: here srtt is 450 ms and min RTT + 100 ms decides. */
		CHECK(e.inflight_cap_pkts > 0);
		CHECK(e.srtt_us > 400000);
		CHECK(e.inflight_cap_pkts <= e.fair_rate_bps / 8 * 150000 / 1000000 / MSS + 1 + 2);
		pps_path_free(p);
	}

	/* Application-limited: never above 1.5 times what was acknowledged. */
	p = pps_path_new(&pp);
	REQUIRE(p);
	{
		pps_path_sample_t s = {.srtt_us = 50000, .min_rtt_us = 50000, .mss_bytes = MSS};

		s.now_us = 1000000;
		for (int k = 0; k < 2000; k++) {
			s.now_us += 10000;
			s.bytes_acked += 500000 / 8 / 100; /* 0.5 Mbit/s */
			s.delivery_rate_bps = 500000;
			s.delivery_app_limited = true;
			pps_path_add_sample(p, &s);
		}
		CHECK(pps_path_rate_cap_bps(p) <= 750000 + 15000);
		CHECK(pps_path_rate_cap_bps(p) >= 750000 - 15000);
	}
	pps_path_free(p);
	/* 2 Mbit/s, then a dip of 1.5 s to 0.4 Mbit/s (a layer cut until the
	 * next IDR): the credit of the last seconds stays, and the rate with it;
	 * sending little for longer than the credit lasts (4 s): 1.5 times that. */
	p = pps_path_new(&pp);
	REQUIRE(p);
	{
		pps_path_sample_t s = {.srtt_us = 50000, .min_rtt_us = 50000, .mss_bytes = MSS};

		s.now_us = 1000000;
		for (int k = 0; k < 3150; k++) {
			uint64_t bps = k < 1500 || k >= 1650 ? 2000000 : 400000;

			if (k >= 3000)
				bps = 400000;
			s.now_us += 10000;
			s.bytes_acked += bps / 8 / 100;
			s.delivery_rate_bps = bps;
			s.delivery_app_limited = true;
			pps_path_add_sample(p, &s);
			if (k == 1499)
				before = pps_path_rate_cap_bps(p);
			if (k == 1649)
				after = pps_path_rate_cap_bps(p);
		}
		CHECK(before >= 3000000 - 60000 && before <= 3000000 + 60000);
		CHECK(after >= before);
		/* 1.5 s into a dip: still the credit of the 2 Mbit/s before */
		CHECK(pps_path_rate_cap_bps(p) >= 3000000 - 60000);
		for (int k = 0; k < 500; k++) {
			s.now_us += 10000;
			s.bytes_acked += 400000 / 8 / 100;
			s.delivery_rate_bps = 400000;
			pps_path_add_sample(p, &s);
		}
		CHECK(pps_path_rate_cap_bps(p) <= 600000 + 15000);
	}
	pps_path_free(p);
}

static void
test_retransmission_and_order(void)
{
	pps_path_t *p = new_yielding_path();
	model_t m = {.now_us = 1000000};
	pps_path_estimate_t e, before;
	pps_path_sample_t s;

	run_loop(p, &m, 2.0, 2000000, 50000, 0, 20);
	pps_path_get_estimate(p, &e);
	CHECK(!e.congested);
	m.retrans += 3;
	s = model_step(&m, 10000, 2000000, 50000, 20, 0, false);
	pps_path_add_sample(p, &s);
	pps_path_get_estimate(p, &e);
	CHECK(e.congested);
	CHECK_EQ_INT(e.retrans_pkts, 3);
	/* A sample from the past changes nothing. */
	before = e;
	s.now_us -= 500000;
	s.srtt_us = 900000;
	pps_path_add_sample(p, &s);
	pps_path_get_estimate(p, &e);
	CHECK_EQ_INT(e.srtt_us, before.srtt_us);
	pps_path_free(p);
}

/* Samples recorded from a real connection (tests/unit/data/path-trace.csv):
 * t_us,delivery_rate_bps,app_limited,min_rtt_us,srtt_us,bytes_acked,retrans,cwnd,mss
 * and the capacity the lab link had at the time, in a comment line. */
static void
test_recorded_trace(const char *dir)
{
	char path[512], line[256];
	FILE *f;
	pps_path_t *p = new_yielding_path();
	pps_path_estimate_t e;
	long long capacity_bps = 0;
	int samples = 0;
	int64_t t0 = 0;
	double sum_ratio = 0;
	int n_ratio = 0;

	snprintf(path, sizeof(path), "%s/tests/unit/data/path-trace.csv", dir);
	f = fopen(path, "r");
	REQUIRE(f);
	while (fgets(line, sizeof(line), f)) {
		pps_path_sample_t s = {0};
		long long t, rate, acked;
		unsigned app, min_rtt, srtt, retrans, cwnd, mss;

		if (sscanf(line, "# capacity_bps %lld", &capacity_bps) == 1)
			continue;
		if (sscanf(line, "%lld,%lld,%u,%u,%u,%lld,%u,%u,%u", &t, &rate, &app, &min_rtt,
		           &srtt, &acked, &retrans, &cwnd, &mss) != 9)
			continue;
		s.now_us = t;
		s.delivery_rate_bps = (uint64_t)rate;
		s.delivery_app_limited = app != 0;
		s.min_rtt_us = min_rtt;
		s.srtt_us = srtt;
		s.bytes_acked = (uint64_t)acked;
		s.total_retrans_pkts = retrans;
		s.cwnd_pkts = cwnd;
		s.mss_bytes = mss;
		pps_path_add_sample(p, &s);
		if (!t0)
			t0 = t;
		samples++;
		pps_path_get_estimate(p, &e);
		/* After two seconds the estimate stays within the link's capacity
		 * and above a third of it. */
		if (t - t0 > 2000000 && e.valid) {
			CHECK(e.estimate_bps <= (uint64_t)capacity_bps * 11 / 10);
			sum_ratio += (double)e.estimate_bps / (double)capacity_bps;
			n_ratio++;
		}
	}
	fclose(f);
	REQUIRE(capacity_bps > 0);
	CHECK(samples > 100);
	CHECK(n_ratio > 0 && sum_ratio / n_ratio > 0.5);
	fprintf(stderr, "recorded trace: %d samples, mean estimate %.2f of capacity\n", samples,
	        n_ratio ? sum_ratio / n_ratio : 0.0);
	pps_path_free(p);
}

static pps_ratealloc_params_t
alloc_params(int layers)
{
	pps_ratealloc_params_t ap = {
	    .quality_layers = layers,
	    .base_share_pct = 50,
	    .probe_pct = 110,
	    .min_base_kbps = 100,
	    .min_crf = 16,
	    .latency_budget_us = 250000,
	    .window_us = 66667,
	    .interval_us = 250000,
	};

	for (int q = 0; q < layers; q++) {
		ap.max_kbps[q] = 20000;
		ap.max_crf[q] = q ? 24 : 26;
	}
	return ap;
}

static void
test_ratealloc_one_client(void)
{
	pps_ratealloc_params_t ap = alloc_params(2);
	pps_ratealloc_t *ra = pps_ratealloc_new(&ap);
	pps_ratealloc_client_t c = {.estimate_bps = 1000000, .min_rtt_us = 50000};
	pps_layer_rates_t r;
	int64_t now = 1000000;

	REQUIRE(ra);
	pps_ratealloc_get(ra, &r);
	CHECK_EQ_INT(r.kbps[0], 20000);
	CHECK_EQ_INT(r.crf[1], 24);
	/* Decreases apply at once: base 50% of 1 Mbit/s, the rest up to 110%. */
	CHECK_EQ_INT(pps_ratealloc_update(ra, now, &c, 1, NULL, &r), 1);
	CHECK_EQ_INT(r.kbps[0], 500);
	CHECK_EQ_INT(r.kbps[1], 600);
	/* The base's largest frame: half of what 1 Mbit/s carries in
	 * 250 - 66.7 - 25 ms, i.e. ~79 kbit; at least one window of its rate. */
	CHECK(r.buffer_kbit[0] >= 75 && r.buffer_kbit[0] <= 80);
	/* Within the interval nothing happens. */
	c.estimate_bps = 400000;
	CHECK_EQ_INT(pps_ratealloc_update(ra, now + 100000, &c, 1, NULL, &r), 0);
	CHECK_EQ_INT(r.kbps[0], 500);
	/* A 5% change is below the hysteresis. */
	now += 250000;
	c.estimate_bps = 1050000;
	CHECK_EQ_INT(pps_ratealloc_update(ra, now, &c, 1, NULL, &r), 0);
	CHECK_EQ_INT(r.kbps[0], 500);
	/* Increases are bounded to x1.25 per update. */
	c.estimate_bps = 4000000;
	now += 250000;
	CHECK_EQ_INT(pps_ratealloc_update(ra, now, &c, 1, NULL, &r), 1);
	CHECK_EQ_INT(r.kbps[0], 625);
	for (int i = 0; i < 20; i++) {
		now += 250000;
		pps_ratealloc_update(ra, now, &c, 1, NULL, &r);
	}
	/* Up to the target, short of the last step under the 10% hysteresis. */
	CHECK(r.kbps[0] >= 1820 && r.kbps[0] <= 2000);
	CHECK(r.kbps[1] >= 2180 && r.kbps[1] <= 2400);
	/* A rate-capped client (its estimate is its tcp-friendly rate): the
	 * layers reach 85% of its estimate, not 110% above it. */
	{
		pps_ratealloc_t *rc = pps_ratealloc_new(&ap);
		pps_ratealloc_client_t cc = {
		    .estimate_bps = 1000000, .min_rtt_us = 50000, .rate_capped = true};
		pps_layer_rates_t rr;

		REQUIRE(rc);
		CHECK_EQ_INT(pps_ratealloc_update(rc, 1000000, &cc, 1, NULL, &rr), 1);
		CHECK_EQ_INT(rr.kbps[0], 500);
		CHECK_EQ_INT(rr.kbps[0] + rr.kbps[1], 850);
		pps_ratealloc_free(rc);
	}
	/* No client with an estimate: the rates stay. */
	now += 250000;
	CHECK_EQ_INT(pps_ratealloc_update(ra, now, NULL, 0, NULL, &r), 0);
	CHECK(r.kbps[0] >= 1820);
	/* A floor for the base. */
	c.estimate_bps = 50000;
	now += 250000;
	pps_ratealloc_update(ra, now, &c, 1, NULL, &r);
	CHECK_EQ_INT(r.kbps[0], 100);
	pps_ratealloc_free(ra);
}

/* With base_memory_us, the base follows the slowest estimate's low over that
 * long: an AIMD's sawtooth sizes it at the trough, while the layers above
 * follow the latest estimate; a fall acts at once, a rise once the low has
 * aged out. */
static void
test_ratealloc_base_memory(void)
{
	pps_ratealloc_params_t ap = alloc_params(2);
	pps_ratealloc_t *ra;
	pps_ratealloc_client_t c = {
	    .estimate_bps = 1000000, .min_rtt_us = 50000, .rate_capped = true};
	pps_layer_rates_t r;
	int64_t now = 1000000;

	ap.base_memory_us = 2000000;
	ra = pps_ratealloc_new(&ap);
	REQUIRE(ra);
	/* A sawtooth between 0.7 and 1 Mbit/s, a period of 1 s. */
	for (int i = 0; i < 16; i++, now += 250000) {
		c.estimate_bps = 700000 + 100000 * (uint64_t)(i % 4);
		pps_ratealloc_update(ra, now, &c, 1, NULL, &r);
		if (i >= 4) /* 50% of the trough; the layer above takes the rest */
			CHECK_EQ_INT(r.kbps[0], 350);
	}
	/* The path settles at 1 Mbit/s: the base stays while the last trough
	 * (1 s ago) is within the 2 s, then rises by the allocator's steps. */
	c.estimate_bps = 1000000;
	pps_ratealloc_update(ra, now, &c, 1, NULL, &r);
	CHECK_EQ_INT(r.kbps[0], 350);
	for (int i = 0; i < 8; i++) {
		now += 250000;
		pps_ratealloc_update(ra, now, &c, 1, NULL, &r);
	}
	CHECK_EQ_INT(r.kbps[0], 500);
	/* A fall acts at once. */
	now += 250000;
	c.estimate_bps = 400000;
	pps_ratealloc_update(ra, now, &c, 1, NULL, &r);
	CHECK_EQ_INT(r.kbps[0], 200);
	pps_ratealloc_free(ra);
	/* Without it the base follows the latest: at a peak, 50% of the peak. */
	ap.base_memory_us = 0;
	ra = pps_ratealloc_new(&ap);
	REQUIRE(ra);
	now = 1000000;
	for (int i = 0; i < 16; i++, now += 250000) {
		c.estimate_bps = 700000 + 100000 * (uint64_t)(i % 4);
		pps_ratealloc_update(ra, now, &c, 1, NULL, &r);
	}
	CHECK(r.kbps[0] > 350);
	pps_ratealloc_free(ra);
}

static void
test_ratealloc_heterogeneous(void)
{
	pps_ratealloc_params_t ap = alloc_params(3);
	pps_ratealloc_t *ra = pps_ratealloc_new(&ap);
	pps_ratealloc_client_t c[3] = {
	    {.estimate_bps = 8000000, .min_rtt_us = 50000},
	    {.estimate_bps = 500000, .min_rtt_us = 50000},
	    {.estimate_bps = 2000000, .min_rtt_us = 50000},
	};
	pps_layer_rates_t r;

	REQUIRE(ra);
	CHECK_EQ_INT(pps_ratealloc_update(ra, 0, c, 3, NULL, &r), 1);
	/* Base for the slowest, first enhancement up to the middle client,
	 * second up to the fastest (each 110%). */
	CHECK_EQ_INT(r.kbps[0], 250);
	CHECK_EQ_INT(r.kbps[0] + r.kbps[1], 2200);
	CHECK_EQ_INT(r.kbps[0] + r.kbps[1] + r.kbps[2], 8800);
	/* The base frame bound follows the slowest client, not the base rate. */
	CHECK(r.buffer_kbit[0] <= 500 * 159 / 1000 / 2 + 1);
	/* Two layers for three clients: the enhancement spans to the fastest. */
	pps_ratealloc_free(ra);
	ap = alloc_params(2);
	ra = pps_ratealloc_new(&ap);
	REQUIRE(ra);
	pps_ratealloc_update(ra, 0, c, 3, NULL, &r);
	CHECK_EQ_INT(r.kbps[0], 250);
	CHECK_EQ_INT(r.kbps[0] + r.kbps[1], 8800);
	pps_ratealloc_free(ra);
	/* Bad parameters. */
	ap.quality_layers = 0;
	errno = 0;
	CHECK(!pps_ratealloc_new(&ap) && errno == EINVAL);
}

static void
test_ratealloc_crf_steering(void)
{
	pps_ratealloc_params_t ap = alloc_params(2);
	pps_ratealloc_t *ra = pps_ratealloc_new(&ap);
	pps_ratealloc_client_t c = {.estimate_bps = 4000000, .min_rtt_us = 50000};
	uint64_t low[2] = {100000, 100000}, high[2] = {2000000, 2400000};
	pps_layer_rates_t r;
	int64_t now = 0;

	REQUIRE(ra);
	/* Easy content: far below the rates, the CRF gets finer, down to min_crf. */
	for (int i = 0; i < 30; i++, now += 250000)
		pps_ratealloc_update(ra, now, &c, 1, low, &r);
	CHECK_EQ_INT(r.crf[0], 16);
	CHECK_EQ_INT(r.crf[1], 16);
	/* Pressing on the cap: back towards the configured CRF, never beyond. */
	for (int i = 0; i < 30; i++, now += 250000)
		pps_ratealloc_update(ra, now, &c, 1, high, &r);
	CHECK_EQ_INT(r.crf[0], 26);
	CHECK_EQ_INT(r.crf[1], 24);
	pps_ratealloc_free(ra);
}

/* A client whose estimate is its tcp-friendly rate (rate_capped) beside
 * loss-based flows, with content that needs fewer bits than its share: the
 * base makes a fraction of its rate (x264 under a base's small VBV buffer
 * at min_crf), the enhancement what its CRF gives. The layers' top is the
 * estimate itself, and it is filled by what the base produces, not by the
 * base's target; the enhancement's CRF gets finer below 80% of its rate. */
static pps_ratealloc_params_t
server_params(void)
{
	/* The server's defaults: base 70%, probe 125%, min CRF 18, CRF 26/24. */
	pps_ratealloc_params_t ap = alloc_params(2);

	ap.base_share_pct = 70;
	ap.probe_pct = 125;
	ap.min_crf = 18;
	return ap;
}

/* The enhancement layer's CRF after three updates for @client, the base
 * producing its rate and the enhancement 2/3 of its own. */
static int
enhancement_crf_at_two_thirds(const pps_ratealloc_params_t *ap,
                              const pps_ratealloc_client_t *client)
{
	pps_ratealloc_t *ra = pps_ratealloc_new(ap);
	pps_layer_rates_t r;
	int64_t now = 0;

	REQUIRE(ra);
	for (int i = 0; i < 3; i++, now += 250000) {
		uint64_t enc[2];

		pps_ratealloc_get(ra, &r);
		enc[0] = (uint64_t)r.kbps[0] * 1000u;
		enc[1] = (uint64_t)r.kbps[1] * 1000u * 2 / 3;
		pps_ratealloc_update(ra, now, client, 1, enc, &r);
	}
	pps_ratealloc_free(ra);
	return r.crf[1];
}

static void
test_ratealloc_capped_easy_content(void)
{
	pps_ratealloc_params_t ap = server_params();
	pps_ratealloc_client_t capped = {
	    .estimate_bps = 500000, .min_rtt_us = 50000, .rate_capped = true};
	pps_ratealloc_client_t probing = {.estimate_bps = 500000, .min_rtt_us = 50000};
	pps_layer_rates_t r;
	pps_ratealloc_t *ra;
	int64_t now = 0;

	/* The base makes 40 of its 350 kbit/s; the enhancement fills its rate:
	 * the enhancement's rate is 85% of 500 - 5/4 x 40, not 85% of 500 - 350. */
	ra = pps_ratealloc_new(&ap);
	REQUIRE(ra);
	for (int i = 0; i < 40; i++, now += 250000) {
		uint64_t enc[2];

		pps_ratealloc_get(ra, &r);
		enc[0] = 40000;
		enc[1] = (uint64_t)r.kbps[1] * 1000u;
		pps_ratealloc_update(ra, now, &capped, 1, enc, &r);
	}
	CHECK_EQ_INT(r.kbps[0], 350);
	CHECK(r.kbps[1] >= 370 && r.kbps[1] <= 375);
	/* Pressing on its rate: the configured CRF, no finer. */
	CHECK_EQ_INT(r.crf[1], 24);
	pps_ratealloc_free(ra);

	/* A probing top (the client's own path estimate, not a rate cap): as
	 * before, the layers span to 125% of it above the base's target. */
	ra = pps_ratealloc_new(&ap);
	REQUIRE(ra);
	now = 0;
	for (int i = 0; i < 40; i++, now += 250000) {
		uint64_t enc[2] = {40000, 0};

		pps_ratealloc_get(ra, &r);
		enc[1] = (uint64_t)r.kbps[1] * 1000u;
		pps_ratealloc_update(ra, now, &probing, 1, enc, &r);
	}
	CHECK_EQ_INT(r.kbps[0], 350);
	CHECK_EQ_INT(r.kbps[0] + r.kbps[1], 625);
	pps_ratealloc_free(ra);

	/* Under a capped top, 2/3 of its rate is far below it: finer CRF.
	 * (Under a probing top, 2/3 is not: the CRF stays.) */
	CHECK(enhancement_crf_at_two_thirds(&ap, &capped) < 24);
	CHECK_EQ_INT(enhancement_crf_at_two_thirds(&ap, &probing), 24);
}

/* The closed loop beside loss-based flows, modelled: the path leaves the
 * stream a share of 450 kbit/s; the tcp-friendly rate (the estimate) grows
 * towards it but never above 3/2 of what the stream sent (its ceiling in
 * adapt/pps-path.c: an application-limited stream earns no credit). Easy
 * content: the base makes at most 40 kbit/s, the enhancement at most
 * 400 kbit/s at CRF 18, half as much every 6 CRF steps coarser (200 at the
 * configured 24). The stream must come to send most of the 85% of the rate
 * its layers are given (it held a fifth of the share when the
 * enhancement's rate was the estimate minus the base's target, at CRF 24). */
static double
easy_content_kbps(int crf)
{
	double kbps = 400.0;

	/* 2^(1/6) per step (no libm here) */
	for (int c = 18; c < crf; c++)
		kbps /= 1.122462;
	return kbps;
}

static void
test_ratealloc_capped_loop_fills_share(void)
{
	pps_ratealloc_params_t ap = server_params();
	pps_ratealloc_t *ra = pps_ratealloc_new(&ap);
	pps_ratealloc_client_t c = {
	    .estimate_bps = 250000, .min_rtt_us = 50000, .rate_capped = true};
	const double share_kbps = 450.0;
	double sent_kbps = 0, sum = 0;
	pps_layer_rates_t r;
	int n = 0;

	REQUIRE(ra);
	for (int i = 0; i < 240; i++) {
		uint64_t enc[2];
		double e0, e1, est;

		pps_ratealloc_get(ra, &r);
		e0 = r.kbps[0] < 40 ? r.kbps[0] : 40.0;
		e1 = easy_content_kbps(r.crf[1]);
		if (e1 > r.kbps[1])
			e1 = r.kbps[1];
		enc[0] = (uint64_t)(e0 * 1000);
		enc[1] = (uint64_t)(e1 * 1000);
		sent_kbps = e0 + e1;
		if (i >= 160) {
			sum += sent_kbps;
			n++;
		}
		est = sent_kbps * 1.5 < share_kbps ? sent_kbps * 1.5 : share_kbps;
		if (i > 0)
			c.estimate_bps = (uint64_t)(est * 1000);
		pps_ratealloc_update(ra, (int64_t)i * 250000, &c, 1, enc, &r);
	}
	fprintf(stderr, "capped loop, easy content: sends %.0f of a %.0f kbit/s share, CRF %d\n",
	        sum / n, share_kbps, r.crf[1]);
	CHECK(sum / n >= 0.65 * share_kbps);
	CHECK(r.crf[1] < 24);
	pps_ratealloc_free(ra);
}

/* B frames on drops: anchors while no regulator drops, B frames from the
 * first drop, anchors again after a clean hold; a hold that ends in a drop
 * at once doubles; a client leaving (the sum falls) is no drop; "always"
 * never changes. */
static void
test_b_frames_on_drops(void)
{
	const int64_t s = 1000000, t0 = 1700000000LL * s;
	pps_b_frames_params_t p = {.policy = PPS_B_FRAMES_ON_DROPS, .hold_us = 5 * s};
	pps_b_frames_params_t always = {.policy = PPS_B_FRAMES_ALWAYS, .hold_us = 5 * s};
	pps_b_frames_params_t bad = {.policy = PPS_B_FRAMES_POLICY_COUNT, .hold_us = 5 * s};
	pps_b_frames_t *b = pps_b_frames_new(&p), *a = pps_b_frames_new(&always);

	REQUIRE(b && a);
	CHECK(pps_b_frames_new(&bad) == NULL && errno == EINVAL);
	CHECK(!pps_b_frames_on(b));
	CHECK(pps_b_frames_on(a));
	CHECK(!pps_b_frames_update(b, t0, false, false, false));
	CHECK(!pps_b_frames_update(b, t0 + s, false, false, false));
	CHECK(pps_b_frames_update(b, t0 + 2 * s, true, false, false));          /* a drop */
	CHECK(pps_b_frames_update(b, t0 + 6 * s, false, false, false));         /* 4 s clean */
	CHECK(pps_b_frames_update(b, t0 + 6 * s + s / 2, false, false, false)); /* 4.5 s clean */
	CHECK(!pps_b_frames_update(b, t0 + 7 * s, false, false, false));        /* 5 s clean */
	CHECK_EQ_INT(pps_b_frames_hold_us(b), 5 * s); /* the hold that turned them off */
	CHECK_EQ_INT(pps_b_frames_switches(b), 2);
	/* Drops again 1 s later: B frames, and the next hold is 10 s. */
	CHECK(pps_b_frames_update(b, t0 + 8 * s, true, false, false));
	CHECK(pps_b_frames_update(b, t0 + 17 * s, false, false, false));
	CHECK(!pps_b_frames_update(b, t0 + 18 * s, false, false, false));
	/* Clean for that hold: the next one is 5 s again. */
	CHECK(!pps_b_frames_update(b, t0 + 28 * s, false, false, false));
	CHECK(pps_b_frames_update(b, t0 + 40 * s, true, false, false));
	CHECK(!pps_b_frames_update(b, t0 + 45 * s, false, false, false));
	CHECK_EQ_INT(pps_b_frames_switches(b), 6);
	/* Anchors that never last: the hold doubles up to
	 * PPS_B_FRAMES_MAX_HOLDS x 5 s = 40 s, no further. */
	{
		int64_t t = t0 + 45 * s;

		for (int i = 0; i < 6; i++) {
			int steps = 0;

			t += s / 10;
			CHECK(pps_b_frames_update(b, t, true, false, false));
			while (pps_b_frames_update(b, t += s, false, false, false) && steps < 100)
				steps++;
			CHECK(steps < 100);
		}
		t += s / 10;
		CHECK(pps_b_frames_update(b, t, true, false, false));
		CHECK(pps_b_frames_update(b, t + 39 * s, false, false, false));
		CHECK(!pps_b_frames_update(b, t + 40 * s, false, false, false));
	}
	/* A path shared with other flows counts as a drop, each step. */
	{
		pps_b_frames_t *c = pps_b_frames_new(&p);

		REQUIRE(c);
		CHECK(!pps_b_frames_update(c, t0, false, false, false));
		CHECK(pps_b_frames_update(c, t0 + s, false, true, false));
		CHECK(pps_b_frames_update(c, t0 + 5 * s, false, true, false));
		CHECK(pps_b_frames_update(c, t0 + 9 * s, false, false, false));
		CHECK(!pps_b_frames_update(c, t0 + 10 * s, false, false, false));
		pps_b_frames_free(c);
	}
	/* on-cuts: a shared path alone keeps the anchors; a cut window and a
	 * join still switch B frames on. */
	{
		pps_b_frames_params_t pc = {.policy = PPS_B_FRAMES_ON_CUTS, .hold_us = 5 * s};
		pps_b_frames_t *c = pps_b_frames_new(&pc);

		REQUIRE(c);
		CHECK(strcmp(pps_b_frames_names[PPS_B_FRAMES_ON_CUTS], "on-cuts") == 0);
		CHECK(!pps_b_frames_update(c, t0, false, true, false));
		CHECK(!pps_b_frames_update(c, t0 + s, false, true, false));
		CHECK(pps_b_frames_update(c, t0 + 2 * s, true, true, false));
		CHECK(pps_b_frames_update(c, t0 + 6 * s, false, true, false));
		CHECK(!pps_b_frames_update(c, t0 + 7 * s, false, true, false));
		CHECK(pps_b_frames_join(c));
		CHECK(!pps_b_frames_update(c, t0 + 8 * s, false, true, false));
		pps_b_frames_free(c);
	}
	/* A join: B frames at once, while its start is unread; anchors at the
	 * first look after it read clean, with no hold. A drop during a start
	 * makes it an ordinary drop (the hold runs from it). */
	{
		pps_b_frames_t *c = pps_b_frames_new(&p);

		REQUIRE(c);
		CHECK(pps_b_frames_join(c));
		CHECK(pps_b_frames_on(c) && pps_b_frames_for_start(c));
		CHECK(!pps_b_frames_join(c)); /* a second joiner: already on */
		CHECK(pps_b_frames_update(c, t0, false, false, true));
		CHECK(!pps_b_frames_update(c, t0 + s, false, false, false));
		CHECK(!pps_b_frames_for_start(c));
		CHECK_EQ_INT(pps_b_frames_switches(c), 2);
		CHECK(pps_b_frames_join(c));
		CHECK(pps_b_frames_update(c, t0 + 2 * s, true, false, true)); /* lossy start */
		CHECK(!pps_b_frames_for_start(c));
		CHECK(pps_b_frames_update(c, t0 + 3 * s, false, false, false));
		CHECK(pps_b_frames_update(c, t0 + 6 * s, false, false, false));
		CHECK(!pps_b_frames_update(c, t0 + 7 * s, false, false, false)); /* the hold */
		pps_b_frames_free(c);
	}
	CHECK(!pps_b_frames_join(a)); /* always: on, no switch */
	CHECK(pps_b_frames_update(a, t0, true, false, false));
	CHECK(pps_b_frames_update(a, t0 + 100 * s, true, false, false));
	CHECK_EQ_INT(pps_b_frames_switches(a), 0);
	CHECK_EQ_INT(pps_b_frames_new(&(pps_b_frames_params_t){.hold_us = 0}) == NULL, 1);
	pps_b_frames_free(b);
	pps_b_frames_free(a);
}

/* @seconds of samples every 10 ms: @acked_bps acknowledged, @srtt_us, the
 * sender behind its deadlines as @behind says for each sample's time. */
static void
run_behind(pps_path_t *p, pps_path_sample_t *s, double seconds, uint64_t acked_bps,
           uint32_t srtt_us, bool (*behind)(int64_t t_us))
{
	for (int64_t t = 0; t < (int64_t)(seconds * 1e6); t += 10000) {
		s->now_us += 10000;
		s->bytes_acked += acked_bps / 8 / 100;
		s->srtt_us = srtt_us;
		s->behind = behind(t);
		pps_path_add_sample(p, s);
	}
}

static bool
never(int64_t t_us)
{
	(void)t_us;
	return false;
}

static bool
always(int64_t t_us)
{
	(void)t_us;
	return true;
}

/* Behind for 300 ms out of every 400: never a whole span. */
static bool
mostly(int64_t t_us)
{
	return t_us % 400000 < 300000;
}

/* The server's default path (yielding cap, tcp-friendly rate): 3 s at 8
 * Mbit/s with the stream sending 5, then a capacity step down that cost a
 * retransmission and grew the queue, which takes the path for competing. */
static pps_path_t *
path_after_step_down(pps_path_sample_t *s)
{
	pps_path_params_t pp = {.cap_policy = PPS_LATENCY_CAP_YIELDING,
	                        .queue_target_us = 50000,
	                        .rate_control = PPS_RATE_CONTROL_TCP_FRIENDLY};
	pps_path_t *p = pps_path_new(&pp);
	pps_path_estimate_t e;

	REQUIRE(p);
	*s = (pps_path_sample_t){.now_us = 1000000,
	                         .delivery_rate_bps = 8000000,
	                         .min_rtt_us = 50000,
	                         .cwnd_pkts = 100,
	                         .unacked_pkts = 40,
	                         .mss_bytes = MSS};
	run_behind(p, s, 3.0, 5000000, 52000, never);
	pps_path_get_estimate(p, &e);
	CHECK(e.estimate_bps >= 7000000);
	s->total_retrans_pkts++;
	run_behind(p, s, 0.3, 2000000, 200000, never);
	pps_path_get_estimate(p, &e);
	CHECK_EQ_INT(e.cap_state, PPS_PATH_CAP_COMPETING);
	return p;
}

/* The server's default path (yielding cap, tcp-friendly rate) after a
 * capacity step down from 8 to 0.8 Mbit/s that cost a retransmission: the
 * stream is then alone behind a queue it fills itself, with no loss to bring
 * the tcp-friendly rate down from where the faster path left it. */
static void
test_behind_sender_takes_acked_rate(void)
{
	bool (*cases[])(int64_t) = {always, never, mostly};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		pps_path_sample_t s;
		pps_path_t *p = path_after_step_down(&s);
		pps_path_estimate_t e;

		/* 0.8 Mbit/s, 300 ms of queue, no further loss. */
		run_behind(p, &s, 2.0, 800000, 350000, cases[i]);
		pps_path_get_estimate(p, &e);
		if (cases[i] == always) {
			/* Within a second or two the rate is what got through. */
			CHECK(e.estimate_bps <= 900000);
			CHECK(e.fair_rate_bps <= 900000);
			CHECK(e.behind_events >= 2);
			/* ... and the queue is retested a second after the
			 * state began competing, not four. */
			CHECK(e.cap_state != PPS_PATH_CAP_COMPETING);
		} else {
			/* Not behind for a whole span: nothing says the stream
			 * could not send more (the queue may be others'). */
			CHECK(e.estimate_bps > 2000000);
			CHECK_EQ_INT(e.behind_events, 0);
			CHECK_EQ_INT(e.cap_state, PPS_PATH_CAP_COMPETING);
		}
		pps_path_free(p);
	}
}

/* Alone again after a capacity step down that cost a loss (the path was taken
 * for shared): the retest caps at what got through and waits for what the
 * faster path left in flight to drain before it judges the queue. */
static void
test_retest_waits_for_the_drain(void)
{
	pps_path_sample_t s;
	pps_path_t *p = path_after_step_down(&s);
	pps_path_estimate_t e;
	int64_t t0;

	/* 0.8 Mbit/s with 45 packets in flight (0.65 s of it) until the retest. */
	s.unacked_pkts = 45;
	t0 = s.now_us;
	do {
		run_behind(p, &s, 0.01, 800000, 300000, never);
		pps_path_get_estimate(p, &e);
	} while (e.cap_state == PPS_PATH_CAP_COMPETING && s.now_us - t0 < 6000000);
	CHECK_EQ_INT(e.cap_state, PPS_PATH_CAP_TEST);
	/* Capped at what got through: 0.8 Mbit/s x 112.5 ms is 8 packets. */
	CHECK(e.inflight_cap_pkts <= 9);
	/* What was in flight and the queue take 0.8 s to drain; then the
	 * smoothed RTT comes down. */
	run_behind(p, &s, 0.8, 800000, 300000, never);
	pps_path_get_estimate(p, &e);
	CHECK_EQ_INT(e.cap_state, PPS_PATH_CAP_TEST);
	s.unacked_pkts = 8;
	run_behind(p, &s, 0.2, 800000, 100000, never);
	pps_path_get_estimate(p, &e);
	CHECK_EQ_INT(e.cap_state, PPS_PATH_CAP_SELF);
	CHECK(!pps_path_shared(p));
	pps_path_free(p);
}

/* The drain: nothing up to two windows of wait, then a first step and 6 CRF
 * per 100 ms more, bounded by the setting; 0 turns it off. */
static void
test_drain_crf(void)
{
	const int64_t w = 66667;

	CHECK_EQ_INT(pps_drain_crf(-1, w, 9), 0); /* no viewer counted */
	CHECK_EQ_INT(pps_drain_crf(0, w, 9), 0);
	CHECK_EQ_INT(pps_drain_crf(2 * w, w, 9), 0);
	CHECK_EQ_INT(pps_drain_crf(2 * w + 1, w, 9), PPS_DRAIN_FIRST_CRF);
	CHECK_EQ_INT(pps_drain_crf(2 * w + 50000, w, 9),
	             PPS_DRAIN_FIRST_CRF + PPS_DRAIN_CRF_PER_100MS / 2);
	CHECK_EQ_INT(pps_drain_crf(2 * w + 100000, w, 9), 9);
	CHECK_EQ_INT(pps_drain_crf(2 * w + 1000000, w, 9), 9);
	CHECK_EQ_INT(pps_drain_crf(2 * w + 1000000, w, 24), 24);
	CHECK_EQ_INT(pps_drain_crf(2 * w + 1000000, w, 0), 0);
	/* One-frame windows: the threshold follows the window (2 x 33 ms). */
	CHECK_EQ_INT(pps_drain_crf(2 * (w / 2), w / 2, 9), 0);
	CHECK_EQ_INT(pps_drain_crf(2 * w, w / 2, 9),
	             PPS_DRAIN_FIRST_CRF +
	                 (int)((2 * w - 2 * (w / 2)) * PPS_DRAIN_CRF_PER_100MS / 100000));
}

int
main(int argc, char **argv)
{
	pps_test_init(&argc, argv);
	PPS_TEST_RUN(test_alone_estimate_and_cap);
	PPS_TEST_RUN(test_step_down_follows_within_a_second);
	PPS_TEST_RUN(test_yields_to_cross_traffic_and_retests);
	PPS_TEST_RUN(test_policies_off_and_always);
	PPS_TEST_RUN(test_retransmission_and_order);
	PPS_TEST_RUN(test_retrans_seconds);
	PPS_TEST_RUN(test_tcp_friendly_rate);
	PPS_TEST_RUN(test_behind_sender_takes_acked_rate);
	PPS_TEST_RUN(test_retest_waits_for_the_drain);
	if (argc > 1)
		test_recorded_trace(argv[1]);
	PPS_TEST_RUN(test_ratealloc_one_client);
	PPS_TEST_RUN(test_ratealloc_heterogeneous);
	PPS_TEST_RUN(test_ratealloc_base_memory);
	PPS_TEST_RUN(test_ratealloc_crf_steering);
	PPS_TEST_RUN(test_ratealloc_capped_easy_content);
	PPS_TEST_RUN(test_ratealloc_capped_loop_fills_share);
	PPS_TEST_RUN(test_b_frames_on_drops);
	PPS_TEST_RUN(test_drain_crf);
	return pps_test_result();
}
