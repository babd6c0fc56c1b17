/* SPDX-License-Identifier: MIT */
/*
 * The priority-progress streaming (PPS) core: adaptation windows, priority
 * mapping, and the per-client progress regulator that turns windows into
 * MSS-sized packets of wire records. Pure logic: no I/O, and no clock reads
 * (every call that needs the time takes `now_us`).
 *
 * From Goel, Krasic, Walpole, "Low-Latency Adaptive Streaming over TCP"
 * (TOMCCAP 2008), section 7: inside an adaptation window the sender sends in
 * priority order, base layers first; at the window's deadline whatever is
 * unsent is dropped; a window of which nothing was sent is a dropped window.
 * One exception (base_grace_us): the base layer's anchors, which every later
 * picture references, may go out late rather than break the chain until the
 * next IDR (the deadline-follows-dependencies idea of Time-lined TCP, paper
 * 004, applied to the one layer whose loss costs a whole GOP).
 *
 * Threading: a windower and each scheduler belong to one thread (the event
 * loop). Windows are reference counted, so one window is shared by every
 * client's scheduler; a closed window is immutable, and a window published
 * early only grows at the end of its send order, on that thread.
 */
#ifndef PPS_PRIORITIZER_H
#define PPS_PRIORITIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pps-adu.h"
#include "pps-wire.h"

/* ---- ADUs on the wire --------------------------------------------------- */

/*
 * The ADU fields of an ADU_FRAGMENT (adu_id, frame_index, capture_us,
 * decode_order, frame_type, layers, deps) from @info; the caller fills the
 * window, priority, offset, total_bytes and payload. The one mapping: the
 * scheduler and the client's reassembler use it.
 */
void pps_adu_info_to_wire(const pps_adu_info_t *info, pps_wire_adu_fragment_t *fragment);
/* The inverse: @info from a fragment's ADU fields (a parsed fragment is in range). */
void pps_adu_info_from_wire(const pps_wire_adu_fragment_t *fragment, pps_adu_info_t *info);

/* ---- priority policies ------------------------------------------------- */

typedef enum {
	PPS_PRIORITY_TEMPORAL_FIRST = 0, /* keep frame rate: drop quality layers first */
	PPS_PRIORITY_QUALITY_FIRST = 1,  /* keep picture quality: drop frames first */
	PPS_PRIORITY_BALANCED = 2,       /* alternate: layer sum t + q, then t */
	PPS_PRIORITY_POLICY_COUNT
} pps_priority_policy_t;

/* The names, indexed by the enum, NULL-terminated: [pps] priority_policy's choices. */
extern const char *const pps_priority_policy_names[];
/* "temporal-first", "quality-first", "balanced" (the config spelling). */
const char *pps_priority_policy_name(pps_priority_policy_t policy);
/* The policy for a name in *out: 0, or -EINVAL (*out untouched). */
int pps_priority_policy_from_name(const char *name, pps_priority_policy_t *out);

/*
 * Sorts @adus (of one window, in decode order) into send order under
 * @policy. Guarantees: no ADU comes before an ADU of the window it depends on;
 * ADUs of one layer that do not depend on each other are spread evenly in
 * time (bit-reversed order), so that dropping the tail of a layer removes
 * every other frame rather than the window's last frames. Returns 0 or
 * -ENOMEM. The priority of an ADU is its index in the result.
 */
int pps_priority_sort(pps_adu_t **adus, size_t n, pps_priority_policy_t policy);

/* ---- windows ----------------------------------------------------------- */

/*
 * The window a frame belongs to: window 0 holds frame 0 (the first IDR) and
 * window k >= 1 holds frames (k-1)W+1 .. kW, so that a mini-GOP whose anchor
 * is the window's last frame stays inside one window (codec/ aligns its GOP
 * to this).
 */
uint32_t pps_window_index_of_frame(uint32_t frame_index, unsigned window_frames);

typedef struct pps_window pps_window_t;

pps_window_t *pps_window_ref(pps_window_t *window);
void pps_window_unref(pps_window_t *window);

uint32_t pps_window_id(const pps_window_t *window);
int64_t pps_window_first_capture_us(const pps_window_t *window);
unsigned pps_window_frames(const pps_window_t *window);
/* ADUs the window holds now (while open, more may follow). */
size_t pps_window_adu_count(const pps_window_t *window);
/* ADUs the window announces (its WINDOW_BEGIN): the count once closed; while
 * open, the ADUs it holds plus those still being encoded. A window closed
 * short (the producer never delivered them) keeps announcing them. */
