/* SPDX-License-Identifier: MIT */
/*
 * --log: JSON Lines once a second, one "path" event per streaming client
 * (its path estimate and what it was sent per layer) and one "rates" event
 * (the encoder's targets and output, and the IDR requests so far).
 */
#include "pps-server-lib.h"
#include "pps-time.h"

#include <errno.h>
#include <event2/event.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* Counters of one client at the last line, for per-second rates. */
typedef struct {
	unsigned id;
	bool seen;
	uint64_t sent[PPS_ADU_MAX_QUALITY_LAYERS];
	uint64_t windows_dropped;
} client_mark_t;

struct pps_server_log {
	FILE *f;
	char *path;
	int layers;
	pps_media_t *media;
	pps_listener_t *listener;
	struct event *timer;
	int64_t last_us;
	double dt_s; /* of the current line */
	uint64_t last_bytes[PPS_ADU_MAX_QUALITY_LAYERS];
	client_mark_t *marks; /* one per client seen at the last line */
	size_t n_marks, cap_marks;
	int write_error; /* first negative errno */
};

/* A JSON string: quotes, backslashes and control characters escaped. */
static void
json_string(FILE *f, const char *text)
{
	fputc('"', f);
	for (const unsigned char *c = (const unsigned char *)text; *c; c++) {
		if (*c == '"' || *c == '\\')
			fprintf(f, "\\%c", *c);
		else if (*c < 0x20)
			fprintf(f, "\\u%04x", *c);
		else
			fputc(*c, f);
	}
	fputc('"', f);
}

static void
int_array(FILE *f, const char *name, const uint64_t *v, int n)
{
	fprintf(f, ",\"%s\":[", name);
	for (int i = 0; i < n; i++)
		fprintf(f, "%s%" PRIu64, i ? "," : "", v[i]);
	fputc(']', f);
}

static client_mark_t *
mark_for(pps_server_log_t *g, unsigned id)
{
	for (size_t i = 0; i < g->n_marks; i++)
		if (g->marks[i].id == id)
			return &g->marks[i];
	if (g->n_marks == g->cap_marks) {
		size_t cap = g->cap_marks ? 2 * g->cap_marks : 16;
		client_mark_t *m = realloc(g->marks, cap * sizeof(*m));

		if (!m)
			return NULL;
		g->marks = m;
		g->cap_marks = cap;
	}
	memset(&g->marks[g->n_marks], 0, sizeof(g->marks[0]));
	g->marks[g->n_marks].id = id;
	return &g->marks[g->n_marks++];
}

static void
path_line_cb(pps_session_t *session, void *user)
{
	pps_server_log_t *g = user;
	pps_path_estimate_t e;
	pps_sched_stats_t st;
	uint64_t sent[PPS_ADU_MAX_QUALITY_LAYERS] = {0}, v[PPS_ADU_MAX_QUALITY_LAYERS];
	client_mark_t *mark;

	if (pps_session_state(session) != PPS_SESSION_STREAMING)
		return;
	mark = mark_for(g, pps_session_id(session));
	if (!mark)
		return;
	mark->seen = true;
	pps_session_get_path(session, &e);
	pps_session_get_sched_stats(session, &st);
	for (int q = 0; q < PPS_ADU_MAX_QUALITY_LAYERS; q++)
		for (int t = 0; t < PPS_ADU_MAX_TEMPORAL_LAYERS; t++)
			sent[q] += st.layer[t][q].bytes_sent;
	for (int q = 0; q < g->layers; q++)
		v[q] = (uint64_t)(8.0 * (double)(sent[q] - mark->sent[q]) / g->dt_s);
	fprintf(g->f,
	        "{\"event\":\"path\",\"t_us\":%" PRId64 ",\"client\":%u,\"peer\":", g->last_us,
	        pps_session_id(session));
	json_string(g->f, pps_session_peer(session));
	fprintf(g->f,
	        ",\"valid\":%s,\"estimate_bps\":%" PRIu64 ",\"delivery_rate_bps\":%" PRIu64
	        ",\"acked_bps\":%" PRIu64 ",\"min_rtt_us\":%u,\"srtt_us\":%u"
	        ",\"queue_delay_us\":%u,\"retrans_pkts\":%" PRIu64 ",\"lost_pkts\":%u"
	        ",\"app_limited\":%s,\"congested\":%s,\"cwnd_pkts\":%u"
	        ",\"inflight_cap_pkts\":%u,\"cap_state\":\"%s\"",
	        e.valid ? "true" : "false", e.estimate_bps, e.delivery_rate_bps, e.acked_bps,
	        e.min_rtt_us, e.srtt_us, e.queue_delay_us, e.retrans_pkts, e.lost_pkts,
	        e.app_limited ? "true" : "false", e.congested ? "true" : "false", e.cwnd_pkts,
	        e.inflight_cap_pkts, pps_path_cap_state_name(e.cap_state));
	int_array(g->f, "sent_layer_bps", v, g->layers);
	fprintf(g->f, ",\"dropped_windows\":%" PRIu64 "}\n",
	        st.windows_dropped - mark->windows_dropped);
	memcpy(mark->sent, sent, sizeof(mark->sent));
	mark->windows_dropped = st.windows_dropped;
}

