/* SPDX-License-Identifier: MIT */
/*
 * Layered encoder: one x264 per quality layer, all with the same forced GOP.
 *
 * Zero-delay B frames. x264 outputs at most one picture per
 * x264_encoder_encode() call and decides a mini-GOP's types only when its
 * queue of decided pictures is empty, so in steady state the B frames of a
 * mini-GOP come out only as the next mini-GOP's frames are input: M frames
 * (up to 100 ms at 30 frames/s) of delay, and twice that for a residual layer
 * that needs the base's reconstruction first. Flushing with a NULL picture
 * cannot be undone (x264 stops its lookahead for good). Instead, right after
 * each anchor (P or IDR) we feed x264 "filler" pictures (copies of the anchor,
 * forced P at QP 51, so every macroblock is skipped: about 20 bytes each)
 * until every real picture is out. Fillers are reference pictures, so they
 * are sent. Measured (tests/bench): every ADU of a mini-GOP is emitted inside
 * the call that inputs its anchor, i.e. zero frames of encoder delay.
 *
 * Zero decoder holdback. x264 writes num_reorder_frames (1, or 2 with a B
 * pyramid) in the SPS, and libavcodec holds a picture back until that many
 * later pictures were decoded. So after the round's last real picture we
 * feed fillers until reorder_pictures of them have been coded, and send those
 * as a filler-only ADU that closes the mini-GOP (same window as its anchor):
 * a client that pushed it has every frame of the mini-GOP out. x264 still
 * keeps its pipeline (bframes pictures) full, so the fillers fed last are
 * coded only when the next round's first frame is input; they precede the
 * next anchor in decode order and it references them, so they are prepended
 * to its ADU ("leading" fillers). The next mini-GOP's B frames reference the
 * last leading filler (an exact copy of the previous anchor), which lives in
 * their own anchor's ADU; their ADU dependencies say so. Leading fillers
 * before an IDR are discarded (the IDR resets every reference).
 *
 * Disposable P frames (params.disposable_p): no B frames at all. Each frame
 * is a round of its own, coded when it is input; a window's last frame is
 * coded as a P frame and then forgotten (x264_encoder_invalidate_reference
 * with a picture buffer of two), so the next frame references the anchor
 * before it and nothing references the disposable one. No reordering, so no
 * fillers.
 *
 * Quality layers: the base is coded at 1/base_scale; its exact reconstruction
 * (b_full_recon, equal to libavcodec's output) is upscaled with the shared
 * integer filter and the residual (source - prediction + 128) is coded by the
 * next x264; layer q >= 2 codes the residual against layer q - 1's result.
 */
#include "pps-codec-internal.h"
#include "pps-time.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <x264.h>

#define FILLER_QP 51
/* "Uncapped" for a layer that must keep VBV on to be reconfigurable. */
#define UNCAPPED_VBV_KBPS 100000
/* More pictures than x264 could ever hold back (bframes + threads). */
#define MAX_FLUSH_CALLS 64

typedef struct {
	uint32_t frame_index;
	int64_t capture_us;
	pps_adu_frame_type_t type;
	pps_frame_t *source;     /* full resolution */
	pps_frame_t *base;       /* base resolution input (== source when scale 1) */
	pps_frame_t *base_recon; /* base reconstruction */
	pps_frame_t *prediction; /* full-res prediction for the next layer, then its recon */
	uint8_t *payload[PPS_ADU_MAX_QUALITY_LAYERS];
	size_t payload_size[PPS_ADU_MAX_QUALITY_LAYERS];
	uint32_t adu_id[PPS_ADU_MAX_QUALITY_LAYERS];
} slot_t;

/* Filler pictures waiting to be sent, back to back with their sizes. */
typedef struct {
	uint8_t *data;
	size_t size, capacity;
	uint32_t sizes[PPS_CODEC_MAX_PICTURES_PER_ADU];
	int count;
} fillers_t;

typedef struct {
	x264_t *x264;
	int width, height;
	int64_t pts;
	int64_t last_real_pts; /* the pts of the last real picture fed */
	/* num_reorder_frames x264 writes in the SPS: fillers needed after the
	 * last real picture for libavcodec to output it. */
	int reorder_pictures;
	/* Fillers coded before the next real picture (they lead its ADU) and
	 * after the last real one of the round (the closing filler ADU). */
	fillers_t leading, closing;
	uint32_t real_in, real_out;
	/* Slots in the order x264 coded them, this round. */
	int order[4];
	int order_count;
} layer_t;

