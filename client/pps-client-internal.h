/* SPDX-License-Identifier: MIT */
/*
 * pps-client's objects, shared inside client/ and with its unit tests. Each
 * has its own state, a _new/_free pair and callbacks (user pointer last);
 * pps-client.c only reads the command line and connects them. Everything
 * runs on the main thread, which owns the libevent loop (and SDL, which wants
 * the main thread). Data flows one way:
 *
 *   connection  socket, HELLO, PING/PONG, BYE, handshake timeout, reconnect
 *      | record_cb (STREAM_INFO, window records)      \ PONG -> clock
 *      v                                                  (offset, RTT)
 *   receiver    reassembly (reasm) -> decode-order cursor -> codec decoder;
 *      |        every frame accounted once: frame_cb / missing_cb / window_cb
 *      v        (server capture times -> client clock through the clock)
 *   playout     policy (fixed / asap / adaptive) + bounded queue of decoded
 *      |        frames, each due at its own display time
 *      v
 *   display (SDL2 window), recorder (y4m, Matroska) and stats (status line, JSON Lines, summary)
 *
 * Times are CLOCK_REALTIME microseconds; objects that need "now" take it as
 * an argument or through a pps_client_clock_cb, so tests inject their own.
 */
#ifndef PPS_CLIENT_INTERNAL_H
#define PPS_CLIENT_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "pps-adu.h"
#include "pps-client-policy.h"
#include "pps-codec.h"
#include "pps-wire.h"

/* ---- reassembly: fragments -> whole ADUs of one window ------------------ */

/* A window can hold at most this much, whatever WINDOW_BEGIN claims. */
#define PPS_REASM_MAX_WINDOW_BYTES PPS_WIRE_MAX_WINDOW_BYTES
#define PPS_REASM_MAX_ADUS         1024

typedef struct pps_reasm pps_reasm_t;

typedef struct {
	uint32_t window_id;
	int64_t first_capture_us;
	int64_t deadline_us;
	unsigned frames;
	unsigned adus_total; /* from WINDOW_BEGIN */
	uint32_t bytes_total;
	unsigned adus_received;           /* whole ADUs */
	uint64_t bytes_received;          /* payload bytes, whole or not */
	unsigned adus_sent, adus_dropped; /* from WINDOW_END */
	bool dropped;                     /* the sender sent nothing */
	uint32_t first_adu_id; /* from WINDOW_BEGIN: ADU ids are first_adu_id .. + adus_total - 1 */
	bool begun;            /* WINDOW_BEGIN seen */
} pps_reasm_window_t;

/* @window_frames (W, from STREAM_INFO): fragments must belong to their window's frames. */
pps_reasm_t *pps_reasm_new(unsigned window_frames);
void pps_reasm_free(pps_reasm_t *reasm);

/*
 * Feeds one server record of a window (WINDOW_BEGIN, ADU_FRAGMENT,
 * WINDOW_END). Returns 0 (a WINDOW_END accepted completes its window:
 * pps_reasm_take() hands it out), or a negative errno with a one-line reason
 * in @err for a record that breaks the protocol (out of order, a fragment
 * that does not fit its ADU or window, limits exceeded).
 */
int pps_reasm_record(pps_reasm_t *reasm, const pps_wire_record_t *record, char *err,
                     size_t err_size);

/*
 * The completed window: its summary and its whole ADUs in decode order (the
 * caller owns the references and frees the array with free()).
 */
void pps_reasm_take(pps_reasm_t *reasm, pps_reasm_window_t *window, pps_adu_t ***adus,
                    size_t *n_adus);

/*
 * Hands out the whole ADU @id of the open window early, if it has arrived,
 * and NULL otherwise; pps_reasm_take() then leaves it out. ADU ids are
 * consecutive in decode order, so the client decodes an ADU as soon as it is
 * the next one in decode order, rather than at the window's end: the first
 * ADU of a window releases the frames libavcodec holds back for reordering.
 */
pps_adu_t *pps_reasm_take_next(pps_reasm_t *reasm, uint32_t id);

/* True while a window is open (between WINDOW_BEGIN and WINDOW_END). */
bool pps_reasm_in_window(const pps_reasm_t *reasm);
/* Last window id closed, -1 before the first. */
int64_t pps_reasm_last_window(const pps_reasm_t *reasm);

/* ---- clock -------------------------------------------------------------- */

/* Reads the client's clock (CLOCK_REALTIME microseconds in the program; a
 * test's own time in unit tests). */
typedef int64_t (*pps_client_clock_cb)(void *user);
/* CLOCK_REALTIME in microseconds (the program's pps_client_clock_cb). */
int64_t pps_client_realtime_us(void *unused);

/* The server's clock offset from PING/PONG samples (best round trip wins);
 * pps_clock_mode_t is in pps-client-policy.h. */
typedef struct pps_clock pps_clock_t;

/* NULL with errno set: EINVAL (mode out of range), ENOMEM. */
pps_clock_t *pps_clock_new(pps_clock_mode_t mode);
void pps_clock_free(pps_clock_t *clock);
/* A new connection: forget the offset. */
void pps_clock_reset(pps_clock_t *clock);
/* One PONG received at @now_us (client clock): 0, or -EINVAL for a sample that cannot be right. */
int pps_clock_pong(pps_clock_t *clock, const pps_wire_clock_pong_t *pong, int64_t now_us);
/* A server time (capture times) on the client's clock, per the mode. */
int64_t pps_clock_to_client(const pps_clock_t *clock, int64_t server_us);
bool pps_clock_have_offset(const pps_clock_t *clock);
int64_t pps_clock_offset_us(const pps_clock_t *clock);   /* server - client */
int64_t pps_clock_best_rtt_us(const pps_clock_t *clock); /* smallest round trip so far */
int64_t pps_clock_last_rtt_us(const pps_clock_t *clock);

