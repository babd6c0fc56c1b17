/* SPDX-License-Identifier: MIT */
/*
 * Matroska through GStreamer: appsrc per track -> matroskamux -> fdsink.
 *
 * The file is opened here (open(2)'s errno is what a user reads about a
 * path that cannot be written) and handed to fdsink, which answers
 * matroskamux's seeks: at the end the muxer goes back to write the
 * duration, the seek head and the cues into the header.
 *
 * The caller's thread only copies a picture into its track's appsrc and
 * returns; each appsrc's streaming thread pushes into matroskamux, which
 * interleaves the tracks (it waits for a picture on every track, so the
 * tracks are started together) and writes on the thread of the track it
 * took the picture from. A track's queue is bounded in bytes: a picture
 * that does not fit means the disk does not keep up, and the file ends
 * there with -ENOBUFS rather than the caller's loop waiting for the disk
 * or a picture that others reference going missing.
 *
 * What goes wrong on those threads arrives on the pipeline's bus, in the
 * thread that posts it: the bus handler keeps the first error (and the end
 * of stream) under the lock, and drops every message so that the bus never
 * grows. The caller sees the error at its next call.
 *
 * H.264 is given in Annex B, as x264 writes it; Matroska stores each NAL
 * unit behind a 4-byte length and the SPS and PPS in an avcC record as the
 * track's codec private data, both made here. The NAL units stay as they
 * are, in-band parameter sets included.
 */
#include "pps-matroska.h"

#include <errno.h>
#include <fcntl.h>
#include <gst/app/app.h>
#include <gst/gst.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NAL_SPS 7
#define NAL_PPS 8
/* A muxer that has everything and writes its index takes milliseconds; a
 * disk that takes longer than this is reported rather than waited for. */
#define FINISH_TIMEOUT_S 60

struct pps_matroska_writer {
	int fd;
	GstElement *pipeline, *mux;
	GstElement *sources[PPS_MATROSKA_MAX_TRACKS];
	pps_matroska_codec_t codecs[PPS_MATROSKA_MAX_TRACKS];
	int tracks;
	size_t queue_bytes;
	bool started;

	pthread_mutex_t lock; /* the fields below, written by GStreamer's threads */
	pthread_cond_t cond;
	int error; /* the first one, a negative errno; nothing is written after it */
	char reason[256];
	bool eos; /* the muxer wrote everything and the sink has it */
};

static void
set_error_locked(pps_matroska_writer_t *w, int error, const char *reason)
{
	if (w->error)
		return;
	w->error = error;
	snprintf(w->reason, sizeof(w->reason), "%s", reason);
	pthread_cond_broadcast(&w->cond);
}

static void
set_error(pps_matroska_writer_t *w, int error, const char *reason)
{
	pthread_mutex_lock(&w->lock);
	set_error_locked(w, error, reason);
	pthread_mutex_unlock(&w->lock);
}

static GstBusSyncReply
bus_message_cb(GstBus *bus, GstMessage *msg, gpointer data)
{
	pps_matroska_writer_t *w = data;

	(void)bus;
	if (GST_MESSAGE_TYPE(msg) == GST_MESSAGE_ERROR) {
		GError *error = NULL;
		char *debug = NULL, reason[256];
		const char *detail;
		int code = -EIO;

		gst_message_parse_error(msg, &error, &debug);
		if (error && error->domain == GST_RESOURCE_ERROR &&
		    error->code == GST_RESOURCE_ERROR_NO_SPACE_LEFT)
			code = -ENOSPC;
		/* The debug string is "file(line): function: element path:\nreason". */
		detail = debug && strrchr(debug, '\n') ? strrchr(debug, '\n') + 1 : debug;
		if (code == -ENOSPC)
			snprintf(reason, sizeof(reason), "%s", strerror(ENOSPC));
		else
			snprintf(reason, sizeof(reason), "%s%s%s%s",
			         error ? error->message : "GStreamer error", detail ? " (" : "",
			         detail ? detail : "", detail ? ")" : "");
		set_error(w, code, reason);
		g_clear_error(&error);
		g_free(debug);
	} else if (GST_MESSAGE_TYPE(msg) == GST_MESSAGE_EOS) {
		pthread_mutex_lock(&w->lock);
		w->eos = true;
		pthread_cond_broadcast(&w->cond);
		pthread_mutex_unlock(&w->lock);
	}
	/* Nobody pops the bus: drop everything so it cannot grow. */
	return GST_BUS_DROP;
}

