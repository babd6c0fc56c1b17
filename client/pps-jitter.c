/* SPDX-License-Identifier: MIT */
/*
 * The adaptive jitter buffer (pps-jitter.h).
 *
 * The estimate (seed 003, Zhang, Wang, Keshav, section 4.1.1, which
 * implements Ramjee et al.'s algorithm 2 with the spike mode of their
 * algorithm 4). For every frame whose capture time fits the sender's
 * timeline, n = arrival - capture and
 *
 *   NORMAL:  d = a d + (1 - a) n            (but see "drift" below)
 *   SPIKE:   d = d + (n - n_prev)          (d follows the delay as it moves)
 *   both:    v = a v + (1 - a) |d - n|
 *   target:  T = d + max(beta v, min_delay), at most floor + max_delay
 *
 * with a = alpha (0.998002 at 20 ms, the seed's) and beta = 4. Four changes:
 *  - alpha is per frame from a 10 s memory, so 10 ms frames weigh the past
 *    as 20 ms ones do; while fewer than 1 / (1 - alpha) frames have been seen
 *    a = 1 - 1 / i (the plain mean), so the first seconds are not dominated
 *    by the first frame.
 *  - Spike mode (seed 003 only sketches it; the constants are algorithm 4's
 *    as pps-playout.c states them) is entered when the delay jumps by more
 *    than 2 v + 100 ms, here either way, or when it slides faster than half
 *    a frame per frame (trend = trend / 2 + (n_i - n_{i-1}) / 2, above f / 2
 *    + 2 v), and left when var = var / 2 + |2 n_i - n_{i-1} - n_{i-2}| / 8
 *    is under 10 ms and the slide has stopped (|trend| < f / 2). Over TCP a stall ends with the
 *    queued frames arriving together: the delay falls by one frame per frame,
 *    smoothly, so algorithm 4 alone leaves spike mode at the top of that
 *    slope and the slow NORMAL average then takes tens of seconds to come
 *    down; following the slide to its foot brings d back with it.
 *  - Drift: d is Brown's double exponential smoothing with the same a,
 *    s1 = a s1 + (1 - a) n, s2 = a s2 + (1 - a) s1, d = 2 s1 - s2. The
 *    seed's single average lags a delay that drifts by slope x 10 s (20 ms at
 *    2 ms/s), and v then counts that lag as variation: D would carry 4 x 20
 *    ms for nothing. The double average has no lag on a steady slope, and
 *    spike mode shifts both sums, so the slope survives a spike.
 *  - The bounds are relative: min_delay is the least margin above d (what a
 *    steady path gets, where v is 0; and what a spike gets, where d follows
 *    the delay and v stays small), max_delay the most above the delay floor
 *    (the least n of the last 2 s): what a spike may add to the path's
 *    fastest. Absolute bounds would move with the error of the caller's
 *    clock offset (any error: before its first estimate, minutes).
 *
 * Playout. Slots come every frame_us; the play point is a sequence number
 * and the time its slot is due. Frame s plays at due(s) = next_due + (s -
 * next_seq) frame_us, and D = due(s) - capture(s). D changes only by whole
 * frames, so the caller's audio never has a gap or an overlap:
 *  - in a pause (the frame at the play point is silent, or missing while no
 *    talkspurt is playing), D moves freely: a slot is inserted (CONCEAL)
 *    while T - D > f / 4, and silent frames are skipped while D - T >= f,
 *    so D rests in [T - f / 4, T + f). The quarter frame keeps D from
 *    flapping between two steps when T sits on one (T moves slowly between
 *    pauses), and a millisecond more of T is no reason for a frame more of
 *    D: T already holds its margin, 4 v or min_delay. Hysteresis widens the
 *    quarter frame to hysteresis_us (10 ms) where T is above D only by
 *    what it adds to the arrivals' own demand (the margin above d, the lip
 *    sync floor): with the test source's ticks nearly every slot is a
 *    pause, so D follows every move of T across a step's edge, and a step
 *    is a whole frame (20 ms) for a target that moved by 6 ms. Where the
 *    arrivals ask for more than D (the quantile, or d + beta v, above it)
 *    or in spike mode, frames would be late: the quarter frame holds;
 *  - at a talkspurt start (a speech frame after a silent slot) D may still
 *    grow, by slots inserted before it (the paper's new delay per talkspurt);
 *  - inside a talkspurt D is constant (the seed's rule: changing it there is
 *    what listeners hear), except in continuous audio: after
 *    continuous_after_us (2 s: talkspurts of conversational speech last
 *    about a second) without a pause, one step toward T (by the same
 *    rules), at most every continuous_step_us (1 s, as WebRTC resynchronises
 *    audio) - NetEq's accelerate (a frame skipped) and expand (a frame
 *    concealed) at a frame's granularity. Not in spike mode: a spike is over
 *    before steps of a frame a second could follow it, and the tail of a
 *    TCP stall's burst would leave a frame too many. Sender clock drift is
 *    followed this way: d follows n, T follows d, D follows T at the pauses
 *    or once a second.
 * A frame missing at its slot: RECOVER when the next one is held (its
 * in-band FEC), else CONCEAL; if it comes later it is late (discarded).
 *
 * Bounds and the sender's timeline. Capture times are checked against
 * the sequence numbers: the newest frame that fitted predicts capture(s) =
 * ref_capture + (s - ref_seq) frame_us. A frame is off the stream when its
 * capture time is more than resync_us away from that, when it is further
 * ahead of the play point than the ring holds and the slots it would push out
 * are not overdue (a sequence number far ahead), or when it is behind a
 * play point whose next slot is more than max_delay after its arrival (the
 * caller's clock stepped back). An off-stream frame is not measured. A second one that continues
 * the first (next sequence numbers, capture times that fit each other) means
 * the sender restarted, paused or stepped its clock: the stream restarts at
 * it (RFC 3550 appendix A.1's probation, by timeline instead of sequence
 * alone). A single one is dropped if far (-ERANGE), else it is kept for its
 * slot until a frame that fits claims it. A frame ahead by more than the ring
 * whose slots are overdue (the caller stopped popping) makes room by passing
 * the oldest slots. While no slot has a frame for idle_after_us, the buffer
 * stops scheduling; the next frame passes the slots that went by, as pop
 * would have, and play goes on where the sender now is.
 */
