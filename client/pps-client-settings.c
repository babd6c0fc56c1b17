/* SPDX-License-Identifier: MIT */
/*
 * The client's key table and its translation into the player's parameters.
 * An enum key's choices are the owning module's name table, indexed by its
 * enum, so the index pps_config_get_enum() returns is the enum value.
 */
#include "pps-client-settings.h"

#include "pps-wire.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define STR_(x)    #x
#define STR(x)     STR_(x)
#define AUTH_BYTES STR(PPS_WIRE_MAX_AUTH_BYTES)

/* [display] output_timing, in the order of pps_client_settings_t.output_every
 * (0 real-time, 1 every). */
static const char *const output_timing_names[] = {"real-time", "every", NULL};
/* [audio] pool, indexed by PPS_AUDIO_POOL_*. */
static const char *const audio_pool_names[] = {"auto", "on", "off", NULL};

static const pps_config_key_t keys[] = {
    /* [client] */
    PPS_CONFIG_ADDRESS(
        "client", "server", "127.0.0.1:7400",
        "server to connect to (host:port or [v6addr]:port); host:port/NAME asks a relay "
        "(pps-relay) for its stream NAME"),
    PPS_CONFIG_STRING("client", "name", "pps-client", "name sent in HELLO, shown in server logs"),
    PPS_CONFIG_STRING(
        "client", "access_token", "",
        "token for a server that requires one (server.access_token; at most " AUTH_BYTES
        " bytes); proved by challenge-response, never sent"),
    PPS_CONFIG_BOOL(
        "client", "tls", "false",
        "connect with TLS 1.3 and verify the server's certificate against tls_ca for the "
        "host or IP address of client.server (or tls_server_name); a failed verification "
        "or a plaintext server ends the connection (exit 1)"),
    PPS_CONFIG_STRING(
        "client", "tls_ca", "",
        "PEM file of the CA certificates (or the server's self-signed certificate) to "
        "trust; empty = the system's CA store"),
    PPS_CONFIG_STRING(
        "client", "tls_server_name", "",
        "name (or IP address) the server's certificate must carry, sent as SNI; empty = "
        "the host of client.server"),
    PPS_CONFIG_BOOL("client", "reconnect", "false",
                    "reconnect with backoff (0.5 s doubling to 8 s) when the connection ends"),
    PPS_CONFIG_INT(
        "client", "reconnect_attempts", "10", 1, 1000000,
        "reconnect: give up (exit 1) after this many connections in a row without a stream"),
    PPS_CONFIG_INT("client", "copies", "1", 1, PPS_RECEIVER_MAX_COPIES,
                   "connections the video arrives on: 2 or more open copies of the stream (each "
                   "a viewer at the server, video only, every window on each); the first to "
                   "bring a piece decides, so a loss holds up only its own connection, at "
                   "that many times the bytes on the path"),
    PPS_CONFIG_INT("client", "handshake_timeout_ms", "5000", 100, 600000,
                   "fail a connection that brings no STREAM_INFO within this time of connecting"),
    PPS_CONFIG_INT(
        "client", "data_timeout_windows", "20", 0, 100000,
        "after STREAM_INFO, fail a connection (exit 1, or reconnect with client.reconnect) "
        "that brings no record for this many windows of the stream, never less than "
        "data_timeout_min_ms; 0 = wait forever"),
    PPS_CONFIG_INT("client", "data_timeout_min_ms", "4000", 100, 600000,
                   "least time the data timeout waits, whatever the window length"),
    PPS_CONFIG_INT("client", "max_record_bytes", STR(PPS_WIRE_DEFAULT_MAX_RECORD_BYTES),
                   PPS_WIRE_MIN_MAX_RECORD_BYTES, UINT16_MAX,
                   "largest wire record accepted from the server"),
    PPS_CONFIG_INT("client", "clock_ping_interval_ms", "1000", 100, 60000,
                   "interval between CLOCK_PING records for the clock offset estimate"),
    PPS_CONFIG_ENUM("client", "clock", "auto", pps_clock_mode_names,
                    "shared (same host), estimate (apply the PING/PONG offset), or auto (apply it "
                    "only if it exceeds its uncertainty)"),

    /* [playout] */
    PPS_CONFIG_ENUM(
        "playout", "policy", "asap", pps_playout_policy_names,
        "adaptive (capture time + delay estimate + 4 x its variation, from the stream's "
        "budget down), smooth (capture time + 90th percentile of the last 2 s of window "
        "delays; late frames shown at once), fixed (capture time + tolerance) or asap "
        "(as soon as decoded)"),
    PPS_CONFIG_INT("playout", "tolerance_ms", "0", 0, 10000,
                   "fixed policy: display at capture time + this; 0 = what the stream can meet "
                   "(server budget + measured round trip + 10 ms)"),

    /* [display] */
    PPS_CONFIG_ENUM("display", "mode", "auto", pps_display_mode_names,
                    "auto (SDL window if a display is available), sdl or none"),
    PPS_CONFIG_STRING(
        "display", "output", "",
        "record the frames shown, in real time: NAME.mkv holds each frame once with its "
        "display time (Matroska, rawvideo I420); NAME.nut is refused; any other name is y4m "
        "at the stream's frame rate, the frame on screen repeated through a freeze (FRAME "
        "Xrepeat); - = y4m on stdout"),
    PPS_CONFIG_ENUM("display", "output_timing", "real-time", output_timing_names,
                    "a y4m output's pictures: real-time (a slot per frame time of the stream, "
                    "repeats through a freeze, a picture shown for less than a frame time left "
                    "out) or every (each picture shown, once, in order: how the network lab "
                    "counts the pictures of every receiver)"),

    /* [audio] */
    PPS_CONFIG_BOOL("audio", "enabled", "true",
                    "ask for the stream's audio track (played, measured and logged if it has one)"),
    PPS_CONFIG_ENUM("audio", "output", "auto", pps_audio_output_names,
                    "auto (the default SDL audio device if one opens, else none), sdl, or none "
                    "(played on the clock and measured, not heard)"),
    PPS_CONFIG_STRING("audio", "wav", "", "write the audio played to this WAV file (mono, 48 kHz)"),
    PPS_CONFIG_BOOL(
        "audio", "lip_sync", "true",
        "keep the audio no more than sync_lead_ms ahead of the picture: its playout delay "
        "waits for the video's recent latency (changed between talkspurts only)"),
    PPS_CONFIG_INT("audio", "sync_lead_ms", "30", 0, 45,
                   "lip_sync: how far the audio may play ahead of the picture's median latency "
                   "(ITU-R BT.1359 detects 45 ms)"),
    PPS_CONFIG_INT(
        "audio", "connections", "0", 0, 12,
        "when the server sends audio on connections of its own: how many to open (a loss "
        "holds up only its own connection; the first copy of a frame to arrive is played); "
        "0 = a pool of 12 when the server pools them (it sends each frame on a few, those "
        "with nothing unacknowledged first) and pool says so, else 2, each carrying every "
        "frame (at most 3 then)"),
    PPS_CONFIG_ENUM("audio", "pool", "auto", audio_pool_names,
                    "when the server offers a pool of audio connections: auto (take it when "
                    "lip_sync is off: with it on, the audio waits for the picture anyway, and a "
                    "pool's earlier audio followed the picture's latency up and down), on, or off"),
    PPS_CONFIG_INT("audio", "min_delay_ms", "20", 0, 1000,
                   "least margin of the audio's playout delay above its delay estimate"),
    PPS_CONFIG_INT("audio", "max_delay_ms", "1000", 20, 10000,
                   "most the audio's playout delay may exceed the least delay of the last 2 s; "
                   "later frames are concealed"),
    PPS_CONFIG_INT("audio", "playout_quantile_pct", "98", 0, 99,
                   "the audio's playout delay covers this share of the last 10 s of frames' "
                   "arrival delays (at most 150 ms above the least delay of the last 2 s, at "
                   "least its delay estimate + min_delay_ms); 0 = the delay estimate + 4 x its "
                   "variation"),
    PPS_CONFIG_INT("audio", "playout_hysteresis_ms", "10", 0, 100,
                   "the audio's playout delay grows (at a pause) only when its target is this "
                   "much above it, or a quarter frame when the frames' own arrival delays ask "
                   "for more (the quantile above the playout delay, or a delay spike); 0 = a "
                   "quarter frame always"),

    /* [log] */
    PPS_CONFIG_STRING("log", "file", "", "write JSON Lines events (frames, windows, summary) here"),
};

