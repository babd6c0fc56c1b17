/* SPDX-License-Identifier: MIT */
/*
 * The server's key table and its translation into parameter structs. An enum
 * key's choices are the owning module's name table, indexed by its enum, so
 * the index pps_config_get_enum() returns is the enum value. A module's
 * numeric default is written once, in its header, and used here as text.
 */
#include "pps-server-settings.h"

#include "pps-adapt.h"
#include "pps-audio.h"
#include "pps-codec.h"
#include "pps-minbuf.h"
#include "pps-prioritizer.h"
#include "pps-wire.h"

#include <errno.h>
#include <glib.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define STR_(x) #x
#define STR(x)  STR_(x)

/* [server] publish_audio: 0 in the windows, 1 a connection of its own. */
static const char *const pps_server_publish_audio_names[] = {"window", "connection", NULL};

/* [audio] transport, indexed by STREAM_INFO's audio_transport. */
/* [pps] droppable, in pps_encoder_params_t.disposable_p. */
enum { DROPPABLE_B_FRAMES, DROPPABLE_P_FRAMES };
static const char *const droppable_names[] = {"b-frames", "p-frames", NULL};
static const char *const audio_transport_names[] = {
    [PPS_WIRE_AUDIO_IN_STREAM] = "window",
    [PPS_WIRE_AUDIO_OWN_CONNECTION] = "connection",
    NULL,
};

/*
 * An access token is only as good as its guessing is hard: anyone who sees a
 * CHALLENGE and its AUTH (no TLS) can test guesses offline at any speed. At
 * least 16 characters of which 8 different (a floor against "password" and
 * "aaaa...", not a measure of entropy).
 */
#define PPS_SERVER_TOKEN_MIN_BYTES    16
#define PPS_SERVER_TOKEN_MIN_DISTINCT 8

static unsigned
distinct_bytes(const char *text)
{
	bool seen[256] = {false};
	unsigned n = 0;

	for (const unsigned char *c = (const unsigned char *)text; *c; c++)
		if (!seen[*c]) {
			seen[*c] = true;
			n++;
		}
	return n;
}

static bool
token_strong(const char *token)
{
	return strlen(token) >= PPS_SERVER_TOKEN_MIN_BYTES &&
	       distinct_bytes(token) >= PPS_SERVER_TOKEN_MIN_DISTINCT;
}

