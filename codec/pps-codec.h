/* SPDX-License-Identifier: MIT */
/*
 * codec/: live capture (GStreamer), layered encoding (x264), layered decoding
 * (libavcodec) and pixel timecodes.
 *
 * Data flow on the server:
 *
 *   pps_capture_t --frame_cb(frame)--> pps_encoder_encode() --adu_cb(adu)--> prioritizer
 *
 * and on the client:
 *
 *   ADUs (decode order, any dependency-closed subset) --> pps_decoder_push()
 *        --frame_cb(decoded frame, display order)--> playout
 *
 * Layers. Temporal: a hierarchical GOP of mini-GOPs of S = 1, 2 or 4 frames
 * (0, 1 or 3 B frames) whose anchor (P) is the last frame of the mini-GOP, so
 * mini-GOPs nest inside the adaptation windows and decode order never crosses
 * a window boundary. Quality: a base at 1/base_scale resolution and residual
 * enhancement layers at full resolution (LCEVC-like), each its own x264.
 *
 * Nothing here knows about sockets or windows beyond the window size needed to
 * align the GOP. Errors: functions return 0 or a negative errno; constructors
 * return NULL with errno set.
 */
#ifndef PPS_CODEC_H
#define PPS_CODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pps-adu.h"
#include "pps-audio.h"
#include "pps-wire.h"

/* ---------------------------------------------------------------- frames */

/*
 * A borrowed view of one I420 picture. Whoever passes it to a callback owns
 * the pixels; they are valid only for the duration of the call.
 */
typedef struct {
	int width;            /* luma width in pixels, even */
	int height;           /* luma height in pixels, even */
	uint8_t *planes[3];   /* Y, U, V */
	int strides[3];       /* bytes per row of each plane */
	uint32_t frame_index; /* display order, consecutive from 0 */
	int64_t capture_us;   /* CLOCK_REALTIME at capture, microseconds */
} pps_frame_t;

/* Allocates a tightly packed I420 picture (one malloc). NULL + errno on failure. */
pps_frame_t *pps_frame_new(int width, int height);
void pps_frame_free(pps_frame_t *frame);
/* Copies pixels (sizes must match) and the index/time fields. */
void pps_frame_copy(pps_frame_t *dst, const pps_frame_t *src);

/* -------------------------------------------------------------- capture */

typedef struct pps_capture pps_capture_t;

/*
 * Called on the capture's delivery thread (one thread, owned by the capture,
 * never GStreamer's streaming thread) for each frame in order. Frames carry
 * consecutive frame_index values (0, 1, 2, ...) counted after queue drops, so
 * the encoder can use them as display order. A NULL @frame means the source
 * failed at run time (pps_capture_error() has the message); no frame follows.
 * The server's encoder runs inside this callback: a slow callback makes the
 * bounded queue drop the oldest raw frames, counted in frames_dropped.
 */
typedef void (*pps_capture_frame_cb)(const pps_frame_t *frame, void *user);

/* Where the pictures come from. */
typedef enum {
	PPS_CAPTURE_SOURCE_TEST = 0,     /* videotestsrc, pattern */
	PPS_CAPTURE_SOURCE_CAMERA = 1,   /* V4L2, input = the device */
	PPS_CAPTURE_SOURCE_FILE = 2,     /* input = a media file, real time, looped */
	PPS_CAPTURE_SOURCE_URI = 3,      /* input = anything uridecodebin plays */
	PPS_CAPTURE_SOURCE_PIPELINE = 4, /* input = a gst-launch description */
	PPS_CAPTURE_SOURCE_COUNT
} pps_capture_source_t;

/* Whether the pixel timecode is stamped into the picture. */
typedef enum {
	PPS_CAPTURE_TIMECODE_AUTO = 0, /* only for the test source */
	PPS_CAPTURE_TIMECODE_ON = 1,
	PPS_CAPTURE_TIMECODE_OFF = 2,
	PPS_CAPTURE_TIMECODE_COUNT
} pps_capture_timecode_t;