/* ---- connection: socket, HELLO, PING, BYE, handshake timeout, reconnect --- */

struct event_base;
typedef struct pps_connection pps_connection_t;

typedef struct {
	const char *server; /* HOST:PORT (validated by the configuration) */
	const char *name;   /* sent in HELLO */
	size_t max_record_bytes;
	const char *access_token; /* proved by challenge-response, never sent; "" = none */
	int64_t ping_interval_us;
	int64_t handshake_timeout_us; /* connect to STREAM_INFO, else the connection fails */
	/* After STREAM_INFO: no record for this many windows of the stream (at
	 * least @data_timeout_min_us) fails the connection; 0 windows = never. */
	unsigned data_timeout_windows;
	int64_t data_timeout_min_us;
	bool reconnect;
	unsigned reconnect_attempts; /* connections in a row without a stream before giving up */
	pps_client_clock_cb clock_cb;
	/* client.tls, tls_ca, tls_server_name (common/pps-tls.h): TLS 1.3 with the
	 * server's certificate verified against @tls_ca ("" or NULL: the system's
	 * store) for @tls_server_name ("" or NULL: the host of @server). A CA file
	 * that cannot be loaded ends the connection at once (no reconnect). */
	bool tls;
	const char *tls_ca;
	const char *tls_server_name;
	/* More HELLO flags: PPS_WIRE_HELLO_AUDIO (play the audio track),
	 * PPS_WIRE_HELLO_AUDIO_ONLY (the audio connection). */
	uint16_t hello_flags;
	/* An audio-only connection of a pool: the HELLO names it
	 * (PPS_WIRE_HELLO_AUDIO_POOL); 0: none. */
	uint32_t audio_pool;
} pps_connection_params_t;

typedef struct {
	const char *why;     /* one line, for the user */
	bool failure;        /* not a clean end (BYE normal after a stream) */
	bool had_stream;     /* this connection got STREAM_INFO */
	bool gave_up;        /* reconnect: out of attempts */
	int64_t retry_in_us; /* > 0: it reconnects by itself after this long */
	/* The server's BYE reason (pps_wire_bye_reason_t) when its BYE ended the
	 * connection, -1 otherwise: a viewer tells a relay's "no-stream" or an
	 * "unauthorized" from a network failure without parsing @why. */
	int bye_reason;
} pps_connection_end_t;

/* Called on the loop's thread. */
typedef struct {
	/* A record other than BYE (which the connection handles). 0, or a
	 * negative errno and a reason in @err: the connection then sends BYE
	 * protocol-error and ends. */
	int (*record_cb)(const pps_wire_record_t *record, char *err, size_t err_size, void *user);
	void (*bytes_cb)(size_t bytes, void *user); /* optional */
	/* The connection ended (never after pps_connection_stop()). */
	void (*closed_cb)(const pps_connection_end_t *end, void *user);
} pps_connection_callbacks_t;

pps_connection_t *pps_connection_new(struct event_base *base, const pps_connection_params_t *params,
                                     const pps_connection_callbacks_t *callbacks, void *user);
void pps_connection_free(pps_connection_t *connection);
/* Connects (and, with reconnect, keeps connecting). */
void pps_connection_start(pps_connection_t *connection);
/* STREAM_INFO was accepted: the handshake is done, clock pings start, and
 * the data timeout (params.data_timeout_windows windows of @window_us, the
 * stream's window length in microseconds, at least data_timeout_min_us)
 * runs from now, pushed back by every read that brings a record. */
void pps_connection_stream_started(pps_connection_t *connection, int64_t window_us);
/* The data timeout a stream of @window_us windows gets from @params: 0 for none. */
int64_t pps_connection_data_timeout_us(const pps_connection_params_t *params, int64_t window_us);
/* Ends the connection for a protocol error (@why is sent in BYE and reported). */
void pps_connection_fail(pps_connection_t *connection, const char *why);
/* Says BYE and closes; no more callbacks. */
void pps_connection_stop(pps_connection_t *connection);
int pps_connection_send(pps_connection_t *connection, const pps_wire_record_t *record);
/* Copies server text for a terminal: bytes outside printable ASCII become '?'. */
void pps_connection_sanitize(char *dst, size_t dst_size, const char *src, size_t src_len);

/* ---- receiver: window records -> reassembly -> decoder -> frames ---------- */

/* Why a frame was not shown (the "reason" of frame events). */
#define PPS_FRAME_LATE        "late"        /* decoded after its display time */
#define PPS_FRAME_UNDECODABLE "undecodable" /* came, but a dependency did not */
#define PPS_FRAME_DROPPED     "dropped"     /* its window was dropped by the sender */
#define PPS_FRAME_LOST        "lost"        /* its window came without it */
#define PPS_FRAME_OVERFLOW    "overflow"    /* pushed out of the full playout queue */
#define PPS_FRAME_STOPPED     "stopped"     /* waiting for its display time at exit */

/* Window statuses (the "status" of window events). */
#define PPS_WINDOW_COMPLETE "complete"
#define PPS_WINDOW_PARTIAL  "partial"
#define PPS_WINDOW_DROPPED  "dropped"
#define PPS_WINDOW_LATE     "late"
#define PPS_WINDOW_JOIN     "join" /* in flight when the client joined: not counted */

