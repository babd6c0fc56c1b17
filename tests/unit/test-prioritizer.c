/* SPDX-License-Identifier: MIT */
/* The PPS core with a fake clock: windows, priority order, and the progress
 * regulator's rules (deadlines, decodability, MSS, packing, bounds). */
#include "pps-prioritizer.h"
#include "pps-synth.h"
#include "pps-test.h"

#include <errno.h>
#include <string.h>

#define FRAME_US    33333
#define MAX_WINDOWS 256

typedef struct {
	pps_window_t *windows[MAX_WINDOWS];
	size_t n;
	unsigned grown; /* grow_cb calls */
} window_list_t;

static void
collect_window_cb(pps_window_t *window, void *user)
{
	window_list_t *list = user;

	REQUIRE(list->n < MAX_WINDOWS);
	list->windows[list->n++] = window;
}

static void
add_adu_cb(pps_adu_t *adu, void *user)
{
	CHECK_EQ_INT(pps_windower_add(user, adu), 0);
}

/* Runs the synthetic stream for @frames frames into windows. */
static void
make_windows(window_list_t *list, unsigned frames, unsigned window_frames, unsigned t_layers,
             unsigned q_layers, unsigned gop, pps_priority_policy_t policy, uint32_t seed,
             double scale)
{
	pps_synth_params_t sp = {.fps = 30,
	                         .window_frames = window_frames,
	                         .temporal_layers = t_layers,
	                         .quality_layers = q_layers,
	                         .gop_frames = gop,
	                         .seed = seed,
	                         .size_scale = scale};
	pps_synth_t *synth = pps_synth_new(&sp);
	pps_windower_t *wr = pps_windower_new(window_frames, policy, collect_window_cb, list);

	REQUIRE(synth && wr);
	list->n = 0;
	for (uint32_t f = 0; f < frames; f++) {
		int64_t done =
		    pps_synth_frame(synth, f, 1000000 + (int64_t)f * FRAME_US, add_adu_cb, wr);
		if (done >= 0)
			CHECK_EQ_INT(pps_windower_frames_done(wr, (uint32_t)done), 0);
	}
	pps_windower_flush(wr);
	pps_windower_free(wr);
	pps_synth_free(synth);
}

static void
free_windows(window_list_t *list)
{
	for (size_t i = 0; i < list->n; i++)
		pps_window_unref(list->windows[i]);
	list->n = 0;
}

static void
test_policy_names(void)
{
	pps_priority_policy_t policy;

	for (int p = 0; p < 3; p++)
		CHECK(pps_priority_policy_from_name(pps_priority_policy_name(p), &policy) == 0 &&
		      (int)policy == p);
	CHECK_EQ_INT(pps_priority_policy_from_name("fastest", &policy), -EINVAL);
}

static void
test_window_index(void)
{
	CHECK_EQ_INT(pps_window_index_of_frame(0, 2), 0);
	CHECK_EQ_INT(pps_window_index_of_frame(1, 2), 1);
	CHECK_EQ_INT(pps_window_index_of_frame(2, 2), 1);
	CHECK_EQ_INT(pps_window_index_of_frame(3, 2), 2);
	CHECK_EQ_INT(pps_window_index_of_frame(4, 4), 1);
	CHECK_EQ_INT(pps_window_index_of_frame(5, 4), 2);
	CHECK_EQ_INT(pps_window_index_of_frame(7, 1), 7);
}

/* Windows close on frames_done without waiting for the next window, hold
 * their frames, and every ADU of the window is in it. */
static void
test_windower(void)
{
	window_list_t list;

	make_windows(&list, 61, 4, 3, 2, 60, PPS_PRIORITY_TEMPORAL_FIRST, 1, 1.0);
	/* Frames 0..60: window 0 = {0}, windows 1..15 = 4 frames each. */
	CHECK_EQ_INT(list.n, 16);
	CHECK_EQ_INT(pps_window_frames(list.windows[0]), 1);
	CHECK_EQ_INT(pps_window_adu_count(list.windows[0]), 2);
	for (size_t i = 1; i < list.n; i++) {
		const pps_window_t *w = list.windows[i];
		size_t bytes = 0;

		CHECK_EQ_INT(pps_window_id(w), i);
		CHECK_EQ_INT(pps_window_frames(w), 4);
		CHECK_EQ_INT(pps_window_adu_count(w), 8);
		CHECK_EQ_INT(pps_window_first_capture_us(w),
		             1000000 + (int64_t)((i - 1) * 4 + 1) * FRAME_US);
		for (size_t a = 0; a < pps_window_adu_count(w); a++) {
			const pps_adu_info_t *info = pps_adu_info(pps_window_adu(w, a));

			CHECK_EQ_INT(pps_window_index_of_frame(info->frame_index, 4), i);
			bytes += pps_adu_size(pps_window_adu(w, a));
		}
		CHECK_EQ_INT(pps_window_bytes(w), bytes);
	}
	free_windows(&list);
}

/* A relay's window: rebuilt from the ADUs in any order, the same send order;
 * what did not arrive stays announced; ids out of range are refused. */
static void
test_window_relayed(void)
{
	window_list_t list;

	make_windows(&list, 21, 4, 3, 2, 60, PPS_PRIORITY_BALANCED, 3, 1.0);
	for (size_t i = 1; i < list.n; i++) {
		const pps_window_t *w = list.windows[i];
		size_t n = pps_window_adu_count(w);
		pps_adu_t *adus[64];
		pps_window_t *r;

		REQUIRE(n <= 64 && n > 2);
		for (size_t a = 0; a < n; a++) /* reversed send order */
			adus[a] = pps_adu_ref((pps_adu_t *)pps_window_adu(w, n - 1 - a));
		r = pps_window_new_relayed(pps_window_id(w), pps_window_first_capture_us(w),
		                           pps_window_frames(w), pps_window_first_adu_id(w), n,
		                           adus, n, PPS_PRIORITY_BALANCED);
		REQUIRE(r);
		CHECK_EQ_INT(pps_window_adu_count(r), n);
		CHECK_EQ_INT(pps_window_bytes(r), pps_window_bytes(w));
		CHECK(!pps_window_is_open(r));
		for (size_t a = 0; a < n; a++) {
			CHECK(pps_window_adu(r, a) == pps_window_adu(w, a));
			CHECK_EQ_INT(pps_window_adu_due_capture_us(r, a),
			             pps_window_adu_due_capture_us(w, a));
		}
		pps_window_unref(r);
		/* The last ADU in send order never came: still announced. */
		for (size_t a = 0; a + 1 < n; a++)
			adus[a] = pps_adu_ref((pps_adu_t *)pps_window_adu(w, a));
		r = pps_window_new_relayed(pps_window_id(w), pps_window_first_capture_us(w),
		                           pps_window_frames(w), pps_window_first_adu_id(w), n,
		                           adus, n - 1, PPS_PRIORITY_BALANCED);
		REQUIRE(r);
		CHECK_EQ_INT(pps_window_adu_count(r), n - 1);
		CHECK_EQ_INT(pps_window_adu_total(r), n);
		pps_window_unref(r);
		/* An id outside the announced range, or twice: refused, refs taken. */
		adus[0] = pps_adu_ref((pps_adu_t *)pps_window_adu(w, 0));
		CHECK(!pps_window_new_relayed(pps_window_id(w), 0, 1, pps_adu_info(adus[0])->id + 1,
		                              4, adus, 1, PPS_PRIORITY_BALANCED));
		CHECK_EQ_INT(errno, EINVAL);
		adus[0] = pps_adu_ref((pps_adu_t *)pps_window_adu(w, 0));
		adus[1] = pps_adu_ref((pps_adu_t *)pps_window_adu(w, 0));
		CHECK(!pps_window_new_relayed(pps_window_id(w), 0, 1, pps_window_first_adu_id(w), n,
		                              adus, 2, PPS_PRIORITY_BALANCED));
	}
	free_windows(&list);
}

/* The relay's cut-through window: ADUs join in the publisher's send order as
 * they come; the send order, sizes and per-ADU due times end up the
 * publisher's; a short window keeps announcing what never came. */
static void
test_window_relayed_open(void)
{
	window_list_t list;

	make_windows(&list, 21, 4, 3, 2, 60, PPS_PRIORITY_BALANCED, 3, 1.0);
	for (size_t i = 1; i < list.n; i++) {
		const pps_window_t *w = list.windows[i];
		size_t n = pps_window_adu_count(w);
		pps_window_t *r = pps_window_new_relayed_open(
		    pps_window_id(w), pps_window_first_capture_us(w), pps_window_frames(w),
		    pps_window_first_adu_id(w), n, pps_window_bytes(w));

		REQUIRE(r);
		CHECK(pps_window_is_open(r));
		CHECK_EQ_INT(pps_window_adu_count(r), 0);
		CHECK_EQ_INT(pps_window_bytes_bound(r), pps_window_bytes(w));
		for (size_t a = 0; a < n; a++) {
			CHECK_EQ_INT(pps_window_relayed_add(
			                 r, pps_adu_ref((pps_adu_t *)pps_window_adu(w, a))),
			             0);
			CHECK_EQ_INT(pps_window_adu_count(r), a + 1);
			CHECK(pps_window_is_open(r) == (a + 1 < n));
		}
		CHECK_EQ_INT(pps_window_bytes(r), pps_window_bytes(w));
		for (size_t a = 0; a < n; a++) {
			CHECK(pps_window_adu(r, a) == pps_window_adu(w, a));
			CHECK_EQ_INT(pps_window_adu_due_capture_us(r, a),
			             pps_window_adu_due_capture_us(w, a));
		}
		/* Closed: nothing more joins. */
		CHECK_EQ_INT(
		    pps_window_relayed_add(r, pps_adu_ref((pps_adu_t *)pps_window_adu(w, 0))),
		    -EINVAL);
		pps_window_unref(r);

		/* The last in send order never comes: closed short, still announced;
		 * an ADU twice or out of the ids is refused. */
		r = pps_window_new_relayed_open(pps_window_id(w), pps_window_first_capture_us(w),
		                                pps_window_frames(w), pps_window_first_adu_id(w), n,
		                                pps_window_bytes(w));
		REQUIRE(r);
		for (size_t a = 0; a + 1 < n; a++)
			CHECK_EQ_INT(pps_window_relayed_add(
			                 r, pps_adu_ref((pps_adu_t *)pps_window_adu(w, a))),
			             0);
		CHECK_EQ_INT(
		    pps_window_relayed_add(r, pps_adu_ref((pps_adu_t *)pps_window_adu(w, 0))),
		    -EINVAL);
		CHECK(pps_window_is_open(r));
		pps_window_relayed_close(r);
		CHECK(!pps_window_is_open(r));
		CHECK_EQ_INT(pps_window_adu_count(r), n - 1);
		CHECK_EQ_INT(pps_window_adu_total(r), n);
		pps_window_unref(r);
	}
	{
		pps_window_t *r = pps_window_new_relayed_open(7, 0, 2, 100, 4, 1000);
		const pps_window_t *w = list.windows[1];

		REQUIRE(r);
		CHECK_EQ_INT(
		    pps_window_relayed_add(r, pps_adu_ref((pps_adu_t *)pps_window_adu(w, 0))),
		    -EINVAL);
		pps_window_unref(r);
		CHECK(!pps_window_new_relayed_open(7, 0, 2, 100, 0, 1000));
		CHECK(!pps_window_new_relayed_open(7, 0, 0, 100, 4, 1000));
		CHECK(!pps_window_new_relayed_open(7, 0, 2, 100, PPS_WINDOW_MAX_ADUS + 1, 1000));
	}
	free_windows(&list);
}

static bool
order_respects_deps(const pps_window_t *w)
{
	size_t n = pps_window_adu_count(w);

	for (size_t i = 0; i < n; i++) {
		const pps_adu_info_t *info = pps_adu_info(pps_window_adu(w, i));

		/* Nothing at or after position i may be a dependency of i. */
		for (size_t j = i; j < n; j++) {
			uint32_t id = pps_adu_info(pps_window_adu(w, j))->id;

			for (unsigned d = 0; d < info->dep_count; d++) {
				if (info->deps[d] == id)
					return false;
			}
		}
	}
	return true;
}

/* Property: over random windows and every policy, no ADU outranks an ADU it
 * depends on. Random windows come from the synthetic GOP with random layer
 * counts and windows, and from random dependency graphs whose edges point to
 * lower-or-equal layers, as the codec's do. */
