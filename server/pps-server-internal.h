/* SPDX-License-Identifier: MIT */
/*
 * pps-server's parts, shared inside server/ only.
 *
 *   media:   capture + encoder threads -> bounded ADU queue + eventfd -> the
 *            loop's windower -> windows handed to the server
 *   session: one client: its parser, its progress regulator (pps_sched_t),
 *            its MIN_BUF writer, its deadline timer
 *
 * Everything here except the media thread side runs on the main thread, which
 * owns the event_base.
 */
#ifndef PPS_SERVER_INTERNAL_H
#define PPS_SERVER_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "pps-adapt.h"
#include "pps-audio.h"
#include "pps-codec.h"
#include "pps-log.h"
#include "pps-minbuf.h"
#include "pps-web.h"
#include "pps-prioritizer.h"
#include "pps-wire.h"

struct event_base;
struct pps_tls;

/* ---- media ------------------------------------------------------------- */

/* Bounded hand-over between the encoder thread and the loop. Past it the
 * encoder thread waits, and the capture's own bounded queue drops the oldest
 * raw frames (counted there). */
#define PPS_MEDIA_QUEUE_ITEMS 1024

typedef struct pps_media pps_media_t;

/* What media emits, on the loop thread, with the user pointer of pps_media_new(). */
typedef struct {
	/* A window ready to send; the callee takes the reference. With one
	 * temporal layer a window comes once its last frame's base is encoded,
	 * still open (pps_window_is_open): its enhancement follows. */
	void (*window_cb)(pps_window_t *window, void *user);
	/* An open window got an ADU or closed; media keeps the reference. */
	void (*window_grew_cb)(pps_window_t *window, void *user);
	/* The source or the encoder failed (@error: one line, as
	 * pps_media_error() has it); no frame follows. Called once, as soon as
	 * the loop runs after the failure. Optional. */
	void (*failed_cb)(const char *error, void *user);
	/* One encoded audio frame (the record's fields; the payload is valid
	 * for the call). Optional. */
	void (*audio_cb)(const pps_wire_audio_frame_t *frame, void *user);
	/* Every encoded ADU, in the encoder's order, before the windows take
	 * it (borrowed for the call). Optional. */
	void (*adu_cb)(const pps_adu_t *adu, void *user);
} pps_media_events_t;

/* The audio track ([audio] settings): used when the capture has audio (or,
 * pushed, when capture.audio is not off). */
typedef struct {
	pps_audio_encoder_params_t encoder;
	unsigned transport;           /* PPS_WIRE_AUDIO_IN_STREAM or _OWN_CONNECTION */
	unsigned copies;              /* _OWN_CONNECTION: STREAM_INFO's audio_copies */
	double speech_threshold_dbfs; /* a frame above it is speech (talkspurts) */
} pps_media_audio_params_t;

/* What to capture and how to encode it, for the windows of which policy. */
typedef struct {
	pps_capture_params_t capture;
	/* rate_adaptive: the closed loop steers the rates (pps_media_set_rates) */
	pps_encoder_params_t encoder;
	pps_priority_policy_t priority_policy;
	uint32_t latency_budget_ms; /* announced in STREAM_INFO */
	pps_media_audio_params_t audio;
	pps_log_t log;
	/* A file or URI source is probed (pps_capture_probe()) and sent at its
	 * own size, and at its own rate, unless the user set them: with
	 * size_set / fps_set the capture's width, height / fps stand. What was
	 * adapted, and a sound dropped with capture.audio off, is logged once. */
	bool size_set, fps_set;
	/* Windows of anchors alone may come (pps_media_set_b_frames): the
	 * windower publishes them as they are encoded. */
	bool anchor_windows;
} pps_media_params_t;

