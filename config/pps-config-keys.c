/* SPDX-License-Identifier: MIT */
/*
 * The one table of configuration keys. The loader validates against it, the
 * example INI files and the README's option reference are generated from it
 * (`pps-config-doc`), and a test checks that both match.
 *
 * The choices of an enum key that a module turns into its own enum are that
 * module's name table (pps_minbuf_mode_names, pps_playout_policy_names,
 * pps_capture_source_names, ...),
 * indexed by the enum: the module owns the spelling, and the index the loader
 * returns is the enum value. The lists that stay here are passed on as
 * strings (x264 presets, test patterns) or read only by the capture code.
 */
#include "pps-config.h"

#include "pps-adapt.h"
#include "pps-capture-source.h"
#include "pps-client-policy.h"
#include "pps-minbuf.h"
#include "pps-prioritizer.h"
#include "pps-wire.h"

#include <stdint.h>
#include <string.h>

#define SERVER PPS_CONFIG_PROGRAM_SERVER
#define CLIENT PPS_CONFIG_PROGRAM_CLIENT
#define BOTH   PPS_CONFIG_PROGRAM_ALL

/* A module's numeric constant as a key's default or help text, so that the
 * number is written once (in the module's header). */
#define STR_(x)    #x
#define STR(x)     STR_(x)
#define AUTH_BYTES STR(PPS_WIRE_MAX_AUTH_BYTES)

#define INT(sec, name, def, lo, hi, prog, text)                                                    \
	{                                                                                          \
		.section = sec, .key = name, .type = PPS_CONFIG_TYPE_INT, .default_value = def,    \
		.min = lo, .max = hi, .programs = prog, .help = text                               \
	}
#define BOOL(sec, name, def, prog, text)                                                           \
	{                                                                                          \
		.section = sec, .key = name, .type = PPS_CONFIG_TYPE_BOOL, .default_value = def,   \
		.programs = prog, .help = text                                                     \
	}
#define STRING(sec, name, def, prog, text)                                                         \
	{                                                                                          \
		.section = sec, .key = name, .type = PPS_CONFIG_TYPE_STRING, .default_value = def, \
		.programs = prog, .help = text                                                     \
	}
#define ADDRESS(sec, name, def, prog, text)                                                        \
	{                                                                                          \
		.section = sec, .key = name, .type = PPS_CONFIG_TYPE_ADDRESS,                      \
		.default_value = def, .programs = prog, .help = text                               \
	}
#define ENUM(sec, name, def, list, prog, text)                                                     \
	{                                                                                          \
		.section = sec, .key = name, .type = PPS_CONFIG_TYPE_ENUM, .default_value = def,   \
		.choices = list, .programs = prog, .help = text                                    \
	}

static const char *const test_patterns[] = {"ball", "smpte", "snow", "bar", "pinwheel", NULL};
static const char *const x264_presets[] = {"ultrafast", "superfast", "veryfast", "faster",
                                           "fast",      "medium",    NULL};

