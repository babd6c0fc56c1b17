/* SPDX-License-Identifier: MIT */
/*
 * codec suite: encode a generated 320x240 sequence (3 temporal x 2 quality
 * layers, windows of 4, IDR every 32 frames), drop each droppable class of
 * ADUs and check what the decoder shows. Usage: test-codec CASE.
 *
 * The holdback cases encode their own sequences and check that a window's
 * frames come out of the decoder inside the push of its last ADU.
 *
 * Stated bound: a frame decoded from a reduced set of layers is within
 * MARGIN_DB of the same frame decoded from the base alone (never worse than
 * the base by more than that), so it is never garbage.
 */
#include "pps-codec-internal.h"
#include "pps-codec-testutil.h"
#include "pps-test.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define W         320
#define H         240
#define FRAMES    64
#define MARGIN_DB 0.5
#define T0_US     1700000000000000LL

static pps_adu_t *adus[FRAMES * 4];
static int adu_count;
static int emitted_in_call[FRAMES * 4]; /* encode call (frame) that emitted each ADU */
static int current_call;
static pps_stream_params_t stream;
static pps_frame_t *source[FRAMES];

static void
adu_cb(pps_adu_t *adu, void *user)
{
	(void)user;
	emitted_in_call[adu_count] = current_call;
	adus[adu_count++] = adu;
}

static void
encode_sequence(void)
{
	pps_encoder_params_t p = {
	    .width = W,
	    .height = H,
	    .fps = 30,
	    .temporal_layers = 3,
	    .quality_layers = 2,
	    .base_scale = 2,
	    .gop_frames = 32,
	    .window_frames = 4,
	    .preset = "veryfast",
	    .threads = 1,
	    .base_crf = 30,
	    .base_vbv_kbps = 0,
	    .enhancement_crf = 26,
	    .enhancement_vbv_kbps = 0,
	};
	pps_encoder_t *e = pps_encoder_new(&p);

	if (!e) {
		fprintf(stderr, "pps_encoder_new: %s\n", strerror(errno));
		exit(1);
	}
	for (int n = 0; n < FRAMES; n++) {
		source[n] = pps_frame_new(W, H);
		pps_testutil_generate(source[n], (uint32_t)n, T0_US + n * 33333LL);
		current_call = n;
		if (pps_encoder_encode(e, source[n], adu_cb, NULL) < 0) {
			fprintf(stderr, "encode failed at %d\n", n);
			exit(1);
		}
		/* Zero delay: after an anchor every frame so far is complete. */
		if (n % 4 == 0 || n % 32 >= 29) /* anchors, and the P run before an IDR */
			CHECK(pps_encoder_frames_complete(e) == (uint32_t)n + 1,
			      "frame %d: complete %u", n, pps_encoder_frames_complete(e));
		else
			CHECK(pps_encoder_frames_complete(e) <= (uint32_t)n, "frame %d early", n);
	}
	pps_encoder_get_stream_params(e, &stream);
	pps_encoder_free(e);
}

typedef struct {
	bool shown[FRAMES];
	bool reported[FRAMES];
	uint32_t flags[FRAMES];
	int layers[FRAMES];
	double psnr[FRAMES];
	bool timecode_ok[FRAMES];
	int count;
	int64_t last_index;
	bool order_ok;
} result_t;

static void
frame_cb(const pps_decoded_frame_t *f, void *user)
{
	result_t *r = user;
	uint32_t n = f->frame_index;
	uint32_t tc_index;
	int64_t tc_us;

	if (n >= FRAMES)
		return;
	if ((int64_t)n <= r->last_index)
		r->order_ok = false;
	r->last_index = n;
	r->count++;
	r->reported[n] = true;
	r->flags[n] = f->flags;
	r->layers[n] = f->quality_layers;
	if (!(f->flags & PPS_DECODER_FRAME_REPEATED)) {
		r->shown[n] = true;
		r->psnr[n] = pps_testutil_psnr_y(&f->picture, source[n]);
		r->timecode_ok[n] = pps_timecode_read(f->picture.planes[0], f->picture.strides[0],
		                                      W, H, &tc_index, &tc_us) == 0 &&
		                    tc_index == n && tc_us == T0_US + n * 33333LL;
	}
}

typedef bool (*keep_fn)(const pps_adu_info_t *info);

static void
decode(keep_fn keep, result_t *r)
{
	pps_decoder_t *d;

	memset(r, 0, sizeof(*r));
	r->last_index = -1;
	r->order_ok = true;
	d = pps_decoder_new(&stream, frame_cb, r);
	if (!d) {
		fprintf(stderr, "pps_decoder_new: %s\n", strerror(errno));
		exit(1);
	}
	for (int i = 0; i < adu_count; i++)
		if (keep(pps_adu_info(adus[i])))
			CHECK(pps_decoder_push(d, adus[i]) == 0, "push %d", i);
	pps_decoder_drain(d);
	pps_decoder_free(d);
	CHECK(r->order_ok, "frames out of display order");
}

static bool
keep_all(const pps_adu_info_t *i)
{
	(void)i;
	return true;
}
static bool
keep_base(const pps_adu_info_t *i)
{
	return i->quality_layer == 0;
}
static bool
keep_no_top(const pps_adu_info_t *i)
{
	return i->temporal_layer < 2;
}
static bool
keep_no_b(const pps_adu_info_t *i)
{
	return i->temporal_layer == 0;
}
static bool
keep_enh_until_30(const pps_adu_info_t *i)
{
	return i->quality_layer == 0 || i->frame_index < 30;
}
/* A base P in the middle of the first GOP, and an enhancement P in the second. */
static bool
keep_no_base_p12(const pps_adu_info_t *i)
{
	return !(i->frame_index == 12 && i->quality_layer == 0);
}
static bool
keep_no_enh_p44(const pps_adu_info_t *i)
{
	return !(i->frame_index == 44 && i->quality_layer == 1);
}

static result_t base_ref;

/* Every shown frame is within MARGIN_DB of the base-only decode of it. */
static void
check_not_worse_than_base(const result_t *r, const char *what)
{
	for (int n = 0; n < FRAMES; n++)
		if (r->shown[n])
			CHECK(r->psnr[n] >= base_ref.psnr[n] - MARGIN_DB,
			      "%s: frame %d %.2f dB vs base %.2f dB", what, n, r->psnr[n],
			      base_ref.psnr[n]);
}

static bool
is_filler(const pps_adu_t *adu)
{
	return pps_adu_data(adu)[0] & PPS_CODEC_ADU_FILLERS_ONLY;
}

