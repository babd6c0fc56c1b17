/* SPDX-License-Identifier: MIT */
/*
 * Recording what was shown, in real time.
 *
 * y4m has no timestamps: a file of N pictures lasts N frame times. So the
 * pictures are laid on the stream's frame grid: each shown picture takes a
 * slot, a freeze is filled by repeating the picture on screen, and the file
 * lasts as long as the run did. A picture's slot follows the one before by
 * the time between them (rounded to frames, at least one), which keeps
 * regular pictures in consecutive slots whatever the phase of the first;
 * the slot is then kept within one frame time of the picture's own time
 * since the first, so rounding never adds up over many freezes. A picture
 * that would land more than a frame ahead (pictures shown faster than the
 * frame rate, as when playout catches up) takes the place of the one not
 * yet written: the screen showed it for less than a frame time. Repeats are
 * marked "FRAME Xrepeat" (a y4m frame parameter, ignored by readers that do
 * not know it), so a tool that wants each shown picture once can skip them.
 *
 * Matroska and NUT carry a time with each picture: every shown picture is
 * written once, rawvideo I420 (exactly what was shown, no encoder), with its
 * display time since the first as its presentation time; a freeze is a gap
 * between two times, and the last picture lasts one frame time.
 */
#include "pps-client-internal.h"

#include <errno.h>
#include <libavformat/avformat.h>
#include <libavutil/mathematics.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef enum {
	RECORDER_Y4M,
	RECORDER_CONTAINER, /* through libavformat */
} recorder_kind_t;

struct pps_recorder {
	recorder_kind_t kind;
	char *path;
	int width, height;
	unsigned fps_num, fps_den;
	int64_t frame_us; /* one frame time, rounded */
	int64_t first_us; /* display time of the first picture; 0: none yet */
	pps_recorder_summary_t summary;

	/* y4m */
	FILE *y4m;
	pps_frame_t *pending; /* shown, its slot not yet written */
	int64_t pending_us;   /* its display time */
	int64_t pending_slot;
	bool header;

	/* libavformat */
	AVFormatContext *mux;
	AVStream *stream;
	AVPacket *packet;
	int64_t last_pts;
	bool mux_header;
};

static bool
ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);

	return n >= m && strcasecmp(s + n - m, suffix) == 0;
}

pps_recorder_t *
pps_recorder_new(const char *path, char *err, size_t err_size)
{
	pps_recorder_t *r = calloc(1, sizeof(*r));
	const char *format = NULL;
	int ret, error;

	if (!r || !(r->path = strdup(path))) {
		snprintf(err, err_size, "out of memory");
		free(r);
		errno = ENOMEM;
		return NULL;
	}
	if (ends_with(path, ".mkv"))
		format = "matroska";
	else if (ends_with(path, ".nut"))
		format = "nut";
	if (!format) {
		r->kind = RECORDER_Y4M;
		/* `pps-client --output - | ffplay -`: the caller keeps its own
		 * text off stdout. */
		r->y4m = strcmp(path, "-") == 0 ? stdout : fopen(path, "wb");
		if (!r->y4m) {
			error = errno;
			snprintf(err, err_size, "--output %s: %s", path, strerror(error));
			goto err;
		}
		return r;
	}
	r->kind = RECORDER_CONTAINER;
	ret = avformat_alloc_output_context2(&r->mux, NULL, format, path);
	if (ret < 0 || !r->mux) {
		error = ENOMEM;
		snprintf(err, err_size, "--output %s: libavformat has no %s muxer", path, format);
		goto err;
	}
	/* Opened now so that an unwritable path fails before the stream starts. */
	ret = avio_open(&r->mux->pb, path, AVIO_FLAG_WRITE);
	if (ret < 0) {
		error = ret == AVERROR(ENOMEM) ? ENOMEM : AVUNERROR(ret);
		snprintf(err, err_size, "--output %s: %s", path, av_err2str(ret));
		goto err;
	}
	r->packet = av_packet_alloc();
	if (!r->packet) {
		error = ENOMEM;
		snprintf(err, err_size, "out of memory");
		goto err;
	}
	return r;
err:
	pps_recorder_free(r);
	errno = error;
	return NULL;
}

/* ---- y4m ----------------------------------------------------------------- */