static void
test_priority_property(void)
{
	uint32_t rng = 12345;

	for (int round = 0; round < 60; round++) {
		unsigned wf = (unsigned[]){1, 2, 4, 8}[round % 4];
		window_list_t list;

		make_windows(&list, 40, wf, 1 + round % 3, 1 + (round / 3) % 3, 8 * wf,
		             (pps_priority_policy_t)(round % 3), (uint32_t)round + 1, 1.0);
		for (size_t i = 0; i < list.n; i++)
			CHECK(order_respects_deps(list.windows[i]));
		free_windows(&list);
	}
	for (int round = 0; round < 500; round++) {
		pps_adu_t *adus[40];
		size_t n = 2 + round % 38;

		for (size_t i = 0; i < n; i++) {
			pps_adu_info_t info;
			uint8_t byte = 0;

			memset(&info, 0, sizeof(info));
			rng = rng * 1103515245u + 12345u;
			info.id = (uint32_t)i;
			info.frame_index = (uint32_t)(rng >> 8) % 16;
			info.temporal_layer = (uint8_t)((rng >> 16) % 3);
			info.quality_layer = (uint8_t)((rng >> 20) % 3);
			/* Dependencies: earlier ADUs of lower-or-equal layers. */
			for (size_t j = 0; j < i && info.dep_count < PPS_ADU_MAX_DEPS; j++) {
				const pps_adu_info_t *d = pps_adu_info(adus[j]);

				rng = rng * 1103515245u + 12345u;
				if (d->temporal_layer <= info.temporal_layer &&
				    d->quality_layer <= info.quality_layer && (rng >> 16) % 3 == 0)
					info.deps[info.dep_count++] = d->id;
			}
			adus[i] = pps_adu_new(&info, &byte, 1);
			REQUIRE(adus[i]);
		}
		CHECK_EQ_INT(pps_priority_sort(adus, n, (pps_priority_policy_t)(round % 3)), 0);
		for (size_t i = 0; i < n; i++) {
			const pps_adu_info_t *info = pps_adu_info(adus[i]);

			for (size_t j = i; j < n; j++)
				CHECK(!pps_adu_depends_on(adus[i], pps_adu_info(adus[j])->id));
			(void)info;
		}
		for (size_t i = 0; i < n; i++)
			pps_adu_unref(adus[i]);
	}
}

/* Policies order layers as their names say, and drops within one layer are
 * spread evenly in time. */
static void
test_priority_policies(void)
{
	window_list_t list;
	const pps_window_t *w;

	/* Window of 8 frames, 1 B frame per mini-GOP: b frames at 1,3,5,7. */
	make_windows(&list, 9, 8, 2, 2, 64, PPS_PRIORITY_TEMPORAL_FIRST, 3, 1.0);
	REQUIRE(list.n == 2);
	w = list.windows[1];
	REQUIRE(pps_window_adu_count(w) == 16);
	{
		/* temporal-first: all base quality (t0 then t1), then enhancement. */
		unsigned expect_q[16] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1};
		uint32_t b_frames[4];
		size_t nb = 0;

		for (size_t i = 0; i < 16; i++) {
			const pps_adu_info_t *info = pps_adu_info(pps_window_adu(w, i));

			CHECK_EQ_INT(info->quality_layer, expect_q[i]);
			if (info->quality_layer == 0 && info->temporal_layer == 1)
				b_frames[nb++] = info->frame_index;
		}
		REQUIRE(nb == 4);
		/* Even spread: the first half of the b frames is every other one. */
		CHECK_EQ_INT(b_frames[0], 1);
		CHECK_EQ_INT(b_frames[1], 5);
		CHECK_EQ_INT(b_frames[2], 3);
		CHECK_EQ_INT(b_frames[3], 7);
		/* P chain in decode order: anchors 2,4,6,8 come first. */
		for (size_t i = 0; i < 4; i++)
			CHECK_EQ_INT(pps_adu_info(pps_window_adu(w, i))->frame_index, 2 + 2 * i);
	}
	free_windows(&list);

	make_windows(&list, 9, 8, 2, 2, 64, PPS_PRIORITY_QUALITY_FIRST, 3, 1.0);
	w = list.windows[1];
	/* quality-first: all temporal layer 0 (both qualities) before any b. */
	for (size_t i = 0; i < 16; i++)
		CHECK_EQ_INT(pps_adu_info(pps_window_adu(w, i))->temporal_layer, i < 8 ? 0 : 1);
	free_windows(&list);

	make_windows(&list, 9, 8, 2, 2, 64, PPS_PRIORITY_BALANCED, 3, 1.0);
	w = list.windows[1];
	/* balanced: t0q0 first, t1q1 last, the two mixed classes between. */
	for (size_t i = 0; i < 4; i++) {
		const pps_adu_info_t *first = pps_adu_info(pps_window_adu(w, i));
		const pps_adu_info_t *last = pps_adu_info(pps_window_adu(w, 12 + i));

		CHECK(first->temporal_layer == 0 && first->quality_layer == 0);
		CHECK(last->temporal_layer == 1 && last->quality_layer == 1);
	}
	free_windows(&list);
}

/* ---- scheduler --------------------------------------------------------- */

typedef struct {
	uint8_t *data[4096];
	uint32_t size[4096];
	uint32_t got[4096];
	unsigned begins, ends, fragments, dropped_windows;
	pps_wire_window_end_t last_end;
	pps_wire_window_begin_t last_begin;
	uint32_t last_window;
	bool in_window;
} receiver_t;

static void
receiver_free(receiver_t *r)
{
	for (size_t i = 0; i < 4096; i++)
		free(r->data[i]);
}

/* Parses one packet: it must be whole records, and fragments must belong to
 * the open window. */
static void
receive_packet(receiver_t *rx, const uint8_t *pkt, size_t len, int64_t now_us)
{
	pps_wire_parser_t *p = pps_wire_parser_new(PPS_WIRE_MAX_RECORD_BYTES);
	pps_wire_record_t r;
	const uint8_t *data = pkt;
	int ret;

	REQUIRE(p);
	while ((ret = pps_wire_parser_next(p, &data, &len, &r)) == 0) {
		switch (r.kind) {
		case PPS_WIRE_WINDOW_BEGIN:
			CHECK(!rx->in_window);
			rx->in_window = true;
			rx->last_window = r.u.window_begin.window_id;
			rx->last_begin = r.u.window_begin;
			rx->begins++;
			/* Nothing of a window goes out at or after its deadline. */
			CHECK(now_us < r.u.window_begin.deadline_us);
			break;
		case PPS_WIRE_ADU_FRAGMENT: {
			const pps_wire_adu_fragment_t *f = &r.u.adu_fragment;
			uint32_t id = f->adu_id % 4096;

			CHECK(rx->in_window && f->window_id == rx->last_window);
			if (!rx->data[id]) {
				rx->data[id] = calloc(1, f->total_bytes);
				rx->size[id] = f->total_bytes;
				rx->got[id] = 0;
			}
			CHECK(f->offset == rx->got[id]); /* fragments in order */
			memcpy(rx->data[id] + f->offset, f->payload, f->payload_len);
			rx->got[id] += f->payload_len;
			rx->fragments++;
			break;
		}
		case PPS_WIRE_WINDOW_END:
			if (r.u.window_end.flags & PPS_WIRE_WINDOW_END_DROPPED)
				rx->dropped_windows++;
			else
				CHECK(rx->in_window && r.u.window_end.window_id == rx->last_window);
			rx->in_window = false;
			rx->last_end = r.u.window_end;
			rx->ends++;
			break;
		default:
			break;
		}
	}
	CHECK_EQ_INT(ret, -EAGAIN);
	CHECK_EQ_INT(pps_wire_parser_pending(p), 0); /* no record straddles packets */
	pps_wire_parser_free(p);
}

/* Checks a fully received ADU's bytes against the synthetic pattern. */
static bool
adu_intact(const receiver_t *rx, uint32_t adu_id)
{
	uint32_t id = adu_id % 4096;

	if (!rx->data[id] || rx->got[id] != rx->size[id])
		return false;
	for (uint32_t i = 0; i < rx->size[id]; i++) {
		if (rx->data[id][i] != (uint8_t)(adu_id * 31 + i))
			return false;
	}
	return true;
}

static pps_sched_t *
new_sched(int64_t budget_us, unsigned max_windows)
{
	pps_sched_params_t params = {.latency_budget_us = budget_us, .max_windows = max_windows};
	pps_sched_t *s = pps_sched_new(&params);

	REQUIRE(s);
	return s;
}

/* Drains everything with unlimited time: every window complete, packets at
 * most MSS, a push at each window end. */
static void
test_sched_complete(void)
{
	window_list_t list;
	pps_sched_t *s = new_sched(1000000, 64);
	receiver_t rx;
	uint8_t buf[1500];
	size_t len;
	bool push;
	unsigned pushes = 0, packets = 0;
	pps_sched_stats_t st;

	memset(&rx, 0, sizeof(rx));
	make_windows(&list, 21, 4, 3, 2, 20, PPS_PRIORITY_TEMPORAL_FIRST, 7, 1.0);
	for (size_t i = 0; i < list.n; i++)
		pps_sched_push_window(s, list.windows[i]);
	while (pps_sched_next_packet(s, 1000000, 1448, buf, &len, &push) == 1) {
		CHECK(len <= 1448);
		receive_packet(&rx, buf, len, 1000000);
		pushes += push;
		packets++;
		if (push)
			CHECK(!rx.in_window);
	}
	CHECK(!pps_sched_has_data(s));
	CHECK_EQ_INT(rx.begins, list.n);
	CHECK_EQ_INT(rx.ends, list.n);
	CHECK_EQ_INT(pushes, list.n);
	pps_sched_get_stats(s, &st);
	CHECK_EQ_INT(st.windows_complete, list.n);
	CHECK_EQ_INT(st.windows_dropped + st.windows_partial, 0);
	CHECK_EQ_INT(st.packets, packets);
	for (size_t i = 0; i < list.n; i++) {
		for (size_t a = 0; a < pps_window_adu_count(list.windows[i]); a++)
			CHECK(
			    adu_intact(&rx, pps_adu_info(pps_window_adu(list.windows[i], a))->id));
	}
	/* Packing: full packets except at window ends. */
	CHECK(st.packet_bytes > (uint64_t)(packets - pushes) * (1448 - 200));
	free_windows(&list);
	pps_sched_free(s);
	receiver_free(&rx);
}

/* A copy at rest: its first windows go as lone dropped WINDOW_ENDs, counted
 * as rested only, and the windows after them are sent whole although their
 * ADUs depend on the rested ones (the client has those from its own
 * connection): without that they would wait for the next IDR. */
static void
test_sched_rest(void)
{
	window_list_t list;
	pps_sched_t *s = new_sched(1000000, 64);
	receiver_t rx;
	uint8_t buf[1500];
	size_t len;
	bool push;
	pps_sched_stats_t st;

	memset(&rx, 0, sizeof(rx));
	make_windows(&list, 21, 4, 3, 2, 20, PPS_PRIORITY_TEMPORAL_FIRST, 7, 1.0);
	REQUIRE(list.n >= 4);
	pps_sched_rest_window(s, list.windows[0]);
	pps_sched_rest_window(s, list.windows[1]);
	while (pps_sched_next_packet(s, 1000000, 1448, buf, &len, &push) == 1)
		receive_packet(&rx, buf, len, 1000000);
	CHECK_EQ_INT(rx.last_end.window_id, pps_window_id(list.windows[1]));
	CHECK_EQ_INT(rx.last_end.flags, PPS_WIRE_WINDOW_END_DROPPED | PPS_WIRE_WINDOW_END_RESTED);
	for (size_t i = 2; i < list.n; i++)
		pps_sched_push_window(s, list.windows[i]);
	while (pps_sched_next_packet(s, 1000000, 1448, buf, &len, &push) == 1)
		receive_packet(&rx, buf, len, 1000000);
	CHECK_EQ_INT(rx.begins, list.n - 2);
	CHECK_EQ_INT(rx.ends, list.n);
	CHECK_EQ_INT(rx.dropped_windows, 2);
	pps_sched_get_stats(s, &st);
	CHECK_EQ_INT(st.windows_rested, 2);
	CHECK_EQ_INT(st.windows_complete, list.n - 2);
	CHECK_EQ_INT(st.windows_dropped + st.windows_partial + st.adus_undecodable, 0);
	for (size_t i = 0; i < 2; i++)
		for (size_t a = 0; a < pps_window_adu_count(list.windows[i]); a++)
			CHECK(!rx.got[pps_adu_info(pps_window_adu(list.windows[i], a))->id % 4096]);
	for (size_t i = 2; i < list.n; i++)
		for (size_t a = 0; a < pps_window_adu_count(list.windows[i]); a++)
			CHECK(
			    adu_intact(&rx, pps_adu_info(pps_window_adu(list.windows[i], a))->id));
	free_windows(&list);
	pps_sched_free(s);
	receiver_free(&rx);
}

/* How long pictures wait in the sender: the oldest window with ADUs unsent,
 * then the next one once the first is sent, then none. */