static const pps_config_key_t keys[] = {
    /* [server] */
    PPS_CONFIG_ADDRESS(
        "server", "listen", "127.0.0.1:7400",
        "address and TCP port to listen on ([v6addr]:port for IPv6; port 0 = any free one)"),
    PPS_CONFIG_INT(
        "server", "max_clients", "16", 1, PPS_SERVER_MAX_CLIENTS_BOUND,
        "clients streaming at once; more are refused with BYE (connections still in their "
        "handshake are bounded apart: max_pending); the open-files limit must allow them "
        "(the server raises its soft limit to the hard one and warns when that is short)"),
    PPS_CONFIG_INT(
        "server", "max_pending", "64", 1, 1024,
        "connections in their handshake (TLS, HELLO, AUTH) at once; at the bound, the one "
        "dropped for a newcomer is of the address holding most of them, of those the one "
        "that has sent least, then the oldest (the newcomer itself if it is that one)"),
    PPS_CONFIG_INT("server", "status_interval_s", "5", 1, 3600,
                   "seconds between status lines on stderr"),
    PPS_CONFIG_INT("server", "max_clients_per_address", "24", 1, PPS_SERVER_MAX_CLIENTS_BOUND,
                   "connections from one IP address at once (streaming or in their handshake; a "
                   "client with audio opens thirteen by default: its video and a pool of "
                   "twelve audio connections)"),
    PPS_CONFIG_INT(
        "server", "evict_after_s", "10", 0, 3600,
        "a client that takes no data for this long (it stopped reading) is dropped with BYE "
        "too-slow; 0 = never"),
    PPS_CONFIG_INT(
        "server", "recovery_budget_pct", "5", 0, 100,
        "IDRs forced for clients that joined or lost their base layer may add at most this "
        "share of the encoded rate (a token bucket in bits; beyond it requests wait, at "
        "least 500 ms apart in any case); 0 = time bound only"),
    PPS_CONFIG_STRING(
        "server", "access_token", "",
        "if set, only clients that prove they hold this token are served (client."
        "access_token; challenge-response with HMAC-SHA256, the token never crosses the "
        "wire; the stream itself is not encrypted unless tls_cert is set); at least 16 "
        "characters with 8 different ones; wrong tokens from one address are answered "
        "5 at once, then 2 a second"),
    PPS_CONFIG_STRING(
        "server", "tls_cert", "",
        "PEM file of the server's certificate (chain): with tls_key, every connection is "
        "TLS 1.3 (pps-client: client.tls = true; browsers: https:// and wss://); each "
        "MIN_BUF packet is one record of at most one MSS"),
    PPS_CONFIG_STRING("server", "tls_key", "",
                      "PEM file of tls_cert's private key (both or neither)"),
    PPS_CONFIG_BOOL("server", "relay_tls", "false",
                    "TLS 1.3 on the connection to a relay (pps-server --publish, ppssink "
                    "publish=, pps-relay --upstream): the relay's certificate is verified "
                    "for the host named, against relay_tls_ca"),
    PPS_CONFIG_ENUM("server", "publish_audio", "window", pps_server_publish_audio_names,
                    "publishing to a relay: where the audio travels: window = in the video's "
                    "windows on the one connection; connection = a thin connection of its own "
                    "to the relay (on a 1 Mbit/s uplink with a 5-packet queue it played less "
                    "than in the windows: docs/RELAY.md)"),
    PPS_CONFIG_STRING("server", "relay_tls_ca", "",
                      "with relay_tls: PEM file of the CAs or certificate that vouch for "
                      "the relay (its own self-signed one will do); empty: the system's "
                      "store"),
    PPS_CONFIG_ENUM(
        "server", "metrics", "off", pps_server_metrics_mode_names,
        "GET /metrics on the listener: the server's and each streaming client's figures in "
        "the Prometheus text format (?format=json: as --stats-json; docs/JSON.md): off (404), "
        "on (anyone who reaches the listener) or token (access_token as a bearer token or "
        "?token=)"),
    PPS_CONFIG_STRING(
        "server", "record", "",
        "file to record the stream into as encoded (every quality layer's H.264, one track "
        "each, the base first; capture times as presentation times), in Matroska (a name "
        "ending in .nut is refused); opened at start-up; \"\" = none (pps-server --record "
        "FILE)"),

    /* [source] */
    PPS_CONFIG_ENUM(
        "source", "type", "test", pps_capture_source_names,
        "video source: test (built-in moving pattern), camera, file, uri (anything "
        "uridecodebin plays: files, RTSP, HTTP; audio ignored) or pipeline; a source that is "
        "not live is paced to real time and looped"),
    PPS_CONFIG_STRING("source", "device", "/dev/video0", "V4L2 device for type=camera"),
    PPS_CONFIG_STRING("source", "file", "",
                      "media file for type=file, played in real time and looped, at its own "
                      "size and frame rate unless width, height or fps are set (type=uri too)"),
    PPS_CONFIG_STRING(
        "source", "uri", "",
        "URI for type=uri (file:///clip.mp4, rtsp://camera/stream, https://host/video.mp4); "
        "a plain path is a file: /clip.mp4 is file:///clip.mp4, clip.mp4 in the current folder"),
    PPS_CONFIG_STRING("source", "pipeline", "",
                      "gst-launch description for type=pipeline; ppstream appends its own sink"),
    PPS_CONFIG_ENUM("source", "pattern", "ball", pps_capture_pattern_names,
                    "videotestsrc pattern for type=test"),
    /* Even: the encoder and the I420 pictures take whole chroma samples. */
    PPS_CONFIG_INT_MULTIPLE("source", "width", "640", 64, 3840, 2, "frame width in pixels"),
    PPS_CONFIG_INT_MULTIPLE("source", "height", "480", 64, 2160, 2, "frame height in pixels"),
    PPS_CONFIG_INT("source", "fps", "30", 1, 120, "frames per second"),
    PPS_CONFIG_ENUM(
        "source", "timecode", "auto", pps_capture_timecode_names,
        "stamp capture time and frame index into the picture (pixel timecode, a barcode in "
        "the top-left corner); auto = only for type=test"),
    PPS_CONFIG_INT("source", "queue_frames", "8", 1, 256,
                   "raw frames held between capture and encoder; the oldest is dropped when full"),

    /* [audio] */
    PPS_CONFIG_ENUM(
        "audio", "source", "source", pps_capture_audio_names,
        "the audio track: source = the video source's own (the test source: ticks in step with "
        "a flash in the picture; file and uri: their sound; pipeline: an element named "
        "pps_audio_src), ticks, mic (the default PulseAudio/ALSA input) or off; clients that "
        "do not ask for audio are sent none"),
    PPS_CONFIG_ENUM(
        "audio", "transport", "connection", audio_transport_names,
        "where audio frames travel: connection = a second TCP connection of the client's, "
        "a thin stream (no cork, TCP_NODELAY, linear timeouts, small NOTSENT_LOWAT, rto_min_ms; "
        "publishing, a second connection to the relay); "
        "window = ahead of the video in the video's connection"),
    PPS_CONFIG_INT("audio", "frame_ms", "20", 10, 20, "Opus frame length: 10 or 20 ms"),
    PPS_CONFIG_INT("audio", "bitrate_kbps", "32", 16, 64, "Opus bit rate"),
    PPS_CONFIG_BOOL("audio", "fec", "true",
                    "Opus in-band FEC: each frame carries a coarse copy of the one before"),
    PPS_CONFIG_INT("audio", "loss_percent", "5", 0, 100,
                   "loss the Opus encoder plans its FEC for (0 turns the FEC's bits off)"),
    PPS_CONFIG_INT("audio", "deadline_ms", "250", 20, 5000,
                   "an audio frame still unsent this long after its capture is dropped"),
    PPS_CONFIG_INT("audio", "rto_min_ms", "20", 0, 200,
                   "transport = connection: the audio connection's minimum retransmission timeout "
                   "(TCP_RTO_MIN_US, Linux 6.15 and later); 0 = the kernel's (200 ms)"),
    PPS_CONFIG_BOOL(
        "audio", "thin", "true",
        "transport = connection: the thin-stream settings on the audio connection (off: a "
        "plain TCP connection with the kernel's buffering and timeouts, for comparison)"),
    PPS_CONFIG_INT(
        "audio", "copies", "2", 0, PPS_WIRE_MAX_AUDIO_COPIES,
        "transport = connection: a client that opens a pool of audio connections gets each "
        "frame on at most this many of them (one on a clean path, two above 0.5% of frames "
        "retransmitted, three above 3%): idle ones (nothing unacknowledged) first, those whose "
        "oldest frame is overdue (likely lost) last, so that a frame rarely waits behind a "
        "lost one; 0 = every audio connection carries every frame "
        "(as clients without pools always get it)"),
    PPS_CONFIG_INT("audio", "copies_off_loss_permille", "95", 0, 1000,
                   "transport = connection, a client's audio connections outside a pool "
                   "(each carrying every frame): while its first one retransmits more than "
                   "this many frames per thousand, the others carry none (a queue so short "
                   "that the audio's own copies fill it), again below half of it; only where "
                   "the address has one client; 0 = always every frame on every one"),
    PPS_CONFIG_INT("audio", "copy_spacing_ms", "12", 0, 20,
                   "copies = 2 or more: time between one frame's copies, so that one burst of "
                   "drops at a full queue does not take them all"),
    PPS_CONFIG_INT("audio", "speech_threshold_dbfs", "-50", -96, 0,
                   "a frame louder than this is speech: talkspurts start where it is crossed"),

    /* [encoder] */
    PPS_CONFIG_INT("encoder", "temporal_layers", "3", 1, 3,
                   "temporal layers: 1 (I/P), 2 (I/P + b), 3 (I/P + B-ref + b)"),
    PPS_CONFIG_INT("encoder", "quality_layers", "2", 1, 3,
                   "quality layers: base + residual enhancement layers"),
    PPS_CONFIG_INT("encoder", "base_scale", "2", 1, 4,
                   "base layer is encoded at 1/base_scale of the width and height"),
    PPS_CONFIG_INT("encoder", "gop_frames", "60", 4, 1200,
                   "frames between forced IDR pictures (rounded to a whole number of windows)"),
    PPS_CONFIG_ENUM("encoder", "preset", "veryfast", pps_encoder_preset_names, "x264 speed preset"),
    PPS_CONFIG_INT("encoder", "threads", "0", 0, 64, "x264 threads per layer; 0 = automatic"),
    PPS_CONFIG_INT("encoder", "base_crf", "26", 0, 51, "constant rate factor of the base layer"),
    PPS_CONFIG_INT(
        "encoder", "base_vbv_kbps", "1000", 0, 100000,
        "VBV cap of the base layer in kbit/s (its upper bound with adapt.mode=closed-loop); "
        "0 = uncapped"),
    PPS_CONFIG_INT("encoder", "enhancement_crf", "24", 0, 51,
                   "constant rate factor of each enhancement layer"),
    PPS_CONFIG_INT("encoder", "enhancement_vbv_kbps", "3000", 0, 100000,
                   "VBV cap of each enhancement layer in kbit/s (its upper bound with "
                   "adapt.mode=closed-loop); 0 = uncapped"),

    /* [pps] */
    PPS_CONFIG_INT("pps", "window_frames", "2", 1, PPS_WIRE_MAX_WINDOW_FRAMES,
                   "frames per adaptation window (the papers use 2 and 4 at 30 frames/s)"),
    PPS_CONFIG_INT("pps", "latency_budget_ms", "250", 10, 10000,
                   "a window's send deadline is its first frame's capture time plus this"),
    PPS_CONFIG_ENUM(
        "pps", "priority_policy", "temporal-first", pps_priority_policy_names,
        "what to drop first: temporal-first keeps frame rate, quality-first keeps quality"),
    PPS_CONFIG_INT(
        "pps", "base_grace_ms", "1000", 0, 10000,
        "base-layer reference pictures (the IDR/P chain later frames need) are still sent "
        "up to this long after their window's deadline; 0 = dropped at the deadline"),
    PPS_CONFIG_INT(
        "pps", "restart_backoff", "8", 0, 64,
        "a client's enhancement layer whose restart at an IDR failed (the IDR cut before it "
        "was whole, or the layer cut within 300 ms of it) skips its next IDR, then 2, 4, ... "
        "up to this many, so that a path too slow for the layer's IDRs does not take one at "
        "every GOP; a layer that lasts longer clears it; 0 = every IDR restarts the layer"),
    PPS_CONFIG_INT(
        "pps", "restart_fit_pct", "50", 0, 1000,
        "a client's enhancement layer restarts at an IDR only while its path estimate is at "
        "least this % of what the encoder makes of that layer and the layers below it (the "
        "last 64 windows): a path that cannot carry the layer gets none of its IDRs; "
        "0 = no such check"),
    PPS_CONFIG_ENUM(
        "pps", "deadlines", "window", pps_deadlines_names,
        "when the regulator drops unsent data: window drops what is left at the window's "
        "deadline; adu gives each ADU its own (the earliest capture among the frames decoded "
        "from it on, plus latency_budget_ms), so a later frame's data may go out after the "
        "first frame's deadline; predictive is adu, and an ADU the path estimate says cannot "
        "reach the client by its deadline is dropped before it is written"),
    PPS_CONFIG_ENUM(
        "pps", "b_frames", "on-drops", pps_b_frames_names,
        "when the windows carry their B frames (the droppable temporal layer, which makes a "
        "window wait for its last frame): on-drops: only while the regulator of a client "
        "that is still reading drops, a client's path is shared with other flows, or a "
        "client that joined has not had its path read clean yet; anchors alone (each frame "
        "out as it is captured) otherwise; on-cuts: the same but a shared path alone does not "
        "count (random loss reads as one); always: in every window"),
    PPS_CONFIG_ENUM(
        "pps", "droppable", "b-frames", droppable_names,
        "what the droppable temporal layer's pictures are: b-frames, coded after the anchor "
        "that follows them (a window's first frame waits for its last); p-frames, disposable "
        "P frames coded when captured and referencing the anchor before them (at most two "
        "temporal layers; clients of this version)"),
    PPS_CONFIG_INT("pps", "b_frames_hold_ms", "5000", 100, 600000,
                   "b_frames = on-drops or on-cuts: time without a drop (on-drops: or "
                   "competition) before the anchors come back (doubled, up to 8 times, while "
                   "they do not last)"),
    PPS_CONFIG_INT("pps", "max_windows", STR(PPS_DEFAULT_MAX_WINDOWS), 2, 1024,
                   "windows queued per client; past it the oldest is dropped and counted"),

    /* [transport] */
    PPS_CONFIG_ENUM(
        "transport", "mode", "minbuf", pps_minbuf_mode_names,
        "tcp (kernel send buffer) or minbuf (at most A*cwnd + min(B, cwnd) packets in the kernel)"),
    PPS_CONFIG_INT("transport", "minbuf_a", STR(PPS_DEFAULT_MINBUF_A), 1, 16,
                   "MIN_BUF A: multiple of cwnd kept in the kernel"),
    PPS_CONFIG_INT("transport", "minbuf_b", STR(PPS_DEFAULT_MINBUF_B), 0, 64,
                   "MIN_BUF B: extra packets kept in the kernel"),
    PPS_CONFIG_BOOL("transport", "ecn", "false", "negotiate ECN on each connection"),
    PPS_CONFIG_ENUM(
        "transport", "congestion", "bbr", pps_minbuf_congestion_names,
        "TCP congestion control per connection; default = the system's; bbr keeps its window "
        "through losses, under the tcp-friendly rate control; one the kernel refuses leaves "
        "the system's (with a warning)"),
    PPS_CONFIG_ENUM(
        "transport", "congestion_alone", "cubic", pps_minbuf_congestion_alone_names,
        "minbuf mode, yielding latency cap: the congestion control while the stream is alone "
        "on its path, switched on the live connection (congestion while others share the "
        "queue); cubic has no bbr ProbeRTT stall; same = never switch"),
    PPS_CONFIG_BOOL("transport", "thin_linear_timeouts", "false",
                    "TCP_THIN_LINEAR_TIMEOUTS: no exponential RTO backoff while the flow is thin"),
    PPS_CONFIG_INT("transport", "rto_min_ms", "0", 0, 200,
                   "the video connection's minimum retransmission timeout (TCP_RTO_MIN_US, "
                   "Linux 6.15 and later); 0 = the kernel's (200 ms)"),
    PPS_CONFIG_BOOL(
        "transport", "pacing", "false",
        "the kernel paces each connection at its congestion control's rate (SO_MAX_PACING_RATE "
        "turns on TCP's internal pacing) instead of sending a window's packets in a burst"),
    PPS_CONFIG_ENUM(
        "transport", "latency_cap", "yielding", pps_latency_cap_names,
        "minbuf mode: keep in flight <= estimate * (5/4 min RTT + queue target); yielding "
        "lifts it while other flows hold the queue, always never does, off = MIN_BUF alone"),
    PPS_CONFIG_INT(
        "transport", "queue_target_ms", "0", 0, 10000,
        "queueing the latency cap lets the stream add on its path; 0 = latency_budget_ms / 5"),
    PPS_CONFIG_ENUM(
        "transport", "rate_control", "tcp-friendly", pps_rate_control_names,
        "congestion: the congestion control alone sets the sending rate; tcp-friendly (minbuf "
        "mode): while other flows hold the queue, the kernel paces each connection at most at "
        "an AIMD rate on its losses (a loss-based TCP's share), best with congestion = bbr"),
    PPS_CONFIG_INT("transport", "copy_spacing_ms", "12", 0, 40,
                   "a client viewing the stream on more than one connection (client.copies): "
                   "each copy gets every window this much later than the connection before it, "
                   "so that one burst of drops at a full queue does not take every copy's "
                   "packets; 0 = all at once"),
    PPS_CONFIG_BOOL("transport", "copy_rest", "true",
                    "a copy of the stream (client.copies) carries the windows only while the "
                    "client's own connection loses packets again and again (retransmissions in "
                    "3 of the last 6 seconds), or one with no queue of its own, in the last "
                    "10 s; else each window reaches it as a lone rested WINDOW_END (a copy "
                    "costs nothing on a clean path of the stream's own); false = always"),
    PPS_CONFIG_INT(
        "transport", "pacing_gain_pct", "200", 100, 400,
        "tcp-friendly rate control: the pacing rate as a share of the AIMD rate; what is held in "
        "the kernel stays at the AIMD rate times a round trip, so above 100 a picture leaves in "
        "a shorter burst at the same average rate"),

    /* [adapt] */
    PPS_CONFIG_ENUM(
        "adapt", "mode", "closed-loop", pps_adapt_mode_names,
        "closed-loop: the clients' path estimates steer each layer's rate, largest picture and "
        "CRF; fixed: the [encoder] CRF and VBV settings for the whole run"),
    PPS_CONFIG_INT("adapt", "base_share_pct", "70", 10, 100,
                   "base layer rate as a share of the slowest client's estimated rate"),
    PPS_CONFIG_INT("adapt", "base_memory_ms", "2000", 0, 10000,
                   "the base layer is sized to the slowest client's lowest estimate over this "
                   "long (a rate that swings, as an AIMD's does, must carry the base in its "
                   "troughs too; rises wait this long, falls act at once); 0 = its latest"),
    PPS_CONFIG_INT("adapt", "probe_pct", "125", 100, 200,
                   "top of the enhancement layers as a share of the fastest client's estimate (the "
                   "excess is the probe; the regulator drops what does not fit)"),
    PPS_CONFIG_INT("adapt", "min_base_kbps", "100", 16, 100000,
                   "the base layer's rate never goes below this"),
    PPS_CONFIG_INT("adapt", "min_crf", "18", 0, 51,
                   "finest CRF the loop may ask for when capacity is spare ([encoder] *_crf is the "
                   "coarsest)"),
    PPS_CONFIG_INT("adapt", "interval_ms", "250", 50, 5000,
                   "time between rate decisions (each applied at the next mini-GOP)"),
    PPS_CONFIG_INT(
        "adapt", "drain_crf", "9", 0, 24,
        "while every viewer still has a window unsent when the next one is ready, the "
        "encoder codes up to this much coarser (CRF) until the queue is gone; 0 = never"),

};