/* STREAM_INFO limits: a stream beyond them is refused before anything is sized from it. */
#define PPS_RECEIVER_MAX_SIDE   4096u
#define PPS_RECEIVER_MAX_PIXELS (3840u * 2160u)
#define PPS_RECEIVER_MAX_FPS    240u
/* A gap in window ids may be at most this plus twice the windows the time since the
 * previous window could hold; larger is a protocol error. */
#define PPS_RECEIVER_GAP_MARGIN_WINDOWS 64u
/* Windows may arrive at most PPS_RECEIVER_RATE_FACTOR times the rate STREAM_INFO
 * announces, after a catch-up of PPS_RECEIVER_CATCH_UP_S seconds of windows
 * plus twice the gap margin at once; faster is a protocol error. A catch-up
 * after a stall delivers at most what the server captured meanwhile: its
 * queue (pps.max_windows, 64) and what the sockets held, and the server
 * evicts a client that takes nothing for server.evict_after_s (10 s). */
#define PPS_RECEIVER_RATE_FACTOR 4u
#define PPS_RECEIVER_CATCH_UP_S  16u

typedef struct pps_receiver pps_receiver_t;

typedef struct {
	const pps_decoded_frame_t *decoded; /* borrowed for the call; has a picture */
	int64_t received_us;                /* client clock: its last ADU reached the decoder */
	int64_t decoded_us;                 /* client clock: the decoder output it */
} pps_receiver_frame_t;

typedef struct {
	int64_t first_frame;
	uint64_t count;
	int64_t first_capture_us;  /* server clock, estimated; 0 if unknown */
	int64_t frame_interval_us; /* capture time of frame i: first_capture_us + i * this */
	const char *reason;        /* PPS_FRAME_DROPPED, _LOST or _UNDECODABLE */
} pps_receiver_missing_t;

typedef struct {
	uint32_t window_id;
	uint64_t windows;         /* 1, or a gap: windows window_id .. + windows - 1 */
	bool gap;                 /* discarded by the sender with their WINDOW_END */
	int64_t first_capture_us; /* server clock (estimated if the window never began) */
	int64_t complete_us;      /* client clock of its WINDOW_END; 0 if dropped */
	const char *status;       /* PPS_WINDOW_* (never _LATE: the playout decides that) */
	unsigned adus_received, adus_sent, adus_total;
	uint64_t bytes;
} pps_receiver_window_t;

/* What the receiver emits, on the caller's thread, inside pps_receiver_record()
 * and pps_receiver_finish(). Frame indexes passed to frame_cb and missing_cb
 * never repeat and leave no hole: every frame of the stream from the first
 * window the client saw begin is reported exactly once. */
typedef struct {
	void (*frame_cb)(const pps_receiver_frame_t *frame, void *user);
	void (*missing_cb)(const pps_receiver_missing_t *missing, void *user);
	void (*window_cb)(const pps_receiver_window_t *window, void *user);
} pps_receiver_callbacks_t;

typedef struct {
	uint64_t frames_duplicate; /* output by the decoder after being accounted */
	uint64_t decode_errors;    /* libavcodec refused an ADU */
	uint64_t adus_decoded;     /* given to the decoder (each ADU id once) */
} pps_receiver_stats_t;

/* Connections a stream may arrive on at once: its own and its copies. */
#define PPS_RECEIVER_MAX_COPIES 4

/* All callbacks required. @clock_cb stamps received/decoded times. NULL + errno. */
pps_receiver_t *pps_receiver_new(const pps_receiver_callbacks_t *callbacks,
                                 pps_client_clock_cb clock_cb, void *user);
void pps_receiver_free(pps_receiver_t *receiver);
/* Validates STREAM_INFO (limits above) and creates the decoder: 0, or -EPROTO/-EIO with @err. */
int pps_receiver_stream_info(pps_receiver_t *receiver, const pps_wire_stream_info_t *info,
                             char *err, size_t err_size);
/* NULL before STREAM_INFO. */
const pps_wire_stream_info_t *pps_receiver_info(const pps_receiver_t *receiver);
/* A window record (WINDOW_BEGIN, ADU_FRAGMENT, WINDOW_END): 0, or -EPROTO with @err
 * (also for windows faster than PPS_RECEIVER_RATE_FACTOR allows). */
int pps_receiver_record(pps_receiver_t *receiver, const pps_wire_record_t *record, char *err,
                        size_t err_size);
/*
 * The same from copy @copy of the stream (1 .. PPS_RECEIVER_MAX_COPIES - 1; 0 is
 * pps_receiver_record): another connection of this client to the same stream,
 * whose windows carry the same ids and ADUs. Each copy is reassembled on its
 * own; each ADU is decoded from the first copy that has it whole, each window
 * closed by the first copy that ends it, and what the others bring later is
 * dropped. A window one copy's sender dropped whole is dropped only once every
 * copy still streaming has closed it too (each viewer has its own regulator).
 * A loss then holds up only the connection it happened on. A copy's protocol
 * error returns as the stream's would; the caller closes that copy and calls
 * pps_receiver_drop_copy().
 */
int pps_receiver_record_copy(pps_receiver_t *receiver, unsigned copy,
                             const pps_wire_record_t *record, char *err, size_t err_size);
/* Copy @copy has ended: forget its half-received window. */
void pps_receiver_drop_copy(pps_receiver_t *receiver, unsigned copy);
/* End of the stream: the decoder outputs every frame it still holds. */
void pps_receiver_finish(pps_receiver_t *receiver);
void pps_receiver_get_stats(const pps_receiver_t *receiver, pps_receiver_stats_t *out);
/* A new connection: forget the stream (the next one starts with STREAM_INFO). */
void pps_receiver_reset(pps_receiver_t *receiver);

