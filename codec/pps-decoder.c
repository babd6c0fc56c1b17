/* SPDX-License-Identifier: MIT */
/*
 * Layered decoder: one libavcodec H.264 decoder per quality layer.
 *
 * libavcodec conceals a missing reference silently (grey or smeared blocks,
 * no error), so decodability is tracked here from the ADUs' dependency lists:
 * an ADU is fed only if every ADU it depends on was decoded. Dependencies are
 * transitive through the anchors, so after a lost reference a layer stays
 * unfed until its next IDR (which depends on nothing in its own layer).
 *
 * Frames are assembled per frame index from the layers' outputs and released
 * in display order once no earlier frame can still arrive: pushes come in
 * decode order and a mini-GOP is never interleaved with the next, so pushing
 * a frame of mini-GOP g settles every frame before g, and pushing a filler ADU
 * (which follows all of its mini-GOP, and makes libavcodec output it) settles
 * every frame up to its anchor.
 */
#include "pps-codec-internal.h"

#include <errno.h>
#include <libavcodec/avcodec.h>
#include <stdlib.h>
#include <string.h>

/* Frames waiting for their layers (a few windows' worth). */
#define MAX_RECORDS 64
/* Recently decoded ADU ids; dependencies never reach further back than the
 * previous anchor, a handful of ADUs per layer. */
#define DECODED_RING 1024

typedef struct {
	bool used;
	uint32_t frame_index;
	int64_t capture_us;
	uint8_t temporal_layer;
	bool undecodable;
	uint32_t expect_mask; /* layers fed to libavcodec for this frame */
	uint32_t got_mask;    /* layers libavcodec gave back */
	pps_frame_t *picture[PPS_ADU_MAX_QUALITY_LAYERS];
} record_t;

struct pps_decoder {
	pps_stream_params_t params;
	pps_decoder_frame_cb frame_cb;
	void *user;
	AVCodecContext *codec[PPS_ADU_MAX_QUALITY_LAYERS];
	AVPacket *packet;
	AVFrame *av_frame;
	record_t record[MAX_RECORDS];
	uint32_t decoded[DECODED_RING];
	unsigned decoded_count;
	int64_t safe_through;  /* frames <= this will get no more pushes */
	int64_t later_through; /* frames <= this: an ADU of a later mini-GOP was pushed */
	bool broken[PPS_ADU_MAX_QUALITY_LAYERS]; /* layer flushed: wait for its IDR */
	int64_t last_output;                     /* last frame index handed out */
	pps_frame_t *output;                     /* the last good picture, reused */
	bool have_output;
	pps_decoder_stats_t stats;
};

static bool
was_decoded(const pps_decoder_t *d, uint32_t id)
{
	unsigned n = d->decoded_count < DECODED_RING ? d->decoded_count : DECODED_RING;

	for (unsigned i = 0; i < n; i++)
		if (d->decoded[i] == id)
			return true;
	return false;
}

static void
mark_decoded(pps_decoder_t *d, uint32_t id)
{
	d->decoded[d->decoded_count++ % DECODED_RING] = id;
}

void
pps_decoder_free(pps_decoder_t *d)
{
	if (!d)
		return;
	for (int q = 0; q < PPS_ADU_MAX_QUALITY_LAYERS; q++)
		avcodec_free_context(&d->codec[q]);
	av_packet_free(&d->packet);
	av_frame_free(&d->av_frame);
	for (int i = 0; i < MAX_RECORDS; i++)
		for (int q = 0; q < PPS_ADU_MAX_QUALITY_LAYERS; q++)
			pps_frame_free(d->record[i].picture[q]);
	pps_frame_free(d->output);
	free(d);
}

