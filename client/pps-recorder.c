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
 * Matroska carries a time with each picture: every shown picture is
 * written once, rawvideo I420 (exactly what was shown, no encoder), with its
 * display time since the first as its presentation time; a freeze is a gap
 * between two times, and the last picture lasts one frame time. GStreamer's
 * matroskamux writes it (codec/pps-matroska.c): the loop thread copies the
 * picture into a bounded queue and goes on, GStreamer's threads write, and
 * a write that failed there is returned by the next call. A disk that
 * cannot take the pictures as fast as they are shown fills the queue, and
 * the recording fails (-ENOBUFS) rather than hold up the loop.
 *
 * A name ending in .nut is refused: GStreamer has no NUT muxer for raw
 * video, and y4m under that name would mislead.
 */
#include "pps-client-internal.h"

#include "pps-matroska.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* The Matroska queue towards the disk: about 1.5 s of 720p pictures, and
 * never fewer than RECORDER_QUEUE_PICTURES. */
#define RECORDER_QUEUE_BYTES    (64u << 20)
#define RECORDER_QUEUE_PICTURES 4

typedef enum {
	RECORDER_Y4M,
	RECORDER_MATROSKA,
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
	bool every;           /* each picture once, in order, no time grid */
	pps_frame_t *pending; /* shown, its slot not yet written */
	int64_t pending_us;   /* its display time */
	int64_t pending_slot;
	bool header;

	/* Matroska */
	pps_matroska_writer_t *writer;
	int64_t last_pts_ms;
	bool writer_started;
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
	char reason[256];
	int error;

	if (!r || !(r->path = strdup(path))) {
		snprintf(err, err_size, "out of memory");
		free(r);
		errno = ENOMEM;
		return NULL;
	}
	if (ends_with(path, ".nut")) {
		snprintf(
		    err, err_size,
		    "--output %s: NUT is not written; name a Matroska file (.mkv) or a y4m one",
		    path);
		error = EINVAL;
		goto err;
	}
	if (!ends_with(path, ".mkv")) {
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
	r->kind = RECORDER_MATROSKA;
	/* Opened now so that an unwritable path fails before the stream starts. */
	r->writer = pps_matroska_writer_new(path, reason, sizeof(reason));
	if (!r->writer) {
		error = errno;
		snprintf(err, err_size, "--output %s: %s", path, reason);
		goto err;
	}
	return r;
err:
	pps_recorder_free(r);
	errno = error;
	return NULL;
}

void
pps_recorder_keep_every(pps_recorder_t *r)
{
	r->every = r->kind == RECORDER_Y4M;
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

	if (r->every)
		return y4m_write(r, picture, false);
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

/* ---- Matroska ---------------------------------------------------------- */

static int
mux_start(pps_recorder_t *r, char *err, size_t err_size)
{
	size_t picture_bytes = (size_t)r->width * (size_t)r->height * 3 / 2;
	size_t queue_bytes = RECORDER_QUEUE_PICTURES * picture_bytes;
	pps_matroska_track_t track = {
	    .codec = PPS_MATROSKA_CODEC_I420,
	    .width = r->width,
	    .height = r->height,
	    .fps_num = r->fps_num,
	    .fps_den = r->fps_den,
	};
	char reason[256];
	int ret;

	if (queue_bytes < RECORDER_QUEUE_BYTES)
		queue_bytes = RECORDER_QUEUE_BYTES;
	ret = pps_matroska_writer_start(r->writer, &track, 1, queue_bytes, reason, sizeof(reason));
	if (ret < 0) {
		snprintf(err, err_size, "--output %s: %s", r->path, reason);
		return ret;
	}
	r->writer_started = true;
	r->last_pts_ms = -1;
	return 0;
}

static int
mux_frame(pps_recorder_t *r, const pps_frame_t *p, int64_t shown_us, char *err, size_t err_size)
{
	int64_t pts_ms = llround((double)(shown_us - r->first_us) / 1000.0),
	        duration_ms = llround((double)r->frame_us / 1000.0);
	char reason[256];
	int ret;

	if (!r->writer_started && (ret = mux_start(r, err, err_size)) < 0)
		return ret;
	/* Two pictures within one tick of Matroska's clock (1 ms) still need
	 * times in order. */
	if (pts_ms <= r->last_pts_ms)
		pts_ms = r->last_pts_ms + 1;
	r->last_pts_ms = pts_ms;
	ret = pps_matroska_writer_i420(r->writer, 0, p, pts_ms * 1000, duration_ms * 1000, reason,
	                               sizeof(reason));
	if (ret < 0) {
		snprintf(err, err_size, "--output %s: %s", r->path, reason);
		return ret;
	}
	r->summary.duration_us = (pts_ms + duration_ms) * 1000;
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
		if (r->every)
			r->summary.duration_us = (int64_t)r->summary.frames_written * r->frame_us;
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
	} else if (r->writer) {
		char reason[256];

		ret = pps_matroska_writer_finish(r->writer, reason, sizeof(reason));
		if (ret < 0)
			snprintf(err, err_size, "--output %s: %s", r->path, reason);
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
	pps_matroska_writer_free(r->writer);
	free(r->path);
	free(r);
}
