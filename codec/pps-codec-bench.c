/* SPDX-License-Identifier: MIT */
/*
 * pps-codec-bench: encodes N frames of the test source and prints one JSON
 * object: encode speed (frames/s on one thread, CPU ms per frame per layer),
 * bits/s per layer, PSNR-Y and SSIM-Y of every layer subset, and the bits a
 * single-layer x264 (same preset and GOP) needs to match the full stack's PSNR.
 * A benchmark, not a test: it prints figures and never fails on them.
 *
 * pps-codec-bench [--frames 300] [--size 640x480] [--layers 3x2] [--window 4]
 *                 [--pattern ball|smpte|...|synthetic] [--preset veryfast]
 *                 [--threads 1] [--base-crf 26] [--enh-crf 24] [--scale 2] [--gop 60]
 */
#include "pps-codec-testutil.h"
#include "pps-version.h"
#include "pps-time.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
	int frames, width, height, temporal, quality, window, threads, base_crf, enh_crf, scale,
	    gop;
	const char *pattern, *preset;
} options_t;

static pps_frame_t **source;
static int captured;
static int wanted;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static bool capture_done;

static void
capture_cb(const pps_frame_t *f, void *user)
{
	(void)user;
	pthread_mutex_lock(&lock);
	if (!f || captured >= wanted) {
		capture_done = true;
	} else {
		source[captured] = pps_frame_new(f->width, f->height);
		if (source[captured])
			pps_frame_copy(source[captured++], f);
		if (captured >= wanted)
			capture_done = true;
	}
	pthread_cond_signal(&cond);
	pthread_mutex_unlock(&lock);
}

/* Frames of videotestsrc through the capture module, as fast as it makes them. */
static int
capture_frames(const options_t *o)
{
	char description[512], err[512];
	pps_capture_params_t params = {
	    .type = PPS_CAPTURE_SOURCE_PIPELINE,
	    .input = description,
	    .width = o->width,
	    .height = o->height,
	    .fps = 30,
	    .queue_frames = 256,
	    .timecode = PPS_CAPTURE_TIMECODE_AUTO,
	};
	pps_capture_t *cap;

	source = calloc((size_t)o->frames, sizeof(*source));
	wanted = o->frames;
	if (!strcmp(o->pattern, "synthetic")) {
		for (int n = 0; n < o->frames; n++) {
			source[n] = pps_frame_new(o->width, o->height);
			pps_testutil_generate(source[n], (uint32_t)n, n * 33333LL);
		}
		captured = o->frames;
		return 0;
	}
	snprintf(description, sizeof(description),
	         "videotestsrc is-live=false num-buffers=%d pattern=%s%s", o->frames, o->pattern,
	         strcmp(o->pattern, "ball") && strcmp(o->pattern, "snow") ? " horizontal-speed=2"
	                                                                  : "");
	cap = pps_capture_new(&params, capture_cb, NULL, err, sizeof(err));
	if (!cap || pps_capture_start(cap, err, sizeof(err)) < 0) {
		fprintf(stderr, "pps-codec-bench: %s\n", err);
		return -1;
	}
	pthread_mutex_lock(&lock);
	while (!capture_done)
		pthread_cond_wait(&cond, &lock);
	pthread_mutex_unlock(&lock);
	pps_capture_free(cap);
	return captured > 0 ? 0 : -1;
}

typedef struct {
	pps_adu_t **adus;
	int count, capacity;
} adu_list_t;

static void
adu_cb(pps_adu_t *adu, void *user)
{
	adu_list_t *l = user;

	if (l->count == l->capacity) {
		l->capacity = l->capacity ? 2 * l->capacity : 1024;
		l->adus = realloc(l->adus, sizeof(*l->adus) * (size_t)l->capacity);
	}
	l->adus[l->count++] = adu;
}