#include "pps-jitter.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The delay floor: the least delay in 4 buckets of 0.5 s, so the last 1.5 to
 * 2 s. Long enough to hold the path's propagation delay across a talkspurt,
 * short enough to follow drift (2 ms/s lags it by 4 ms at most). */
#define FLOOR_BUCKETS   4
#define FLOOR_BUCKET_US 500000
/* The estimate's memory: the seed's alpha, 0.998002, per 20 ms frame (the
 * packet interval of Ramjee et al.'s traces; seed 003 sent one every 46.3
 * ms): 10 s. */
#define DEFAULT_MEMORY_US 10000000.0
#define NO_TIME           INT64_MIN
/* Times beyond +-2^53 us (285 years) are refused: every sum and difference
 * of two stays exact in a double and far from int64_t's limits. */
#define TIME_LIMIT_US (INT64_C(1) << 53)

typedef struct {
	bool present;
	bool speech;
	bool fits; /* its capture time fitted the sender's timeline */
	uint32_t seq;
	int64_t capture_us;
	size_t len;
	uint8_t *payload; /* PPS_JITTER_MAX_PAYLOAD_BYTES of the object's arena */
} held_t;

typedef struct {
	bool used;
	int64_t id;
	double min_us;
} floor_bucket_t;

struct pps_jitter {
	pps_jitter_params_t p;
	int64_t sync_floor_us; /* pps_jitter_set_floor(): 0 = none */
	held_t *ring;          /* max_frames; ring[head] holds next_seq */
	uint8_t *arena;
	int head, held;
	bool started, idle;
	uint32_t next_seq;
	int64_t next_due_us; /* the slot of next_seq (kept while idle) */
	/* The sender's timeline: the newest frame whose capture time fitted. */
	uint32_t ref_seq;
	int64_t ref_capture_us;
	/* An off-stream frame waiting for a second one to confirm a restart. */
	bool have_candidate;
	uint32_t candidate_seq;
	int64_t candidate_capture_us;
	/* The estimate (microseconds). */
	uint64_t samples;
	double s1, s2; /* the delay smoothed once and twice (Brown) */
	double d, v;   /* d = 2 s1 - s2 */
	double n1, n2; /* the last two delays */
	double var, trend;
	bool spike;
	floor_bucket_t floor[FLOOR_BUCKETS];
	int64_t floor_id;
	/* The quantile target: the last window_n delays (a ring at window_pos,
	 * window_used of them so far), a scratch copy to select in, and the
	 * quantile of the window as of the last frame measured. */
	double *window, *scratch;
	int window_n, window_used, window_pos;
	double quantile_us;
	/* Playout. */
	bool in_talkspurt;      /* the last slot was speech */
	bool changed_in_pause;  /* D stepped since the last speech frame played */
	int64_t boundary_us;    /* the slot of the last pause or talkspurt start */
	int64_t last_step_us;   /* the slot of the last continuous-audio step */
	int64_t empty_since_us; /* first slot of the current run with nothing held */
	/* Counters; the playout delay's mean and sum of squares (Welford). */
	pps_jitter_stats_t stats;
	double delay_mean_us, delay_m2;
};