static const pps_config_key_t keys[] = {
    /* [server] */
    ADDRESS("server", "listen", "127.0.0.1:7400", SERVER,
            "address and TCP port to listen on ([v6addr]:port for IPv6; port 0 = any free one)"),
    INT("server", "max_clients", "16", 1, 1024, SERVER,
        "clients streaming at once; more are refused with BYE (connections still in their "
        "handshake are bounded apart: at most this many, the oldest dropped for a newcomer)"),
    INT("server", "status_interval_s", "5", 1, 3600, SERVER,
        "seconds between status lines on stderr"),
    INT("server", "max_clients_per_address", "4", 1, 1024, SERVER,
        "connections from one IP address at once (streaming or in their handshake)"),
    INT("server", "evict_after_s", "10", 0, 3600, SERVER,
        "a client that takes no data for this long (it stopped reading) is dropped with BYE "
        "too-slow; 0 = never"),
    INT("server", "recovery_budget_pct", "5", 0, 100, SERVER,
        "IDRs forced for clients that joined or lost their base layer may add at most this "
        "share of the encoded rate (a token bucket in bits; beyond it requests wait, at "
        "least 500 ms apart in any case); 0 = time bound only"),
    STRING("server", "access_token", "", SERVER,
           "if set, only clients that prove they hold this token are served (client."
           "access_token; challenge-response with HMAC-SHA256, the token never crosses the "
           "wire; the stream itself is not encrypted unless tls_cert is set)"),
    STRING("server", "tls_cert", "", SERVER,
           "PEM file of the server's certificate (chain): with tls_key, every connection is "
           "TLS 1.3 (pps-client: client.tls = true; browsers: https:// and wss://); each "
           "MIN_BUF packet is one record of at most one MSS"),
    STRING("server", "tls_key", "", SERVER, "PEM file of tls_cert's private key (both or neither)"),

    /* [source] */
    ENUM("source", "type", "test", pps_capture_source_names, SERVER,
         "video source: test (built-in moving pattern), camera, file, uri (anything "
         "uridecodebin plays: files, RTSP, HTTP; audio ignored) or pipeline; a source that is "
         "not live is paced to real time and looped"),
    STRING("source", "device", "/dev/video0", SERVER, "V4L2 device for type=camera"),
    STRING("source", "file", "", SERVER,
           "media file for type=file, played in real time and looped"),
    STRING("source", "uri", "", SERVER,
           "URI for type=uri (file:///clip.mp4, rtsp://camera/stream, https://host/video.mp4)"),
    STRING("source", "pipeline", "", SERVER,
           "gst-launch description for type=pipeline; ppstream appends its own sink"),
    ENUM("source", "pattern", "ball", test_patterns, SERVER, "videotestsrc pattern for type=test"),
    INT("source", "width", "640", 64, 3840, SERVER, "frame width in pixels (even)"),
    INT("source", "height", "480", 64, 2160, SERVER, "frame height in pixels (even)"),
    INT("source", "fps", "30", 1, 120, SERVER, "frames per second"),
    ENUM("source", "timecode", "auto", pps_capture_timecode_names, SERVER,
         "stamp capture time and frame index into the picture (pixel timecode, a barcode in "
         "the top-left corner); auto = only for type=test"),
    INT("source", "queue_frames", "8", 1, 256, SERVER,
        "raw frames held between capture and encoder; the oldest is dropped when full"),

    /* [encoder] */
    INT("encoder", "temporal_layers", "3", 1, 3, SERVER,
        "temporal layers: 1 (I/P), 2 (I/P + b), 3 (I/P + B-ref + b)"),
    INT("encoder", "quality_layers", "2", 1, 3, SERVER,
        "quality layers: base + residual enhancement layers"),
    INT("encoder", "base_scale", "2", 1, 4, SERVER,
        "base layer is encoded at 1/base_scale of the width and height"),
    INT("encoder", "gop_frames", "60", 4, 1200, SERVER,
        "frames between forced IDR pictures (rounded to a whole number of windows)"),
    ENUM("encoder", "preset", "veryfast", x264_presets, SERVER, "x264 speed preset"),
    INT("encoder", "threads", "0", 0, 64, SERVER, "x264 threads per layer; 0 = automatic"),
    INT("encoder", "base_crf", "26", 0, 51, SERVER, "constant rate factor of the base layer"),
    INT("encoder", "base_vbv_kbps", "1000", 0, 100000, SERVER,
        "VBV cap of the base layer in kbit/s (its upper bound with adapt.mode=closed-loop); "
        "0 = uncapped"),
    INT("encoder", "enhancement_crf", "24", 0, 51, SERVER,
        "constant rate factor of each enhancement layer"),
    INT("encoder", "enhancement_vbv_kbps", "3000", 0, 100000, SERVER,
        "VBV cap of each enhancement layer in kbit/s (its upper bound with "
        "adapt.mode=closed-loop); 0 = uncapped"),

    /* [pps] */
    INT("pps", "window_frames", "2", 1, PPS_WIRE_MAX_WINDOW_FRAMES, SERVER,
        "frames per adaptation window (the papers use 2 and 4 at 30 frames/s)"),
    INT("pps", "latency_budget_ms", "250", 10, 10000, SERVER,
        "a window's send deadline is its first frame's capture time plus this"),
    ENUM("pps", "priority_policy", "temporal-first", pps_priority_policy_names, SERVER,
         "what to drop first: temporal-first keeps frame rate, quality-first keeps quality"),
    INT("pps", "base_grace_ms", "1000", 0, 10000, SERVER,
        "base-layer reference pictures (the IDR/P chain later frames need) are still sent "
        "up to this long after their window's deadline; 0 = dropped at the deadline"),
    INT("pps", "max_windows", STR(PPS_DEFAULT_MAX_WINDOWS), 2, 1024, SERVER,
        "windows queued per client; past it the oldest is dropped and counted"),

    /* [transport] */
    ENUM(
        "transport", "mode", "minbuf", pps_minbuf_mode_names, SERVER,
        "tcp (kernel send buffer) or minbuf (at most A*cwnd + min(B, cwnd) packets in the kernel)"),
    INT("transport", "minbuf_a", STR(PPS_DEFAULT_MINBUF_A), 1, 16, SERVER,
        "MIN_BUF A: multiple of cwnd kept in the kernel"),
    INT("transport", "minbuf_b", STR(PPS_DEFAULT_MINBUF_B), 0, 64, SERVER,
        "MIN_BUF B: extra packets kept in the kernel"),
    BOOL("transport", "ecn", "false", SERVER, "negotiate ECN on each connection"),
    ENUM("transport", "congestion", "bbr", pps_minbuf_congestion_names, SERVER,
         "TCP congestion control per connection; default = the system's; bbr keeps its window "
         "through losses, under the tcp-friendly rate control; one the kernel refuses leaves "
         "the system's (with a warning)"),
    ENUM("transport", "congestion_alone", "cubic", pps_minbuf_congestion_alone_names, SERVER,
         "minbuf mode, yielding latency cap: the congestion control while the stream is alone "
         "on its path, switched on the live connection (congestion while others share the "
         "queue); cubic has no bbr ProbeRTT stall; same = never switch"),
    BOOL("transport", "thin_linear_timeouts", "false", SERVER,
         "TCP_THIN_LINEAR_TIMEOUTS: no exponential RTO backoff while the flow is thin"),
    BOOL("transport", "pacing", "false", SERVER,
         "the kernel paces each connection at its congestion control's rate (SO_MAX_PACING_RATE "
         "turns on TCP's internal pacing) instead of sending a window's packets in a burst"),
    ENUM("transport", "latency_cap", "yielding", pps_latency_cap_names, SERVER,
         "minbuf mode: keep in flight <= estimate * (5/4 min RTT + queue target); yielding "
         "lifts it while other flows hold the queue, always never does, off = MIN_BUF alone"),
    INT("transport", "queue_target_ms", "0", 0, 10000, SERVER,
        "queueing the latency cap lets the stream add on its path; 0 = latency_budget_ms / 5"),
    ENUM("transport", "rate_control", "tcp-friendly", pps_rate_control_names, SERVER,
         "congestion: the congestion control alone sets the sending rate; tcp-friendly (minbuf "
         "mode): while other flows hold the queue, the kernel paces each connection at most at "
         "an AIMD rate on its losses (a loss-based TCP's share), best with congestion = bbr"),

    /* [adapt] */
    ENUM("adapt", "mode", "closed-loop", pps_adapt_mode_names, SERVER,
         "closed-loop: the clients' path estimates steer each layer's rate, largest picture and "
         "CRF; fixed: the [encoder] CRF and VBV settings for the whole run"),
    INT("adapt", "base_share_pct", "70", 10, 100, SERVER,
        "base layer rate as a share of the slowest client's estimated rate"),
    INT("adapt", "probe_pct", "125", 100, 200, SERVER,
        "top of the enhancement layers as a share of the fastest client's estimate (the "
        "excess is the probe; the regulator drops what does not fit)"),
    INT("adapt", "min_base_kbps", "100", 16, 100000, SERVER,
        "the base layer's rate never goes below this"),
    INT("adapt", "min_crf", "18", 0, 51, SERVER,
        "finest CRF the loop may ask for when capacity is spare ([encoder] *_crf is the "
        "coarsest)"),
    INT("adapt", "interval_ms", "250", 50, 5000, SERVER,
        "time between rate decisions (each applied at the next mini-GOP)"),

    /* [client] */
    ADDRESS("client", "server", "127.0.0.1:7400", CLIENT,
            "server to connect to (host:port or [v6addr]:port)"),
    STRING("client", "name", "pps-client", CLIENT, "name sent in HELLO, shown in server logs"),
    STRING("client", "access_token", "", CLIENT,
           "token for a server that requires one (server.access_token; at most " AUTH_BYTES
           " bytes); proved by challenge-response, never sent"),
    BOOL("client", "tls", "false", CLIENT,
         "connect with TLS 1.3 and verify the server's certificate against tls_ca for the "
         "host or IP address of client.server (or tls_server_name); a failed verification "
         "or a plaintext server ends the connection (exit 1)"),
    STRING("client", "tls_ca", "", CLIENT,
           "PEM file of the CA certificates (or the server's self-signed certificate) to "
           "trust; empty = the system's CA store"),
    STRING("client", "tls_server_name", "", CLIENT,
           "name (or IP address) the server's certificate must carry, sent as SNI; empty = "
           "the host of client.server"),
    BOOL("client", "reconnect", "false", CLIENT,
         "reconnect with backoff (0.5 s doubling to 8 s) when the connection ends"),
    INT("client", "reconnect_attempts", "10", 1, 1000000, CLIENT,
        "reconnect: give up (exit 1) after this many connections in a row without a stream"),
    INT("client", "handshake_timeout_ms", "5000", 100, 600000, CLIENT,
        "fail a connection that brings no STREAM_INFO within this time of connecting"),
    INT("client", "max_record_bytes", STR(PPS_WIRE_DEFAULT_MAX_RECORD_BYTES),
        PPS_WIRE_MIN_MAX_RECORD_BYTES, UINT16_MAX, CLIENT,
        "largest wire record accepted from the server"),
    INT("client", "clock_ping_interval_ms", "1000", 100, 60000, CLIENT,
        "interval between CLOCK_PING records for the clock offset estimate"),
    ENUM("client", "clock", "auto", pps_clock_mode_names, CLIENT,
         "shared (same host), estimate (apply the PING/PONG offset), or auto (apply it "
         "only if it exceeds its uncertainty)"),

    /* [playout] */
    ENUM("playout", "policy", "asap", pps_playout_policy_names, CLIENT,
         "adaptive (capture time + delay estimate + 4 x its variation, from the stream's "
         "budget down), smooth (capture time + 90th percentile of the last 2 s of window "
         "delays; late frames shown at once), fixed (capture time + tolerance) or asap "
         "(as soon as decoded)"),
    INT("playout", "tolerance_ms", "0", 0, 10000, CLIENT,
        "fixed policy: display at capture time + this; 0 = what the stream can meet "
        "(server budget + measured round trip + 10 ms)"),

    /* [display] */
    ENUM("display", "mode", "auto", pps_display_mode_names, CLIENT,
         "auto (SDL window if a display is available), sdl or none"),
    STRING("display", "output", "", CLIENT, "write shown frames to this .y4m file"),

    /* [log] */
    STRING("log", "file", "", CLIENT, "write JSON Lines events (frames, windows, summary) here"),
};

const pps_config_key_t *
pps_config_keys(size_t *n_keys)
{
	*n_keys = sizeof(keys) / sizeof(keys[0]);
	return keys;
}

const pps_config_key_t *
pps_config_key_find(const char *section, const char *key)
{
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		if (strcmp(keys[i].section, section) == 0 && strcmp(keys[i].key, key) == 0)
			return &keys[i];
	}
	return NULL;
}