static int
case_structure(void)
{
	int last_window = 0, pictures = 0, fillers = 0, minigops = 0;
	uint32_t last_filler[2] = {0, 0}; /* per quality layer */
	int64_t closed = -1;              /* frames <= this had their filler ADUs */

	for (int i = 0; i < adu_count; i++) {
		const pps_adu_info_t *a = pps_adu_info(adus[i]);
		int window = (int)((a->frame_index + 3) / 4);
		bool anchor = a->frame_type <= PPS_ADU_FRAME_P;

		CHECK(i == 0 || a->id > pps_adu_info(adus[i - 1])->id, "ids not increasing");
		CHECK(window >= last_window, "ADU %u of window %d after window %d", a->id, window,
		      last_window);
		last_window = window;
		/* Emitted in the call that input the frame's anchor: no extra delay. */
		CHECK(emitted_in_call[i] ==
		          (anchor ? (int)a->frame_index : (int)((a->frame_index + 3) / 4 * 4)),
		      "frame %u emitted at call %d", a->frame_index, emitted_in_call[i]);
		for (int d = 0; d < a->dep_count; d++) {
			bool found = false;

			for (int j = 0; j < i; j++)
				if (pps_adu_info(adus[j])->id == a->deps[d]) {
					const pps_adu_info_t *b = pps_adu_info(adus[j]);

					found = true;
					CHECK((b->frame_index + 3) / 4 == (uint32_t)window ||
					          b->frame_type <= PPS_ADU_FRAME_P,
					      "dependency into another window's B frame");
					CHECK(b->quality_layer <= a->quality_layer,
					      "dep on a higher layer");
					/* Fillers need their anchor, in their own layer only. */
					if (is_filler(adus[i]))
						CHECK(b->quality_layer == a->quality_layer &&
						          b->frame_index == a->frame_index &&
						          !is_filler(adus[j]),
						      "filler ADU %u depends on ADU %u", a->id,
						      b->id);
				}
			CHECK(found, "ADU %u depends on %u, not emitted before", a->id, a->deps[d]);
		}
		if (is_filler(adus[i])) {
			/* The fillers that close a mini-GOP: their own ADU, after all of
			 * it, two pictures (num_reorder_frames with a B pyramid). */
			fillers++;
			CHECK(a->frame_type == PPS_ADU_FRAME_P && a->temporal_layer == 0 &&
			          a->dep_count == 1,
			      "filler ADU %u: type %u, layer %u, %u deps", a->id, a->frame_type,
			      a->temporal_layer, a->dep_count);
			CHECK((pps_adu_data(adus[i])[0] & PPS_CODEC_ADU_COUNT_MASK) == 2,
			      "filler ADU %u: %u pictures", a->id,
			      pps_adu_data(adus[i])[0] & PPS_CODEC_ADU_COUNT_MASK);
			last_filler[a->quality_layer] = a->id;
			closed = a->frame_index;
			continue;
		}
		pictures++;
		CHECK((int64_t)a->frame_index > closed, "ADU %u of frame %u after its filler ADU",
		      a->id, a->frame_index);
		if (anchor && a->quality_layer == 0)
			minigops++;
		/* The next anchor continues the chain through the filler ADU. */
		if (a->frame_type == PPS_ADU_FRAME_P)
			CHECK(pps_adu_depends_on(adus[i], last_filler[a->quality_layer]),
			      "anchor ADU %u does not depend on filler ADU %u", a->id,
			      last_filler[a->quality_layer]);
		if (a->frame_index % 32 == 0)
			CHECK(a->frame_type == PPS_ADU_FRAME_IDR, "frame %u not IDR",
			      a->frame_index);
		if (a->frame_index % 32 >= 29)
			CHECK(a->frame_type == PPS_ADU_FRAME_P, "frame %u before IDR not P",
			      a->frame_index);
	}
	CHECK(pictures == FRAMES * 2, "%d picture ADUs", pictures);
	CHECK(fillers == minigops * 2, "%d filler ADUs for %d mini-GOPs", fillers, minigops);
	CHECK(stream.temporal_layers == 3 && stream.minigop_frames == 4, "layers");
	return 0;
}

static int
case_full(void)
{
	result_t r;
	double full = 0, base = 0;

	decode(keep_all, &r);
	for (int n = 0; n < FRAMES; n++) {
		CHECK(r.shown[n] && r.flags[n] == 0 && r.layers[n] == 2, "frame %d", n);
		full += r.psnr[n];
		base += base_ref.psnr[n];
	}
	fprintf(stderr, "full %.2f dB, base only %.2f dB\n", full / FRAMES, base / FRAMES);
	CHECK(full / FRAMES >= base / FRAMES + 3.0, "enhancement adds less than 3 dB");
	return 0;
}

static int
case_base_only(void)
{
	for (int n = 0; n < FRAMES; n++) {
		CHECK(base_ref.shown[n] && base_ref.flags[n] == 0 && base_ref.layers[n] == 1,
		      "frame %d", n);
		/* Half resolution loses the 4 px texture: ~25 dB; garbage is < 15. */
		CHECK(base_ref.psnr[n] > 20.0, "frame %d base %.2f dB: garbage", n,
		      base_ref.psnr[n]);
	}
	return 0;
}

static int
case_timecode(void)
{
	int ok = 0;

	for (int n = 0; n < FRAMES; n++)
		ok += base_ref.timecode_ok[n];
	CHECK(ok == FRAMES, "timecodes read from %d of %d base-only frames", ok, FRAMES);
	return 0;
}

static int
case_temporal(keep_fn keep, int max_layer, const char *what)
{
	result_t r;

	decode(keep, &r);
	for (int n = 0; n < FRAMES; n++) {
		int t = n % 4 == 0 || n % 32 >= 29 ? 0 : n % 2 == 0 ? 1 : 2;

		CHECK(r.shown[n] == (t <= max_layer), "%s: frame %d shown %d", what, n, r.shown[n]);
		CHECK(r.flags[n] == 0, "%s: frame %d flags %x", what, n, r.flags[n]);
	}
	check_not_worse_than_base(&r, what);
	return 0;
}

static int
case_enh_from(void)
{
	result_t r;

	decode(keep_enh_until_30, &r);
	for (int n = 0; n < FRAMES; n++) {
		CHECK(r.shown[n] && r.flags[n] == 0, "frame %d", n);
		CHECK(r.layers[n] == (n < 30 ? 2 : 1), "frame %d used %d layers", n, r.layers[n]);
	}
	check_not_worse_than_base(&r, "enhancement until 30");
	return 0;
}

static int
case_ref_mid_gop(void)
{
	result_t r;

	/* Base P12 lost: 9..31 depend on it (9..11 are its B frames) until IDR 32. */
	decode(keep_no_base_p12, &r);
	for (int n = 0; n < FRAMES; n++) {
		bool lost = n >= 9 && n < 32;

		CHECK(r.reported[n] || n == 12, "frame %d not reported", n);
		if (lost && n != 12)
			CHECK(!r.shown[n] && (r.flags[n] & PPS_DECODER_FRAME_UNDECODABLE) &&
			          (r.flags[n] & PPS_DECODER_FRAME_REPEATED),
			      "frame %d: shown %d flags %x", n, r.shown[n], r.flags[n]);
		else if (!lost)
			CHECK(r.shown[n] && r.flags[n] == 0 && r.layers[n] == 2, "frame %d", n);
	}
	check_not_worse_than_base(&r, "base P12 lost");

	/* Enhancement P44 lost: 41..63 fall back to the base, flagged. */
	decode(keep_no_enh_p44, &r);
	for (int n = 0; n < FRAMES; n++) {
		if (n >= 41)
			CHECK(r.shown[n] && r.layers[n] == 1 &&
			          (n == 44 || (r.flags[n] & PPS_DECODER_FRAME_UNDECODABLE)),
			      "frame %d: layers %d flags %x", n, r.layers[n], r.flags[n]);
		else
			CHECK(r.shown[n] && r.layers[n] == 2, "frame %d", n);
	}
	check_not_worse_than_base(&r, "enhancement P44 lost");
	return 0;
}

/*
 * The sender cut the enhancement layer after the anchor of frames 17..20
 * but before its filler ADU: libavcodec keeps that layer's pictures for
 * reordering. The frames must still come out (with the base) once the next
 * mini-GOP begins, not stall until the enhancement's next IDR at 32.
 */