typedef struct {
	uint64_t frames_encoded;
	uint64_t adus;
	uint64_t bytes[PPS_ADU_MAX_QUALITY_LAYERS];
	uint64_t windows;
	uint64_t windows_early;     /* of which sent from their base on, the rest still encoding */
	uint64_t windows_anchors;   /* windows encoded as anchors alone (pps_media_set_b_frames) */
	uint64_t b_frames_switches; /* the windows changed between anchors alone and B frames */
	uint64_t windows_drained;   /* mini-GOPs coded coarser to drain the viewers' queues */
	uint64_t queue_waits;       /* encoder thread waited: the loop fell behind */
	uint64_t capture_dropped;   /* raw frames the capture queue dropped */
	uint64_t capture_frames;
	uint64_t idr_requests; /* IDRs asked of the encoder (after the rate limit) */
	uint64_t idr_deferred; /* requests that waited for the rate limit */
	/* A window's first capture to the window ready to send (every frame of
	 * it captured, encoded and handed to the loop): the server's hold
	 * before the scheduler, percentiles at 0.1 ms over every window (past
	 * 1 s, counted as 1 s). 0 with no window yet. */
	uint64_t ready_samples;
	double capture_to_ready_p50_ms, capture_to_ready_p95_ms;
	/* The encoder's wall time per frame and quality layer, mean (x264's
	 * threads included; the base's also covers the downscale and the
	 * upscaled prediction). */
	double encode_ms_per_frame[PPS_ADU_MAX_QUALITY_LAYERS];
	/* The audio track: frames encoded and handed to the loop, their bytes,
	 * frames dropped because the hand-over was full, encoder failures. */
	uint64_t audio_frames, audio_bytes, audio_dropped, audio_encode_errors;
} pps_media_stats_t;

/* NULL with the reason in @err (a source that does not parse, an encoder
 * x264 refuses, out of memory). @params is borrowed for the call. */
pps_media_t *pps_media_new(struct event_base *base, const pps_media_params_t *params,
                           const pps_media_events_t *events, void *user, char *err,
                           size_t err_size);
/* The same, with the frames pushed by the program instead of captured by a
 * pipeline (the ppssink element): the capture's width, height, queue_frames
 * and timecode still apply (pps_capture_new_push()). */
pps_media_t *pps_media_new_pushed(struct event_base *base, const pps_media_params_t *params,
                                  const pps_media_events_t *events, void *user, char *err,
                                  size_t err_size);
/* Pushed media, any one thread: the next raw frame, copied (sizes as
 * configured; else -EINVAL). Never blocks: the capture queue drops the oldest. */
int pps_media_push_frame(pps_media_t *media, const pps_frame_t *frame);
/* Pushed media has an audio track when params->capture.audio is not off
 * (the program pushes it); then, from any one thread (not necessarily the
 * frames'): one block of PPS_AUDIO_BLOCK_SAMPLES mono S16 48 kHz samples
 * (borrowed for the call) whose first sample was captured at @capture_us
 * (CLOCK_REALTIME, mapped as the frames' capture_us are), as a capture's
 * audio callback delivers them. Encoded on the caller's thread; never blocks
 * (a full hand-over drops the frame, counted in audio_dropped). 0, -ENOENT
 * without an audio track, -EINVAL for a block of another size. */
int pps_media_push_audio(pps_media_t *media, const int16_t *pcm, size_t samples,
                         int64_t capture_us);
/* Starts capture; errors (missing device, bad pipeline) come back with a message. */
int pps_media_start(pps_media_t *media, char *err, size_t err_size);
void pps_media_stop(pps_media_t *media);
void pps_media_free(pps_media_t *media);
/* Loop thread: the next window starts with an IDR (a client joined, or lost its
 * base layer). At most one IDR per 500 ms: a request within that time of the
 * last one is deferred to its end, not dropped. */
void pps_media_request_idr(pps_media_t *media);
/* Loop thread: new rate control for the encoder, applied before the next frame
 * at the start of a mini-GOP. -EINVAL if the encoder is not rate-adaptive. */
int pps_media_set_rates(pps_media_t *media, const pps_encoder_rates_t *rates);
/* Loop thread: whether the windows carry B frames, from the next window the
 * encoder starts on (pps_encoder_set_anchor_windows()). No effect on a stream
 * without B frames. */
