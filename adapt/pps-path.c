/* SPDX-License-Identifier: MIT */
/*
 * Path estimate of one client from its TCP_INFO readings, and the latency cap.
 *
 * Rate. While the path is calm, the estimate only rises: to the rate
 * acknowledged over the last half second, or to a new kernel delivery-rate
 * sample (tcp_rate.c; lower bounds of the path's rate, kept in a windowed
 * maximum over about ten round trips as BBR's bottleneck filter does). A live
 * stream is often application-limited - it sends what the encoder made - and
 * sending less than the path carries says nothing about the path, so it must
 * not pull the estimate down (a loop that followed it would spiral down with
 * every layer that encodes below its cap). When the path is not calm - the
 * queue grew past what the stream may add, or a packet was retransmitted - the
 * rate actually acknowledged is what the path gives the stream, and the
 * estimate and the maximum filter drop to it.
 *
 * Latency cap. In flight <= estimate * (5/4 * min RTT + queue target): alone
 * on a bottleneck the stream then adds at most about queue target + min RTT/4
 * of queueing, and the 5/4 lets the delivery rate (hence the estimate) grow
 * when capacity appears. A loss-based flow beside it keeps the queue full
 * whatever this stream does; capped, the stream would see its rate fall with
 * every RTT the others add and starve. So with the yielding policy a queue
 * that stays above what the cap could cause (its minimum over the last
 * second, as Copa tells its competitive mode from a queue that never empties),
 * or a retransmission while capped (the queue overflowed, which the cap alone
 * does not do unless the buffer is smaller than the target), lifts the cap,
 * and every PPS_PATH_RETEST_US (a quarter of it once the sender fell behind
 * its deadlines) the cap is tried again, at the rate that got through, until
 * what was in flight has drained: if the queue drains, it was the stream's
 * own.
 *
 * Tcp-friendly rate (rate_control tcp-friendly). The stream's own AIMD on the
 * losses TCP_INFO reports: the rate grows by ALPHA packets per RTT every RTT
 * and shrinks to BETA of itself once per round trip with a retransmission, the
 * rule that gives a loss-based TCP its share of a drop-tail queue. It starts
 * from the first estimate, never exceeds 1.5 times the most that was
 * acknowledged in half a second over the last FAIR_CREDIT_US (an
 * application-limited stream earns no credit) nor falls below two packets per
 * RTT. The credit is remembered for seconds, not half of one: a live stream
 * sends less for a while when its regulator cut a layer (it comes back at the
 * next IDR) or a picture is easy, and a ceiling that followed each dip pulled
 * the rate down to 1.5 times the dip, the encoder's targets with it, so the
 * stream never came back to its share (beside 20 cubic flows the rate sat at
 * exactly 1.5 times what was acknowledged). While others hold the queue (or always, under a
 * cap policy that cannot tell) the writer paces at it and it is the estimate,
 * so the encoder offers what this rate carries.
 */
#include "pps-adapt.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define BUCKET_US            100000
#define BUCKETS              24 /* 2.4 s of history */
#define ACKED_HISTORY        32
#define ACKED_SPACING_US     50000
#define ACKED_SPAN_US        500000
#define MIN_VALID_SPAN_US    300000
#define RETRANS_CONGESTED_US 250000
#define QUEUE_MIN_WINDOW_US  1000000
#define MIN_CAP_PKTS         4
#define TEST_MIN_US          200000
#define TEST_MAX_US          2000000
#define FAIR_MIN_PKTS        2
/* The tcp-friendly rate's ceiling remembers the acknowledged rate this long
 * (two GOPs of 2 s), in CREDIT_SLOTS slots. */
#define FAIR_CREDIT_US   4000000
#define CREDIT_SLOTS     8
#define CREDIT_SLOT_US   (FAIR_CREDIT_US / CREDIT_SLOTS)
#define FAIR_UNSENT_PKTS 2