typedef struct {
	int64_t last_output;
	uint8_t layers[FRAMES];
	bool shown[FRAMES];
} cut_t;

static void
cut_frame_cb(const pps_decoded_frame_t *f, void *user)
{
	cut_t *c = user;

	c->last_output = f->frame_index;
	if (f->frame_index < FRAMES && !(f->flags & PPS_DECODER_FRAME_REPEATED)) {
		c->shown[f->frame_index] = true;
		c->layers[f->frame_index] = f->quality_layers;
	}
}

static int
case_enh_filler_cut(void)
{
	cut_t c = {.last_output = -1};
	pps_decoder_t *d = pps_decoder_new(&stream, cut_frame_cb, &c);
	int64_t out_after_window6 = -1;

	if (!d)
		exit(1);
	for (int i = 0; i < adu_count; i++) {
		const pps_adu_info_t *a = pps_adu_info(adus[i]);

		if (is_filler(adus[i]) && a->quality_layer == 1 && a->frame_index == 20)
			continue;
		CHECK(pps_decoder_push(d, adus[i]) == 0, "push %d", i);
		if (i + 1 < adu_count && pps_adu_info(adus[i + 1])->frame_index > 24 &&
		    a->frame_index <= 24 && out_after_window6 < 0)
			out_after_window6 = c.last_output;
	}
	pps_decoder_drain(d);
	pps_decoder_free(d);
	CHECK(out_after_window6 >= 24, "frames out through %lld after window 6 was pushed",
	      (long long)out_after_window6);
	for (int n = 0; n < FRAMES; n++) {
		CHECK(c.shown[n], "frame %d not shown", n);
		/* Of 17..20, those libavcodec still held lost their enhancement
		 * with the cut; 21..31 have no enhancement reference until the
		 * IDR at 32. */
		if (n < 17 || n >= 32)
			CHECK(c.layers[n] == 2, "frame %d: %d layers", n, c.layers[n]);
		else if (n > 20)
			CHECK(c.layers[n] == 1, "frame %d: %d layers", n, c.layers[n]);
		else
			CHECK(c.layers[n] >= 1, "frame %d: %d layers", n, c.layers[n]);
	}
	return 0;
}

/* ----------------------------------------------------- reorder holdback */

#define HOLDBACK_FRAMES   64
#define HOLDBACK_IDR_AT   41 /* an out-of-period IDR request: a forced-P run */
#define HOLDBACK_MAX_ADUS (HOLDBACK_FRAMES * 6)

typedef struct {
	pps_adu_t *adu[HOLDBACK_MAX_ADUS];
	int count;
} adu_list_t;

static void
holdback_adu_cb(pps_adu_t *adu, void *user)
{
	adu_list_t *list = user;

	if (list->count < HOLDBACK_MAX_ADUS)
		list->adu[list->count++] = adu;
	else
		pps_adu_unref(adu);
}

typedef struct {
	int64_t last_output;
	int pushes_outputs[HOLDBACK_FRAMES + 1]; /* frames output in one push: histogram */
	int in_push;
} holdback_t;

static void
holdback_frame_cb(const pps_decoded_frame_t *f, void *user)
{
	holdback_t *h = user;

	h->last_output = f->frame_index;
	h->in_push++;
}

/*
 * Pushes the kept ADUs in id order; once the last kept ADU of window k is
 * pushed, frame k * W (the window's last, always kept here) and so every
 * earlier frame must be out: nothing waits for the next window.
 */
static void
holdback_decode(const adu_list_t *list, const pps_stream_params_t *sp, keep_fn keep,
                const char *what)
{
	uint32_t w = (uint32_t)sp->window_frames;
	holdback_t h = {.last_output = -1};
	int boundaries = 0, late = 0, max_lag_frames = 0;
	pps_decoder_t *d = pps_decoder_new(sp, holdback_frame_cb, &h);

	if (!d) {
		fprintf(stderr, "pps_decoder_new: %s\n", strerror(errno));
		exit(1);
	}
	for (int i = 0; i < list->count; i++) {
		const pps_adu_info_t *a = pps_adu_info(list->adu[i]);
		uint32_t window = (a->frame_index + w - 1) / w;
		int next = i + 1;

		if (!keep(a))
			continue;
		while (next < list->count && !keep(pps_adu_info(list->adu[next])))
			next++;
		h.in_push = 0;
		CHECK(pps_decoder_push(d, list->adu[i]) == 0, "%s: push %u", what, a->id);
		if (next < list->count &&
		    (pps_adu_info(list->adu[next])->frame_index + w - 1) / w == window)
			continue;
		/* The window's last ADU was pushed. */
		boundaries++;
		h.pushes_outputs[h.in_push]++;
		if (h.last_output < (int64_t)(window * w)) {
			late++;
			if ((int64_t)(window * w) - h.last_output > max_lag_frames)
				max_lag_frames = (int)((int64_t)(window * w) - h.last_output);
		}
		CHECK(h.last_output == (int64_t)(window * w),
		      "%s: window %u pushed, frames out through %lld", what, window,
		      (long long)h.last_output);
	}
	pps_decoder_drain(d);
	pps_decoder_free(d);
	fprintf(stderr,
	        "%s: %d windows, %d with frames held back (up to %d frames); "
	        "frames output by the window's last push:",
	        what, boundaries, late, max_lag_frames);
	for (int n = 0; n <= HOLDBACK_FRAMES; n++)
		if (h.pushes_outputs[n])
			fprintf(stderr, " %d x %d", h.pushes_outputs[n], n);
	fprintf(stderr, "\n");
}

static int
case_holdback(int temporal_layers, int window_frames)
{
	pps_encoder_params_t p = {
	    .width = W,
	    .height = H,
	    .fps = 30,
	    .temporal_layers = temporal_layers,
	    .quality_layers = 2,
	    .base_scale = 2,
	    .gop_frames = 32,
	    .window_frames = window_frames,
	    .preset = "veryfast",
	    .threads = 1,
	    .base_crf = 30,
	    .base_vbv_kbps = 0,
	    .enhancement_crf = 26,
	    .enhancement_vbv_kbps = 0,
	};
	pps_encoder_t *e = pps_encoder_new(&p);
	pps_frame_t *frame = pps_frame_new(W, H);
	adu_list_t list = {.count = 0};
	pps_stream_params_t sp;
	char what[64];

	if (!e || !frame) {
		fprintf(stderr, "pps_encoder_new: %s\n", strerror(errno));
		exit(1);
	}
	for (int n = 0; n < HOLDBACK_FRAMES; n++) {
		pps_testutil_generate(frame, (uint32_t)n, T0_US + n * 33333LL);
		if (n == HOLDBACK_IDR_AT)
			pps_encoder_request_idr(e);
		if (pps_encoder_encode(e, frame, holdback_adu_cb, &list) < 0) {
			fprintf(stderr, "encode failed at %d\n", n);
			exit(1);
		}
	}
	pps_encoder_get_stream_params(e, &sp);
	CHECK(sp.temporal_layers == temporal_layers, "%d temporal layers", sp.temporal_layers);
	CHECK(list.count < HOLDBACK_MAX_ADUS, "too many ADUs");
	snprintf(what, sizeof(what), "%dT/W%d all", temporal_layers, window_frames);
	holdback_decode(&list, &sp, keep_all, what);
	snprintf(what, sizeof(what), "%dT/W%d base", temporal_layers, window_frames);
	holdback_decode(&list, &sp, keep_base, what);
	if (temporal_layers == 3) {
		snprintf(what, sizeof(what), "%dT/W%d no top temporal", temporal_layers,
		         window_frames);
		holdback_decode(&list, &sp, keep_no_top, what);
	}
	snprintf(what, sizeof(what), "%dT/W%d anchors only", temporal_layers, window_frames);
	holdback_decode(&list, &sp, keep_no_b, what);
	for (int i = 0; i < list.count; i++)
		pps_adu_unref(list.adu[i]);
	pps_frame_free(frame);
	pps_encoder_free(e);
	return 0;
}

