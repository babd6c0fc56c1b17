/* SPDX-License-Identifier: MIT */
/*
 * The audio jitter buffer on simulated paths, with an injected clock: a
 * sender that captures a frame every frame_us, a path that delays each one
 * (in order, as TCP delivers, unless a case says otherwise), and a player
 * that pops at each slot the buffer asks for. Events run in time order;
 * nothing sleeps.
 */
#include "pps-jitter.h"
#include "pps-test.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* A realistic CLOCK_REALTIME start, in microseconds. */
#define T0_US INT64_C(1700000000000000)
#define MS    INT64_C(1000)
#define SEC   INT64_C(1000000)

/* ---- a seeded PRNG (xorshift64*) ----------------------------------------- */

static uint64_t rng_state;

static double
rng_uniform(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return (double)((rng_state * UINT64_C(2685821657736338717)) >> 11) / 9007199254740992.0;
}

static double
rng_exponential(double mean)
{
	return -mean * log(1.0 - rng_uniform());
}

/* ---- the simulation ------------------------------------------------------- */

typedef struct sim sim_t;

struct sim {
	/* set by the case */
	int64_t frame_us;
	int frames;
	int64_t speech_us, silence_us; /* silence_us 0: continuous speech */
	int64_t (*delay_us)(const sim_t *sim, int i, int64_t capture_us);
	bool out_of_order; /* arrivals need not keep the sending order */
	bool (*sender_drops)(int i);
	uint32_t first_seq;
	double arg[4];
	/* A lip-sync floor (pps_jitter_set_floor) of floor_us[k] from the slot
	 * due at T0 + floor_from_us[k] on (0: none). */
	int64_t floor_from_us[2], floor_us[2];
	/* per frame */
	int64_t *capture_us, *arrival_us;
	bool *speech;
	int *put_rc;
	int64_t tail_us; /* 0: stop once the last frame has played */
	/* the slots popped, in order (payload pointers are stale: see payload_seq) */
	pps_jitter_slot_t *slots;
	uint32_t *payload_seq; /* the sequence number in each slot's payload, or UINT32_MAX */
	size_t n_slots;
	bool done;
	/* observed */
	bool spike_seen;
	int64_t max_target_us;
	int max_held;
	pps_jitter_stats_t end;
};

static uint32_t
sim_seq(const sim_t *sim, int i)
{
	return sim->first_seq + (uint32_t)i;
}

static bool
sim_speech(const sim_t *sim, int64_t t_us)
{
	if (sim->silence_us == 0)
		return true;
	return t_us % (sim->speech_us + sim->silence_us) < sim->speech_us;
}

static int
compare_arrival(const void *a, const void *b, void *user)
{
	const sim_t *sim = user;
	int x = *(const int *)a, y = *(const int *)b;
	int64_t ax = sim->arrival_us[x], ay = sim->arrival_us[y];

	if (ax != ay)
		return ax < ay ? -1 : 1;
	return (x > y) - (x < y); /* stable: the sending order */
}

static void
payload_for(uint32_t seq, uint8_t *buf)
{
	for (int k = 0; k < 4; k++)
		buf[k] = (uint8_t)(seq >> (8 * k));
	for (int k = 4; k < 60; k++)
		buf[k] = (uint8_t)(seq + (uint32_t)k);
}

static uint32_t
payload_seq(const uint8_t *buf)
{
	return (uint32_t)buf[0] | (uint32_t)buf[1] << 8 | (uint32_t)buf[2] << 16 |
	       (uint32_t)buf[3] << 24;
}

static void
sim_observe(sim_t *sim, const pps_jitter_t *j)
{
	pps_jitter_stats_t s;

	pps_jitter_get_stats(j, &s);
	sim->spike_seen = sim->spike_seen || s.spike;
	if (s.target_delay_us > sim->max_target_us)
		sim->max_target_us = s.target_delay_us;
	if (s.held > sim->max_held)
		sim->max_held = s.held;
}

static void
pop_due(sim_t *sim, pps_jitter_t *j, int64_t now_us)
{
	pps_jitter_slot_t slot;

	while (pps_jitter_pop(j, now_us, &slot) == 1) {
		REQUIRE(sim->n_slots < (size_t)sim->frames * 4);
		sim->payload_seq[sim->n_slots] =
		    slot.payload ? payload_seq(slot.payload) : UINT32_MAX;
		sim->slots[sim->n_slots++] = slot;
		sim_observe(sim, j);
		if ((slot.action == PPS_JITTER_PLAY || slot.action == PPS_JITTER_SKIP) &&
		    slot.seq == sim_seq(sim, sim->frames - 1))
			sim->done = true;
	}
}

/* Sends every frame through the path into @j and plays until 2 s after the
 * last arrival. */
static void
sim_run(sim_t *sim, pps_jitter_t *j)
{
	int *order = calloc((size_t)sim->frames, sizeof(*order));
	int n = 0, next = 0;
	int64_t last_arrival = 0, end_us;
	uint8_t payload[60];

	sim->capture_us = calloc((size_t)sim->frames, sizeof(int64_t));
	sim->arrival_us = calloc((size_t)sim->frames, sizeof(int64_t));
	sim->speech = calloc((size_t)sim->frames, sizeof(bool));
	sim->put_rc = calloc((size_t)sim->frames, sizeof(int));
	sim->slots = calloc((size_t)sim->frames * 4, sizeof(*sim->slots));
	sim->payload_seq = calloc((size_t)sim->frames * 4, sizeof(*sim->payload_seq));
	REQUIRE(order && sim->capture_us && sim->arrival_us && sim->speech && sim->put_rc &&
	        sim->slots && sim->payload_seq);
	for (int i = 0; i < sim->frames; i++) {
		int64_t t = (int64_t)i * sim->frame_us;

		sim->capture_us[i] = T0_US + t;
		sim->speech[i] = sim_speech(sim, t);
		sim->arrival_us[i] = sim->capture_us[i] + sim->delay_us(sim, i, sim->capture_us[i]);
		sim->put_rc[i] = 1; /* not sent */
		if (sim->sender_drops && sim->sender_drops(i))
			continue;
		if (!sim->out_of_order && sim->arrival_us[i] < last_arrival)
			sim->arrival_us[i] = last_arrival; /* TCP: behind the one before */
		last_arrival = sim->arrival_us[i];
		order[n++] = i;
	}
	if (sim->out_of_order)
		qsort_r(order, (size_t)n, sizeof(*order), compare_arrival, sim);
	end_us = sim->arrival_us[order[n - 1]] + (sim->tail_us ? sim->tail_us : 2 * SEC);
	for (;;) {
		int64_t due = pps_jitter_next_due_us(j);
		int64_t arrival = next < n ? sim->arrival_us[order[next]] : INT64_MAX;

		if (arrival <= due && arrival != INT64_MAX) {
			int i = order[next++];

			/* Arrivals first at a tie: a frame there at its slot is in time. */
			payload_for(sim_seq(sim, i), payload);
			sim->put_rc[i] =
			    pps_jitter_put(j, sim_seq(sim, i), sim->capture_us[i], sim->speech[i],
			                   payload, sizeof(payload), sim->arrival_us[i]);
			sim_observe(sim, j);
		} else if (due != INT64_MAX && due <= end_us && (sim->tail_us || !sim->done)) {
			for (int k = 0; k < 2; k++)
				if (sim->floor_from_us[k] && due >= T0_US + sim->floor_from_us[k])
					pps_jitter_set_floor(j, sim->floor_us[k]);
			pop_due(sim, j, due);
		} else {
			break;
		}
	}
	pps_jitter_get_stats(j, &sim->end);
	/* No case here has a sender that restarts or a clock that steps. */
	CHECK_EQ_INT(sim->end.restarts + sim->end.inconsistent, 0);
	free(order);
}