/* ---- playout policies (pure; the caller passes times) ------------------- */

/* pps_playout_policy_t and its names are in pps-client-policy.h. */

typedef struct pps_playout pps_playout_t;

/* The queue holds at most this many decoded frames and bytes of pictures;
 * past either the oldest frame is discarded (PPS_FRAME_OVERFLOW). */
#define PPS_PLAYOUT_MAX_FRAMES 48
#define PPS_PLAYOUT_MAX_BYTES  (256u << 20)
/* Adaptive policy: time constant of its delay estimate. */
#define PPS_PLAYOUT_SETTLE_MS 1000.0
/* Smooth policy: the delay is this quantile of the window delays of the last
 * PPS_PLAYOUT_SMOOTH_HORIZON_MS (at most PPS_PLAYOUT_SMOOTH_WINDOWS windows),
 * plus a decode margin; it rises at once and falls by 1/PPS_PLAYOUT_SMOOTH_FALL
 * of the excess per window. */
#define PPS_PLAYOUT_SMOOTH_PERCENTILE 90
#define PPS_PLAYOUT_SMOOTH_HORIZON_MS 2000
#define PPS_PLAYOUT_SMOOTH_WINDOWS    128
#define PPS_PLAYOUT_SMOOTH_FALL       8

/* A decoded frame waiting for its display time. Times: client clock, microseconds. */
typedef struct {
	uint32_t window, frame;
	int64_t capture_us;
	int64_t received_us, decoded_us;
	unsigned temporal_layers, quality_layers; /* counted from 1 */
} pps_playout_frame_t;

/* A queued frame that will not be shown: PPS_FRAME_OVERFLOW or PPS_FRAME_STOPPED. */
typedef void (*pps_playout_discard_cb)(const pps_playout_frame_t *frame, const char *reason,
                                       void *user);

/* @tolerance_us: the fixed policy's delay; 0 = from the stream (pps_playout_stream_delay_us).
 * @discard_cb may be NULL. NULL with errno set: EINVAL (policy out of range,
 * negative tolerance), ENOMEM. */
pps_playout_t *pps_playout_new(pps_playout_policy_t policy, int64_t tolerance_us,
                               pps_playout_discard_cb discard_cb, void *user);
void pps_playout_free(pps_playout_t *playout);

/* What the stream allows: the server's latency budget and the window's duration. */
void pps_playout_set_stream(pps_playout_t *playout, int64_t latency_budget_us, int64_t window_us);
/* The best (smallest) round-trip time measured to the server. */
void pps_playout_set_rtt(pps_playout_t *playout, int64_t rtt_us);
/* The delay the stream can meet: tolerance if set, else budget + RTT + a decode margin. */
int64_t pps_playout_stream_delay_us(const pps_playout_t *playout);

/*
 * A window arrived: @delay_us is (arrival of its last byte) - (capture of its
 * first frame). The adaptive policy updates its estimate here, at window
 * boundaries only.
 */
void pps_playout_window(pps_playout_t *playout, int64_t delay_us);

/* Display time of a frame captured at @capture_us that is ready at @now_us. */
int64_t pps_playout_display_time(const pps_playout_t *playout, int64_t capture_us, int64_t now_us);

/*
 * Queues a copy of @picture for its display time: 0, -ETIME if that time has
 * passed (the frame is late; nothing queued), -ENOMEM. The smooth and asap
 * policies never return -ETIME: a frame past its time is shown at once.
 */
int pps_playout_push(pps_playout_t *playout, const pps_frame_t *picture,
                     const pps_playout_frame_t *meta, int64_t now_us);
/* Display time of the next queued frame; INT64_MAX if none. */
int64_t pps_playout_next_due_us(const pps_playout_t *playout);
/* The next frame if it is due at @now_us (the caller owns and frees it), else NULL. */
pps_frame_t *pps_playout_pop_due(pps_playout_t *playout, int64_t now_us, pps_playout_frame_t *meta);
/* Discards every queued frame (PPS_FRAME_STOPPED): at exit or a new connection. */
void pps_playout_flush(pps_playout_t *playout);

/* Current playout delay (capture to display), for logs. */
int64_t pps_playout_delay_us(const pps_playout_t *playout);
/* Whether a frame past its display time is dropped (fixed, adaptive) rather
 * than shown at once (asap, smooth). */
bool pps_playout_drops_late(const pps_playout_t *playout);
/* "normal" or "spike" (adaptive only). */
const char *pps_playout_mode(const pps_playout_t *playout);

/* ---- the peer log: rate-limited lines a server can cause ------------------ */

/*
 * Lines a server's behaviour causes (errors, warnings, events per record it
 * sends) go through one of these: at most @burst in an interval of
 * @interval_us; the lines held back are counted, and the count is written as
 * a line of its own when the next interval lets a line through, or by
 * pps_peer_log_flush(). Called on the loop's thread.
 */
typedef struct pps_peer_log pps_peer_log_t;

typedef enum {
	PPS_PEER_LOG_TEXT, /* "pps-client: N more messages caused by the server not shown ..." */
	PPS_PEER_LOG_JSON, /* {"type":"log_suppressed","lines":N} */
} pps_peer_log_format_t;

/* pps-client's stderr: a reconnect loop with a server that refuses says 10
 * lines in 10 s at most (a connection brings two). */
#define PPS_PEER_LOG_TEXT_BURST       10u
#define PPS_PEER_LOG_TEXT_INTERVAL_US 10000000
/* The JSON Lines log's other events (pps_stats_event()): 400 in 2 s, far
 * above the clock's and the audio's own rates (one per PING, one per 20 ms
 * frame and connection). */