static void
test_sched_unsent_since(void)
{
	window_list_t list;
	pps_sched_t *s = new_sched(1000000, 64);
	uint8_t buf[1500];
	size_t len, first_adus;
	bool push;
	int r;

	make_windows(&list, 5, 2, 1, 2, 60, PPS_PRIORITY_TEMPORAL_FIRST, 3, 1.0);
	REQUIRE(list.n >= 3);
	CHECK(pps_sched_unsent_since_us(s) == INT64_MAX);
	for (size_t i = 0; i < list.n; i++)
		pps_sched_push_window(s, list.windows[i]);
	CHECK(pps_sched_unsent_since_us(s) == pps_window_first_capture_us(list.windows[0]));
	/* Send the first window's ADUs: up to its last fragment it is the
	 * oldest unsent, and after it the second window is. */
	first_adus = pps_window_adu_count(list.windows[0]);
	REQUIRE(first_adus > 0);
	while ((r = pps_sched_next_packet(s, 1000000, 200, buf, &len, &push)) == 1) {
		if (pps_sched_unsent_since_us(s) != pps_window_first_capture_us(list.windows[0]))
			break;
	}
	REQUIRE(r == 1);
	CHECK(pps_sched_unsent_since_us(s) == pps_window_first_capture_us(list.windows[1]));
	while (pps_sched_next_packet(s, 1000000, 1448, buf, &len, &push) == 1)
		;
	CHECK(pps_sched_unsent_since_us(s) == INT64_MAX);
	/* Handed out, but still in the kernel: a reading from before the
	 * packets (nothing unsent then) leaves every byte unsent, the first
	 * window's included; one byte unsent is the last window's. */
	pps_sched_set_path(s, &(pps_sched_path_t){.queued_bytes = 0});
	CHECK(pps_sched_unsent_since_us(s) == pps_window_first_capture_us(list.windows[0]));
	pps_sched_set_path(s, &(pps_sched_path_t){.queued_bytes = 1});
	CHECK(pps_sched_unsent_since_us(s) ==
	      pps_window_first_capture_us(list.windows[list.n - 1]));
	pps_sched_set_path(s, &(pps_sched_path_t){.queued_bytes = 0});
	CHECK(pps_sched_unsent_since_us(s) == INT64_MAX);
	free_windows(&list);
	pps_sched_free(s);
}

/* MSS changes on every call: every packet fits its own MSS and ADUs arrive
 * byte for byte. */
static void
test_sched_mss_changes(void)
{
	window_list_t list;
	pps_sched_t *s = new_sched(1000000, 64);
	receiver_t rx;
	uint8_t buf[9000];
	static const size_t mss_cycle[] = {1448, 536, 8948, 1200, 128, 1448, 2000};
	size_t len, k = 0;
	bool push;

	memset(&rx, 0, sizeof(rx));
	make_windows(&list, 13, 4, 3, 2, 60, PPS_PRIORITY_BALANCED, 9, 1.0);
	for (size_t i = 0; i < list.n; i++)
		pps_sched_push_window(s, list.windows[i]);
	for (;;) {
		size_t mss = mss_cycle[k++ % 7];

		if (pps_sched_next_packet(s, 1000000, mss, buf, &len, &push) != 1)
			break;
		CHECK(len <= mss);
		receive_packet(&rx, buf, len, 1000000);
	}
	for (size_t i = 0; i < list.n; i++) {
		for (size_t a = 0; a < pps_window_adu_count(list.windows[i]); a++)
			CHECK(
			    adu_intact(&rx, pps_adu_info(pps_window_adu(list.windows[i], a))->id));
	}
	CHECK_EQ_INT(pps_sched_next_packet(s, 0, 100, buf, &len, &push), -EINVAL);
	free_windows(&list);
	pps_sched_free(s);
	receiver_free(&rx);
}

/* A loopback-sized MSS: packets of 64 KB hold several records, none longer
 * than the client's limit. */
static void
test_sched_record_limit(void)
{
	window_list_t list;
	pps_sched_params_t params = {
	    .latency_budget_us = 1000000, .max_windows = 64, .max_record_bytes = 1000};
	pps_sched_t *s = pps_sched_new(&params);
	static uint8_t buf[65483];
	receiver_t rx;
	size_t len;
	bool push;
	unsigned packets = 0;

	REQUIRE(s);
	memset(&rx, 0, sizeof(rx));
	make_windows(&list, 13, 4, 3, 2, 60, PPS_PRIORITY_TEMPORAL_FIRST, 21, 4.0);
	for (size_t i = 0; i < list.n; i++)
		pps_sched_push_window(s, list.windows[i]);
	while (pps_sched_next_packet(s, 1000000, sizeof(buf), buf, &len, &push) == 1) {
		pps_wire_parser_t *p = pps_wire_parser_new(1000);
		const uint8_t *data = buf;
		size_t left = len;
		pps_wire_record_t r;
		int ret;

		REQUIRE(p);
		while ((ret = pps_wire_parser_next(p, &data, &left, &r)) == 0)
			;
		CHECK_EQ_INT(ret, -EAGAIN); /* a record over 1000 bytes: -EMSGSIZE */
		pps_wire_parser_free(p);
		receive_packet(&rx, buf, len, 1000000);
		packets++;
	}
	CHECK(packets > 0 && packets <= list.n + 2); /* a window fits a packet */
	for (size_t i = 0; i < list.n; i++) {
		for (size_t a = 0; a < pps_window_adu_count(list.windows[i]); a++)
			CHECK(
			    adu_intact(&rx, pps_adu_info(pps_window_adu(list.windows[i], a))->id));
	}
	params.max_record_bytes = 100;
	CHECK(pps_sched_new(&params) == NULL);
	free_windows(&list);
	pps_sched_free(s);
	receiver_free(&rx);
}

/* At the deadline the rest of the window is dropped and reported; a window
 * not started by its deadline is a dropped window. */
static void
test_sched_deadline(void)
{
	window_list_t list;
	pps_sched_t *s = new_sched(100000, 64); /* 100 ms budget */
	receiver_t rx;
	uint8_t buf[1500];
	size_t len;
	bool push;
	pps_sched_stats_t st;
	int64_t deadline1, now;

	memset(&rx, 0, sizeof(rx));
	make_windows(&list, 9, 4, 3, 2, 60, PPS_PRIORITY_TEMPORAL_FIRST, 11, 1.0);
	REQUIRE(list.n == 3);
	for (size_t i = 0; i < list.n; i++)
		pps_sched_push_window(s, list.windows[i]);
	/* Window 0 (the IDR) whole; then two packets of window 1. */
	now = pps_window_first_capture_us(list.windows[0]);
	do {
		REQUIRE(pps_sched_next_packet(s, now, 1448, buf, &len, &push) == 1);
		receive_packet(&rx, buf, len, now);
	} while (!push);
	for (int i = 0; i < 2; i++) {
		REQUIRE(pps_sched_next_packet(s, now, 1448, buf, &len, &push) == 1);
		receive_packet(&rx, buf, len, now);
	}
	deadline1 = pps_window_first_capture_us(list.windows[1]) + 100000;
	CHECK_EQ_INT(pps_sched_next_deadline_us(s), deadline1);
	/* Window 2's deadline passes too: it was never started. */
	now = pps_window_first_capture_us(list.windows[2]) + 100000;
	CHECK_EQ_INT(pps_sched_expire(s, now), 2);
	CHECK_EQ_INT(pps_sched_next_deadline_us(s), INT64_MAX);
	while (pps_sched_next_packet(s, now, 1448, buf, &len, &push) == 1)
		receive_packet(&rx, buf, len, now);
	CHECK_EQ_INT(rx.ends, 3);
	CHECK_EQ_INT(rx.dropped_windows, 1);
	CHECK_EQ_INT(rx.begins, 2);
	pps_sched_get_stats(s, &st);
	CHECK_EQ_INT(st.windows_complete, 1);
	CHECK_EQ_INT(st.windows_partial, 1);
	CHECK_EQ_INT(st.windows_dropped, 1);
	{
		uint64_t sent = 0, dropped = 0;

		for (int t = 0; t < PPS_ADU_MAX_TEMPORAL_LAYERS; t++) {
			for (int q = 0; q < PPS_ADU_MAX_QUALITY_LAYERS; q++) {
				sent += st.layer[t][q].adus_sent;
				dropped += st.layer[t][q].adus_dropped;
			}
		}
		CHECK_EQ_INT(sent + dropped, 2 + 8 + 8);
		CHECK(st.layer[0][0].adus_sent >= 2); /* IDR + window 1's anchor went first */
	}
	free_windows(&list);
	pps_sched_free(s);
	receiver_free(&rx);
}

/* An ADU is never sent when something it depends on was dropped for this
 * client; sending resumes at the next IDR. */
static void
test_sched_decodability(void)
{
	window_list_t list;
	pps_sched_t *s = new_sched(100000, 64);
	receiver_t rx;
	uint8_t buf[1500];
	size_t len;
	bool push;
	pps_sched_stats_t st;
	int64_t now;
	size_t idr_window = 0;

	memset(&rx, 0, sizeof(rx));
	/* GOP of 8 frames, windows of 2, P only (temporal_layers 1), 2 qualities. */
	make_windows(&list, 17, 2, 1, 2, 8, PPS_PRIORITY_TEMPORAL_FIRST, 5, 1.0);
	REQUIRE(list.n == 9);
	for (size_t i = 0; i < list.n; i++)
		pps_sched_push_window(s, list.windows[i]);
	/* Window 0 sent whole; window 1 expires unsent (its P frames dropped). */
	now = pps_window_first_capture_us(list.windows[0]);
	do {
		REQUIRE(pps_sched_next_packet(s, now, 1448, buf, &len, &push) == 1);
		receive_packet(&rx, buf, len, now);
	} while (!push);
	now = pps_window_first_capture_us(list.windows[1]) + 100000;
	/* From here on time stands still before window 2's deadline. */
	while (pps_sched_next_packet(s, now, 1448, buf, &len, &push) == 1)
		receive_packet(&rx, buf, len, now);
	for (size_t i = 0; i < list.n; i++) {
		for (size_t a = 0; a < pps_window_adu_count(list.windows[i]); a++) {
			const pps_adu_info_t *info =
			    pps_adu_info(pps_window_adu(list.windows[i], a));

			if (info->frame_index == 8 && info->frame_type == PPS_ADU_FRAME_IDR)
				idr_window = i;
		}
	}
	REQUIRE(idr_window == 4);
	for (size_t i = 1; i < list.n; i++) {
		for (size_t a = 0; a < pps_window_adu_count(list.windows[i]); a++) {
			const pps_adu_info_t *info =
			    pps_adu_info(pps_window_adu(list.windows[i], a));
			bool got = rx.data[info->id % 4096] != NULL;

			/* Frames 3..7 follow the dropped P chain: nothing of them
			 * may go out. From the IDR (frame 8) on, everything does. */
			CHECK_EQ_INT(got, info->frame_index >= 8);
		}
	}
	pps_sched_get_stats(s, &st);
	CHECK_EQ_INT(st.adus_undecodable, 5 * 2); /* frames 3..7 x 2 layers */
	CHECK_EQ_INT(st.windows_dropped, 3);
	free_windows(&list);
	pps_sched_free(s);
	receiver_free(&rx);
}

/* An enhancement whose base was dropped is not sent either. */
static void
test_sched_enhancement_needs_base(void)
{
	pps_sched_t *s = new_sched(1000000, 8);
	pps_adu_t *adus[2];
	pps_window_t *w;
	window_list_t list = {.n = 0};
	pps_windower_t *wr =
	    pps_windower_new(1, PPS_PRIORITY_TEMPORAL_FIRST, collect_window_cb, &list);
	pps_adu_info_t base = {.id = 100,
	                       .frame_index = 5,
	                       .capture_us = 1000000,
	                       .frame_type = PPS_ADU_FRAME_P,
	                       .dep_count = 1,
	                       .deps = {99}};
	pps_adu_info_t enh = {.id = 101,
	                      .frame_index = 5,
	                      .capture_us = 1000000,
	                      .frame_type = PPS_ADU_FRAME_P,
	                      .quality_layer = 1,
	                      .dep_count = 1,
	                      .deps = {100}};
	uint8_t bytes[10] = {0}, buf[1500];
	size_t len;
	bool push;
	pps_sched_stats_t st;

	REQUIRE(wr);
	adus[0] = pps_adu_new(&base, bytes, sizeof(bytes));
	adus[1] = pps_adu_new(&enh, bytes, sizeof(bytes));
	CHECK_EQ_INT(pps_windower_add(wr, adus[0]), 0);
	CHECK_EQ_INT(pps_windower_add(wr, adus[1]), 0);
	CHECK_EQ_INT(pps_windower_frames_done(wr, 5), 0);
	REQUIRE(list.n == 1);
	w = list.windows[0];
	pps_sched_push_window(s, w);
	/* The base depends on ADU 99, which this client never got. */
	while (pps_sched_next_packet(s, 1000000, 1448, buf, &len, &push) == 1)
		;
	pps_sched_get_stats(s, &st);
	CHECK_EQ_INT(st.adus_undecodable, 2);
	CHECK_EQ_INT(st.layer[0][1].adus_sent, 0);
	CHECK_EQ_INT(st.windows_dropped, 1);
	/* A late ADU of a closed window is refused. */
	adus[0] = pps_adu_new(&base, bytes, sizeof(bytes));
	CHECK_EQ_INT(pps_windower_add(wr, adus[0]), -ESTALE);
	free_windows(&list);
	pps_windower_free(wr);
	pps_sched_free(s);
}