static void
sim_free(sim_t *sim)
{
	free(sim->capture_us);
	free(sim->arrival_us);
	free(sim->speech);
	free(sim->put_rc);
	free(sim->slots);
	free(sim->payload_seq);
}

static pps_jitter_t *
new_jitter(int64_t frame_us)
{
	pps_jitter_params_t params;
	pps_jitter_t *j;

	pps_jitter_params_init(&params, frame_us);
	j = pps_jitter_new(&params);
	REQUIRE(j);
	return j;
}

/* The index of a PLAY slot's frame, or -1. */
static int
slot_frame(const sim_t *sim, const pps_jitter_slot_t *slot)
{
	int i = (int)(slot->seq - sim->first_seq);

	return i >= 0 && i < sim->frames ? i : -1;
}

/* The playout delay of each frame played (INT64_MIN: not played). */
static int64_t *
played_delays(const sim_t *sim)
{
	int64_t *d = malloc((size_t)sim->frames * sizeof(*d));

	REQUIRE(d);
	for (int i = 0; i < sim->frames; i++)
		d[i] = INT64_MIN;
	for (size_t k = 0; k < sim->n_slots; k++) {
		const pps_jitter_slot_t *s = &sim->slots[k];
		int i = slot_frame(sim, s);

		if (s->action == PPS_JITTER_PLAY && i >= 0) {
			CHECK(d[i] == INT64_MIN, "frame %d played twice", i);
			CHECK(s->capture_us == sim->capture_us[i]);
			CHECK(sim->payload_seq[k] == s->seq);
			d[i] = s->playout_us - s->capture_us;
		}
	}
	return d;
}

/*
 * Within each talkspurt of the sender (a run of speech frames), every frame
 * played has the same playout delay. Returns the number of talkspurts and
 * fills @spurt_delay_us (first frame played of each) when not NULL.
 */
static int
check_constant_in_talkspurts(const sim_t *sim, const int64_t *d, int64_t *spurt_delay_us,
                             int max_spurts)
{
	int spurts = 0;
	int64_t delay = INT64_MIN;

	for (int i = 0; i < sim->frames; i++) {
		if (!sim->speech[i])
			continue;
		if (i == 0 || !sim->speech[i - 1]) {
			spurts++;
			delay = INT64_MIN;
		}
		if (d[i] == INT64_MIN)
			continue;
		if (delay == INT64_MIN) {
			delay = d[i];
			if (spurt_delay_us && spurts <= max_spurts)
				spurt_delay_us[spurts - 1] = delay;
		}
		CHECK(d[i] == delay, "frame %d of talkspurt %d: delay %lld, the talkspurt's %lld",
		      i, spurts, (long long)d[i], (long long)delay);
	}
	return spurts;
}

/* ---- cases ----------------------------------------------------------------- */

static int64_t
delay_constant(const sim_t *sim, int i, int64_t capture_us)
{
	return (int64_t)sim->arg[0];
}

/* A steady path: every frame plays, at the path's delay + min_delay, always. */
static void
steady(int64_t frame_us)
{
	sim_t sim = {.frame_us = frame_us,
	             .frames = (int)(30 * SEC / frame_us),
	             .speech_us = 1 * SEC,
	             .silence_us = SEC / 2,
	             .delay_us = delay_constant,
	             .arg = {40000}};
	pps_jitter_t *j = new_jitter(frame_us);
	int64_t *d;

	sim_run(&sim, j);
	CHECK_EQ_INT(sim.end.played, sim.frames);
	CHECK_EQ_INT(sim.end.received, sim.frames);
	CHECK_EQ_INT(sim.end.late + sim.end.lost + sim.end.concealed + sim.end.recovered, 0);
	CHECK_EQ_INT(sim.end.inserted + sim.end.skipped + sim.end.delay_changes, 0);
	CHECK_EQ_INT(sim.end.talkspurts, 20);
	CHECK(fabs(sim.end.playout_delay_mean_ms - 60.0) < 1e-9, "mean %f ms",
	      sim.end.playout_delay_mean_ms);
	CHECK(sim.end.playout_delay_std_ms < 1e-9, "std %f ms", sim.end.playout_delay_std_ms);
	CHECK_EQ_INT(sim.n_slots, sim.frames);
	for (size_t k = 0; k < sim.n_slots; k++) {
		CHECK(sim.slots[k].action == PPS_JITTER_PLAY);
		if (k > 0) /* a steady cadence */
			CHECK_EQ_INT(sim.slots[k].playout_us - sim.slots[k - 1].playout_us,
			             frame_us);
	}
	d = played_delays(&sim);
	free(d);
	sim_free(&sim);
	pps_jitter_free(j);
}

static void
test_steady_20ms(void)
{
	steady(20000);
}

static void
test_steady_10ms(void)
{
	steady(10000);
}

static int64_t
delay_jitter(const sim_t *sim, int i, int64_t capture_us)
{
	return (int64_t)(sim->arg[0] + rng_exponential(sim->arg[1]));
}

/* Jitter: most frames play, and the delay changes only between talkspurts. */
static void
test_jitter(void)
{
	sim_t sim = {.frame_us = 20000,
	             .frames = 60 * 50,
	             .speech_us = 1 * SEC,
	             .silence_us = SEC / 2,
	             .delay_us = delay_jitter,
	             .arg = {50000, 15000}};
	pps_jitter_t *j = new_jitter(20000);
	int64_t spurt_delay[40], *d;
	int spurts, distinct = 0;
	double played_ratio;

	rng_state = 0x9e3779b97f4a7c15u;
	sim_run(&sim, j);
	d = played_delays(&sim);
	spurts = check_constant_in_talkspurts(&sim, d, spurt_delay, 40);
	CHECK_EQ_INT(spurts, 40);
	for (int k = 1; k < spurts; k++)
		distinct += spurt_delay[k] != spurt_delay[k - 1];
	played_ratio = (double)sim.end.played / sim.frames;
	fprintf(stderr,
	        "jitter: played %.4f late %llu lost %llu recovered %llu skipped %llu inserted "
	        "%llu, delay %.1f +- %.1f ms, %d changes in %d talkspurts\n",
	        played_ratio, (unsigned long long)sim.end.late, (unsigned long long)sim.end.lost,
	        (unsigned long long)sim.end.recovered, (unsigned long long)sim.end.skipped,
	        (unsigned long long)sim.end.inserted, sim.end.playout_delay_mean_ms,
	        sim.end.playout_delay_std_ms, distinct, spurts);
	CHECK(played_ratio > 0.97, "played ratio %f", played_ratio);
	/* It adapts (the first talkspurt starts from one sample)... */
	CHECK(distinct >= 1);
	CHECK(spurt_delay[39] > spurt_delay[0], "last %lld first %lld", (long long)spurt_delay[39],
	      (long long)spurt_delay[0]);
	/* ... without chasing each talkspurt's noise, and not far above the path. */
	CHECK(distinct <= spurts / 2, "%d changes", distinct);
	CHECK(sim.end.playout_delay_mean_ms < 50 + 4 * 15 + 20 + 20, "mean %f",
	      sim.end.playout_delay_mean_ms);
	CHECK_EQ_INT(sim.end.talkspurts, 40);
	free(d);
	sim_free(&sim);
	pps_jitter_free(j);
}