size_t pps_window_adu_total(const pps_window_t *window);
/*
 * True while the window is published early and ADUs are still to come
 * (pps_windower_set_early). They join the end of the send order; the
 * windower calls its grow_cb each time one does and when it closes.
 */
bool pps_window_is_open(const pps_window_t *window);
/*
 * True while an anchor window (pps_windower_set_anchor_windows) is open: the
 * base of a frame still to come is a reference picture every later frame
 * needs, worth waiting for past the deadline like any base anchor (what is
 * not one is dropped as it comes). The producer closes it within a frame.
 * Also true while a relayed window (pps_window_new_relayed_open) is open:
 * any ADU still to come may be a base anchor.
 */
bool pps_window_anchors_to_come(const pps_window_t *window);
/* The @i-th ADU in send (priority) order (i < pps_window_adu_count); owned by the window. */
const pps_adu_t *pps_window_adu(const pps_window_t *window, size_t i);
/* Payload bytes of the ADUs it holds. */
size_t pps_window_bytes(const pps_window_t *window);
/* What WINDOW_BEGIN announces: the bytes, plus while open a bound for each
 * ADU to come; never above PPS_WIRE_MAX_WINDOW_BYTES. */
size_t pps_window_bytes_bound(const pps_window_t *window);
/* Lowest ADU id of the window: its ADUs are first .. first + count - 1. */
uint32_t pps_window_first_adu_id(const pps_window_t *window);
/*
 * The earliest capture time among the frames the client decodes from the
 * @i-th ADU in send order on (i < pps_window_adu_count): its own frame and
 * every frame of the window with an ADU later in decode order. The client
 * decodes a window's ADUs strictly in decode order, so those frames wait for
 * this ADU (or, if it is dropped, for the WINDOW_END); the frames that
 * reference it are among them. Its deadline is this + the latency budget.
 */
int64_t pps_window_adu_due_capture_us(const pps_window_t *window, size_t i);

/*
 * A closed window rebuilt from a received one (a relay): its WINDOW_BEGIN's
 * @id, @first_capture_us, @frames, @first_adu_id and @adus_total (the ADUs it
 * announced), and the @n whole ADUs that arrived of it, in any order (the
 * array is reordered; the window takes the references, also on failure).
 * Every ADU id must lie in first_adu_id .. + adus_total - 1, once; the ADUs
 * that did not arrive stay announced, and a scheduler reports them dropped,
 * as for a window closed short. The send order is made with @policy, as the
 * publisher made it. NULL with errno EINVAL (ids or sizes out of range) or
 * ENOMEM.
 */
pps_window_t *pps_window_new_relayed(uint32_t id, int64_t first_capture_us, unsigned frames,
                                     uint32_t first_adu_id, size_t adus_total, pps_adu_t **adus,
                                     size_t n, pps_priority_policy_t policy);

/*
 * A relay's window forwarded while it arrives (cut-through): opened from its
 * WINDOW_BEGIN (@id, @first_capture_us, @frames, @first_adu_id, @adus_total
 * announced, @announced_bytes for the subscribers' WINDOW_BEGIN) with no ADU
 * yet. pps_window_relayed_add appends an ADU as it comes whole, in the order
 * the publisher sent it (its send order); the window closes once every
 * announced ADU is in, or at pps_window_relayed_close (what did not come
 * stays announced, and a scheduler reports it dropped). NULL with errno
 * EINVAL or ENOMEM. Tell the subscribers of each change
 * (pps_listener_window_grew).
 */
pps_window_t *pps_window_new_relayed_open(uint32_t id, int64_t first_capture_us, unsigned frames,
                                          uint32_t first_adu_id, size_t adus_total,
                                          size_t announced_bytes);
/* Takes the reference; -EINVAL (and unreferenced) for an id outside the
 * window, one it holds already, or a window not open. */
int pps_window_relayed_add(pps_window_t *window, pps_adu_t *adu);
void pps_window_relayed_close(pps_window_t *window);

/*
 * Groups ADUs, arriving in decode order, into windows. A window closes when
 * the producer says its frames are done (pps_windower_frames_done) or when an
 * ADU of a later window arrives; closed windows get their send order and are
 * handed to @window_cb, which takes the reference.
 */
typedef void (*pps_windower_window_cb)(pps_window_t *window, void *user);
/* A window published early got an ADU, or closed (pps_window_is_open() false);
 * the windower keeps its reference. */
typedef void (*pps_windower_grow_cb)(pps_window_t *window, void *user);

typedef struct pps_windower pps_windower_t;

pps_windower_t *pps_windower_new(unsigned window_frames, pps_priority_policy_t policy,
                                 pps_windower_window_cb window_cb, void *user);
void pps_windower_free(pps_windower_t *windower);