#define PPS_PEER_LOG_JSON_BURST       400u
#define PPS_PEER_LOG_JSON_INTERVAL_US 2000000

/* @out may be NULL (nothing is written). NULL with errno: EINVAL (a zero
 * limit, a format out of range), ENOMEM. @out stays the caller's. */
pps_peer_log_t *pps_peer_log_new(FILE *out, pps_peer_log_format_t format, unsigned burst,
                                 int64_t interval_us);
void pps_peer_log_free(pps_peer_log_t *peer_log);
/* Whether one line may be written at @now_us (client clock); when a new
 * interval begins, the count of the lines held back is written first. */
bool pps_peer_log_allow(pps_peer_log_t *peer_log, int64_t now_us);
/* One line (its newline included in @format), if the limit allows it. */
void pps_peer_log_printf(pps_peer_log_t *peer_log, int64_t now_us, const char *format, ...)
    __attribute__((format(printf, 3, 4)));
/* Writes the count of the lines held back since the last line, if any (at exit). */
void pps_peer_log_flush(pps_peer_log_t *peer_log);
/* Lines held back so far, in all. */
uint64_t pps_peer_log_suppressed(const pps_peer_log_t *peer_log);

/* ---- statistics, JSON Lines log, summary -------------------------------- */

typedef struct pps_stats pps_stats_t;

pps_stats_t *pps_stats_new(FILE *log /* may be NULL */, double fps);
void pps_stats_free(pps_stats_t *stats);

typedef struct {
	uint32_t window;
	uint32_t frame;
	int64_t capture_us;
	int64_t display_us; /* 0 if not shown */
	unsigned temporal_layers;
	unsigned quality_layers;
	bool shown;
	const char *reason;  /* why not shown (PPS_FRAME_*); NULL if shown */
	int64_t received_us; /* client clock, 0 if unknown: its data reached the decoder */
	int64_t decoded_us;  /* client clock, 0 if unknown: the decoder output it */
} pps_stats_frame_t;

/* Accounts one frame (shown, or not with a reason) and logs it. */
void pps_stats_frame(pps_stats_t *stats, const pps_stats_frame_t *frame);
/* Accounts @count frames from @first_frame not shown for @reason; logged one
 * event each for short runs, one "frames_missing" event for long ones.
 * @first_capture_us: client clock, 0 if unknown. */
void pps_stats_missing(pps_stats_t *stats, uint32_t window_frames, int64_t first_frame,
                       uint64_t count, int64_t first_capture_us, int64_t frame_interval_us,
                       const char *reason);

typedef struct {
	uint32_t window;
	uint64_t windows; /* 0 or 1: one window; more: a gap of discarded windows */
	int64_t first_capture_us;
	int64_t complete_us; /* arrival of the window's last byte; 0 if nothing arrived */
	const char *status;  /* PPS_WINDOW_* */
	unsigned adus_received, adus_sent, adus_total;
	uint64_t bytes;
} pps_stats_window_t;

/* The log record of a receiver's window report, field for field (times as
 * the receiver gives them: the player moves first_capture_us to its clock). */
void pps_stats_window_from_receiver(const pps_receiver_window_t *window, pps_stats_window_t *out);
void pps_stats_window(pps_stats_t *stats, const pps_stats_window_t *window);
void pps_stats_bytes(pps_stats_t *stats, size_t bytes, int64_t now_us);
/* Any other event: a JSON object body without braces, e.g. "\"type\":\"clock\",...".
 * These follow what the server sends (a PONG, an audio frame, a connection
 * ending), so they go through a peer log (PPS_PEER_LOG_JSON_*): past its
 * limit they are counted, and the count is logged. */
void pps_stats_event(pps_stats_t *stats, const char *json_fields);
/* @text (NULL: "") as the inside of a JSON string for pps_stats_event's
 * fields (a server's BYE text may hold quotes), whole characters only, cut
 * to fit @size. */
void pps_stats_json_text(char *dst, size_t size, const char *text);

typedef struct {
	uint64_t windows_total, windows_transmitted, windows_dropped, windows_late;
	double within_pct[6]; /* of transmitted windows within 100,160,200,300,500,1000 ms */
	uint64_t frames_total, frames_shown;
	double frames_shown_pct, dropped_windows_pct;
	double frame_latency_p50_ms, frame_latency_p95_ms, frame_latency_p99_ms;
	double window_latency_p50_ms, window_latency_p95_ms;
	double signal_delay_p95_ms;
	double bits_per_second;
	double seconds;
	/* why frames were not shown; frames_total = shown + all of these */
	uint64_t frames_late, frames_undecodable, frames_dropped, frames_lost, frames_overflow,
	    frames_other;
	uint64_t windows_join; /* in flight at join: neither sent nor dropped */
	/* freezes: gaps between shown frames */
	uint64_t freezes;         /* gaps > 100 ms */
	double freeze_longest_ms; /* longest gap between two shown frames */
	double frozen_total_ms;   /* sum of the gaps > 100 ms */
	/* from the client's start to its first picture shown (connect, join,
	 * the first IDR, decoding); < 0 = none shown */
	double first_picture_ms;
	/* per shown frame, client side: capture->received, received->decoded,
	 * decoded->displayed (the server's encode and send times are not on the wire) */
	double stage_p50_ms[3], stage_p95_ms[3];
	/* The audio track (has_audio: a slot was played). Ratios of the slots
	 * (20 ms each by default) the track's time span held; mouth-to-ear:
	 * capture of a frame's first sample to its output; A/V skew: at each
	 * video frame shown, its latency minus the audio's (> 0: audio ahead). */
	bool has_audio;
	uint64_t audio_slots, audio_played, audio_recovered, audio_concealed, audio_late,
	    audio_skipped;
	double audio_played_pct, audio_late_pct, audio_concealed_pct;
	double mouth_to_ear_p50_ms, mouth_to_ear_p95_ms, mouth_to_ear_p99_ms;
	double audio_delay_mean_ms, audio_delay_std_ms;
	double av_skew_p50_ms, av_skew_abs_p95_ms;
} pps_stats_summary_t;