const char *const pps_rate_control_names[] = {
    [PPS_RATE_CONTROL_CONGESTION] = "congestion",
    [PPS_RATE_CONTROL_TCP_FRIENDLY] = "tcp-friendly",
    [PPS_RATE_CONTROL_TCP_FRIENDLY + 1] = NULL,
};
_Static_assert(sizeof(pps_rate_control_names) / sizeof(pps_rate_control_names[0]) ==
                   PPS_RATE_CONTROL_TCP_FRIENDLY + 2,
               "a name for every pps_rate_control_t");

const char *const pps_latency_cap_names[] = {
    [PPS_LATENCY_CAP_OFF] = "off",
    [PPS_LATENCY_CAP_ALWAYS] = "always",
    [PPS_LATENCY_CAP_YIELDING] = "yielding",
    [PPS_LATENCY_CAP_YIELDING + 1] = NULL,
};
/* [transport] latency_cap's index is the enum value (config refers to this table). */
_Static_assert(sizeof(pps_latency_cap_names) / sizeof(pps_latency_cap_names[0]) ==
                   PPS_LATENCY_CAP_YIELDING + 2,
               "a name for every pps_latency_cap_policy_t");

/* Extreme (max or min) of values over the last few 100 ms buckets. */
typedef struct {
	int64_t start_us[BUCKETS];
	uint64_t value[BUCKETS];
	int head; /* newest bucket */
	bool used;
} window_t;

static void
window_add(window_t *w, int64_t now_us, uint64_t v, bool is_max)
{
	int64_t start = now_us - now_us % BUCKET_US;

	if (w->used && w->start_us[w->head] == start) {
		if (is_max ? v > w->value[w->head] : v < w->value[w->head])
			w->value[w->head] = v;
		return;
	}
	w->head = w->used ? (w->head + 1) % BUCKETS : 0;
	w->start_us[w->head] = start;
	w->value[w->head] = v;
	w->used = true;
}

/* Extreme over the buckets that started within @span_us before @now_us; @none if empty. */
static uint64_t
window_get(const window_t *w, int64_t now_us, int64_t span_us, bool is_max, uint64_t none)
{
	uint64_t best = none;
	bool any = false;

	if (!w->used)
		return none;
	for (int i = 0, b = w->head; i < BUCKETS; i++, b = (b + BUCKETS - 1) % BUCKETS) {
		if (now_us - w->start_us[b] > span_us || w->start_us[b] > now_us)
			break;
		if (!any || (is_max ? w->value[b] > best : w->value[b] < best))
			best = w->value[b];
		any = true;
	}
	return best;
}

static void
window_clamp(window_t *w, uint64_t ceiling)
{
	for (int i = 0; i < BUCKETS; i++)
		if (w->value[i] > ceiling)
			w->value[i] = ceiling;
}

struct pps_path {
	pps_path_params_t params;
	bool have_sample;
	int64_t first_us, last_us;
	pps_path_sample_t last;
	uint32_t first_retrans;
	int64_t last_retrans_us; /* when total_retrans last grew; 0 never */
	/* The seconds (now_us / 1 s) in which it grew, newest at
	 * [retrans_sec_head]; 0 unused. */
	int64_t retrans_sec[PPS_PATH_RETRANS_SECONDS + 1];
	int retrans_sec_head;
	window_t max_rate;
	window_t min_queue;
	struct {
		int64_t t_us;
		uint64_t bytes;
	} acked[ACKED_HISTORY];
	int acked_head, acked_count;
	uint64_t estimate_bps;
	uint64_t acked_bps;
	bool congested;
	pps_path_cap_state_t cap_state;
	int64_t cap_state_since_us;
	int64_t test_until_us;
	int64_t retest_us;     /* time in COMPETING before the next test */
	bool self_from_test;   /* SELF was entered by a test, not at the start */
	bool others_confirmed; /* a test failed since the state was last SELF */
	/* tcp-friendly rate */
	uint64_t fair_bps; /* 0 = not started */
	/* the most acked_bps per CREDIT_SLOT_US slot (slot number + 1; 0 unused) */
	int64_t credit_slot[CREDIT_SLOTS];
	uint64_t credit_bps[CREDIT_SLOTS];
	int64_t fair_last_us;
	int64_t fair_decrease_us;
	uint64_t loss_events;
	int64_t behind_since_us; /* first of the samples in a row that were behind; 0 none */
	bool behind_competing;   /* behind for a whole span since COMPETING began */
	uint64_t behind_events;
};