static void
count_grow_cb(pps_window_t *window, void *user)
{
	window_list_t *list = user;

	(void)window;
	list->grown++;
}

/* Frame @f of a 1x2 stream (IDR at 0, then P): its base or its enhancement. */
static pps_adu_t *
early_adu(uint32_t f, unsigned q, size_t bytes)
{
	pps_adu_info_t info = {.id = 2 * f + q,
	                       .frame_index = f,
	                       .capture_us = 1000000 + (int64_t)f * FRAME_US,
	                       .decode_order = f,
	                       .frame_type = f ? PPS_ADU_FRAME_P : PPS_ADU_FRAME_IDR,
	                       .quality_layer = (uint8_t)q};
	uint8_t data[4096];
	pps_adu_t *adu;

	REQUIRE(bytes <= sizeof(data));
	for (size_t i = 0; i < bytes; i++)
		data[i] = (uint8_t)(info.id * 31 + i);
	if (f)
		info.deps[info.dep_count++] = 2 * (f - 1) + q; /* the previous picture */
	if (q)
		info.deps[info.dep_count++] = 2 * f; /* its own base */
	adu = pps_adu_new(&info, data, bytes);
	REQUIRE(adu);
	return adu;
}

/* Drains the scheduler at @now_us into @rx; returns the packets and ORs the pushes. */
static unsigned
drain(pps_sched_t *s, receiver_t *rx, int64_t now_us, bool *pushed)
{
	uint8_t buf[1500];
	size_t len;
	bool push;
	unsigned packets = 0;

	*pushed = false;
	while (pps_sched_next_packet(s, now_us, 1448, buf, &len, &push) == 1) {
		receive_packet(rx, buf, len, now_us);
		*pushed |= push;
		packets++;
	}
	return packets;
}

/* Early publication: a window goes out once its last frame's base is in; the
 * scheduler sends the base, waits (no packet, no busy loop) for the
 * enhancement and ends the window when it comes, when the producer closes
 * it short, or at the deadline; an enhancement larger than announced is
 * dropped, not sent. */
static void
test_windower_early(void)
{
	window_list_t list = {.n = 0};
	pps_windower_t *wr =
	    pps_windower_new(1, PPS_PRIORITY_TEMPORAL_FIRST, collect_window_cb, &list);
	pps_windower_t *wr2 =
	    pps_windower_new(2, PPS_PRIORITY_TEMPORAL_FIRST, collect_window_cb, &list);
	pps_sched_t *s = new_sched(100000, 8);
	receiver_t rx;
	pps_sched_stats_t st;
	bool pushed;
	pps_window_t *w;

	memset(&rx, 0, sizeof(rx));
	REQUIRE(wr && wr2);
	/* Only where the ADUs to come are the tail of the send order. */
	CHECK_EQ_INT(pps_windower_set_early(wr, 1, 1000, count_grow_cb), -EINVAL);
	CHECK_EQ_INT(pps_windower_set_early(wr2, 3, 1000, count_grow_cb), -EINVAL);
	CHECK_EQ_INT(pps_windower_set_early(wr2, 2, 1000, count_grow_cb), 0);
	CHECK_EQ_INT(pps_windower_set_early(wr, 3, 1000, NULL), -EINVAL);
	REQUIRE(pps_windower_set_early(wr, 2, 1000, count_grow_cb) == 0);

	/* Window 0: the base alone publishes it, open. */
	CHECK_EQ_INT(pps_windower_add(wr, early_adu(0, 0, 300)), 0);
	REQUIRE(list.n == 1);
	w = list.windows[0];
	CHECK(pps_window_is_open(w));
	CHECK_EQ_INT(pps_window_adu_count(w), 1);
	CHECK_EQ_INT(pps_window_adu_total(w), 2);
	CHECK_EQ_INT(pps_window_bytes(w), 300);
	CHECK_EQ_INT(pps_window_bytes_bound(w), 1300);
	pps_sched_push_window(s, w);
	CHECK_EQ_INT(drain(s, &rx, 1000000, &pushed), 1);
	CHECK(pushed); /* the base leaves now, uncorked */
	CHECK(rx.in_window && rx.begins == 1 && rx.ends == 0);
	CHECK_EQ_INT(rx.last_begin.adus, 2);
	CHECK_EQ_INT(rx.last_begin.bytes, 1300);
	CHECK(adu_intact(&rx, 0));
	CHECK(!pps_sched_has_data(s)); /* waiting: nothing to write */
	/* The enhancement joins; the window is whole and ends. */
	CHECK_EQ_INT(pps_windower_add(wr, early_adu(0, 1, 900)), 0);
	CHECK_EQ_INT(list.grown, 1);
	CHECK(!pps_window_is_open(w));
	CHECK_EQ_INT(pps_window_bytes(w), 1200);
	CHECK(pps_sched_has_data(s));
	CHECK_EQ_INT(drain(s, &rx, 1000000, &pushed), 1);
	CHECK(pushed && !rx.in_window && rx.ends == 1);
	CHECK_EQ_INT(rx.last_end.adus_sent, 2);
	CHECK(adu_intact(&rx, 1));
	CHECK_EQ_INT(pps_windower_frames_done(wr, 0), 0); /* nothing left to close */
	CHECK_EQ_INT(list.grown, 1);

	/* Window 1: the producer says the frame is done without its
	 * enhancement: closed short, the missing ADU counted dropped. */
	CHECK_EQ_INT(pps_windower_add(wr, early_adu(1, 0, 200)), 0);
	REQUIRE(list.n == 2);
	pps_sched_push_window(s, list.windows[1]);
	drain(s, &rx, 1000000 + FRAME_US, &pushed);
	CHECK(rx.in_window);
	CHECK_EQ_INT(pps_windower_frames_done(wr, 1), 0);
	CHECK_EQ_INT(list.grown, 2);
	CHECK(!pps_window_is_open(list.windows[1]));
	CHECK_EQ_INT(pps_window_adu_total(list.windows[1]), 2);
	drain(s, &rx, 1000000 + FRAME_US, &pushed);
	CHECK(!rx.in_window && rx.ends == 2);
	CHECK_EQ_INT(rx.last_end.adus_sent, 1);
	CHECK_EQ_INT(rx.last_end.adus_dropped, 1);

	/* Window 2: the deadline passes while it waits: it ends with what it
	 * sent; the enhancement arriving afterwards changes nothing. */
	CHECK_EQ_INT(pps_windower_add(wr, early_adu(2, 0, 200)), 0);
	REQUIRE(list.n == 3);
	pps_sched_push_window(s, list.windows[2]);
	drain(s, &rx, 1000000 + 2 * FRAME_US, &pushed);
	CHECK(rx.in_window);
	CHECK_EQ_INT(pps_sched_next_deadline_us(s), 1000000 + 2 * FRAME_US + 100000);
	drain(s, &rx, 1000000 + 2 * FRAME_US + 100000, &pushed);
	CHECK(!rx.in_window && rx.ends == 3);
	CHECK_EQ_INT(rx.last_end.adus_sent, 1);
	CHECK_EQ_INT(rx.last_end.adus_dropped, 1);
	CHECK_EQ_INT(pps_windower_add(wr, early_adu(2, 1, 200)), 0);
	CHECK(!pps_sched_has_data(s));

	/* Window 3: an enhancement above the announced bound is dropped. */
	CHECK_EQ_INT(pps_windower_add(wr, early_adu(3, 0, 100)), 0);
	REQUIRE(list.n == 4);
	pps_sched_push_window(s, list.windows[3]);
	drain(s, &rx, 1000000 + 3 * FRAME_US, &pushed);
	CHECK_EQ_INT(pps_windower_add(wr, early_adu(3, 1, 1001)), 0);
	drain(s, &rx, 1000000 + 3 * FRAME_US, &pushed);
	CHECK(!rx.in_window && rx.ends == 4);
	CHECK_EQ_INT(rx.last_end.adus_sent, 1);
	CHECK_EQ_INT(rx.last_end.adus_dropped, 1);
	CHECK(!rx.data[7 % 4096]); /* not a byte of it */

	/* A base where an enhancement was announced: refused, closed short. */
	CHECK_EQ_INT(pps_windower_add(wr, early_adu(4, 0, 100)), 0);
	REQUIRE(list.n == 5);
	CHECK_EQ_INT(pps_windower_add(wr, early_adu(4, 0, 100)), -EPROTO);
	CHECK(!pps_window_is_open(list.windows[4]));
	/* A window of two frames opens at its second frame's base. */
	CHECK_EQ_INT(pps_windower_add(wr2, early_adu(0, 0, 10)), 0);
	REQUIRE(list.n == 6);
	CHECK(pps_window_is_open(list.windows[5]));
	CHECK_EQ_INT(pps_windower_add(wr2, early_adu(0, 1, 10)), 0);
	CHECK(!pps_window_is_open(list.windows[5]));
	CHECK_EQ_INT(pps_windower_add(wr2, early_adu(1, 0, 10)), 0);
	CHECK_EQ_INT(pps_windower_add(wr2, early_adu(1, 1, 10)), 0);
	CHECK_EQ_INT(list.n, 6);
	CHECK_EQ_INT(pps_windower_add(wr2, early_adu(2, 0, 10)), 0);
	REQUIRE(list.n == 7);
	CHECK_EQ_INT(pps_window_adu_count(list.windows[6]), 3);
	CHECK_EQ_INT(pps_window_adu_total(list.windows[6]), 4);
	/* The tail of the send order: the base chain, then the enhancement. */
	CHECK_EQ_INT(pps_adu_info(pps_window_adu(list.windows[6], 2))->quality_layer, 1);
	CHECK_EQ_INT(pps_windower_flush(wr2), 0);
	CHECK(!pps_window_is_open(list.windows[6]));

	pps_sched_get_stats(s, &st);
	CHECK_EQ_INT(st.windows_complete, 1);
	CHECK_EQ_INT(st.windows_partial, 3);
	free_windows(&list);
	pps_windower_free(wr);
	pps_windower_free(wr2);
	pps_sched_free(s);
	receiver_free(&rx);
}

/* One ADU of a stream whose droppable frames are disposable P frames
 * (windows of 2, two quality layers, no fillers: ids 2f + q in decode order,
 * which is display order; a window's last frame disposable, on the anchor
 * just before it). */
static pps_adu_t *
disposable_adu(uint32_t f, unsigned q)
{
	uint32_t anchor = f % 2 == 0 || f == 1 ? f - 1 : f - 2;
	pps_adu_info_t info = {.id = 2 * f + q,
	                       .frame_index = f,
	                       .capture_us = 1000000 + (int64_t)f * FRAME_US,
	                       .decode_order = f,
	                       .frame_type = f == 0       ? PPS_ADU_FRAME_IDR
	                                     : f % 2 == 0 ? PPS_ADU_FRAME_PD
	                                                  : PPS_ADU_FRAME_P,
	                       .temporal_layer = (uint8_t)(f > 0 && f % 2 == 0),
	                       .quality_layer = (uint8_t)q};
	uint8_t data[64] = {0};
	pps_adu_t *adu;

	if (f)
		info.deps[info.dep_count++] = 2 * anchor + q;
	if (q)
		info.deps[info.dep_count++] = 2 * f;
	adu = pps_adu_new(&info, data, sizeof(data));
	REQUIRE(adu);
	return adu;
}

/* Windows that close with a disposable P frame go out as anchor windows do:
 * the first frame's base publishes the window with both frames' ADUs
 * announced, and each ADU, the disposable frame's too, is appended as it
 * comes; a B frame still may not be appended to an anchor window. */
