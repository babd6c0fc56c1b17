/* SPDX-License-Identifier: MIT */
/*
 * An adaptive jitter buffer for Opus voice frames: pure logic. It reads no
 * clock and does no I/O; every call takes the time it is about.
 *
 * Times are microseconds on the sender's clock: capture times as the sender
 * stamped them, arrival and "now" mapped into that clock by the caller's
 * clock-offset estimate. The offset may be wrong by a constant and the
 * clocks may drift: no limit is an absolute delay, each is relative to the
 * delays measured, so an offset error moves them all together (see
 * pps-jitter.c).
 *
 * Frame s plays at capture_us(s) + D. The playout delay D is chosen at the
 * start of each talkspurt (Zhang, Wang, Keshav, section 4.1.1, after Ramjee
 * et al.: D = d + beta v, with a spike mode that follows sudden delay
 * changes) and kept constant inside it. Slots come at a steady cadence, one
 * every frame_us, so D moves in whole frames: a silent frame skipped, or a
 * slot inserted. Continuous audio (no pause for continuous_after_us) gets
 * one such step at most every continuous_step_us.
 *
 * One thread: the object is not locked. Payload pointers handed out in a
 * slot stay valid until the next call on the object.
 */
#ifndef PPS_JITTER_H
#define PPS_JITTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The largest Opus frame (RFC 6716, section 3.2.1). */
#define PPS_JITTER_MAX_PAYLOAD_BYTES 1275
/* At most this many frames held, whatever the parameters ask (memory bound). */
#define PPS_JITTER_MAX_FRAMES_LIMIT 4096

typedef struct pps_jitter pps_jitter_t;

typedef struct {
	/* The frame duration: an Opus frame size, 2500 .. 60000 (20000 or 10000 for voice). */
	int64_t frame_us;
	/*
	 * Bounds of the playout delay, relative to the delays measured, so an
	 * error in the caller's clock offset moves them with the delays.
	 * min (default 20 ms): the least margin above the delay estimate
	 * (what a steady path gets). max (default 1 s): the most above the
	 * delay floor, the least one-way delay of the last 2 s (what a spike
	 * may add; a frame later than that is late).
	 */
	int64_t min_delay_us;
	int64_t max_delay_us;
	/*
	 * Frames held at most (default 1.28 s of audio: 64 frames of 20 ms);
	 * must cover max_delay_us. A frame further ahead of the play point is
	 * refused, unless the caller has stopped popping, then the oldest
	 * frames make room.
	 */
	int max_frames;
	/* The running estimates' weight per frame (default exp(-frame / 10 s):
	 * 0.998002 at 20 ms, the seed's value, whatever the frame length). */
	double alpha;
	/* D = d + beta v (default 4, the seed's). */
	double beta;
	/*
	 * The target from the delays themselves instead (default 0: off):
	 * with 0 < target_quantile < 1, T = max(the target_quantile quantile
	 * of the delays of the last quantile_window_us of frames, d +
	 * min_delay): the delay that a share target_quantile of the recent
	 * frames arrived within, whatever the shape of their distribution
	 * (d + beta v assumes a light tail). beta is then unused. The window
	 * (default 10 s) holds at most PPS_JITTER_MAX_FRAMES_LIMIT frames. The
	 * quantile counts at most quantile_cap_us (default 150 ms) above the
	 * delay floor: on a path whose tail is longer, frames beyond it are
	 * concealed rather than waited for (d + min_delay, which follows a
	 * spike, is not capped but by max_delay_us). Out of spike mode that
	 * margin is taken above the higher of the quantile and the last two
	 * delays where d is above both: d is then what a short stall left
	 * when spike mode ended, not the typical delay.
	 */
	double target_quantile;
	int64_t quantile_window_us;
	int64_t quantile_cap_us;
	/*
	 * Hysteresis (default 10 ms): D grows toward the target T only when T
	 * is more than hysteresis_us above it, unless the arrivals themselves
	 * ask for more (the quantile, or d + beta v, above D) or the estimate
	 * follows a spike: then a quarter frame above is enough, as it is
	 * for any target with hysteresis_us under a quarter frame. What is
	 * left to wait for a larger change is the margin above d and the lip
	 * sync floor: a few milliseconds short of those leaves the arrivals
	 * covered, and D moves in whole frames. Shrinking is unchanged (T a
	 * whole frame below D).
	 */
	int64_t hysteresis_us;
	/* Spike mode (Ramjee's algorithm 4): entered when the delay jumps by
	 * more than 2 v + spike_enter_us (default 100 ms), left when its
	 * change is calm again, under spike_exit_us (default 10 ms). */
	int64_t spike_enter_us;
	int64_t spike_exit_us;
	/* Continuous audio: after continuous_after_us (default 2 s) without a
	 * pause, D steps one frame toward the target at most every
	 * continuous_step_us (default 1 s). */
	int64_t continuous_after_us;
	int64_t continuous_step_us;
	/* A capture time more than resync_us (default 100 ms) away from where
	 * its sequence number puts it breaks the sender's timeline: not
	 * measured; two in a row that agree restart the stream. */
	int64_t resync_us;
	/* After idle_after_us (default 1 s) of slots with nothing held, the
	 * buffer stops scheduling (next_due is INT64_MAX) until a frame comes. */
	int64_t idle_after_us;
} pps_jitter_params_t;