const char *
pps_path_cap_state_name(pps_path_cap_state_t state)
{
	switch (state) {
	case PPS_PATH_CAP_SELF:
		return "self";
	case PPS_PATH_CAP_COMPETING:
		return "competing";
	case PPS_PATH_CAP_TEST:
		return "test";
	case PPS_PATH_CAP_NONE:
	default:
		return "off";
	}
}

pps_path_t *
pps_path_new(const pps_path_params_t *params)
{
	pps_path_t *p;

	if (!params || params->queue_target_us < 0 ||
	    (unsigned)params->cap_policy > PPS_LATENCY_CAP_YIELDING ||
	    (unsigned)params->rate_control > PPS_RATE_CONTROL_TCP_FRIENDLY ||
	    params->pacing_gain_pct < 0 || params->pacing_gain_pct > 1000) {
		errno = EINVAL;
		return NULL;
	}
	p = calloc(1, sizeof(*p));
	if (!p) {
		errno = ENOMEM;
		return NULL;
	}
	p->params = *params;
	p->retest_us = PPS_PATH_RETEST_US;
	return p;
}

void
pps_path_free(pps_path_t *p)
{
	free(p);
}

static void
acked_add(pps_path_t *p, int64_t now_us, uint64_t bytes)
{
	int newest = (p->acked_head + p->acked_count - 1) % ACKED_HISTORY;

	if (p->acked_count && now_us - p->acked[newest].t_us < ACKED_SPACING_US)
		return;
	if (p->acked_count == ACKED_HISTORY) {
		p->acked_head = (p->acked_head + 1) % ACKED_HISTORY;
		p->acked_count--;
	}
	newest = (p->acked_head + p->acked_count) % ACKED_HISTORY;
	p->acked[newest].t_us = now_us;
	p->acked[newest].bytes = bytes;
	p->acked_count++;
}

/* Bytes acknowledged per second from the newest entry back to the first one
 * at least ACKED_SPAN_US older (or the oldest); 0 with less than 2 entries. */
static uint64_t
acked_rate_bps(const pps_path_t *p, int64_t now_us, uint64_t bytes_now, int64_t *span_out)
{
	int64_t span = 0;
	uint64_t bytes = 0;

	for (int i = p->acked_count - 1; i >= 0; i--) {
		int k = (p->acked_head + i) % ACKED_HISTORY;

		span = now_us - p->acked[k].t_us;
		bytes = bytes_now - p->acked[k].bytes;
		if (span >= ACKED_SPAN_US)
			break;
	}
	*span_out = span;
	if (span <= 0)
		return 0;
	return bytes * 8u * 1000000u / (uint64_t)span;
}

static uint64_t
rate_window_us(uint32_t min_rtt_us)
{
	uint64_t w = 10u * (uint64_t)min_rtt_us;

	return w < 500000 ? 500000 : w > 2000000 ? 2000000 : w;
}

/* Queueing the cap allows the stream itself: queue target + min RTT/4. */
static int64_t
own_queue_us(const pps_path_t *p)
{
	return p->params.queue_target_us + (int64_t)p->last.min_rtt_us / 4;
}

/* Queueing beyond own_queue_us() that is more than noise. */
static int64_t
queue_margin_us(const pps_path_t *p)
{
	return p->params.queue_target_us / 2 > 10000 ? p->params.queue_target_us / 2 : 10000;
}

/*
 * The cap for a moment, to see whether the queue drains: long enough for what
 * is in flight already to drain at the rate that got through (a capacity step
 * down leaves a congestion window of the faster path in flight: 45 packets
 * are 0.65 s at 0.8 Mbit/s), for the smoothed RTT to show it, and a few
 * minimum round trips; at most TEST_MAX_US. A test as long as the smoothed
 * RTT and two minimum ones failed there every time the queue had not
 * happened to be short when it began.
 */