/* The first error of the writer, if any: its errno and its reason in @err. */
static int
check_error(pps_matroska_writer_t *w, char *err, size_t err_size)
{
	int ret;

	pthread_mutex_lock(&w->lock);
	ret = w->error;
	if (ret)
		snprintf(err, err_size, "%s", w->reason);
	pthread_mutex_unlock(&w->lock);
	return ret;
}

pps_matroska_writer_t *
pps_matroska_writer_new(const char *path, char *err, size_t err_size)
{
	pps_matroska_writer_t *w = calloc(1, sizeof(*w));
	GstElement *sink = NULL;
	GstBus *bus;
	int error;

	if (!w) {
		snprintf(err, err_size, "out of memory");
		errno = ENOMEM;
		return NULL;
	}
	w->fd = -1;
	pthread_mutex_init(&w->lock, NULL);
	pthread_cond_init(&w->cond, NULL);
	if (!gst_is_initialized())
		gst_init(NULL, NULL);
	w->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
	if (w->fd < 0) {
		error = errno;
		snprintf(err, err_size, "%s", strerror(error));
		goto err;
	}
	w->pipeline = gst_pipeline_new("pps-matroska");
	w->mux = gst_element_factory_make("matroskamux", NULL);
	if (w->mux)
		gst_bin_add(GST_BIN(w->pipeline), w->mux);
	sink = gst_element_factory_make("fdsink", NULL);
	if (sink)
		gst_bin_add(GST_BIN(w->pipeline), sink);
	if (!w->mux || !sink) {
		error = ENOSYS;
		snprintf(err, err_size, "GStreamer has no %s (gstreamer1.0-plugins-good)",
		         w->mux ? "fdsink" : "matroskamux");
		goto err;
	}
	/* The file is written as fast as the pictures come, never paced by a
	 * clock; and nothing waits for a first picture to change state. */
	g_object_set(sink, "fd", w->fd, "sync", FALSE, "async", FALSE, NULL);
	if (!gst_element_link(w->mux, sink)) {
		error = ENOSYS;
		snprintf(err, err_size, "GStreamer cannot link matroskamux to fdsink");
		goto err;
	}
	bus = gst_element_get_bus(w->pipeline);
	gst_bus_set_sync_handler(bus, bus_message_cb, w, NULL);
	gst_object_unref(bus);
	return w;
err:
	pps_matroska_writer_free(w);
	errno = error;
	return NULL;
}

/*
 * The next NAL unit of Annex B @data from *@pos: true with *@nal and
 * *@nal_size (the start code and the zero bytes before the next one left
 * out: a NAL unit never ends in a zero byte), false at the end.
 */
static bool
next_nal(const uint8_t *data, size_t size, size_t *pos, const uint8_t **nal, size_t *nal_size)
{
	for (;;) {
		size_t i = *pos, start, end;

		while (i + 3 <= size && !(data[i] == 0 && data[i + 1] == 0 && data[i + 2] == 1))
			i++;
		if (i + 3 > size)
			return false;
		start = i + 3;
		for (end = start; end + 3 <= size; end++)
			if (data[end] == 0 && data[end + 1] == 0 && data[end + 2] == 1)
				break;
		if (end + 3 > size)
			end = size;
		*pos = end;
		while (end > start && data[end - 1] == 0)
			end--;
		if (end > start) {
			*nal = data + start;
			*nal_size = end - start;
			return true;
		}
	}
}

/* Exp-Golomb reading of an SPS's first fields (emulation prevention bytes
 * skipped). */
typedef struct {
	const uint8_t *data;
	size_t size, byte;
	int bit;
	int zeros; /* zero bytes just read, for 00 00 03 */
} bit_reader_t;