/* ------------------------------------------------------ anchor windows */

#define ANCHOR_FRAMES 64

typedef struct {
	adu_list_t list;
	int call[HOLDBACK_MAX_ADUS]; /* the encode call (frame) that emitted each ADU */
	int current;
} anchor_adus_t;

static void
anchor_adu_cb(pps_adu_t *adu, void *user)
{
	anchor_adus_t *a = user;

	if (a->list.count < HOLDBACK_MAX_ADUS)
		a->call[a->list.count] = a->current;
	holdback_adu_cb(adu, &a->list);
}

typedef struct {
	int64_t last_output;
	bool shown[ANCHOR_FRAMES];
	double psnr[ANCHOR_FRAMES];
	pps_frame_t *source[ANCHOR_FRAMES];
} anchor_out_t;

static void
anchor_frame_cb(const pps_decoded_frame_t *f, void *user)
{
	anchor_out_t *o = user;

	o->last_output = f->frame_index;
	if (f->frame_index < ANCHOR_FRAMES && !(f->flags & PPS_DECODER_FRAME_REPEATED)) {
		o->shown[f->frame_index] = true;
		o->psnr[f->frame_index] =
		    pps_testutil_psnr_y(&f->picture, o->source[f->frame_index]);
	}
}

/* Two quality layers in windows of 2, the encoder of the two cases below. */
static pps_encoder_t *
open_windows_of_2(bool anchor_windows, bool disposable_p)
{
	pps_encoder_params_t p = {
	    .width = W,
	    .height = H,
	    .fps = 30,
	    .temporal_layers = 2,
	    .quality_layers = 2,
	    .base_scale = 2,
	    .gop_frames = 32,
	    .window_frames = 2,
	    .preset = "veryfast",
	    .threads = 1,
	    .base_crf = 30,
	    .enhancement_crf = 26,
	    .anchor_windows = anchor_windows,
	    .disposable_p = disposable_p,
	};
	pps_encoder_t *e = pps_encoder_new(&p);

	if (!e) {
		fprintf(stderr, "pps_encoder_new: %s\n", strerror(errno));
		exit(1);
	}
	return e;
}

/* Windows of 2 with B frames, switched to anchor windows and back in one
 * x264 session (an IDR request in between): a frame of an anchor window comes
 * out of the encoder in the call that inputs it, as one temporal layer, and
 * out of the decoder once those ADUs are pushed; the windows with B frames
 * keep their droppable layer; every frame decodes whole. */
static int
case_anchor_windows(void)
{
	pps_encoder_t *e = open_windows_of_2(true, false);
	anchor_adus_t a = {.list.count = 0};
	anchor_out_t o = {.last_output = -1};
	bool anchors[ANCHOR_FRAMES];
	int b_frames = 0;
	pps_encoder_stats_t st;
	pps_stream_params_t sp;
	pps_decoder_t *d;

	for (int n = 0; n < ANCHOR_FRAMES; n++) {
		/* Asked for in mid-window: taken at the next window (frames 21, 41). */
		if (n == 20)
			pps_encoder_set_anchor_windows(e, false);
		if (n == 40)
			pps_encoder_set_anchor_windows(e, true);
		if (n == 45)
			pps_encoder_request_idr(e);
		anchors[n] = n <= 20 || n >= 41;
		o.source[n] = pps_frame_new(W, H);
		pps_testutil_generate(o.source[n], (uint32_t)n, T0_US + n * 33333LL);
		a.current = n;
		if (pps_encoder_encode(e, o.source[n], anchor_adu_cb, &a) < 0) {
			fprintf(stderr, "encode failed at %d\n", n);
			exit(1);
		}
		if (anchors[n])
			CHECK(pps_encoder_frames_complete(e) == (uint32_t)n + 1,
			      "anchor window: frame %d not complete in its own call", n);
	}
	pps_encoder_get_stream_params(e, &sp);
	pps_encoder_get_stats(e, &st);
	CHECK(sp.temporal_layers == 2 && sp.minigop_frames == 2, "stream %dT S%d",
	      sp.temporal_layers, sp.minigop_frames);
	CHECK(st.anchor_switches == 2, "%llu switches", (unsigned long long)st.anchor_switches);
	/* Windows 0..10 and 21..32. */
	CHECK(st.anchor_windows == 23, "%llu anchor windows",
	      (unsigned long long)st.anchor_windows);
	CHECK(a.list.count < HOLDBACK_MAX_ADUS, "too many ADUs");
	for (int i = 0; i < a.list.count; i++) {
		const pps_adu_info_t *info = pps_adu_info(a.list.adu[i]);

		if (info->frame_type == PPS_ADU_FRAME_B)
			b_frames++;
		if (!anchors[info->frame_index])
			continue;
		CHECK(info->frame_type == PPS_ADU_FRAME_P || info->frame_type == PPS_ADU_FRAME_IDR,
		      "frame %u: type %u in an anchor window", info->frame_index, info->frame_type);
		CHECK(info->temporal_layer == 0, "frame %u: temporal layer %u", info->frame_index,
		      info->temporal_layer);
		CHECK(a.call[i] == (int)info->frame_index, "frame %u: ADU %u came at frame %d",
		      info->frame_index, info->id, a.call[i]);
	}
	/* Frames 21, 23, ..., 39 but 31 (a P: the GOP closes before the IDR
	 * at 32), two layers each. */
	CHECK(b_frames == 2 * 9, "%d B ADUs", b_frames);

	d = pps_decoder_new(&sp, anchor_frame_cb, &o);
	if (!d) {
		fprintf(stderr, "pps_decoder_new: %s\n", strerror(errno));
		exit(1);
	}
	for (int i = 0; i < a.list.count; i++) {
		CHECK(pps_decoder_push(d, a.list.adu[i]) == 0, "push %d", i);
		/* The last ADU of an anchor window's frame: the frame is out. */
		if (anchors[a.call[i]] && (i + 1 == a.list.count || a.call[i + 1] != a.call[i]))
			CHECK(o.last_output == a.call[i],
			      "frame %d pushed, frames out through %lld", a.call[i],
			      (long long)o.last_output);
	}
	pps_decoder_drain(d);
	pps_decoder_free(d);
	for (int n = 0; n < ANCHOR_FRAMES; n++) {
		CHECK(o.shown[n], "frame %d not shown", n);
		CHECK(o.psnr[n] > 27.0, "frame %d: PSNR-Y %.1f dB", n, o.psnr[n]);
		pps_frame_free(o.source[n]);
	}
	for (int i = 0; i < a.list.count; i++)
		pps_adu_unref(a.list.adu[i]);
	pps_encoder_free(e);
	return 0;
}

/* ------------------------------------------------------ disposable P frames */