/* Where the sound comes from (the capture's audio branch). */
typedef enum {
	PPS_CAPTURE_AUDIO_OFF = 0, /* no audio branch: the pipeline is the video's alone */
	/* The source's own: test -> the ticks (as AUDIO_TICKS); file, uri ->
	 * the file's audio track, if it has one; pipeline -> the element named
	 * pps_audio_src in the description, if there is one (the description
	 * still ends with the video, which the capture links on: e.g.
	 * "audiotestsrc name=pps_audio_src videotestsrc"); camera -> none
	 * (use AUDIO_MIC). */
	PPS_CAPTURE_AUDIO_SOURCE = 1,
	/* audiotestsrc wave=ticks: a 20 ms 1 kHz tone every
	 * PPS_CAPTURE_TICK_PERIOD_US from the audio's first sample on; with
	 * the test source, the picture's flash (pps_timecode_stamp_flash())
	 * on the frame of each tick. */
	PPS_CAPTURE_AUDIO_TICKS = 2,
	PPS_CAPTURE_AUDIO_MIC = 3, /* the microphone: autoaudiosrc (PulseAudio, ALSA, ...) */
	PPS_CAPTURE_AUDIO_COUNT
} pps_capture_audio_t;

/* The ticks' period: one tick, and one flash, per second. */
#define PPS_CAPTURE_TICK_PERIOD_US 1000000

/* Name tables, indexed by the enum and NULL-terminated (settings take them
 * as their keys' choices): "test", "camera", ...; "auto", "true", "false";
 * the videotestsrc patterns the test source offers ("ball", "smpte", ...);
 * "off", "source", "ticks", "mic". */
extern const char *const pps_capture_source_names[];
extern const char *const pps_capture_timecode_names[];
extern const char *const pps_capture_pattern_names[];
extern const char *const pps_capture_audio_names[];

/* Whether a source of @type needs its input (a file, a URI, a pipeline);
 * a camera without one opens the default device. */
bool pps_capture_source_needs_input(pps_capture_source_t type);

typedef struct {
	pps_capture_source_t type;
	/* The device, file, URI or pipeline description of @type ("": none,
	 * camera: the default device). Copied by pps_capture_new(). */
	const char *input;
	const char *pattern; /* type test: one of pps_capture_pattern_names */
	int width, height;   /* even */
	int fps;
	int queue_frames; /* raw frames held before the encoder, >= 1 */
	pps_capture_timecode_t timecode;
	pps_capture_audio_t audio; /* 0: off */
} pps_capture_params_t;

typedef struct {
	uint64_t frames_captured;  /* frames handed over by GStreamer */
	uint64_t frames_dropped;   /* oldest raw frames dropped because the queue was full */
	uint64_t frames_delivered; /* frames passed to frame_cb */
	uint64_t file_loops;       /* a source that is not live: times it was restarted */
	uint64_t audio_blocks;     /* 10 ms blocks passed to audio_cb (counted without one) */
	/* Audio that did not continue the previous samples (a file's loop, a
	 * source's DISCONT, a time jump over 5 ms): the partial block before
	 * each was dropped, its samples counted in audio_samples_dropped. */
	uint64_t audio_discontinuities;
	uint64_t audio_samples_dropped;
} pps_capture_stats_t;

/*
 * Builds the pipeline for @params (borrowed for the call). A source
 * that is not live (a file, most URIs, a user pipeline without a live
 * source: found when pps_capture_start() pauses it) is paced to real time by
 * the appsink's clock sync and looped at its end (seek to 0); a live one
 * (camera, RTSP, the test source) goes through unsynced, and its end is an
 * error. The pixel timecode is stamped with timecode=true, or with auto for
 * the test source only. The audio branch, if any (see pps_capture_audio_t,
 * pps_capture_has_audio()), is in the same pipeline; the microphone's is
 * added at pps_capture_start(). A pipeline that does
 * not parse fails here: NULL, errno set, and a one-line message naming the
 * source and GStreamer's reason in @err. Calls gst_init() if needed.
 */
pps_capture_t *pps_capture_new(const pps_capture_params_t *params, pps_capture_frame_cb frame_cb,
                               void *user, char *err, size_t err_size);

/* What a file or a URI holds (pps_capture_probe()). */
typedef struct {
	int width, height;    /* of its first video stream */
	int fps_num, fps_den; /* 0/1 when the container does not say (a still image) */
	bool has_audio;       /* it has an audio stream too */
} pps_capture_probe_t;

/*
 * Reads the size, frame rate and streams of @input, a file name (type file)
 * or a URI (type uri), without building the capture: up to 10 s, on the
 * caller's thread. 0, or a negative errno with the reason in @err: -EINVAL
 * (another type, a bad name), -EIO (cannot be read), -ENOENT (no video).
 * Calls gst_init() if needed.
 */
int pps_capture_probe(pps_capture_source_t type, const char *input, pps_capture_probe_t *probe,
                      char *err, size_t err_size);