static int64_t
delay_spike(const sim_t *sim, int i, int64_t capture_us)
{
	int64_t t = capture_us - T0_US;
	int64_t base = 40000 + (int64_t)(rng_uniform() * 2000);

	return t >= (int64_t)sim->arg[0] && t < (int64_t)sim->arg[1] ? base + 300000 : base;
}

/* A spike of +300 ms for 1 s: the talkspurt that starts in it follows it,
 * the ones after it come back. */
static void
test_spike(void)
{
	sim_t sim = {.frame_us = 20000,
	             .frames = 30 * 50,
	             .speech_us = 1 * SEC,
	             .silence_us = SEC / 2,
	             .delay_us = delay_spike,
	             .arg = {10200000, 11200000}};
	pps_jitter_t *j = new_jitter(20000);
	int64_t spurt_delay[20], *d;
	int late_in_spike_spurt = 0;

	rng_state = 42;
	sim_run(&sim, j);
	d = played_delays(&sim);
	CHECK_EQ_INT(check_constant_in_talkspurts(&sim, d, spurt_delay, 20), 20);
	fprintf(stderr, "spike: talkspurt delays (ms):");
	for (int k = 0; k < 20; k++)
		fprintf(stderr, " %lld", (long long)spurt_delay[k] / 1000);
	fprintf(stderr, "; late %llu lost %llu\n", (unsigned long long)sim.end.late,
	        (unsigned long long)sim.end.lost);
	CHECK(sim.spike_seen);
	/* Talkspurt 7 starts at 10.5 s, inside the spike: it plays above it. */
	CHECK(spurt_delay[7] >= 340000, "%lld", (long long)spurt_delay[7]);
	for (int i = 525; i < 575; i++)
		late_in_spike_spurt += d[i] == INT64_MIN;
	CHECK_EQ_INT(late_in_spike_spurt, 0);
	/* Before, and from the talkspurt after (12 s): the path's delay again. */
	for (int k = 0; k < 20; k++) {
		if (k >= 2 && k <= 6)
			CHECK(spurt_delay[k] == spurt_delay[1], "%d: %lld", k,
			      (long long)spurt_delay[k]);
		if (k >= 8)
			CHECK(spurt_delay[k] <= spurt_delay[6] + 20000, "%d: %lld", k,
			      (long long)spurt_delay[k]);
	}
	CHECK(!sim.end.spike);
	free(d);
	sim_free(&sim);
	pps_jitter_free(j);
}

static int64_t
delay_stall(const sim_t *sim, int i, int64_t capture_us)
{
	int64_t t = capture_us - T0_US, end = (int64_t)sim->arg[1];

	/* Nothing gets through from arg[0] to arg[1]; then the queue drains. */
	if (t >= (int64_t)sim->arg[0] && t < end)
		return end - t + 40000;
	return 40000 + (int64_t)(rng_uniform() * 2000);
}

/* A TCP stall of 500 ms in continuous speech: the frames it held come in a
 * burst, too late; the ones after play at the delay of before (the buffer
 * stays live instead of playing the backlog late). */
static void
test_stall(void)
{
	sim_t sim = {.frame_us = 20000,
	             .frames = 30 * 50,
	             .delay_us = delay_stall,
	             .arg = {10000000, 10500000}};
	pps_jitter_t *j = new_jitter(20000);
	int64_t *d, before = INT64_MIN, after = INT64_MIN;

	rng_state = 5;
	sim_run(&sim, j);
	d = played_delays(&sim);
	before = d[490];
	after = d[1490];
	fprintf(stderr, "stall: late %llu lost %llu, delay %lld -> %lld ms\n",
	        (unsigned long long)sim.end.late, (unsigned long long)sim.end.lost,
	        (long long)before / 1000, (long long)after / 1000);
	CHECK(before != INT64_MIN && after != INT64_MIN);
	CHECK(after <= before + 20000, "%lld -> %lld", (long long)before, (long long)after);
	CHECK(sim.end.lost <= 30 && sim.end.lost >= 20, "lost %llu",
	      (unsigned long long)sim.end.lost);
	for (int i = 530; i < 1500; i++)
		CHECK(d[i] != INT64_MIN, "frame %d not played", i);
	free(d);
	sim_free(&sim);
	pps_jitter_free(j);
}

static bool
drops_late_lost(int i)
{
	return i == 100 || i == 200 || i == 201;
}

static int64_t
delay_late_lost(const sim_t *sim, int i, int64_t capture_us)
{
	/* Frame 300 comes 1 s late, with frame 350. */
	return i == 300 ? 1040000 : 40000;
}

/* Sender gaps and a late frame: RECOVER when the next frame is there,
 * CONCEAL when not; the late one is counted and discarded. */
static void
test_late_lost(void)
{
	sim_t sim = {.frame_us = 20000,
	             .frames = 500,
	             .speech_us = 1 * SEC,
	             .silence_us = SEC / 2,
	             .delay_us = delay_late_lost,
	             .out_of_order = true,
	             .sender_drops = drops_late_lost};
	pps_jitter_t *j = new_jitter(20000);
	int found = 0;

	sim_run(&sim, j);
	for (size_t k = 0; k < sim.n_slots; k++) {
		const pps_jitter_slot_t *s = &sim.slots[k];

		switch (s->seq) {
		case 100:
		case 201:
		case 300:
			CHECK(s->action == PPS_JITTER_RECOVER, "slot %u: %d", s->seq, s->action);
			/* the next frame's payload, for its in-band FEC */
			CHECK(sim.payload_seq[k] == s->seq + 1);
			CHECK_EQ_INT(s->capture_us, sim.capture_us[s->seq]);
			found++;
			break;
		case 200:
			CHECK(s->action == PPS_JITTER_CONCEAL && !s->payload && s->len == 0);
			found++;
			break;
		default:
			CHECK(s->action == PPS_JITTER_PLAY, "slot %u: %d", s->seq, s->action);
		}
	}
	CHECK_EQ_INT(found, 4);
	CHECK_EQ_INT(sim.put_rc[300], -ESTALE);
	CHECK_EQ_INT(sim.end.late, 1);
	CHECK_EQ_INT(sim.end.lost, 4);
	CHECK_EQ_INT(sim.end.recovered, 3);
	CHECK_EQ_INT(sim.end.concealed, 1);
	CHECK_EQ_INT(sim.end.played, 500 - 4);
	CHECK_EQ_INT(sim.end.received, 500 - 3);
	sim_free(&sim);
	pps_jitter_free(j);
}

static int64_t
delay_drift(const sim_t *sim, int i, int64_t capture_us)
{
	double t_s = (double)(capture_us - T0_US) / SEC;

	return (int64_t)(sim->arg[0] + sim->arg[1] * t_s + rng_uniform() * 3000);
}

