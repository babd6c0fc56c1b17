/* SPDX-License-Identifier: MIT */
/*
 * How a library tells its program what happened: a callback the program
 * installs, given one line at a time. The server CLI prints it to stderr
 * after "pps-server: ", the GStreamer elements hand it to GST_WARNING /
 * GST_INFO, tests collect it. A library never prints on its own.
 *
 * A pps_log_t is a value (callback + user pointer) copied into the
 * parameters of each object that logs; a zeroed one drops every message.
 * Messages are formatted on the calling thread and passed on at once.
 */
#ifndef PPS_LOG_H
#define PPS_LOG_H

#include <stdarg.h>
#include <stdint.h>

typedef enum {
	PPS_LOG_ERROR,   /* something failed and stays failed (a source, a socket) */
	PPS_LOG_WARNING, /* something is not as the user asked, but runs */
	PPS_LOG_INFO,    /* the story of a run: clients joining and leaving */
} pps_log_level_t;

/* One message: a single line, no trailing newline, no program name. */
typedef void (*pps_log_cb)(pps_log_level_t level, const char *message, void *user);

typedef struct {
	pps_log_cb cb; /* NULL: messages are dropped */
	void *user;
} pps_log_t;

/* Longest message passed on; longer ones are cut (with "..." at the end). */
#define PPS_LOG_MAX_MESSAGE_BYTES 512

/* Formats and passes one message to @log (NULL or no callback: dropped). */
void pps_log(const pps_log_t *log, pps_log_level_t level, const char *format, ...)
    __attribute__((format(printf, 3, 4)));
void pps_logv(const pps_log_t *log, pps_log_level_t level, const char *format, va_list ap)
    __attribute__((format(printf, 3, 0)));

/* "error", "warning", "info". */
const char *pps_log_level_name(pps_log_level_t level);

/*
 * A rate limit for the lines a peer can cause (refusals, protocol errors,
 * joins and leaves): a token bucket of @burst lines refilled at
 * @lines_per_s. A line over the limit is counted, not formatted twice nor
 * kept; the next line that passes is preceded by one saying how many were
 * not logged, and pps_log_limit_flush says it at the end. Lines that only the
 * program itself causes (start, a failed source) bypass it.
 *
 * pps_log_limit_log() gives a pps_log_t that passes through the limit, to be
 * copied into the parameters of every object a peer drives. One thread: the
 * limit is not locked.
 */
typedef struct {
	pps_log_t out;
	unsigned lines_per_s;
	unsigned burst;
	int64_t (*clock_cb)(void *user); /* monotonic µs; NULL: CLOCK_MONOTONIC */
	void *clock_user;
	/* state */
	double tokens;
	int64_t last_us;
	int64_t first_unlogged_us;
	uint64_t unlogged;       /* since the last line that passed */
	uint64_t unlogged_total; /* over the limit's life */
} pps_log_limit_t;

/* Defaults for peer-caused lines: a burst of 20, then 5 a second
 * (at ~150 bytes a line, under 50 KB a minute however hard a peer tries). */
#define PPS_LOG_LIMIT_LINES_PER_S 5
#define PPS_LOG_LIMIT_BURST       20

void pps_log_limit_init(pps_log_limit_t *lim, const pps_log_t *out, unsigned lines_per_s,
                        unsigned burst);
/* A log value that passes through @lim (which must outlive it). */
pps_log_t pps_log_limit_log(pps_log_limit_t *lim);
/* Says how many lines were not logged since the last one that was, if any. */
void pps_log_limit_flush(pps_log_limit_t *lim);

#endif /* PPS_LOG_H */