void pps_media_set_b_frames(pps_media_t *media, bool on);
/* Loop thread: how much coarser (CRF) the encoder codes from its next
 * mini-GOP on, 0 for the rates as set (pps_encoder_set_crf_offset()). */
void pps_media_set_drain(pps_media_t *media, int crf_offset);
/* Loop thread: the rate control last handed to the encoder. */
void pps_media_get_rates(pps_media_t *media, pps_encoder_rates_t *rates);
void pps_media_stream_info(const pps_media_t *media, pps_wire_stream_info_t *info);
void pps_media_get_stats(pps_media_t *media, pps_media_stats_t *stats);
/* The stream has an audio track (the capture has audio). */
bool pps_media_has_audio(const pps_media_t *media);
/* Loop thread: the audio encoder's bit rate from the next frame on
 * (PPS_AUDIO_MIN_BITRATE_BPS..MAX): 0, -EINVAL, -ENOENT without audio. */
int pps_media_set_audio_bitrate(pps_media_t *media, int bitrate_bps);
/* The audio bit rate last asked for (0 without audio). */
int pps_media_audio_bitrate(pps_media_t *media);
/* Non-empty once the source failed at run time. */
const char *pps_media_error(pps_media_t *media);

/* ---- sessions ---------------------------------------------------------- */

typedef struct pps_session pps_session_t;
typedef struct pps_server pps_server_t;

typedef enum {
	PPS_SESSION_AWAIT_HELLO,
	PPS_SESSION_AWAIT_AUTH, /* CHALLENGE sent, its answer not yet in */
	PPS_SESSION_STREAMING,
} pps_session_state_t;

/* The session's clock (CLOCK_REALTIME microseconds); tests inject their own. */
typedef int64_t (*pps_session_clock_cb)(void *user);

/* Asked when a client's HELLO is otherwise acceptable: may it stream now
 * (false: it is refused with BYE server-full)? */
typedef bool (*pps_session_admit_cb)(pps_session_t *session, void *user);

/* CLOCK_PINGs answered per connection: a burst, then a rate (clients ping at
 * most 10 times a second); the rest are not answered. */
#define PPS_SESSION_PONG_BURST  20
#define PPS_SESSION_PONGS_PER_S 20

/* Tries at the access token, per address (the listener's): with @take false,
 * whether the peer may try now (it is sent a CHALLENGE); with @take true, a
 * try is spent before its AUTH is checked. false: not now, *wait_us until it
 * may. The result follows with pps_session_auth_result_cb (a right token
 * gives its try back). */
typedef bool (*pps_session_auth_try_cb)(pps_session_t *session, bool take, int64_t *wait_us,
                                        void *user);
typedef void (*pps_session_auth_result_cb)(pps_session_t *session, bool ok, void *user);