/* The sender's clock drifts by @ms_per_s over 60 s of speech without a pause. */
static void
drift(double start_us, double us_per_s)
{
	sim_t sim = {.frame_us = 20000,
	             .frames = 60 * 50,
	             .delay_us = delay_drift,
	             .arg = {start_us, us_per_s}};
	pps_jitter_t *j = new_jitter(20000);
	int64_t last_step = INT64_MIN, *d, first = INT64_MIN, last = INT64_MIN;
	int steps = 0;
	double late_ratio;

	rng_state = 7;
	sim_run(&sim, j);
	for (size_t k = 0; k < sim.n_slots; k++) {
		const pps_jitter_slot_t *s = &sim.slots[k];
		bool step = s->action == PPS_JITTER_SKIP ||
		            (s->action == PPS_JITTER_CONCEAL && s->seq < (uint32_t)sim.frames &&
		             sim.put_rc[s->seq] == 0);

		if (!step)
			continue;
		steps++;
		CHECK(last_step == INT64_MIN || s->playout_us - last_step >= SEC,
		      "steps %lld us apart", (long long)(s->playout_us - last_step));
		last_step = s->playout_us;
	}
	d = played_delays(&sim);
	for (int i = 0; i < sim.frames; i++) {
		if (d[i] == INT64_MIN)
			continue;
		if (first == INT64_MIN)
			first = d[i];
		last = d[i];
	}
	late_ratio = (double)(sim.end.late + sim.end.lost) / sim.frames;
	fprintf(stderr,
	        "drift %+.0f ms/s: late %.4f, %d steps (inserted %llu skipped %llu), delay %lld -> "
	        "%lld ms, path %.0f -> %.0f ms\n",
	        us_per_s / 1000, late_ratio, steps, (unsigned long long)sim.end.inserted,
	        (unsigned long long)sim.end.skipped, (long long)first / 1000,
	        (long long)last / 1000, start_us / 1000, (start_us + 60 * us_per_s) / 1000);
	CHECK(late_ratio < 0.01, "late ratio %f", late_ratio);
	CHECK_EQ_INT(sim.end.talkspurts, 1);
	/* D followed the path (120 ms in 60 s), and stayed near it. */
	if (us_per_s > 0) {
		CHECK(sim.end.inserted >= 5);
		CHECK(last >= first + 100000);
	} else {
		CHECK(sim.end.skipped >= 4);
		CHECK(last <= first - 80000);
	}
	CHECK(last < start_us + 60 * us_per_s + 60000, "last %lld", (long long)last);
	free(d);
	sim_free(&sim);
	pps_jitter_free(j);
}

static void
test_drift_up(void)
{
	drift(40000, 2000);
}

static void
test_drift_down(void)
{
	drift(200000, -2000);
}

/* A TCP path under cross traffic: 60 to 70 ms, and now and then (a loss
 * and its retransmission) a stall of 100 to 200 ms that holds every frame
 * captured in it until it ends, then delivers them together. Called in
 * frame order. */
static int64_t stall_end_us;

static int64_t
delay_heavy_tail(const sim_t *sim, int i, int64_t capture_us)
{
	int64_t base = 60000 + (int64_t)rng_exponential(sim->arg[0]);

	(void)i;
	if (capture_us >= stall_end_us && rng_uniform() < sim->arg[1])
		stall_end_us = capture_us + 100000 + (int64_t)(rng_uniform() * 100000);
	return capture_us < stall_end_us ? stall_end_us - capture_us + base : base;
}

static void
heavy_tail_run(sim_t *sim, double queue_us, double stall_p, double quantile,
               pps_jitter_stats_t *end, double *delays)
{
	pps_jitter_params_t params;
	pps_jitter_t *j;

	*sim = (sim_t){.frame_us = 20000,
	               .frames = 60 * 50,
	               .speech_us = 1 * SEC,
	               .silence_us = SEC / 2,
	               .delay_us = delay_heavy_tail,
	               .arg = {queue_us, stall_p}};
	pps_jitter_params_init(&params, 20000);
	params.target_quantile = quantile;
	j = pps_jitter_new(&params);
	REQUIRE(j);
	rng_state = 0x5eed;
	stall_end_us = 0;
	sim_run(sim, j);
	*end = sim->end;
	for (int i = 0; i < sim->frames; i++)
		delays[i] = (double)(sim->arrival_us[i] - sim->capture_us[i]);
	pps_jitter_free(j);
}

static int
compare_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/*
 * The quantile target (0.98 of the last 10 s) on heavy-tailed paths: a
 * queue (exponential, mean 10 to 20 ms) and stalls of 100 to 200 ms
 * starting at 0.4 to 1 % of the frames. Its target is the window's quantile
 * (nearest rank), talkspurts keep one delay each, and the share of frames
 * played stays near the quantile asked for, with a steady delay, whatever
 * the path; d + 4 v plays what its variation happens to cover (96 to 98 %
 * here). On the heaviest path it plays more frames than d + 4 v, for a
 * shorter and steadier delay: 4 v answers the stalls with a margin that
 * moves with each of them.
 */
static void
test_quantile(void)
{
	static const double paths[][2] = {{10000, 0.004}, {15000, 0.006}, {20000, 0.01}};
	static double delays[60 * 50], last[500];
	pps_jitter_stats_t seed, q;
	sim_t sim;
	int64_t *d;
	double want, q_played, seed_played;

	for (size_t k = 0; k < sizeof(paths) / sizeof(paths[0]); k++) {
		heavy_tail_run(&sim, paths[k][0], paths[k][1], 0, &seed, delays);
		sim_free(&sim);
		heavy_tail_run(&sim, paths[k][0], paths[k][1], 0.98, &q, delays);
		d = played_delays(&sim);
		CHECK_EQ_INT(check_constant_in_talkspurts(&sim, d, NULL, 0), 40);
		/* The last 500 frames measured are the last 500 sent (in order). */
		memcpy(last, delays + sim.frames - 500, sizeof(last));
		qsort(last, 500, sizeof(double), compare_double);
		want = last[(int)ceil(0.98 * 500) - 1];
		q_played = (double)q.played / sim.frames;
		seed_played = (double)seed.played / sim.frames;
		fprintf(stderr,
		        "quantile, queue %.0f ms, stalls %.1f %%: d + 4v played %.4f delay %.1f +- "
		        "%.1f ms; q 0.98 played %.4f delay %.1f +- %.1f ms\n",
		        paths[k][0] / 1000, paths[k][1] * 100, seed_played,
		        seed.playout_delay_mean_ms, seed.playout_delay_std_ms, q_played,
		        q.playout_delay_mean_ms, q.playout_delay_std_ms);
		CHECK(q.target_delay_us >= (int64_t)want && q.target_delay_us <= (int64_t)want + 1,
		      "target %lld, quantile %.0f", (long long)q.target_delay_us, want);
		CHECK(q_played >= 0.965 && q_played <= 0.985, "played %f", q_played);
		CHECK(q.playout_delay_std_ms < 40, "std %f", q.playout_delay_std_ms);
		if (k == 2) {
			CHECK(q_played > seed_played + 0.01, "played %f, d + 4v %f", q_played,
			      seed_played);
			CHECK(q.playout_delay_mean_ms < seed.playout_delay_mean_ms - 10,
			      "mean %f, d + 4v %f", q.playout_delay_mean_ms,
			      seed.playout_delay_mean_ms);
			CHECK(q.playout_delay_std_ms < seed.playout_delay_std_ms / 2,
			      "std %f, d + 4v %f", q.playout_delay_std_ms,
			      seed.playout_delay_std_ms);
		}
		free(d);
		sim_free(&sim);
	}
}

static int64_t
delay_periodic_stall(const sim_t *sim, int i, int64_t capture_us)
{
	int64_t t = (capture_us - T0_US) % (2 * SEC);

	(void)sim;
	(void)i;
	/* The first 400 ms of every 2 s wait for its end. */
	return 60000 + (int64_t)(rng_uniform() * 2000) + (t < 400000 ? 400000 - t : 0);
}

/* A tail longer than the cap: 20 % of the frames wait up to 400 ms more.
 * The 0.98 quantile would wait for nearly all of them; capped at 150 ms
 * above the delay floor (60 ms here), the target stays there and the frames
 * beyond it are concealed. */
