/* SPDX-License-Identifier: MIT */
/* Helpers shared by pps-peer-send and pps-peer-recv (tools/peers/ only). */
#ifndef PPS_PEER_COMMON_H
#define PPS_PEER_COMMON_H

#include <gst/gst.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* HOST:PORT as the configuration loader reads addresses; port 1..65535.
 * Returns 0 or -EINVAL. */
int pps_peer_split_host_port(const char *arg, char *host, size_t host_size, int *port);

/* SRT's own counters (retransmissions, drops) as GStreamer prints them, or
 * NULL if @element has none. Free with g_free(). */
char *pps_peer_srt_stats_string(GstElement *element);

/* Writes @text as a JSON string (quoted, escaped), or null for NULL. */
void pps_peer_write_json_string(FILE *out, const char *text);

/* The bytes a pad probe sees: a buffer's size, or a buffer list's sum. */
uint64_t pps_peer_probe_bytes(GstPadProbeInfo *info);

/* --stats-json: opens @path for the program's JSON object, or says why not
 * on stderr (prefixed "@program: ") and returns NULL. */
FILE *pps_peer_stats_open(const char *path, const char *program);

/* Ends the object pps_peer_stats_open began with "srt_stats": @srt (SRT's
 * own counters, or null) and closes the file. */
void pps_peer_stats_close(FILE *f, const char *srt);

#endif /* PPS_PEER_COMMON_H */