static void
start_test(pps_path_t *p, int64_t now)
{
	int64_t len = 2 * (int64_t)p->last.srtt_us + 2 * (int64_t)p->last.min_rtt_us;

	if (p->acked_bps)
		len += (int64_t)((uint64_t)p->last.unacked_pkts * p->last.mss_bytes * 8u *
		                 1000000u / p->acked_bps);
	if (len < TEST_MIN_US)
		len = TEST_MIN_US;
	if (len > TEST_MAX_US)
		len = TEST_MAX_US;
	p->cap_state = PPS_PATH_CAP_TEST;
	p->cap_state_since_us = now;
	p->test_until_us = now + len;
	p->behind_competing = false;
}

/* A test failed, or the cap it restored did not last: test half as often. */
static void
retest_backoff(pps_path_t *p)
{
	p->retest_us =
	    p->retest_us * 2 > 8 * PPS_PATH_RETEST_US ? 8 * PPS_PATH_RETEST_US : p->retest_us * 2;
}

static void
update_cap_state(pps_path_t *p, int64_t now)
{
	int64_t allowed = own_queue_us(p);
	/* A queue this far above what the cap allows is somebody else's. */
	int64_t margin = queue_margin_us(p);
	int64_t window = 4 * (int64_t)p->last.min_rtt_us;
	uint64_t min_queue;

	if (window < QUEUE_MIN_WINDOW_US)
		window = QUEUE_MIN_WINDOW_US;
	if (window > (BUCKETS - 1) * BUCKET_US)
		window = (BUCKETS - 1) * BUCKET_US;
	min_queue = window_get(&p->min_queue, now, window, false, 0);
	switch (p->params.cap_policy) {
	case PPS_LATENCY_CAP_OFF:
		p->cap_state = PPS_PATH_CAP_NONE;
		return;
	case PPS_LATENCY_CAP_ALWAYS:
		p->cap_state = p->estimate_bps ? PPS_PATH_CAP_SELF : PPS_PATH_CAP_NONE;
		return;
	case PPS_LATENCY_CAP_YIELDING:
		break;
	}
	switch (p->cap_state) {
	case PPS_PATH_CAP_NONE:
		if (p->estimate_bps) {
			p->cap_state = PPS_PATH_CAP_SELF;
			p->cap_state_since_us = now;
			p->self_from_test = false;
			p->others_confirmed = false;
		}
		break;
	case PPS_PATH_CAP_SELF:
		/* Capped, the stream alone keeps the queue within the target: a
		 * queue that never drains below it, or a loss (the queue
		 * overflowed; the minimum RTT itself may include others' standing
		 * queue if they were there before this connection), means
		 * somebody else fills it. (A loss may also be the stream's own
		 * queue at a capacity step down; a test at once instead kept the
		 * stream capped at what an application-limited stream had
		 * acknowledged, beside cubic flows and under random loss alike,
		 * and it lost half of its share there.) */
		if ((now - p->cap_state_since_us >= window &&
		     (int64_t)min_queue > allowed + margin) ||
		    (p->last_retrans_us && p->last_retrans_us > p->cap_state_since_us)) {
			/* A cap that a test let back on and that did not last
			 * PPS_PATH_RETEST_US: the others are still there, test
			 * less often (twice as long each time, up to 8x). */
			if (p->self_from_test && now - p->cap_state_since_us < PPS_PATH_RETEST_US)
				retest_backoff(p);
			else
				p->retest_us = PPS_PATH_RETEST_US;
			p->cap_state = PPS_PATH_CAP_COMPETING;
			p->cap_state_since_us = now;
			p->behind_competing = false;
		}
		break;
	case PPS_PATH_CAP_COMPETING:
		/* Behind while competing: the queue that never drains may be
		 * the stream's own (a base beyond the path's rate), and the
		 * retest finds out; a quarter of its interval after the state
		 * began, which still backs off while tests fail beside others. */
		if (now - p->cap_state_since_us >=
		    (p->behind_competing ? p->retest_us / 4 : p->retest_us))
			start_test(p, now);
		break;
	case PPS_PATH_CAP_TEST: {
		int64_t queue = (int64_t)p->last.srtt_us - (int64_t)p->last.min_rtt_us;

		if (queue <= allowed + queue_margin_us(p)) {
			p->cap_state = PPS_PATH_CAP_SELF;
			p->cap_state_since_us = now;
			p->self_from_test = true;
			p->others_confirmed = false;
		} else if (now >= p->test_until_us) {
			retest_backoff(p);
			p->others_confirmed = true;
			p->cap_state = PPS_PATH_CAP_COMPETING;
			p->cap_state_since_us = now;
		}
		break;
	}
	}
}