struct pps_encoder {
	pps_encoder_params_t params;
	pps_stream_params_t stream;
	pps_gop_t gop;
	int layers;
	layer_t layer[PPS_ADU_MAX_QUALITY_LAYERS];
	slot_t slot[4];
	pps_frame_t *residual; /* scratch: the picture fed to an enhancement x264 */
	uint32_t next_frame;
	uint32_t round_start; /* first frame of the current mini-GOP */
	uint32_t next_id;
	uint32_t decode_count; /* ADUs per layer so far (each layer has the same count) */
	uint32_t frames_complete;
	bool have_anchor;
	/* Per layer, the ADU the next anchor's picture chain continues from: the
	 * last anchor's closing filler ADU, or the anchor itself if none. */
	uint32_t chain_id[PPS_ADU_MAX_QUALITY_LAYERS];
	uint32_t anchor_frame;
	bool idr_requested;
	bool anchor_windows; /* wanted from the next window on (pps_encoder_set_anchor_windows) */
	pps_encoder_rates_t rates; /* pending when rates_pending */
	bool rates_pending;
	int crf_offset_wanted; /* pps_encoder_set_crf_offset, from the next mini-GOP */
	int crf_offset;        /* in force: added to rates.crf */
	bool rates_valid;      /* rates were set once: the offset has CRFs to add to */
	pps_encoder_stats_t stats;
};

const char *const pps_encoder_preset_names[] = {"ultrafast", "superfast", "veryfast", "faster",
                                                "fast",      "medium",    NULL};

static int
layer_open(layer_t *l, const pps_encoder_params_t *p, int width, int height, int crf, int vbv_kbps,
           int bframes, bool residual)
{
	x264_param_t xp;

	if (x264_param_default_preset(&xp, p->preset, NULL) < 0)
		return -EINVAL;
	xp.i_width = width;
	xp.i_height = height;
	xp.i_csp = X264_CSP_I420;
	xp.i_fps_num = (uint32_t)p->fps;
	xp.i_fps_den = 1;
	xp.i_timebase_num = 1;
	xp.i_timebase_den = (uint32_t)p->fps;
	xp.b_vfr_input = 0;
	/* Low latency: no lookahead, no frame threads (they hold frames). */
	xp.i_threads = p->threads > 0 ? p->threads : X264_THREADS_AUTO;
	xp.b_sliced_threads = 1;
	xp.i_sync_lookahead = 0;
	xp.rc.i_lookahead = 0;
	xp.rc.b_mb_tree = 0;
	/* The GOP is ours: forced types, no adaptive B, no scenecut, closed. */
	xp.i_bframe = bframes;
	xp.i_bframe_adaptive = X264_B_ADAPT_NONE;
	xp.i_bframe_pyramid = bframes > 1 ? X264_B_PYRAMID_STRICT : X264_B_PYRAMID_NONE;
	xp.i_scenecut_threshold = 0;
	xp.i_keyint_max = X264_KEYINT_MAX_INFINITE;
	xp.b_open_gop = 0;
	xp.b_intra_refresh = 0;
	/* One reference: a P must never lean on a droppable BREF. */
	xp.i_frame_reference = 1;
	/* Disposable P frames: x264 forgets each after coding it
	 * (x264_encoder_invalidate_reference), and the next picture references
	 * the anchor before it, which a picture buffer of two still holds. */
	if (p->disposable_p)
		xp.i_dpb_size = 2;
	xp.b_full_recon = 1;
	xp.b_repeat_headers = 1;
	xp.b_annexb = 1;
	xp.b_aud = 0;
	xp.i_log_level = X264_LOG_ERROR;
	xp.rc.i_rc_method = X264_RC_CRF;
	xp.rc.f_rf_constant = (float)crf;
	if (vbv_kbps <= 0 && p->rate_adaptive)
		vbv_kbps = UNCAPPED_VBV_KBPS;
	if (vbv_kbps > 0) {
		xp.rc.i_vbv_max_bitrate = vbv_kbps;
		xp.rc.i_vbv_buffer_size = vbv_kbps / 2; /* half a second */
	}
	if (residual) {
		/* Residuals are judged by PSNR, not by eye: no psy tuning. */
		xp.analyse.b_psy = 0;
		/* Nobody sees a residual either: the picture shown is the smooth
		 * upscaled prediction plus it, so no deblocking of it (the slice
		 * header says so and every decoder skips it too). A residual has
		 * no fades and little motion worth a search: no weighted
		 * prediction, the diamond search, and superfast's partitions.
		 * pps-codec-bench --layers 1x2 --window 1 --threads 1, three
		 * paired runs: the residual layer's CPU per frame 25-35% lower,
		 * PSNR-Y at about the same rate +0.45 dB on smpte, the same on
		 * snow, -0.35 dB on ball (at 63 dB). */
		xp.b_deblocking_filter = 0;
		xp.analyse.i_weighted_pred = X264_WEIGHTP_NONE;
		xp.analyse.i_me_method = X264_ME_DIA;
		xp.analyse.inter = X264_ANALYSE_I4x4 | X264_ANALYSE_I8x8;
	}
	l->x264 = x264_encoder_open(&xp);
	if (!l->x264)
		return -EIO;
	l->width = width;
	l->height = height;
	/* x264's rule for the SPS VUI (encoder/set.c). */
	l->reorder_pictures = xp.i_bframe_pyramid ? 2 : bframes > 0 ? 1 : 0;
	return 0;
}

