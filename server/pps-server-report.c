/* SPDX-License-Identifier: MIT */
/*
 * What pps-server tells its user: the status line every [server]
 * status_interval_s, and its figures as JSON (docs/JSON.md): the start record,
 * the summary on exit (stderr, --stats-json, the --log) and the snapshots
 * GET /metrics shows, read from the media and listener objects and from the
 * figures kept of the clients that left.
 */
#include "pps-server-lib.h"
#include "pps-time.h"
#include "pps-version.h"

#include <errno.h>
#include <inttypes.h>
#include <json-glib/json-glib.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

struct pps_server_report {
	pps_media_t *media;
	pps_listener_t *listener;
	int quality_layers;
	bool rate_adaptive;
	pps_server_report_start_t start;
	int64_t start_us;
	/* The clients that left: a ring of the last PPS_SERVER_REPORT_CLIENTS_KEPT,
	 * allocated at the first; left_total counts them all. */
	pps_server_client_t *left;
	uint64_t left_total;
	/* for rates between status lines */
	int64_t last_status_us;
	pps_media_stats_t last_media;
};

pps_server_report_t *
pps_server_report_new(pps_media_t *media, pps_listener_t *listener, int quality_layers,
                      bool rate_adaptive, const pps_server_report_start_t *start)
{
	pps_server_report_t *r = calloc(1, sizeof(*r));

	if (!r) {
		errno = ENOMEM;
		return NULL;
	}
	r->media = media;
	r->listener = listener;
	r->quality_layers = quality_layers;
	r->rate_adaptive = rate_adaptive;
	if (start)
		r->start = *start;
	/* Pages untouched stay unmapped until clients leave. */
	r->left = calloc(PPS_SERVER_REPORT_CLIENTS_KEPT, sizeof(*r->left));
	if (!r->left) {
		free(r);
		errno = ENOMEM;
		return NULL;
	}
	r->start_us = r->last_status_us = pps_time_realtime_us();
	return r;
}

void
pps_server_report_free(pps_server_report_t *r)
{
	if (!r)
		return;
	free(r->left);
	free(r);
}

const pps_server_report_start_t *
pps_server_report_start(const pps_server_report_t *r)
{
	return &r->start;
}

int64_t
pps_server_report_start_us(const pps_server_report_t *r)
{
	return r->start_us;
}

static void
format_rate(char *buf, size_t size, double bps)
{
	if (bps >= 1e6)
		snprintf(buf, size, "%.2f Mbit/s", bps / 1e6);
	else
		snprintf(buf, size, "%.0f kbit/s", bps / 1e3);
}

typedef struct {
	char *line;
	size_t size, len;
} status_line_t;

static void
status_client_cb(pps_session_t *session, void *user)
{
	status_line_t *sl = user;
	pps_sched_stats_t st;
	pps_path_estimate_t e;
	char est[32];

	if (pps_session_state(session) != PPS_SESSION_STREAMING || sl->len >= sl->size - 128)
		return;
	pps_session_get_sched_stats(session, &st);
	pps_session_get_path(session, &e);
	format_rate(est, sizeof(est), (double)e.estimate_bps);
	sl->len += (size_t)snprintf(sl->line + sl->len, sl->size - sl->len, " | #%u ",
	                            pps_session_id(session));
	if (pps_session_audio_only(session)) {
		sl->len += (size_t)snprintf(sl->line + sl->len, sl->size - sl->len,
		                            "audio %" PRIu64 " sent %" PRIu64 " late",
		                            st.audio_sent, st.audio_late + st.audio_overflow);
		return;
	}
	if (e.valid)
		sl->len +=
		    (size_t)snprintf(sl->line + sl->len, sl->size - sl->len,
		                     "est %s rtt %u+%u ms cap %s ", est, e.min_rtt_us / 1000,
		                     e.queue_delay_us / 1000, pps_path_cap_state_name(e.cap_state));
	sl->len += (size_t)snprintf(sl->line + sl->len, sl->size - sl->len,
	                            "windows %" PRIu64 "/%" PRIu64 "/%" PRIu64, st.windows_complete,
	                            st.windows_partial, st.windows_dropped);
}

