/* SPDX-License-Identifier: MIT */
/*
 * --record: the stream as encoded, muxed by libavformat without decoding or
 * encoding anything. Each quality layer is one H.264 track (the first the
 * base at its own size, the others the residual layers at full size, which
 * only ppstream's decoder adds up); a picture's presentation time is its
 * capture time, from the first picture's.
 *
 * x264's filler pictures (pps-encoder.c) are pictures of the bitstream like
 * any other, and the next mini-GOP references them, so they are written
 * too. Each is a copy of the anchor before it and is shown after it, so it
 * gets the anchor's time plus one millisecond per filler (Matroska counts in
 * milliseconds), and lasts until the anchor's frame time ends.
 *
 * Matroska wants decode times that never go back and never pass a
 * picture's presentation time; it stores presentation times only. A picture
 * waits in its layer's queue until RECORD_REORDER_PICTURES more have come,
 * and its decode time is the earliest presentation time among them (more
 * than a mini-GOP of B frames and its fillers, so nothing shown earlier can
 * come later).
 *
 * Capture times normally only grow in display order; one that went back
 * (a capture stalled for over a second dates the frames it cannot place at
 * their delivery) is moved up to the decode time it would come before, and
 * counted.
 *
 * A track's header needs the layer's SPS and PPS: the file's header is
 * written once every layer has had its first IDR (the encoder starts with
 * one), and a layer's pictures before it are left out.
 */
#include "pps-server-lib.h"

#include <errno.h>
#include <libavformat/avformat.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define RECORD_REORDER_PICTURES 12
#define RECORD_QUEUE            (RECORD_REORDER_PICTURES + 1)
#define NAL_SPS                 7
#define NAL_PPS                 8

typedef struct {
	AVStream *stream;
	AVPacket *queue[RECORD_QUEUE]; /* pts and dts in microseconds until written */
	int queued;
	bool started;        /* its first IDR came */
	int64_t anchor_us;   /* the last anchor's presentation time */
	int fillers;         /* fillers since that anchor */
	int64_t last_dts_us; /* of the last picture written */
	uint8_t *extradata;  /* SPS and PPS, Annex B */
	size_t extradata_size;
} layer_t;

struct pps_record {
	char *path;
	AVFormatContext *mux;
	layer_t layers[PPS_ADU_MAX_QUALITY_LAYERS];
	int quality_layers;
	int64_t frame_us;
	int64_t first_capture_us; /* 0: nothing yet */
	bool header;
	pps_record_stats_t stats;
	int error; /* the first write error; nothing is written after it */
};

static const AVRational microseconds = {1, 1000000};

pps_record_t *
pps_record_new(const char *path, const pps_wire_stream_info_t *info, char *err, size_t err_size)
{
	pps_record_t *r = calloc(1, sizeof(*r));
	const char *format = "matroska";
	size_t n;
	int ret, error = ENOMEM;

	if (!r || !(r->path = strdup(path))) {
		snprintf(err, err_size, "out of memory");
		goto err;
	}
	n = strlen(path);
	if (n >= 4 && strcasecmp(path + n - 4, ".nut") == 0)
		format = "nut";
	r->quality_layers = info->quality_layers;
	r->frame_us = (int64_t)info->fps_den * 1000000 / (info->fps_num ? info->fps_num : 30);
	ret = avformat_alloc_output_context2(&r->mux, NULL, format, path);
	if (ret < 0 || !r->mux) {
		snprintf(err, err_size, "--record %s: libavformat has no %s muxer", path, format);
		goto err;
	}
	/* Opened now: an unwritable path is said before the server listens. */
	ret = avio_open(&r->mux->pb, path, AVIO_FLAG_WRITE);
	if (ret < 0) {
		error = ret == AVERROR(ENOMEM) ? ENOMEM : AVUNERROR(ret);
		snprintf(err, err_size, "--record %s: %s", path, av_err2str(ret));
		goto err;
	}
	for (int q = 0; q < r->quality_layers; q++) {
		AVStream *st = avformat_new_stream(r->mux, NULL);

		if (!st) {
			snprintf(err, err_size, "out of memory");
			goto err;
		}
		st->codecpar->codec_type = AVMEDIA_TYPE_VIDEO;
		st->codecpar->codec_id = AV_CODEC_ID_H264;
		st->codecpar->width = q == 0 ? info->base_width : info->width;
		st->codecpar->height = q == 0 ? info->base_height : info->height;
		st->time_base = microseconds;
		st->avg_frame_rate = (AVRational){info->fps_num, info->fps_den};
		if (q > 0)
			av_dict_set(&st->metadata, "title", "residual enhancement layer", 0);
		else
			av_dict_set(&st->metadata, "title", "base layer", 0);
		r->layers[q].stream = st;
	}
	return r;
err:
	pps_record_free(r);
	errno = error;
	return NULL;
}

/* The SPS and PPS NAL units of an Annex B picture, as Annex B again. */
static int
find_parameter_sets(layer_t *l, const uint8_t *data, size_t size)
{
	uint8_t *out = av_malloc(size + AV_INPUT_BUFFER_PADDING_SIZE);
	size_t n = 0, i = 0;

	if (!out)
		return -ENOMEM;
	while (i + 3 <= size) {
		size_t start, end;

		if (!(data[i] == 0 && data[i + 1] == 0 && data[i + 2] == 1)) {
			i++;
			continue;
		}
		start = i + 3;
		for (end = start; end + 3 <= size; end++)
			if (data[end] == 0 && data[end + 1] == 0 &&
			    (data[end + 2] == 1 ||
			     (data[end + 2] == 0 && end + 3 < size && data[end + 3] == 1)))
				break;
		if (end + 3 > size)
			end = size;
		if (start < end &&
		    ((data[start] & 0x1f) == NAL_SPS || (data[start] & 0x1f) == NAL_PPS)) {
			memcpy(out + n, "\0\0\0\1", 4);
			memcpy(out + n + 4, data + start, end - start);
			n += 4 + end - start;
		}
		i = end;
	}
	if (n == 0) {
		av_free(out);
		return -EINVAL;
	}
	memset(out + n, 0, AV_INPUT_BUFFER_PADDING_SIZE);
	l->extradata = out;
	l->extradata_size = n;
	return 0;
}