pps_decoder_t *
pps_decoder_new(const pps_stream_params_t *params, pps_decoder_frame_cb frame_cb, void *user)
{
	const AVCodec *h264 = avcodec_find_decoder(AV_CODEC_ID_H264);
	pps_decoder_t *d;
	int err = -ENOMEM;

	if (params->quality_layers < 1 || params->quality_layers > PPS_ADU_MAX_QUALITY_LAYERS ||
	    params->minigop_frames < 1 || params->width < 16 || params->height < 16 ||
	    params->upscale_filter != PPS_CODEC_UPSCALE_BILINEAR_Q8 || !frame_cb) {
		errno = EINVAL;
		return NULL;
	}
	if (!h264) {
		errno = ENOSYS;
		return NULL;
	}
	d = calloc(1, sizeof(*d));
	if (!d) {
		errno = ENOMEM;
		return NULL;
	}
	d->params = *params;
	d->frame_cb = frame_cb;
	d->user = user;
	d->safe_through = -1;
	d->later_through = -1;
	d->last_output = -1;
	d->packet = av_packet_alloc();
	d->av_frame = av_frame_alloc();
	d->output = pps_frame_new(params->width, params->height);
	if (!d->packet || !d->av_frame || !d->output)
		goto err_free;
	for (int q = 0; q < params->quality_layers; q++) {
		AVCodecContext *c = avcodec_alloc_context3(h264);

		if (!c)
			goto err_free;
		/* Slice threads only: frame threads would hold pictures back. */
		c->thread_type = FF_THREAD_SLICE;
		c->thread_count = 0;
		/* Without B frames nothing is reordered: output each picture as
		 * soon as it is decoded, whatever the SPS says about reordering. */
		if (params->minigop_frames == 1)
			c->flags |= AV_CODEC_FLAG_LOW_DELAY;
		d->codec[q] = c;
		err = avcodec_open2(c, h264, NULL);
		if (err < 0)
			goto err_free;
	}
	return d;

err_free:
	pps_decoder_free(d);
	errno = err == -ENOMEM ? ENOMEM : EIO;
	return NULL;
}

static record_t *
record_find(pps_decoder_t *d, uint32_t frame_index, bool create)
{
	record_t *free_slot = NULL;

	for (int i = 0; i < MAX_RECORDS; i++) {
		if (d->record[i].used && d->record[i].frame_index == frame_index)
			return &d->record[i];
		if (!d->record[i].used && !free_slot)
			free_slot = &d->record[i];
	}
	if (!create || !free_slot)
		return NULL;
	{
		/* Pictures of a released record are reused: same sizes per layer. */
		pps_frame_t *pictures[PPS_ADU_MAX_QUALITY_LAYERS];

		memcpy(pictures, free_slot->picture, sizeof(pictures));
		memset(free_slot, 0, sizeof(*free_slot));
		memcpy(free_slot->picture, pictures, sizeof(pictures));
	}
	free_slot->used = true;
	free_slot->frame_index = frame_index;
	return free_slot;
}

static void
copy_av_frame(pps_frame_t *dst, const AVFrame *f)
{
	for (int p = 0; p < 3; p++) {
		int w = p ? dst->width / 2 : dst->width;
		int h = p ? dst->height / 2 : dst->height;

		for (int y = 0; y < h; y++)
			memcpy(dst->planes[p] + (size_t)y * dst->strides[p],
			       f->data[p] + (size_t)y * f->linesize[p], (size_t)w);
	}
}

static int
receive(pps_decoder_t *d, int q)
{
	int r;

	while ((r = avcodec_receive_frame(d->codec[q], d->av_frame)) == 0) {
		int64_t pts = d->av_frame->pts;
		int w = q ? d->params.width : d->params.base_width;
		int h = q ? d->params.height : d->params.base_height;
		record_t *rec = pts >= 0 ? record_find(d, (uint32_t)pts, false) : NULL;

		/* Filler pictures (pts -1) and frames already given up on. */
		if (rec && d->av_frame->width == w && d->av_frame->height == h &&
		    d->av_frame->format == AV_PIX_FMT_YUV420P) {
			if (!rec->picture[q])
				rec->picture[q] = pps_frame_new(w, h);
			if (rec->picture[q]) {
				copy_av_frame(rec->picture[q], d->av_frame);
				rec->got_mask |= 1u << q;
			}
		}
		av_frame_unref(d->av_frame);
	}
	return r == AVERROR(EAGAIN) || r == AVERROR_EOF ? 0 : r;
}

/* In 16-bit lanes (the sum fits): a third of the time of int lanes. */
static void
add_residual_row(uint8_t *restrict o, const uint8_t *restrict r, int w)
{
	for (int x = 0; x < w; x++) {
		int16_t v = (int16_t)(o[x] + r[x] - 128);

		o[x] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
	}
}

static void
add_residual(pps_frame_t *pic, const pps_frame_t *res)
{
	for (int p = 0; p < 3; p++) {
		int w = p ? pic->width / 2 : pic->width;
		int h = p ? pic->height / 2 : pic->height;

		for (int y = 0; y < h; y++)
			add_residual_row(pic->planes[p] + (size_t)y * pic->strides[p],
			                 res->planes[p] + (size_t)y * res->strides[p], w);
	}
}