extern const int pps_stats_tolerances_ms[6];

void pps_stats_summarize(pps_stats_t *stats, pps_stats_summary_t *out);
/* Writes the summary as a JSON Lines event and as a table on @table. */
void pps_stats_write_summary(pps_stats_t *stats, const pps_stats_summary_t *s, FILE *table);
/* Writes the summary as one JSON object (--stats-json); 0 or a negative errno. */
int pps_stats_write_json(const pps_stats_t *stats, const pps_stats_summary_t *s, FILE *out);

/* What the log's start record and the summaries' "start" say (docs/JSON.md). */
typedef struct {
	const char *program; /* "pps-client", "ppssrc" */
	const char *server;  /* HOST:PORT as asked for */
	const char *policy;  /* the playout policy's name */
} pps_stats_start_t;
/* The log's start record (the version and the time now); its fields (the
 * strings copied, bounded) are kept for the summaries. Once, first. */
void pps_stats_start(pps_stats_t *stats, const pps_stats_start_t *start);
/* A connection's STREAM_INFO: a "stream" record, and the summaries' start.stream. */
void pps_stats_stream(pps_stats_t *stats, const pps_wire_stream_info_t *info);

/* What the client's other objects add to an interval record (NAN: unknown). */
typedef struct {
	double clock_offset_ms;      /* server clock - client clock */
	double clock_uncertainty_ms; /* half the best round trip */
	double playout_delay_ms;     /* the playout's target delay (not for asap) */
} pps_stats_interval_extra_t;
/* One "interval" record in the log: the figures since the previous one (or
 * the start record). Bounded: the latency percentiles are over the frames
 * sampled in the interval. Nothing without a log. */
void pps_stats_write_interval(pps_stats_t *stats, int64_t now_us,
                              const pps_stats_interval_extra_t *extra);

/* Rolling figures for the status line, since the previous call. */
typedef struct {
	double latency_p50_ms, latency_p95_ms;
	double fps_shown;
	double bits_per_second;
	unsigned max_temporal_layers, max_quality_layers;
	uint64_t windows_late, windows_dropped;    /* so far */
	double freeze_longest_ms, frozen_total_ms; /* so far */
	/* audio since the previous call: slots, of which played, and mouth-to-ear p95 */
	uint64_t audio_slots, audio_played;
	double mouth_to_ear_p95_ms;
} pps_stats_rolling_t;
void pps_stats_rolling(pps_stats_t *stats, int64_t now_us, pps_stats_rolling_t *out);
/* "layers t3 q2" of @r: the most temporal and quality layers among the frames
 * shown in its second, as the status line and the overlay both say it. */
void pps_stats_layers_text(const pps_stats_rolling_t *r, char *buf, size_t size);
/* The SDL overlay's line: @latency_ms of the picture shown (its own), then
 * the layers, frame rate and bit rate of @r (the status line's figures):
 * "  46 ms  layers t3 q2  30.0 fps  0.32 Mbit/s". */
void pps_stats_overlay_text(const pps_stats_rolling_t *r, double latency_ms, char *buf,
                            size_t size);

/* Audio: one played slot of the audio track (pps-audio-player.c). Times:
 * client clock. */
typedef struct {
	uint32_t seq;
	int64_t capture_us; /* its first sample's capture */
	int64_t ear_us; /* its first sample reaches the output: mouth-to-ear is the difference */
	int64_t playout_delay_us; /* the jitter buffer's delay for it (capture to slot) */
	const char *how;          /* PPS_AUDIO_PLAYED, _RECOVERED, _CONCEALED */
} pps_stats_audio_t;

#define PPS_AUDIO_PLAYED    "played"    /* the frame, on time */
#define PPS_AUDIO_RECOVERED "recovered" /* from the next frame's in-band FEC */
#define PPS_AUDIO_CONCEALED "concealed" /* the decoder's loss concealment */

/* Accounts one played audio slot (and logs it, one "audio" event). */
void pps_stats_audio(pps_stats_t *stats, const pps_stats_audio_t *slot);
/* A frame that arrived after its slot (it was concealed or recovered). */
void pps_stats_audio_late(pps_stats_t *stats, uint32_t seq);
/* A frame skipped to shorten the playout delay. */
void pps_stats_audio_skipped(pps_stats_t *stats, uint32_t seq);
/* The video's recent latency (capture to display), the @percentile (1 ..
 * 100) of the last frames shown; 0 when none was shown lately. For lip sync. */
int64_t pps_stats_video_latency_recent_us(const pps_stats_t *stats, int64_t now_us,
                                          double percentile);

/* ---- display ------------------------------------------------------------ */

typedef struct pps_display pps_display_t;

/* pps_display_mode_t and its names are in pps-client-policy.h. */

/*
 * Opens the display (@mode; auto = SDL if a display is available). NULL with
 * @err and errno set on failure: EINVAL (mode out of range), ENOMEM, or
 * ENODEV (mode sdl and no window can be opened).
 */