static int
write_header(pps_record_t *r)
{
	int ret;

	for (int q = 0; q < r->quality_layers; q++) {
		AVCodecParameters *par = r->layers[q].stream->codecpar;

		par->extradata = r->layers[q].extradata;
		par->extradata_size = (int)r->layers[q].extradata_size;
		r->layers[q].extradata = NULL;
	}
	ret = avformat_write_header(r->mux, NULL);
	if (ret < 0)
		return ret;
	r->header = true;
	return 0;
}

/* The oldest queued picture of @l to the muxer, its decode time the
 * earliest presentation time still queued. */
static int
write_oldest(pps_record_t *r, layer_t *l)
{
	AVPacket *pkt = l->queue[0];
	int64_t dts = pkt->pts;
	int ret;

	for (int i = 1; i < l->queued; i++)
		if (l->queue[i]->pts < dts)
			dts = l->queue[i]->pts;
	if (dts < l->last_dts_us)
		dts = l->last_dts_us;
	if (pkt->pts < dts) {
		/* A capture time that went back (the capture dates a frame it
		 * cannot place, after a stall, at its delivery): shown at the
		 * earliest time the file allows. */
		pkt->pts = dts;
		r->stats.pictures_retimed++;
	}
	l->last_dts_us = dts;
	memmove(l->queue, l->queue + 1, (size_t)(l->queued - 1) * sizeof(l->queue[0]));
	l->queued--;
	pkt->dts = dts;
	av_packet_rescale_ts(pkt, microseconds, l->stream->time_base);
	pkt->stream_index = l->stream->index;
	ret = av_interleaved_write_frame(r->mux, pkt);
	av_packet_free(&pkt);
	if (ret == 0)
		r->stats.pictures++;
	return ret;
}

static int
queue_picture(pps_record_t *r, layer_t *l, const pps_codec_picture_t *picture, int64_t pts_us,
              int64_t duration_us, bool key)
{
	AVPacket *pkt;
	int ret;

	if (l->queued == RECORD_QUEUE)
		return -ENOSPC; /* before the header: another layer's first IDR never came */
	pkt = av_packet_alloc();
	if (!pkt || av_new_packet(pkt, (int)picture->size) < 0) {
		av_packet_free(&pkt);
		return -ENOMEM;
	}
	memcpy(pkt->data, picture->data, picture->size);
	pkt->pts = pts_us;
	pkt->duration = duration_us;
	if (key)
		pkt->flags |= AV_PKT_FLAG_KEY;
	l->queue[l->queued++] = pkt;
	if (pts_us + duration_us > r->stats.duration_us)
		r->stats.duration_us = pts_us + duration_us;
	if (r->header && l->queued == RECORD_QUEUE) {
		ret = write_oldest(r, l);
		if (ret < 0)
			return ret;
	}
	return 0;
}

int
pps_record_adu(pps_record_t *r, const pps_adu_t *adu)
{
	const pps_adu_info_t *info = pps_adu_info(adu);
	pps_codec_picture_t pictures[PPS_CODEC_MAX_PICTURES_PER_ADU];
	bool fillers_only, anchor;
	layer_t *l;
	int n, ret = 0;

	if (r->error)
		return r->error;
	if (info->quality_layer >= r->quality_layers)
		return -EINVAL;
	l = &r->layers[info->quality_layer];
	n = pps_codec_adu_pictures(adu, pictures, &fillers_only);
	if (n < 0)
		return n;
	if (!l->started) {
		if (info->frame_type != PPS_ADU_FRAME_IDR || fillers_only) {
			r->stats.pictures_before_start += (uint64_t)n;
			return 0;
		}
		ret = find_parameter_sets(l, pictures[n - 1].data, pictures[n - 1].size);
		if (ret < 0)
			goto fail;
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
		ret = queue_picture(r, l, &pictures[i], pts, duration,
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
				ret = write_oldest(r, &r->layers[q]);
		if (ret < 0)
			goto fail;
	}
	return 0;
fail:
	r->error = ret;
	return ret;
}

int
pps_record_finish(pps_record_t *r, pps_record_stats_t *stats, char *err, size_t err_size)
{
	int ret = r->error;

	if (ret == 0 && r->header) {
		for (int q = 0; q < r->quality_layers && ret == 0; q++)
			while (ret == 0 && r->layers[q].queued > 0)
				ret = write_oldest(r, &r->layers[q]);
		if (ret == 0)
			ret = av_write_trailer(r->mux);
	}
	if (r->mux && r->mux->pb) {
		int close_ret = avio_closep(&r->mux->pb);

		if (ret == 0)
			ret = close_ret;
	}
	if (ret < 0)
		snprintf(err, err_size, "--record %s: %s", r->path, av_err2str(ret));
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
	for (int q = 0; q < PPS_ADU_MAX_QUALITY_LAYERS; q++) {
		for (int i = 0; i < r->layers[q].queued; i++)
			av_packet_free(&r->layers[q].queue[i]);
		av_free(r->layers[q].extradata);
	}
	if (r->mux) {
		if (r->mux->pb)
			avio_closep(&r->mux->pb);
		avformat_free_context(r->mux);
	}
	free(r->path);
	free(r);
}