static const pps_config_schema_t schema = {
    .program = "server",
    .keys = keys,
    .n_keys = sizeof(keys) / sizeof(keys[0]),
};

const pps_config_schema_t *
pps_server_settings_schema(void)
{
	return &schema;
}

/* [transport] mode, minbuf_a, minbuf_b, ecn, congestion, congestion_alone,
 * thin_linear_timeouts, pacing, rto_min_ms. */
static void
minbuf_params(const pps_config_t *config, pps_minbuf_params_t *out)
{
	pps_minbuf_params_init(out);
	out->mode = (pps_minbuf_mode_t)pps_config_get_enum(config, "transport", "mode");
	out->a = (unsigned)pps_config_get_int(config, "transport", "minbuf_a");
	out->b = (unsigned)pps_config_get_int(config, "transport", "minbuf_b");
	out->ecn = pps_config_get_bool(config, "transport", "ecn");
	out->congestion =
	    (pps_minbuf_congestion_t)pps_config_get_enum(config, "transport", "congestion");
	out->congestion_alone =
	    (pps_minbuf_congestion_t)pps_config_get_enum(config, "transport", "congestion_alone");
	out->thin_linear_timeouts =
	    pps_config_get_bool(config, "transport", "thin_linear_timeouts");
	out->pacing = pps_config_get_bool(config, "transport", "pacing");
	out->rto_min_us = (uint32_t)pps_config_get_int(config, "transport", "rto_min_ms") * 1000;
}