void
pps_jitter_params_init(pps_jitter_params_t *params, int64_t frame_us)
{
	memset(params, 0, sizeof(*params));
	params->frame_us = frame_us;
	params->min_delay_us = 20000;
	params->max_delay_us = 1000000;
	params->max_frames = frame_us > 0 ? (int)(1280000 / frame_us) : 64;
	params->alpha = frame_us > 0 ? exp(-(double)frame_us / DEFAULT_MEMORY_US) : 0.998002;
	params->beta = 4.0;
	params->spike_enter_us = 100000;
	params->spike_exit_us = 10000;
	params->continuous_after_us = 2000000;
	params->continuous_step_us = 1000000;
	params->resync_us = 100000;
	params->idle_after_us = 1000000;
	params->target_quantile = 0;
	params->quantile_window_us = 10000000;
	params->quantile_cap_us = 150000;
	params->hysteresis_us = 10000;
}

static bool
params_valid(const pps_jitter_params_t *p)
{
	static const int64_t opus_frames_us[] = {2500, 5000, 10000, 20000, 40000, 60000};
	bool frame_ok = false;

	for (size_t i = 0; i < sizeof(opus_frames_us) / sizeof(opus_frames_us[0]); i++)
		frame_ok = frame_ok || p->frame_us == opus_frames_us[i];
	return frame_ok && p->min_delay_us >= 0 && p->max_delay_us > p->min_delay_us &&
	       p->max_frames >= 2 && p->max_frames <= PPS_JITTER_MAX_FRAMES_LIMIT &&
	       /* the buffer must hold the longest delay it may choose */
	       (int64_t)p->max_frames * p->frame_us > p->max_delay_us && p->alpha > 0 &&
	       p->alpha < 1 && p->beta >= 0 && p->spike_enter_us >= 0 && p->spike_exit_us >= 0 &&
	       p->continuous_after_us >= 0 && p->continuous_step_us > 0 && p->resync_us > 0 &&
	       p->idle_after_us > 0 && p->hysteresis_us >= 0 && p->target_quantile >= 0 &&
	       p->target_quantile < 1 &&
	       (p->target_quantile == 0 ||
	        (p->quantile_window_us >= p->frame_us && p->quantile_cap_us > 0));
}

pps_jitter_t *
pps_jitter_new(const pps_jitter_params_t *params)
{
	pps_jitter_t *j;

	if (!params || !params_valid(params)) {
		errno = EINVAL;
		return NULL;
	}
	j = calloc(1, sizeof(*j));
	if (!j)
		goto err_nomem;
	j->p = *params;
	j->ring = calloc((size_t)params->max_frames, sizeof(*j->ring));
	if (!j->ring)
		goto err_ring;
	/* Fixed slots: no allocation per frame, memory bounded by max_frames. */
	j->arena = malloc((size_t)params->max_frames * PPS_JITTER_MAX_PAYLOAD_BYTES);
	if (!j->arena)
		goto err_arena;
	for (int i = 0; i < params->max_frames; i++)
		j->ring[i].payload = j->arena + (size_t)i * PPS_JITTER_MAX_PAYLOAD_BYTES;
	if (params->target_quantile > 0) {
		int64_t n = params->quantile_window_us / params->frame_us;

		j->window_n =
		    n < PPS_JITTER_MAX_FRAMES_LIMIT ? (int)n : PPS_JITTER_MAX_FRAMES_LIMIT;
		j->window = calloc((size_t)j->window_n, sizeof(*j->window));
		j->scratch = calloc((size_t)j->window_n, sizeof(*j->scratch));
		if (!j->window || !j->scratch)
			goto err_window;
	}
	j->empty_since_us = NO_TIME;
	return j;

err_window:
	free(j->window);
	free(j->scratch);
	free(j->arena);
err_arena:
	free(j->ring);
err_ring:
	free(j);
err_nomem:
	errno = ENOMEM;
	return NULL;
}

void
pps_jitter_free(pps_jitter_t *j)
{
	if (!j)
		return;
	free(j->window);
	free(j->scratch);
	free(j->arena);
	free(j->ring);
	free(j);
}

static bool
time_valid(int64_t t_us)
{
	return t_us >= -TIME_LIMIT_US && t_us <= TIME_LIMIT_US;
}