pps_display_t *pps_display_new(pps_display_mode_t mode, char *err, size_t err_size);
void pps_display_free(pps_display_t *display);
bool pps_display_has_window(const pps_display_t *display);
/* Shows one frame with an overlay line (nothing without a window). */
int pps_display_show(pps_display_t *display, const pps_frame_t *picture, const char *overlay);
/* Handles window events; returns true if the user closed the window. */
bool pps_display_poll_quit(pps_display_t *display);

/* Draws @text (digits, letters, a few symbols) into an I420 picture's luma. */
void pps_overlay_draw(pps_frame_t *picture, int x, int y, int scale, const char *text);

/* ---- recorder: the pictures shown, in real time -------------------------- */

/*
 * The file --output names (pps-recorder.c explains the formats): a name
 * ending in .mkv is Matroska through GStreamer's matroskamux, rawvideo I420
 * with each picture's display time (.nut is refused); anything else is y4m ("-":
 * stdout), a picture per slot of the stream's frame rate, the picture on
 * screen repeated through a freeze ("FRAME Xrepeat"). Either lasts as long
 * as the run, first picture shown to last, within one frame time. One
 * picture size per file. Loop thread only.
 */
typedef struct pps_recorder pps_recorder_t;

typedef struct {
	uint64_t frames_shown;    /* pictures given to pps_recorder_frame() */
	uint64_t frames_written;  /* pictures in the file, repeats included */
	uint64_t frames_repeated; /* y4m: repeats that fill freezes */
	uint64_t frames_replaced; /* y4m: shown less than a frame time, not kept */
	int64_t duration_us;      /* the file's length */
} pps_recorder_summary_t;

/* Opens @path now (an unwritable one fails here): NULL with errno and @err. */
pps_recorder_t *pps_recorder_new(const char *path, char *err, size_t err_size);
/* y4m only: each picture shown once, in the order shown, with no time grid
 * (no repeats, none left out; the file's length is then the pictures', not
 * the run's). The network lab counts every receiver's pictures this way. */
void pps_recorder_keep_every(pps_recorder_t *recorder);
/*
 * One picture shown at @shown_us (client clock, microseconds, increasing),
 * borrowed for the call; the first sets the size and the frame rate
 * (@fps_num / @fps_den, the stream's). 0, or a negative errno with @err:
 * -EINVAL for a picture of another size; for a write -EIO (y4m), or
 * pps_matroska_writer_i420()'s errors (-ENOSPC, -EIO, -ENOBUFS when the disk
 * does not keep up), a failed write said at the call after it.
 */
int pps_recorder_frame(pps_recorder_t *recorder, const pps_frame_t *picture, int64_t shown_us,
                       unsigned fps_num, unsigned fps_den, char *err, size_t err_size);
/* Writes what is held and closes the file: 0 or a negative errno with @err.
 * @summary (may be NULL) gets the counts. Once, before free. */
int pps_recorder_finish(pps_recorder_t *recorder, pps_recorder_summary_t *summary, char *err,
                        size_t err_size);
void pps_recorder_free(pps_recorder_t *recorder);

/* ---- audio player: AUDIO_FRAME -> jitter buffer -> Opus -> output --------- */

typedef struct pps_audio_player pps_audio_player_t;

typedef struct {
	pps_audio_output_t output;
	const char *wav_path; /* write what is played to this WAV file; "" or NULL: none */
	/* Lip sync: the playout delay is kept no shorter than the video's recent
	 * latency (its PPS_AUDIO_SYNC_PERCENTILE) minus sync_lead_us (audio at
	 * most that much ahead of the picture), changed at talkspurt starts like
	 * any delay change. */
	bool lip_sync;
	int64_t sync_lead_us;
	int64_t min_delay_us, max_delay_us; /* bounds of the playout delay */
	/* The playout delay's target: the quantile (0 < q < 1) of the last
	 * 10 s of arrival delays (pps_jitter_params_t's target_quantile); 0:
	 * the delay estimate + 4 x its variation. */
	double playout_quantile;
	/* The playout delay grows only when its target is this much above it,
	 * unless the arrivals ask for more (pps_jitter_params_t's
	 * hysteresis_us); under a quarter frame: a quarter frame. */
	int64_t hysteresis_us;
	/* Audio connections opened when the server sends audio on connections
	 * of its own (1..PPS_AUDIO_MAX_CONNECTIONS; 0: PPS_AUDIO_POOL_CONNECTIONS
	 * for a pool, else PPS_AUDIO_COPY_CONNECTIONS); the first copy of a
	 * frame counts. */
	unsigned connections;
	/* Whether they form a pool when the server offers one (STREAM_INFO's
	 * audio_copies): PPS_AUDIO_POOL_AUTO (only with lip_sync off), _ON, _OFF
	 * (each connection then carries every frame). */
	int pool;
} pps_audio_params_t;

#define PPS_AUDIO_POOL_AUTO 0
#define PPS_AUDIO_POOL_ON   1
#define PPS_AUDIO_POOL_OFF  2

#define PPS_AUDIO_MAX_CONNECTIONS 12
/* Audio connections opened by default: a pool (the server sends each frame
 * on a few of them, STREAM_INFO's audio_copies), or each carrying every
 * frame (a server without pools, which admits three per client). */
#define PPS_AUDIO_POOL_CONNECTIONS     12
#define PPS_AUDIO_COPY_CONNECTIONS     2
#define PPS_AUDIO_COPY_CONNECTIONS_MAX 3

/* Audio may lead the picture by this much by default ([audio] sync_lead_ms;
 * ITU-R BT.1359 detects 45 ms). */