/* The most acked_bps over the last FAIR_CREDIT_US, after adding this one. */
static uint64_t
credit_update(pps_path_t *p, int64_t now)
{
	int64_t slot = now / CREDIT_SLOT_US + 1;
	int i = (int)(slot % CREDIT_SLOTS);
	uint64_t best = 0;

	if (p->credit_slot[i] != slot) {
		p->credit_slot[i] = slot;
		p->credit_bps[i] = 0;
	}
	if (p->acked_bps > p->credit_bps[i])
		p->credit_bps[i] = p->acked_bps;
	for (int k = 0; k < CREDIT_SLOTS; k++)
		if (p->credit_slot[k] > slot - CREDIT_SLOTS && p->credit_slot[k] <= slot &&
		    p->credit_bps[k] > best)
			best = p->credit_bps[k];
	return best;
}

/* The AIMD of the tcp-friendly rate, after the estimate of this sample. */
static void
fair_update(pps_path_t *p, const pps_path_sample_t *s, bool new_loss)
{
	int64_t now = s->now_us;
	uint64_t srtt = s->srtt_us ? s->srtt_us : 100000;
	uint64_t mss_bits = (uint64_t)(s->mss_bytes ? s->mss_bytes : 1448) * 8u;
	uint64_t floor = FAIR_MIN_PKTS * mss_bits * 1000000u / srtt;
	/* Half as much again as what got through: an application-limited stream
	 * earns no credit, and alone on a path (after a loss at a capacity step
	 * marked it competing) the AIMD cannot run far past the capacity. */
	uint64_t ceiling = credit_update(p, now) * 3 / 2;

	if (!p->fair_bps) {
		if (!p->estimate_bps)
			return;
		p->fair_bps = p->estimate_bps;
		p->fair_last_us = now;
		return;
	}
	if (new_loss && (uint64_t)(now - p->fair_decrease_us) >= srtt) {
		p->fair_bps = p->fair_bps * PPS_PATH_FAIR_BETA_PCT / 100;
		p->fair_decrease_us = now;
		p->loss_events++;
	} else if (!new_loss) {
		/* d(rate)/dt = ALPHA packets per RTT per RTT */
		uint64_t dt = (uint64_t)(now - p->fair_last_us);

		if (dt > srtt)
			dt = srtt;
		p->fair_bps += PPS_PATH_FAIR_ALPHA_MILLI * mss_bits * dt * 1000u / (srtt * srtt);
	}
	p->fair_last_us = now;
	if (p->fair_bps > ceiling)
		p->fair_bps = ceiling;
	if (p->fair_bps < floor)
		p->fair_bps = floor;
}

/*
 * A sender that was behind (data past its deadline waiting) for a whole span
 * of the acknowledged rate had more to send than the path took all along:
 * what was acknowledged over that span is what the path gives the stream,
 * with or without others on it, and neither the estimate nor the
 * tcp-friendly rate may stay above it. Without this a stream alone after a
 * capacity step down (its loss there marked the path competing) kept a
 * tcp-friendly rate of 1.5 times what it had been acknowledged at the
 * higher capacity for seconds, the encoder sized its base to that, and the
 * base alone, never dropped, filled the link with a second of queue. Each
 * clamp needs a span of its own, so a sender held back by its own pacer (at
 * the tcp-friendly rate) loses a few percent per half second at most while
 * the encoder, told the lower rate, brings it back under.
 */