/* ---- the sender's timeline ----------------------------------------------- */

static int32_t
seq_diff(uint32_t a, uint32_t b)
{
	return (int32_t)(a - b);
}

static int64_t
predicted_capture_us(const pps_jitter_t *j, uint32_t seq)
{
	return j->ref_capture_us + (int64_t)seq_diff(seq, j->ref_seq) * j->p.frame_us;
}

static bool
near_us(int64_t a, int64_t b, int64_t tolerance_us)
{
	/* In unsigned arithmetic: a hostile capture time must not overflow. */
	uint64_t distance = a > b ? (uint64_t)a - (uint64_t)b : (uint64_t)b - (uint64_t)a;

	return distance <= (uint64_t)tolerance_us;
}

/* D at the play point: its slot minus its (predicted) capture time. */
static int64_t
current_delay_us(const pps_jitter_t *j)
{
	return j->next_due_us - predicted_capture_us(j, j->next_seq);
}

/* ---- the estimate ----------------------------------------------------------- */

static int64_t
floor_bucket_id(int64_t arrival_us)
{
	int64_t id = arrival_us / FLOOR_BUCKET_US;

	return arrival_us < 0 && id * FLOOR_BUCKET_US != arrival_us ? id - 1 : id;
}

static void
floor_reset(pps_jitter_t *j)
{
	memset(j->floor, 0, sizeof(j->floor));
	j->floor_id = INT64_MIN;
}

static void
floor_add(pps_jitter_t *j, int64_t arrival_us, double n)
{
	int64_t id = floor_bucket_id(arrival_us);
	floor_bucket_t *b;

	/* The caller's clock may step back: its samples join the newest bucket. */
	if (id < j->floor_id)
		id = j->floor_id;
	j->floor_id = id;
	b = &j->floor[((id % FLOOR_BUCKETS) + FLOOR_BUCKETS) % FLOOR_BUCKETS];
	if (!b->used || b->id != id) {
		b->used = true;
		b->id = id;
		b->min_us = n;
	} else if (n < b->min_us) {
		b->min_us = n;
	}
}

static double
floor_us(const pps_jitter_t *j)
{
	double m = INFINITY;

	for (int i = 0; i < FLOOR_BUCKETS; i++)
		if (j->floor[i].used && j->floor[i].id > j->floor_id - FLOOR_BUCKETS &&
		    j->floor[i].min_us < m)
			m = j->floor[i].min_us;
	return isinf(m) ? j->d : m;
}

static double
median3(double a, double b, double c)
{
	return fmax(fmin(a, b), fmin(fmax(a, b), c));
}

/* Moves the delay estimate by @by, its slope unchanged. */
static void
shift_estimate(pps_jitter_t *j, double by)
{
	j->s1 += by;
	j->s2 += by;
	j->d += by;
}

/* Seed 003's estimate with algorithm 4's spike mode (changes: see the top). */
static void
estimate(pps_jitter_t *j, double n)
{
	const pps_jitter_params_t *p = &j->p;
	double f = (double)p->frame_us, dn, a;

	if (j->samples == 0) {
		j->s1 = j->s2 = j->d = n;
		j->v = 0;
		j->n1 = j->n2 = n;
		j->samples = 1;
		return;
	}
	dn = n - j->n1;
	a = 1.0 - 1.0 / (double)(j->samples + 1);
	if (a > p->alpha)
		a = p->alpha;
	j->trend = (j->trend + dn) / 2;
	if (!j->spike) {
		if (fabs(dn) > 2 * j->v + (double)p->spike_enter_us ||
		    fabs(j->trend) > f / 2 + 2 * j->v) {
			j->spike = true;
			j->var = 0;
		}
	} else {
		j->var = j->var / 2 + fabs(2 * n - j->n1 - j->n2) / 8;
	}
	if (j->spike) {
		shift_estimate(j, dn);
		/* Leaving: d restarts from the median of the last three delays
		 * (calm, by the rule), not from where following left it: entered
		 * on a slide, d kept the distance it had from the delay then. */
		if (j->var <= (double)p->spike_exit_us && fabs(j->trend) < f / 2) {
			j->spike = false;
			shift_estimate(j, median3(n, j->n1, j->n2) - j->d);
		}
	} else {
		j->s1 = a * j->s1 + (1 - a) * n;
		j->s2 = a * j->s2 + (1 - a) * j->s1;
		j->d = 2 * j->s1 - j->s2;
	}
	j->v = a * j->v + (1 - a) * fabs(j->d - n);
	j->n2 = j->n1;
	j->n1 = n;
	j->samples++;
}