static int
read_bit(bit_reader_t *b)
{
	int bit;

	if (b->bit == 0) {
		if (b->byte < b->size && b->zeros >= 2 && b->data[b->byte] == 3) {
			b->byte++;
			b->zeros = 0;
		}
		if (b->byte >= b->size)
			return -1;
	}
	bit = (b->data[b->byte] >> (7 - b->bit)) & 1;
	if (++b->bit == 8) {
		b->zeros = b->data[b->byte] == 0 ? b->zeros + 1 : 0;
		b->bit = 0;
		b->byte++;
	}
	return bit;
}

/* ue(v), or -1 past the end. */
static long
read_ue(bit_reader_t *b)
{
	int zeros = 0, bit;
	long value = 1;

	while ((bit = read_bit(b)) == 0)
		if (++zeros > 31)
			return -1;
	if (bit < 0)
		return -1;
	for (int i = 0; i < zeros; i++) {
		if ((bit = read_bit(b)) < 0)
			return -1;
		value = value << 1 | bit;
	}
	return value - 1;
}

/*
 * The avcC record (ISO/IEC 14496-15, 5.3.3.1) of the SPS and PPS in @data:
 * a GstBuffer, or NULL without both. The profiles with chroma formats and
 * bit depths carry them after the PPS, as the record wants.
 */
static GstBuffer *
make_avcc(const uint8_t *data, size_t size)
{
	const uint8_t *sps[4], *pps[4], *nal;
	size_t sps_size[4], pps_size[4], nal_size, pos = 0, total = 7;
	int n_sps = 0, n_pps = 0;
	long chroma_format = 1, depth_luma = 0, depth_chroma = 0;
	bool extended;
	GstBuffer *buffer;
	GstMapInfo map;
	uint8_t *out;

	while (next_nal(data, size, &pos, &nal, &nal_size)) {
		int type = nal[0] & 0x1f;

		if (nal_size > 0xffff)
			continue;
		if (type == NAL_SPS && n_sps < 4 && nal_size >= 4) {
			sps[n_sps] = nal;
			sps_size[n_sps++] = nal_size;
			total += 2 + nal_size;
		} else if (type == NAL_PPS && n_pps < 4) {
			pps[n_pps] = nal;
			pps_size[n_pps++] = nal_size;
			total += 2 + nal_size;
		}
	}
	if (n_sps == 0 || n_pps == 0)
		return NULL;
	extended = sps[0][1] == 100 || sps[0][1] == 110 || sps[0][1] == 122 || sps[0][1] == 144;
	if (extended) {
		bit_reader_t b = {.data = sps[0] + 4, .size = sps_size[0] - 4};

		(void)read_ue(&b); /* seq_parameter_set_id */
		chroma_format = read_ue(&b);
		if (chroma_format == 3)
			(void)read_bit(&b); /* separate_colour_plane_flag */
		depth_luma = read_ue(&b);
		depth_chroma = read_ue(&b);
		if (chroma_format < 0 || chroma_format > 3 || depth_luma < 0 || depth_luma > 7 ||
		    depth_chroma < 0 || depth_chroma > 7)
			extended = false;
		else
			total += 4;
	}
	buffer = gst_buffer_new_allocate(NULL, total, NULL);
	if (!buffer || !gst_buffer_map(buffer, &map, GST_MAP_WRITE)) {
		if (buffer)
			gst_buffer_unref(buffer);
		return NULL;
	}
	out = map.data;
	*out++ = 1;         /* configurationVersion */
	*out++ = sps[0][1]; /* AVCProfileIndication */
	*out++ = sps[0][2]; /* profile_compatibility */
	*out++ = sps[0][3]; /* AVCLevelIndication */
	*out++ = 0xff;      /* lengthSizeMinusOne: 3 */
	*out++ = (uint8_t)(0xe0 | n_sps);
	for (int i = 0; i < n_sps; i++) {
		*out++ = (uint8_t)(sps_size[i] >> 8);
		*out++ = (uint8_t)sps_size[i];
		memcpy(out, sps[i], sps_size[i]);
		out += sps_size[i];
	}
	*out++ = (uint8_t)n_pps;
	for (int i = 0; i < n_pps; i++) {
		*out++ = (uint8_t)(pps_size[i] >> 8);
		*out++ = (uint8_t)pps_size[i];
		memcpy(out, pps[i], pps_size[i]);
		out += pps_size[i];
	}
	if (extended) {
		*out++ = (uint8_t)(0xfc | chroma_format);
		*out++ = (uint8_t)(0xf8 | depth_luma);
		*out++ = (uint8_t)(0xf8 | depth_chroma);
		*out++ = 0; /* numOfSequenceParameterSetExt */
	}
	gst_buffer_unmap(buffer, &map);
	return buffer;
}