/* [server], [pps] and [transport]: the listener and every session
 * (stream_info and frame_duration_us are the media's, left zero). */
static int
listener_params(const pps_config_t *c, pps_listener_params_t *lp, char *err, size_t err_size)
{
	pps_session_params_t *sp = &lp->session;

	memset(lp, 0, sizeof(*lp));
	lp->max_clients = (unsigned)pps_config_get_int(c, "server", "max_clients");
	lp->max_per_address = (unsigned)pps_config_get_int(c, "server", "max_clients_per_address");
	lp->max_pending = (unsigned)pps_config_get_int(c, "server", "max_pending");
	lp->recovery.min_interval_us = PPS_DEFAULT_RECOVERY_MIN_INTERVAL_US;
	lp->recovery.client_interval_us = PPS_SESSION_LOSS_IDR_INTERVAL_US;
	lp->recovery.budget_pct = (unsigned)pps_config_get_int(c, "server", "recovery_budget_pct");
	sp->access_token = pps_config_get_string(c, "server", "access_token");
	if (strlen(sp->access_token) > PPS_WIRE_MAX_AUTH_BYTES) {
		snprintf(err, err_size, "[server] access_token: at most %d bytes",
		         PPS_WIRE_MAX_AUTH_BYTES);
		return -EINVAL;
	}
	if (sp->access_token[0] && !token_strong(sp->access_token)) {
		snprintf(
		    err, err_size,
		    "[server] access_token: too weak (%zu characters, %u different): at least "
		    "%d characters with %d different ones, e.g. from `openssl rand -base64 18`",
		    strlen(sp->access_token), distinct_bytes(sp->access_token),
		    PPS_SERVER_TOKEN_MIN_BYTES, PPS_SERVER_TOKEN_MIN_DISTINCT);
		return -EINVAL;
	}
	lp->tls_cert = pps_config_get_string(c, "server", "tls_cert");
	lp->tls_key = pps_config_get_string(c, "server", "tls_key");
	if (!lp->tls_cert[0] != !lp->tls_key[0]) {
		snprintf(err, err_size, "[server] %s: needed with %s (TLS takes both or neither)",
		         lp->tls_cert[0] ? "tls_key" : "tls_cert",
		         lp->tls_cert[0] ? "tls_cert" : "tls_key");
		return -EINVAL;
	}
	sp->evict_after_us = pps_config_get_int(c, "server", "evict_after_s") * 1000000;
	sp->hello_timeout_us = PPS_DEFAULT_HELLO_TIMEOUT_US;
	sp->sched.latency_budget_us = pps_config_get_int(c, "pps", "latency_budget_ms") * 1000;
	sp->sched.base_grace_us = pps_config_get_int(c, "pps", "base_grace_ms") * 1000;
	sp->sched.deadlines = (pps_deadlines_t)pps_config_get_enum(c, "pps", "deadlines");
	sp->sched.restart_backoff_max = (unsigned)pps_config_get_int(c, "pps", "restart_backoff");
	sp->sched.restart_fit_pct = (unsigned)pps_config_get_int(c, "pps", "restart_fit_pct");
	sp->sched.max_windows = (unsigned)pps_config_get_int(c, "pps", "max_windows");
	sp->copy_spacing_us = pps_config_get_int(c, "transport", "copy_spacing_ms") * 1000;
	sp->copy_rest = pps_config_get_bool(c, "transport", "copy_rest");
	minbuf_params(c, &sp->transport);
	if (sp->transport.rto_min_us == 1000) {
		snprintf(err, err_size,
		         "[transport] rto_min_ms: 1, expected 0 (the kernel's) or 2..200");
		return -EINVAL;
	}
	sp->path.cap_policy =
	    (pps_latency_cap_policy_t)pps_config_get_enum(c, "transport", "latency_cap");
	sp->path.queue_target_us = pps_config_get_int(c, "transport", "queue_target_ms") * 1000;
	/* Only MIN_BUF keeps what the pacer holds back out of the kernel: in
	 * mode tcp a rate cap would queue the stream in its send buffer. */
	sp->path.rate_control =
	    sp->transport.mode == PPS_MINBUF_MODE_MINBUF
	        ? (pps_rate_control_t)pps_config_get_enum(c, "transport", "rate_control")
	        : PPS_RATE_CONTROL_CONGESTION;
	sp->path.pacing_gain_pct = pps_config_get_int(c, "transport", "pacing_gain_pct");
	if (sp->path.queue_target_us == 0)
		sp->path.queue_target_us = sp->sched.latency_budget_us / 5;
	/* Only the yielding cap knows whether others share the path, and a
	 * switch needs a named congestion control on both sides. */
	if (sp->transport.mode != PPS_MINBUF_MODE_MINBUF ||
	    sp->path.cap_policy != PPS_LATENCY_CAP_YIELDING ||
	    sp->transport.congestion == PPS_MINBUF_CONGESTION_DEFAULT)
		sp->transport.congestion_alone = PPS_MINBUF_CONGESTION_DEFAULT;
	return 0;
}