static void
tick_cb(evutil_socket_t fd, short what, void *user)
{
	pps_server_log_t *g = user;
	int64_t now = pps_time_realtime_us();
	pps_media_stats_t ms;
	pps_encoder_rates_t rates;
	uint64_t v[PPS_ADU_MAX_QUALITY_LAYERS];
	size_t kept = 0;

	g->dt_s = (double)(now - g->last_us) / 1e6;
	if (g->dt_s <= 0)
		g->dt_s = 1;
	g->last_us = now;
	for (size_t i = 0; i < g->n_marks; i++)
		g->marks[i].seen = false;
	pps_listener_foreach(g->listener, path_line_cb, g);
	for (size_t i = 0; i < g->n_marks; i++) /* forget clients that left */
		if (g->marks[i].seen)
			g->marks[kept++] = g->marks[i];
	g->n_marks = kept;

	pps_media_get_stats(g->media, &ms);
	pps_media_get_rates(g->media, &rates);
	fprintf(g->f, "{\"event\":\"rates\",\"t_us\":%" PRId64, now);
	for (int q = 0; q < g->layers; q++)
		v[q] = (uint64_t)rates.kbps[q];
	int_array(g->f, "target_kbps", v, g->layers);
	for (int q = 0; q < g->layers; q++)
		v[q] = (uint64_t)rates.buffer_kbit[q];
	int_array(g->f, "buffer_kbit", v, g->layers);
	for (int q = 0; q < g->layers; q++)
		v[q] = (uint64_t)rates.crf[q];
	int_array(g->f, "crf", v, g->layers);
	for (int q = 0; q < g->layers; q++)
		v[q] = (uint64_t)(8.0 * (double)(ms.bytes[q] - g->last_bytes[q]) / g->dt_s);
	int_array(g->f, "encoded_layer_bps", v, g->layers);
	fprintf(g->f, ",\"idr_requests\":%" PRIu64 ",\"idr_deferred\":%" PRIu64 "}\n",
	        ms.idr_requests, ms.idr_deferred);
	if (fflush(g->f) != 0 && !g->write_error)
		g->write_error = -errno;
	memcpy(g->last_bytes, ms.bytes, sizeof(g->last_bytes));
}

pps_server_log_t *
pps_server_log_new(struct event_base *base, const char *path, int quality_layers,
                   pps_media_t *media, pps_listener_t *listener, char *err, size_t err_size)
{
	pps_server_log_t *g = calloc(1, sizeof(*g));
	struct timeval one_s = {1, 0};

	if (!g || !(g->path = strdup(path))) {
		snprintf(err, err_size, "--log %s: out of memory", path);
		errno = ENOMEM;
		goto err;
	}
	g->layers = quality_layers;
	g->media = media;
	g->listener = listener;
	g->f = fopen(path, "w");
	if (!g->f) {
		snprintf(err, err_size, "--log %s: %s", path, strerror(errno));
		goto err;
	}
	g->last_us = pps_time_realtime_us();
	g->timer = event_new(base, -1, EV_PERSIST, tick_cb, g);
	if (!g->timer || event_add(g->timer, &one_s) < 0) {
		snprintf(err, err_size, "event loop: cannot create the --log timer");
		errno = ENOMEM;
		goto err;
	}
	return g;

err : {
	int saved = errno;

	pps_server_log_close(g);
	errno = saved;
}
	return NULL;
}

int
pps_server_log_close(pps_server_log_t *g)
{
	int ret;

	if (!g)
		return 0;
	ret = g->write_error;
	if (g->timer)
		event_free(g->timer);
	if (g->f && fclose(g->f) != 0 && !ret)
		ret = -errno;
	if (ret < 0)
		fprintf(stderr, "pps-server: --log %s: %s\n", g->path, strerror(-ret));
	free(g->marks);
	free(g->path);
	free(g);
	return ret;
}