static int
encode(const options_t *o, int quality, int base_crf, adu_list_t *out, pps_encoder_stats_t *stats,
       pps_stream_params_t *stream, double *wall_s)
{
	pps_encoder_params_t p = {
	    .width = o->width,
	    .height = o->height,
	    .fps = 30,
	    .temporal_layers = o->temporal,
	    .quality_layers = quality,
	    .base_scale = quality > 1 ? o->scale : 1,
	    .gop_frames = o->gop,
	    .window_frames = o->window,
	    .preset = o->preset,
	    .threads = o->threads,
	    .base_crf = base_crf,
	    .base_vbv_kbps = 0,
	    .enhancement_crf = o->enh_crf,
	    .enhancement_vbv_kbps = 0,
	};
	pps_encoder_t *e = pps_encoder_new(&p);
	double t0;

	if (!e) {
		fprintf(stderr, "pps-codec-bench: encoder: %s\n", strerror(errno));
		return -1;
	}
	memset(out, 0, sizeof(*out));
	t0 = (double)pps_time_monotonic_ns() / 1e9;
	for (int n = 0; n < captured; n++)
		if (pps_encoder_encode(e, source[n], adu_cb, out) < 0) {
			fprintf(stderr, "pps-codec-bench: encode failed at frame %d\n", n);
			return -1;
		}
	*wall_s = (double)pps_time_monotonic_ns() / 1e9 - t0;
	pps_encoder_get_stats(e, stats);
	pps_encoder_get_stream_params(e, stream);
	pps_encoder_free(e);
	return 0;
}

typedef struct {
	double psnr_sum, ssim_sum;
	int frames;
	bool with_ssim;
} quality_t;

static void
decoded_cb(const pps_decoded_frame_t *f, void *user)
{
	quality_t *q = user;

	if (f->flags || (int)f->frame_index >= captured)
		return;
	q->psnr_sum += pps_testutil_psnr_y(&f->picture, source[f->frame_index]);
	if (q->with_ssim)
		q->ssim_sum += pps_testutil_ssim_y(&f->picture, source[f->frame_index]);
	q->frames++;
}

/* Decodes the subset temporal <= t, quality < q; returns its payload bytes. */
static uint64_t
decode_subset(const adu_list_t *l, const pps_stream_params_t *stream, int t, int q, bool with_ssim,
              quality_t *quality)
{
	pps_decoder_t *d;
	uint64_t bytes = 0;

	memset(quality, 0, sizeof(*quality));
	quality->with_ssim = with_ssim;
	d = pps_decoder_new(stream, decoded_cb, quality);
	if (!d)
		return 0;
	for (int i = 0; i < l->count; i++) {
		const pps_adu_info_t *a = pps_adu_info(l->adus[i]);

		if (a->temporal_layer <= t && a->quality_layer < q) {
			bytes += pps_adu_size(l->adus[i]);
			pps_decoder_push(d, l->adus[i]);
		}
	}
	pps_decoder_drain(d);
	pps_decoder_free(d);
	return bytes;
}

static void
free_list(adu_list_t *l)
{
	for (int i = 0; i < l->count; i++)
		pps_adu_unref(l->adus[i]);
	free(l->adus);
}

static double
kbps(uint64_t bytes, int frames)
{
	return bytes * 8.0 * 30.0 / frames / 1000.0;
}

static void
usage(FILE *out)
{
	fprintf(
	    out,
	    "Usage: pps-codec-bench [OPTION]...\n"
	    "Encode frames of the test source in layers and print one JSON object: encode\n"
	    "speed, bits/s per layer, PSNR-Y and SSIM-Y of every layer subset, and the bits a\n"
	    "single-layer x264 needs for the same PSNR. A benchmark: it prints figures and\n"
	    "never fails on them (300 frames take about 12 s on one core).\n"
	    "\n"
	    "  --frames N               frames to encode (default 300)\n"
	    "  --size WxH               picture size (default 640x480)\n"
	    "  --layers TxQ             temporal x quality layers (default 3x2)\n"
	    "  --window N               adaptation window in frames (default 4)\n"
	    "  --pattern NAME           test pattern: ball, smpte, ..., synthetic (default ball)\n"
	    "  --preset NAME            x264 preset (default veryfast)\n"
	    "  --threads N              encoder threads (default 1)\n"
	    "  --base-crf N             base layer CRF (default 26)\n"
	    "  --enh-crf N              enhancement layers' CRF (default 24)\n"
	    "  --scale N                base layer downscale factor (default 2)\n"
	    "  --gop N                  frames per GOP (default 60)\n"
	    "  -h, --help               this help\n"
	    "  -V, --version            the version\n"
	    "\n"
	    "Exit status: 0 done; 1 runtime error (capture, encoder); 2 usage error.\n");
}