/*
 * Starts capturing and waits (up to 10 s) for the first frame, and with
 * audio=ticks or mic (or the test source's source) for the first audio block
 * too, so a missing device (a camera, a microphone), a missing file or a
 * pipeline that does not negotiate is reported here: a negative errno and the
 * message in @err, naming the source (and "microphone (autoaudiosrc ...)"
 * when that is what failed). Main thread.
 */
int pps_capture_start(pps_capture_t *capture, char *err, size_t err_size);

/*
 * A capture without a pipeline, for a program that has the pictures itself
 * (the ppssink GStreamer element): it pushes them with pps_capture_push(),
 * and the bounded queue, the numbering, the timecode (only with
 * timecode=true) and the delivery thread are the same. Reads @params'
 * width, height, queue_frames and timecode. pps_capture_start() starts the
 * delivery thread without waiting for a frame.
 */
pps_capture_t *pps_capture_new_push(const pps_capture_params_t *params,
                                    pps_capture_frame_cb frame_cb, void *user, char *err,
                                    size_t err_size);
/*
 * Copies @frame (its width and height must be the capture's; capture_us is
 * kept, frame_index ignored) into the queue: never blocks; when full the
 * oldest raw frame is dropped and counted. One pushing thread at a time.
 * 0, or -EINVAL (a size that is not the capture's, or a capture with a pipeline).
 */
int pps_capture_push(pps_capture_t *capture, const pps_frame_t *frame);
/* The pushed source ended: once the queue is delivered, frame_cb(NULL) with
 * @why as pps_capture_error(). */
void pps_capture_push_end(pps_capture_t *capture, const char *why);

/*
 * Called on GStreamer's audio streaming thread (not the delivery thread: keep
 * it short, copy and return) with one 10 ms block: @samples =
 * PPS_AUDIO_BLOCK_SAMPLES mono S16 samples at 48 kHz, borrowed for the call,
 * and the CLOCK_REALTIME capture time of its first sample, mapped from the
 * running time as the frames' capture_us are (the same instant has the same
 * time in both: lip sync depends on it). Consecutive blocks are contiguous
 * (capture_us 10 ms apart, give or take microseconds: each buffer's time is
 * read from the clocks) except across a discontinuity (a file's loop, see
 * audio_discontinuities), where capture_us says where the block is.
 */
typedef void (*pps_capture_audio_cb)(const int16_t *pcm, size_t samples, int64_t capture_us,
                                     void *user);

/* Where the audio blocks go; before pps_capture_start(). Without a callback
 * the blocks are only counted. */
void pps_capture_set_audio_cb(pps_capture_t *capture, pps_capture_audio_cb cb, void *user);

/*
 * Whether the capture has an audio branch: before pps_capture_start(), that
 * the parameters asked for one the source can give (not for audio=source
 * with a camera or a pipeline without pps_audio_src, nor for a pushed
 * capture); after it, also that the branch is connected (a file without an
 * audio track has none: its video plays alone).
 */
bool pps_capture_has_audio(const pps_capture_t *capture);

/* Stops the pipeline and the delivery thread; frame_cb and audio_cb are not
 * called after this returns. Idempotent. Never call from inside frame_cb. */
void pps_capture_stop(pps_capture_t *capture);
void pps_capture_free(pps_capture_t *capture);

/* Counters; safe from any thread. */
void pps_capture_get_stats(pps_capture_t *capture, pps_capture_stats_t *stats);
/* Last run-time error message, "" if none. Owned by the capture. */
const char *pps_capture_error(pps_capture_t *capture);

/* -------------------------------------------------------------- encoder */

/* Deterministic upscale filters (server and client must use the same). */
#define PPS_CODEC_UPSCALE_BILINEAR_Q8 1
/* STREAM_INFO's codec: H.264 layered (base + residual enhancement). */
#define PPS_CODEC_ID_H264_LAYERED 1

/* Everything a decoder needs to know about a stream (the STREAM_INFO record). */
typedef struct {
	int width, height; /* full resolution */
	int fps;
	int base_width, base_height; /* base layer resolution */
	int temporal_layers;         /* effective: 1, 2 or 3 */
	int quality_layers;          /* 1..3 */
	int minigop_frames;          /* S: 1, 2 or 4 */
	int window_frames;           /* W, multiple of S */
	int gop_frames;              /* G: IDR period, multiple of W */
	int upscale_filter;          /* PPS_CODEC_UPSCALE_* */
} pps_stream_params_t;

