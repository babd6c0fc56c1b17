/* SPDX-License-Identifier: MIT */
/*
 * codec/ audio: the Opus voice track (libopus), and two pure functions on
 * PCM that the talkspurt marks, the tests and the lab share.
 *
 *   pps_capture_t --audio_cb(10 ms block)--> frame_ms worth of blocks
 *        --> pps_audio_encoder_encode() --> packet --> ... network ...
 *        --> pps_audio_decoder_decode() / _conceal() / _recover() --> PCM
 *
 * Every PCM buffer is mono, signed 16 bits, 48 kHz. Encoder and decoder are
 * single-threaded objects: one thread at a time per object. Errors: functions
 * return a count (>= 0) or a negative errno; constructors return NULL with
 * errno set.
 */
#ifndef PPS_AUDIO_H
#define PPS_AUDIO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PPS_AUDIO_RATE_HZ          48000
#define PPS_AUDIO_CHANNELS         1    /* mono voice */
#define PPS_AUDIO_BLOCK_SAMPLES    480  /* 10 ms at 48 kHz: what the capture delivers */
#define PPS_AUDIO_MAX_PACKET_BYTES 1275 /* Opus's largest packet (one frame) */
#define PPS_CODEC_ID_OPUS          1    /* STREAM_INFO's audio codec id */

/* The encoder's ranges, checked by pps_audio_encoder_new() and the setters. */
#define PPS_AUDIO_MIN_BITRATE_BPS 16000
#define PPS_AUDIO_MAX_BITRATE_BPS 64000

/* The defaults pps_audio_encoder_params_init() sets. */
#define PPS_DEFAULT_AUDIO_FRAME_MS     20
#define PPS_DEFAULT_AUDIO_BITRATE_BPS  32000
#define PPS_DEFAULT_AUDIO_FEC          true
#define PPS_DEFAULT_AUDIO_LOSS_PERCENT 5

/* ---------------------------------------------------------------- encoder */

/*
 * In-band FEC: each packet carries a coarse copy of the previous frame, which
 * pps_audio_decoder_recover() decodes when that frame is lost. libopus 1.3
 * codes it only when loss_percent > 0 and the bitrate clears its threshold:
 * with loss_percent <= 5, from about 30 kbit/s (so the defaults code it);
 * above 5 %, libopus narrows the audio band until it fits. Below that, fec
 * costs nothing and recovery conceals (see pps-audio.c).
 */
typedef struct {
	int frame_ms;     /* 10 or 20 */
	int bitrate_bps;  /* PPS_AUDIO_MIN_BITRATE_BPS .. PPS_AUDIO_MAX_BITRATE_BPS */
	bool fec;         /* in-band FEC (OPUS_SET_INBAND_FEC) */
	int loss_percent; /* expected loss, 0..100 (OPUS_SET_PACKET_LOSS_PERC) */
} pps_audio_encoder_params_t;

/* Fills @params with the PPS_DEFAULT_AUDIO_* values. */
void pps_audio_encoder_params_init(pps_audio_encoder_params_t *params);

typedef struct pps_audio_encoder pps_audio_encoder_t;

/*
 * An Opus encoder for voice (OPUS_APPLICATION_VOIP, signal voice, no DTX,
 * complexity 5: the two cores are shared with x264; audio band up to
 * super-wideband, 12 kHz). @params is borrowed for
 * the call. NULL + errno: EINVAL for a value out of range, ENOMEM, EIO if
 * libopus refuses.
 */
pps_audio_encoder_t *pps_audio_encoder_new(const pps_audio_encoder_params_t *params);
void pps_audio_encoder_free(pps_audio_encoder_t *encoder);

/*
 * Encodes exactly one frame, pps_audio_encoder_frame_samples() samples of
 * @pcm, into @out (@capacity bytes: PPS_AUDIO_MAX_PACKET_BYTES always
 * suffices; a smaller capacity caps the packet, which libopus then codes
 * coarser, down to 1 byte). Returns the packet's size in bytes (> 0), or
 * -EINVAL (@capacity 0), another negative errno.
 */