/* Windows of 2 whose last frames are disposable P frames, switched to
 * anchor windows and back (an IDR request in between): every frame comes out
 * of the encoder in the call that inputs it and out of the decoder once its
 * ADUs are pushed (nothing reordered, no fillers); a disposable frame depends
 * on the anchor before it alone and no ADU depends on it; with every
 * disposable frame's ADUs left out, the anchors decode whole. */
static int
case_disposable_p(void)
{
	pps_encoder_t *e = open_windows_of_2(false, true);
	anchor_adus_t a = {.list.count = 0};
	bool disposable[ANCHOR_FRAMES] = {false};
	int pd = 0;
	pps_encoder_stats_t st;
	pps_stream_params_t sp;
	pps_frame_t *pictures[ANCHOR_FRAMES];

	for (int n = 0; n < ANCHOR_FRAMES; n++) {
		if (n == 20)
			pps_encoder_set_anchor_windows(e, true);
		if (n == 30)
			pps_encoder_set_anchor_windows(e, false);
		if (n == 45)
			pps_encoder_request_idr(e);
		pictures[n] = pps_frame_new(W, H);
		pps_testutil_generate(pictures[n], (uint32_t)n, T0_US + n * 33333LL);
		a.current = n;
		CHECK(pps_encoder_encode(e, pictures[n], anchor_adu_cb, &a) == 0, "encode %d", n);
		CHECK(pps_encoder_frames_complete(e) == (uint32_t)n + 1,
		      "frame %d not complete in its own call", n);
	}
	pps_encoder_get_stream_params(e, &sp);
	pps_encoder_get_stats(e, &st);
	CHECK(sp.temporal_layers == 2 && sp.minigop_frames == 2, "stream %dT S%d",
	      sp.temporal_layers, sp.minigop_frames);
	CHECK(st.filler_pictures == 0, "%llu filler pictures",
	      (unsigned long long)st.filler_pictures);
	for (int i = 0; i < a.list.count; i++) {
		const pps_adu_info_t *info = pps_adu_info(a.list.adu[i]);

		CHECK(a.call[i] == (int)info->frame_index, "frame %u: ADU %u came at frame %d",
		      info->frame_index, info->id, a.call[i]);
		CHECK(info->frame_type != PPS_ADU_FRAME_B && info->frame_type != PPS_ADU_FRAME_BREF,
		      "frame %u: type %u", info->frame_index, info->frame_type);
		if (info->frame_type != PPS_ADU_FRAME_PD)
			continue;
		pd++;
		disposable[info->frame_index] = true;
		CHECK(info->temporal_layer == 1 && info->frame_index % 2 == 0,
		      "disposable frame %u: temporal layer %u", info->frame_index,
		      info->temporal_layer);
		/* Its own layer's reference: the anchor just before it. */
		for (int j = i - 1; j >= 0; j--) {
			const pps_adu_info_t *ref = pps_adu_info(a.list.adu[j]);

			if (ref->frame_index + 1 == info->frame_index &&
			    ref->quality_layer == info->quality_layer) {
				CHECK(pps_adu_depends_on(a.list.adu[i], ref->id),
				      "disposable frame %u: not on the anchor before it",
				      info->frame_index);
				break;
			}
		}
		for (int j = i + 1; j < a.list.count; j++)
			if (pps_adu_info(a.list.adu[j])->frame_index != info->frame_index)
				CHECK(!pps_adu_depends_on(a.list.adu[j], info->id),
				      "ADU %u depends on disposable ADU %u",
				      pps_adu_info(a.list.adu[j])->id, info->id);
	}
	/* The windows' last frames, 2, 4, ..., 62, but the anchor windows'
	 * (22..30), the IDRs (32: the period; 46: the request) and the pictures
	 * 16 after an IDR (16, 62: frame_num 0), two layers each. */
	CHECK(pd == 2 * (31 - 5 - 2 - 2), "%d disposable ADUs", pd);

	for (int drop = 0; drop < 2; drop++) {
		anchor_out_t o = {.last_output = -1};
		pps_decoder_t *d = pps_decoder_new(&sp, anchor_frame_cb, &o);

		CHECK(d != NULL, "pps_decoder_new");
		for (int n = 0; n < ANCHOR_FRAMES; n++)
			o.source[n] = pictures[n];
		for (int i = 0; i < a.list.count; i++) {
			const pps_adu_info_t *info = pps_adu_info(a.list.adu[i]);

			if (drop && info->frame_type == PPS_ADU_FRAME_PD)
				continue;
			CHECK(pps_decoder_push(d, a.list.adu[i]) == 0, "push %d", i);
			/* A frame's last ADU: the frame is out. */
			if (i + 1 == a.list.count || a.call[i + 1] != a.call[i])
				CHECK(o.last_output == a.call[i],
				      "%s: frame %d pushed, frames out through %lld",
				      drop ? "without disposables" : "all", a.call[i],
				      (long long)o.last_output);
		}
		pps_decoder_drain(d);
		pps_decoder_free(d);
		for (int n = 0; n < ANCHOR_FRAMES; n++) {
			if (drop && disposable[n])
				continue;
			CHECK(o.shown[n], "%s: frame %d not shown",
			      drop ? "without disposables" : "all", n);
			CHECK(o.psnr[n] > 27.0, "%s: frame %d: PSNR-Y %.1f dB",
			      drop ? "without disposables" : "all", n, o.psnr[n]);
		}
	}
	for (int n = 0; n < ANCHOR_FRAMES; n++)
		pps_frame_free(pictures[n]);
	for (int i = 0; i < a.list.count; i++)
		pps_adu_unref(a.list.adu[i]);
	pps_encoder_free(e);
	return 0;
}

/* ------------------------------------------- switches against the timecode */

#define SWITCH_FRAMES 40

typedef struct {
	pps_frame_t *source[SWITCH_FRAMES];
	bool shown[SWITCH_FRAMES];
	int bad; /* pictures whose content is not their frame's */
	char first_bad[160];
} switch_out_t;

static void
switch_frame_cb(const pps_decoded_frame_t *f, void *user)
{
	switch_out_t *o = user;
	uint32_t index;
	int64_t capture_us;
	uint32_t n = f->frame_index;
	bool ok;

	if ((f->flags & PPS_DECODER_FRAME_REPEATED) || !f->picture.planes[0])
		return;
	if (n >= SWITCH_FRAMES) {
		o->bad++;
		return;
	}
	o->shown[n] = true;
	double p = 0, before = 0, after = 0;

	ok = pps_timecode_read(f->picture.planes[0], f->picture.strides[0], f->picture.width,
	                       f->picture.height, &index, &capture_us) == 0 &&
	     index == n && capture_us == f->capture_us;
	if (ok) {
		/* The rest of the picture too: nearer its own source than a neighbour's. */
		p = pps_testutil_psnr_y(&f->picture, o->source[n]);
		before = n ? pps_testutil_psnr_y(&f->picture, o->source[n - 1]) : 0;
		after =
		    n + 1 < SWITCH_FRAMES ? pps_testutil_psnr_y(&f->picture, o->source[n + 1]) : 0;
		ok = p > 20.0 && before < p && after < p;
	}
	if (!ok && o->bad++ == 0)
		snprintf(o->first_bad, sizeof(o->first_bad),
		         "frame %u (T%u, %u layers) shows timecode %u, PSNR-Y %.1f dB "
		         "(frames before/after %.1f/%.1f)",
		         n, f->temporal_layer, f->quality_layers, index, p, before, after);
}

