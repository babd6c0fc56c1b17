/* SPDX-License-Identifier: MIT */
/*
 * --record: the stream as encoded, written into Matroska without decoding
 * or encoding anything, through GStreamer's matroskamux
 * (codec/pps-matroska.c: the loop thread copies each picture into its
 * track's bounded queue and goes on; GStreamer's threads mux and write).
 * Each quality layer is one H.264 track (the first the base at its own
 * size, the others the residual layers at full size, which only ppstream's
 * decoder adds up); a picture's presentation time is its capture time, from
 * the first picture's.
 *
 * x264's filler pictures (pps-encoder.c) are pictures of the bitstream like
 * any other, and the next mini-GOP references them, so they are written
 * too. Each is a copy of the anchor before it and is shown after it, so it
 * gets the anchor's time plus one millisecond per filler (Matroska counts in
 * milliseconds), and lasts until the anchor's frame time ends.
 *
 * Matroska wants decode times that never go back and never pass a
 * picture's presentation time (matroskamux interleaves the tracks by them);
 * it stores presentation times only. A picture waits in its layer's queue
 * until RECORD_REORDER_PICTURES more have come, and its decode time is the
 * earliest presentation time among them (more than a mini-GOP of B frames
 * and its fillers, so nothing shown earlier can come later).
 *
 * Capture times normally only grow in display order; one that went back
 * (a capture stalled for over a second dates the frames it cannot place at
 * their delivery) is moved up to the decode time it would come before, and
 * counted.
 *
 * A track's header needs the layer's SPS and PPS: the muxer starts once
 * every layer has had its first IDR (the encoder starts with one; it is
 * still the first picture in its layer's queue then), and a layer's
 * pictures before it are left out.
 *
 * A name ending in .nut is refused: GStreamer has no NUT muxer for H.264,
 * and a Matroska file under that name would mislead.
 */
#include "pps-server-lib.h"

#include "pps-matroska.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define RECORD_REORDER_PICTURES 12
#define RECORD_QUEUE            (RECORD_REORDER_PICTURES + 1)
/* Each layer's queue towards the disk: seconds of H.264 at the rates the
 * encoder is given; full, the recording stops (-ENOBUFS). */
#define RECORD_QUEUE_BYTES (8u << 20)

_Static_assert(PPS_ADU_MAX_QUALITY_LAYERS <= PPS_MATROSKA_MAX_TRACKS,
               "a Matroska track per quality layer");

typedef struct {
	uint8_t *data; /* one Annex B picture */
	size_t size;
	int64_t pts_us, duration_us;
	bool key;
} picture_t;

typedef struct {
	picture_t queue[RECORD_QUEUE];
	int queued;
	bool started;        /* its first IDR came */
	int64_t anchor_us;   /* the last anchor's presentation time */
	int fillers;         /* fillers since that anchor */
	int64_t last_dts_us; /* of the last picture written */
} layer_t;

struct pps_record {
	char *path;
	pps_matroska_writer_t *writer;
	const char *titles[PPS_ADU_MAX_QUALITY_LAYERS];
	int widths[PPS_ADU_MAX_QUALITY_LAYERS], heights[PPS_ADU_MAX_QUALITY_LAYERS];
	unsigned fps_num, fps_den;
	layer_t layers[PPS_ADU_MAX_QUALITY_LAYERS];
	int quality_layers;
	int64_t frame_us;
	int64_t first_capture_us; /* 0: nothing yet */
	bool header;
	pps_record_stats_t stats;
	int error; /* the first write error; nothing is written after it */
	char reason[256];
};

static bool
ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);

	return n >= m && strcasecmp(s + n - m, suffix) == 0;
}

