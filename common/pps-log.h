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

#endif /* PPS_LOG_H */