static int
fillers_append(fillers_t *f, const uint8_t *data, size_t size)
{
	if (f->count >= PPS_CODEC_MAX_PICTURES_PER_ADU - 1)
		return -ENOSPC;
	if (f->size + size > f->capacity) {
		size_t cap = (f->size + size) * 2;
		uint8_t *n = realloc(f->data, cap);

		if (!n)
			return -ENOMEM;
		f->data = n;
		f->capacity = cap;
	}
	memcpy(f->data + f->size, data, size);
	f->size += size;
	f->sizes[f->count++] = (uint32_t)size;
	return 0;
}

static void
fillers_clear(fillers_t *f)
{
	f->size = 0;
	f->count = 0;
}

/*
 * Builds an ADU payload (see pps-codec-internal.h) from @f's pictures and,
 * unless @last is NULL, @last_size bytes of the real picture at the end.
 * NULL if out of memory.
 */
static uint8_t *
payload_build(const fillers_t *f, const uint8_t *last, size_t last_size, size_t *size)
{
	int n = f->count + (last ? 1 : 0);
	size_t header = 1 + 4 * (size_t)n;
	uint8_t *payload = malloc(header + f->size + last_size);

	if (!payload)
		return NULL;
	payload[0] = (uint8_t)n | (last ? 0 : PPS_CODEC_ADU_FILLERS_ONLY);
	for (int i = 0; i < n; i++) {
		uint32_t sz = i < f->count ? f->sizes[i] : (uint32_t)last_size;

		for (int b = 0; b < 4; b++)
			payload[1 + 4 * i + b] = (uint8_t)(sz >> (8 * b));
	}
	if (f->size) /* memcpy from NULL is undefined even for 0 bytes */
		memcpy(payload + header, f->data, f->size);
	if (last)
		memcpy(payload + header + f->size, last, last_size);
	*size = header + f->size + last_size;
	return payload;
}

/* Copies an x264 NV12 reconstruction into an I420 frame. */
static void
recon_copy(pps_frame_t *dst, const x264_image_t *img)
{
	for (int y = 0; y < dst->height; y++)
		memcpy(dst->planes[0] + (size_t)y * dst->strides[0],
		       img->plane[0] + (size_t)y * img->i_stride[0], (size_t)dst->width);
	for (int y = 0; y < dst->height / 2; y++) {
		const uint8_t *uv = img->plane[1] + (size_t)y * img->i_stride[1];
		uint8_t *u = dst->planes[1] + (size_t)y * dst->strides[1];
		uint8_t *v = dst->planes[2] + (size_t)y * dst->strides[2];

		for (int x = 0; x < dst->width / 2; x++) {
			u[x] = uv[2 * x];
			v[x] = uv[2 * x + 1];
		}
	}
}

/* recon = clip(prediction + residual - 128), in place in slot->prediction. */
static void
add_residual(pps_frame_t *prediction, const x264_image_t *img)
{
	for (int p = 0; p < 3; p++) {
		int w = p ? prediction->width / 2 : prediction->width;
		int h = p ? prediction->height / 2 : prediction->height;

		for (int y = 0; y < h; y++) {
			uint8_t *d = prediction->planes[p] + (size_t)y * prediction->strides[p];
			const uint8_t *r = p ? img->plane[1] + (size_t)y * img->i_stride[1]
			                     : img->plane[0] + (size_t)y * img->i_stride[0];
			int step = p ? 2 : 1, off = p == 2 ? 1 : 0;

			for (int x = 0; x < w; x++) {
				int v = d[x] + r[x * step + off] - 128;

				d[x] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
			}
		}
	}
}