static int
y4m_write(pps_recorder_t *r, const pps_frame_t *p, bool repeat)
{
	if (!r->header) {
		fprintf(r->y4m, "YUV4MPEG2 W%d H%d F%u:%u Ip A1:1 C420jpeg\n", r->width, r->height,
		        r->fps_num, r->fps_den);
		r->header = true;
	}
	fputs(repeat ? "FRAME Xrepeat\n" : "FRAME\n", r->y4m);
	for (int plane = 0; plane < 3; plane++) {
		int w = plane ? p->width / 2 : p->width, h = plane ? p->height / 2 : p->height;

		for (int y = 0; y < h; y++)
			fwrite(p->planes[plane] + (size_t)y * (size_t)p->strides[plane], 1,
			       (size_t)w, r->y4m);
	}
	r->summary.frames_written++;
	if (repeat)
		r->summary.frames_repeated++;
	return ferror(r->y4m) ? -EIO : 0;
}

/* The pending picture into its slot, then repeated until @until_slot. */
static int
y4m_flush_pending(pps_recorder_t *r, int64_t until_slot)
{
	int ret = y4m_write(r, r->pending, false);

	for (int64_t s = r->pending_slot + 1; ret == 0 && s < until_slot; s++)
		ret = y4m_write(r, r->pending, true);
	return ret;
}

static int
y4m_frame(pps_recorder_t *r, const pps_frame_t *picture, int64_t shown_us)
{
	int64_t slot = 0;
	int ret = 0;

	if (r->pending) {
		double since_first = (double)(shown_us - r->first_us) / (double)r->frame_us;
		double since_pending = (double)(shown_us - r->pending_us) / (double)r->frame_us;
		int64_t lo = (int64_t)ceil(since_first - 1.0),
		        hi = (int64_t)floor(since_first + 1.0);
		int64_t step = llround(since_pending);

		slot = r->pending_slot + (step < 1 ? 1 : step);
		if (slot < lo)
			slot = lo;
		if (slot > hi)
			slot = hi;
		if (slot <= r->pending_slot) {
			/* Shown for less than a frame time: the newer picture
			 * takes the slot. */
			slot = r->pending_slot;
			r->summary.frames_replaced++;
		} else {
			ret = y4m_flush_pending(r, slot);
		}
	} else {
		r->pending = pps_frame_new(r->width, r->height);
		if (!r->pending)
			return -ENOMEM;
	}
	pps_frame_copy(r->pending, picture);
	r->pending_us = shown_us;
	r->pending_slot = slot;
	return ret;
}

/* ---- Matroska, NUT ------------------------------------------------------ */

static int
mux_start(pps_recorder_t *r, char *err, size_t err_size)
{
	AVCodecParameters *par;
	int ret;

	r->stream = avformat_new_stream(r->mux, NULL);
	if (!r->stream)
		return -ENOMEM;
	par = r->stream->codecpar;
	par->codec_type = AVMEDIA_TYPE_VIDEO;
	par->codec_id = AV_CODEC_ID_RAWVIDEO;
	par->codec_tag = MKTAG('I', '4', '2', '0');
	par->format = AV_PIX_FMT_YUV420P;
	par->width = r->width;
	par->height = r->height;
	par->sample_aspect_ratio = (AVRational){1, 1};
	r->stream->time_base = (AVRational){1, 1000000};
	r->stream->avg_frame_rate = (AVRational){(int)r->fps_num, (int)r->fps_den};
	ret = avformat_write_header(r->mux, NULL);
	if (ret < 0) {
		snprintf(err, err_size, "--output %s: %s", r->path, av_err2str(ret));
		return ret;
	}
	r->mux_header = true;
	r->last_pts = -1;
	return 0;
}

