/* SPDX-License-Identifier: MIT */
/*
 * pps-client's parts, shared inside client/ only. Everything runs on the main
 * thread, which owns the event loop (and SDL, which wants the main thread).
 *
 *   socket -> wire parser -> reasm (ADUs per window, bounded, validated)
 *          -> codec decoder (display order) -> playout (policy, timing)
 *          -> display (SDL2 / y4m) + stats (status line, JSONL, summary)
 */
#ifndef PPS_CLIENT_INTERNAL_H
#define PPS_CLIENT_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "pps-adu.h"
#include "pps-codec.h"
#include "pps-wire.h"

/* ---- reassembly: fragments -> whole ADUs of one window ------------------ */

/* A window can hold at most this much, whatever WINDOW_BEGIN claims. */
#define PPS_REASM_MAX_WINDOW_BYTES (64u << 20)
#define PPS_REASM_MAX_ADUS 1024

typedef struct pps_reasm pps_reasm_t;

typedef struct {
	uint32_t window_id;
	int64_t first_capture_us;
	int64_t deadline_us;
	unsigned frames;
	unsigned adus_total;     /* from WINDOW_BEGIN */
	uint32_t bytes_total;
	unsigned adus_received;  /* whole ADUs */
	uint64_t bytes_received; /* payload bytes, whole or not */
	unsigned adus_sent, adus_dropped; /* from WINDOW_END */
	bool dropped;            /* the sender sent nothing */
	uint32_t first_adu_id;   /* from WINDOW_BEGIN: ADU ids are first_adu_id .. + adus_total - 1 */
	bool begun;              /* WINDOW_BEGIN seen */
} pps_reasm_window_t;

pps_reasm_t *pps_reasm_new(void);
void pps_reasm_free(pps_reasm_t *reasm);

/*
 * Feeds one server record of a window (WINDOW_BEGIN, ADU_FRAGMENT,
 * WINDOW_END). Returns 0, 1 when a WINDOW_END completed a window (then
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

/* ---- playout policies (pure; the caller passes times) ------------------- */

typedef enum {
	PPS_PLAYOUT_FIXED = 0,
	PPS_PLAYOUT_ASAP = 1,
	PPS_PLAYOUT_ADAPTIVE = 2,
} pps_playout_policy_t;

const char *pps_playout_policy_name(pps_playout_policy_t policy);

typedef struct pps_playout pps_playout_t;

pps_playout_t *pps_playout_new(pps_playout_policy_t policy, int64_t tolerance_us);
void pps_playout_free(pps_playout_t *playout);

/*
 * A window arrived: @delay_us is (arrival of its last byte) - (capture of its
 * first frame). The adaptive policy updates its estimate here, at window
 * boundaries only.
 */
void pps_playout_window(pps_playout_t *playout, int64_t delay_us);

/* Display time of a frame captured at @capture_us that is ready at @now_us. */
int64_t pps_playout_display_time(const pps_playout_t *playout, int64_t capture_us, int64_t now_us);

/* Current playout delay (capture to display), for logs. */
int64_t pps_playout_delay_us(const pps_playout_t *playout);
/* "normal" or "spike" (adaptive only). */
const char *pps_playout_mode(const pps_playout_t *playout);

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
	const char *reason; /* why not shown: "late", "undecodable", "dropped"; NULL if shown */
} pps_stats_frame_t;

void pps_stats_frame(pps_stats_t *stats, const pps_stats_frame_t *frame);

typedef struct {
	uint32_t window;
	int64_t first_capture_us;
	int64_t complete_us; /* arrival of the window's last byte; 0 if nothing arrived */
	const char *status;  /* "complete", "partial", "dropped", "late" */
	unsigned adus_received, adus_sent, adus_total;
	uint64_t bytes;
} pps_stats_window_t;

void pps_stats_window(pps_stats_t *stats, const pps_stats_window_t *window);
void pps_stats_bytes(pps_stats_t *stats, size_t bytes, int64_t now_us);
/* Any other event: a JSON object body without braces, e.g. "\"type\":\"clock\",...". */
void pps_stats_event(pps_stats_t *stats, const char *json_fields);

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
} pps_stats_summary_t;

extern const int pps_stats_tolerances_ms[6];

void pps_stats_summarize(pps_stats_t *stats, pps_stats_summary_t *out);
/* Writes the summary as a JSON Lines event and as a table on @table. */
void pps_stats_write_summary(pps_stats_t *stats, const pps_stats_summary_t *s, FILE *table);

/* Rolling figures for the status line, since the previous call. */
typedef struct {
	double latency_p50_ms, latency_p95_ms;
	double fps_shown;
	double bits_per_second;
	unsigned max_temporal_layers, max_quality_layers;
	uint64_t windows_late, windows_dropped; /* so far */
} pps_stats_rolling_t;
void pps_stats_rolling(pps_stats_t *stats, int64_t now_us, pps_stats_rolling_t *out);

/* ---- display ------------------------------------------------------------ */

typedef struct pps_display pps_display_t;

typedef enum {
	PPS_DISPLAY_AUTO = 0,
	PPS_DISPLAY_SDL = 1,
	PPS_DISPLAY_NONE = 2,
} pps_display_mode_t;

/*
 * Opens the display (@mode; auto = SDL if a display is available) and the
 * y4m output (@y4m_path may be NULL or ""). NULL with @err on failure.
 */
pps_display_t *pps_display_new(pps_display_mode_t mode, const char *y4m_path, char *err,
			       size_t err_size);
void pps_display_free(pps_display_t *display);
bool pps_display_has_window(const pps_display_t *display);
/* Shows one frame (and writes it to the y4m file) with an overlay line. */
int pps_display_show(pps_display_t *display, const pps_frame_t *picture, int fps,
		     const char *overlay);
/* Handles window events; returns true if the user closed the window. */
bool pps_display_poll_quit(pps_display_t *display);

/* Draws @text (digits, letters, a few symbols) into an I420 picture's luma. */
void pps_overlay_draw(pps_frame_t *picture, int x, int y, int scale, const char *text);

#endif /* PPS_CLIENT_INTERNAL_H */