/*
 * The STREAM_INFO record for @params: the one mapping, both ways. The sender's
 * @priority_policy and @latency_budget_ms ride along (they are not the
 * codec's); fps goes as fps/1.
 */
void pps_stream_params_to_wire(const pps_stream_params_t *params, unsigned priority_policy,
                               uint32_t latency_budget_ms, pps_wire_stream_info_t *info);
/*
 * The decoder's parameters from a STREAM_INFO (minigop_frames by the
 * encoder's rule from temporal_layers and window_frames; a fractional frame
 * rate rounds down). 0, or -EINVAL for an unknown codec, a frame rate below
 * 1 or a GOP over INT_MAX; range checks are the receiver's.
 */
int pps_stream_params_from_wire(const pps_wire_stream_info_t *info, pps_stream_params_t *params);

typedef struct {
	int width, height, fps;
	int temporal_layers; /* wanted 1..3; reduced so the mini-GOP divides window_frames */
	int quality_layers;  /* 1..3 */
	int base_scale;      /* 1..4; 1 with quality_layers > 1 is allowed (SNR layers) */
	int gop_frames;      /* rounded up to a multiple of window_frames */
	int window_frames;   /* adaptation window W ([pps] window_frames) */
	const char *preset;  /* x264 preset name, one of pps_encoder_preset_names */
	int threads;         /* x264 slice threads per layer, 0 = automatic */
	int base_crf, base_vbv_kbps;               /* vbv 0 = uncapped */
	int enhancement_crf, enhancement_vbv_kbps; /* layer q uses crf - 6 * (q - 1) */
	/* Open every layer with VBV (an uncapped layer at 100 Mbit/s) so that
	 * pps_encoder_set_rates() can steer it: x264 reconfigures VBV only if
	 * it was on from the start. */
	bool rate_adaptive;
	/* Start with anchor windows (pps_encoder_set_anchor_windows()). */
	bool anchor_windows;
	/* The droppable temporal layer as disposable P frames (PPS_ADU_FRAME_PD,
	 * coded when captured) instead of B frames (coded after the anchor that
	 * follows them); more than 2 temporal_layers are taken as 2. */
	bool disposable_p;
} pps_encoder_params_t;

/* The x264 presets the encoder offers (fast enough for live), NULL-terminated. */
extern const char *const pps_encoder_preset_names[];

typedef struct pps_encoder pps_encoder_t;

/* Takes ownership of @adu (one reference). Called on the encoding thread. */
typedef void (*pps_encoder_adu_cb)(pps_adu_t *adu, void *user);

/* NULL + errno (EINVAL for bad parameters, ENOMEM, EIO if x264 refuses them). */
pps_encoder_t *pps_encoder_new(const pps_encoder_params_t *params);
void pps_encoder_free(pps_encoder_t *encoder);

/*
 * Encodes the next frame (display order; the encoder numbers frames itself,
 * 0, 1, 2, ..., and ignores @frame->frame_index; capture_us is kept). ADUs
 * come out through @adu_cb in decode order with increasing ids, all layers of
 * a picture together (base first). B frames are held until their anchor is
 * input; then the whole mini-GOP comes out inside this call (no extra x264
 * delay, see pps-encoder.c), followed, when the stream has B frames, by one
 * filler ADU per quality layer: frame_index and capture_us of the anchor,
 * type P, temporal layer 0, depending on the anchor's ADU of its layer; the
 * next anchor of the layer depends on it. It carries no frame, only the
 * pictures a decoder needs to output the mini-GOP at once.
 * Returns 0 or a negative errno.
 * Single-threaded: call from one thread at a time.
 */
int pps_encoder_encode(pps_encoder_t *encoder, const pps_frame_t *frame, pps_encoder_adu_cb adu_cb,
                       void *user);

/*
 * Window-complete signal: every ADU of frames 0 .. N-1 has been emitted, where
 * N is the value returned. A window [a, b] is complete once N > b.
 */
uint32_t pps_encoder_frames_complete(const pps_encoder_t *encoder);

/* The next anchor becomes an IDR if it starts a window (otherwise the first
 * frame of the next window). For a joining client or loss recovery. */
void pps_encoder_request_idr(pps_encoder_t *encoder);

void pps_encoder_get_stream_params(const pps_encoder_t *encoder, pps_stream_params_t *params);