int
main(int argc, char **argv)
{
	options_t o = {300, 640, 480, 3, 2, 4, 1, 26, 24, 2, 60, "ball", "veryfast"};
	adu_list_t stack;
	pps_encoder_stats_t st;
	pps_stream_params_t stream;
	quality_t full;
	double wall, full_psnr;
	uint64_t total_cpu = 0, total_bytes = 0;
	int lo_crf = -1, hi_crf = -1;
	double lo_psnr = 0, hi_psnr = 0, lo_kbps = 0, hi_kbps = 0;

	for (int i = 1; i < argc; i += 2) {
		const char *k = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(k, "-h") || !strcmp(k, "--help")) {
			usage(stdout);
			return 0;
		}
		if (!strcmp(k, "-V") || !strcmp(k, "--version")) {
			printf("pps-codec-bench %s\n", PPS_VERSION);
			return 0;
		}
		if (!v) {
			fprintf(stderr, "pps-codec-bench: %s needs a value (see --help)\n", k);
			return 2;
		}
		if (!strcmp(k, "--frames"))
			o.frames = atoi(v);
		else if (!strcmp(k, "--size"))
			sscanf(v, "%dx%d", &o.width, &o.height);
		else if (!strcmp(k, "--layers"))
			sscanf(v, "%dx%d", &o.temporal, &o.quality);
		else if (!strcmp(k, "--window"))
			o.window = atoi(v);
		else if (!strcmp(k, "--pattern"))
			o.pattern = v;
		else if (!strcmp(k, "--preset"))
			o.preset = v;
		else if (!strcmp(k, "--threads"))
			o.threads = atoi(v);
		else if (!strcmp(k, "--base-crf"))
			o.base_crf = atoi(v);
		else if (!strcmp(k, "--enh-crf"))
			o.enh_crf = atoi(v);
		else if (!strcmp(k, "--scale"))
			o.scale = atoi(v);
		else if (!strcmp(k, "--gop"))
			o.gop = atoi(v);
		else {
			fprintf(stderr, "pps-codec-bench: unknown option '%s' (see --help)\n", k);
			return 2;
		}
	}
	if (capture_frames(&o) < 0)
		return 1;
	/* Whole mini-GOPs only: frames after the last anchor are never emitted. */
	captured -= captured % 4;
	if (encode(&o, o.quality, o.base_crf, &stack, &st, &stream, &wall) < 0)
		return 1;

	/* printf, not json-glib: the only strings are the pattern and preset names,
	 * which the capture and x264 accepted above (no quotes or backslashes), and
	 * the figures keep their %.1f/%.2f (json-glib prints every double with 17
	 * digits). */
	printf("{\n  \"frames\": %d, \"width\": %d, \"height\": %d, \"fps\": 30, "
	       "\"pattern\": \"%s\", \"preset\": \"%s\", \"threads\": %d,\n",
	       captured, o.width, o.height, o.pattern, o.preset, o.threads);
	printf("  \"temporal_layers\": %d, \"quality_layers\": %d, \"window_frames\": %d, "
	       "\"base\": \"%dx%d\", \"base_crf\": %d, \"enhancement_crf\": %d,\n",
	       stream.temporal_layers, stream.quality_layers, o.window, stream.base_width,
	       stream.base_height, o.base_crf, o.enh_crf);
	for (int q = 0; q < stream.quality_layers; q++) {
		total_cpu += st.cpu_us[q];
		total_bytes += st.bytes[q];
	}
	printf("  \"encode\": {\"frames_per_s\": %.1f, \"realtime_factor\": %.2f, "
	       "\"cpu_ms_per_frame\": {",
	       captured / wall, captured / wall / 30.0);
	for (int q = 0; q < stream.quality_layers; q++)
		printf("\"q%d\": %.2f, ", q, st.cpu_us[q] / 1000.0 / captured);
	printf("\"total\": %.2f}, \"filler_pictures\": %llu, \"encoder_delay_frames\": 0},\n",
	       total_cpu / 1000.0 / captured, (unsigned long long)st.filler_pictures);
	printf("  \"kbps\": {");
	for (int q = 0; q < stream.quality_layers; q++)
		printf("\"q%d\": %.1f, ", q, kbps(st.bytes[q], captured));
	printf("\"total\": %.1f, \"fillers\": %.1f},\n", kbps(total_bytes, captured),
	       kbps(st.filler_bytes, captured));

	printf("  \"subsets\": [\n");
	for (int q = 1; q <= stream.quality_layers; q++)
		for (int t = 0; t < stream.temporal_layers; t++) {
			quality_t r;
			uint64_t bytes = decode_subset(&stack, &stream, t, q, true, &r);

			printf(
			    "    {\"temporal_layers\": %d, \"quality_layers\": %d, \"frames\": %d, "
			    "\"kbps\": %.1f, \"psnr_y\": %.2f, \"ssim_y\": %.4f}%s\n",
			    t + 1, q, r.frames, kbps(bytes, captured),
			    r.frames ? r.psnr_sum / r.frames : 0,
			    r.frames ? r.ssim_sum / r.frames : 0,
			    q == stream.quality_layers && t == stream.temporal_layers - 1 ? ""
			                                                                  : ",");
		}
	printf("  ],\n");
	decode_subset(&stack, &stream, stream.temporal_layers - 1, stream.quality_layers, false,
	              &full);
	full_psnr = full.psnr_sum / full.frames;

	/* Single-layer x264, same preset and GOP: bisect for the two integer
	 * CRFs around the stack's PSNR (PSNR falls as CRF rises), interpolate. */
	{
		int a = 0, b = 51;

		while (b - a > 1 || lo_crf < 0 || hi_crf < 0) {
			int crf = lo_crf < 0 && hi_crf < 0 ? o.enh_crf : (a + b) / 2;
			adu_list_t single;
			pps_encoder_stats_t sst;
			pps_stream_params_t sstream;
			quality_t r;
			double w, p, k;

			if (lo_crf >= 0 && crf == lo_crf)
				crf = hi_crf >= 0 ? hi_crf : crf + 1;
			if (encode(&o, 1, crf, &single, &sst, &sstream, &w) < 0)
				return 1;
			k = kbps(decode_subset(&single, &sstream, 9, 1, false, &r), captured);
			free_list(&single);
			p = r.psnr_sum / r.frames;
			if (p >= full_psnr) {
				lo_crf = crf, lo_psnr = p, lo_kbps = k, a = crf;
				if (crf == 51)
					break;
			} else {
				hi_crf = crf, hi_psnr = p, hi_kbps = k, b = crf;
				if (crf == 0)
					break;
			}
			if (lo_crf >= 0 && hi_crf >= 0 && hi_crf == lo_crf + 1)
				break;
		}
	}
	printf("  \"single_layer\": {\"target_psnr_y\": %.2f, ", full_psnr);
	if (lo_crf >= 0 && hi_crf >= 0) {
		double f = (full_psnr - hi_psnr) / (lo_psnr - hi_psnr);
		double single_kbps = hi_kbps + f * (lo_kbps - hi_kbps);
		double stack_kbps = kbps(total_bytes, captured);

		printf("\"crf\": %.2f, \"kbps\": %.1f, \"layered_over_single\": %.2f}\n",
		       hi_crf - f, single_kbps, stack_kbps / single_kbps);
	} else {
		printf("\"crf\": null}\n");
	}
	printf("}\n");
	free_list(&stack);
	for (int n = 0; n < captured; n++)
		pps_frame_free(source[n]);
	free(source);
	return 0;
}