/* The @k-th smallest (from 0) of @v[0 .. n): Hoare's selection, in place. */
static double
select_kth(double *v, int n, int k)
{
	int lo = 0, hi = n - 1;

	while (lo < hi) {
		double pivot = v[lo + (hi - lo) / 2];
		int i = lo, k2 = hi;

		while (i <= k2) {
			while (v[i] < pivot)
				i++;
			while (v[k2] > pivot)
				k2--;
			if (i <= k2) {
				double t = v[i];

				v[i++] = v[k2];
				v[k2--] = t;
			}
		}
		if (k <= k2)
			hi = k2;
		else if (k >= i)
			lo = i;
		else
			break;
	}
	return v[k];
}

/* The quantile target: @n joins the window, the quantile (nearest rank) is
 * chosen again. O(window) per frame: 500 delays for 10 s of 20 ms frames. */
static void
window_add(pps_jitter_t *j, double n)
{
	int rank;

	if (!j->window)
		return;
	j->window[j->window_pos] = n;
	j->window_pos = (j->window_pos + 1) % j->window_n;
	if (j->window_used < j->window_n)
		j->window_used++;
	memcpy(j->scratch, j->window, (size_t)j->window_used * sizeof(*j->scratch));
	rank = (int)ceil(j->p.target_quantile * (double)j->window_used);
	if (rank < 1)
		rank = 1;
	j->quantile_us = select_kth(j->scratch, j->window_used, rank - 1);
}

static void
window_reset(pps_jitter_t *j)
{
	j->window_used = j->window_pos = 0;
}

static void
measure(pps_jitter_t *j, int64_t capture_us, int64_t arrival_us)
{
	double n = (double)(arrival_us - capture_us);

	estimate(j, n);
	floor_add(j, arrival_us, n);
	window_add(j, n);
}

/* The delay the arrivals themselves ask for: the quantile (within its cap
 * above the floor), or d + beta v. */
static double
cover_delay_us(const pps_jitter_t *j)
{
	if (j->window && j->window_used > 0)
		return fmin(j->quantile_us, floor_us(j) + (double)j->p.quantile_cap_us);
	return j->d + fmax(j->p.beta * j->v, (double)j->p.min_delay_us);
}

/* What the quantile target's margin is taken above: d, or where d is above
 * both the quantile and the last two delays, the higher of those (see
 * target_delay_us). */
static double
margin_base_us(const pps_jitter_t *j)
{
	if (j->spike)
		return j->d;
	return fmin(j->d, fmax(j->quantile_us, fmin(j->n1, j->n2)));
}

static int64_t
target_delay_us(const pps_jitter_t *j)
{
	double t;

	if (j->window && j->window_used > 0)
		/* The quantile (within its cap above the floor), but no less than
		 * a steady path's margin above d (d follows a spike at once, the
		 * window's quantile does not). Out of spike mode the margin is
		 * taken above the higher of the quantile and the last two delays
		 * where d is above both: leaving a spike restarts d from the
		 * median of the last three delays, which after a short stall is
		 * its tail (86, 66, 36 ms: 66), and the 10 s average then takes
		 * seconds to come down while the delays are back where they were;
		 * the target would carry that for nothing. A delay that stepped
		 * up and stays has the last two at the new level: d holds until
		 * the window's quantile has it. */
		t = fmax(cover_delay_us(j), margin_base_us(j) + (double)j->p.min_delay_us);
	else
		t = cover_delay_us(j);
	t = fmin(t, floor_us(j) + (double)j->p.max_delay_us);

	/* Another stream to wait for (lip sync) may ask for more, within the
	 * same upper bound. */
	if (j->sync_floor_us > 0 && (double)j->sync_floor_us > t)
		t = fmin((double)j->sync_floor_us, floor_us(j) + (double)j->p.max_delay_us);
	return (int64_t)ceil(t);
}

void
pps_jitter_set_floor(pps_jitter_t *j, int64_t floor_us)
{
	j->sync_floor_us = floor_us > 0 ? floor_us : 0;
}

/* ---- the ring -------------------------------------------------------------- */

/* @seq is in [next_seq, next_seq + max_frames). */
static held_t *
ring_at(pps_jitter_t *j, uint32_t seq)
{
	uint32_t off = seq - j->next_seq;

	return &j->ring[(j->head + (int)off) % j->p.max_frames];
}

/* Moves the play point one frame on, without time; returns the frame that
 * was there (readable until the next put) or NULL. */