pps_record_t *
pps_record_new(const char *path, const pps_wire_stream_info_t *info, char *err, size_t err_size)
{
	pps_record_t *r = calloc(1, sizeof(*r));
	char reason[256];
	int error = ENOMEM;

	if (!r || !(r->path = strdup(path))) {
		snprintf(err, err_size, "out of memory");
		goto err;
	}
	if (ends_with(path, ".nut")) {
		snprintf(err, err_size,
		         "--record %s: NUT is not written; name a Matroska file (.mkv)", path);
		error = EINVAL;
		goto err;
	}
	if (info->quality_layers < 1 || info->quality_layers > PPS_ADU_MAX_QUALITY_LAYERS) {
		snprintf(err, err_size, "--record %s: %u quality layers", path,
		         info->quality_layers);
		error = EINVAL;
		goto err;
	}
	r->quality_layers = info->quality_layers;
	r->fps_num = info->fps_num ? info->fps_num : 30;
	r->fps_den = info->fps_num && info->fps_den ? info->fps_den : 1;
	r->frame_us = (int64_t)r->fps_den * 1000000 / r->fps_num;
	for (int q = 0; q < r->quality_layers; q++) {
		r->widths[q] = q == 0 ? info->base_width : info->width;
		r->heights[q] = q == 0 ? info->base_height : info->height;
		r->titles[q] = q == 0 ? "base layer" : "residual enhancement layer";
	}
	/* Opened now: an unwritable path is said before the server listens. */
	r->writer = pps_matroska_writer_new(path, reason, sizeof(reason));
	if (!r->writer) {
		error = errno;
		snprintf(err, err_size, "--record %s: %s", path, reason);
		goto err;
	}
	return r;
err:
	pps_record_free(r);
	errno = error;
	return NULL;
}

/* Keeps the first error and its reason; returns it. */
static int
record_fail(pps_record_t *r, int ret, const char *reason)
{
	if (!r->error) {
		r->error = ret;
		snprintf(r->reason, sizeof(r->reason), "%s", reason);
	}
	return r->error;
}

/* Starts the muxer: a track per layer, its SPS and PPS from its first
 * IDR, the first picture in its queue. */
static int
write_header(pps_record_t *r)
{
	pps_matroska_track_t tracks[PPS_ADU_MAX_QUALITY_LAYERS];
	char reason[256];
	int ret;

	for (int q = 0; q < r->quality_layers; q++)
		tracks[q] = (pps_matroska_track_t){
		    .codec = PPS_MATROSKA_CODEC_H264,
		    .title = r->titles[q],
		    .width = r->widths[q],
		    .height = r->heights[q],
		    .fps_num = r->fps_num,
		    .fps_den = r->fps_den,
		    .parameter_sets = r->layers[q].queue[0].data,
		    .parameter_sets_size = r->layers[q].queue[0].size,
		};
	ret = pps_matroska_writer_start(r->writer, tracks, r->quality_layers, RECORD_QUEUE_BYTES,
	                                reason, sizeof(reason));
	if (ret < 0)
		return record_fail(r, ret, reason);
	r->header = true;
	return 0;
}

/* The oldest queued picture of layer @q to the muxer, its decode time the
 * earliest presentation time still queued. */
static int
write_oldest(pps_record_t *r, int q)
{
	layer_t *l = &r->layers[q];
	picture_t p = l->queue[0];
	int64_t dts = p.pts_us;
	char reason[256];
	int ret;

	for (int i = 1; i < l->queued; i++)
		if (l->queue[i].pts_us < dts)
			dts = l->queue[i].pts_us;
	if (dts < l->last_dts_us)
		dts = l->last_dts_us;
	if (p.pts_us < dts) {
		/* A capture time that went back (the capture dates a frame it
		 * cannot place, after a stall, at its delivery): shown at the
		 * earliest time the file allows. */
		p.pts_us = dts;
		r->stats.pictures_retimed++;
	}
	l->last_dts_us = dts;
	memmove(l->queue, l->queue + 1, (size_t)(l->queued - 1) * sizeof(l->queue[0]));
	l->queued--;
	ret = pps_matroska_writer_h264(r->writer, q, p.data, p.size, p.pts_us, dts, p.duration_us,
	                               p.key, reason, sizeof(reason));
	free(p.data);
	if (ret < 0)
		return record_fail(r, ret, reason);
	r->stats.pictures++;
	return 0;
}