static void
behind_update(pps_path_t *p, const pps_path_sample_t *s, int64_t span)
{
	if (!s->behind) {
		p->behind_since_us = 0;
		return;
	}
	if (!p->behind_since_us) {
		p->behind_since_us = s->now_us;
		return;
	}
	/* A retransmission in the span: recovery, not the path's rate, may
	 * have held the acknowledgements back (the AIMD answers losses). */
	if (s->now_us - p->behind_since_us < span || span < ACKED_SPAN_US || !p->acked_bps ||
	    (p->last_retrans_us && s->now_us - p->last_retrans_us < span))
		return;
	if (p->estimate_bps > p->acked_bps) {
		p->estimate_bps = p->acked_bps;
		window_clamp(&p->max_rate, p->acked_bps);
	}
	if (p->fair_bps > p->acked_bps)
		p->fair_bps = p->acked_bps;
	p->behind_since_us = s->now_us;
	p->behind_events++;
	if (p->cap_state == PPS_PATH_CAP_COMPETING)
		p->behind_competing = true;
}

/* Keeps the second of @now among those with a retransmission. */
static void
note_retrans_second(pps_path_t *p, int64_t now)
{
	int64_t sec = now / 1000000 + 1; /* + 1: 0 marks an unused slot */

	if (p->retrans_sec[p->retrans_sec_head] == sec)
		return;
	p->retrans_sec_head = (p->retrans_sec_head + 1) % (PPS_PATH_RETRANS_SECONDS + 1);
	p->retrans_sec[p->retrans_sec_head] = sec;
}

/* The seconds with a retransmission among the current one and the
 * PPS_PATH_RETRANS_SECONDS before it, at @now. */
static uint32_t
retrans_seconds(const pps_path_t *p, int64_t now)
{
	int64_t sec = now / 1000000 + 1;
	uint32_t n = 0;

	for (int i = 0; i <= PPS_PATH_RETRANS_SECONDS; i++)
		if (p->retrans_sec[i] && p->retrans_sec[i] <= sec &&
		    p->retrans_sec[i] >= sec - PPS_PATH_RETRANS_SECONDS)
			n++;
	return n;
}