/* One encode: anchor windows @from_anchors until @switch_at, then the other
 * mode; an IDR asked for before frame @idr_at (-1: none). Every ADU decoded:
 * every frame shown once, with its own timecode and content. */
static void
switch_run(int window_frames, int temporal_layers, bool from_anchors, int switch_at, int idr_at)
{
	pps_encoder_params_t p = {
	    .width = W,
	    .height = H,
	    .fps = 30,
	    .temporal_layers = temporal_layers,
	    .quality_layers = 2,
	    .base_scale = 2,
	    .gop_frames = 32,
	    .window_frames = window_frames,
	    .preset = "veryfast",
	    .threads = 1,
	    .base_crf = 30,
	    .enhancement_crf = 26,
	    .anchor_windows = from_anchors,
	};
	pps_encoder_t *e = pps_encoder_new(&p);
	adu_list_t list = {.count = 0};
	switch_out_t o = {.bad = 0};
	pps_stream_params_t sp;
	pps_decoder_t *d;
	char what[96];
	int complete;

	snprintf(what, sizeof(what), "W%d %dT anchors %s at %d, IDR at %d", window_frames,
	         temporal_layers, from_anchors ? "off" : "on", switch_at, idr_at);
	if (!e) {
		fprintf(stderr, "pps_encoder_new: %s\n", strerror(errno));
		exit(1);
	}
	for (int n = 0; n < SWITCH_FRAMES; n++) {
		if (n == switch_at)
			pps_encoder_set_anchor_windows(e, !from_anchors);
		if (n == idr_at)
			pps_encoder_request_idr(e);
		o.source[n] = pps_frame_new(W, H);
		pps_testutil_generate(o.source[n], (uint32_t)n, T0_US + n * 33333LL);
		if (pps_encoder_encode(e, o.source[n], holdback_adu_cb, &list) < 0) {
			fprintf(stderr, "%s: encode failed at %d\n", what, n);
			exit(1);
		}
	}
	complete = (int)pps_encoder_frames_complete(e);
	CHECK(complete > SWITCH_FRAMES - window_frames, "%s: %d frames complete", what, complete);
	CHECK(list.count < HOLDBACK_MAX_ADUS, "%s: too many ADUs", what);
	pps_encoder_get_stream_params(e, &sp);
	d = pps_decoder_new(&sp, switch_frame_cb, &o);
	if (!d) {
		fprintf(stderr, "pps_decoder_new: %s\n", strerror(errno));
		exit(1);
	}
	for (int i = 0; i < list.count; i++)
		CHECK(pps_decoder_push(d, list.adu[i]) == 0, "%s: push %d", what, i);
	pps_decoder_drain(d);
	pps_decoder_free(d);
	CHECK(o.bad == 0, "%s: %d pictures not their frame's; first: %s", what, o.bad, o.first_bad);
	for (int n = 0; n < SWITCH_FRAMES; n++) {
		CHECK(o.shown[n] || n >= complete, "%s: frame %d not shown", what, n);
		pps_frame_free(o.source[n]);
	}
	for (int i = 0; i < list.count; i++)
		pps_adu_unref(list.adu[i]);
	pps_encoder_free(e);
}

/* A joining client's IDR request and a switch of the anchor-window mode: the
 * switch at every phase of a window, the IDR asked for from the frame before
 * it to a window after, both directions; a switch alone; windows of 2 and 4. */
static int
case_switch_timecode(void)
{
	static const struct {
		int window_frames, temporal_layers;
	} shapes[] = {{2, 2}, {4, 3}};

	for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
		int wf = shapes[s].window_frames;

		for (int from = 0; from < 2; from++)
			for (int sw = 3 * wf; sw < 4 * wf; sw++) {
				switch_run(wf, shapes[s].temporal_layers, from, sw, -1);
				for (int idr = sw - 1; idr <= sw + wf; idr++)
					switch_run(wf, shapes[s].temporal_layers, from, sw, idr);
			}
	}
	return 0;
}

/* Noise (like videotestsrc's snow): no encoder can code it small at any CRF. */
static void
fill_noise(pps_frame_t *f, uint32_t seed)
{
	for (int pl = 0; pl < 3; pl++) {
		int w = pl ? f->width / 2 : f->width, h = pl ? f->height / 2 : f->height;

		for (int y = 0; y < h; y++)
			for (int x = 0; x < w; x++) {
				seed = seed * 1664525u + 1013904223u;
				f->planes[pl][(size_t)y * f->strides[pl] + x] =
				    (uint8_t)(seed >> 24);
			}
	}
}

typedef struct {
	uint64_t bytes[2];
	size_t max_base_bytes;
	int frames_counted;
	bool counting;
} rate_count_t;

static void
rate_adu_cb(pps_adu_t *adu, void *user)
{
	rate_count_t *c = user;
	const pps_adu_info_t *info = pps_adu_info(adu);

	if (c->counting && info->quality_layer < 2) {
		c->bytes[info->quality_layer] += pps_adu_size(adu);
		if (info->quality_layer == 0 && pps_adu_size(adu) > c->max_base_bytes)
			c->max_base_bytes = pps_adu_size(adu);
	}
	pps_adu_unref(adu);
}

/* Two layers, B frames, GOP 30, both layers at @crf without a VBV cap: the
 * rate cases steer them from there. */
static pps_encoder_params_t
steered_params(int crf)
{
	return (pps_encoder_params_t){
	    .width = W,
	    .height = H,
	    .fps = 30,
	    .temporal_layers = 2,
	    .quality_layers = 2,
	    .base_scale = 2,
	    .gop_frames = 30,
	    .window_frames = 2,
	    .preset = "veryfast",
	    .threads = 1,
	    .base_crf = crf,
	    .enhancement_crf = crf,
	    .rate_adaptive = true,
	};
}

/* pps_encoder_set_rates() steers x264's VBV rate, buffer and CRF mid-stream:
 * on noise the layers follow the rate they are given (fillers included), and
 * no base picture, IDR included, exceeds the buffer. */