static int
layer_output(pps_encoder_t *e, int q, x264_nal_t *nal, int nal_count, int size, x264_picture_t *out)
{
	layer_t *l = &e->layer[q];
	intptr_t tag = (intptr_t)out->opaque;
	slot_t *s;

	(void)nal_count;
	if (size <= 0)
		return 0;
	if (tag == 0) {
		e->stats.filler_pictures++;
		e->stats.filler_bytes += (uint64_t)size + 4; /* and its size in the header */
		/* Coded after the round's last real picture: they close the round. */
		return fillers_append(l->real_out == l->real_in ? &l->closing : &l->leading,
		                      nal[0].p_payload, (size_t)size);
	}
	s = &e->slot[tag - 1];
	if (s->type == PPS_ADU_FRAME_IDR)
		fillers_clear(&l->leading); /* the IDR resets the references */
	s->payload[q] =
	    payload_build(&l->leading, nal[0].p_payload, (size_t)size, &s->payload_size[q]);
	if (!s->payload[q])
		return -ENOMEM;
	fillers_clear(&l->leading);
	l->real_out++;
	if (l->order_count < 4)
		l->order[l->order_count++] = (int)(tag - 1);
	/* The next layer predicts from this one's reconstruction. */
	if (q + 1 < e->layers) {
		if (q == 0) {
			recon_copy(s->base_recon, &out->img);
			for (int p = 0; p < 3; p++)
				pps_upscale_plane(
				    s->base_recon->planes[p], s->base_recon->strides[p],
				    p ? s->base_recon->width / 2 : s->base_recon->width,
				    p ? s->base_recon->height / 2 : s->base_recon->height,
				    s->prediction->planes[p], s->prediction->strides[p],
				    p ? s->prediction->width / 2 : s->prediction->width,
				    p ? s->prediction->height / 2 : s->prediction->height);
		} else {
			add_residual(s->prediction, &out->img);
		}
	}
	return 0;
}

static int
layer_feed(pps_encoder_t *e, int q, const pps_frame_t *picture, int x264_type, int qp, intptr_t tag)
{
	layer_t *l = &e->layer[q];
	x264_picture_t in, out;
	x264_nal_t *nal;
	int nal_count, size;

	x264_picture_init(&in);
	in.img.i_csp = X264_CSP_I420;
	in.img.i_plane = 3;
	for (int p = 0; p < 3; p++) {
		in.img.plane[p] = picture->planes[p];
		in.img.i_stride[p] = picture->strides[p];
	}
	in.i_type = x264_type;
	in.i_qpplus1 = qp ? qp + 1 : X264_QP_AUTO;
	in.i_pts = l->pts++;
	in.opaque = (void *)tag;
	if (tag) {
		l->real_in++;
		l->last_real_pts = in.i_pts;
	}
	size = x264_encoder_encode(l->x264, &nal, &nal_count, &in, &out);
	if (size < 0)
		return -EIO;
	return layer_output(e, q, nal, nal_count, size, &out);
}

/* Feeds fillers until every real picture fed so far is out and followed by
 * enough coded fillers for libavcodec to output it too. */
static int
layer_flush(pps_encoder_t *e, int q, const pps_frame_t *anchor)
{
	layer_t *l = &e->layer[q];

	for (int i = 0; l->real_out < l->real_in || l->closing.count < l->reorder_pictures; i++) {
		int r;

		if (i == MAX_FLUSH_CALLS)
			return -EIO;
		r = layer_feed(e, q, anchor, X264_TYPE_P, FILLER_QP, 0);
		if (r < 0)
			return r;
	}
	return 0;
}

static int
x264_type_of(pps_adu_frame_type_t t)
{
	switch (t) {
	case PPS_ADU_FRAME_IDR:
		return X264_TYPE_IDR;
	case PPS_ADU_FRAME_P:
		return X264_TYPE_P;
	case PPS_ADU_FRAME_BREF:
		return X264_TYPE_BREF;
	case PPS_ADU_FRAME_PD:
		return X264_TYPE_P;
	default:
		return X264_TYPE_B;
	}
}

/* The 2x box filter written out: a shift instead of a division per sample
 * (the division was a fifth of the encoding thread's own time). */
static void
downscale_2x_row(uint8_t *restrict d, const uint8_t *restrict s0, const uint8_t *restrict s1, int w)
{
	for (int x = 0; x < w; x++) {
		unsigned sum = (unsigned)s0[2 * x] + s0[2 * x + 1] + s1[2 * x] + s1[2 * x + 1];

		d[x] = (uint8_t)((sum + 2) >> 2);
	}
}