void
pps_path_add_sample(pps_path_t *p, const pps_path_sample_t *s)
{
	bool new_loss = false;
	int64_t now = s->now_us;
	int64_t span = 0;
	uint32_t queue_us;
	uint64_t max_rate;
	bool fresh;

	if (p->have_sample && now < p->last_us)
		return;
	if (!p->have_sample) {
		p->have_sample = true;
		p->first_us = now;
		p->first_retrans = s->total_retrans_pkts;
	} else if (s->total_retrans_pkts > p->last.total_retrans_pkts) {
		p->last_retrans_us = now;
		new_loss = true;
		note_retrans_second(p, now);
	}
	queue_us = s->srtt_us > s->min_rtt_us ? s->srtt_us - s->min_rtt_us : 0;
	window_add(&p->min_queue, now, queue_us, false);
	/* The kernel keeps reporting its last sample until a new one replaces
	 * it, and does not replace a network-limited sample with a lower
	 * application-limited one: only a changed value is a new sample. */
	fresh = s->delivery_rate_bps && s->delivery_rate_bps != p->last.delivery_rate_bps;
	if (fresh)
		window_add(&p->max_rate, now, s->delivery_rate_bps, true);
	p->last = *s;
	p->last_us = now;
	p->acked_bps = acked_rate_bps(p, now, s->bytes_acked, &span);
	acked_add(p, now, s->bytes_acked);

	p->congested = (int64_t)queue_us > own_queue_us(p) + queue_margin_us(p) ||
	               (p->last_retrans_us && now - p->last_retrans_us < RETRANS_CONGESTED_US);
	max_rate = window_get(&p->max_rate, now, (int64_t)rate_window_us(s->min_rtt_us), true, 0);
	if (now - p->first_us < MIN_VALID_SPAN_US || span < MIN_VALID_SPAN_US / 2) {
		p->estimate_bps = 0;
	} else if (p->congested && p->acked_bps) {
		/* The path gives no more than what got through; a fresh
		 * network-limited delivery sample says so within a round trip,
		 * the acknowledged rate within half a second. Forget maxima
		 * from before it filled up. */
		uint64_t got = p->acked_bps;

		if (fresh && !s->delivery_app_limited && s->delivery_rate_bps &&
		    s->delivery_rate_bps < got)
			got = s->delivery_rate_bps;
		if (got < p->estimate_bps || !p->estimate_bps) {
			p->estimate_bps = got;
			window_clamp(&p->max_rate, got);
		}
	} else {
		/* Calm: what got through, or a new delivery sample, can only
		 * raise the estimate. Sending less than the path carries
		 * (application-limited) is no evidence that it carries less. */
		if (max_rate > p->estimate_bps)
			p->estimate_bps = max_rate;
		if (p->acked_bps > p->estimate_bps)
			p->estimate_bps = p->acked_bps;
	}
	update_cap_state(p, now);
	if (p->cap_state == PPS_PATH_CAP_COMPETING && s->srtt_us && p->estimate_bps &&
	    s->unacked_pkts + 1 >= s->cwnd_pkts) {
		/* Competing with loss-based flows, the stream gets what its
		 * congestion window gets, cwnd per RTT, as long as it always has
		 * more to send than that; what it was acknowledged lags behind
		 * (application-limited gaps between windows keep cwnd from
		 * growing), and a loop that follows it sends less and less and
		 * starves. Only while the window is full: an unused window says
		 * nothing. */
		uint64_t cwnd_bps =
		    (uint64_t)s->cwnd_pkts * s->mss_bytes * 8u * 1000000u / s->srtt_us;

		if (cwnd_bps > p->estimate_bps)
			p->estimate_bps = cwnd_bps;
	}
	if (p->params.rate_control == PPS_RATE_CONTROL_TCP_FRIENDLY)
		fair_update(p, s, new_loss);
	if (p->estimate_bps)
		behind_update(p, s, span);
}

/*
 * Whether the tcp-friendly rate is in force: while others hold the queue
 * (yielding cap: state competing), or always under the other cap policies,
 * which cannot tell. Alone on a path there is nobody to share with: the path
 * estimate and the latency cap decide, and a pacing cap would only spread the
 * stream's bursts (a window, an IDR) over more time than the link needs.
 */
static bool
fair_in_force(const pps_path_t *p)
{
	if (!p->fair_bps)
		return false;
	return p->params.cap_policy != PPS_LATENCY_CAP_YIELDING ||
	       p->cap_state == PPS_PATH_CAP_COMPETING;
}

/*
 * The estimate the stream may use: while the tcp-friendly rate is in force,
 * that rate. There the path's own estimate falls to what was acknowledged,
 * which an application-limited stream keeps low (the cwnd rule above lifts it
 * only for a window that stays full), and the AIMD already is the share a
 * loss-based flow would take.
 */
static uint64_t
usable_bps(const pps_path_t *p)
{
	return fair_in_force(p) ? p->fair_bps : p->estimate_bps;
}

/* The tcp-friendly rate in force, 0 when none is. */
static uint64_t
fair_rate_bps(const pps_path_t *p)
{
	return fair_in_force(p) ? p->fair_bps : 0;
}

/*
 * The pacing rate: the tcp-friendly rate times the pacing gain. The average
 * stays at the tcp-friendly rate by the window (pps_path_inflight_cap_pkts:
 * that rate times a round trip, plus a few packets); the gain only shortens
 * the burst a picture leaves in, which at a gain of 1 spreads over most of a
 * frame time when the stream sends near its rate.
 */
uint64_t
pps_path_rate_cap_bps(const pps_path_t *p)
{
	int gain = p->params.pacing_gain_pct > 100 ? p->params.pacing_gain_pct : 100;

	return fair_rate_bps(p) * (uint64_t)gain / 100u;
}

