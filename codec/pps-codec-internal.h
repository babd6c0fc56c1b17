/* SPDX-License-Identifier: MIT */
/* Shared inside codec/ only: the GOP model, the upscale filter, ADU framing,
 * the capture's audio re-chunker. */
#ifndef PPS_CODEC_INTERNAL_H
#define PPS_CODEC_INTERNAL_H

#include "pps-codec.h"

/*
 * The GOP model, shared by the encoder (which forces x264's frame types from
 * it) and the decoder (which derives temporal layers from it).
 * S = mini-GOP frames, W = window frames (S divides W), G = IDR period (W divides G).
 */
typedef struct {
	int minigop_frames;
	int window_frames;
	int gop_frames;
	/* An IDR requested out of period restarts the period at origin; frames
	 * before it keep the previous origin. Both are multiples of W. */
	uint32_t origin;
	uint32_t previous_origin;
	/* The current window's frames are all anchors (rounds of one frame; no
	 * B frames). Only the current window's frames and the anchor before it
	 * are ever asked about, and a window's last frame is an anchor either
	 * way, so one flag, changed at window boundaries, is the whole state. */
	bool anchors_only;
	/* The droppable pictures are disposable P frames (PPS_ADU_FRAME_PD: the
	 * last frame of each mini-GOP of 2, coded when captured, referencing the
	 * anchor just before it) instead of B frames. A window's last frame is
	 * then no anchor; the encoder takes each frame's reference from what it
	 * coded, not from this model (pps-encoder.c, emit_adu). */
	bool disposable_p;
} pps_gop_t;

/* S for @temporal_layers: 4, 2 or 1 frames, halved until it divides
 * @window_frames. The one copy of the rule: the encoder's GOP and the
 * client's decoder parameters (pps_stream_params_from_wire) use it. */
int pps_gop_minigop_frames(int temporal_layers, int window_frames);
/* Chooses S from @temporal_layers so that S divides @window_frames; returns
 * the effective number of temporal layers. */
int pps_gop_init(pps_gop_t *gop, int temporal_layers, int window_frames, int gop_frames);
pps_adu_frame_type_t pps_gop_frame_type(const pps_gop_t *gop, uint32_t frame_index);
uint8_t pps_gop_temporal_layer(const pps_gop_t *gop, uint32_t frame_index);
/*
 * The frames whose same-layer ADUs frame @n needs (see pps-encoder.c for why a
 * B frame's references live in its next anchor's ADU). Returns the count. Not
 * for a GOP of disposable P frames (the encoder knows their one reference).
 */
int pps_gop_ref_frames(const pps_gop_t *gop, uint32_t n, uint32_t refs[2]);

/*
 * Deterministic bilinear upscale in Q8 fixed point, separable, one plane.
 * Identical bits on every machine: integer arithmetic only.
 */
void pps_upscale_plane(const uint8_t *src, int src_stride, int src_width, int src_height,
                       uint8_t *dst, int dst_stride, int dst_width, int dst_height);

/*
 * ADU payload: [u8 flags | n][n x u32 little-endian size][pictures].
 * A picture ADU may carry x264 filler pictures before the real one; the real
 * picture is always the last. A filler-only ADU (PPS_CODEC_ADU_FILLERS_ONLY)
 * carries no frame: the fillers that close its frame's mini-GOP, so that
 * libavcodec outputs the mini-GOP's pictures (see pps-encoder.c).
 */
#define PPS_CODEC_ADU_FILLERS_ONLY 0x80u
#define PPS_CODEC_ADU_COUNT_MASK   0x7fu

/*
 * The capture's pipeline (pps-capture-pipeline.c). Its audio branch, from
 * the parameters:
 */
typedef enum {
	PPS_CAPTURE_BRANCH_NONE = 0,
	PPS_CAPTURE_BRANCH_TICKS,   /* audiotestsrc wave=ticks in the description */
	PPS_CAPTURE_BRANCH_DECODED, /* the audio pad of the file's decodebin or uridecodebin */
	PPS_CAPTURE_BRANCH_USER,    /* the element pps_audio_src of the user's pipeline */
	/* autoaudiosrc, in a bin pps-capture.c adds once the video's liveness
	 * is known: a live microphone in the description would make a file's
	 * pipeline live, and its video unpaced. */
	PPS_CAPTURE_BRANCH_MIC,
} pps_capture_branch_t;