/* Box filter: encoder side only, need not match anything. */
static void
downscale(pps_frame_t *dst, const pps_frame_t *src, int scale)
{
	int area = scale * scale;

	for (int p = 0; p < 3; p++) {
		int w = p ? dst->width / 2 : dst->width;
		int h = p ? dst->height / 2 : dst->height;

		for (int y = 0; y < h; y++) {
			uint8_t *d = dst->planes[p] + (size_t)y * dst->strides[p];

			if (scale == 2) {
				const uint8_t *s0 =
				    src->planes[p] + (size_t)(2 * y) * src->strides[p];

				downscale_2x_row(d, s0, s0 + src->strides[p], w);
				continue;
			}
			for (int x = 0; x < w; x++) {
				int sum = 0;

				for (int j = 0; j < scale; j++) {
					const uint8_t *s =
					    src->planes[p] +
					    (size_t)(y * scale + j) * src->strides[p] + x * scale;
					for (int i = 0; i < scale; i++)
						sum += s[i];
				}
				d[x] = (uint8_t)((sum + area / 2) / area);
			}
		}
	}
}

/* In 16-bit lanes (the difference fits): a third of the time of int lanes. */
static void
make_residual_row(uint8_t *restrict d, const uint8_t *restrict s, const uint8_t *restrict r, int w)
{
	for (int x = 0; x < w; x++) {
		int16_t v = (int16_t)(s[x] - r[x] + 128);

		d[x] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
	}
}

static void
make_residual(pps_frame_t *res, const pps_frame_t *src, const pps_frame_t *pred)
{
	for (int p = 0; p < 3; p++) {
		int w = p ? src->width / 2 : src->width;
		int h = p ? src->height / 2 : src->height;

		for (int y = 0; y < h; y++)
			make_residual_row(res->planes[p] + (size_t)y * res->strides[p],
			                  src->planes[p] + (size_t)y * src->strides[p],
			                  pred->planes[p] + (size_t)y * pred->strides[p], w);
	}
}

void
pps_encoder_free(pps_encoder_t *e)
{
	if (!e)
		return;
	for (int q = 0; q < PPS_ADU_MAX_QUALITY_LAYERS; q++) {
		if (e->layer[q].x264)
			x264_encoder_close(e->layer[q].x264);
		free(e->layer[q].leading.data);
		free(e->layer[q].closing.data);
	}
	for (int i = 0; i < 4; i++) {
		slot_t *s = &e->slot[i];

		if (s->base != s->source)
			pps_frame_free(s->base);
		pps_frame_free(s->source);
		pps_frame_free(s->base_recon);
		pps_frame_free(s->prediction);
		for (int q = 0; q < PPS_ADU_MAX_QUALITY_LAYERS; q++)
			free(s->payload[q]);
	}
	pps_frame_free(e->residual);
	free(e);
}

pps_encoder_t *
pps_encoder_new(const pps_encoder_params_t *params)
{
	pps_encoder_t *e;
	int base_w, base_h, bframes, err;

	if (params->width < 16 || params->height < 16 || (params->width | params->height) & 1 ||
	    params->fps < 1 || params->quality_layers < 1 || params->quality_layers > 3 ||
	    params->base_scale < 1 || params->base_scale > 4 || params->window_frames < 1 ||
	    params->temporal_layers < 1 || !params->preset) {
		errno = EINVAL;
		return NULL;
	}
	e = calloc(1, sizeof(*e));
	if (!e) {
		errno = ENOMEM;
		return NULL;
	}
	e->params = *params;
	e->layers = params->quality_layers;
	if (e->layers == 1)
		e->params.base_scale = 1; /* a lone base is the full picture */
	base_w = params->width / e->params.base_scale & ~1;
	base_h = params->height / e->params.base_scale & ~1;
	e->stream.width = params->width;
	e->stream.height = params->height;
	e->stream.fps = params->fps;
	e->stream.base_width = base_w;
	e->stream.base_height = base_h;
	/* Disposable P frames make one droppable layer: mini-GOPs of two. */
	e->stream.temporal_layers = pps_gop_init(
	    &e->gop,
	    params->disposable_p && params->temporal_layers > 2 ? 2 : params->temporal_layers,
	    params->window_frames, params->gop_frames);
	e->stream.quality_layers = e->layers;
	e->stream.minigop_frames = e->gop.minigop_frames;
	e->stream.window_frames = params->window_frames;
	e->stream.gop_frames = e->gop.gop_frames;
	e->stream.upscale_filter = PPS_CODEC_UPSCALE_BILINEAR_Q8;
	e->gop.disposable_p = params->disposable_p;
	bframes = params->disposable_p ? 0 : e->gop.minigop_frames - 1;
	e->anchor_windows = params->anchor_windows;

	err = layer_open(&e->layer[0], &e->params, base_w, base_h, params->base_crf,
	                 params->base_vbv_kbps, bframes, false);
	for (int q = 1; q < e->layers && !err; q++) {
		int crf = params->enhancement_crf - 6 * (q - 1);

		err = layer_open(&e->layer[q], &e->params, params->width, params->height,
		                 crf < 0 ? 0 : crf, params->enhancement_vbv_kbps, bframes, true);
	}
	if (err)
		goto err_free;
	for (int i = 0; i < e->gop.minigop_frames; i++) {
		slot_t *s = &e->slot[i];

		s->source = pps_frame_new(params->width, params->height);
		s->base = e->params.base_scale > 1 ? pps_frame_new(base_w, base_h) : s->source;
		if (!s->source || !s->base)
			goto err_nomem;
		if (e->layers > 1) {
			s->base_recon = pps_frame_new(base_w, base_h);
			s->prediction = pps_frame_new(params->width, params->height);
			if (!s->base_recon || !s->prediction)
				goto err_nomem;
		}
	}
	if (e->layers > 1 && !(e->residual = pps_frame_new(params->width, params->height)))
		goto err_nomem;
	return e;

err_nomem:
	err = -ENOMEM;
err_free:
	pps_encoder_free(e);
	errno = -err;
	return NULL;
}