static int
queue_picture(pps_record_t *r, int q, const pps_codec_picture_t *picture, int64_t pts_us,
              int64_t duration_us, bool key)
{
	layer_t *l = &r->layers[q];
	picture_t *p;

	if (l->queued == RECORD_QUEUE)
		/* before the header: another layer's first IDR never came */
		return record_fail(r, -ENOSPC, "a layer's first IDR did not come");
	p = &l->queue[l->queued];
	p->data = malloc(picture->size ? picture->size : 1);
	if (!p->data)
		return record_fail(r, -ENOMEM, "out of memory");
	memcpy(p->data, picture->data, picture->size);
	p->size = picture->size;
	p->pts_us = pts_us;
	p->duration_us = duration_us;
	p->key = key;
	l->queued++;
	if (pts_us + duration_us > r->stats.duration_us)
		r->stats.duration_us = pts_us + duration_us;
	if (r->header && l->queued == RECORD_QUEUE)
		return write_oldest(r, q);
	return 0;
}

int
pps_record_adu(pps_record_t *r, const pps_adu_t *adu, char *err, size_t err_size)
{
	const pps_adu_info_t *info = pps_adu_info(adu);
	pps_codec_picture_t pictures[PPS_CODEC_MAX_PICTURES_PER_ADU];
	bool fillers_only, anchor;
	layer_t *l;
	int n, ret = 0;

	if (r->error)
		goto fail;
	if (info->quality_layer >= r->quality_layers) {
		snprintf(err, err_size, "--record %s: no quality layer %u", r->path,
		         info->quality_layer);
		return -EINVAL;
	}
	l = &r->layers[info->quality_layer];
	n = pps_codec_adu_pictures(adu, pictures, &fillers_only);
	if (n < 0) {
		snprintf(err, err_size, "--record %s: a malformed ADU", r->path);
		return n;
	}
	if (!l->started) {
		if (info->frame_type != PPS_ADU_FRAME_IDR || fillers_only) {
			r->stats.pictures_before_start += (uint64_t)n;
			return 0;
		}
		l->started = true;
		if (!r->first_capture_us)
			r->first_capture_us = info->capture_us;
	}
	anchor = !fillers_only &&
	         (info->frame_type == PPS_ADU_FRAME_IDR || info->frame_type == PPS_ADU_FRAME_P);
	for (int i = 0; i < n && ret == 0; i++) {
		bool frame = !fillers_only && i == n - 1;
		int64_t pts, duration = r->frame_us;

		if (frame) {
			pts = info->capture_us - r->first_capture_us;
			if (anchor) {
				l->anchor_us = pts;
				l->fillers = 0;
			}
		} else {
			l->fillers++;
			pts = l->anchor_us + 1000 * l->fillers;
			duration = r->frame_us - 1000 * l->fillers;
			if (duration < 1000)
				duration = 1000;
		}
		ret = queue_picture(r, info->quality_layer, &pictures[i], pts, duration,
		                    frame && info->frame_type == PPS_ADU_FRAME_IDR);
	}
	if (ret < 0)
		goto fail;
	if (!r->header) {
		for (int q = 0; q < r->quality_layers; q++)
			if (!r->layers[q].started)
				return 0;
		ret = write_header(r);
		for (int q = 0; q < r->quality_layers && ret == 0; q++)
			while (ret == 0 && r->layers[q].queued >= RECORD_QUEUE)
				ret = write_oldest(r, q);
		if (ret < 0)
			goto fail;
	}
	return 0;
fail:
	snprintf(err, err_size, "--record %s: %s", r->path, r->reason);
	return r->error;
}

int
pps_record_finish(pps_record_t *r, pps_record_stats_t *stats, char *err, size_t err_size)
{
	char reason[256];
	int ret = r->error;

	if (ret == 0 && r->header)
		for (int q = 0; q < r->quality_layers && ret == 0; q++)
			while (ret == 0 && r->layers[q].queued > 0)
				ret = write_oldest(r, q);
	if (ret == 0) {
		ret = pps_matroska_writer_finish(r->writer, reason, sizeof(reason));
		if (ret < 0)
			record_fail(r, ret, reason);
	}
	if (ret < 0)
		snprintf(err, err_size, "--record %s: %s", r->path, r->reason);
	if (stats)
		*stats = r->stats;
	return ret;
}

const char *
pps_record_path(const pps_record_t *r)
{
	return r->path;
}

void
pps_record_free(pps_record_t *r)
{
	if (!r)
		return;
	for (int q = 0; q < PPS_ADU_MAX_QUALITY_LAYERS; q++)
		for (int i = 0; i < r->layers[q].queued; i++)
			free(r->layers[q].queue[i].data);
	pps_matroska_writer_free(r->writer);
	free(r->path);
	free(r);
}