static const pps_config_schema_t schema = {
    .program = "client",
    .keys = keys,
    .n_keys = sizeof(keys) / sizeof(keys[0]),
};

const pps_config_schema_t *
pps_client_settings_schema(void)
{
	return &schema;
}

int
pps_client_settings_from_config(const pps_config_t *c, pps_client_settings_t *s, char *err,
                                size_t err_size)
{
	pps_player_params_t *p = &s->player;
	pps_connection_params_t *conn = &p->connection;

	memset(s, 0, sizeof(*s));
	p->policy = (pps_playout_policy_t)pps_config_get_enum(c, "playout", "policy");
	p->tolerance_us = pps_config_get_int(c, "playout", "tolerance_ms") * 1000;
	p->clock_mode = (pps_clock_mode_t)pps_config_get_enum(c, "client", "clock");
	conn->server = pps_config_get_string(c, "client", "server");
	conn->name = pps_config_get_string(c, "client", "name");
	conn->max_record_bytes = (size_t)pps_config_get_int(c, "client", "max_record_bytes");
	conn->access_token = pps_config_get_string(c, "client", "access_token");
	if (strlen(conn->access_token) > PPS_WIRE_MAX_AUTH_BYTES) {
		snprintf(err, err_size, "[client] access_token: at most %d bytes",
		         PPS_WIRE_MAX_AUTH_BYTES);
		return -EINVAL;
	}
	conn->ping_interval_us = pps_config_get_int(c, "client", "clock_ping_interval_ms") * 1000;
	conn->handshake_timeout_us = pps_config_get_int(c, "client", "handshake_timeout_ms") * 1000;
	conn->data_timeout_windows =
	    (unsigned)pps_config_get_int(c, "client", "data_timeout_windows");
	conn->data_timeout_min_us = pps_config_get_int(c, "client", "data_timeout_min_ms") * 1000;
	conn->reconnect = pps_config_get_bool(c, "client", "reconnect");
	conn->reconnect_attempts = (unsigned)pps_config_get_int(c, "client", "reconnect_attempts");
	conn->tls = pps_config_get_bool(c, "client", "tls");
	conn->tls_ca = pps_config_get_string(c, "client", "tls_ca");
	conn->tls_server_name = pps_config_get_string(c, "client", "tls_server_name");
	p->copies = (unsigned)pps_config_get_int(c, "client", "copies");
	p->audio = pps_config_get_bool(c, "audio", "enabled");
	p->audio_params.output = (pps_audio_output_t)pps_config_get_enum(c, "audio", "output");
	p->audio_params.wav_path = pps_config_get_string(c, "audio", "wav");
	p->audio_params.lip_sync = pps_config_get_bool(c, "audio", "lip_sync");
	p->audio_params.sync_lead_us = pps_config_get_int(c, "audio", "sync_lead_ms") * 1000;
	p->audio_params.connections = (unsigned)pps_config_get_int(c, "audio", "connections");
	p->audio_params.pool = (int)pps_config_get_enum(c, "audio", "pool");
	p->audio_params.min_delay_us = pps_config_get_int(c, "audio", "min_delay_ms") * 1000;
	p->audio_params.max_delay_us = pps_config_get_int(c, "audio", "max_delay_ms") * 1000;
	p->audio_params.playout_quantile =
	    pps_config_get_int(c, "audio", "playout_quantile_pct") / 100.0;
	p->audio_params.hysteresis_us =
	    pps_config_get_int(c, "audio", "playout_hysteresis_ms") * 1000;
	if (p->audio_params.max_delay_us < p->audio_params.min_delay_us) {
		snprintf(err, err_size, "[audio] max_delay_ms: below min_delay_ms");
		return -EINVAL;
	}
	s->display_mode = (pps_display_mode_t)pps_config_get_enum(c, "display", "mode");
	s->output = pps_config_get_string(c, "display", "output");
	s->output_every = pps_config_get_enum(c, "display", "output_timing") == 1;
	s->log_path = pps_config_get_string(c, "log", "file");
	return 0;
}