/*
 * Emits a layer's closing fillers as their own ADU. It belongs to the anchor's
 * frame (so to its window) and needs only the anchor: the fillers reference
 * the anchor and each other, never the BREF (one reference, the most recent
 * in display order), nor the base (an enhancement filler is decodable alone;
 * only the frames it lets out need the base).
 */
static int
emit_fillers(pps_encoder_t *e, int q, const slot_t *anchor, pps_encoder_adu_cb cb, void *user)
{
	layer_t *l = &e->layer[q];
	pps_adu_info_t info = {0};
	pps_adu_t *adu;
	uint8_t *payload;
	size_t size;

	info.id = e->next_id++;
	info.frame_index = anchor->frame_index;
	info.capture_us = anchor->capture_us;
	info.decode_order = e->decode_count;
	info.frame_type = PPS_ADU_FRAME_P;
	info.temporal_layer = 0;
	info.quality_layer = (uint8_t)q;
	info.deps[info.dep_count++] = anchor->adu_id[q];
	payload = payload_build(&l->closing, NULL, 0, &size);
	if (!payload)
		return -ENOMEM;
	fillers_clear(&l->closing);
	adu = pps_adu_new_take(&info, payload, size);
	if (!adu) {
		int err = -errno;

		free(payload);
		return err;
	}
	e->chain_id[q] = info.id;
	e->stats.bytes[q] += size;
	e->stats.filler_bytes += 1; /* the picture count */
	cb(adu, user);
	return 0;
}

/* Emits layer @q of picture @s (decode position e->decode_count). */
static int
emit_adu(pps_encoder_t *e, slot_t *s, int q, pps_encoder_adu_cb cb, void *user)
{
	uint32_t refs[2];
	/* Disposable P frames: rounds of one frame and one reference, x264's:
	 * the last picture it did not forget, the last anchor coded. */
	int nrefs = e->gop.disposable_p ? 0 : pps_gop_ref_frames(&e->gop, s->frame_index, refs);
	pps_adu_info_t info = {0};
	pps_adu_t *adu;

	info.id = e->next_id++;
	info.frame_index = s->frame_index;
	info.capture_us = s->capture_us;
	info.decode_order = e->decode_count;
	info.frame_type = (uint8_t)s->type;
	info.temporal_layer = pps_gop_temporal_layer(&e->gop, s->frame_index);
	info.quality_layer = (uint8_t)q;
	if (e->gop.disposable_p && s->type != PPS_ADU_FRAME_IDR && e->have_anchor)
		info.deps[info.dep_count++] = e->chain_id[q];
	for (int r = 0; r < nrefs; r++) {
		uint32_t f = refs[r];

		if (f >= e->round_start)
			info.deps[info.dep_count++] = e->slot[f - e->round_start].adu_id[q];
		else if (e->have_anchor && f == e->anchor_frame)
			info.deps[info.dep_count++] = e->chain_id[q];
	}
	if (q > 0)
		info.deps[info.dep_count++] = s->adu_id[q - 1];
	s->adu_id[q] = info.id;
	adu = pps_adu_new_take(&info, s->payload[q], s->payload_size[q]);
	if (!adu)
		return -errno;
	s->payload[q] = NULL;
	e->stats.bytes[q] += s->payload_size[q];
	cb(adu, user);
	return 0;
}

/*
 * Emits the ADUs of the finished round in x264's (decode) order, all layers
 * of a picture together (from @first_layer: a round of one picture may have
 * emitted its base already, before its enhancement was encoded), then each
 * layer's closing filler ADU: after every picture of the round, so a decoder
 * can take it as "nothing more for these frames".
 */