static int
case_rates(void)
{
	pps_encoder_params_t p = steered_params(20);
	pps_encoder_rates_t high = {
	    .kbps = {3000, 6000}, .buffer_kbit = {1500, 3000}, .crf = {20, 20}};
	pps_encoder_rates_t low = {.kbps = {300, 600}, .buffer_kbit = {40, 300}, .crf = {26, 24}};
	pps_encoder_rates_t bad = low;
	pps_encoder_t *e = pps_encoder_new(&p);
	pps_frame_t *frame = pps_frame_new(W, H);
	rate_count_t hi = {.counting = false}, lo = {.counting = false};
	pps_encoder_stats_t st;
	double hi_kbps[2], lo_kbps[2];

	if (!e || !frame) {
		fprintf(stderr, "pps_encoder_new: %s\n", strerror(errno));
		exit(1);
	}
	bad.crf[1] = 60;
	CHECK(pps_encoder_set_rates(e, &bad) == -EINVAL, "CRF 60 accepted");
	CHECK(pps_encoder_set_rates(e, &high) == 0, "set_rates refused");
	for (int n = 0; n < 240; n++) {
		rate_count_t *c = n < 120 ? &hi : &lo;

		if (n == 120)
			CHECK(pps_encoder_set_rates(e, &low) == 0, "set_rates refused");
		/* Count the second half of each phase (the rate has settled). */
		c->counting = n % 120 >= 60;
		fill_noise(frame, (uint32_t)n * 7919u + 1u);
		frame->capture_us = T0_US + n * 33333LL;
		if (pps_encoder_encode(e, frame, rate_adu_cb, c) < 0) {
			fprintf(stderr, "encode failed at %d\n", n);
			exit(1);
		}
	}
	for (int q = 0; q < 2; q++) {
		hi_kbps[q] = (double)hi.bytes[q] * 8 * 30 / 60 / 1000;
		lo_kbps[q] = (double)lo.bytes[q] * 8 * 30 / 60 / 1000;
	}
	fprintf(stderr,
	        "rates: base %.0f -> %.0f kbit/s (cap 3000 -> 300), enhancement %.0f -> %.0f "
	        "(6000 -> 600); largest base ADU at 300 kbit/s: %zu bytes (buffer 40 kbit)\n",
	        hi_kbps[0], lo_kbps[0], hi_kbps[1], lo_kbps[1], lo.max_base_bytes);
	CHECK(lo_kbps[0] <= 300 * 1.3, "base %.0f kbit/s over its 300 kbit/s cap", lo_kbps[0]);
	CHECK(lo_kbps[1] <= 600 * 1.3, "enhancement %.0f kbit/s over 600", lo_kbps[1]);
	CHECK(hi_kbps[0] > 2 * lo_kbps[0], "base did not follow: %.0f vs %.0f", hi_kbps[0],
	      lo_kbps[0]);
	CHECK(lo.max_base_bytes <= 40000 / 8 * 13 / 10, "base ADU of %zu bytes > buffer",
	      lo.max_base_bytes);
	pps_encoder_get_stats(e, &st);
	CHECK(st.reconfigs >= 4 && st.reconfig_errors == 0, "reconfigs %llu errors %llu",
	      (unsigned long long)st.reconfigs, (unsigned long long)st.reconfig_errors);
	pps_frame_free(frame);
	pps_encoder_free(e);
	p.rate_adaptive = false;
	e = pps_encoder_new(&p);
	CHECK(e && pps_encoder_set_rates(e, &low) == -EINVAL, "fixed encoder took rates");
	pps_encoder_free(e);
	return 0;
}

/* pps_encoder_set_crf_offset() codes every layer coarser from the next
 * mini-GOP until it is set back to 0; each mini-GOP coded so is counted;
 * an encoder with fixed rates ignores it. */
static int
case_crf_offset(void)
{
	pps_encoder_params_t p = steered_params(24);
	/* Caps far above what CRF 24 makes of the picture: the CRF decides. */
	pps_encoder_rates_t rates = {
	    .kbps = {20000, 40000}, .buffer_kbit = {10000, 20000}, .crf = {24, 24}};
	pps_encoder_t *e = pps_encoder_new(&p);
	pps_frame_t *frame = pps_frame_new(W, H);
	rate_count_t phase[3] = {{.counting = true}, {.counting = true}, {.counting = true}};
	pps_encoder_stats_t st;
	uint64_t total[3];

	if (!e || !frame) {
		fprintf(stderr, "pps_encoder_new: %s\n", strerror(errno));
		exit(1);
	}
	CHECK(pps_encoder_set_rates(e, &rates) == 0, "set_rates refused");
	/* Frames 0..59 as set, 60..119 twelve CRF coarser, 120..179 as set;
	 * each phase's GOPs (30 frames) alike, counted from its second GOP. */
	for (int n = 0; n < 180; n++) {
		rate_count_t *c = &phase[n / 60];

		if (n == 60)
			pps_encoder_set_crf_offset(e, 12);
		if (n == 120)
			pps_encoder_set_crf_offset(e, 0);
		c->counting = n % 60 >= 31;
		fill_noise(frame, (uint32_t)(n % 30) * 7919u + 1u);
		frame->capture_us = T0_US + n * 33333LL;
		if (pps_encoder_encode(e, frame, rate_adu_cb, c) < 0) {
			fprintf(stderr, "encode failed at %d\n", n);
			exit(1);
		}
	}
	for (int i = 0; i < 3; i++)
		total[i] = phase[i].bytes[0] + phase[i].bytes[1];
	fprintf(stderr, "crf offset: %llu bytes as set, %llu at +12, %llu as set again\n",
	        (unsigned long long)total[0], (unsigned long long)total[1],
	        (unsigned long long)total[2]);
	CHECK(total[1] * 2 < total[0], "+12 CRF made %llu bytes against %llu",
	      (unsigned long long)total[1], (unsigned long long)total[0]);
	CHECK(phase[1].bytes[0] < phase[0].bytes[0] && phase[1].bytes[1] < phase[0].bytes[1],
	      "a layer did not get coarser");
	CHECK(total[2] * 10 > total[0] * 8 && total[2] * 10 < total[0] * 12,
	      "back at 0: %llu bytes against %llu", (unsigned long long)total[2],
	      (unsigned long long)total[0]);
	pps_encoder_get_stats(e, &st);
	/* Mini-GOPs of the 60 frames from 60 on: about 30. */
	CHECK(st.drained_minigops >= 28 && st.drained_minigops <= 34, "drained %llu mini-GOPs",
	      (unsigned long long)st.drained_minigops);
	pps_frame_free(frame);
	pps_encoder_free(e);
	p.rate_adaptive = false;
	e = pps_encoder_new(&p);
	frame = pps_frame_new(W, H);
	CHECK(e && frame, "fixed encoder");
	pps_encoder_set_crf_offset(e, 12);
	for (int n = 0; n < 8; n++) {
		rate_count_t c = {.counting = false};

		fill_noise(frame, (uint32_t)n + 1u);
		frame->capture_us = T0_US + n * 33333LL;
		CHECK(pps_encoder_encode(e, frame, rate_adu_cb, &c) >= 0, "encode failed");
	}
	pps_encoder_get_stats(e, &st);
	CHECK(st.drained_minigops == 0, "a fixed encoder drained %llu mini-GOPs",
	      (unsigned long long)st.drained_minigops);
	pps_frame_free(frame);
	pps_encoder_free(e);
	return 0;
}

/*
 * STREAM_INFO <-> stream parameters: a round trip is the identity for every
 * layer/window shape the encoder makes, and the client's mini-GOP (not on the
 * wire) is the encoder's, from the one rule. Needs no encoder (unit suite).
 */