static GstCaps *
track_caps(const pps_matroska_track_t *t, char *err, size_t err_size)
{
	GstBuffer *avcc;
	GstCaps *caps;

	if (t->codec == PPS_MATROSKA_CODEC_I420)
		return gst_caps_new_simple("video/x-raw", "format", G_TYPE_STRING, "I420", "width",
		                           G_TYPE_INT, t->width, "height", G_TYPE_INT, t->height,
		                           "framerate", GST_TYPE_FRACTION, (int)t->fps_num,
		                           (int)t->fps_den, "pixel-aspect-ratio", GST_TYPE_FRACTION,
		                           1, 1, NULL);
	avcc = make_avcc(t->parameter_sets, t->parameter_sets_size);
	if (!avcc) {
		snprintf(err, err_size, "no SPS and PPS for the H.264 track");
		return NULL;
	}
	caps =
	    gst_caps_new_simple("video/x-h264", "stream-format", G_TYPE_STRING, "avc", "alignment",
	                        G_TYPE_STRING, "au", "codec_data", GST_TYPE_BUFFER, avcc, "width",
	                        G_TYPE_INT, t->width, "height", G_TYPE_INT, t->height, "framerate",
	                        GST_TYPE_FRACTION, (int)t->fps_num, (int)t->fps_den, NULL);
	gst_buffer_unref(avcc);
	return caps;
}

int
pps_matroska_writer_start(pps_matroska_writer_t *w, const pps_matroska_track_t *tracks,
                          int n_tracks, size_t queue_bytes, char *err, size_t err_size)
{
	if (w->started || n_tracks < 1 || n_tracks > PPS_MATROSKA_MAX_TRACKS) {
		snprintf(err, err_size, "%d tracks", n_tracks);
		return -EINVAL;
	}
	w->queue_bytes = queue_bytes;
	for (int i = 0; i < n_tracks; i++) {
		const pps_matroska_track_t *t = &tracks[i];
		GstElement *src;
		GstCaps *caps;

		if (t->width <= 0 || t->height <= 0 || !t->fps_num || !t->fps_den ||
		    (t->codec != PPS_MATROSKA_CODEC_H264 && t->codec != PPS_MATROSKA_CODEC_I420)) {
			snprintf(err, err_size, "track %d: no size, rate or codec", i);
			return -EINVAL;
		}
		caps = track_caps(t, err, err_size);
		if (!caps)
			return -EINVAL;
		src = gst_element_factory_make("appsrc", NULL);
		if (!src) {
			gst_caps_unref(caps);
			snprintf(err, err_size, "GStreamer has no appsrc");
			return -ENOSYS;
		}
		/* The caller checks the queue's level itself (block would stop
		 * its loop); max-bytes only says when appsrc calls it full. */
		g_object_set(src, "format", GST_FORMAT_TIME, "is-live", FALSE, "block", FALSE,
		             "max-bytes", (guint64)queue_bytes, "caps", caps, NULL);
		gst_caps_unref(caps);
		gst_bin_add(GST_BIN(w->pipeline), src);
		w->sources[i] = src;
		w->codecs[i] = t->codec;
		w->tracks = i + 1;
		if (!gst_element_link_pads(src, "src", w->mux, "video_%u")) {
			snprintf(err, err_size, "matroskamux refuses track %d", i);
			return -EIO;
		}
	}
	if (gst_element_set_state(w->pipeline, GST_STATE_PLAYING) == GST_STATE_CHANGE_FAILURE) {
		if (!check_error(w, err, err_size))
			snprintf(err, err_size, "GStreamer cannot start the muxer");
		return -EIO;
	}
	w->started = true;
	/* The title travels as a stream tag, ahead of the first picture;
	 * matroskamux names the track after it. */
	for (int i = 0; i < n_tracks; i++) {
		GstTagList *tags;

		if (!tracks[i].title)
			continue;
		tags = gst_tag_list_new(GST_TAG_TITLE, tracks[i].title, NULL);
		gst_tag_list_set_scope(tags, GST_TAG_SCOPE_STREAM);
		gst_element_send_event(w->sources[i], gst_event_new_tag(tags));
	}
	return 0;
}

