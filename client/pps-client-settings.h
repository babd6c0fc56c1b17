/* SPDX-License-Identifier: MIT */
/*
 * The client's settings: its key table (every [client], [playout], [display]
 * and [log] key, with its default, range and help) and the one place that
 * turns a loaded configuration into the player's parameters. pps-client and
 * the ppssrc element read their settings through here; the client library
 * itself never reads the configuration.
 */
#ifndef PPS_CLIENT_SETTINGS_H
#define PPS_CLIENT_SETTINGS_H

#include "pps-client-internal.h"
#include "pps-config.h"

/* Strings point into the configuration, which must outlive them. */
typedef struct {
	/* [client] and [playout]; log (the opened file) and the clock callback
	 * are the program's, left NULL. */
	pps_player_params_t player;
	pps_display_mode_t display_mode; /* [display] mode */
	const char *output;              /* [display] output: a .y4m path, "-", or "" */
	bool output_every;               /* [display] output_timing = every */
	const char *log_path;            /* [log] file, or "" */
} pps_client_settings_t;

/* The client's key table (pps-config-doc prints its INI file and reference). */
const pps_config_schema_t *pps_client_settings_schema(void);

/*
 * Fills @settings from @config (made with pps_client_settings_schema()):
 * 0, or -EINVAL with a one-line reason naming the key in @err.
 */
int pps_client_settings_from_config(const pps_config_t *config, pps_client_settings_t *settings,
                                    char *err, size_t err_size);

#endif /* PPS_CLIENT_SETTINGS_H */