/*
 * Adds an ADU (the windower takes the reference). An ADU of a window older
 * than the open one is refused with -ESTALE (and unreferenced); a window
 * holding more than PPS_WINDOW_MAX_ADUS ADUs refuses more with -ENOSPC.
 */
#define PPS_WINDOW_MAX_ADUS 1024
int pps_windower_add(pps_windower_t *windower, pps_adu_t *adu);

/*
 * Early publication, for a producer whose every frame is exactly
 * @quality_layers ADUs in layer order with one temporal layer (no B frames,
 * no fillers): a window is handed to window_cb as soon as its last frame's
 * base-layer ADU is in, open, announcing the @quality_layers - 1 enhancement
 * ADUs still being encoded (each bounded by @adu_bound_bytes for WINDOW_BEGIN);
 * they join it as they arrive, and @grow_cb tells of each. So the base goes
 * out while the enhancement is encoded. Needs @quality_layers 2, or windows of
 * one frame (the ADUs to come must be the tail of the send order): else -EINVAL.
 * An ADU of a later window, pps_windower_frames_done or a flush closes an
 * open window short.
 */
int pps_windower_set_early(pps_windower_t *windower, unsigned quality_layers,
                           size_t adu_bound_bytes, pps_windower_grow_cb grow_cb);

/*
 * Anchor windows, for a producer that codes a window's frames each as a round
 * of its own (codec/'s pps_encoder_set_anchor_windows()): every frame exactly
 * @adus_per_frame ADUs (its quality layers, and its filler ADUs if the stream
 * has B frames), all temporal layer 0, each frame's coming out as it is
 * captured. A window whose first ADU is its first frame's base is such a
 * window (with B frames a window's first ADU in decode order is a later
 * frame's anchor): it is handed to window_cb at once, open, announcing
 * window_frames x @adus_per_frame - 1 ADUs to come (each bounded by
 * @adu_bound_bytes); they join the end of the send order as they arrive, so a
 * window's frames leave as fresh as with windows of one frame, and the
 * deadline drops its last frames first. Needs windows of 2 frames or more:
 * else -EINVAL. Closed short like an early window.
 */
int pps_windower_set_anchor_windows(pps_windower_t *windower, unsigned adus_per_frame,
                                    size_t adu_bound_bytes, pps_windower_grow_cb grow_cb);

/* Every ADU of frames <= @last_frame has been added: close those windows. */
int pps_windower_frames_done(pps_windower_t *windower, uint32_t last_frame);

/* Closes the open window, whatever it holds (end of stream). */
int pps_windower_flush(pps_windower_t *windower);

/* ---- the per-client scheduler (progress regulator) --------------------- */

/*
 * When the regulator drops what is unsent (pps.deadlines):
 *   window      at the window's deadline (its first frame's capture + the
 *               latency budget), all of it at once;
 *   adu         each ADU at its own deadline (pps_window_adu_due_capture_us +
 *               the budget), so a later frame's data may still go out after
 *               the first frame's deadline; the window ends at its last
 *               ADU's deadline, or, once an ADU was dropped, at that ADU's
 *               deadline (the frames decoded after it wait for the WINDOW_END);
 *   predictive  adu, and an ADU whose bytes cannot reach the client before its
 *               deadline by the path estimate (pps_sched_set_path) is dropped
 *               before its first byte is written.
 * Base anchors keep their grace (base_grace_us) under every policy, and are
 * never dropped by prediction.
 */
typedef enum {
	PPS_DEADLINES_WINDOW = 0,
	PPS_DEADLINES_ADU = 1,
	PPS_DEADLINES_PREDICTIVE = 2,
	PPS_DEADLINES_COUNT
} pps_deadlines_t;

/* The names, indexed by the enum, NULL-terminated: [pps] deadlines' choices. */
extern const char *const pps_deadlines_names[];