typedef struct {
	pps_minbuf_params_t transport;
	pps_path_params_t path;
	const char *access_token; /* "" or NULL: anyone; else the client must prove it
	                           * by challenge-response (HELLO flag, CHALLENGE, AUTH) */
	int64_t evict_after_us;   /* no data taken for this long: BYE too-slow; 0 never */
	pps_session_admit_cb admit_cb;
	pps_session_auth_try_cb auth_try_cb;       /* NULL: no bound on tries */
	pps_session_auth_result_cb auth_result_cb; /* NULL: not told */
	pps_sched_params_t sched;
	pps_wire_stream_info_t stream_info;
	int64_t hello_timeout_us;
	pps_session_clock_cb clock_cb; /* NULL: pps_time_realtime_us() */
	void *clock_user;
	/* TLS (common/pps-tls.h): the handshake runs before HELLO, within
	 * hello_timeout_us, and every record after it is encrypted; NULL: plaintext.
	 * Not owned; it must outlive the session. */
	struct pps_tls_ctx *tls_ctx;
	/* Where the session's story goes (joined, left, refused, errors); zeroed:
	 * nowhere. The listener passes its own. */
	pps_log_t log;
	/* An audio-only connection's minimum RTO (TCP_RTO_MIN_US); 0: the
	 * kernel's. */
	uint32_t audio_rto_min_us;
	/* An audio-only connection is a thin stream (pps_minbuf_params_t.thin);
	 * false: plain mode tcp, for comparison. */
	bool audio_thin;
	/* With STREAM_INFO's audio_copies > 0: the time between the copies of
	 * one audio frame on a pool's connections (the second this long after
	 * the first, the third twice as long...), so that one burst of drops
	 * at a full queue does not take them all. */
	int64_t audio_copy_spacing_us;
	/* A copy of the stream (HELLO's copy flag) gets each window this long
	 * after the connection before it (the first copy once, the second
	 * twice...), for the same reason: copies written together meet one
	 * burst of drops together. 0: at once. */
	int64_t copy_spacing_us;
	/* A copy whose HELLO allows it rests (its windows as lone rested
	 * WINDOW_ENDs) unless, in the last 10 s, the stream's own connection
	 * from its address lost a packet with no queue of its own, lost packets
	 * in 3 of the last 6 seconds, or failed a test of its latency cap;
	 * false: always sends. */
	bool copy_rest;
	/* A client's audio connections outside a pool: its first one's
	 * retransmissions per frame above which the others carry no copies
	 * (again below half of it); 0: they always do. */
	double audio_copies_off_loss;
	/* Pages a browser's connection may ask for besides the embedded files
	 * (GET /metrics); zeroed: none. */
	pps_web_pages_t web_pages;
} pps_session_params_t;

/* Called when the session is gone for good (its socket failed, the peer left
 * or misbehaved); the server unlinks and frees it. */
typedef void (*pps_session_closed_cb)(pps_session_t *session, void *user);
/* Called once the client's HELLO was accepted, and again whenever the client
 * lost base-layer data (deadline or undecodable) and can decode nothing more
 * until the next IDR: the listener asks the encoder for one within its
 * recovery bounds (pps-server-lib.h), at most one loss request per
 * PPS_SESSION_LOSS_IDR_INTERVAL_US per client, so one client on a bad path
 * cannot raise everyone's IDR rate. */
#define PPS_SESSION_LOSS_IDR_INTERVAL_US 2000000
typedef void (*pps_session_ready_cb)(pps_session_t *session, void *user);

/* A session for the accepted socket @fd, which it owns from then on (closed by
 * pps_session_free). @tls: a TLS endpoint already made on @fd (a relay's
 * door ran its handshake), the session's from now on, freed here if it
 * fails; NULL: params->tls_ctx decides. NULL with errno set (EINVAL for
 * missing arguments or path parameters out of range, ENOMEM), the caller
 * still owning @fd. */
pps_session_t *pps_session_new(struct event_base *base, int fd, const struct sockaddr *addr,
                               socklen_t addr_len, unsigned id, const pps_session_params_t *params,
                               struct pps_tls *tls, pps_session_ready_cb ready_cb,
                               pps_session_closed_cb closed_cb, void *user);
void pps_session_free(pps_session_t *session);
/* Bytes that were read from the session's socket before it was made (a
 * relay read the HELLO, or a browser's HTTP request, to route it; a
 * publisher read its relay's HELLO): wire records are handled now, as if
 * they came from the transport; an HTTP request goes through the transport's
 * layers from the loop (pps_transport_replay()). It may close the session
 * (closed_cb). Plaintext connections only. */
void pps_session_input(pps_session_t *session, const uint8_t *buf, size_t len);
pps_session_state_t pps_session_state(const pps_session_t *session);
/* How far its handshake got: 0 nothing received, 1 bytes received (a TLS
 * handshake or a HELLO under way), 2 HELLO in and waiting for AUTH,
 * 3 streaming. */
