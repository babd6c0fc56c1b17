/* SPDX-License-Identifier: MIT */
/*
 * What pps-server tells its user: the status line every [server]
 * status_interval_s, and the final counters on exit (stderr and
 * --stats-json), read from the media and listener objects.
 */
#include "pps-server-lib.h"
#include "pps-time.h"

#include <errno.h>
#include <inttypes.h>
#include <json-glib/json-glib.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

struct pps_server_report {
	pps_media_t *media;
	pps_listener_t *listener;
	int quality_layers;
	bool rate_adaptive;
	int64_t start_us;
	/* for rates between status lines */
	int64_t last_status_us;
	pps_media_stats_t last_media;
};

pps_server_report_t *
pps_server_report_new(pps_media_t *media, pps_listener_t *listener, int quality_layers,
                      bool rate_adaptive)
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
	r->start_us = r->last_status_us = pps_time_realtime_us();
	return r;
}

void
pps_server_report_free(pps_server_report_t *r)
{
	free(r);
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

typedef struct {
	FILE *out;          /* NULL: quiet */
	JsonArray *clients; /* --stats-json, else NULL */
} final_t;

/* Millisecond resolution, as before json-glib. json-glib still prints the
 * nearest double with 17 digits (2.0070000000000001): the value is right,
 * the look is not; left as is. */
static double
round_ms(double seconds)
{
	return round(seconds * 1000.0) / 1000.0;
}

static void
final_client_cb(pps_session_t *session, void *user)
{
	final_t *f = user;
	pps_sched_stats_t st;
	pps_minbuf_stats_t ts;
	pps_path_estimate_t pe;
	uint64_t bytes = 0;

	pps_session_get_sched_stats(session, &st);
	pps_session_get_transport_stats(session, &ts);
	pps_session_get_path(session, &pe);
	for (int t = 0; t < PPS_ADU_MAX_TEMPORAL_LAYERS; t++)
		for (int q = 0; q < PPS_ADU_MAX_QUALITY_LAYERS; q++)
			bytes += st.layer[t][q].bytes_sent;
	if (f->out)
		fprintf(f->out,
		        "pps-server: client #%u %s: windows %" PRIu64 " complete, %" PRIu64
		        " partial, %" PRIu64 " dropped; %" PRIu64 " ADU bytes sent; %" PRIu64
		        " writes, %" PRIu64 " retransmitted packets, %" PRIu64 " RTOs\n",
		        pps_session_id(session), pps_session_peer(session), st.windows_complete,
		        st.windows_partial, st.windows_dropped, bytes, ts.writes, ts.retrans_pkts,
		        ts.rto_events);
	if (f->clients) {
		JsonObject *o = json_object_new();

		json_object_set_int_member(o, "id", pps_session_id(session));
		if (pps_session_audio_only(session))
			json_object_set_boolean_member(o, "audio_only", TRUE);
		if (st.audio_sent || st.audio_late || st.audio_overflow || st.audio_refused) {
			json_object_set_int_member(o, "audio_sent", (gint64)st.audio_sent);
			json_object_set_int_member(o, "audio_late", (gint64)st.audio_late);
			json_object_set_int_member(o, "audio_overflow", (gint64)st.audio_overflow);
			json_object_set_int_member(o, "audio_refused", (gint64)st.audio_refused);
		}
		json_object_set_int_member(o, "windows_complete", (gint64)st.windows_complete);
		json_object_set_int_member(o, "windows_partial", (gint64)st.windows_partial);
		json_object_set_int_member(o, "windows_dropped", (gint64)st.windows_dropped);
		json_object_set_int_member(o, "windows_overflow", (gint64)st.windows_overflow);
		json_object_set_int_member(o, "adus_undecodable", (gint64)st.adus_undecodable);
		json_object_set_int_member(o, "adu_bytes_sent", (gint64)bytes);
		json_object_set_int_member(o, "wire_bytes", (gint64)ts.bytes);
		json_object_set_int_member(o, "writes", (gint64)ts.writes);
		json_object_set_int_member(o, "wakeups", (gint64)ts.wakeups);
		json_object_set_int_member(o, "retrans_pkts", (gint64)ts.retrans_pkts);
		json_object_set_int_member(o, "rto_events", (gint64)ts.rto_events);
		json_object_set_int_member(o, "capped_writes", (gint64)ts.capped_writes);
		json_object_set_string_member(o, "congestion", ts.congestion);
		json_object_set_int_member(o, "congestion_switches",
		                           (gint64)ts.congestion_switches);
		/* TLS: each packet one record, the largest never above the MSS. */
		if (ts.tls_records > 0) {
			json_object_set_int_member(o, "tls_records", (gint64)ts.tls_records);
			json_object_set_int_member(o, "tls_max_record_bytes",
			                           (gint64)ts.tls_max_record_bytes);
			json_object_set_int_member(o, "mss_bytes", (gint64)ts.mss_bytes);
		}
		json_object_set_int_member(o, "estimate_bps", (gint64)pe.estimate_bps);
		json_object_set_int_member(o, "min_rtt_us", pe.min_rtt_us);
		json_object_set_int_member(o, "queue_delay_us", pe.queue_delay_us);
		json_object_set_string_member(o, "cap_state",
		                              pps_path_cap_state_name(pe.cap_state));
		if (pe.fair_rate_bps) {
			json_object_set_int_member(o, "fair_rate_bps", (gint64)pe.fair_rate_bps);
			json_object_set_int_member(o, "loss_events", (gint64)pe.loss_events);
		}
		json_array_add_object_element(f->clients, o);
	}
}

/* --stats-json: the final counters, one JSON object (json-glib). */
static int
write_stats_json(const char *path, int quality_layers, double secs, const pps_media_stats_t *m,
                 const pps_listener_stats_t *l, const struct rusage *ru, JsonArray *clients,
                 char *err, size_t err_size)
{
	JsonObject *o = json_object_new();
	JsonArray *layers = json_array_new(), *encode_ms = json_array_new();
	JsonNode *node;
	char *text;
	FILE *f;
	int ret = 0;

	json_object_set_double_member(o, "seconds", round_ms(secs));
	json_object_set_int_member(o, "frames_encoded", (gint64)m->frames_encoded);
	json_object_set_int_member(o, "raw_frames_dropped", (gint64)m->capture_dropped);
	json_object_set_int_member(o, "windows", (gint64)m->windows);
	json_object_set_int_member(o, "windows_early", (gint64)m->windows_early);
	json_object_set_double_member(o, "capture_to_ready_p50_ms", m->capture_to_ready_p50_ms);
	json_object_set_double_member(o, "capture_to_ready_p95_ms", m->capture_to_ready_p95_ms);
	json_object_set_int_member(o, "clients_total", (gint64)l->clients_total);
	json_object_set_int_member(o, "audio_connections_total",
	                           (gint64)l->audio_connections_total);
	json_object_set_int_member(o, "connections_total", (gint64)l->connections_total);
	json_object_set_int_member(o, "clients_refused", (gint64)l->clients_refused);
	json_object_set_int_member(o, "clients_unauthorized", (gint64)l->clients_unauthorized);
	json_object_set_int_member(o, "clients_evicted", (gint64)l->clients_evicted);
	json_object_set_int_member(o, "handshakes_dropped", (gint64)l->handshakes_dropped);
	json_object_set_int_member(o, "log_lines_unlogged", (gint64)l->log_lines_unlogged);
	json_object_set_int_member(o, "auth_throttled", (gint64)l->auth_throttled);
	json_object_set_double_member(
	    o, "cpu_user_s",
	    round_ms((double)ru->ru_utime.tv_sec + (double)ru->ru_utime.tv_usec / 1e6));
	json_object_set_double_member(
	    o, "cpu_system_s",
	    round_ms((double)ru->ru_stime.tv_sec + (double)ru->ru_stime.tv_usec / 1e6));
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
	for (int q = 0; q < quality_layers; q++) {
		json_array_add_int_element(layers, (gint64)m->bytes[q]);
		json_array_add_double_element(encode_ms, round_ms(m->encode_ms_per_frame[q]));
	}
	json_object_set_array_member(o, "layer_bytes", layers);
	json_object_set_array_member(o, "encode_ms_per_frame", encode_ms);
	json_object_set_array_member(o, "clients", json_array_ref(clients));
	node = json_node_init_object(json_node_alloc(), o);
	text = json_to_string(node, FALSE);
	f = fopen(path, "w");
	if (!f) {
		ret = -errno;
		snprintf(err, err_size, "--stats-json %s: %s", path, strerror(errno));
	} else if ((fprintf(f, "%s\n", text) < 0) | (fclose(f) != 0)) {
		ret = -EIO;
		snprintf(err, err_size, "--stats-json %s: cannot write", path);
	}
	g_free(text);
	json_node_unref(node);
	json_object_unref(o);
	return ret;
}

int
pps_server_report_final(const pps_server_report_t *srv, FILE *out, const char *stats_json,
                        char *err, size_t err_size)
{
	pps_media_stats_t ms;
	pps_listener_stats_t ls;
	final_t f = {.out = out};
	struct rusage ru;
	int ret = 0;
	double secs = (double)(pps_time_realtime_us() - srv->start_us) / 1e6;

	pps_media_get_stats(srv->media, &ms);
	pps_listener_get_stats(srv->listener, &ls);
	getrusage(RUSAGE_SELF, &ru);
	if (out) {
		fprintf(out,
		        "pps-server: ran %.1f s: %" PRIu64 " frames encoded (%" PRIu64
		        " raw frames dropped before the encoder), %" PRIu64 " windows, %" PRIu64
		        " clients served, %" PRIu64 " refused (%" PRIu64 " unauthorized), %" PRIu64
		        " connections\n",
		        secs, ms.frames_encoded, ms.capture_dropped, ms.windows, ls.clients_total,
		        ls.clients_refused + ls.clients_unauthorized, ls.clients_unauthorized,
		        ls.connections_total);
	}
	if (stats_json)
		f.clients = json_array_new();
	pps_listener_foreach(srv->listener, final_client_cb, &f);
	if (stats_json) {
		ret = write_stats_json(stats_json, srv->quality_layers, secs, &ms, &ls, &ru,
		                       f.clients, err, err_size);
		json_array_unref(f.clients);
	}
	return ret;
}