void
pps_server_report_status(pps_server_report_t *srv, FILE *out)
{
	pps_media_stats_t ms;
	pps_listener_stats_t ls;
	int64_t now = pps_time_realtime_us();
	double dt = (double)(now - srv->last_status_us) / 1e6;
	char line[2048];
	status_line_t sl = {.line = line, .size = sizeof(line)};

	pps_media_get_stats(srv->media, &ms);
	pps_listener_get_stats(srv->listener, &ls);
	if (dt <= 0)
		dt = 1;
	sl.len += (size_t)snprintf(
	    line + sl.len, sizeof(line) - sl.len, "pps-server: %u client%s | %.1f fps", ls.sessions,
	    ls.sessions == 1 ? "" : "s",
	    (double)(ms.frames_encoded - srv->last_media.frames_encoded) / dt);
	for (int q = 0; q < srv->quality_layers; q++) {
		char rate[32];

		format_rate(rate, sizeof(rate),
		            8.0 * (double)(ms.bytes[q] - srv->last_media.bytes[q]) / dt);
		sl.len +=
		    (size_t)snprintf(line + sl.len, sizeof(line) - sl.len, " | q%d %s", q, rate);
		if (srv->rate_adaptive) {
			pps_encoder_rates_t r;

			pps_media_get_rates(srv->media, &r);
			sl.len += (size_t)snprintf(line + sl.len, sizeof(line) - sl.len,
			                           " (cap %d crf %d)", r.kbps[q], r.crf[q]);
		}
	}
	if (ms.capture_dropped)
		sl.len += (size_t)snprintf(line + sl.len, sizeof(line) - sl.len,
		                           " | raw drops %" PRIu64, ms.capture_dropped);
	if (pps_media_has_audio(srv->media))
		sl.len +=
		    (size_t)snprintf(line + sl.len, sizeof(line) - sl.len, " | audio %d kbit/s",
		                     pps_media_audio_bitrate(srv->media) / 1000);
	pps_listener_foreach(srv->listener, status_client_cb, &sl);
	if (ls.sessions && sl.len < sizeof(line) - 64)
		snprintf(line + sl.len, sizeof(line) - sl.len, " (complete/partial/dropped)");
	fprintf(out, "%s\n", line);
	srv->last_media = ms;
	srv->last_status_us = now;
}

/* Millisecond resolution. json-glib prints the nearest double with 17
 * digits (2.0070000000000001): the value is right, the look is not. */
static double
round_ms(double seconds)
{
	return round(seconds * 1000.0) / 1000.0;
}

static void
read_client(pps_session_t *session, pps_server_client_t *c)
{
	memset(c, 0, sizeof(*c));
	c->id = pps_session_id(session);
	snprintf(c->address, sizeof(c->address), "%s", pps_session_address(session));
	snprintf(c->name, sizeof(c->name), "%s", pps_session_name(session));
	c->audio_only = pps_session_audio_only(session);
	c->copy = pps_session_copy(session);
	c->copy_delay_us = pps_session_window_delay_us(session);
	c->connected = true;
	c->joined_us = pps_session_joined_us(session);
	pps_session_get_sched_stats(session, &c->sched);
	for (int t = 0; t < PPS_ADU_MAX_TEMPORAL_LAYERS; t++)
		for (int q = 0; q < PPS_ADU_MAX_QUALITY_LAYERS; q++)
			c->adu_bytes_sent += c->sched.layer[t][q].bytes_sent;
	c->has_transport = pps_session_get_transport_stats(session, &c->transport) == 0;
	pps_session_get_path(session, &c->path);
}

void
pps_server_report_client_left(pps_server_report_t *r, pps_session_t *session)
{
	pps_server_client_t *c;

	c = &r->left[r->left_total % PPS_SERVER_REPORT_CLIENTS_KEPT];
	read_client(session, c);
	c->connected = false;
	c->left_us = pps_time_realtime_us();
	r->left_total++;
}

typedef struct {
	pps_server_snapshot_t *snap;
	size_t cap;
} snapshot_fill_t;

static void
snapshot_client_cb(pps_session_t *session, void *user)
{
	snapshot_fill_t *f = user;

	if (pps_session_state(session) != PPS_SESSION_STREAMING || f->snap->n_clients == f->cap)
		return;
	read_client(session, &f->snap->clients[f->snap->n_clients++]);
}