unsigned pps_session_progress(const pps_session_t *session);
int pps_session_fd(const pps_session_t *session);
/* Queues a window for this client (takes its own reference). */
void pps_session_push_window(pps_session_t *session, pps_window_t *window);
/* A queued open window got an ADU or closed: the writer runs again. */
void pps_session_window_grew(pps_session_t *session);
/* An audio frame, for a client that takes audio on this connection (copied;
 * a no-op for the others). */
void pps_session_push_audio(pps_session_t *session, const pps_wire_audio_frame_t *frame);
/* The same @window @delay_us from now (a later copy of the stream; its own
 * reference meanwhile); at once for <= 0. */
void pps_session_push_window_later(pps_session_t *session, pps_window_t *window, int64_t delay_us);
/* A copy at rest: the window's ids only (pps_sched_rest_window), after
 * whatever still waits for its spacing. */
void pps_session_rest_window(pps_session_t *session, pps_window_t *window);
/* The same @delay_us from now (a pool's later copy); at once for <= 0. */
void pps_session_push_audio_later(pps_session_t *session, const pps_wire_audio_frame_t *frame,
                                  int64_t delay_us);
/* How an audio-only connection of a pool stands, for the choice of the ones
 * that carry the next frame. */
typedef struct {
	size_t backlog_bytes;  /* not yet acknowledged (written or waiting to be); 0: idle */
	int64_t oldest_age_us; /* since the oldest unacknowledged frame was pushed */
	bool overdue;          /* that is more than a round trip ago: likely lost */
} pps_session_audio_state_t;
void pps_session_audio_state(const pps_session_t *session, int64_t now_us,
                             pps_session_audio_state_t *state);
/* The pool an audio-only session's HELLO named (PPS_WIRE_HELLO_AUDIO_POOL);
 * 0: none. */
uint32_t pps_session_audio_pool(const pps_session_t *session);
/* The connection carries the audio track only (HELLO's audio-only flag). */
bool pps_session_audio_only(const pps_session_t *session);
/* Its HELLO said it is one more copy of a stream the client views on another
 * connection (PPS_WIRE_HELLO_COPY): no path estimate for the encoder. */
bool pps_session_copy(const pps_session_t *session);
/* A copy whose HELLO says it reads a rested WINDOW_END
 * (PPS_WIRE_HELLO_COPY_REST). */
bool pps_session_copy_may_rest(const pps_session_t *session);
/* A copy whose last window was rested (pps_session_rest_window()): it
 * carries nothing now. */
bool pps_session_resting(const pps_session_t *session);
/* What its windows wait before they go to the scheduler (a copy's
 * spacing), as of the last window. */
int64_t pps_session_window_delay_us(const pps_session_t *session);
/* BYE with @reason and @text, then the session closes (closed_cb). A peer
 * that has sent nothing gets no BYE: it may not speak the wire (a browser's
 * spare connection), and it asked nothing. */
void pps_session_refuse(pps_session_t *session, pps_wire_bye_reason_t reason, const char *text);
/* Best-effort BYE written now (server shutdown), then the socket is shut. */
void pps_session_say_bye(pps_session_t *session, pps_wire_bye_reason_t reason, const char *text);
const char *pps_session_peer(const pps_session_t *session); /* "addr:port name" */
/* "addr:port" ("[v6]:port") alone, and the HELLO's name ("" without one;
 * printable ASCII, anything else '?'). */
const char *pps_session_address(const pps_session_t *session);
const char *pps_session_name(const pps_session_t *session);
/* When it was admitted (the session's clock, µs); 0 before. */
int64_t pps_session_joined_us(const pps_session_t *session);
unsigned pps_session_id(const pps_session_t *session);
/* The BYE reason this session refused its client with, or -1 (it left, or
 * its socket failed, or it is still open). */
int pps_session_bye_reason(const pps_session_t *session);
/* How long a streaming session's writer has taken no packet (µs, by the
 * session's clock); 0 before it streams. */
int64_t pps_session_stalled_us(const pps_session_t *session);
/* The first capture time of the oldest window this streaming video client
 * still has data of to send (pps_sched_unsent_since_us); INT64_MAX when
 * everything queued for it is sent, or it takes no windows. */