static void
test_quantile_cap(void)
{
	for (int capped = 1; capped >= 0; capped--) {
		sim_t sim = {.frame_us = 20000,
		             .frames = 60 * 50,
		             .speech_us = SEC / 2,
		             .silence_us = SEC / 2,
		             .delay_us = delay_periodic_stall};
		pps_jitter_params_t params;
		pps_jitter_t *j;

		pps_jitter_params_init(&params, 20000);
		params.target_quantile = 0.98;
		if (!capped)
			params.quantile_cap_us = 1000000;
		j = pps_jitter_new(&params);
		REQUIRE(j);
		rng_state = 11;
		sim_run(&sim, j);
		fprintf(stderr,
		        "quantile cap %s: target %lld us, delay %.1f +- %.1f ms, played %.4f\n",
		        capped ? "150 ms" : "1 s", (long long)sim.end.target_delay_us,
		        sim.end.playout_delay_mean_ms, sim.end.playout_delay_std_ms,
		        (double)sim.end.played / sim.frames);
		if (capped) {
			CHECK(sim.end.target_delay_us >= 210000 &&
			          sim.end.target_delay_us <= 212000,
			      "target %lld", (long long)sim.end.target_delay_us);
			CHECK(sim.end.playout_delay_mean_ms < 230, "mean %f",
			      sim.end.playout_delay_mean_ms);
			CHECK((double)sim.end.played / sim.frames > 0.85);
		} else {
			CHECK(sim.end.playout_delay_mean_ms > 400, "mean %f",
			      sim.end.playout_delay_mean_ms);
		}
		sim_free(&sim);
		pps_jitter_free(j);
	}
}

/* On a steady path the quantile target is d + min_delay, as the seed's is:
 * every frame plays at the path's delay + 20 ms. */
static void
test_quantile_steady(void)
{
	sim_t sim = {.frame_us = 20000,
	             .frames = 20 * 50,
	             .speech_us = 1 * SEC,
	             .silence_us = SEC / 2,
	             .delay_us = delay_constant,
	             .arg = {40000}};
	pps_jitter_params_t params;
	pps_jitter_t *j;

	pps_jitter_params_init(&params, 20000);
	params.target_quantile = 0.99;
	params.quantile_window_us = 2 * SEC;
	j = pps_jitter_new(&params);
	REQUIRE(j);
	sim_run(&sim, j);
	CHECK_EQ_INT(sim.end.played, sim.frames);
	CHECK_EQ_INT(sim.end.delay_changes, 0);
	CHECK(fabs(sim.end.playout_delay_mean_ms - 60.0) < 1e-9, "mean %f",
	      sim.end.playout_delay_mean_ms);
	CHECK_EQ_INT(sim.end.target_delay_us, 60000);
	sim_free(&sim);
	pps_jitter_free(j);
}

/* The metrics are what the slots say. */
static bool
drops_some(int i)
{
	return i % 97 == 13;
}

static void
test_metrics(void)
{
	sim_t sim = {.frame_us = 20000,
	             .frames = 40 * 50,
	             .speech_us = 1 * SEC,
	             .silence_us = SEC / 2,
	             .delay_us = delay_jitter,
	             .sender_drops = drops_some,
	             .tail_us = 2 * SEC,
	             .arg = {30000, 20000}};
	pps_jitter_t *j = new_jitter(20000);
	uint64_t count[5] = {0}, late = 0, sent = 0, received = 0;
	double sum = 0, sum2 = 0, mean, std;

	rng_state = 1234;
	sim_run(&sim, j);
	for (int i = 0; i < sim.frames; i++) {
		sent += sim.put_rc[i] != 1;
		received += sim.put_rc[i] != 1;
		late += sim.put_rc[i] == -ESTALE;
		CHECK(sim.put_rc[i] == 1 || sim.put_rc[i] == 0 || sim.put_rc[i] == -ESTALE);
	}
	for (size_t k = 0; k < sim.n_slots; k++) {
		const pps_jitter_slot_t *s = &sim.slots[k];

		count[s->action]++;
		if (s->action == PPS_JITTER_PLAY) {
			double x = (double)(s->playout_us - s->capture_us) / 1000.0;

			sum += x;
			sum2 += x * x;
		}
	}
	mean = sum / (double)count[PPS_JITTER_PLAY];
	std = sqrt(sum2 / (double)count[PPS_JITTER_PLAY] - mean * mean);
	CHECK_EQ_INT(sim.end.received, received);
	CHECK_EQ_INT(sim.end.late, late);
	CHECK(late > 0, "the case should have late frames");
	CHECK_EQ_INT(sim.end.played, count[PPS_JITTER_PLAY]);
	CHECK_EQ_INT(sim.end.recovered, count[PPS_JITTER_RECOVER]);
	CHECK_EQ_INT(sim.end.concealed + sim.end.inserted, count[PPS_JITTER_CONCEAL]);
	CHECK_EQ_INT(sim.end.skipped, count[PPS_JITTER_SKIP]);
	CHECK_EQ_INT(count[PPS_JITTER_NOTHING], 0);
	CHECK(fabs(sim.end.playout_delay_mean_ms - mean) < 1e-6, "%f != %f",
	      sim.end.playout_delay_mean_ms, mean);
	CHECK(fabs(sim.end.playout_delay_std_ms - std) < 1e-3, "%f != %f",
	      sim.end.playout_delay_std_ms, std);
	/* Every frame sent is played, skipped, late, or still held... */
	CHECK_EQ_INT(sim.end.played + sim.end.skipped + sim.end.late + (uint64_t)sim.end.held +
	                 sim.end.expired + sim.end.duplicates + sim.end.dropped_far +
	                 sim.end.dropped_overflow,
	             sent);
	/* ... and every sequence number passed is played, skipped or lost (the
	 * run ends idle: its last slot concealed a frame that never came). */
	CHECK(sim.slots[sim.n_slots - 1].action == PPS_JITTER_CONCEAL);
	CHECK_EQ_INT(sim.end.played + sim.end.skipped + sim.end.lost,
	             (uint64_t)sim.slots[sim.n_slots - 1].seq + 1);
	CHECK_EQ_INT(pps_jitter_next_due_us(j), INT64_MAX);
	/* Lost: recovered, concealed, or passed without a slot (skipped while missing). */
	CHECK(sim.end.lost >= sim.end.recovered + sim.end.concealed);
	fprintf(stderr, "metrics: %llu played, %llu lost, %llu late, %.1f +- %.1f ms\n",
	        (unsigned long long)sim.end.played, (unsigned long long)sim.end.lost,
	        (unsigned long long)late, mean, std);
	sim_free(&sim);
	pps_jitter_free(j);
}

/* ---- hysteresis ------------------------------------------------------------ */

/* The test source's ticks: 40 ms of speech a second, so nearly every slot is
 * a pause where D may move. */
static pps_jitter_t *
new_quantile_jitter(int64_t hysteresis_us)
{
	pps_jitter_params_t params;
	pps_jitter_t *j;

	pps_jitter_params_init(&params, 20000);
	params.target_quantile = 0.98;
	if (hysteresis_us >= 0)
		params.hysteresis_us = hysteresis_us;
	j = pps_jitter_new(&params);
	REQUIRE(j);
	return j;
}

/*
 * A steady path (40 ms: D = 60 ms) and a lip-sync floor that rises to
 * 67 ms at 10 s: 7 ms above D, more than the quarter frame, no more than the
 * hysteresis, and no frame would be late. D stays; without hysteresis it
 * moved a whole frame for it. A floor 15 ms above D (75 ms from 20 s)
 * moves it at the next pause.
 */