static held_t *
take_head(pps_jitter_t *j)
{
	held_t *h = &j->ring[j->head];
	bool present = h->present;

	h->present = false;
	if (present)
		j->held--;
	j->head = (j->head + 1) % j->p.max_frames;
	j->next_seq++;
	return present ? h : NULL;
}

/* Passes @slots slots, frames and time (D unchanged): a held frame is counted
 * in @counter, a missing one lost. */
static void
pass_slots(pps_jitter_t *j, uint64_t slots, uint64_t *counter)
{
	uint64_t walk = slots < (uint64_t)j->p.max_frames ? slots : (uint64_t)j->p.max_frames;

	for (uint64_t i = 0; i < walk; i++) {
		if (take_head(j))
			(*counter)++;
		else
			j->stats.lost++;
	}
	/* Beyond max_frames nothing is held: count, don't walk. */
	j->next_seq += (uint32_t)(slots - walk);
	j->stats.lost += slots - walk;
	j->next_due_us += (int64_t)slots * j->p.frame_us;
	/* What the listener hears next follows a gap: a pause. */
	j->in_talkspurt = false;
	j->boundary_us = j->next_due_us;
	j->empty_since_us = NO_TIME;
}

/* The first frame, or a restart: the clock starts at this frame. */
static void
start(pps_jitter_t *j, uint32_t seq, int64_t capture_us, int64_t arrival_us)
{
	double n = (double)(arrival_us - capture_us);

	if (j->started) {
		/* A restart: the old stream's frames go; what was learnt of the
		 * path's variation stays, its delay is measured again (the
		 * sender's clock may have stepped). */
		for (int i = 0; i < j->p.max_frames; i++) {
			if (j->ring[i].present) {
				j->ring[i].present = false;
				j->stats.expired++;
			}
		}
		j->held = 0;
		j->stats.restarts++;
		j->s1 = j->s2 = j->d = j->n1 = j->n2 = n;
		j->trend = j->var = 0;
		j->spike = false;
	} else {
		estimate(j, n);
	}
	floor_reset(j);
	floor_add(j, arrival_us, n);
	window_reset(j);
	window_add(j, n);
	j->ref_seq = seq;
	j->ref_capture_us = capture_us;
	j->have_candidate = false;
	j->head = 0;
	j->next_seq = seq;
	j->next_due_us = capture_us + target_delay_us(j);
	j->started = true;
	j->idle = false;
	j->in_talkspurt = false;
	j->boundary_us = j->last_step_us = j->next_due_us;
	j->empty_since_us = NO_TIME;
}

static bool
continues_candidate(const pps_jitter_t *j, uint32_t seq, int64_t capture_us)
{
	int32_t dseq = seq_diff(seq, j->candidate_seq);

	return j->have_candidate && dseq > 0 && dseq < j->p.max_frames &&
	       near_us(capture_us, j->candidate_capture_us + (int64_t)dseq * j->p.frame_us,
	               j->p.resync_us);
}

static void
store(pps_jitter_t *j, uint32_t seq, int64_t capture_us, bool speech, const uint8_t *payload,
      size_t len, bool fits)
{
	held_t *h = ring_at(j, seq);

	h->present = true;
	h->fits = fits;
	h->seq = seq;
	h->capture_us = capture_us;
	h->speech = speech;
	h->len = len;
	memcpy(h->payload, payload, len);
	j->held++;
	j->empty_since_us = NO_TIME;
}