static int
compare_client_id(const void *a, const void *b)
{
	const pps_server_client_t *x = a, *y = b;

	return (x->id > y->id) - (x->id < y->id);
}

static int
compare_client_ptr_id(const void *a, const void *b)
{
	return compare_client_id(*(const pps_server_client_t *const *)a,
	                         *(const pps_server_client_t *const *)b);
}

int
pps_server_report_snapshot(const pps_server_report_t *r, pps_server_snapshot_t *snap)
{
	snapshot_fill_t fill = {.snap = snap};
	struct rusage ru;

	memset(snap, 0, sizeof(*snap));
	snap->time_us = pps_time_realtime_us();
	snap->duration_s = (double)(snap->time_us - r->start_us) / 1e6;
	pps_media_get_stats(r->media, &snap->media);
	pps_listener_get_stats(r->listener, &snap->listener);
	getrusage(RUSAGE_SELF, &ru);
	snap->cpu_user_s = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6;
	snap->cpu_system_s = (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
	snap->clients_left = r->left_total;
	fill.cap = snap->listener.streaming;
	if (fill.cap) {
		snap->clients = calloc(fill.cap, sizeof(*snap->clients));
		if (!snap->clients)
			return -ENOMEM;
		pps_listener_foreach(r->listener, snapshot_client_cb, &fill);
		qsort(snap->clients, snap->n_clients, sizeof(*snap->clients), compare_client_id);
	}
	return 0;
}

void
pps_server_snapshot_clear(pps_server_snapshot_t *snap)
{
	free(snap->clients);
	snap->clients = NULL;
	snap->n_clients = 0;
}

/* "2024-05-01T12:00:00.123456Z" */
static void
iso_time(int64_t us, char *buf, size_t size)
{
	time_t secs = (time_t)(us / 1000000);
	struct tm tm;

	gmtime_r(&secs, &tm);
	size_t n = strftime(buf, size, "%Y-%m-%dT%H:%M:%S", &tm);

	snprintf(buf + n, size - n, ".%06dZ", (int)(us % 1000000));
}

/* The start record's fields (without its type), for the --log's first line
 * and the summaries' "start". */
static JsonObject *
start_object(const pps_server_report_t *r)
{
	const pps_server_report_start_t *st = &r->start;
	const pps_wire_stream_info_t *si = &st->info;
	JsonObject *o = json_object_new(), *stream = json_object_new();
	char when[40];

	iso_time(r->start_us, when, sizeof(when));
	json_object_set_string_member(o, "program", "pps-server");
	json_object_set_string_member(o, "version", PPS_VERSION);
	json_object_set_int_member(o, "time_us", r->start_us);
	json_object_set_string_member(o, "time", when);
	json_object_set_string_member(o, "listen", st->listen ? st->listen : "");
	json_object_set_boolean_member(o, "tls", st->tls);
	json_object_set_string_member(o, "metrics", st->metrics ? st->metrics : "off");
	json_object_set_string_member(stream, "source", st->source ? st->source : "");
	json_object_set_int_member(stream, "width", si->width);
	json_object_set_int_member(stream, "height", si->height);
	json_object_set_double_member(stream, "fps",
	                              si->fps_den ? (double)si->fps_num / si->fps_den : 0);
	json_object_set_int_member(stream, "temporal_layers", si->temporal_layers);
	json_object_set_int_member(stream, "quality_layers", si->quality_layers);
	json_object_set_int_member(stream, "window_frames", si->window_frames);
	json_object_set_int_member(stream, "latency_budget_ms", si->latency_budget_ms);
	json_object_set_boolean_member(stream, "audio", st->audio);
	json_object_set_string_member(stream, "transport", st->transport ? st->transport : "");
	json_object_set_boolean_member(stream, "rate_adaptive", r->rate_adaptive);
	json_object_set_object_member(o, "stream", stream);
	return o;
}

static char *
to_line(JsonObject *o)
{
	JsonNode *node = json_node_init_object(json_node_alloc(), o);
	char *text = json_to_string(node, FALSE);

	json_node_unref(node);
	return text;
}

char *
pps_server_report_start_json(const pps_server_report_t *r)
{
	JsonObject *start = start_object(r), *o = json_object_new();
	GList *members = json_object_get_members(start);
	char *text;

	json_object_set_string_member(o, "type", "start");
	for (GList *m = members; m; m = m->next)
		json_object_set_member(o, m->data,
		                       json_node_copy(json_object_get_member(start, m->data)));
	g_list_free(members);
	json_object_unref(start);
	text = to_line(o);
	json_object_unref(o);
	return text;
}

static JsonObject *
client_object(const pps_server_client_t *c)
{
	JsonObject *o = json_object_new();
	const pps_sched_stats_t *st = &c->sched;
	const pps_minbuf_stats_t *ts = &c->transport;
	const pps_path_estimate_t *pe = &c->path;

	json_object_set_int_member(o, "client", c->id);
	json_object_set_string_member(o, "address", c->address);
	json_object_set_string_member(o, "name", c->name);
	json_object_set_boolean_member(o, "connected", c->connected);
	json_object_set_int_member(o, "joined_us", c->joined_us);
	if (!c->connected)
		json_object_set_int_member(o, "left_us", c->left_us);
	if (c->audio_only)
		json_object_set_boolean_member(o, "audio_only", TRUE);
	if (c->copy) {
		json_object_set_boolean_member(o, "copy", TRUE);
		json_object_set_double_member(o, "copy_delay_ms",
		                              (double)c->copy_delay_us / 1000.0);
	}
	if (st->audio_sent || st->audio_late || st->audio_overflow || st->audio_refused) {
		json_object_set_int_member(o, "audio_sent", (gint64)st->audio_sent);
		json_object_set_int_member(o, "audio_late", (gint64)st->audio_late);
		json_object_set_int_member(o, "audio_overflow", (gint64)st->audio_overflow);
		json_object_set_int_member(o, "audio_refused", (gint64)st->audio_refused);
	}
	json_object_set_int_member(o, "windows_complete", (gint64)st->windows_complete);
	json_object_set_int_member(o, "windows_partial", (gint64)st->windows_partial);
	json_object_set_int_member(o, "windows_dropped", (gint64)st->windows_dropped);
	json_object_set_int_member(o, "windows_overflow", (gint64)st->windows_overflow);
	if (c->copy)
		json_object_set_int_member(o, "windows_rested", (gint64)st->windows_rested);
	json_object_set_int_member(o, "adus_undecodable", (gint64)st->adus_undecodable);
	json_object_set_int_member(o, "adus_predicted", (gint64)st->adus_predicted);
	json_object_set_int_member(o, "adus_restart_skipped", (gint64)st->adus_restart_skipped);
	json_object_set_int_member(o, "adus_restart_unfit", (gint64)st->adus_restart_unfit);
	json_object_set_int_member(o, "windows_extended", (gint64)st->windows_extended);
	json_object_set_int_member(o, "adu_bytes_sent", (gint64)c->adu_bytes_sent);
	if (c->has_transport) {
		json_object_set_int_member(o, "wire_bytes", (gint64)ts->bytes);
		json_object_set_int_member(o, "writes", (gint64)ts->writes);
		json_object_set_int_member(o, "wakeups", (gint64)ts->wakeups);
		json_object_set_int_member(o, "retrans_pkts", (gint64)ts->retrans_pkts);
		json_object_set_int_member(o, "rto_events", (gint64)ts->rto_events);
		json_object_set_int_member(o, "capped_writes", (gint64)ts->capped_writes);
		json_object_set_string_member(o, "congestion", ts->congestion);
		json_object_set_int_member(o, "congestion_switches",
		                           (gint64)ts->congestion_switches);
		/* TLS: each packet one record, the largest never above the MSS. */
		if (ts->tls_records > 0) {
			json_object_set_int_member(o, "tls_records", (gint64)ts->tls_records);
			json_object_set_int_member(o, "tls_max_record_bytes",
			                           (gint64)ts->tls_max_record_bytes);
			json_object_set_int_member(o, "mss_bytes", (gint64)ts->mss_bytes);
		}
	}
	json_object_set_int_member(o, "estimate_bps", (gint64)pe->estimate_bps);
	json_object_set_int_member(o, "min_rtt_us", pe->min_rtt_us);
	json_object_set_int_member(o, "queue_delay_us", pe->queue_delay_us);
	json_object_set_string_member(o, "cap_state", pps_path_cap_state_name(pe->cap_state));
	if (pe->fair_rate_bps) {
		json_object_set_int_member(o, "fair_rate_bps", (gint64)pe->fair_rate_bps);
		json_object_set_int_member(o, "loss_events", (gint64)pe->loss_events);
	}
	json_object_set_int_member(o, "behind_events", (gint64)pe->behind_events);
	return o;
}

char *
pps_server_report_json(const pps_server_report_t *r, const pps_server_snapshot_t *snap,
                       const char *type)
{
	const pps_media_stats_t *m = &snap->media;
	const pps_listener_stats_t *l = &snap->listener;
	JsonObject *o = json_object_new();
	JsonArray *layers = json_array_new(), *encode_ms = json_array_new(),
	          *clients = json_array_new();
	uint64_t kept = snap->clients_left < PPS_SERVER_REPORT_CLIENTS_KEPT
	                    ? snap->clients_left
	                    : PPS_SERVER_REPORT_CLIENTS_KEPT;
	uint64_t omitted = snap->clients_left - kept;
	const pps_server_client_t **list;
	size_t n = 0;
	char *text;

	json_object_set_string_member(o, "type", type);
	json_object_set_object_member(o, "start", start_object(r));
	json_object_set_int_member(o, "time_us", snap->time_us);
	json_object_set_double_member(o, "duration_s", round_ms(snap->duration_s));
	json_object_set_int_member(o, "frames_encoded", (gint64)m->frames_encoded);
	json_object_set_int_member(o, "raw_frames_dropped", (gint64)m->capture_dropped);
	json_object_set_int_member(o, "windows", (gint64)m->windows);
	json_object_set_int_member(o, "windows_early", (gint64)m->windows_early);
	json_object_set_int_member(o, "windows_anchors", (gint64)m->windows_anchors);
	json_object_set_int_member(o, "b_frames_switches", (gint64)m->b_frames_switches);
	json_object_set_int_member(o, "windows_drained", (gint64)m->windows_drained);
	json_object_set_double_member(o, "capture_to_ready_p50_ms", m->capture_to_ready_p50_ms);
	json_object_set_double_member(o, "capture_to_ready_p95_ms", m->capture_to_ready_p95_ms);
	json_object_set_int_member(o, "sessions", l->sessions);
	json_object_set_int_member(o, "streaming", l->streaming);
	json_object_set_int_member(o, "clients_total", (gint64)l->clients_total);
	json_object_set_int_member(o, "audio_connections_total",
	                           (gint64)l->audio_connections_total);
	json_object_set_int_member(o, "connections_total", (gint64)l->connections_total);
	json_object_set_int_member(o, "clients_refused", (gint64)l->clients_refused);
	json_object_set_int_member(o, "clients_refused_busy", (gint64)l->clients_refused_busy);
	json_object_set_int_member(o, "clients_unauthorized", (gint64)l->clients_unauthorized);
	json_object_set_int_member(o, "clients_evicted", (gint64)l->clients_evicted);
	json_object_set_int_member(o, "handshakes_dropped", (gint64)l->handshakes_dropped);
	json_object_set_int_member(o, "log_lines_unlogged", (gint64)l->log_lines_unlogged);
	json_object_set_int_member(o, "auth_throttled", (gint64)l->auth_throttled);
	json_object_set_double_member(o, "cpu_user_s", round_ms(snap->cpu_user_s));
	json_object_set_double_member(o, "cpu_system_s", round_ms(snap->cpu_system_s));
	json_object_set_int_member(o, "idr_requests", (gint64)m->idr_requests);
	json_object_set_int_member(o, "idr_deferred", (gint64)m->idr_deferred);
	json_object_set_int_member(o, "recovery_requests", (gint64)l->recovery.requests);
	json_object_set_int_member(o, "recovery_granted", (gint64)l->recovery.granted);
	json_object_set_int_member(o, "recovery_deferred", (gint64)l->recovery.deferred);
	json_object_set_int_member(o, "recovery_dropped_client",
	                           (gint64)l->recovery.dropped_client);
	json_object_set_int_member(o, "recovery_served_by_encoder",
	                           (gint64)l->recovery.served_by_encoder);
	json_object_set_int_member(o, "idr_cost_bits", (gint64)l->recovery.idr_cost_bits);
	if (m->audio_frames || m->audio_dropped) {
		json_object_set_int_member(o, "audio_frames", (gint64)m->audio_frames);
		json_object_set_int_member(o, "audio_bytes", (gint64)m->audio_bytes);
		json_object_set_int_member(o, "audio_dropped", (gint64)m->audio_dropped);
		json_object_set_int_member(o, "audio_encode_errors",
		                           (gint64)m->audio_encode_errors);
	}
	for (int q = 0; q < r->quality_layers; q++) {
		json_array_add_int_element(layers, (gint64)m->bytes[q]);
		json_array_add_double_element(encode_ms, round_ms(m->encode_ms_per_frame[q]));
	}
	json_object_set_array_member(o, "layer_bytes", layers);
	json_object_set_array_member(o, "encode_ms_per_frame", encode_ms);
	/* The clients kept that had left by the snapshot and the connected
	 * ones, by id (the order they came in). */
	list = malloc((kept + snap->n_clients + 1) * sizeof(*list));
	if (list) {
		for (uint64_t i = snap->clients_left - kept; i < snap->clients_left; i++)
			list[n++] = &r->left[i % PPS_SERVER_REPORT_CLIENTS_KEPT];
		for (size_t i = 0; i < snap->n_clients; i++)
			list[n++] = &snap->clients[i];
		qsort(list, n, sizeof(*list), compare_client_ptr_id);
		for (size_t i = 0; i < n; i++)
			json_array_add_object_element(clients, client_object(list[i]));
		free(list);
	} else {
		omitted = snap->clients_left; /* out of memory: counted, not listed */
	}
	json_object_set_array_member(o, "clients", clients);
	json_object_set_int_member(o, "clients_left", (gint64)snap->clients_left);
	json_object_set_int_member(o, "clients_omitted", (gint64)omitted);
	text = to_line(o);
	json_object_unref(o);
	return text;
}

int
pps_server_report_final(const pps_server_report_t *srv, FILE *out, FILE *stats_json,
                        const char *stats_json_name, FILE *log, char *err, size_t err_size)
{
	pps_server_snapshot_t snap;
	char *text;
	int ret = 0;

	if (pps_server_report_snapshot(srv, &snap) < 0) {
		snprintf(err, err_size, "--stats-json: out of memory");
		return -ENOMEM;
	}
	if (out) {
		const pps_media_stats_t *ms = &snap.media;
		const pps_listener_stats_t *ls = &snap.listener;

		fprintf(out,
		        "pps-server: ran %.1f s: %" PRIu64 " frames encoded (%" PRIu64
		        " raw frames dropped before the encoder), %" PRIu64 " windows, %" PRIu64
		        " clients served, %" PRIu64 " refused (%" PRIu64 " unauthorized), %" PRIu64
		        " connections\n",
		        snap.duration_s, ms->frames_encoded, ms->capture_dropped, ms->windows,
		        ls->clients_total, ls->clients_refused + ls->clients_unauthorized,
		        ls->clients_unauthorized, ls->connections_total);
		for (size_t i = 0; i < snap.n_clients; i++) {
			const pps_server_client_t *c = &snap.clients[i];

			fprintf(out,
			        "pps-server: client #%u %s%s%s%s: windows %" PRIu64
			        " complete, %" PRIu64 " partial, %" PRIu64 " dropped; %" PRIu64
			        " ADU bytes sent; %" PRIu64 " writes, %" PRIu64
			        " retransmitted packets, %" PRIu64 " RTOs\n",
			        c->id, c->address, c->name[0] ? " \"" : "", c->name,
			        c->name[0] ? "\"" : "", c->sched.windows_complete,
			        c->sched.windows_partial, c->sched.windows_dropped,
			        c->adu_bytes_sent, c->transport.writes, c->transport.retrans_pkts,
			        c->transport.rto_events);
		}
	}
	if (stats_json || log) {
		text = pps_server_report_json(srv, &snap, "summary");
		if (log)
			fprintf(log, "%s\n", text);
		if (stats_json && (fprintf(stats_json, "%s\n", text) < 0 ||
		                   fflush(stats_json) != 0 || ferror(stats_json))) {
			ret = -(errno ? errno : EIO);
			snprintf(err, err_size, "--stats-json %s: cannot write: %s",
			         stats_json_name ? stats_json_name : "", strerror(-ret));
		}
		g_free(text);
	}
	pps_server_snapshot_clear(&snap);
	return ret;
}