/*
 * Anchor windows: while @on, every frame of a window is an anchor (P, or the
 * IDR the GOP puts there) coded as a round of its own, so it comes out in the
 * call that inputs it instead of waiting for the window's last frame: the
 * window's frames are as fresh as with 1-frame windows, and it has one
 * temporal layer (nothing droppable but whole frames). Off, the mini-GOP's B
 * frames come back. Taken at the next window's first frame, never inside a
 * window; the x264 sessions, the stream's parameters and the wire stay as
 * they are (a stream with B frames: each anchor still gets its filler ADUs,
 * so a decoder of that stream outputs it at once). No effect on a stream
 * without B frames. Same thread as pps_encoder_encode().
 */
void pps_encoder_set_anchor_windows(pps_encoder_t *encoder, bool on);

/* Rate-control settings per quality layer (base first). */
typedef struct {
	int kbps[PPS_ADU_MAX_QUALITY_LAYERS];        /* VBV maximum rate, kbit/s */
	int buffer_kbit[PPS_ADU_MAX_QUALITY_LAYERS]; /* VBV buffer: the largest picture, kbit */
	int crf[PPS_ADU_MAX_QUALITY_LAYERS];         /* 0..51 */
} pps_encoder_rates_t;

/*
 * New rate control for every layer, applied with x264_encoder_reconfig() at
 * the start of the next mini-GOP (never inside one). Needs rate_adaptive.
 * Returns 0, or -EINVAL (not rate_adaptive, or a value out of range).
 * Same thread as pps_encoder_encode().
 */
int pps_encoder_set_rates(pps_encoder_t *encoder, const pps_encoder_rates_t *rates);

/*
 * Codes every layer @crf_offset coarser (added to each layer's CRF, at most
 * 51) from the start of the next mini-GOP, until called again with 0: the
 * sender's queue drains by the bits left out. Needs rate_adaptive (without
 * it the call is ignored). Same thread as pps_encoder_encode().
 */
void pps_encoder_set_crf_offset(pps_encoder_t *encoder, int crf_offset);

typedef struct {
	uint64_t frames;                             /* frames encoded */
	uint64_t bytes[PPS_ADU_MAX_QUALITY_LAYERS];  /* ADU payload bytes per quality layer */
	uint64_t cpu_us[PPS_ADU_MAX_QUALITY_LAYERS]; /* thread CPU time per quality layer */
	/* Wall time per quality layer (x264's slice threads included): the
	 * encoder's share of a frame's latency. */
	uint64_t wall_us[PPS_ADU_MAX_QUALITY_LAYERS];
	uint64_t filler_pictures; /* x264 filler pictures (see pps-encoder.c), all layers */
	uint64_t filler_bytes;    /* of bytes[]: filler pictures and their payload headers */
	uint64_t reconfigs;       /* rate settings applied (pps_encoder_set_rates) */
	uint64_t reconfig_errors; /* ... that x264 refused */
	uint64_t
	    anchor_windows; /* windows coded as anchors only (pps_encoder_set_anchor_windows) */
	uint64_t anchor_switches;  /* times the windows changed between anchors only and B frames */
	uint64_t drained_minigops; /* mini-GOPs coded coarser (pps_encoder_set_crf_offset) */
} pps_encoder_stats_t;
void pps_encoder_get_stats(const pps_encoder_t *encoder, pps_encoder_stats_t *stats);

/*
 * The H.264 pictures an ADU carries (one layer's Annex B bitstream, in decode
 * order): x264's filler pictures (see pps_encoder_encode()) and, last, the
 * frame's own picture, unless @fillers_only is set. At most
 * PPS_CODEC_MAX_PICTURES_PER_ADU. The spans point into the ADU. Returns their
 * count, or -EINVAL for a malformed payload.
 */
#define PPS_CODEC_MAX_PICTURES_PER_ADU 16
typedef struct {
	const uint8_t *data;
	size_t size;
} pps_codec_picture_t;
int pps_codec_adu_pictures(const pps_adu_t *adu, pps_codec_picture_t *pictures, bool *fillers_only);

/* -------------------------------------------------------------- decoder */

enum {
	/* The base of this frame could not be decoded; the picture is the last
	 * good one repeated (or absent if there was none). */
	PPS_DECODER_FRAME_REPEATED = 1u << 0,
	/* Some ADU pushed for this frame could not be decoded (missing reference). */
	PPS_DECODER_FRAME_UNDECODABLE = 1u << 1,
};

typedef struct {
	pps_frame_t picture; /* full resolution I420; planes NULL if nothing to show */
	uint32_t frame_index;
	int64_t capture_us;
	uint8_t temporal_layer; /* of this frame */
	uint8_t quality_layers; /* layers used: 1 = base only, 0 = none (repeated) */
	uint32_t flags;         /* PPS_DECODER_FRAME_* */
} pps_decoded_frame_t;