static void
output_record(pps_decoder_t *d, record_t *rec)
{
	pps_decoded_frame_t out = {0};
	int used = 0;

	while (used < d->params.quality_layers && rec->got_mask & (1u << used))
		used++;
	if (used > 0) {
		const pps_frame_t *base = rec->picture[0];

		if (base->width == d->output->width && base->height == d->output->height)
			pps_frame_copy(d->output, base);
		else
			for (int p = 0; p < 3; p++)
				pps_upscale_plane(base->planes[p], base->strides[p],
				                  p ? base->width / 2 : base->width,
				                  p ? base->height / 2 : base->height,
				                  d->output->planes[p], d->output->strides[p],
				                  p ? d->output->width / 2 : d->output->width,
				                  p ? d->output->height / 2 : d->output->height);
		for (int q = 1; q < used; q++)
			add_residual(d->output, rec->picture[q]);
		d->have_output = true;
	} else {
		out.flags |= PPS_DECODER_FRAME_REPEATED;
		d->stats.frames_repeated++;
	}
	if (rec->undecodable)
		out.flags |= PPS_DECODER_FRAME_UNDECODABLE;
	if (d->have_output) {
		out.picture = *d->output;
	} else {
		out.picture.width = d->params.width;
		out.picture.height = d->params.height;
	}
	out.frame_index = rec->frame_index;
	out.capture_us = rec->capture_us;
	out.picture.frame_index = rec->frame_index;
	out.picture.capture_us = rec->capture_us;
	out.temporal_layer = rec->temporal_layer;
	out.quality_layers = (uint8_t)used;
	d->last_output = rec->frame_index;
	d->stats.frames_output++;
	d->frame_cb(&out, d->user);
}

static void
release(pps_decoder_t *d, bool all)
{
	for (;;) {
		record_t *first = NULL;

		for (int i = 0; i < MAX_RECORDS; i++)
			if (d->record[i].used &&
			    (!first || d->record[i].frame_index < first->frame_index))
				first = &d->record[i];
		if (!first)
			return;
		if (!all && (int64_t)first->frame_index > d->safe_through)
			return;
		if (!all && first->got_mask != first->expect_mask) {
			uint32_t missing = first->expect_mask & ~first->got_mask;

			if ((int64_t)first->frame_index > d->later_through)
				return; /* its layers' fillers may still come */
			/* A later mini-GOP began, yet a layer's picture never came
			 * out: the sender cut that layer after the picture but
			 * before its filler ADU, and libavcodec keeps it for
			 * reordering. Show what decoded; the layer starts again
			 * at its next IDR instead of stalling every frame. */
			for (int q = 0; q < d->params.quality_layers; q++) {
				if (!(missing & (1u << q)))
					continue;
				avcodec_flush_buffers(d->codec[q]);
				d->broken[q] = true;
			}
			first->undecodable = true;
			d->stats.layers_cut++;
		}
		output_record(d, first);
		first->used = false;
	}
}

static int
feed(pps_decoder_t *d, int q, const uint8_t *data, size_t size, int64_t pts)
{
	int r;

	d->packet->data = (uint8_t *)data;
	d->packet->size = (int)size;
	d->packet->pts = pts;
	d->packet->dts = AV_NOPTS_VALUE;
	r = avcodec_send_packet(d->codec[q], d->packet);
	if (r < 0)
		return r;
	return receive(d, q);
}

int
pps_codec_adu_pictures(const pps_adu_t *adu, pps_codec_picture_t *pictures, bool *fillers_only)
{
	const uint8_t *data = pps_adu_data(adu);
	size_t size = pps_adu_size(adu), offset;
	int n;

	if (size < 1)
		return -EINVAL;
	*fillers_only = data[0] & PPS_CODEC_ADU_FILLERS_ONLY;
	n = data[0] & PPS_CODEC_ADU_COUNT_MASK;
	offset = 1 + 4 * (size_t)n;
	if (n < 1 || n > PPS_CODEC_MAX_PICTURES_PER_ADU || size < offset)
		return -EINVAL;
	for (int i = 0; i < n; i++) {
		uint32_t sz = (uint32_t)data[1 + 4 * i] | (uint32_t)data[2 + 4 * i] << 8 |
		              (uint32_t)data[3 + 4 * i] << 16 | (uint32_t)data[4 + 4 * i] << 24;

		if (sz > size - offset)
			return -EINVAL;
		pictures[i] = (pps_codec_picture_t){.data = data + offset, .size = sz};
		offset += sz;
	}
	return offset == size ? n : -EINVAL;
}