static int
mux_frame(pps_recorder_t *r, const pps_frame_t *p, int64_t shown_us, char *err, size_t err_size)
{
	AVPacket *pkt = r->packet;
	size_t luma = (size_t)p->width * (size_t)p->height, size = luma * 3 / 2;
	uint8_t *dst;
	int ret;

	if (!r->mux_header && (ret = mux_start(r, err, err_size)) < 0)
		return ret;
	ret = av_new_packet(pkt, (int)size);
	if (ret < 0)
		return ret;
	dst = pkt->data;
	for (int plane = 0; plane < 3; plane++) {
		int w = plane ? p->width / 2 : p->width, h = plane ? p->height / 2 : p->height;

		for (int y = 0; y < h; y++, dst += w)
			memcpy(dst, p->planes[plane] + (size_t)y * (size_t)p->strides[plane],
			       (size_t)w);
	}
	pkt->pts =
	    av_rescale_q(shown_us - r->first_us, (AVRational){1, 1000000}, r->stream->time_base);
	/* Two pictures within one tick of the container's clock (1 ms for
	 * Matroska) still need times in order. */
	if (pkt->pts <= r->last_pts)
		pkt->pts = r->last_pts + 1;
	pkt->dts = pkt->pts;
	pkt->duration = av_rescale_q(r->frame_us, (AVRational){1, 1000000}, r->stream->time_base);
	pkt->flags |= AV_PKT_FLAG_KEY;
	pkt->stream_index = r->stream->index;
	r->last_pts = pkt->pts;
	r->summary.duration_us =
	    av_rescale_q(pkt->pts + pkt->duration, r->stream->time_base, (AVRational){1, 1000000});
	ret = av_interleaved_write_frame(r->mux, pkt);
	if (ret < 0) {
		snprintf(err, err_size, "--output %s: %s", r->path, av_err2str(ret));
		return ret;
	}
	r->summary.frames_written++;
	return 0;
}

/* ---- both ------------------------------------------------------------- */

int
pps_recorder_frame(pps_recorder_t *r, const pps_frame_t *picture, int64_t shown_us,
                   unsigned fps_num, unsigned fps_den, char *err, size_t err_size)
{
	int ret;

	if (!r->first_us) {
		if (fps_num == 0 || fps_den == 0) {
			snprintf(err, err_size, "--output %s: no frame rate", r->path);
			return -EINVAL;
		}
		r->width = picture->width;
		r->height = picture->height;
		r->fps_num = fps_num;
		r->fps_den = fps_den;
		r->frame_us = (int64_t)llround(1e6 * fps_den / fps_num);
		if (r->frame_us < 1)
			r->frame_us = 1;
		r->first_us = shown_us ? shown_us : 1;
	} else if (picture->width != r->width || picture->height != r->height) {
		/* A reconnection to a stream of another size: one file keeps one. */
		snprintf(err, err_size, "--output %s: the picture changed size (%dx%d to %dx%d)",
		         r->path, r->width, r->height, picture->width, picture->height);
		return -EINVAL;
	}
	r->summary.frames_shown++;
	if (r->kind == RECORDER_Y4M) {
		ret = y4m_frame(r, picture, shown_us);
		if (ret < 0)
			snprintf(err, err_size, "--output %s: %s", r->path, strerror(-ret));
		return ret;
	}
	return mux_frame(r, picture, shown_us, err, err_size);
}

int
pps_recorder_finish(pps_recorder_t *r, pps_recorder_summary_t *summary, char *err, size_t err_size)
{
	int ret = 0;

	if (r->kind == RECORDER_Y4M) {
		if (r->pending) {
			ret = y4m_flush_pending(r, r->pending_slot + 1);
			r->summary.duration_us = (r->pending_slot + 1) * r->frame_us;
			pps_frame_free(r->pending);
			r->pending = NULL;
		}
		if (r->y4m && fflush(r->y4m) != 0)
			ret = -errno;
		if (r->y4m && r->y4m != stdout && fclose(r->y4m) != 0 && ret == 0)
			ret = -errno;
		r->y4m = NULL;
		if (ret < 0)
			snprintf(err, err_size, "--output %s: %s", r->path, strerror(-ret));
	} else if (r->mux) {
		if (r->mux_header)
			ret = av_write_trailer(r->mux);
		if (ret == 0)
			ret = avio_closep(&r->mux->pb);
		else
			(void)avio_closep(&r->mux->pb);
		if (ret < 0)
			snprintf(err, err_size, "--output %s: %s", r->path, av_err2str(ret));
	}
	if (summary)
		*summary = r->summary;
	return ret;
}

void
pps_recorder_free(pps_recorder_t *r)
{
	if (!r)
		return;
	if (r->y4m && r->y4m != stdout)
		fclose(r->y4m);
	pps_frame_free(r->pending);
	if (r->mux) {
		if (r->mux->pb)
			avio_closep(&r->mux->pb);
		avformat_free_context(r->mux);
	}
	av_packet_free(&r->packet);
	free(r->path);
	free(r);
}