static int
emit_round(pps_encoder_t *e, int slots, int first_layer, pps_encoder_adu_cb cb, void *user)
{
	layer_t *base = &e->layer[0];
	const slot_t *anchor = &e->slot[slots - 1]; /* the round's last frame in display order */
	bool fillers = false;

	if (base->order_count != slots || (first_layer > 0 && slots != 1))
		return -EIO; /* x264 did not honour the forced types */
	for (int k = 0; k < slots; k++) {
		for (int q = first_layer; q < e->layers; q++) {
			int r = emit_adu(e, &e->slot[base->order[k]], q, cb, user);

			if (r < 0)
				return r;
		}
		e->decode_count++;
	}
	if (anchor->type == PPS_ADU_FRAME_PD)
		return 0; /* nothing references it, and no fillers follow it */
	e->have_anchor = true;
	e->anchor_frame = anchor->frame_index;
	for (int q = 0; q < e->layers; q++) {
		int r;

		e->chain_id[q] = anchor->adu_id[q];
		if (e->layer[q].closing.count == 0)
			continue; /* no B frames: libavcodec holds nothing back */
		r = emit_fillers(e, q, anchor, cb, user);
		if (r < 0)
			return r;
		fillers = true;
	}
	if (fillers)
		e->decode_count++;
	return 0;
}

/*
 * x264's VBV refills maxrate / fps per picture it is given, and it is given
 * the filler pictures too (about 20 bytes each): with fillers it believes
 * time runs (real + fillers) / real times faster than it does. The rate it
 * is told is scaled by real / all pictures, measured on this layer (before
 * the first frames, the mini-GOP's structural count: S real pictures, S - 1
 * fillers pushing the B frames out and reorder_pictures closing ones).
 */
static int
vbv_rate_for_x264(const pps_encoder_t *e, const layer_t *l, int kbps)
{
	int64_t real = l->real_in, all = l->pts;
	int64_t v;

	if (real < 16 || all <= 0) {
		real = e->gop.minigop_frames;
		all = real + (real - 1) + l->reorder_pictures;
	}
	v = (int64_t)kbps * real / all;
	return v < 1 ? 1 : (int)v;
}

/* Between mini-GOPs: x264 has no real picture in flight, only fillers. */
static void
apply_rates(pps_encoder_t *e)
{
	e->rates_pending = false;
	e->crf_offset = e->crf_offset_wanted;
	for (int q = 0; q < e->layers; q++) {
		int crf = e->rates.crf[q] + e->crf_offset;
		x264_param_t xp;

		x264_encoder_parameters(e->layer[q].x264, &xp);
		xp.rc.i_vbv_max_bitrate = vbv_rate_for_x264(e, &e->layer[q], e->rates.kbps[q]);
		xp.rc.i_vbv_buffer_size = e->rates.buffer_kbit[q];
		xp.rc.f_rf_constant = (float)(crf > 51 ? 51 : crf);
		if (x264_encoder_reconfig(e->layer[q].x264, &xp) < 0)
			e->stats.reconfig_errors++;
		else
			e->stats.reconfigs++;
	}
}

int
pps_encoder_set_rates(pps_encoder_t *e, const pps_encoder_rates_t *rates)
{
	if (!e->params.rate_adaptive)
		return -EINVAL;
	for (int q = 0; q < e->layers; q++) {
		if (rates->kbps[q] < 1 || rates->kbps[q] > UNCAPPED_VBV_KBPS ||
		    rates->buffer_kbit[q] < 1 || rates->crf[q] < 0 || rates->crf[q] > 51)
			return -EINVAL;
	}
	e->rates = *rates;
	e->rates_pending = true;
	e->rates_valid = true;
	return 0;
}

void
pps_encoder_set_crf_offset(pps_encoder_t *e, int crf_offset)
{
	if (!e->params.rate_adaptive)
		return;
	e->crf_offset_wanted = crf_offset < 0 ? 0 : crf_offset > 51 ? 51 : crf_offset;
}

/* Layer @q's last picture is disposable: no later picture may reference it. */
static int
forget(pps_encoder_t *e, int q)
{
	layer_t *l = &e->layer[q];

	if (x264_encoder_invalidate_reference(l->x264, l->last_real_pts) < 0)
		return -EIO;
	return 0;
}

