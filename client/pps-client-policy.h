/* SPDX-License-Identifier: MIT */
/*
 * The choices a pps-client user makes (STYLE habit 5): clock mode, playout
 * policy, display mode. Each enum sits beside its name table, indexed by the
 * enum and NULL-terminated; those tables are the one spelling of the names:
 * config/pps-config-keys.c uses them as the choices of [client] clock,
 * [playout] policy and [display] mode (so the index pps_config_get_enum()
 * returns is the enum value), and logs, the GStreamer element and the docs
 * read them from there.
 *
 * The tables are defined in this header, not in a .c of the client library,
 * because config/ is below the client in the link order (the client reads its
 * configuration): config includes this header and links nothing of the
 * client. The header includes nothing but <stddef.h> for that reason.
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

static const char *const pps_clock_mode_names[] = {
    [PPS_CLOCK_AUTO] = "auto",
    [PPS_CLOCK_SHARED] = "shared",
    [PPS_CLOCK_ESTIMATE] = "estimate",
    [PPS_CLOCK_MODE_COUNT] = NULL,
};
_Static_assert(sizeof(pps_clock_mode_names) / sizeof(pps_clock_mode_names[0]) ==
                   PPS_CLOCK_MODE_COUNT + 1,
               "a name for every pps_clock_mode_t");

/* When a decoded frame is shown (client/pps-playout.c). */
typedef enum {
	PPS_PLAYOUT_FIXED = 0,    /* capture time + tolerance */
	PPS_PLAYOUT_ASAP = 1,     /* as soon as decoded */
	PPS_PLAYOUT_ADAPTIVE = 2, /* capture time + delay estimate + 4 x its variation */
	PPS_PLAYOUT_SMOOTH = 3,   /* capture time + 90th percentile of recent window delays */
	PPS_PLAYOUT_POLICY_COUNT
} pps_playout_policy_t;

static const char *const pps_playout_policy_names[] = {
    [PPS_PLAYOUT_FIXED] = "fixed",       [PPS_PLAYOUT_ASAP] = "asap",
    [PPS_PLAYOUT_ADAPTIVE] = "adaptive", [PPS_PLAYOUT_SMOOTH] = "smooth",
    [PPS_PLAYOUT_POLICY_COUNT] = NULL,
};
_Static_assert(sizeof(pps_playout_policy_names) / sizeof(pps_playout_policy_names[0]) ==
                   PPS_PLAYOUT_POLICY_COUNT + 1,
               "a name for every pps_playout_policy_t");

/* Where shown frames go (client/pps-display.c). */
typedef enum {
	PPS_DISPLAY_AUTO = 0, /* an SDL window if a display is available */
	PPS_DISPLAY_SDL = 1,
	PPS_DISPLAY_NONE = 2,
	PPS_DISPLAY_MODE_COUNT
} pps_display_mode_t;

static const char *const pps_display_mode_names[] = {
    [PPS_DISPLAY_AUTO] = "auto",
    [PPS_DISPLAY_SDL] = "sdl",
    [PPS_DISPLAY_NONE] = "none",
    [PPS_DISPLAY_MODE_COUNT] = NULL,
};
_Static_assert(sizeof(pps_display_mode_names) / sizeof(pps_display_mode_names[0]) ==
                   PPS_DISPLAY_MODE_COUNT + 1,
               "a name for every pps_display_mode_t");

/*
 * Lookups in the tables above, for logs and tools. A value out of range is
 * "unknown"; a name not in the table is -EINVAL, otherwise the enum value
 * (>= 0). Defined in pps-playout.c and pps-clock.c.
 */
const char *pps_playout_policy_name(pps_playout_policy_t policy);
int pps_playout_policy_from_name(const char *name);
const char *pps_clock_mode_name(pps_clock_mode_t mode);
int pps_clock_mode_from_name(const char *name);

#endif /* PPS_CLIENT_POLICY_H */