pps_capture_branch_t pps_capture_branch(const pps_capture_params_t *params);
/* Whether the ticks are a live source: with a live video source (the test
 * picture, a camera), so that both run on the clock from when they start;
 * otherwise they are paced by their appsink as a file is. */
bool pps_capture_ticks_live(pps_capture_source_t type);
/*
 * The gst-launch description for @params (g_free() it): the video's,
 * exactly as without audio when there is no audio branch, then the audio
 * branch's but the microphone's. @drop_only: videorate drop-only=true (see
 * the .c).
 */
char *pps_capture_describe(const pps_capture_params_t *params, bool drop_only);
/*
 * What every audio branch ends with: 10 ms blocks' format, and the appsink
 * pps_audio_sink, which never holds the pipeline's state changes
 * (async=false): a file without an audio track leaves it without data, and
 * must still preroll (a file with one switches it to async once started).
 */
#define PPS_CAPTURE_AUDIO_TAIL                                                                     \
	"audioconvert ! audioresample ! "                                                          \
	"audio/x-raw,format=S16LE,rate=48000,channels=1,layout=interleaved ! "                     \
	"appsink name=pps_audio_sink async=false"

/*
 * pps_audio_find_ticks()'s rule over a stream in pieces (the capture's flash
 * finds the ticks as the audio comes). Onsets are indices into each piece.
 */
typedef struct {
	size_t quiet_samples; /* consecutive samples below the level so far */
} pps_audio_tick_detector_t;

/* @after_silence: the stream's start counts as silence (a tick in its first
 * samples is an onset), as for a source known to start there. */
void pps_audio_tick_detector_init(pps_audio_tick_detector_t *detector, bool after_silence);
/* Writes the onsets in @pcm into @onsets (at most @max; later ones are
 * still followed, not written) and returns how many it wrote. */
size_t pps_audio_tick_detector_push(pps_audio_tick_detector_t *detector, const int16_t *pcm,
                                    size_t samples, size_t *onsets, size_t max);

/*
 * The capture's audio re-chunker: buffers of whatever size GStreamer delivers
 * in, exact PPS_AUDIO_BLOCK_SAMPLES blocks out, each with the capture time of
 * its first sample. Holds less than one block (bounded by construction).
 * Owned by one thread (the audio streaming thread).
 */
typedef struct {
	int16_t block[PPS_AUDIO_BLOCK_SAMPLES];
	size_t block_samples; /* filled so far */
	int64_t block_us;     /* capture time of block[0] */
	bool started;         /* next_us is known */
	int64_t next_us;      /* where the samples pushed so far end */
	uint64_t blocks;      /* passed to the callback (or counted without one) */
	/* Input that did not continue the samples before it: a DISCONT buffer
	 * (but the first) or a time jump of more than PPS_AUDIO_CHUNKER_GAP_US.
	 * The partial block before it is dropped (its samples counted in
	 * samples_dropped). */
	uint64_t discontinuities;
	uint64_t samples_dropped;
} pps_audio_chunker_t;

/* A buffer starting further than this (half a block) from where the
 * previous one ended is a discontinuity; closer, it is the same stream:
 * capture times are re-derived per buffer and jitter by microseconds, more
 * when a thread is preempted between its two clock reads, and a block
 * dropped for nothing costs more than one placed a few ms off. */
#define PPS_AUDIO_CHUNKER_GAP_US 5000

void pps_audio_chunker_reset(pps_audio_chunker_t *chunker);
/*
 * Adds @samples samples at @pcm (any alignment) whose first sample was
 * captured at @capture_us; @discont: the source says they do not follow the
 * previous ones. Calls @cb (if not NULL) for each complete block, inside
 * this call. Returns the number of blocks completed.
 */
size_t pps_audio_chunker_push(pps_audio_chunker_t *chunker, const void *pcm, size_t samples,
                              int64_t capture_us, bool discont, pps_capture_audio_cb cb,
                              void *user);

#endif /* PPS_CODEC_INTERNAL_H */
