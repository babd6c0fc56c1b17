/* SPDX-License-Identifier: MIT */
/*
 * The server's settings: its key table (every [server], [source], [encoder],
 * [pps], [transport] and [adapt] key, with its default, range and help) and
 * the one place that turns a loaded configuration into the typed parameter
 * structs the server's objects take. pps-server, the ppssink element and the
 * tools that serve as the server does read their settings through here; no
 * library below reads the configuration.
 */
#ifndef PPS_SERVER_SETTINGS_H
#define PPS_SERVER_SETTINGS_H

#include "pps-config.h"
#include "pps-server-lib.h"

#include <stddef.h>
#include <stdint.h>

/* A file URI's bytes at most: a path of PATH_MAX, some of it escaped. */
#define PPS_SERVER_SETTINGS_URI_BYTES 8192

/* Upper bound of server.max_clients and max_clients_per_address (the real
 * bound is the open-files limit, which pps_socket_raise_fd_limit raises). */
#define PPS_SERVER_MAX_CLIENTS_BOUND 65536

/* Everything a pps_server is made of. Strings point into the configuration
 * they were read from, which must outlive them, or into the settings. */
typedef struct {
	/* media: [source], [encoder], [pps]; listener: [server], [pps],
	 * [transport]; closed_loop: [adapt] mode; adapt: [adapt], bounded by
	 * [encoder]; listen: [server] listen. The log path and the log
	 * callback are the program's (left NULL). */
	pps_server_params_t server;
	int64_t status_interval_us; /* [server] status_interval_s */
	/* [source] uri as a URI: a plain path, made file://; the capture's
	 * input points here (the one string the settings hold themselves). */
	char source_uri[PPS_SERVER_SETTINGS_URI_BYTES];
} pps_server_settings_t;

/* The server's key table (pps-config-doc prints its INI file and reference). */
const pps_config_schema_t *pps_server_settings_schema(void);

/*
 * Fills @settings from @config (made with pps_server_settings_schema()):
 * 0, or -EINVAL with a one-line reason naming the key in @err (settings
 * that are each valid but not together: a TLS certificate without its key,
 * a file source without a file, ...).
 */
int pps_server_settings_from_config(const pps_config_t *config, pps_server_settings_t *settings,
                                    char *err, size_t err_size);

#endif /* PPS_SERVER_SETTINGS_H */