static void
test_windower_disposable_p(void)
{
	window_list_t list = {.n = 0};
	pps_windower_t *wr =
	    pps_windower_new(2, PPS_PRIORITY_TEMPORAL_FIRST, collect_window_cb, &list);
	pps_window_t *w;

	REQUIRE(wr && pps_windower_set_anchor_windows(wr, 2, 1000, count_grow_cb) == 0);
	for (unsigned q = 0; q < 2; q++)
		CHECK_EQ_INT(pps_windower_add(wr, disposable_adu(0, q)), 0);
	CHECK_EQ_INT(pps_windower_frames_done(wr, 0), 0);
	REQUIRE(list.n == 1);
	CHECK_EQ_INT(pps_windower_add(wr, disposable_adu(1, 0)), 0);
	REQUIRE(list.n == 2);
	w = list.windows[1];
	CHECK(pps_window_is_open(w));
	CHECK_EQ_INT(pps_window_adu_count(w), 1);
	CHECK_EQ_INT(pps_window_adu_total(w), 4);
	CHECK_EQ_INT(pps_window_frames(w), 2);
	CHECK_EQ_INT(pps_windower_add(wr, disposable_adu(1, 1)), 0);
	CHECK_EQ_INT(pps_windower_add(wr, disposable_adu(2, 0)), 0);
	CHECK(pps_window_is_open(w));
	CHECK_EQ_INT(pps_windower_add(wr, disposable_adu(2, 1)), 0);
	CHECK(!pps_window_is_open(w));
	CHECK_EQ_INT(pps_window_adu_count(w), 4);
	/* Window 2 opens the same way; a B frame in it breaks the promise. */
	CHECK_EQ_INT(pps_windower_add(wr, disposable_adu(3, 0)), 0);
	REQUIRE(list.n == 3);
	{
		pps_adu_info_t info = {.id = 7,
		                       .frame_index = 3,
		                       .capture_us = 1000000 + 3 * FRAME_US,
		                       .decode_order = 3,
		                       .frame_type = PPS_ADU_FRAME_B,
		                       .temporal_layer = 1,
		                       .quality_layer = 1};
		uint8_t data[8] = {0};
		pps_adu_t *b = pps_adu_new(&info, data, sizeof(data));

		REQUIRE(b);
		CHECK_EQ_INT(pps_windower_add(wr, b), -EPROTO);
	}
	free_windows(&list);
	pps_windower_free(wr);
}

/* One ADU of an anchor window's stream (windows of 2, two quality layers and
 * a filler ADU per layer after each frame: 4 ADUs a frame, ids 4f + k in
 * decode order: base, enhancement, base filler, enhancement filler). */
static pps_adu_t *
anchor_adu(uint32_t f, unsigned k, size_t bytes)
{
	pps_adu_info_t info = {.id = 4 * f + k,
	                       .frame_index = f,
	                       .capture_us = 1000000 + (int64_t)f * FRAME_US,
	                       .decode_order = 2 * f + (k >= 2),
	                       .frame_type = f ? PPS_ADU_FRAME_P : PPS_ADU_FRAME_IDR,
	                       .quality_layer = (uint8_t)(k % 2)};
	uint8_t data[256];
	pps_adu_t *adu;

	REQUIRE(bytes <= sizeof(data));
	for (size_t i = 0; i < bytes; i++)
		data[i] = (uint8_t)(info.id * 31 + i);
	if (k >= 2)
		info.deps[info.dep_count++] = 4 * f + k - 2; /* its frame's picture */
	else if (f)
		info.deps[info.dep_count++] = 4 * (f - 1) + 2 + k; /* the previous filler */
	if (k == 1)
		info.deps[info.dep_count++] = 4 * f; /* its own base */
	adu = pps_adu_new(&info, data, bytes);
	REQUIRE(adu);
	return adu;
}

/* Anchor windows: a window whose first ADU is its first frame's base is
 * published at once with all its frames' ADUs announced; each frame leaves as
 * it comes, in decode order; past the deadline the window waits (within the
 * grace) for the base of a frame still to come, and drops its enhancement as
 * it comes.
 * A window that starts with its last frame's anchor (B frames) is not. */
static void
test_windower_anchor_windows(void)
{
	window_list_t list = {.n = 0};
	pps_windower_t *wr1 =
	    pps_windower_new(1, PPS_PRIORITY_TEMPORAL_FIRST, collect_window_cb, &list);
	pps_windower_t *wr =
	    pps_windower_new(2, PPS_PRIORITY_TEMPORAL_FIRST, collect_window_cb, &list);
	pps_sched_params_t params = {
	    .latency_budget_us = 100000, .max_windows = 8, .base_grace_us = 1000000};
	pps_sched_t *s = pps_sched_new(&params);
	int64_t t1 = 1000000 + FRAME_US;
	receiver_t rx;
	bool pushed;
	pps_window_t *w;

	memset(&rx, 0, sizeof(rx));
	REQUIRE(wr1 && wr && s);
	CHECK_EQ_INT(pps_windower_set_anchor_windows(wr1, 4, 1000, count_grow_cb), -EINVAL);
	CHECK_EQ_INT(pps_windower_set_anchor_windows(wr, 0, 1000, count_grow_cb), -EINVAL);
	CHECK_EQ_INT(pps_windower_set_anchor_windows(wr, 4, 1000, NULL), -EINVAL);
	REQUIRE(pps_windower_set_anchor_windows(wr, 4, 1000, count_grow_cb) == 0);

	/* Window 0 (frame 0 alone) closes when its frame is done. */
	for (unsigned k = 0; k < 4; k++)
		CHECK_EQ_INT(pps_windower_add(wr, anchor_adu(0, k, 100)), 0);
	CHECK_EQ_INT(list.n, 0);
	CHECK_EQ_INT(pps_windower_frames_done(wr, 0), 0);
	REQUIRE(list.n == 1);
	CHECK(!pps_window_is_open(list.windows[0]));
	pps_sched_push_window(s, list.windows[0]);
	drain(s, &rx, 1000000, &pushed);
	CHECK(!rx.in_window && rx.ends == 1);

	/* Window 1: frame 1's base publishes it, announcing both frames. */
	CHECK_EQ_INT(pps_windower_add(wr, anchor_adu(1, 0, 100)), 0);
	REQUIRE(list.n == 2);
	w = list.windows[1];
	CHECK(pps_window_is_open(w));
	CHECK(pps_window_anchors_to_come(w));
	CHECK_EQ_INT(pps_window_frames(w), 2);
	CHECK_EQ_INT(pps_window_adu_count(w), 1);
	CHECK_EQ_INT(pps_window_adu_total(w), 8);
	CHECK_EQ_INT(pps_window_bytes_bound(w), 100 + 7 * 1000);
	pps_sched_push_window(s, w);
	CHECK_EQ_INT(drain(s, &rx, t1, &pushed), 1);
	CHECK(pushed && rx.in_window);
	CHECK_EQ_INT(rx.last_begin.adus, 8);
	CHECK_EQ_INT(rx.last_begin.frames, 2);
	CHECK(!pps_sched_has_data(s));
	/* The rest of frame 1 leaves as it comes, before frame 2 exists. */
	for (unsigned k = 1; k < 4; k++)
		CHECK_EQ_INT(pps_windower_add(wr, anchor_adu(1, k, 100)), 0);
	CHECK_EQ_INT(list.grown, 3);
	CHECK(pps_window_is_open(w) && pps_window_anchors_to_come(w));
	CHECK_EQ_INT(drain(s, &rx, t1, &pushed), 1);
	for (unsigned k = 0; k < 4; k++)
		CHECK(adu_intact(&rx, 4 + k));
	CHECK(!pps_sched_has_data(s));
	/* Past the deadline, frame 2's base is still awaited (it is a
	 * reference picture): the window does not end. */
	CHECK_EQ_INT(pps_sched_expire(s, 1000000 + FRAME_US + 100000), 1);
	CHECK(rx.in_window);
	CHECK(!pps_sched_has_data(s));
	CHECK_EQ_INT(pps_sched_next_deadline_us(s), 1000000 + FRAME_US + 100000 + 1000000);
	/* It comes: sent; its enhancement dropped; its base filler sent. */
	CHECK_EQ_INT(pps_windower_add(wr, anchor_adu(2, 0, 100)), 0);
	CHECK(pps_window_anchors_to_come(w)); /* open: its base filler is to come */
	drain(s, &rx, 1000000 + FRAME_US + 150000, &pushed);
	CHECK(adu_intact(&rx, 8));
	for (unsigned k = 1; k < 4; k++)
		CHECK_EQ_INT(pps_windower_add(wr, anchor_adu(2, k, 100)), 0);
	CHECK(!pps_window_is_open(w) && !pps_window_anchors_to_come(w));
	drain(s, &rx, 1000000 + FRAME_US + 150000, &pushed);
	CHECK(!rx.in_window && rx.ends == 2);
	CHECK_EQ_INT(rx.last_end.adus_sent, 6);
	CHECK_EQ_INT(rx.last_end.adus_dropped, 2);
	CHECK(adu_intact(&rx, 10));
	{
		pps_sched_stats_t st;

		pps_sched_get_stats(s, &st);
		CHECK_EQ_INT(st.windows_complete, 1);
		CHECK_EQ_INT(st.windows_short, 1); /* cut after a complete window */
	}

	/* Window 2 with B frames: its first ADU is frame 4's anchor. */
	{
		pps_adu_info_t info = {.id = 12,
		                       .frame_index = 4,
		                       .capture_us = 1000000 + 4 * FRAME_US,
		                       .frame_type = PPS_ADU_FRAME_P};
		uint8_t data[10] = {0};
		pps_adu_t *adu = pps_adu_new(&info, data, sizeof(data));

		REQUIRE(adu);
		CHECK_EQ_INT(pps_windower_add(wr, adu), 0);
		CHECK_EQ_INT(list.n, 2);
		CHECK_EQ_INT(pps_windower_frames_done(wr, 4), 0);
		REQUIRE(list.n == 3);
		CHECK(!pps_window_is_open(list.windows[2]));
		CHECK(!pps_window_anchors_to_come(list.windows[2]));
	}
	free_windows(&list);
	pps_windower_free(wr1);
	pps_windower_free(wr);
	pps_sched_free(s);
	receiver_free(&rx);
}

/* Windows arrive faster than the link drains them: the queue stays bounded,
 * nothing goes out after its deadline, and every window is accounted for. */
static void
test_sched_overload(void)
{
	window_list_t list;
	pps_sched_t *s = new_sched(300000, 4);
	receiver_t rx;
	uint8_t buf[1500];
	size_t len;
	bool push;
	pps_sched_stats_t st;

	memset(&rx, 0, sizeof(rx));
	/* About 1 Mbit/s of link for a stream of about 1.6: 6 packets a window. */
	make_windows(&list, 121, 2, 2, 2, 30, PPS_PRIORITY_TEMPORAL_FIRST, 13, 1.0);
	for (size_t i = 0; i < list.n; i++) {
		int64_t now = pps_window_first_capture_us(list.windows[i]) + 2 * FRAME_US;

		pps_sched_push_window(s, list.windows[i]);
		for (int k = 0; k < 6; k++) {
			if (pps_sched_next_packet(s, now, 1448, buf, &len, &push) != 1)
				break;
			receive_packet(&rx, buf, len, now);
			now += FRAME_US / 3;
		}
	}
	pps_sched_expire(s, INT64_MAX / 2);
	while (pps_sched_next_packet(s, INT64_MAX / 2, 1448, buf, &len, &push) == 1)
		receive_packet(&rx, buf, len, INT64_MAX / 4);
	pps_sched_get_stats(s, &st);
	CHECK_EQ_INT(st.windows_complete + st.windows_partial + st.windows_dropped, list.n);
	CHECK(st.windows_partial + st.windows_dropped > 0);
	/* Base layer first: the base temporal layer got through more often. */
	fprintf(stderr, "overload: base %llu/%llu enhancement %llu/%llu sent/dropped\n",
	        (unsigned long long)st.layer[0][0].adus_sent,
	        (unsigned long long)st.layer[0][0].adus_dropped,
	        (unsigned long long)st.layer[0][1].adus_sent,
	        (unsigned long long)st.layer[0][1].adus_dropped);
	CHECK(st.layer[0][0].adus_sent > st.layer[0][1].adus_sent);
	CHECK_EQ_INT(rx.ends + st.windows_overflow, list.n);
	free_windows(&list);
	pps_sched_free(s);
	receiver_free(&rx);
}

/* Control records go out before window data; the control queue is bounded. */
static void
test_sched_control(void)
{
	window_list_t list;
	pps_sched_t *s = new_sched(1000000, 8);
	pps_wire_record_t pong = {.kind = PPS_WIRE_CLOCK_PONG};
	pps_wire_parser_t *p = pps_wire_parser_new(4096);
	pps_wire_record_t r;
	uint8_t buf[1500];
	const uint8_t *data = buf;
	size_t len;
	bool push;
	int accepted = 0;

	make_windows(&list, 3, 2, 2, 2, 60, PPS_PRIORITY_TEMPORAL_FIRST, 1, 1.0);
	pps_sched_push_window(s, list.windows[0]);
	for (int i = 0; i < PPS_SCHED_MAX_CONTROL + 3; i++) {
		pong.u.clock_pong.seq = (uint32_t)i;
		accepted += pps_sched_push_control(s, &pong) == 0;
	}
	CHECK_EQ_INT(accepted, PPS_SCHED_MAX_CONTROL);
	REQUIRE(pps_sched_next_packet(s, 0, 1448, buf, &len, &push) == 1);
	CHECK_EQ_INT(pps_wire_parser_next(p, &data, &len, &r), 0);
	CHECK(r.kind == PPS_WIRE_CLOCK_PONG && r.u.clock_pong.seq == 0);
	{
		pps_sched_stats_t st;

		pps_sched_get_stats(s, &st);
		CHECK_EQ_INT(st.control_overflow, 3);
	}
	pps_wire_parser_free(p);
	free_windows(&list);
	pps_sched_free(s);
}

