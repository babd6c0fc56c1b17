/* SPDX-License-Identifier: MIT */
/* Helpers shared by pps-peer-send and pps-peer-recv (tools/peers/ only). */
#ifndef PPS_PEER_COMMON_H
#define PPS_PEER_COMMON_H

#include <gst/gst.h>
#include <stddef.h>
#include <stdio.h>

/* HOST:PORT as the configuration loader reads addresses; port 1..65535.
 * Returns 0 or -EINVAL. */
int pps_peer_split_host_port(const char *arg, char *host, size_t host_size, int *port);

/* SRT's own counters (retransmissions, drops) as GStreamer prints them, or
 * NULL if @element has none. Free with g_free(). */
char *pps_peer_srt_stats_string(GstElement *element);

/* Writes @text as a JSON string (quoted, escaped), or null for NULL. */
void pps_peer_write_json_string(FILE *out, const char *text);

#endif /* PPS_PEER_COMMON_H */