int
pps_encoder_encode(pps_encoder_t *e, const pps_frame_t *frame, pps_encoder_adu_cb cb, void *user)
{
	uint32_t n = e->next_frame;
	int idx = (int)(n - e->round_start);
	slot_t *s;
	uint64_t t0;
	int64_t w0;
	bool early;
	int r;

	if (frame->width != e->params.width || frame->height != e->params.height)
		return -EINVAL;
	if (idx >= e->gop.minigop_frames)
		return -EIO;
	if (idx == 0 &&
	    (e->rates_pending || (e->rates_valid && e->crf_offset != e->crf_offset_wanted)))
		apply_rates(e);
	if (idx == 0 && e->crf_offset > 0)
		e->stats.drained_minigops++;
	/* A window's first frame (frame 0 is window 0 by itself): the window
	 * takes the mode wanted now. Every round ended with the last window. */
	if (idx == 0 && e->gop.minigop_frames > 1 &&
	    (n == 0 || (n - 1) % (uint32_t)e->gop.window_frames == 0)) {
		if (n > 0 && e->gop.anchors_only != e->anchor_windows)
			e->stats.anchor_switches++;
		e->gop.anchors_only = e->anchor_windows;
		if (e->gop.anchors_only)
			e->stats.anchor_windows++;
	}
	if (e->idr_requested) {
		/* The end of the first window none of whose frames was input yet:
		 * its frames before the IDR can still be forced to P. */
		uint32_t w = (uint32_t)e->gop.window_frames;
		uint32_t origin = (n + w - 1 + w - 1) / w * w;

		if (origin > e->gop.origin) {
			e->gop.previous_origin = e->gop.origin;
			e->gop.origin = origin;
		}
		e->idr_requested = false;
	}
	s = &e->slot[idx];
	w0 = pps_time_monotonic_us();
	t0 = (uint64_t)pps_time_thread_cpu_us();
	pps_frame_copy(s->source, frame);
	s->frame_index = n;
	s->capture_us = frame->capture_us;
	s->type = pps_gop_frame_type(&e->gop, n);
	if (s->base != s->source)
		downscale(s->base, s->source, e->params.base_scale);
	if (idx == 0)
		e->layer[0].order_count = 0;
	r = layer_feed(e, 0, s->base, x264_type_of(s->type), 0, idx + 1);
	if (r == 0 && s->type == PPS_ADU_FRAME_PD)
		r = forget(e, 0);
	if (r == 0 && (s->type == PPS_ADU_FRAME_IDR || s->type == PPS_ADU_FRAME_P ||
	               s->type == PPS_ADU_FRAME_PD))
		r = layer_flush(e, 0, s->base);
	e->stats.cpu_us[0] += (uint64_t)pps_time_thread_cpu_us() - t0;
	e->stats.wall_us[0] += (uint64_t)(pps_time_monotonic_us() - w0);
	e->next_frame++;
	e->stats.frames++;
	if (r < 0)
		return r;
	if (s->type != PPS_ADU_FRAME_IDR && s->type != PPS_ADU_FRAME_P &&
	    s->type != PPS_ADU_FRAME_PD)
		return 0; /* B frames wait for their anchor */
	/* A round of one picture (no B frames): its base goes out now, so the
	 * server can send it while the enhancement is encoded. */
	early = idx == 0 && e->layers > 1 && e->layer[0].order_count == 1;
	if (early)
		r = emit_adu(e, s, 0, cb, user);

	for (int q = 1; q < e->layers && r == 0; q++) {
		w0 = pps_time_monotonic_us();
		t0 = (uint64_t)pps_time_thread_cpu_us();
		e->layer[q].order_count = 0;
		for (int i = 0; i <= idx && r == 0; i++) {
			make_residual(e->residual, e->slot[i].source, e->slot[i].prediction);
			r = layer_feed(e, q, e->residual, x264_type_of(e->slot[i].type), 0, i + 1);
			if (r == 0 && e->slot[i].type == PPS_ADU_FRAME_PD)
				r = forget(e, q);
		}
		/* e->residual now holds the anchor's residual: the filler source. */
		if (r == 0)
			r = layer_flush(e, q, e->residual);
		e->stats.cpu_us[q] += (uint64_t)pps_time_thread_cpu_us() - t0;
		e->stats.wall_us[q] += (uint64_t)(pps_time_monotonic_us() - w0);
	}
	if (r == 0)
		r = emit_round(e, idx + 1, early ? 1 : 0, cb, user);
	e->round_start = n + 1;
	e->frames_complete = n + 1;
	return r;
}

uint32_t
pps_encoder_frames_complete(const pps_encoder_t *e)
{
	return e->frames_complete;
}

void
pps_encoder_request_idr(pps_encoder_t *e)
{
	e->idr_requested = true;
}

void
pps_encoder_set_anchor_windows(pps_encoder_t *e, bool on)
{
	e->anchor_windows = on;
}

void
pps_encoder_get_stream_params(const pps_encoder_t *e, pps_stream_params_t *params)
{
	*params = e->stream;
}

void
pps_encoder_get_stats(const pps_encoder_t *e, pps_encoder_stats_t *stats)
{
	*stats = e->stats;
}