/* Audio goes out after control and before any window data; a frame past its
 * deadline is dropped unsent, a full queue drops the oldest, and a payload
 * over a slot or over the client's record limit is refused. */
static void
test_sched_audio(void)
{
	window_list_t list;
	pps_sched_t *s = new_sched(1000000, 8);
	pps_wire_record_t pong = {.kind = PPS_WIRE_CLOCK_PONG};
	pps_wire_parser_t *p = pps_wire_parser_new(4096);
	uint8_t payload[PPS_SCHED_MAX_AUDIO_BYTES + 1];
	pps_wire_audio_frame_t frame = {.duration_us = 20000, .payload = payload};
	pps_sched_stats_t st;
	pps_wire_record_t r;
	uint8_t buf[1500];
	const uint8_t *data;
	size_t len;
	bool push;
	int kinds[8], n = 0;

	REQUIRE(p);
	memset(payload, 0x5a, sizeof(payload));
	make_windows(&list, 3, 2, 2, 2, 60, PPS_PRIORITY_TEMPORAL_FIRST, 1, 1.0);
	pps_sched_push_window(s, list.windows[0]);
	REQUIRE(pps_sched_push_control(s, &pong) == 0);
	/* Frame 0 captured at 0 (deadline 250 ms: late at 300 ms), frames 1
	 * and 2 at 100 ms and 200 ms. */
	for (uint32_t i = 0; i < 3; i++) {
		frame.seq = i;
		frame.capture_us = (int64_t)i * 100000;
		frame.payload_len = 60;
		CHECK_EQ_INT(pps_sched_push_audio(s, &frame), 0);
	}
	REQUIRE(pps_sched_next_packet(s, 300000, 1448, buf, &len, &push) == 1);
	data = buf;
	while (n < 8 && pps_wire_parser_next(p, &data, &len, &r) == 0) {
		kinds[n++] = (int)r.kind;
		if (r.kind == PPS_WIRE_AUDIO_FRAME) {
			CHECK(r.u.audio_frame.seq == 1 || r.u.audio_frame.seq == 2);
			CHECK_EQ_INT(r.u.audio_frame.payload_len, 60);
			CHECK(r.u.audio_frame.payload[59] == 0x5a);
		}
	}
	REQUIRE(n >= 4);
	CHECK_EQ_INT(kinds[0], PPS_WIRE_CLOCK_PONG);
	CHECK_EQ_INT(kinds[1], PPS_WIRE_AUDIO_FRAME);
	CHECK_EQ_INT(kinds[2], PPS_WIRE_AUDIO_FRAME);
	CHECK_EQ_INT(kinds[3], PPS_WIRE_WINDOW_BEGIN);
	pps_sched_get_stats(s, &st);
	CHECK_EQ_INT(st.audio_sent, 2);
	CHECK_EQ_INT(st.audio_late, 1);
	CHECK_EQ_INT(st.audio_bytes, 120);

	/* Overflow: the oldest goes. */
	for (uint32_t i = 0; i < PPS_SCHED_MAX_AUDIO + 2; i++) {
		frame.seq = 100 + i;
		frame.capture_us = 1000000;
		CHECK_EQ_INT(pps_sched_push_audio(s, &frame), 0);
	}
	pps_sched_get_stats(s, &st);
	CHECK_EQ_INT(st.audio_overflow, 2);
	/* Refusals: a payload over a slot. */
	frame.payload_len = PPS_SCHED_MAX_AUDIO_BYTES + 1;
	CHECK_EQ_INT(pps_sched_push_audio(s, &frame), -EMSGSIZE);
	frame.payload_len = 0;
	CHECK_EQ_INT(pps_sched_push_audio(s, &frame), -EMSGSIZE);
	pps_sched_get_stats(s, &st);
	CHECK_EQ_INT(st.audio_refused, 2);
	CHECK(pps_sched_has_data(s));
	pps_wire_parser_free(p);
	free_windows(&list);
	pps_sched_free(s);

	/* A client whose record limit is below a frame's record refuses it. */
	{
		pps_sched_params_t params = {.latency_budget_us = 1000000,
		                             .max_windows = 8,
		                             .max_record_bytes = PPS_WIRE_MIN_MAX_RECORD_BYTES};

		s = pps_sched_new(&params);
		REQUIRE(s);
		frame.payload_len = PPS_WIRE_MIN_MAX_RECORD_BYTES;
		CHECK_EQ_INT(pps_sched_push_audio(s, &frame), -EMSGSIZE);
		frame.payload_len = PPS_WIRE_MIN_MAX_RECORD_BYTES - PPS_WIRE_AUDIO_OVERHEAD_BYTES;
		CHECK_EQ_INT(pps_sched_push_audio(s, &frame), 0);
		pps_sched_free(s);
	}
}

/* Drains @s at @now_us; counts whole ADUs per (temporal, quality) layer. */
static void
drain_count(pps_sched_t *s, int64_t now_us, unsigned adus[4][4], unsigned *ends)
{
	uint8_t buf[1500];
	size_t len;
	bool push;
	pps_wire_parser_t *p = pps_wire_parser_new(PPS_WIRE_MAX_RECORD_BYTES);

	REQUIRE(p);
	while (pps_sched_next_packet(s, now_us, 1448, buf, &len, &push) == 1) {
		const uint8_t *data = buf;
		pps_wire_record_t r;

		while (pps_wire_parser_next(p, &data, &len, &r) == 0) {
			const pps_wire_adu_fragment_t *f = &r.u.adu_fragment;

			if (r.kind == PPS_WIRE_WINDOW_END)
				(*ends)++;
			if (r.kind == PPS_WIRE_ADU_FRAGMENT &&
			    f->offset + f->payload_len == f->total_bytes)
				adus[f->temporal_layer][f->quality_layer]++;
		}
	}
	pps_wire_parser_free(p);
}

/* With a base grace, windows past their deadline still deliver their base
 * anchors (quality 0, temporal 0) and nothing else, until the grace ends;
 * without one, or after it, everything unsent is dropped. */
/* A relayed window that reaches the relay past its deadline (it crossed a
 * slow first hop) still gets its base anchors out within the grace, also
 * those that come after the deadline. */
static void
test_sched_relayed_late(void)
{
	pps_sched_params_t params = {
	    .latency_budget_us = 100000, .max_windows = 64, .base_grace_us = 500000};
	window_list_t list;
	pps_sched_t *s = pps_sched_new(&params);
	unsigned adus[4][4] = {{0}}, anchors = 0, ends = 0;
	const pps_window_t *w;
	pps_window_t *r;
	size_t n;
	int64_t now;

	REQUIRE(s);
	make_windows(&list, 12, 4, 3, 2, 60, PPS_PRIORITY_TEMPORAL_FIRST, 11, 1.0);
	w = list.windows[0];
	n = pps_window_adu_count(w);
	r = pps_window_new_relayed_open(pps_window_id(w), pps_window_first_capture_us(w),
	                                pps_window_frames(w), pps_window_first_adu_id(w), n,
	                                pps_window_bytes(w));
	REQUIRE(r);
	for (size_t a = 0; a < n; a++) {
		const pps_adu_info_t *info = pps_adu_info(pps_window_adu(w, a));

		anchors += info->quality_layer == 0 && info->temporal_layer == 0;
	}
	REQUIRE(anchors >= 1);
	/* Its first ADU in, then the deadline passes with the rest to come. */
	CHECK_EQ_INT(pps_window_relayed_add(r, pps_adu_ref((pps_adu_t *)pps_window_adu(w, 0))), 0);
	pps_sched_push_window(s, r);
	now = pps_window_first_capture_us(w) + 100000 + 1;
	CHECK_EQ_INT(pps_sched_expire(s, now), 1);
	drain_count(s, now, adus, &ends);
	CHECK_EQ_INT(ends, 0); /* waiting, late, for what may be anchors */
	for (size_t a = 1; a < n; a++)
		CHECK_EQ_INT(
		    pps_window_relayed_add(r, pps_adu_ref((pps_adu_t *)pps_window_adu(w, a))), 0);
	now += 1000;
	drain_count(s, now, adus, &ends);
	/* Every base anchor went out, nothing else (past the deadline). */
	CHECK_EQ_INT(adus[0][0], anchors);
	for (int t = 0; t < 4; t++)
		for (int q = 0; q < 4; q++)
			if (t || q)
				CHECK_EQ_INT(adus[t][q], 0);
	CHECK_EQ_INT(ends, 1);
	pps_window_unref(r);
	pps_sched_free(s);
	free_windows(&list);
}

static void
test_sched_base_grace(void)
{
	pps_sched_params_t params = {
	    .latency_budget_us = 100000, .max_windows = 64, .base_grace_us = 500000};
	window_list_t list;
	pps_sched_t *s = pps_sched_new(&params);
	unsigned adus[4][4] = {{0}}, anchors = 0, ends = 0;
	pps_sched_stats_t st;
	int64_t now;

	REQUIRE(s);
	make_windows(&list, 12, 4, 3, 2, 60, PPS_PRIORITY_TEMPORAL_FIRST, 11, 1.0);
	REQUIRE(list.n == 3);
	for (size_t i = 0; i < list.n; i++) {
		pps_sched_push_window(s, list.windows[i]);
		for (size_t a = 0; a < pps_window_adu_count(list.windows[i]); a++) {
			const pps_adu_info_t *info =
			    pps_adu_info(pps_window_adu(list.windows[i], a));

			anchors += info->quality_layer == 0 && info->temporal_layer == 0;
		}
	}
	REQUIRE(anchors >= 3);
	CHECK(!pps_sched_behind(s));
	/* Every deadline passed before anything was sent (a stalled socket). */
	now = pps_window_first_capture_us(list.windows[2]) + 100000 + 1;
	CHECK_EQ_INT(pps_sched_expire(s, now), 3);
	CHECK(pps_sched_behind(s)); /* base anchors late, still to send */
	/* The timer's next event is the end of the first window's grace. */
	CHECK_EQ_INT(pps_sched_next_deadline_us(s),
	             pps_window_first_capture_us(list.windows[0]) + 100000 + 500000);
	drain_count(s, now, adus, &ends);
	CHECK_EQ_INT(adus[0][0], anchors);
	for (int t = 0; t < 4; t++)
		for (int q = 0; q < 4; q++)
			if (t || q)
				CHECK_EQ_INT(adus[t][q], 0);
	CHECK_EQ_INT(ends, 3);
	CHECK(!pps_sched_behind(s)); /* sent and ended: caught up */
	pps_sched_get_stats(s, &st);
	CHECK_EQ_INT(st.windows_base_late, 3);
	CHECK_EQ_INT(st.windows_partial, 3);
	CHECK_EQ_INT(st.adus_undecodable, 0);
	pps_sched_free(s);

	/* Past the grace: nothing goes out, every window is dropped. */
	s = pps_sched_new(&params);
	REQUIRE(s);
	for (size_t i = 0; i < list.n; i++)
		pps_sched_push_window(s, list.windows[i]);
	memset(adus, 0, sizeof(adus));
	ends = 0;
	now = pps_window_first_capture_us(list.windows[2]) + 100000 + 500000;
	CHECK_EQ_INT(pps_sched_expire(s, now), 3);
	drain_count(s, now, adus, &ends);
	CHECK_EQ_INT(adus[0][0], 0);
	CHECK_EQ_INT(ends, 3);
	pps_sched_get_stats(s, &st);
	CHECK_EQ_INT(st.windows_dropped, 3);
	CHECK_EQ_INT(st.windows_base_late, 0);
	pps_sched_free(s);
	free_windows(&list);
}

/* ADU info -> ADU_FRAGMENT -> bytes -> ADU_FRAGMENT -> ADU info is the identity,
 * and the fragment's own fields (window, priority, offsets) are the caller's. */