/* The key that names each source type's input ("": none). */
static const char *const source_input_keys[PPS_CAPTURE_SOURCE_COUNT] = {
    [PPS_CAPTURE_SOURCE_TEST] = "",
    [PPS_CAPTURE_SOURCE_CAMERA] = "device",
    [PPS_CAPTURE_SOURCE_FILE] = "file",
    [PPS_CAPTURE_SOURCE_URI] = "uri",
    [PPS_CAPTURE_SOURCE_PIPELINE] = "pipeline",
};

/*
 * [source] uri as uridecodebin takes it: a value without a scheme is a path,
 * made absolute (against the current folder) and a file:// URI, since that
 * is what its writer meant and GStreamer's "Invalid URI" does not say so.
 */
static int
source_uri(const char *value, char *out, size_t out_size, char *err, size_t err_size)
{
	const char *scheme = g_uri_peek_scheme(value); /* interned: not freed */
	gchar *path = NULL, *uri = NULL;
	GError *error = NULL;
	int ret = 0;

	if (!scheme) {
		path = g_canonicalize_filename(value, NULL);
		uri = g_filename_to_uri(path, NULL, &error);
	}
	if (!scheme && !uri) {
		snprintf(err, err_size, "[source] uri = %s: neither a URI nor a path (%s)", value,
		         error->message);
		g_error_free(error);
		ret = -EINVAL;
	} else if ((size_t)snprintf(out, out_size, "%s", uri ? uri : value) >= out_size) {
		snprintf(err, err_size, "[source] uri: longer than %zu bytes", out_size - 1);
		ret = -EINVAL;
	}
	g_free(uri);
	g_free(path);
	return ret;
}