int
pps_decoder_push(pps_decoder_t *d, const pps_adu_t *adu)
{
	const pps_adu_info_t *info = pps_adu_info(adu);
	pps_codec_picture_t pictures[PPS_CODEC_MAX_PICTURES_PER_ADU];
	uint32_t s = (uint32_t)d->params.minigop_frames;
	int q = info->quality_layer, n, r = 0;
	bool decodable = true, fillers_only;
	record_t *rec;

	if (q >= d->params.quality_layers)
		return -EINVAL;
	n = pps_codec_adu_pictures(adu, pictures, &fillers_only);
	if (n < 0)
		return n;

	/* Frames of earlier mini-GOPs can get no more ADUs; nor can the frames
	 * up to a filler ADU's, which comes after all of its mini-GOP. */
	if (fillers_only) {
		if ((int64_t)info->frame_index > d->safe_through)
			d->safe_through = info->frame_index;
	} else if (info->frame_index > 0) {
		int64_t settled = (int64_t)((info->frame_index - 1) / s * s);

		if (settled > d->safe_through)
			d->safe_through = settled;
		if (settled > d->later_through)
			d->later_through = settled;
	}
	/* Without B frames a frame's top layer is its last ADU: once it is
	 * pushed the frame can get no more (lower layers come first), so it
	 * need not wait for the next frame. A frame whose top layer the sender
	 * dropped waits for pps_decoder_settle() (end of its window). */
	if (s == 1 && !fillers_only && q == d->params.quality_layers - 1 &&
	    (int64_t)info->frame_index > d->safe_through)
		d->safe_through = info->frame_index;
	for (int i = 0; i < info->dep_count; i++)
		if (!was_decoded(d, info->deps[i]))
			decodable = false;
	if (d->broken[q]) {
		if (info->frame_type == PPS_ADU_FRAME_IDR)
			d->broken[q] = false;
		else
			decodable = false;
	}

	rec = NULL;
	if (fillers_only) {
		/* No frame of its own: nothing to record. */
	} else if ((int64_t)info->frame_index > d->last_output) {
		rec = record_find(d, info->frame_index, true);
		if (!rec) {
			/* Table full: a layer's output never came. Give up the oldest. */
			release(d, true);
			rec = record_find(d, info->frame_index, true);
		}
	} else {
		d->stats.frames_late++;
	}
	if (rec) {
		rec->capture_us = info->capture_us;
		rec->temporal_layer = info->temporal_layer;
	}
	if (!decodable) {
		d->stats.adus_undecodable++;
		if (rec)
			rec->undecodable = true;
		release(d, false);
		return 0;
	}
	if (rec)
		rec->expect_mask |= 1u << q;
	for (int i = 0; i < n && r >= 0; i++) {
		bool frame = !fillers_only && i == n - 1;

		/* Only the last picture of a picture ADU is the frame; the others are fillers. */
		r = feed(d, q, pictures[i].data, pictures[i].size,
		         frame ? (int64_t)info->frame_index : -1);
	}
	if (r < 0) {
		if (rec) {
			rec->expect_mask &= ~(1u << q);
			rec->undecodable = true;
		}
		d->stats.adus_undecodable++;
		release(d, false);
		return r;
	}
	mark_decoded(d, info->id);
	d->stats.adus_decoded++;
	/* A stream whose SPS says nothing is reordered (its droppable frames
	 * are disposable P frames, coded in display order) is as one without B
	 * frames: a frame's top layer is its last ADU. */
	if (s > 1 && rec && q == d->params.quality_layers - 1 && d->codec[q]->has_b_frames == 0 &&
	    (int64_t)info->frame_index > d->safe_through)
		d->safe_through = info->frame_index;
	release(d, false);
	return 0;
}

void
pps_decoder_settle(pps_decoder_t *d, uint32_t frame_index)
{
	if ((int64_t)frame_index > d->safe_through)
		d->safe_through = frame_index;
	if ((int64_t)frame_index > d->later_through)
		d->later_through = frame_index;
	release(d, false);
}

int
pps_decoder_drain(pps_decoder_t *d)
{
	int r = 0;

	for (int q = 0; q < d->params.quality_layers; q++) {
		int e = avcodec_send_packet(d->codec[q], NULL);

		if (e == 0)
			e = receive(d, q);
		if (e < 0 && r == 0)
			r = e;
		/* Back to a fresh state: the next ADU of this layer must be an IDR. */
		avcodec_flush_buffers(d->codec[q]);
	}
	release(d, true);
	d->decoded_count = 0;
	return r;
}