static void
test_adu_info_wire_round_trip(void)
{
	pps_adu_info_t info, back;
	pps_wire_record_t r, parsed;
	uint8_t payload[3] = {1, 2, 3};
	uint8_t buf[256];
	size_t n = 0;
	const uint8_t *data = buf;
	pps_wire_parser_t *p = pps_wire_parser_new(PPS_WIRE_MAX_RECORD_BYTES);

	REQUIRE(p);
	memset(&info, 0, sizeof(info));
	info.id = 0xfedcba98u;
	info.frame_index = 123456;
	info.capture_us = -1700000000123456LL;
	info.decode_order = 77;
	info.frame_type = PPS_ADU_FRAME_BREF;
	info.temporal_layer = PPS_ADU_MAX_TEMPORAL_LAYERS - 1;
	info.quality_layer = PPS_ADU_MAX_QUALITY_LAYERS - 1;
	info.dep_count = PPS_ADU_MAX_DEPS;
	for (unsigned i = 0; i < PPS_ADU_MAX_DEPS; i++)
		info.deps[i] = 1000u + i * 7;

	memset(&r, 0, sizeof(r));
	r.kind = PPS_WIRE_ADU_FRAGMENT;
	r.u.adu_fragment.window_id = 42;
	r.u.adu_fragment.priority = 9;
	r.u.adu_fragment.offset = 5;
	r.u.adu_fragment.total_bytes = 8;
	r.u.adu_fragment.payload_len = sizeof(payload);
	r.u.adu_fragment.payload = payload;
	pps_adu_info_to_wire(&info, &r.u.adu_fragment);
	CHECK_EQ_INT(r.u.adu_fragment.window_id, 42);
	CHECK_EQ_INT(r.u.adu_fragment.priority, 9);
	CHECK_EQ_INT(r.u.adu_fragment.offset, 5);
	CHECK_EQ_INT(r.u.adu_fragment.adu_id, info.id);
	CHECK_EQ_INT(r.u.adu_fragment.deps[PPS_ADU_MAX_DEPS - 1], info.deps[PPS_ADU_MAX_DEPS - 1]);

	REQUIRE(pps_wire_encode(&r, buf, sizeof(buf), &n) == 0);
	REQUIRE(pps_wire_parser_next(p, &data, &n, &parsed) == 0);
	REQUIRE(parsed.kind == PPS_WIRE_ADU_FRAGMENT);
	memset(&back, 0xa5, sizeof(back));
	pps_adu_info_from_wire(&parsed.u.adu_fragment, &back);
	CHECK(memcmp(&back, &info, sizeof(info)) == 0);
	CHECK_EQ_INT(back.capture_us, info.capture_us);
	CHECK_EQ_INT(back.frame_type, info.frame_type);

	/* Fewer deps: the unused entries come back zero. */
	info.dep_count = 1;
	memset(info.deps + 1, 0, sizeof(info.deps) - sizeof(info.deps[0]));
	pps_adu_info_to_wire(&info, &r.u.adu_fragment);
	pps_adu_info_from_wire(&r.u.adu_fragment, &back);
	CHECK(memcmp(&back, &info, sizeof(info)) == 0);
	pps_wire_parser_free(p);
}

/* ---- deadlines per ADU ------------------------------------------------- */

/* A window of frames 1 and 2 (windows of 2), each a base and an enhancement,
 * anchors only: frame 1's base 10 and enhancement 11, frame 2's 12 and 13.
 * Send order (temporal-first): 10, 12, 11, 13. */
static pps_window_t *
two_frame_window(window_list_t *list, size_t base_bytes, size_t enh1_bytes, size_t enh2_bytes)
{
	pps_windower_t *wr =
	    pps_windower_new(2, PPS_PRIORITY_TEMPORAL_FIRST, collect_window_cb, list);
	pps_adu_info_t infos[4] = {
	    {.id = 10, .frame_index = 1, .frame_type = PPS_ADU_FRAME_P},
	    {.id = 11,
	     .frame_index = 1,
	     .frame_type = PPS_ADU_FRAME_P,
	     .quality_layer = 1,
	     .dep_count = 1,
	     .deps = {10}},
	    {.id = 12,
	     .frame_index = 2,
	     .frame_type = PPS_ADU_FRAME_P,
	     .dep_count = 1,
	     .deps = {10}},
	    {.id = 13,
	     .frame_index = 2,
	     .frame_type = PPS_ADU_FRAME_P,
	     .quality_layer = 1,
	     .dep_count = 2,
	     .deps = {12, 11}},
	};
	size_t sizes[4] = {base_bytes, enh1_bytes, base_bytes, enh2_bytes};
	uint8_t data[16384];

	REQUIRE(wr);
	for (size_t k = 0; k < 4; k++) {
		pps_adu_t *adu;

		infos[k].capture_us = 1000000 + (int64_t)infos[k].frame_index * FRAME_US;
		infos[k].decode_order = (uint32_t)k;
		REQUIRE(sizes[k] <= sizeof(data));
		for (size_t i = 0; i < sizes[k]; i++)
			data[i] = (uint8_t)(infos[k].id * 31 + i);
		adu = pps_adu_new(&infos[k], data, sizes[k]);
		REQUIRE(adu);
		CHECK_EQ_INT(pps_windower_add(wr, adu), 0);
	}
	CHECK_EQ_INT(pps_windower_frames_done(wr, 2), 0);
	pps_windower_free(wr);
	REQUIRE(list->n == 1);
	return list->windows[0];
}

static pps_sched_t *
new_sched_deadlines(int64_t budget_us, pps_deadlines_t deadlines)
{
	pps_sched_params_t params = {
	    .latency_budget_us = budget_us, .max_windows = 8, .deadlines = deadlines};
	pps_sched_t *s = pps_sched_new(&params);

	REQUIRE(s);
	return s;
}

/* Sends at @now_us until ADU @id is whole at the receiver (or nothing is left). */
static void
send_until(pps_sched_t *s, receiver_t *rx, int64_t now_us, uint32_t id)
{
	uint8_t buf[1500];
	size_t len;
	bool push;

	while (rx->got[id % 4096] == 0 || rx->got[id % 4096] != rx->size[id % 4096]) {
		if (pps_sched_next_packet(s, now_us, 1448, buf, &len, &push) != 1)
			break;
		receive_packet(rx, buf, len, now_us);
	}
}

static uint64_t
stats_adus(const pps_sched_stats_t *st, bool dropped)
{
	uint64_t n = 0;

	for (int t = 0; t < PPS_ADU_MAX_TEMPORAL_LAYERS; t++)
		for (int q = 0; q < PPS_ADU_MAX_QUALITY_LAYERS; q++)
			n += dropped ? st->layer[t][q].adus_dropped : st->layer[t][q].adus_sent;
	return n;
}

/* Each ADU's due capture is the earliest among the frames decoded from it
 * on: with a B frame (frame 1 decoded after its anchor, frame 2) the
 * anchor's data is due with frame 1; frame 2's closing filler (decoded
 * last) with frame 2 alone. */
static void
test_window_due_capture(void)
{
	window_list_t list = {.n = 0};
	pps_windower_t *wr =
	    pps_windower_new(2, PPS_PRIORITY_TEMPORAL_FIRST, collect_window_cb, &list);
	pps_adu_info_t infos[3] = {
	    {.id = 20, .frame_index = 2, .frame_type = PPS_ADU_FRAME_P},
	    {.id = 21,
	     .frame_index = 1,
	     .frame_type = PPS_ADU_FRAME_B,
	     .temporal_layer = 1,
	     .dep_count = 1,
	     .deps = {20}},
	    {.id = 22,
	     .frame_index = 2,
	     .frame_type = PPS_ADU_FRAME_P,
	     .dep_count = 1,
	     .deps = {20}},
	};
	uint8_t data[16] = {0};
	pps_window_t *w;

	REQUIRE(wr);
	for (size_t k = 0; k < 3; k++) {
		infos[k].capture_us = 1000000 + (int64_t)infos[k].frame_index * FRAME_US;
		infos[k].decode_order = (uint32_t)k;
		CHECK_EQ_INT(pps_windower_add(wr, pps_adu_new(&infos[k], data, sizeof(data))), 0);
	}
	CHECK_EQ_INT(pps_windower_frames_done(wr, 2), 0);
	REQUIRE(list.n == 1);
	w = list.windows[0];
	for (size_t i = 0; i < pps_window_adu_count(w); i++) {
		uint32_t id = pps_adu_info(pps_window_adu(w, i))->id;
		int64_t want = 1000000 + (id == 22 ? 2 : 1) * FRAME_US;

		CHECK_EQ_INT(pps_window_adu_due_capture_us(w, i), want);
	}
	CHECK_EQ_INT(pps_window_adu_due_capture_us(w, 3), INT64_MAX);
	pps_windower_free(wr);
	free_windows(&list);
}

/* Per ADU: frame 2's enhancement still goes out after frame 1's deadline,
 * within its own; per window it is dropped at frame 1's. */
static void
test_sched_adu_deadline_later_frame(void)
{
	for (int mode = 0; mode < 2; mode++) {
		window_list_t list = {.n = 0};
		pps_window_t *w = two_frame_window(&list, 200, 3000, 3000);
		pps_sched_t *s =
		    new_sched_deadlines(100000, mode ? PPS_DEADLINES_ADU : PPS_DEADLINES_WINDOW);
		int64_t d1 = 1000000 + FRAME_US + 100000, d2 = d1 + FRAME_US;
		receiver_t rx;
		pps_sched_stats_t st;
		bool pushed;

		memset(&rx, 0, sizeof(rx));
		pps_sched_push_window(s, w);
		CHECK_EQ_INT(pps_sched_next_deadline_us(s), d1);
		/* Before frame 1's deadline: frame 1 whole, frame 2's base. */
		send_until(s, &rx, d1 - 1, 11);
		CHECK(adu_intact(&rx, 10) && adu_intact(&rx, 11) && adu_intact(&rx, 12));
		CHECK(!adu_intact(&rx, 13));
		/* Per ADU only frame 2's enhancement is left: due at its own deadline. */
		CHECK_EQ_INT(pps_sched_next_deadline_us(s), mode ? d2 : d1);
		CHECK_EQ_INT(pps_sched_expire(s, d1 + 1000), mode ? 0 : 1);
		drain(s, &rx, d1 + 1000, &pushed);
		CHECK_EQ_INT(rx.ends, 1);
		CHECK(adu_intact(&rx, 13) == (mode == 1));
		pps_sched_get_stats(s, &st);
		CHECK_EQ_INT(st.windows_extended, mode ? 1 : 0);
		CHECK_EQ_INT(st.windows_complete, mode ? 1 : 0);
		CHECK_EQ_INT(st.windows_partial, mode ? 0 : 1);
		CHECK_EQ_INT(st.layer[0][1].adus_sent, mode ? 2 : 1);
		CHECK_EQ_INT(st.layer[0][1].adus_dropped, mode ? 0 : 1);
		CHECK_EQ_INT(stats_adus(&st, false) + stats_adus(&st, true), 4);
		CHECK_EQ_INT(rx.last_end.adus_sent + rx.last_end.adus_dropped, 4);
		free_windows(&list);
		pps_sched_free(s);
		receiver_free(&rx);
	}
}

/* Per ADU: an ADU still unsent at its own deadline is dropped then; and one of
 * frame 1 unsent at frame 1's deadline ends the window there, frame 2's data
 * with it (the client decodes frame 2 after it: it would wait for the
 * WINDOW_END). */
static void
test_sched_adu_deadline_drop(void)
{
	for (int c = 0; c < 2; c++) {
		window_list_t list = {.n = 0};
		pps_window_t *w = two_frame_window(&list, 200, 3000, 3000);
		pps_sched_t *s = new_sched_deadlines(100000, PPS_DEADLINES_ADU);
		int64_t d1 = 1000000 + FRAME_US + 100000, d2 = d1 + FRAME_US;
		receiver_t rx;
		pps_sched_stats_t st;
		bool pushed;

		memset(&rx, 0, sizeof(rx));
		pps_sched_push_window(s, w);
		/* c 0: frame 1 whole before d1; c 1: only the bases. */
		send_until(s, &rx, d1 - 1, c == 0 ? 11 : 12);
		CHECK(adu_intact(&rx, 11) == (c == 0));
		if (c == 0) {
			CHECK_EQ_INT(pps_sched_next_deadline_us(s), d2);
			CHECK_EQ_INT(pps_sched_expire(s, d2 - 1), 0);
			CHECK_EQ_INT(pps_sched_expire(s, d2), 1);
			drain(s, &rx, d2, &pushed);
		} else {
			CHECK_EQ_INT(pps_sched_next_deadline_us(s), d1);
			CHECK_EQ_INT(pps_sched_expire(s, d1), 1);
			drain(s, &rx, d1, &pushed);
		}
		CHECK_EQ_INT(rx.ends, 1);
		CHECK(!adu_intact(&rx, 13));
		CHECK_EQ_INT(pps_sched_next_deadline_us(s), INT64_MAX);
		pps_sched_get_stats(s, &st);
		CHECK_EQ_INT(st.windows_partial, 1);
		CHECK_EQ_INT(st.windows_extended, 0);
		CHECK_EQ_INT(st.adus_predicted, 0);
		CHECK_EQ_INT(st.layer[0][0].adus_sent, 2);
		CHECK_EQ_INT(st.layer[0][1].adus_sent, c == 0 ? 1 : 0);
		CHECK_EQ_INT(st.layer[0][1].adus_dropped, c == 0 ? 1 : 2);
		CHECK_EQ_INT(rx.last_end.adus_dropped, c == 0 ? 1 : 2);
		free_windows(&list);
		pps_sched_free(s);
		receiver_free(&rx);
	}
}

/* Predictive drop: an enhancement that cannot reach the client by its
 * deadline at the path's rate is dropped before it is written, counted as
 * dropped (and predicted); one that can is sent; base anchors are never
 * dropped on a guess. */