#define PPS_AUDIO_SYNC_LEAD_US 30000
/*
 * The picture's latency that audio waits for: the median of the last frames
 * shown. A higher percentile follows the picture's spikes, and the floor it
 * sets is applied at the next pause and held while the spike stays in the
 * window: the audio then plays later than the picture, which is back (more
 * than the 125 ms BT.1359 detects), and its delay carries the picture's tail.
 */
#define PPS_AUDIO_SYNC_PERCENTILE 50.0

/* What the audio player emits, on the loop's thread. */
typedef struct {
	/* One slot's samples as they go to the output (mono S16, 48 kHz),
	 * @play_us its first sample's output time (client clock); optional
	 * (the GStreamer source's audio pad). */
	void (*pcm_cb)(const int16_t *pcm, int samples, int64_t play_us, void *user);
} pps_audio_callbacks_t;

/* NULL with errno and a reason in @err: EINVAL, ENOMEM, ENODEV (output sdl
 * and no device), the WAV file's open error. @clock and @stats are the
 * player's, borrowed. */
pps_audio_player_t *pps_audio_player_new(struct event_base *base, const pps_audio_params_t *params,
                                         const pps_clock_t *clock, pps_stats_t *stats,
                                         const pps_audio_callbacks_t *callbacks, void *user,
                                         char *err, size_t err_size);
void pps_audio_player_free(pps_audio_player_t *audio);
/* The track STREAM_INFO announced: 0, or -EPROTO/-ENOMEM with @err. */
int pps_audio_player_stream(pps_audio_player_t *audio, const pps_wire_stream_info_t *info,
                            char *err, size_t err_size);
/* One AUDIO_FRAME received at @now_us (client clock) on connection @conn
 * (0: the video's; 1..: the audio connections, for the log). Never fails the
 * stream: a frame the buffer refuses is counted. */
void pps_audio_player_frame(pps_audio_player_t *audio, const pps_wire_audio_frame_t *frame,
                            int64_t now_us, unsigned conn);
/* A new connection: forget the track (the next STREAM_INFO starts it again). */
void pps_audio_player_reset(pps_audio_player_t *audio);
/* What the output says (one line): "SDL audio (pulseaudio)", "none". */
const char *pps_audio_player_output(const pps_audio_player_t *audio);

/* ---- player: the objects above wired into one stream --------------------- */

/*
 * connection -> receiver -> playout -> show_cb, with the clock and the stats,
 * on the caller's event loop (pps-client and the GStreamer source both play
 * through it). Every frame is accounted once in the stats, as docs/DESIGN.md tells.
 */
typedef struct pps_player pps_player_t;

typedef struct {
	pps_connection_params_t connection;
	pps_clock_mode_t clock_mode;
	pps_playout_policy_t policy;
	int64_t tolerance_us; /* fixed policy; 0 = from the stream */
	FILE *log;            /* JSON Lines; may be NULL; the caller closes it after free */
	const char *program;  /* for the log's start record; NULL: "pps_player" */
	/* Connections the stream's windows arrive on, 1..PPS_RECEIVER_MAX_COPIES
	 * (0 counts as 1): more are copies (pps_receiver_record_copy). */
	unsigned copies;
	/* The audio track: asked for (HELLO), played and measured. */
	bool audio;
	pps_audio_params_t audio_params;
	/* Audio samples as they are played (see pps_audio_callbacks_t); optional. */
	void (*audio_pcm_cb)(const int16_t *pcm, int samples, int64_t play_us, void *user);
} pps_player_params_t;

/* Called on the loop's thread. */
typedef struct {
	/* STREAM_INFO was accepted (once per connection); optional. */
	void (*stream_cb)(const pps_wire_stream_info_t *info, void *user);
	/* A frame is due at @display_us (client clock, now): show it. @picture
	 * is borrowed for the call. false: it could not be taken (a full
	 * output queue) and is accounted as PPS_FRAME_OVERFLOW. */
	bool (*show_cb)(const pps_frame_t *picture, const pps_playout_frame_t *meta,
	                int64_t display_us, void *user);
	/* The connection ended. With end->retry_in_us > 0 the player has
	 * reset the stream and reconnects by itself; otherwise it is over. */
	void (*closed_cb)(const pps_connection_end_t *end, void *user);
} pps_player_callbacks_t;

/* show_cb and closed_cb required. NULL with errno set: EINVAL (an argument
 * missing or out of range, as its part reports it), ENOMEM. */
pps_player_t *pps_player_new(struct event_base *base, const pps_player_params_t *params,
                             const pps_player_callbacks_t *callbacks, void *user);
/* After pps_player_stop() (or before start). */
void pps_player_free(pps_player_t *player);
/* Connects (and, with reconnect, keeps connecting). */
void pps_player_start(pps_player_t *player);
/* Says BYE; the decoder's last frames are accounted, frames waiting for their
 * display time are logged PPS_FRAME_STOPPED. No callback after. Idempotent. */
void pps_player_stop(pps_player_t *player);
bool pps_player_ever_streamed(const pps_player_t *player);
/* NULL before STREAM_INFO. */
const pps_wire_stream_info_t *pps_player_info(const pps_player_t *player);
/* For the status line and the summary. */
pps_stats_t *pps_player_stats(pps_player_t *player);
const pps_clock_t *pps_player_clock(const pps_player_t *player);
const pps_playout_t *pps_player_playout(const pps_player_t *player);
/* NULL without the audio track (params.audio false). */
const pps_audio_player_t *pps_player_audio(const pps_player_t *player);

#endif /* PPS_CLIENT_INTERNAL_H */