typedef struct {
	int64_t latency_budget_us; /* deadline = first capture time + budget */
	unsigned max_windows;      /* queued windows; the oldest is dropped past it */
	size_t max_record_bytes;   /* no record longer than this, header included (the
	                            * client's limit from HELLO); 0 =
	                            * PPS_WIRE_DEFAULT_MAX_RECORD_BYTES */
	/* Base anchors (quality 0, temporal 0: the IDR/P chain every later
	 * picture references) are still sent up to this long after their
	 * window's deadline: a late anchor costs its own window's frames, a
	 * dropped one every frame until the next IDR. 0 = dropped at the
	 * deadline like everything else. */
	int64_t base_grace_us;
	/* An audio frame still unsent this long after its capture is dropped
	 * (its seq gap tells the client); 0 = PPS_DEFAULT_AUDIO_DEADLINE_US. */
	int64_t audio_deadline_us;
	pps_deadlines_t deadlines; /* when unsent data is dropped */
	/* A client's enhancement layer whose restart at an IDR failed (the IDR
	 * cut part-sent, or the layer cut within 300 ms of it) skips its next
	 * IDR, then 2, 4, ... up to this many; 0 = every IDR restarts it. */
	unsigned restart_backoff_max;
	/* A client's enhancement layer restarts at an IDR only while its path
	 * estimate (pps_sched_set_path) is at least this % of what the encoder
	 * makes of that layer and every layer below it (over the last windows):
	 * a path that cannot carry the layer gets no IDR of it, whose bytes
	 * would only delay the base behind them. 0 = no such check. */
	unsigned restart_fit_pct;
} pps_sched_params_t;

/*
 * What the regulator knows of the path, for the predictive drop
 * (PPS_DEADLINES_PREDICTIVE) and the restarts' fit (restart_fit_pct): the
 * owner sets it from each TCP_INFO reading, before it asks for packets.
 */
typedef struct {
	uint64_t rate_bps;     /* what the path carries for this stream now; 0 = no estimate */
	uint64_t queued_bytes; /* written but not yet sent by the kernel (tcpi_notsent_bytes) */
	int64_t one_way_us;    /* from a byte's sending to its arrival: srtt / 2 */
} pps_sched_path_t;

#define PPS_DEFAULT_MAX_WINDOWS 64
#define PPS_SCHED_MAX_CONTROL   32 /* control records (PONG, BYE) waiting */
/* Audio frames waiting (320 ms of 20 ms frames): past it the oldest goes. */
#define PPS_SCHED_MAX_AUDIO 16
/* Largest audio payload the scheduler holds (64 kbit/s makes 160-byte 20 ms
 * frames; Opus keeps under what its encoder is given, and the server gives it
 * this). */
#define PPS_SCHED_MAX_AUDIO_BYTES     512
#define PPS_DEFAULT_AUDIO_DEADLINE_US 250000
/* A fragment carries at least this much payload unless the ADU's rest is smaller. */
#define PPS_SCHED_MIN_FRAGMENT_BYTES 64

typedef struct {
	uint64_t adus_sent, adus_dropped;   /* dropped = at the deadline or undecodable */
	uint64_t bytes_sent, bytes_dropped; /* ADU payload bytes */
} pps_sched_layer_stats_t;

typedef struct {
	uint64_t windows_base_late; /* passed their deadline with base anchors still to send */
	uint64_t windows_complete;  /* every ADU sent */
	uint64_t windows_partial;   /* some sent, some dropped */
	uint64_t windows_dropped;   /* nothing sent (deadline passed first) */
	uint64_t windows_overflow;  /* dropped because max_windows were queued */
	uint64_t windows_rested;    /* a copy's, at rest (pps_sched_rest_window) */
	/* Dropped or partial (overflowed ones included) once a window was
	 * complete: the regulator dropped to keep up, not because the client
	 * joined in the middle of a GOP. */
	uint64_t windows_short;
	uint64_t adus_undecodable; /* skipped: something they depend on was dropped */
	/* Of the dropped ADUs, those dropped before their deadline because the
	 * path estimate said they could not arrive by it (PPS_DEADLINES_PREDICTIVE). */
	uint64_t adus_predicted;
	/* Of the dropped ADUs, enhancement IDRs skipped while their layer backs
	 * off after a failed restart (restart_backoff_max). */
	uint64_t adus_restart_skipped;
	/* Of the dropped ADUs, enhancement IDRs not sent because the path
	 * estimate was below restart_fit_pct of the layers' encoded rate. */
	uint64_t adus_restart_unfit;
	/* Windows still sending after their first frame's deadline, a later
	 * frame's ADUs within their own (PPS_DEADLINES_ADU, _PREDICTIVE). */
	uint64_t windows_extended;
	uint64_t packets, packet_bytes;
	uint64_t control_overflow;        /* control records refused: queue full */
	uint64_t audio_sent, audio_bytes; /* AUDIO_FRAME records written, their payload bytes */
	uint64_t audio_late;              /* dropped unsent past audio_deadline_us */
	uint64_t audio_overflow; /* dropped: PPS_SCHED_MAX_AUDIO were waiting (the oldest goes) */
	uint64_t audio_refused;  /* longer than a slot or than the client's record limit */
	pps_sched_layer_stats_t layer[PPS_ADU_MAX_TEMPORAL_LAYERS][PPS_ADU_MAX_QUALITY_LAYERS];
} pps_sched_stats_t;