static void
test_sched_predictive_drop(void)
{
	for (int c = 0; c < 3; c++) {
		window_list_t list = {.n = 0};
		/* Frame 2's enhancement: 10 000 bytes. */
		pps_window_t *w = two_frame_window(&list, 200, 1000, 10000);
		pps_sched_t *s = new_sched_deadlines(100000, c == 2 ? PPS_DEADLINES_ADU
		                                                    : PPS_DEADLINES_PREDICTIVE);
		int64_t d1 = 1000000 + FRAME_US + 100000;
		int64_t now = d1 - 50000; /* 50 ms before frame 1's deadline, 83 before frame 2's */
		/* c 0: 1 Mbit/s, 10 ms one way: frame 1's enhancement arrives in
		 * about 21 ms, frame 2's in about 100 ms: too late. c 1: 10 Mbit/s,
		 * both in time. c 2: per ADU without prediction: sent. */
		pps_sched_path_t path = {.rate_bps = c == 0 ? 1000000 : 10000000,
		                         .queued_bytes = 0,
		                         .one_way_us = 10000};
		receiver_t rx;
		pps_sched_stats_t st;
		bool pushed;

		memset(&rx, 0, sizeof(rx));
		pps_sched_push_window(s, w);
		pps_sched_set_path(s, &path);
		drain(s, &rx, now, &pushed);
		/* The window ended at once, before any deadline. */
		CHECK_EQ_INT(rx.ends, 1);
		CHECK(adu_intact(&rx, 10) && adu_intact(&rx, 11) && adu_intact(&rx, 12));
		CHECK(adu_intact(&rx, 13) == (c != 0));
		pps_sched_get_stats(s, &st);
		CHECK_EQ_INT(st.adus_predicted, c == 0 ? 1 : 0);
		CHECK_EQ_INT(st.layer[0][1].adus_dropped, c == 0 ? 1 : 0);
		CHECK_EQ_INT(st.layer[0][1].bytes_dropped, c == 0 ? 10000 : 0);
		CHECK_EQ_INT(st.windows_partial, c == 0 ? 1 : 0);
		CHECK_EQ_INT(st.windows_complete, c == 0 ? 0 : 1);
		CHECK_EQ_INT(stats_adus(&st, false) + stats_adus(&st, true), 4);
		free_windows(&list);
		pps_sched_free(s);
		receiver_free(&rx);
	}
	/* What is queued in the kernel counts: at 10 Mbit/s behind 200 000
	 * queued bytes (160 ms) only the base anchors go; frame 2's enhancement
	 * is undecodable once frame 1's was dropped. */
	{
		window_list_t list = {.n = 0};
		pps_window_t *w = two_frame_window(&list, 200, 3000, 3000);
		pps_sched_t *s = new_sched_deadlines(100000, PPS_DEADLINES_PREDICTIVE);
		int64_t d1 = 1000000 + FRAME_US + 100000;
		pps_sched_path_t path = {
		    .rate_bps = 10000000, .queued_bytes = 200000, .one_way_us = 10000};
		receiver_t rx;
		pps_sched_stats_t st;
		bool pushed;

		memset(&rx, 0, sizeof(rx));
		pps_sched_push_window(s, w);
		pps_sched_set_path(s, &path);
		drain(s, &rx, d1 - 50000, &pushed);
		CHECK_EQ_INT(rx.ends, 1);
		CHECK(adu_intact(&rx, 10) && adu_intact(&rx, 12));
		CHECK(!adu_intact(&rx, 11) && !adu_intact(&rx, 13));
		pps_sched_get_stats(s, &st);
		CHECK_EQ_INT(st.adus_predicted, 1);
		CHECK_EQ_INT(st.adus_undecodable, 1);
		CHECK_EQ_INT(st.layer[0][0].adus_sent, 2);
		CHECK_EQ_INT(st.layer[0][1].adus_dropped, 2);
		free_windows(&list);
		pps_sched_free(s);
		receiver_free(&rx);
	}
}

/*
 * A link of @bytes_per_ms under the regulator: 12 GOPs of 30 frames, windows
 * of 2 (pushed once their last frame is captured), P only, two qualities,
 * a 100 ms budget; the regulator told the path carries @path_bps (0: told
 * nothing) and checks restarts against @fit_pct of the encoder's rate.
 * Counts the enhancement IDRs of which anything went out and the base ADUs
 * that went out whole.
 */
static void
run_slow_link_fit(unsigned backoff_max, unsigned bytes_per_ms, unsigned fit_pct, uint64_t path_bps,
                  unsigned *idr_started, unsigned *idr_whole, unsigned *base_whole,
                  unsigned *base_total, pps_sched_stats_t *st)
{
	window_list_t list;
	pps_sched_params_t params = {.latency_budget_us = 100000,
	                             .max_windows = 64,
	                             .base_grace_us = 1000000,
	                             .restart_backoff_max = backoff_max,
	                             .restart_fit_pct = fit_pct};
	pps_sched_t *s = pps_sched_new(&params);
	receiver_t rx;
	uint8_t buf[1500];
	size_t len, pushed = 0;
	bool push;
	int64_t credit = 0;

	REQUIRE(s);
	memset(&rx, 0, sizeof(rx));
	make_windows(&list, 360, 2, 1, 2, 30, PPS_PRIORITY_TEMPORAL_FIRST, 1, 0.25);
	if (path_bps)
		pps_sched_set_path(s,
		                   &(pps_sched_path_t){.rate_bps = path_bps, .one_way_us = 10000});
	for (int64_t now = 1000000; now < 1000000 + 13 * 1000000; now += 1000) {
		while (pushed < list.n &&
		       pps_window_first_capture_us(list.windows[pushed]) +
		               (int64_t)(pps_window_frames(list.windows[pushed]) - 1) * FRAME_US <=
		           now)
			pps_sched_push_window(s, list.windows[pushed++]);
		credit += bytes_per_ms;
		if (credit > 1500)
			credit = 1500; /* an idle link banks no more than a packet */
		while (credit > 0 && pps_sched_next_packet(s, now, 1448, buf, &len, &push) == 1) {
			receive_packet(&rx, buf, len, now);
			credit -= (int64_t)len;
		}
	}
	*idr_started = *idr_whole = *base_whole = *base_total = 0;
	for (size_t i = 0; i < list.n; i++) {
		for (size_t a = 0; a < pps_window_adu_count(list.windows[i]); a++) {
			const pps_adu_info_t *info =
			    pps_adu_info(pps_window_adu(list.windows[i], a));

			if (info->quality_layer == 0) {
				(*base_total)++;
				*base_whole += adu_intact(&rx, info->id);
			} else if (info->frame_type == PPS_ADU_FRAME_IDR) {
				*idr_started += rx.data[info->id % 4096] != NULL;
				*idr_whole += adu_intact(&rx, info->id);
			}
		}
	}
	pps_sched_get_stats(s, st);
	free_windows(&list);
	pps_sched_free(s);
	receiver_free(&rx);
}

static void
run_slow_link(unsigned backoff_max, unsigned bytes_per_ms, unsigned *idr_started,
              unsigned *idr_whole, unsigned *base_whole, unsigned *base_total,
              pps_sched_stats_t *st)
{
	run_slow_link_fit(backoff_max, bytes_per_ms, 0, 0, idr_started, idr_whole, base_whole,
	                  base_total, st);
}

/* An enhancement layer whose IDR the path cannot carry in time is not tried
 * at every GOP: after each cut restart the client skips 1, 2, 4 IDRs. On a
 * path that carries it, no IDR is ever skipped. */
static void
test_sched_restart_backoff(void)
{
	unsigned started, whole, base_whole, base_total;
	pps_sched_stats_t st;

	/* 80 bytes/ms (640 kbit/s): the base and the enhancement's P pictures
	 * fit, an IDR picture's enhancement (about 5 kB) does not within the
	 * budget. Without a backoff every one of the 12 is started and cut. */
	run_slow_link(0, 80, &started, &whole, &base_whole, &base_total, &st);
	CHECK_EQ_INT(started, 12);
	CHECK_EQ_INT(whole, 0);
	CHECK_EQ_INT(base_whole, base_total);
	CHECK_EQ_INT(st.adus_restart_skipped, 0);
	/* With it: tried at GOPs 0, 2, 5 and 10 (skipping 1, then 2, then 4). */
	run_slow_link(8, 80, &started, &whole, &base_whole, &base_total, &st);
	CHECK_EQ_INT(started, 4);
	CHECK_EQ_INT(whole, 0);
	CHECK_EQ_INT(base_whole, base_total);
	CHECK_EQ_INT(st.adus_restart_skipped, 8);
	/* The most it skips is restart_backoff_max: 1, 2, 2, 2 ... */
	run_slow_link(2, 80, &started, &whole, &base_whole, &base_total, &st);
	CHECK_EQ_INT(started, 5); /* GOPs 0, 2, 5, 8, 11 */
	CHECK_EQ_INT(st.adus_restart_skipped, 7);
	/* A path that carries the layer: every IDR goes out whole, none skipped. */
	run_slow_link(8, 1000, &started, &whole, &base_whole, &base_total, &st);
	CHECK_EQ_INT(started, 12);
	CHECK_EQ_INT(whole, 12);
	CHECK_EQ_INT(base_whole, base_total);
	CHECK_EQ_INT(st.adus_restart_skipped, 0);
}

/* A path whose estimate is below what the encoder makes of the base and the
 * enhancement gets no enhancement IDR once that rate is known (after the
 * first 8 windows: GOP 0's IDR still goes); one whose estimate covers it
 * restarts as the backoff says. */
static void
test_sched_restart_fit(void)
{
	unsigned started, whole, base_whole, base_total;
	pps_sched_stats_t st;

	run_slow_link_fit(8, 80, 50, 100000, &started, &whole, &base_whole, &base_total, &st);
	CHECK_EQ_INT(started, 1);
	CHECK_EQ_INT(base_whole, base_total);
	/* GOP 0's cut restart backs off over GOP 1; the other ten do not fit. */
	CHECK_EQ_INT(st.adus_restart_skipped, 1);
	CHECK_EQ_INT(st.adus_restart_unfit, 10);
	/* The same estimate without the check: the backoff's 4 tries. */
	run_slow_link_fit(8, 80, 0, 100000, &started, &whole, &base_whole, &base_total, &st);
	CHECK_EQ_INT(started, 4);
	CHECK_EQ_INT(st.adus_restart_unfit, 0);
	/* An estimate far above the encoder's rate: the check lets every try by. */
	run_slow_link_fit(8, 80, 50, 100000000, &started, &whole, &base_whole, &base_total, &st);
	CHECK_EQ_INT(started, 4);
	CHECK_EQ_INT(st.adus_restart_unfit, 0);
	/* A path that carries the layer, told its rate: every IDR whole. */
	run_slow_link_fit(8, 1000, 50, 8000000, &started, &whole, &base_whole, &base_total, &st);
	CHECK_EQ_INT(started, 12);
	CHECK_EQ_INT(whole, 12);
	CHECK_EQ_INT(st.adus_restart_unfit, 0);
}

int
main(int argc, char **argv)
{
	pps_test_init(&argc, argv);
	PPS_TEST_RUN(test_adu_info_wire_round_trip);
	PPS_TEST_RUN(test_policy_names);
	PPS_TEST_RUN(test_window_index);
	PPS_TEST_RUN(test_windower);
	PPS_TEST_RUN(test_window_relayed);
	PPS_TEST_RUN(test_window_relayed_open);
	PPS_TEST_RUN(test_sched_relayed_late);
	PPS_TEST_RUN(test_priority_property);
	PPS_TEST_RUN(test_priority_policies);
	PPS_TEST_RUN(test_sched_unsent_since);
	PPS_TEST_RUN(test_sched_complete);
	PPS_TEST_RUN(test_sched_rest);
	PPS_TEST_RUN(test_sched_mss_changes);
	PPS_TEST_RUN(test_sched_record_limit);
	PPS_TEST_RUN(test_sched_deadline);
	PPS_TEST_RUN(test_sched_decodability);
	PPS_TEST_RUN(test_sched_enhancement_needs_base);
	PPS_TEST_RUN(test_windower_early);
	PPS_TEST_RUN(test_windower_anchor_windows);
	PPS_TEST_RUN(test_windower_disposable_p);
	PPS_TEST_RUN(test_sched_overload);
	PPS_TEST_RUN(test_sched_control);
	PPS_TEST_RUN(test_sched_audio);
	PPS_TEST_RUN(test_sched_base_grace);
	PPS_TEST_RUN(test_window_due_capture);
	PPS_TEST_RUN(test_sched_adu_deadline_later_frame);
	PPS_TEST_RUN(test_sched_adu_deadline_drop);
	PPS_TEST_RUN(test_sched_predictive_drop);
	PPS_TEST_RUN(test_sched_restart_backoff);
	PPS_TEST_RUN(test_sched_restart_fit);
	return pps_test_result();
}
