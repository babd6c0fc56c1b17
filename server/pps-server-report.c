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
pps_server_report_status(pps_server_report_t *srv)
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
	pps_listener_foreach(srv->listener, status_client_cb, &sl);
	if (ls.sessions && sl.len < sizeof(line) - 64)
		snprintf(line + sl.len, sizeof(line) - sl.len, " (complete/partial/dropped)");
	fprintf(stderr, "%s\n", line);
	srv->last_media = ms;
	srv->last_status_us = now;
}

typedef struct {
	bool quiet;
	FILE *json;
	bool first;
} final_t;

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
	if (!f->quiet)
		fprintf(stderr,
		        "pps-server: client #%u %s: windows %" PRIu64 " complete, %" PRIu64
		        " partial, %" PRIu64 " dropped; %" PRIu64 " ADU bytes sent; %" PRIu64
		        " writes, %" PRIu64 " retransmitted packets, %" PRIu64 " RTOs\n",
		        pps_session_id(session), pps_session_peer(session), st.windows_complete,
		        st.windows_partial, st.windows_dropped, bytes, ts.writes, ts.retrans_pkts,
		        ts.rto_events);
	if (f->json)
		fprintf(f->json,
		        "%s{\"id\":%u,\"windows_complete\":%" PRIu64 ",\"windows_partial\":%" PRIu64
		        ",\"windows_dropped\":%" PRIu64 ",\"windows_overflow\":%" PRIu64
		        ",\"adus_undecodable\":%" PRIu64 ",\"adu_bytes_sent\":%" PRIu64
		        ",\"wire_bytes\":%" PRIu64 ",\"writes\":%" PRIu64 ",\"wakeups\":%" PRIu64
		        ",\"retrans_pkts\":%" PRIu64 ",\"rto_events\":%" PRIu64
		        ",\"capped_writes\":%" PRIu64 ",\"estimate_bps\":%" PRIu64
		        ",\"min_rtt_us\":%u,\"queue_delay_us\":%u,\"cap_state\":\"%s\"}",
		        f->first ? "" : ",", pps_session_id(session), st.windows_complete,
		        st.windows_partial, st.windows_dropped, st.windows_overflow,
		        st.adus_undecodable, bytes, ts.bytes, ts.writes, ts.wakeups,
		        ts.retrans_pkts, ts.rto_events, ts.capped_writes, pe.estimate_bps,
		        pe.min_rtt_us, pe.queue_delay_us, pps_path_cap_state_name(pe.cap_state));
	f->first = false;
}

int
pps_server_report_final(const pps_server_report_t *srv, bool quiet, const char *stats_json)
{
	pps_media_stats_t ms;
	pps_listener_stats_t ls;
	final_t f = {.quiet = quiet, .first = true};
	struct rusage ru;
	int ret = 0;
	double secs = (double)(pps_time_realtime_us() - srv->start_us) / 1e6;

	pps_media_get_stats(srv->media, &ms);
	pps_listener_get_stats(srv->listener, &ls);
	getrusage(RUSAGE_SELF, &ru);
	if (!quiet) {
		fprintf(stderr,
		        "pps-server: ran %.1f s: %" PRIu64 " frames encoded (%" PRIu64
		        " raw frames dropped before the encoder), %" PRIu64 " windows, %" PRIu64
		        " clients served, %" PRIu64 " refused (%" PRIu64 " unauthorized)\n",
		        secs, ms.frames_encoded, ms.capture_dropped, ms.windows, ls.clients_total,
		        ls.clients_refused + ls.clients_unauthorized, ls.clients_unauthorized);
	}
	if (stats_json) {
		f.json = fopen(stats_json, "w");
		if (!f.json) {
			ret = -errno;
			fprintf(stderr, "pps-server: --stats-json %s: %s\n", stats_json,
			        strerror(errno));
		}
	}
	if (f.json) {
		fprintf(f.json,
		        "{\"seconds\":%.3f,\"frames_encoded\":%" PRIu64
		        ",\"raw_frames_dropped\":%" PRIu64 ",\"windows\":%" PRIu64
		        ",\"clients_total\":%" PRIu64 ",\"clients_refused\":%" PRIu64
		        ",\"clients_unauthorized\":%" PRIu64 ",\"clients_evicted\":%" PRIu64
		        ",\"handshakes_dropped\":%" PRIu64 ",\"refusals_unlogged\":%" PRIu64
		        ",\"cpu_user_s\":%.3f,\"cpu_system_s\":%.3f"
		        ",\"idr_requests\":%" PRIu64 ",\"idr_deferred\":%" PRIu64
		        ",\"recovery_requests\":%" PRIu64 ",\"recovery_granted\":%" PRIu64
		        ",\"recovery_deferred\":%" PRIu64 ",\"recovery_dropped_client\":%" PRIu64
		        ",\"recovery_served_by_encoder\":%" PRIu64 ",\"idr_cost_bits\":%" PRIu64
		        ",\"layer_bytes\":[",
		        secs, ms.frames_encoded, ms.capture_dropped, ms.windows, ls.clients_total,
		        ls.clients_refused, ls.clients_unauthorized, ls.clients_evicted,
		        ls.handshakes_dropped, ls.refusals_unlogged,
		        (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6,
		        (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6,
		        ms.idr_requests, ms.idr_deferred, ls.recovery.requests, ls.recovery.granted,
		        ls.recovery.deferred, ls.recovery.dropped_client,
		        ls.recovery.served_by_encoder, ls.recovery.idr_cost_bits);
		for (int q = 0; q < srv->quality_layers; q++)
			fprintf(f.json, "%s%" PRIu64, q ? "," : "", ms.bytes[q]);
		fprintf(f.json, "],\"clients\":[");
	}
	pps_listener_foreach(srv->listener, final_client_cb, &f);
	if (f.json) {
		fprintf(f.json, "]}\n");
		if (ferror(f.json) | (fclose(f.json) != 0)) {
			ret = -EIO;
			fprintf(stderr, "pps-server: --stats-json %s: cannot write\n", stats_json);
		}
	}
	return ret;
}