static void
test_hysteresis_floor(void)
{
	for (int with = 1; with >= 0; with--) {
		sim_t sim = {.frame_us = 20000,
		             .frames = 30 * 50,
		             .speech_us = 40000,
		             .silence_us = 960000,
		             .delay_us = delay_constant,
		             .arg = {40000},
		             .floor_from_us = {10 * SEC, 20 * SEC},
		             .floor_us = {67000, 75000}};
		pps_jitter_t *j = new_quantile_jitter(with ? -1 : 0);
		int64_t *d;

		sim_run(&sim, j);
		d = played_delays(&sim);
		fprintf(stderr, "hysteresis %s: delay at 5 / 15 / 25 s %lld / %lld / %lld ms\n",
		        with ? "10 ms" : "off", (long long)d[250] / 1000, (long long)d[750] / 1000,
		        (long long)d[1250] / 1000);
		CHECK_EQ_INT(d[250], 60000);
		if (with)
			CHECK_EQ_INT(d[750], 60000);
		else
			CHECK_EQ_INT(d[750], 80000);
		/* 15 ms above: moved at the first pause after 20 s. */
		for (int i = 1001 + 1; i < sim.frames; i++)
			CHECK(d[i] == 80000, "frame %d: %lld", i, (long long)d[i]);
		CHECK_EQ_INT(sim.end.played, sim.frames);
		CHECK_EQ_INT(sim.end.delay_changes, 1);
		free(d);
		sim_free(&sim);
		pps_jitter_free(j);
	}
}

/* The stall of a loss on a 36 ms path, as the 1 %-loss lab cell's log has
 * it: three frames held up arrive together (86, 66, 46 ms), two more
 * trail. */
static int64_t
delay_short_stall(const sim_t *sim, int i, int64_t capture_us)
{
	static const int64_t stall_us[] = {86000, 66000, 45000, 45000, 40000};
	int k = i - (int)sim->arg[0];

	(void)capture_us;
	return k >= 0 && k < 5 ? stall_us[k] : 36000;
}

/*
 * Spike mode enters on the jump and leaves two frames later with d restarted
 * from the median of 86, 66 and 36 ms; the 10 s average then takes seconds to
 * come down. The target's margin is not taken above that leftover: D stays
 * at 56 ms, and only the two frames held up beyond it are late.
 */
static void
test_stall_leftover(void)
{
	sim_t sim = {.frame_us = 20000,
	             .frames = 30 * 50,
	             .speech_us = 40000,
	             .silence_us = 960000,
	             .delay_us = delay_short_stall,
	             .arg = {20 * 50 + 10}};
	pps_jitter_t *j = new_quantile_jitter(-1);
	int64_t *d;

	sim_run(&sim, j);
	d = played_delays(&sim);
	fprintf(stderr, "stall leftover: delay %.1f +- %.1f ms, %llu late, spike %d\n",
	        sim.end.playout_delay_mean_ms, sim.end.playout_delay_std_ms,
	        (unsigned long long)sim.end.late, sim.spike_seen);
	CHECK(sim.spike_seen);
	CHECK_EQ_INT(sim.end.delay_changes, 0);
	CHECK_EQ_INT(sim.end.late, 2);
	for (int i = 0; i < sim.frames; i++)
		CHECK(d[i] == INT64_MIN || d[i] == 56000, "frame %d: %lld", i, (long long)d[i]);
	free(d);
	sim_free(&sim);
	pps_jitter_free(j);
}

static int64_t
delay_step(const sim_t *sim, int i, int64_t capture_us)
{
	(void)i;
	return capture_us - T0_US >= (int64_t)sim->arg[0] ? (int64_t)sim->arg[2]
	                                                  : (int64_t)sim->arg[1];
}

/*
 * A real step up (40 -> 100 ms at 10 s, and it stays, as a queue that
 * filled): D follows at the first pause, by whole frames, and stays there
 * (d + min_delay until the window's quantile has the new delays). Late are
 * only the two frames whose slots passed before the first delayed one came;
 * D does not come back down in between.
 */
static void
test_hysteresis_step_up(void)
{
	sim_t sim = {.frame_us = 20000,
	             .frames = 30 * 50,
	             .speech_us = 40000,
	             .silence_us = 960000,
	             .delay_us = delay_step,
	             .arg = {10 * SEC, 40000, 100000}};
	pps_jitter_t *j = new_quantile_jitter(-1);
	int64_t *d;

	sim_run(&sim, j);
	d = played_delays(&sim);
	fprintf(stderr, "step up: delay %.1f +- %.1f ms, %llu late, %llu skipped\n",
	        sim.end.playout_delay_mean_ms, sim.end.playout_delay_std_ms,
	        (unsigned long long)sim.end.late, (unsigned long long)sim.end.skipped);
	CHECK_EQ_INT(sim.end.late, 2);
	CHECK_EQ_INT(sim.end.skipped, 0);
	for (int i = 0; i < 500; i++)
		CHECK(d[i] == 60000, "frame %d: %lld", i, (long long)d[i]);
	for (int i = 502; i < sim.frames; i++)
		CHECK(d[i] == 120000, "frame %d: %lld", i, (long long)d[i]);
	free(d);
	sim_free(&sim);
	pps_jitter_free(j);
}

/* ---- bounds ---------------------------------------------------------------- */

static void
test_params(void)
{
	pps_jitter_params_t p;

	errno = 0;
	CHECK(!pps_jitter_new(NULL) && errno == EINVAL);
	pps_jitter_params_init(&p, 7000); /* not an Opus frame */
	errno = 0;
	CHECK(!pps_jitter_new(&p) && errno == EINVAL);
	pps_jitter_params_init(&p, 20000);
	p.max_frames = 40; /* 800 ms: less than max_delay */
	errno = 0;
	CHECK(!pps_jitter_new(&p) && errno == EINVAL);
	pps_jitter_params_init(&p, 20000);
	p.max_frames = PPS_JITTER_MAX_FRAMES_LIMIT + 1;
	CHECK(!pps_jitter_new(&p) && errno == EINVAL);
	pps_jitter_params_init(&p, 20000);
	p.alpha = 1.0;
	CHECK(!pps_jitter_new(&p) && errno == EINVAL);
	pps_jitter_params_init(&p, 20000);
	p.min_delay_us = p.max_delay_us;
	CHECK(!pps_jitter_new(&p) && errno == EINVAL);
	pps_jitter_params_init(&p, 20000);
	p.target_quantile = 1.0;
	CHECK(!pps_jitter_new(&p) && errno == EINVAL);
	p.target_quantile = -0.5;
	CHECK(!pps_jitter_new(&p) && errno == EINVAL);
	p.target_quantile = 0.99;
	p.quantile_window_us = 10000; /* under a frame */
	CHECK(!pps_jitter_new(&p) && errno == EINVAL);
	pps_jitter_params_init(&p, 20000);
	p.target_quantile = 0.99;
	p.quantile_cap_us = 0;
	CHECK(!pps_jitter_new(&p) && errno == EINVAL);
	/* The defaults: the seed's constants, 1.28 s of frames. */
	pps_jitter_params_init(&p, 20000);
	CHECK(fabs(p.alpha - 0.998002) < 1e-6 && p.beta == 4.0 && p.max_frames == 64);
	CHECK(p.target_quantile == 0 && p.quantile_window_us == 10 * SEC &&
	      p.quantile_cap_us == 150 * MS);
	pps_jitter_params_init(&p, 10000);
	CHECK(fabs(p.alpha - 0.999) < 1e-6 && p.max_frames == 128);
	pps_jitter_free(NULL);
}