bool
pps_path_shared(const pps_path_t *p)
{
	return p->params.cap_policy == PPS_LATENCY_CAP_YIELDING &&
	       (p->cap_state == PPS_PATH_CAP_COMPETING || p->cap_state == PPS_PATH_CAP_TEST);
}

void
pps_path_get_estimate(const pps_path_t *p, pps_path_estimate_t *out)
{
	const pps_path_sample_t *s = &p->last;

	memset(out, 0, sizeof(*out));
	if (!p->have_sample)
		return;
	out->valid = p->estimate_bps > 0;
	out->estimate_bps = usable_bps(p);
	out->fair_rate_bps = fair_rate_bps(p);
	out->loss_events = p->loss_events;
	out->behind_events = p->behind_events;
	out->delivery_rate_bps = s->delivery_rate_bps;
	out->acked_bps = p->acked_bps;
	out->bytes_acked = s->bytes_acked;
	out->inflight_bytes = (uint64_t)s->unacked_pkts * s->mss_bytes;
	out->mss_bytes = s->mss_bytes;
	out->min_rtt_us = s->min_rtt_us;
	out->srtt_us = s->srtt_us;
	out->queue_delay_us = s->srtt_us > s->min_rtt_us ? s->srtt_us - s->min_rtt_us : 0;
	out->retrans_pkts = s->total_retrans_pkts - p->first_retrans;
	out->retrans_seconds = retrans_seconds(p, p->last_us);
	out->lost_pkts = s->lost_pkts;
	out->app_limited = s->delivery_app_limited;
	out->congested = p->congested;
	out->cwnd_pkts = s->cwnd_pkts;
	out->inflight_cap_pkts = pps_path_inflight_cap_pkts(p);
	out->cap_state = p->cap_state;
	out->others_confirmed = p->others_confirmed;
}

uint32_t
pps_path_inflight_cap_pkts(const pps_path_t *p)
{
	uint64_t bytes, pkts, cap = 0;
	uint32_t mss = p->last.mss_bytes ? p->last.mss_bytes : 1448;

	if ((p->cap_state == PPS_PATH_CAP_SELF || p->cap_state == PPS_PATH_CAP_TEST) &&
	    p->estimate_bps) {
		uint64_t rate = usable_bps(p);

		/* A test caps at what got through, if that is less: the estimate
		 * while competing was lifted to the congestion window's rate, and a
		 * cap at it keeps a queue of the stream's own from draining, so a
		 * stream alone again (after a loss at a capacity step) failed its
		 * tests and kept the competing rate for seconds. */
		if (p->cap_state == PPS_PATH_CAP_TEST && p->acked_bps && p->acked_bps < rate)
			rate = p->acked_bps;
		/* rate * (5/4 min RTT + queue target), in bytes */
		bytes =
		    rate / 8u *
		    (uint64_t)(5 * (int64_t)p->last.min_rtt_us / 4 + p->params.queue_target_us) /
		    1000000u;
		cap = (bytes + mss - 1) / mss;
	}
	if (fair_in_force(p) && p->last.srtt_us) {
		/* Paced at the tcp-friendly rate, rate * srtt is in flight; what
		 * the congestion window would let pile up unsent behind the pacer
		 * is a queue in the sender: a few packets more, no further. */
		/* srtt, but no more than min RTT + twice the queue target: srtt
		 * that grows with the stream's own queue must not let it grow. */
		uint64_t rtt = p->last.srtt_us;
		uint64_t most =
		    (uint64_t)p->last.min_rtt_us + 2 * (uint64_t)p->params.queue_target_us;

		if (p->last.min_rtt_us && rtt > most)
			rtt = most;
		bytes = p->fair_bps / 8u * rtt / 1000000u;
		pkts = (bytes + mss - 1) / mss + FAIR_UNSENT_PKTS;
		if (!cap || pkts < cap)
			cap = pkts;
	}
	if (!cap)
		return 0;
	if (cap < MIN_CAP_PKTS)
		cap = MIN_CAP_PKTS;
	return cap > UINT32_MAX ? UINT32_MAX : (uint32_t)cap;
}