int
pps_jitter_put(pps_jitter_t *j, uint32_t seq, int64_t capture_us, bool speech,
               const uint8_t *payload, size_t len, int64_t arrival_us)
{
	int32_t dist;
	int64_t due_us;
	bool fits, far, ahead;

	if (!j || !payload || len == 0 || len > PPS_JITTER_MAX_PAYLOAD_BYTES ||
	    !time_valid(capture_us) || !time_valid(arrival_us))
		return -EINVAL;
	j->stats.received++;
	if (!j->started) {
		start(j, seq, capture_us, arrival_us);
		store(j, seq, capture_us, speech, payload, len, true);
		return 0;
	}
	if (j->idle) {
		/* The slots went on silently while idle: pass those due before
		 * this arrival, as pop would have (nothing is held). */
		if (arrival_us > j->next_due_us)
			pass_slots(j,
			           (uint64_t)((arrival_us - j->next_due_us + j->p.frame_us - 1) /
			                      j->p.frame_us),
			           &j->stats.expired);
		j->idle = false;
	}
	dist = seq_diff(seq, j->next_seq);
	due_us = j->next_due_us + (int64_t)dist * j->p.frame_us;
	fits = near_us(capture_us, predicted_capture_us(j, seq), j->p.resync_us);
	/* Further ahead than the ring holds: the oldest slots make room if
	 * they are overdue (the caller stopped popping), else it is far. */
	far = dist >= j->p.max_frames &&
	      due_us - (int64_t)j->p.max_frames * j->p.frame_us > arrival_us;
	/* Behind a play point whose next slot is further ahead of this arrival
	 * than any delay D may be: the caller's clock stepped back. */
	ahead = dist < 0 && j->next_due_us - arrival_us > j->p.max_delay_us + j->p.frame_us;
	if (!fits || far || ahead) {
		if (continues_candidate(j, seq, capture_us)) {
			start(j, seq, capture_us, arrival_us);
			store(j, seq, capture_us, speech, payload, len, true);
			return 0;
		}
		j->have_candidate = true;
		j->candidate_seq = seq;
		j->candidate_capture_us = capture_us;
		if (far) {
			j->stats.dropped_far++;
			return -ERANGE;
		}
		/* Kept for its slot (the sequence number decides); not measured
		 * if its capture time is off. */
		j->stats.inconsistent++;
	}
	if (dist >= 0 && dist < j->p.max_frames) {
		held_t *h = ring_at(j, seq);

		if (h->present && h->seq == seq) {
			j->stats.duplicates++;
			/* A frame that fits the timeline replaces one that did not
			 * (garbage must not hold a real frame's slot). */
			if (!fits || h->fits)
				return -EEXIST;
			h->present = false;
			j->held--;
		}
	}
	if (fits && !ahead)
		j->have_candidate = false;
	if (fits) {
		measure(j, capture_us, arrival_us);
		if (seq_diff(seq, j->ref_seq) > 0) {
			j->ref_seq = seq;
			j->ref_capture_us = capture_us;
		}
	}
	if (dist < 0) {
		j->stats.late++;
		return -ESTALE;
	}
	if (dist >= j->p.max_frames)
		/* Its slot is near but the play point is behind: the caller
		 * stopped popping. The oldest slots make room. */
		pass_slots(j, (uint64_t)dist - (uint64_t)j->p.max_frames + 1,
		           &j->stats.dropped_overflow);
	store(j, seq, capture_us, speech, payload, len, fits);
	return 0;
}

int64_t
pps_jitter_next_due_us(const pps_jitter_t *j)
{
	return j && j->started && !j->idle ? j->next_due_us : INT64_MAX;
}

/* ---- playout ---------------------------------------------------------------- */

/* One change of D per pause, each step of continuous audio. */
static void
note_change(pps_jitter_t *j)
{
	if (!j->changed_in_pause)
		j->stats.delay_changes++;
	j->changed_in_pause = true;
}

static void
fill(pps_jitter_slot_t *out, pps_jitter_action_t action, uint32_t seq, int64_t capture_us,
     int64_t playout_us, const held_t *payload_of, bool speech)
{
	out->action = action;
	out->seq = seq;
	out->capture_us = capture_us;
	out->playout_us = playout_us;
	out->payload = payload_of ? payload_of->payload : NULL;
	out->len = payload_of ? payload_of->len : 0;
	out->speech = speech;
}

static void
count_delay(pps_jitter_t *j, int64_t delay_us)
{
	double x = (double)delay_us, delta = x - j->delay_mean_us;

	j->stats.played++;
	j->delay_mean_us += delta / (double)j->stats.played;
	j->delay_m2 += delta * (x - j->delay_mean_us);
}

/* A slot inserted before the play point: D grows by a frame. */
static int
insert_slot(pps_jitter_t *j, pps_jitter_slot_t *out)
{
	fill(out, PPS_JITTER_CONCEAL, j->next_seq, predicted_capture_us(j, j->next_seq),
	     j->next_due_us, NULL, false);
	j->stats.inserted++;
	note_change(j);
	j->next_due_us += j->p.frame_us;
	return 1;
}