/* Feeds frame @seq captured at T0 + seq * 20 ms, arriving 40 ms later. */
static int
put_at(pps_jitter_t *j, uint32_t seq, int64_t capture_us, int64_t arrival_us)
{
	uint8_t payload[60];

	payload_for(seq, payload);
	return pps_jitter_put(j, seq, capture_us, true, payload, sizeof(payload), arrival_us);
}

static int
put_frame(pps_jitter_t *j, uint32_t seq)
{
	int64_t capture = T0_US + (int64_t)seq * 20000;

	return put_at(j, seq, capture, capture + 40000);
}

/* Pops each slot at its time until @until_us, as a caller's timer would;
 * returns how many. */
static int
pop_until(pps_jitter_t *j, int64_t until_us)
{
	pps_jitter_slot_t slot;
	int64_t due;
	int n = 0;

	while ((due = pps_jitter_next_due_us(j)) <= until_us)
		while (pps_jitter_pop(j, due, &slot) == 1)
			n++;
	return n;
}

/* Pops every slot due by @now_us; returns how many. */
static int
pop_all(pps_jitter_t *j, int64_t now_us, int *played)
{
	pps_jitter_slot_t slot;
	int n = 0;

	while (pps_jitter_pop(j, now_us, &slot) == 1) {
		n++;
		if (played && slot.action == PPS_JITTER_PLAY)
			(*played)++;
	}
	CHECK(slot.action == PPS_JITTER_NOTHING);
	return n;
}

static void
test_bad_arguments(void)
{
	pps_jitter_t *j = new_jitter(20000);
	uint8_t big[PPS_JITTER_MAX_PAYLOAD_BYTES + 1] = {0};
	pps_jitter_stats_t s;

	CHECK_EQ_INT(pps_jitter_next_due_us(j), INT64_MAX);
	CHECK_EQ_INT(pps_jitter_put(j, 1, T0_US, true, NULL, 10, T0_US), -EINVAL);
	CHECK_EQ_INT(pps_jitter_put(j, 1, T0_US, true, big, 0, T0_US), -EINVAL);
	CHECK_EQ_INT(pps_jitter_put(j, 1, T0_US, true, big, sizeof(big), T0_US), -EINVAL);
	CHECK_EQ_INT(pps_jitter_put(j, 1, INT64_MAX, true, big, 10, T0_US), -EINVAL);
	CHECK_EQ_INT(pps_jitter_put(NULL, 1, T0_US, true, big, 10, T0_US), -EINVAL);
	CHECK_EQ_INT(pps_jitter_put(j, 1, T0_US, true, big, sizeof(big) - 1, T0_US + 1000), 0);
	CHECK_EQ_INT(pps_jitter_put(j, 1, T0_US, true, big, sizeof(big) - 1, T0_US + 1000),
	             -EEXIST);
	pps_jitter_get_stats(j, &s);
	CHECK_EQ_INT(s.received, 2);
	CHECK_EQ_INT(s.duplicates, 1);
	CHECK_EQ_INT(s.held, 1);
	/* The first frame starts the clock: its delay + min_delay. */
	CHECK_EQ_INT(pps_jitter_next_due_us(j), T0_US + 1000 + 20000);
	pps_jitter_free(j);
}

/* Far-future sequence numbers and capture times, one at a time and in a flood. */
static void
test_far_future(void)
{
	pps_jitter_t *j = new_jitter(20000);
	pps_jitter_stats_t s, before;
	int played = 0;
	uint32_t seq;
	int64_t now = 0;

	for (seq = 0; seq < 100; seq++) {
		CHECK_EQ_INT(put_frame(j, seq), 0);
		now = T0_US + (int64_t)seq * 20000 + 40000;
		pop_all(j, now, &played);
	}
	pps_jitter_get_stats(j, &before);
	/* A sequence number far ahead, with a capture time to match: dropped. */
	CHECK_EQ_INT(put_at(j, 100000, T0_US + INT64_C(100000) * 20000, now), -ERANGE);
	/* One far ahead with a present capture time: dropped too. */
	CHECK_EQ_INT(put_at(j, 5000, now - 40000, now), -ERANGE);
	/* A capture time far in the future on a sequence number in the window:
	 * kept for its slot, not measured. */
	CHECK_EQ_INT(put_at(j, 100, T0_US + 3600 * SEC, now), 0);
	pps_jitter_get_stats(j, &s);
	CHECK_EQ_INT(s.dropped_far, 2);
	CHECK_EQ_INT(s.inconsistent, 1);
	CHECK_EQ_INT(s.restarts, 0);
	CHECK_EQ_INT(s.target_delay_us, before.target_delay_us);
	CHECK(pps_jitter_next_due_us(j) <= now + 40000);

	/* A flood of garbage between the frames of the stream: memory and
	 * waiting stay bounded, and the stream goes on. Some of it takes the
	 * slot of a frame still to come. */
	rng_state = 99;
	played = 0;
	for (seq = 101; seq < 1100; seq++) {
		now = T0_US + (int64_t)seq * 20000 + 40000;
		for (int k = 0; k < 100; k++) {
			uint32_t bad_seq = (uint32_t)(rng_uniform() * 4294967295.0);
			int64_t bad_capture = (int64_t)(rng_uniform() * (double)(INT64_C(1) << 53));
			int rc;

			if (k == 0)
				bad_seq = seq + 3;
			rc = put_at(j, bad_seq, k % 2 ? now - 40000 : bad_capture, now);
			CHECK(rc == 0 || rc == -ERANGE || rc == -ESTALE || rc == -EEXIST, "%d", rc);
		}
		CHECK_EQ_INT(put_frame(j, seq), 0);
		pps_jitter_get_stats(j, &s);
		CHECK(s.held <= 64);
		CHECK(pps_jitter_next_due_us(j) <= now + 1000000 + 20000);
		pop_all(j, now, &played);
	}
	pps_jitter_get_stats(j, &s);
	fprintf(stderr, "flood: played %d, far %llu, restarts %llu, inconsistent %llu, late %llu\n",
	        played, (unsigned long long)s.dropped_far, (unsigned long long)s.restarts,
	        (unsigned long long)s.inconsistent, (unsigned long long)s.late);
	CHECK(played >= 990, "played %d", played);
	/* The stream, not the garbage, is what plays at the end. */
	played = 0;
	for (; seq < 1200; seq++) {
		put_frame(j, seq);
		now = T0_US + (int64_t)seq * 20000 + 40000;
		pop_all(j, now, &played);
	}
	CHECK(played >= 90, "played %d of the last 100", played);
	pps_jitter_free(j);
}

/* The sender restarts: its sequence numbers jump (ahead, or back); two
 * frames that agree restart the stream. */