int64_t pps_session_unsent_since_us(const pps_session_t *session);
/* Applies the handshake timeout and the slow-client eviction at the session
 * clock's now; the session's own timers call it, tests call it after moving
 * their clock. It may close the session (closed_cb). */
void pps_session_check_timeouts(pps_session_t *session);
void pps_session_get_sched_stats(const pps_session_t *session, pps_sched_stats_t *stats);
/* Windows the regulator cut short to keep up (pps_sched_stats_t.windows_short)
 * for a reader that is still reading: cuts are counted once the client has
 * acknowledged more bytes than were acknowledged and in flight when a call
 * first saw them (data it took since), so a reader that
 * stopped (its windows are dropped until it is evicted) never counts. Returns
 * the cuts that became countable since the last call. */
uint64_t pps_session_take_cut_windows(pps_session_t *session);
/* A video client's start, as the closed loop's B-frames rule sees it: its
 * first windows leave at the encoder's first rates, before anything is known
 * of its path. The start is read once the client has acknowledged data for
 * PPS_SESSION_START_READ_US and PPS_SESSION_START_ROUND_TRIPS round trips:
 * clean (no retransmission, its path not shared) or lossy. A client that took
 * nothing for PPS_SESSION_START_MAX_US is over without a verdict. */
typedef enum {
	PPS_SESSION_START_OVER = 0, /* read before, audio only, or never read */
	PPS_SESSION_START_UNREAD,
	PPS_SESSION_START_CLEAN,
	PPS_SESSION_START_LOSSY,
} pps_session_start_t;
#define PPS_SESSION_START_READ_US     500000
#define PPS_SESSION_START_ROUND_TRIPS 4
#define PPS_SESSION_START_MAX_US      3000000
/* The start's verdict, once: UNREAD until there is one, CLEAN or LOSSY at
 * the call that reads it, OVER after. */
pps_session_start_t pps_session_take_start(pps_session_t *session);
/* Whether the path is shared with other flows (the latency cap stepped aside
 * for them) for a reader that is still reading: seen at this call and the
 * last one, with more bytes acknowledged than were acknowledged and in flight
 * at the last one. A reader that stops
 * looks the same to the cap (the round trip grows, nothing drains). */
bool pps_session_take_competing(pps_session_t *session);
int pps_session_get_transport_stats(const pps_session_t *session, pps_minbuf_stats_t *stats);
/* The client's path estimate (valid = false before it has one). */
void pps_session_get_path(const pps_session_t *session, pps_path_estimate_t *estimate);
/*
 * What the stream reaches through this client, for the rate allocator: its
 * own path (1 entry in @out), or for a relay whose PATH_REPORT is at most
 * PPS_SESSION_REPORT_FRESH_US old and names subscribers, its slowest and
 * fastest subscriber's path behind the relay's own (2 entries: each rate no
 * more than the relay's path takes, the round trips added). 0 before the
 * path has an estimate, and for a copy (pps_session_copy). *@subscribers: the viewers counted (1
 * for a viewer, the report's count for a relay).
 */
#define PPS_SESSION_REPORT_FRESH_US 3000000
size_t pps_session_path_span(const pps_session_t *session, pps_ratealloc_client_t out[2],
                             uint32_t *subscribers);
/* True once the client sent a PATH_REPORT: a relay, whose IDR requests are
 * its viewers' joins and losses, each already held to the relay's own
 * per-viewer bound. */
bool pps_session_is_relay(const pps_session_t *session);
/* The PATH_REPORT flags (PPS_WIRE_PATH_*) of every report since the last call;
 * *@start_read (may be NULL): a report since then no longer said STARTING
 * after one that did (the relay's new subscribers' starts were read). */
uint8_t pps_session_take_report_flags(pps_session_t *session, bool *start_read);

/* Writes one record to @fd right away, uncorked (refusals, shutdown). */
int pps_server_write_record_now(int fd, const pps_wire_record_t *record);

#endif /* PPS_SERVER_INTERNAL_H */