/* [source]: what to capture. @uri holds a type=uri source's URI. */
static int
capture_params(const pps_config_t *c, pps_capture_params_t *p, char *uri, size_t uri_size,
               char *err, size_t err_size)
{
	const char *input_key;

	memset(p, 0, sizeof(*p));
	p->type = (pps_capture_source_t)pps_config_get_enum(c, "source", "type");
	input_key = source_input_keys[p->type];
	p->input = input_key[0] ? pps_config_get_string(c, "source", input_key) : "";
	if (pps_capture_source_needs_input(p->type) && !p->input[0]) {
		snprintf(err, err_size, "source %s: [source] %s is not set",
		         pps_capture_source_names[p->type], input_key);
		return -EINVAL;
	}
	if (p->type == PPS_CAPTURE_SOURCE_URI) {
		int ret = source_uri(p->input, uri, uri_size, err, err_size);

		if (ret < 0)
			return ret;
		p->input = uri;
	}
	p->pattern = pps_capture_pattern_names[pps_config_get_enum(c, "source", "pattern")];
	p->width = (int)pps_config_get_int(c, "source", "width");
	p->height = (int)pps_config_get_int(c, "source", "height");
	p->fps = (int)pps_config_get_int(c, "source", "fps");
	p->queue_frames = (int)pps_config_get_int(c, "source", "queue_frames");
	p->timecode = (pps_capture_timecode_t)pps_config_get_enum(c, "source", "timecode");
	return 0;
}