static int
push(pps_matroska_writer_t *w, int track, GstBuffer *buffer, char *err, size_t err_size)
{
	GstFlowReturn flow = gst_app_src_push_buffer(GST_APP_SRC(w->sources[track]), buffer);

	if (flow != GST_FLOW_OK) {
		char reason[128];

		snprintf(reason, sizeof(reason), "matroskamux stopped (%s)",
		         gst_flow_get_name(flow));
		set_error(w, -EIO, reason);
		return check_error(w, err, err_size);
	}
	return 0;
}

/* 0 if a picture of @size fits in @track's queue; the error otherwise. */
static int
check_room(pps_matroska_writer_t *w, int track, size_t size, char *err, size_t err_size)
{
	guint64 level;
	int ret = check_error(w, err, err_size);

	if (ret)
		return ret;
	if (!w->started || track < 0 || track >= w->tracks) {
		snprintf(err, err_size, "no track %d", track);
		return -EINVAL;
	}
	level = gst_app_src_get_current_level_bytes(GST_APP_SRC(w->sources[track]));
	if (level > 0 && level + size > w->queue_bytes) {
		char reason[128];

		snprintf(reason, sizeof(reason),
		         "the disk does not keep up (%" G_GUINT64_FORMAT " bytes waiting)", level);
		set_error(w, -ENOBUFS, reason);
		return check_error(w, err, err_size);
	}
	return 0;
}

static void
stamp(GstBuffer *buffer, int64_t pts_us, int64_t dts_us, int64_t duration_us, bool key)
{
	GST_BUFFER_PTS(buffer) = (GstClockTime)pts_us * GST_USECOND;
	GST_BUFFER_DTS(buffer) = (GstClockTime)dts_us * GST_USECOND;
	GST_BUFFER_DURATION(buffer) = (GstClockTime)duration_us * GST_USECOND;
	if (!key)
		GST_BUFFER_FLAG_SET(buffer, GST_BUFFER_FLAG_DELTA_UNIT);
}

int
pps_matroska_writer_h264(pps_matroska_writer_t *w, int track, const uint8_t *data, size_t size,
                         int64_t pts_us, int64_t dts_us, int64_t duration_us, bool key, char *err,
                         size_t err_size)
{
	const uint8_t *nal;
	size_t nal_size, pos = 0, total = 0;
	GstBuffer *buffer;
	GstMapInfo map;
	uint8_t *out;
	int ret = check_room(w, track, size, err, err_size);

	if (ret)
		return ret;
	if (w->codecs[track] != PPS_MATROSKA_CODEC_H264 || pts_us < 0 || dts_us < 0) {
		snprintf(err, err_size, "track %d: not H.264, or a time before the start", track);
		return -EINVAL;
	}
	while (next_nal(data, size, &pos, &nal, &nal_size))
		total += 4 + nal_size;
	if (total == 0) {
		snprintf(err, err_size, "an access unit without a NAL unit");
		return -EINVAL;
	}
	buffer = gst_buffer_new_allocate(NULL, total, NULL);
	if (!buffer || !gst_buffer_map(buffer, &map, GST_MAP_WRITE)) {
		if (buffer)
			gst_buffer_unref(buffer);
		snprintf(err, err_size, "out of memory");
		return -ENOMEM;
	}
	out = map.data;
	pos = 0;
	while (next_nal(data, size, &pos, &nal, &nal_size)) {
		out[0] = (uint8_t)(nal_size >> 24);
		out[1] = (uint8_t)(nal_size >> 16);
		out[2] = (uint8_t)(nal_size >> 8);
		out[3] = (uint8_t)nal_size;
		memcpy(out + 4, nal, nal_size);
		out += 4 + nal_size;
	}
	gst_buffer_unmap(buffer, &map);
	stamp(buffer, pts_us, dts_us, duration_us, key);
	return push(w, track, buffer, err, err_size);
}