/* Adjusts D at the play point; 1 with a slot in @out, 0 to play it as it is. */
static int
adjust(pps_jitter_t *j, pps_jitter_slot_t *out)
{
	const int64_t f = j->p.frame_us;

	/* Each turn skips a missing frame (no slot): at most one turn per frame held. */
	for (int guard = 0; guard <= j->p.max_frames; guard++) {
		const held_t *h = j->ring[j->head].present ? &j->ring[j->head] : NULL;
		int64_t target = target_delay_us(j), delay = current_delay_us(j);
		bool pause = h ? !h->speech : !j->in_talkspurt;
		bool spurt_start = h && h->speech && !j->in_talkspurt;
		bool continuous = !pause && !spurt_start && !j->spike &&
		                  j->next_due_us - j->boundary_us >= j->p.continuous_after_us &&
		                  j->next_due_us - j->last_step_us >= j->p.continuous_step_us;
		/* Hysteresis: see pps_jitter_params_t. Frames that would be late
		 * (the arrivals' own delay above D, or a spike) grow D at once. */
		bool prompt = j->spike || cover_delay_us(j) > (double)delay;
		bool grow = target - delay >
		            (prompt || j->p.hysteresis_us < f / 4 ? f / 4 : j->p.hysteresis_us);
		bool shrink = delay - target >= f;
		held_t *skipped;

		if (!(pause || spurt_start || continuous) || !(grow || (shrink && !spurt_start)))
			return 0;
		if (continuous)
			j->last_step_us = j->next_due_us;
		if (grow)
			return insert_slot(j, out);
		note_change(j);
		skipped = take_head(j);
		if (skipped) {
			fill(out, PPS_JITTER_SKIP, skipped->seq, skipped->capture_us,
			     j->next_due_us, skipped, skipped->speech);
			j->stats.skipped++;
			return 1;
		}
		j->stats.lost++;
		if (continuous)
			return 0; /* one step: the next frame plays in this slot */
	}
	return 0;
}

int
pps_jitter_pop(pps_jitter_t *j, int64_t now_us, pps_jitter_slot_t *out)
{
	const int64_t f = j ? j->p.frame_us : 0;
	int64_t due_us;
	held_t *h, *next;
	bool speech;

	if (out)
		memset(out, 0, sizeof(*out));
	if (!j || !out || !j->started || j->idle || !time_valid(now_us) || now_us < j->next_due_us)
		return 0;
	if (now_us - j->next_due_us > j->p.max_delay_us)
		/* Bounded catch-up: the slots the caller missed pass unplayed. */
		pass_slots(j, (uint64_t)((now_us - j->next_due_us) / f), &j->stats.expired);
	if (adjust(j, out))
		return 1;

	due_us = j->next_due_us;
	next = &j->ring[(j->head + 1) % j->p.max_frames];
	h = take_head(j);
	if (h) {
		fill(out, PPS_JITTER_PLAY, h->seq, h->capture_us, due_us, h, h->speech);
		/* A capture time off the timeline would make the figures say
		 * what the sender's garbage says: count the predicted one. */
		count_delay(j,
		            due_us - (h->fits ? h->capture_us : predicted_capture_us(j, h->seq)));
		speech = h->speech;
	} else if (next->present && next->seq == j->next_seq) {
		/* take_head moved next_seq on: @next is the frame after the missing one. */
		fill(out, PPS_JITTER_RECOVER, j->next_seq - 1,
		     predicted_capture_us(j, j->next_seq - 1), due_us, next, next->speech);
		j->stats.recovered++;
		j->stats.lost++;
		speech = next->speech;
	} else {
		fill(out, PPS_JITTER_CONCEAL, j->next_seq - 1,
		     predicted_capture_us(j, j->next_seq - 1), due_us, NULL, j->in_talkspurt);
		j->stats.concealed++;
		j->stats.lost++;
		speech = j->in_talkspurt;
	}
	if (speech && !j->in_talkspurt) {
		j->stats.talkspurts++;
		j->boundary_us = due_us;
	}
	if (!speech)
		j->boundary_us = due_us;
	if (speech && out->action != PPS_JITTER_CONCEAL)
		j->changed_in_pause = false;
	j->in_talkspurt = speech;
	j->next_due_us += f;

	if (out->action == PPS_JITTER_PLAY || j->held > 0) {
		j->empty_since_us = NO_TIME;
	} else {
		/* Nothing held: after idle_after_us of this, stop scheduling. */
		if (j->empty_since_us == NO_TIME)
			j->empty_since_us = due_us;
		if (j->next_due_us - j->empty_since_us >= j->p.idle_after_us)
			j->idle = true;
	}
	return 1;
}

void
pps_jitter_get_stats(const pps_jitter_t *j, pps_jitter_stats_t *s)
{
	*s = j->stats;
	s->playout_delay_mean_ms = j->stats.played ? j->delay_mean_us / 1000.0 : 0;
	s->playout_delay_std_ms =
	    j->stats.played ? sqrt(j->delay_m2 / (double)j->stats.played) / 1000.0 : 0;
	s->current_delay_us = j->started ? current_delay_us(j) : 0;
	s->target_delay_us = j->started ? target_delay_us(j) : 0;
	s->held = j->held;
	s->spike = j->spike;
}