/* [source] size and rate, [encoder] and [pps] window_frames. */
static void
encoder_params(const pps_config_t *c, pps_encoder_params_t *p)
{
	memset(p, 0, sizeof(*p));
	p->width = (int)pps_config_get_int(c, "source", "width");
	p->height = (int)pps_config_get_int(c, "source", "height");
	p->fps = (int)pps_config_get_int(c, "source", "fps");
	p->temporal_layers = (int)pps_config_get_int(c, "encoder", "temporal_layers");
	p->quality_layers = (int)pps_config_get_int(c, "encoder", "quality_layers");
	p->base_scale = (int)pps_config_get_int(c, "encoder", "base_scale");
	p->gop_frames = (int)pps_config_get_int(c, "encoder", "gop_frames");
	p->window_frames = (int)pps_config_get_int(c, "pps", "window_frames");
	p->preset = pps_encoder_preset_names[pps_config_get_enum(c, "encoder", "preset")];
	p->threads = (int)pps_config_get_int(c, "encoder", "threads");
	p->base_crf = (int)pps_config_get_int(c, "encoder", "base_crf");
	p->base_vbv_kbps = (int)pps_config_get_int(c, "encoder", "base_vbv_kbps");
	p->enhancement_crf = (int)pps_config_get_int(c, "encoder", "enhancement_crf");
	p->enhancement_vbv_kbps = (int)pps_config_get_int(c, "encoder", "enhancement_vbv_kbps");
	p->rate_adaptive = pps_config_get_enum(c, "adapt", "mode") == PPS_ADAPT_MODE_CLOSED_LOOP;
	p->anchor_windows = pps_config_get_enum(c, "pps", "b_frames") != PPS_B_FRAMES_ALWAYS;
	p->disposable_p = pps_config_get_enum(c, "pps", "droppable") == DROPPABLE_P_FRAMES;
}

/* [audio]: the capture's audio, the Opus encoder, and the sessions'
 * deadline and thin-stream minimum RTO. */