typedef struct pps_sched pps_sched_t;

/* NULL with errno (EINVAL for a budget <= 0, max_windows < 2 or max_record_bytes
 * below PPS_WIRE_MIN_MAX_RECORD_BYTES, ENOMEM). */
pps_sched_t *pps_sched_new(const pps_sched_params_t *params);
void pps_sched_free(pps_sched_t *sched);

/*
 * Queues a window for this client (takes a new reference of its own). It
 * cannot fail, so it returns nothing: past max_windows the oldest queued
 * window is dropped and counted (windows_overflow) to make room.
 */
void pps_sched_push_window(pps_sched_t *sched, pps_window_t *window);

/*
 * A copy of the stream at rest (the client views it on another connection,
 * which carries it): the window is queued as a lone dropped WINDOW_END with
 * the rested flag (PPS_WIRE_WINDOW_END_RESTED), its ids only, counted in
 * windows_rested and nowhere else, and its ADUs count as the client's for
 * what depends on them (the other connection brought them), so that the copy
 * is of use from the next window it carries.
 */
void pps_sched_rest_window(pps_sched_t *sched, pps_window_t *window);

/*
 * Queues a control record (CLOCK_PONG, BYE, STREAM_INFO) to go out before
 * more window data. -ENOSPC past PPS_SCHED_MAX_CONTROL (counted).
 */
int pps_sched_push_control(pps_sched_t *sched, const pps_wire_record_t *record);

/*
 * Queues an audio frame (the payload is copied) to go out before any more
 * window data, after the control records: audio is the highest class of the
 * stream. Past PPS_SCHED_MAX_AUDIO the oldest waiting frame is dropped
 * (audio_overflow); a frame still unsent at capture + audio_deadline_us is
 * dropped when the next packet is built (audio_late). -EMSGSIZE for a payload
 * over PPS_SCHED_MAX_AUDIO_BYTES or a record over the client's limit
 * (audio_refused), -ENOMEM when the queue cannot be allocated (on first use).
 */
int pps_sched_push_audio(pps_sched_t *sched, const pps_wire_audio_frame_t *frame);

/*
 * Drops what is unsent of every window whose deadline is <= @now_us (with a
 * base grace: all but its base anchors, until deadline + grace; per ADU,
 * the window's deadline is its earliest unsent ADU's, see pps_deadlines_t). Called
 * by pps_sched_next_packet() too; the owner also calls it from a timer armed
 * at pps_sched_next_deadline_us(), so drops are accounted on time even while
 * the socket accepts nothing. Returns the number of windows it ended.
 */
int pps_sched_expire(pps_sched_t *sched, int64_t now_us);

/* The earliest deadline (or end of grace, for a late window) of a window not
 * yet ended, or INT64_MAX. */
int64_t pps_sched_next_deadline_us(const pps_sched_t *sched);

/* The path as the predictive drop sees it from now on (copied). Bytes the
 * scheduler hands out after this call count as queued on top of
 * @path->queued_bytes until the next call. */
void pps_sched_set_path(pps_sched_t *sched, const pps_sched_path_t *path);

/* True while a window past its deadline still has base anchors to send (in
 * its base grace): the client's path carries less than the base, for now. */
bool pps_sched_behind(const pps_sched_t *sched);

/* True if a call to pps_sched_next_packet() now would produce a packet. */
bool pps_sched_has_data(const pps_sched_t *sched);

/* The first capture time of the oldest window with data not on the wire: in
 * the kernel's unsent bytes at the last pps_sched_set_path() (its
 * queued_bytes), else the oldest window here with ADUs still to hand out
 * (not ended, not waiting for the encoder); INT64_MAX when everything is
 * sent. How long the client's pictures wait in this sender. */
int64_t pps_sched_unsent_since_us(const pps_sched_t *sched);

/*
 * Builds the next packet into @buf: whole records only, at most @mss bytes
 * (@mss >= 128; it may differ on every call). Control records first, then
 * audio frames, then the head window's records in priority order; ADUs are split into fragments and
 * small fragments packed together. A packet never holds data of a window
 * whose deadline is <= @now_us, nor an ADU this client cannot decode.
 * Returns 1 with *len set, and *push true when the packet ends a window or
 * nothing more is queued (the writer flushes it now); 0 when there is nothing
 * to send; -EINVAL for an mss below 128.
 */
int pps_sched_next_packet(pps_sched_t *sched, int64_t now_us, size_t mss, uint8_t *buf, size_t *len,
                          bool *push);

void pps_sched_get_stats(const pps_sched_t *sched, pps_sched_stats_t *out);

#endif /* PPS_PRIORITIZER_H */