int pps_audio_encoder_encode(pps_audio_encoder_t *encoder, const int16_t *pcm, uint8_t *out,
                             size_t capacity);

/* From the next frame on. 0, or -EINVAL outside the ranges above (nothing changed). */
int pps_audio_encoder_set_bitrate(pps_audio_encoder_t *encoder, int bitrate_bps);
int pps_audio_encoder_set_loss_percent(pps_audio_encoder_t *encoder, int loss_percent);

/* Samples per frame: frame_ms * 48. */
int pps_audio_encoder_frame_samples(const pps_audio_encoder_t *encoder);
/*
 * The encoder's lookahead (OPUS_GET_LOOKAHEAD) in microseconds: decoded
 * sample n corresponds to input sample n minus this much. The track's
 * algorithmic delay is this plus the frame.
 */
int pps_audio_encoder_lookahead_us(const pps_audio_encoder_t *encoder);

/* ---------------------------------------------------------------- decoder */

typedef struct pps_audio_decoder pps_audio_decoder_t;

/* A 48 kHz mono decoder. NULL + errno (ENOMEM, EIO). */
pps_audio_decoder_t *pps_audio_decoder_new(void);
void pps_audio_decoder_free(pps_audio_decoder_t *decoder);

/*
 * Decodes one packet (@len > 0 bytes) into @pcm, which has room for
 * @max_samples (5760, 120 ms, fits any packet). Returns the samples
 * decoded, -EINVAL for a corrupt or empty packet, -ENOBUFS if @max_samples
 * is too small for it.
 */
int pps_audio_decoder_decode(pps_audio_decoder_t *decoder, const uint8_t *packet, size_t len,
                             int16_t *pcm, int max_samples);

/*
 * One missing frame of @samples (a multiple of 2.5 ms, 120 samples; the
 * lost packet's duration) concealed by libopus's packet loss concealment.
 * Returns @samples, or -EINVAL.
 */
int pps_audio_decoder_conceal(pps_audio_decoder_t *decoder, int16_t *pcm, int samples);

/*
 * The frame BEFORE @next_packet (lost, @samples long), rebuilt from
 * @next_packet's in-band FEC; where @next_packet carries none, libopus
 * conceals it instead (as pps_audio_decoder_conceal()). Decode @next_packet
 * itself afterwards with pps_audio_decoder_decode(). Returns @samples, or
 * -EINVAL (a corrupt packet, a bad @samples).
 */
int pps_audio_decoder_recover(pps_audio_decoder_t *decoder, const uint8_t *next_packet, size_t len,
                              int16_t *pcm, int samples);

/* ----------------------------------------------------------- PCM analysis */

/*
 * Voice activity for the talkspurt marks: whether the RMS of @samples
 * samples is above @threshold_dbfs (dB relative to a full-scale square
 * wave, 32768: -50 dBFS is a quiet room). No samples: false. Pure.
 */
bool pps_audio_is_speech(const int16_t *pcm, size_t samples, double threshold_dbfs);

/* What pps_audio_find_ticks() takes for silence and for a tick. */
#define PPS_AUDIO_TICK_LEVEL           1000 /* |sample| at or above: sound (-30 dBFS) */
#define PPS_AUDIO_TICK_SILENCE_SAMPLES 4800 /* 100 ms */

/*
 * Tick onsets in @pcm: a tick starts at the first sample at or above
 * PPS_AUDIO_TICK_LEVEL (in magnitude) that follows at least 100 ms of
 * samples below it (the first 100 ms of @pcm are never an onset: what came
 * before is unknown). Writes the onsets' sample indices in order into
 * @onsets and returns how many it wrote (at most @max). Finds the ticks of the test source
 * (audiotestsrc wave=ticks) in captured or decoded audio, for the tests and the lab. Pure.
 */
size_t pps_audio_find_ticks(const int16_t *pcm, size_t samples, size_t *onsets, size_t max);

#endif /* PPS_AUDIO_H */