static int
audio_params(const pps_config_t *c, pps_media_params_t *media, pps_session_params_t *session,
             char *err, size_t err_size)
{
	pps_media_audio_params_t *a = &media->audio;
	int64_t rto_min_ms = pps_config_get_int(c, "audio", "rto_min_ms");

	media->capture.audio = (pps_capture_audio_t)pps_config_get_enum(c, "audio", "source");
	pps_audio_encoder_params_init(&a->encoder);
	a->encoder.frame_ms = (int)pps_config_get_int(c, "audio", "frame_ms");
	if (a->encoder.frame_ms != 10 && a->encoder.frame_ms != 20) {
		snprintf(err, err_size, "[audio] frame_ms: %d, expected 10 or 20",
		         a->encoder.frame_ms);
		return -EINVAL;
	}
	if (rto_min_ms == 1) {
		snprintf(err, err_size,
		         "[audio] rto_min_ms: 1, expected 0 (the kernel's) or 2..200");
		return -EINVAL;
	}
	a->encoder.bitrate_bps = (int)pps_config_get_int(c, "audio", "bitrate_kbps") * 1000;
	a->encoder.fec = pps_config_get_bool(c, "audio", "fec");
	a->encoder.loss_percent = (int)pps_config_get_int(c, "audio", "loss_percent");
	a->transport = (unsigned)pps_config_get_enum(c, "audio", "transport");
	a->speech_threshold_dbfs = (double)pps_config_get_int(c, "audio", "speech_threshold_dbfs");
	session->sched.audio_deadline_us = pps_config_get_int(c, "audio", "deadline_ms") * 1000;
	session->audio_rto_min_us = (uint32_t)(rto_min_ms * 1000);
	session->audio_thin = pps_config_get_bool(c, "audio", "thin");
	a->copies = (unsigned)pps_config_get_int(c, "audio", "copies");
	session->audio_copy_spacing_us = pps_config_get_int(c, "audio", "copy_spacing_ms") * 1000;
	session->audio_copies_off_loss =
	    pps_config_get_int(c, "audio", "copies_off_loss_permille") / 1000.0;
	return 0;
}

int
pps_server_settings_from_config(const pps_config_t *c, pps_server_settings_t *s, char *err,
                                size_t err_size)
{
	pps_server_params_t *sp = &s->server;
	const pps_encoder_params_t *ep = &sp->media.encoder;
	int ret;

	memset(s, 0, sizeof(*s));
	ret = capture_params(c, &sp->media.capture, s->source_uri, sizeof(s->source_uri), err,
	                     err_size);
	if (ret < 0)
		return ret;
	encoder_params(c, &sp->media.encoder);
	sp->media.priority_policy =
	    (pps_priority_policy_t)pps_config_get_enum(c, "pps", "priority_policy");
	sp->media.latency_budget_ms = (uint32_t)pps_config_get_int(c, "pps", "latency_budget_ms");
	ret = listener_params(c, &sp->listener, err, err_size);
	if (ret < 0)
		return ret;
	sp->closed_loop = ep->rate_adaptive;
	sp->media.anchor_windows = ep->anchor_windows;
	sp->adapt = (pps_adapt_loop_params_t){
	    .base_share_pct = (int)pps_config_get_int(c, "adapt", "base_share_pct"),
	    .base_memory_us = pps_config_get_int(c, "adapt", "base_memory_ms") * 1000,
	    .probe_pct = (int)pps_config_get_int(c, "adapt", "probe_pct"),
	    .min_base_kbps = (int)pps_config_get_int(c, "adapt", "min_base_kbps"),
	    .min_crf = (int)pps_config_get_int(c, "adapt", "min_crf"),
	    .interval_us = pps_config_get_int(c, "adapt", "interval_ms") * 1000,
	    .drain_crf = (int)pps_config_get_int(c, "adapt", "drain_crf"),
	    .base_crf = ep->base_crf,
	    .enhancement_crf = ep->enhancement_crf,
	    .base_vbv_kbps = ep->base_vbv_kbps,
	    .enhancement_vbv_kbps = ep->enhancement_vbv_kbps,
	    .steer_rates = ep->rate_adaptive,
	    .b_frames =
	        {
	            .policy = (pps_b_frames_policy_t)pps_config_get_enum(c, "pps", "b_frames"),
	            .hold_us = pps_config_get_int(c, "pps", "b_frames_hold_ms") * 1000,
	        },
	};
	ret = audio_params(c, &sp->media, &sp->listener.session, err, err_size);
	if (ret < 0)
		return ret;
	sp->listen = pps_config_get_string(c, "server", "listen");
	sp->relay_tls = pps_config_get_bool(c, "server", "relay_tls");
	sp->publish_audio_own = pps_config_get_enum(c, "server", "publish_audio") == 1;
	sp->relay_tls_ca = pps_config_get_string(c, "server", "relay_tls_ca");
	sp->metrics = (pps_server_metrics_mode_t)pps_config_get_enum(c, "server", "metrics");
	if (sp->metrics == PPS_SERVER_METRICS_TOKEN && !sp->listener.session.access_token[0]) {
		snprintf(err, err_size, "[server] metrics = token: needs [server] access_token");
		return -EINVAL;
	}
	sp->record_path = pps_config_get_string(c, "server", "record");
	/* A file's own size and rate unless the user gave them. */
	sp->media.size_set = strcmp(pps_config_get_origin(c, "source", "width"), "default") ||
	                     strcmp(pps_config_get_origin(c, "source", "height"), "default");
	sp->media.fps_set = strcmp(pps_config_get_origin(c, "source", "fps"), "default") != 0;
	s->status_interval_us = pps_config_get_int(c, "server", "status_interval_s") * 1000000;
	return 0;
}