static void
restart(uint32_t new_first)
{
	pps_jitter_t *j = new_jitter(20000);
	pps_jitter_stats_t s;
	int played = 0;
	int64_t now = 0, t;
	uint32_t seq;

	for (seq = 500; seq < 600; seq++) {
		CHECK_EQ_INT(put_frame(j, seq), 0);
		now = T0_US + (int64_t)seq * 20000 + 40000;
		pop_all(j, now, &played);
	}
	/* The capture times go on; the sequence numbers start again. */
	for (int k = 0; k < 100; k++) {
		int rc;

		t = T0_US + (int64_t)(600 + k) * 20000;
		now = t + 40000;
		rc = put_at(j, new_first + (uint32_t)k, t, now);
		if (k == 0)
			CHECK(rc == -ERANGE || rc == -ESTALE, "%d", rc);
		else
			CHECK_EQ_INT(rc, 0);
		if (k == 0)
			played = 0;
		pop_all(j, now, &played);
	}
	pps_jitter_get_stats(j, &s);
	CHECK_EQ_INT(s.restarts, 1);
	CHECK(played >= 97, "played %d", played);
	CHECK_EQ_INT(s.current_delay_us, 60000);
	pps_jitter_free(j);
}

static void
test_restart_ahead(void)
{
	restart(70000);
}

static void
test_restart_back(void)
{
	restart(3);
}

/* Sequence numbers wrap around 2^32 without a glitch. */
static void
test_wrap(void)
{
	sim_t sim = {.frame_us = 20000,
	             .frames = 10 * 50,
	             .speech_us = 1 * SEC,
	             .silence_us = SEC / 2,
	             .delay_us = delay_constant,
	             .first_seq = UINT32_MAX - 200,
	             .arg = {40000}};
	pps_jitter_t *j = new_jitter(20000);

	sim_run(&sim, j);
	CHECK_EQ_INT(sim.end.played, sim.frames);
	CHECK_EQ_INT(sim.end.restarts + sim.end.lost + sim.end.late, 0);
	sim_free(&sim);
	pps_jitter_free(j);
}

/* The caller stops popping: the buffer holds max_frames, the oldest make
 * room, and a caller back 1.2 s late catches up in a bounded burst. */
static void
test_overflow(void)
{
	pps_jitter_t *j = new_jitter(20000);
	pps_jitter_stats_t s;
	int64_t now;
	int played = 0;

	for (uint32_t seq = 0; seq < 200; seq++)
		CHECK_EQ_INT(put_frame(j, seq), 0);
	pps_jitter_get_stats(j, &s);
	CHECK_EQ_INT(s.held, 64);
	CHECK_EQ_INT(s.dropped_overflow, 200 - 64);
	CHECK_EQ_INT(s.current_delay_us, 60000); /* D kept */
	now = T0_US + 199 * 20000 + 40000;
	CHECK(pop_all(j, now, &played) <= 2);
	pps_jitter_get_stats(j, &s);
	CHECK(s.expired >= 60, "expired %llu", (unsigned long long)s.expired);
	CHECK_EQ_INT(s.played + s.held + s.expired + s.dropped_overflow, 200);
	CHECK(pps_jitter_next_due_us(j) > now);
	pps_jitter_free(j);
}

/* The sender stops: after idle_after_us nothing is scheduled; when it comes
 * back (its frames delayed, as after a TCP stall, or its sequence paused
 * while its clock went on) the stream plays again. */
static void
test_idle(void)
{
	pps_jitter_t *j = new_jitter(20000);
	pps_jitter_stats_t s;
	int played = 0, conceals;
	int64_t now = 0;
	uint32_t seq;

	for (seq = 0; seq < 100; seq++) {
		put_frame(j, seq);
		now = T0_US + (int64_t)seq * 20000 + 40000;
		pop_all(j, now, &played);
	}
	conceals = pop_until(j, now + 5 * SEC);
	CHECK_EQ_INT(pps_jitter_next_due_us(j), INT64_MAX);
	CHECK(conceals >= 45 && conceals <= 55, "%d conceal slots", conceals);
	/* The sender went on capturing: frames 350.. come (250 never do). */
	played = 0;
	for (seq = 350; seq < 450; seq++) {
		CHECK_EQ_INT(put_frame(j, seq), 0);
		now = T0_US + (int64_t)seq * 20000 + 40000;
		pop_all(j, now, &played);
	}
	CHECK(played >= 98, "played %d", played);
	pps_jitter_get_stats(j, &s);
	CHECK_EQ_INT(s.restarts, 0);
	CHECK_EQ_INT(s.lost, 250);
	/* Now its sequence numbers pause 5 s while its clock goes on. */
	pop_until(j, now + 5 * SEC);
	CHECK_EQ_INT(pps_jitter_next_due_us(j), INT64_MAX);
	played = 0;
	for (seq = 450; seq < 550; seq++) {
		int64_t t = T0_US + (int64_t)(seq + 250) * 20000;

		now = t + 40000;
		put_at(j, seq, t, now);
		pop_all(j, now, &played);
	}
	pps_jitter_get_stats(j, &s);
	CHECK_EQ_INT(s.restarts, 1);
	CHECK(played >= 97, "played %d", played);
	pps_jitter_free(j);
}

/* The caller's clock steps (its offset estimate is replaced): back 5 s; and
 * a frame 2000 s ahead that the caller stamps as arriving 2000 s ahead (the
 * play point jumps there, as for a caller that stopped popping). The stream
 * plays on after a restart each time. */
static void
test_clock_steps(void)
{
	pps_jitter_t *j = new_jitter(20000);
	pps_jitter_stats_t s;
	int played = 0;
	int64_t now = 0, step = 0;
	uint32_t seq;

	for (seq = 0; seq < 600; seq++) {
		int64_t capture = T0_US + (int64_t)seq * 20000;

		if (seq == 200)
			step = -5 * SEC;
		if (seq == 400)
			CHECK_EQ_INT(put_at(j, seq + 100000, capture + 2000 * SEC,
			                    capture + 40000 + step + 2000 * SEC),
			             0);
		put_at(j, seq, capture, capture + 40000 + step);
		now = capture + 40000 + step;
		if (seq == 150 || seq == 350 || seq == 500) {
			pps_jitter_get_stats(j, &s);
			played = (int)s.played;
		}
		pop_all(j, now, NULL);
		if (seq == 199 || seq == 399 || seq == 599) {
			pps_jitter_get_stats(j, &s);
			CHECK((int)s.played - played >= 45, "seq %u: played %d of the last 50", seq,
			      (int)s.played - played);
		}
	}
	pps_jitter_get_stats(j, &s);
	CHECK_EQ_INT(s.restarts, 2);
	pps_jitter_free(j);
}

int
main(int argc, char **argv)
{
	pps_test_init(&argc, argv);
	PPS_TEST_RUN(test_params);
	PPS_TEST_RUN(test_bad_arguments);
	PPS_TEST_RUN(test_steady_20ms);
	PPS_TEST_RUN(test_steady_10ms);
	PPS_TEST_RUN(test_jitter);
	PPS_TEST_RUN(test_spike);
	PPS_TEST_RUN(test_late_lost);
	PPS_TEST_RUN(test_stall);
	PPS_TEST_RUN(test_drift_up);
	PPS_TEST_RUN(test_drift_down);
	PPS_TEST_RUN(test_quantile);
	PPS_TEST_RUN(test_quantile_cap);
	PPS_TEST_RUN(test_quantile_steady);
	PPS_TEST_RUN(test_hysteresis_floor);
	PPS_TEST_RUN(test_stall_leftover);
	PPS_TEST_RUN(test_hysteresis_step_up);
	PPS_TEST_RUN(test_metrics);
	PPS_TEST_RUN(test_far_future);
	PPS_TEST_RUN(test_restart_ahead);
	PPS_TEST_RUN(test_restart_back);
	PPS_TEST_RUN(test_wrap);
	PPS_TEST_RUN(test_overflow);
	PPS_TEST_RUN(test_idle);
	PPS_TEST_RUN(test_clock_steps);
	return pps_test_result();
}
