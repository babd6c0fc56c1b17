/* SPDX-License-Identifier: MIT */
/*
 * The choices a pps-client user makes: clock mode, playout policy, display
 * mode. Each enum has a name table, indexed by the enum and NULL-terminated,
 * defined in the .c of the object it steers (pps-clock.c, pps-playout.c,
 * pps-display.c); those tables are the one spelling of the names: the
 * client's settings (pps-client-settings.c) take them as the choices of
 * [client] clock, [playout] policy and [display] mode (so the index the
 * loader returns is the enum value), and logs, the GStreamer element and the
 * docs read them from there.
 */
#ifndef PPS_CLIENT_POLICY_H
#define PPS_CLIENT_POLICY_H

#include <stddef.h>

/* The server's clock offset from PING/PONG samples (best round trip wins). */
typedef enum {
	PPS_CLOCK_AUTO = 0,     /* apply the offset only if it exceeds its uncertainty */
	PPS_CLOCK_SHARED = 1,   /* same host: never apply it */
	PPS_CLOCK_ESTIMATE = 2, /* always apply it */
	PPS_CLOCK_MODE_COUNT
} pps_clock_mode_t;

extern const char *const pps_clock_mode_names[];

/* When a decoded frame is shown (client/pps-playout.c). */
typedef enum {
	PPS_PLAYOUT_FIXED = 0,    /* capture time + tolerance */
	PPS_PLAYOUT_ASAP = 1,     /* as soon as decoded */
	PPS_PLAYOUT_ADAPTIVE = 2, /* capture time + delay estimate + 4 x its variation */
	PPS_PLAYOUT_SMOOTH = 3,   /* capture time + 90th percentile of recent window delays */
	PPS_PLAYOUT_POLICY_COUNT
} pps_playout_policy_t;

extern const char *const pps_playout_policy_names[];

/* Where shown frames go (client/pps-display.c). */
typedef enum {
	PPS_DISPLAY_AUTO = 0, /* an SDL window if a display is available */
	PPS_DISPLAY_SDL = 1,
	PPS_DISPLAY_NONE = 2,
	PPS_DISPLAY_MODE_COUNT
} pps_display_mode_t;

extern const char *const pps_display_mode_names[];

/* Where played audio goes (client/pps-audio-player.c). */
typedef enum {
	PPS_AUDIO_OUTPUT_AUTO = 0, /* the default SDL audio device if one opens, else none */
	PPS_AUDIO_OUTPUT_SDL = 1,
	PPS_AUDIO_OUTPUT_NONE = 2, /* played on the clock only (measured, not heard) */
	PPS_AUDIO_OUTPUT_COUNT
} pps_audio_output_t;

extern const char *const pps_audio_output_names[];

/*
 * Lookups in the tables above, for logs and tools, as every module's name
 * table has them: _name() gives "unknown" for a value out of range;
 * _from_name() sets *out and returns 0, or returns -EINVAL (and leaves *out)
 * for a name not in the table. Defined in pps-playout.c and pps-clock.c.
 */
const char *pps_playout_policy_name(pps_playout_policy_t policy);
int pps_playout_policy_from_name(const char *name, pps_playout_policy_t *out);
const char *pps_clock_mode_name(pps_clock_mode_t mode);
int pps_clock_mode_from_name(const char *name, pps_clock_mode_t *out);

#endif /* PPS_CLIENT_POLICY_H */