/* Called inside pps_decoder_push()/pps_decoder_drain(), frames in display order. */
typedef void (*pps_decoder_frame_cb)(const pps_decoded_frame_t *frame, void *user);

typedef struct pps_decoder pps_decoder_t;

pps_decoder_t *pps_decoder_new(const pps_stream_params_t *params, pps_decoder_frame_cb frame_cb,
                               void *user);
void pps_decoder_free(pps_decoder_t *decoder);

/*
 * Pushes one ADU (borrowed). ADUs must come in increasing id (decode order);
 * any subset may be pushed: an ADU whose dependencies were not all decoded is
 * not fed to libavcodec (which would conceal silently) and its frame is
 * reported as undecodable; its layer recovers at the layer's next IDR.
 * Returns 0, -EINVAL for a malformed ADU, or a libavcodec error.
 *
 * Latency: no reorder holdback. Once every pushed ADU of a mini-GOP, up to
 * and including its filler ADUs (see pps_encoder_encode()), has been pushed,
 * every frame of that mini-GOP has been passed to frame_cb inside that push;
 * so a window's frames come out within the push of its last ADU, without
 * waiting for the next window. If a layer's filler ADU was not pushed (the
 * sender cut its window there), the frames libavcodec holds in that layer
 * wait until the layer is fed again (at its next IDR, since the layer's next
 * anchor depends on the fillers), pps_decoder_settle() or the frame table
 * overflows. With 1 temporal layer (no filler ADUs) a frame comes out when its
 * top-layer ADU is pushed (a frame whose top layer was not pushed: at
 * pps_decoder_settle()). pps_decoder_drain() releases everything.
 */
int pps_decoder_push(pps_decoder_t *decoder, const pps_adu_t *adu);

/*
 * No ADU of a frame up to @frame_index will be pushed any more (the client
 * calls it at the end of a window): every such frame still held is output
 * now, with the layers that decoded (a layer cut before its filler ADU is
 * flushed until its next IDR, as when a later mini-GOP begins). Removes the
 * wait for the next window's first ADU.
 */
void pps_decoder_settle(pps_decoder_t *decoder, uint32_t frame_index);

/* End of stream: outputs every frame still held. The decoder stays usable
 * (the next ADU must then be an IDR). */
int pps_decoder_drain(pps_decoder_t *decoder);

typedef struct {
	uint64_t adus_decoded;
	uint64_t adus_undecodable; /* dependencies missing: not fed */
	uint64_t frames_output;
	uint64_t frames_repeated;
	uint64_t frames_late; /* came out of order and were dropped */
	uint64_t layers_cut;  /* a layer cut before its filler ADU: flushed until its IDR */
} pps_decoder_stats_t;

/* ------------------------------------------------------- pixel timecodes */

/*
 * Stamps @frame_index and @capture_us into the top-left of the luma plane as
 * a 14 x 8 grid of black/white blocks (16 px squares when the picture is at
 * least 224 x 128, smaller otherwise) with a CRC-16, robust to coding at the
 * base layer's coarse quantizer.
 */
void pps_timecode_stamp(uint8_t *y_plane, int stride, int width, int height, uint32_t frame_index,
                        int64_t capture_us);
/* Reads a stamp back: 0, or -ENOENT if there is none or the CRC fails. */
int pps_timecode_read(const uint8_t *y_plane, int stride, int width, int height,
                      uint32_t *frame_index, int64_t *capture_us);

/*
 * The tick flash, for measuring lip sync and mouth-to-ear delay from the
 * outputs alone: a square patch in the bottom-right corner of the picture,
 * side min(64, width / 4, height / 4) rounded down to even, flush with the
 * right and bottom edges. Its outer quarter is always black; its inner half
 * is white on the flash frame and black on every other frame. Chroma is
 * neutral over the whole patch. The capture draws it on every frame of the
 * test source with ticks; the flash frame is the first frame to start
 * within one frame period after a tick's onset, so its capture_us (in its
 * pixel timecode) is 0 to 1 frame period after the tick's (in the audio
 * blocks' capture_us): a lab reading both knows the offset exactly.
 */
void pps_timecode_stamp_flash(pps_frame_t *frame, bool flash);
/* Whether a (decoded) picture shows the flash: the inner half's centre
 * bright, the border dark. */
bool pps_timecode_read_flash(const uint8_t *y_plane, int stride, int width, int height);

#endif /* PPS_CODEC_H */