int
pps_matroska_writer_i420(pps_matroska_writer_t *w, int track, const pps_frame_t *p, int64_t pts_us,
                         int64_t duration_us, char *err, size_t err_size)
{
	size_t size = (size_t)p->width * (size_t)p->height * 3 / 2;
	GstBuffer *buffer;
	GstMapInfo map;
	uint8_t *dst;
	int ret = check_room(w, track, size, err, err_size);

	if (ret)
		return ret;
	if (w->codecs[track] != PPS_MATROSKA_CODEC_I420 || pts_us < 0) {
		snprintf(err, err_size, "track %d: not I420, or a time before the start", track);
		return -EINVAL;
	}
	buffer = gst_buffer_new_allocate(NULL, size, NULL);
	if (!buffer || !gst_buffer_map(buffer, &map, GST_MAP_WRITE)) {
		if (buffer)
			gst_buffer_unref(buffer);
		snprintf(err, err_size, "out of memory");
		return -ENOMEM;
	}
	dst = map.data;
	for (int plane = 0; plane < 3; plane++) {
		int w_px = plane ? p->width / 2 : p->width, h = plane ? p->height / 2 : p->height;

		for (int y = 0; y < h; y++, dst += w_px)
			memcpy(dst, p->planes[plane] + (size_t)y * (size_t)p->strides[plane],
			       (size_t)w_px);
	}
	gst_buffer_unmap(buffer, &map);
	stamp(buffer, pts_us, pts_us, duration_us, true);
	return push(w, track, buffer, err, err_size);
}

int
pps_matroska_writer_finish(pps_matroska_writer_t *w, char *err, size_t err_size)
{
	int ret = check_error(w, err, err_size);

	if (w->started && ret == 0) {
		struct timespec deadline;

		for (int i = 0; i < w->tracks; i++)
			gst_app_src_end_of_stream(GST_APP_SRC(w->sources[i]));
		clock_gettime(CLOCK_REALTIME, &deadline);
		deadline.tv_sec += FINISH_TIMEOUT_S;
		pthread_mutex_lock(&w->lock);
		while (!w->eos && !w->error)
			if (pthread_cond_timedwait(&w->cond, &w->lock, &deadline) == ETIMEDOUT) {
				char reason[128];

				snprintf(reason, sizeof(reason),
				         "the muxer did not finish within %d s", FINISH_TIMEOUT_S);
				set_error_locked(w, -ETIMEDOUT, reason);
			}
		pthread_mutex_unlock(&w->lock);
		ret = check_error(w, err, err_size);
	}
	if (w->pipeline)
		gst_element_set_state(w->pipeline, GST_STATE_NULL);
	if (w->fd >= 0) {
		if (close(w->fd) != 0 && ret == 0) {
			ret = -errno;
			snprintf(err, err_size, "%s", strerror(-ret));
		}
		w->fd = -1;
	}
	return ret;
}

void
pps_matroska_writer_free(pps_matroska_writer_t *w)
{
	if (!w)
		return;
	if (w->pipeline) {
		GstBus *bus;

		gst_element_set_state(w->pipeline, GST_STATE_NULL);
		bus = gst_element_get_bus(w->pipeline);
		gst_bus_set_sync_handler(bus, NULL, NULL, NULL);
		gst_object_unref(bus);
		gst_object_unref(w->pipeline);
	}
	if (w->fd >= 0)
		close(w->fd);
	pthread_cond_destroy(&w->cond);
	pthread_mutex_destroy(&w->lock);
	free(w);
}