static void
case_stream_wire(void)
{
	static const int shapes[][3] = {
	    /* temporal layers asked, window frames, mini-GOP the encoder uses */
	    {3, 4, 4}, {3, 8, 4}, {3, 6, 2}, {3, 3, 1}, {2, 2, 2}, {2, 5, 1}, {1, 4, 1}, {3, 64, 4},
	};

	for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
		pps_gop_t gop;
		int t = pps_gop_init(&gop, shapes[i][0], shapes[i][1], 32);
		pps_stream_params_t sp = {
		    .width = 1280,
		    .height = 720,
		    .fps = 30,
		    .base_width = 640,
		    .base_height = 360,
		    .temporal_layers = t,
		    .quality_layers = 3,
		    .minigop_frames = gop.minigop_frames,
		    .window_frames = shapes[i][1],
		    .gop_frames = gop.gop_frames,
		    .upscale_filter = PPS_CODEC_UPSCALE_BILINEAR_Q8,
		};
		pps_stream_params_t back;
		pps_wire_stream_info_t info;

		CHECK(gop.minigop_frames == shapes[i][2], "T%d W%d: mini-GOP %d", shapes[i][0],
		      shapes[i][1], gop.minigop_frames);
		pps_stream_params_to_wire(&sp, 2, 250, &info);
		CHECK(info.protocol_version == PPS_WIRE_VERSION &&
		          info.codec == PPS_CODEC_ID_H264_LAYERED && info.priority_policy == 2 &&
		          info.latency_budget_ms == 250 && info.fps_num == 30 && info.fps_den == 1,
		      "to_wire: header fields");
		memset(&back, 0xa5, sizeof(back));
		CHECK(pps_stream_params_from_wire(&info, &back) == 0, "from_wire refused");
		CHECK(memcmp(&back, &sp, sizeof(sp)) == 0,
		      "T%d W%d: round trip differs (mini-GOP %d vs %d)", shapes[i][0], shapes[i][1],
		      back.minigop_frames, sp.minigop_frames);
	}
	{
		pps_stream_params_t sp = {
		    .width = 320, .height = 240, .fps = 25, .window_frames = 4};
		pps_stream_params_t back;
		pps_wire_stream_info_t info;

		pps_stream_params_to_wire(&sp, 0, 100, &info);
		info.fps_num = 60000; /* 59.94: rounds down */
		info.fps_den = 1001;
		CHECK(pps_stream_params_from_wire(&info, &back) == 0 && back.fps == 59, "59.94");
		info.fps_den = 0;
		CHECK(pps_stream_params_from_wire(&info, &back) == -EINVAL, "fps_den 0");
		info.fps_den = 1;
		info.codec = 2;
		CHECK(pps_stream_params_from_wire(&info, &back) == -EINVAL, "codec 2");
	}
}

/* The upscale filter against its definition (Q8 bilinear, pixel centres
 * aligned, computed here the slow way on a whole plane): the rolling-row and
 * 2x paths must give the same bytes, at 2x and at sizes that are not 2x, and
 * on a white plane (the 2x path's 16-bit sums at their largest). */
static int
reference_sample(const uint8_t *src, int stride, int sw, int sh, int dw, int dh, int x, int y)
{
	int64_t px = ((int64_t)(2 * x + 1) * sw * 256) / (2 * dw) - 128;
	int64_t py = ((int64_t)(2 * y + 1) * sh * 256) / (2 * dh) - 128;
	int ix, fx, iy, fy, r0, r1;

	px = px < 0 ? 0 : px > (int64_t)(sw - 1) * 256 ? (int64_t)(sw - 1) * 256 : px;
	py = py < 0 ? 0 : py > (int64_t)(sh - 1) * 256 ? (int64_t)(sh - 1) * 256 : py;
	ix = (int)(px >> 8), fx = (int)(px & 255);
	iy = (int)(py >> 8), fy = (int)(py & 255);
	if (ix >= sw - 1)
		ix = sw - 1, fx = 0;
	if (iy >= sh - 1)
		iy = sh - 1, fy = 0;
#define S(xx, yy) src[(size_t)(yy)*stride + (xx)]
	r0 = S(ix, iy) * (256 - fx) + (fx ? S(ix + 1, iy) : 0) * fx;
	r1 = fy ? S(ix, iy + 1) * (256 - fx) + (fx ? S(ix + 1, iy + 1) : 0) * fx : r0;
#undef S
	return (r0 * (256 - fy) + r1 * fy + 32768) >> 16;
}

static void
case_upscale(void)
{
	static const int sizes[][4] = {
	    {320, 240, 640, 480}, {160, 120, 640, 480}, {7, 5, 14, 10}, {2, 2, 4, 4},
	    {11, 9, 16, 15},      {5, 3, 5, 3},         {1, 1, 3, 2},   {6, 4, 12, 8},
	};
	const size_t saturated =
	    sizeof(sizes) / sizeof(sizes[0]) - 1; /* all 255: the largest sums */
	unsigned seed = 12345;

	for (size_t c = 0; c < sizeof(sizes) / sizeof(sizes[0]); c++) {
		int sw = sizes[c][0], sh = sizes[c][1], dw = sizes[c][2], dh = sizes[c][3];
		int stride = sw + 3, dstride = dw + 5;
		uint8_t *src = malloc((size_t)stride * (size_t)sh);
		uint8_t *dst = malloc((size_t)dstride * (size_t)dh);
		int bad = 0;

		if (!src || !dst) {
			CHECK(0, "upscale: out of memory");
			free(src);
			free(dst);
			return;
		}
		for (int i = 0; i < stride * sh; i++) {
			seed = seed * 1103515245u + 12345u;
			src[i] = c == saturated ? 255 : (uint8_t)(seed >> 16);
		}
		pps_upscale_plane(src, stride, sw, sh, dst, dstride, dw, dh);
		for (int y = 0; y < dh; y++)
			for (int x = 0; x < dw; x++)
				bad += dst[(size_t)y * dstride + x] !=
				       reference_sample(src, stride, sw, sh, dw, dh, x, y);
		CHECK(bad == 0, "upscale %dx%d -> %dx%d: %d samples differ from the definition", sw,
		      sh, dw, dh, bad);
		free(src);
		free(dst);
	}
}

int
main(int argc, char **argv)
{
	const char *what = argc > 1 ? argv[1] : "all";
	bool all = !strcmp(what, "all");

	if (all || !strcmp(what, "holdback-2t"))
		case_holdback(2, 2);
	if (all || !strcmp(what, "holdback-3t"))
		case_holdback(3, 4);
	if (all || !strcmp(what, "rates"))
		case_rates();
	if (all || !strcmp(what, "crf-offset"))
		case_crf_offset();
	if (all || !strcmp(what, "anchor-windows"))
		case_anchor_windows();
	if (all || !strcmp(what, "disposable-p"))
		case_disposable_p();
	if (all || !strcmp(what, "switch-timecode"))
		case_switch_timecode();
	if (all || !strcmp(what, "stream-wire"))
		case_stream_wire();
	if (all || !strcmp(what, "upscale"))
		case_upscale();
	if (!all && (!strncmp(what, "holdback", 8) || !strcmp(what, "rates") ||
	             !strcmp(what, "crf-offset") || !strcmp(what, "anchor-windows") ||
	             !strcmp(what, "disposable-p") || !strcmp(what, "switch-timecode") ||
	             !strcmp(what, "stream-wire") || !strcmp(what, "upscale")))
		goto out;

	encode_sequence();
	decode(keep_base, &base_ref);
	if (all || !strcmp(what, "structure"))
		case_structure();
	if (all || !strcmp(what, "full"))
		case_full();
	if (all || !strcmp(what, "base-only"))
		case_base_only();
	if (all || !strcmp(what, "timecode"))
		case_timecode();
	if (all || !strcmp(what, "drop-top-temporal"))
		case_temporal(keep_no_top, 1, "no top temporal layer");
	if (all || !strcmp(what, "drop-all-b"))
		case_temporal(keep_no_b, 0, "no B frames");
	if (all || !strcmp(what, "drop-enh-from"))
		case_enh_from();
	if (all || !strcmp(what, "drop-ref-mid-gop"))
		case_ref_mid_gop();
	if (all || !strcmp(what, "enh-filler-cut"))
		case_enh_filler_cut();
	for (int i = 0; i < adu_count; i++)
		pps_adu_unref(adus[i]);
	for (int n = 0; n < FRAMES; n++)
		pps_frame_free(source[n]);
out:
	if (pps_test_failures)
		fprintf(stderr, "%s: %d failures\n", what, pps_test_failures);
	return pps_test_failures ? 1 : 0;
}
