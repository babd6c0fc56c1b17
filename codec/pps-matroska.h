/* SPDX-License-Identifier: MIT */
/*
 * A Matroska file written by GStreamer: one appsrc per track into
 * matroskamux, into an fdsink on the file (pps-matroska.c). The server's
 * --record (H.264 tracks, the stream as encoded) and the client's --output
 * (raw I420, what was shown) write through it.
 *
 * Threads: one thread (the caller's event loop) calls every function. A
 * picture is copied into its track's queue and the call returns; GStreamer's
 * threads mux and write. What fails on those threads (a full disk, a write
 * error) is kept and returned by the next call, so nothing polls and nothing
 * waits for the disk but pps_matroska_writer_finish().
 */
#ifndef PPS_MATROSKA_H
#define PPS_MATROSKA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pps-codec.h"

#define PPS_MATROSKA_MAX_TRACKS 8

typedef struct pps_matroska_writer pps_matroska_writer_t;

typedef enum {
	/* Annex B access units, kept as they are (converted to the length
	 * prefixes Matroska stores). */
	PPS_MATROSKA_CODEC_H264,
	/* Raw I420 pictures (V_UNCOMPRESSED), given as pps_frame_t. */
	PPS_MATROSKA_CODEC_I420,
} pps_matroska_codec_t;

typedef struct {
	pps_matroska_codec_t codec;
	const char *title; /* the track's name; NULL: none */
	int width, height;
	unsigned fps_num, fps_den; /* the track's default picture duration */
	/* H.264: an access unit (Annex B, borrowed for the call) holding the
	 * track's SPS and PPS, from which its codec private data is made. */
	const uint8_t *parameter_sets;
	size_t parameter_sets_size;
} pps_matroska_track_t;

/*
 * Creates, or empties, the file at @path and makes the muxer; nothing is
 * written until pps_matroska_writer_start(). NULL with errno and the reason
 * in @err (as every function here: the reason alone, the caller names the
 * file): open(2)'s errno (ENOENT, EACCES, ...), ENOMEM, or ENOSYS when
 * GStreamer has no matroskamux (gstreamer1.0-plugins-good) or no fdsink.
 */
pps_matroska_writer_t *pps_matroska_writer_new(const char *path, char *err, size_t err_size);

/*
 * The tracks (@n_tracks, at most PPS_MATROSKA_MAX_TRACKS; borrowed for the
 * call), and the most bytes each track's queue holds before the writer
 * gives up (@queue_bytes: the disk does not keep up). Starts GStreamer's
 * threads. 0, or a negative errno with @err: -EINVAL for an H.264 track
 * without SPS or PPS, -EIO when GStreamer refuses to start. Once.
 */
int pps_matroska_writer_start(pps_matroska_writer_t *writer, const pps_matroska_track_t *tracks,
                              int n_tracks, size_t queue_bytes, char *err, size_t err_size);

/*
 * One H.264 access unit (Annex B, copied) of @track, at @pts_us with its
 * decode time @dts_us (never behind the track's previous one) and
 * @duration_us, all in microseconds from the file's start. The muxer
 * interleaves the tracks by decode time and stores presentation times, in
 * Matroska's milliseconds. 0, or a negative errno with @err: -ENOBUFS when
 * the queue is full (the disk does not keep up), -ENOSPC or -EIO for a
 * write that failed, -EINVAL for an access unit without a NAL unit. After
 * an error nothing more is written and every call returns it.
 */
int pps_matroska_writer_h264(pps_matroska_writer_t *writer, int track, const uint8_t *data,
                             size_t size, int64_t pts_us, int64_t dts_us, int64_t duration_us,
                             bool key, char *err, size_t err_size);

/* One raw picture (copied, packed) of an I420 @track; as above, its decode
 * time its presentation time. */
int pps_matroska_writer_i420(pps_matroska_writer_t *writer, int track, const pps_frame_t *picture,
                             int64_t pts_us, int64_t duration_us, char *err, size_t err_size);

/*
 * Ends every track, waits until the muxer has written the file's index and
 * closes the file: 0, or a negative errno with @err (the first error of the
 * writer, then close(2)'s). Without a start, the file stays empty. Once,
 * before free.
 */
int pps_matroska_writer_finish(pps_matroska_writer_t *writer, char *err, size_t err_size);

/* Stops GStreamer's threads (what is queued is lost) and closes the file. */
void pps_matroska_writer_free(pps_matroska_writer_t *writer);

#endif
