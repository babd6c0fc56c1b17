/* SPDX-License-Identifier: MIT */
/*
 * --log: JSON Lines (docs/JSON.md). The report's start record first; once a
 * second one "path" record per streaming client (its path estimate and what
 * it was sent per layer) and one "rates" record (the encoder's targets and
 * output, and the IDR requests so far); one "encoded" record per window as
 * it is complete (what the encoder made of it: the per-frame size timeline,
 * IDRs included); the report's summary last.
 */
#include "pps-server-lib.h"
#include "pps-time.h"

#include <errno.h>
#include <event2/event.h>
#include <inttypes.h>
#include <json-glib/json-glib.h>
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

/* An array of @n integers. */
static JsonArray *
int_array(const uint64_t *v, int n)
{
	JsonArray *a = json_array_sized_new((guint)n);

	for (int i = 0; i < n; i++)
		json_array_add_int_element(a, (gint64)v[i]);
	return a;
}

/* One JSON line (json-glib: the peer's address and every name escaped). */
static void
write_line(pps_server_log_t *g, JsonObject *o)
{
	JsonNode *node = json_node_init_object(json_node_alloc(), o);
	char *text = json_to_string(node, FALSE);

	fprintf(g->f, "%s\n", text);
	g_free(text);
	json_node_unref(node);
	json_object_unref(o);
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
	JsonObject *o;

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
	o = json_object_new();
	json_object_set_string_member(o, "type", "path");
	json_object_set_int_member(o, "t_us", g->last_us);
	json_object_set_int_member(o, "client", pps_session_id(session));
	json_object_set_string_member(o, "address", pps_session_address(session));
	json_object_set_string_member(o, "name", pps_session_name(session));
	json_object_set_boolean_member(o, "valid", e.valid);
	json_object_set_int_member(o, "estimate_bps", (gint64)e.estimate_bps);
	json_object_set_int_member(o, "delivery_rate_bps", (gint64)e.delivery_rate_bps);
	json_object_set_int_member(o, "acked_bps", (gint64)e.acked_bps);
	json_object_set_int_member(o, "min_rtt_us", e.min_rtt_us);
	json_object_set_int_member(o, "srtt_us", e.srtt_us);
	json_object_set_int_member(o, "queue_delay_us", e.queue_delay_us);
	json_object_set_int_member(o, "retrans_pkts", (gint64)e.retrans_pkts);
	json_object_set_int_member(o, "retrans_seconds", e.retrans_seconds);
	json_object_set_int_member(o, "lost_pkts", e.lost_pkts);
	json_object_set_boolean_member(o, "app_limited", e.app_limited);
	json_object_set_boolean_member(o, "congested", e.congested);
	json_object_set_int_member(o, "cwnd_pkts", e.cwnd_pkts);
	json_object_set_int_member(o, "inflight_cap_pkts", e.inflight_cap_pkts);
	json_object_set_string_member(o, "cap_state", pps_path_cap_state_name(e.cap_state));
	if (e.fair_rate_bps) {
		json_object_set_int_member(o, "fair_rate_bps", (gint64)e.fair_rate_bps);
		json_object_set_int_member(o, "loss_events", (gint64)e.loss_events);
	}
	json_object_set_int_member(o, "behind_events", (gint64)e.behind_events);
	json_object_set_array_member(o, "sent_layer_bps", int_array(v, g->layers));
	json_object_set_int_member(o, "windows_dropped",
	                           (gint64)(st.windows_dropped - mark->windows_dropped));
	write_line(g, o);
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
	JsonObject *o;

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
	o = json_object_new();
	json_object_set_string_member(o, "type", "rates");
	json_object_set_int_member(o, "t_us", now);
	for (int q = 0; q < g->layers; q++)
		v[q] = (uint64_t)rates.kbps[q];
	json_object_set_array_member(o, "target_kbps", int_array(v, g->layers));
	for (int q = 0; q < g->layers; q++)
		v[q] = (uint64_t)rates.buffer_kbit[q];
	json_object_set_array_member(o, "buffer_kbit", int_array(v, g->layers));
	for (int q = 0; q < g->layers; q++)
		v[q] = (uint64_t)rates.crf[q];
	json_object_set_array_member(o, "crf", int_array(v, g->layers));
	for (int q = 0; q < g->layers; q++)
		v[q] = (uint64_t)(8.0 * (double)(ms.bytes[q] - g->last_bytes[q]) / g->dt_s);
	json_object_set_array_member(o, "encoded_layer_bps", int_array(v, g->layers));
	json_object_set_int_member(o, "idr_requests", (gint64)ms.idr_requests);
	json_object_set_int_member(o, "idr_deferred", (gint64)ms.idr_deferred);
	write_line(g, o);
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
	free(g->marks);
	free(g->path);
	free(g);
	return ret;
}

const char *
pps_server_log_path(const pps_server_log_t *g)
{
	return g->path;
}

void
pps_server_log_record(pps_server_log_t *g, const char *json)
{
	fprintf(g->f, "%s\n", json);
	if (fflush(g->f) != 0 && !g->write_error)
		g->write_error = -errno;
}

void
pps_server_log_window(pps_server_log_t *g, const pps_window_t *window)
{
	uint64_t layer[PPS_ADU_MAX_QUALITY_LAYERS] = {0};
	uint64_t frame[PPS_WIRE_MAX_WINDOW_FRAMES] = {0};
	uint64_t idr_bytes = 0;
	uint32_t first = UINT32_MAX, last = 0;
	size_t n = pps_window_adu_count(window);
	int frames = 0;
	JsonObject *o;

	for (size_t i = 0; i < n; i++) {
		const pps_adu_info_t *info = pps_adu_info(pps_window_adu(window, i));

		if (info->frame_index < first)
			first = info->frame_index;
		if (info->frame_index > last)
			last = info->frame_index;
	}
	for (size_t i = 0; i < n; i++) {
		const pps_adu_t *adu = pps_window_adu(window, i);
		const pps_adu_info_t *info = pps_adu_info(adu);
		uint64_t size = pps_adu_size(adu);

		if (info->quality_layer < g->layers)
			layer[info->quality_layer] += size;
		if (info->frame_index - first < PPS_WIRE_MAX_WINDOW_FRAMES)
			frame[info->frame_index - first] += size;
		if (info->frame_type == PPS_ADU_FRAME_IDR)
			idr_bytes += size;
	}
	if (n && last - first < PPS_WIRE_MAX_WINDOW_FRAMES)
		frames = (int)(last - first + 1);
	o = json_object_new();
	json_object_set_string_member(o, "type", "encoded");
	json_object_set_int_member(o, "t_us", pps_time_realtime_us());
	json_object_set_int_member(o, "window", pps_window_id(window));
	json_object_set_int_member(o, "first_capture_us", pps_window_first_capture_us(window));
	json_object_set_int_member(o, "first_frame", n ? first : 0);
	json_object_set_array_member(o, "frame_bytes", int_array(frame, frames));
	json_object_set_array_member(o, "layer_bytes", int_array(layer, g->layers));
	json_object_set_int_member(o, "idr_bytes", (gint64)idr_bytes);
	write_line(g, o);
}

FILE *
pps_server_log_file(pps_server_log_t *g)
{
	return g->f;
}