/* The defaults above for frames of @frame_us. */
void pps_jitter_params_init(pps_jitter_params_t *params, int64_t frame_us);

/* A copy of @params is kept. NULL + errno: EINVAL (a parameter out of range),
 * ENOMEM. The payload slots (max_frames x 1275 bytes) are allocated here. */
pps_jitter_t *pps_jitter_new(const pps_jitter_params_t *params);
void pps_jitter_free(pps_jitter_t *jitter);

/*
 * A frame arrived at @arrival_us. @seq counts frames at the sender (a gap is
 * a frame it dropped); @speech is its voice activity: a talkspurt starts at a
 * speech frame after a silent one. The payload (1 .. 1275 bytes) is copied.
 *
 * Returns 0 (held; or the stream restarted at it), -ESTALE (its slot has
 * passed: counted late), -EEXIST (held already: a duplicate; but a frame
 * whose capture time fits the timeline replaces a held one whose did not),
 * -ERANGE (too far ahead of the play point: dropped and counted), -EINVAL (bad arguments: no
 * payload, a length out of range, a time beyond +-2^53 us). After a call, pps_jitter_next_due_us()
 * may be earlier than before: re-arm the timer.
 */
int pps_jitter_put(pps_jitter_t *jitter, uint32_t seq, int64_t capture_us, bool speech,
                   const uint8_t *payload, size_t len, int64_t arrival_us);

/*
 * The smallest playout delay the target may have, in absolute terms
 * (capture to slot), whatever the estimates say: lip sync keeps the audio
 * waiting for a later picture this way. Applied as any change of the
 * target is (at talkspurt starts, or a frame a second in continuous audio),
 * within max_delay_us above the delay floor. 0 (or less): none.
 */
void pps_jitter_set_floor(pps_jitter_t *jitter, int64_t floor_us);

/* When the next slot is due, or INT64_MAX when nothing is scheduled (no
 * frame yet, or idle). */
int64_t pps_jitter_next_due_us(const pps_jitter_t *jitter);

typedef enum {
	PPS_JITTER_NOTHING, /* (not returned by pop: an empty slot struct) */
	PPS_JITTER_PLAY,    /* decode the frame */
	PPS_JITTER_RECOVER, /* the frame is missing but the next one is here: decode
	                       the next one's in-band FEC (opus_decode(..., fec = 1)) */
	PPS_JITTER_CONCEAL, /* nothing to decode: packet loss concealment
	                       (opus_decode(NULL)); also a slot inserted to lengthen D */
	PPS_JITTER_SKIP,    /* a frame dropped to shorten D: takes no time; the
	                       decoder may eat it without playing it */
} pps_jitter_action_t;

typedef struct {
	pps_jitter_action_t action;
	uint32_t seq;       /* the frame this slot is about */
	int64_t capture_us; /* its capture time (predicted when it is missing) */
	int64_t playout_us; /* when this slot is due */
	/* PLAY, SKIP: the frame; RECOVER: the NEXT frame's; else NULL, 0. */
	const uint8_t *payload;
	size_t len;
	bool speech;
} pps_jitter_slot_t;

/*
 * The slot due at or before @now_us: fills @out and advances. Returns 1 with
 * a slot, 0 when none is due (or nothing is scheduled). Call until it
 * returns 0. A caller more than max_delay_us late catches up by passing the
 * overdue slots without returning them (counted: expired, lost).
 */
int pps_jitter_pop(pps_jitter_t *jitter, int64_t now_us, pps_jitter_slot_t *out);

typedef struct {
	uint64_t received;         /* frames given to put with valid arguments */
	uint64_t played;           /* PLAY slots */
	uint64_t recovered;        /* RECOVER slots */
	uint64_t concealed;        /* CONCEAL slots for a missing frame */
	uint64_t inserted;         /* CONCEAL slots inserted to lengthen D */
	uint64_t skipped;          /* SKIP: frames dropped to shorten D */
	uint64_t lost;             /* frames missing when the play point passed them */
	uint64_t late;             /* frames that came after their slot (-ESTALE) */
	uint64_t duplicates;       /* -EEXIST */
	uint64_t dropped_overflow; /* held frames passed over to make room */
	uint64_t dropped_far;      /* -ERANGE */
	uint64_t expired;          /* held frames passed over: a late caller, a restart */
	uint64_t inconsistent;     /* capture times off the sender's timeline */
	uint64_t restarts;         /* the stream restarted (sequence jump, timeline break) */
	uint64_t talkspurts;       /* talkspurt starts played */
	uint64_t delay_changes;    /* times D changed (the steps of one pause count once) */
	/* Over PLAY slots: playout_us - capture_us (predicted for a frame
	 * whose capture time was off the sender's timeline). */
	double playout_delay_mean_ms;
	double playout_delay_std_ms;
	int64_t current_delay_us; /* D at the play point (0 before the first frame) */
	int64_t target_delay_us;  /* what the estimates ask for now */
	int held;                 /* frames waiting */
	bool spike;               /* the estimator is in spike mode */
} pps_jitter_stats_t;

void pps_jitter_get_stats(const pps_jitter_t *jitter, pps_jitter_stats_t *stats);

#endif /* PPS_JITTER_H */
