/* SPDX-License-Identifier: MIT */
/*
 * pps-config-doc: prints the documented example INI files and the option
 * reference from the programs' own key tables.
 *
 *   pps-config-doc server     > config/server.ini
 *   pps-config-doc client     > config/client.ini
 *   pps-config-doc reference  (the Markdown tables between the markers of
 *                              docs/CONFIGURATION.md)
 */
#include "pps-client-settings.h"
#include "pps-config.h"
#include "pps-server-settings.h"
#include "pps-version.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static void
usage(FILE *out)
{
	fprintf(
	    out,
	    "Usage: pps-config-doc server|client|reference\n"
	    "Print the settings documentation generated from the programs' key tables.\n"
	    "\n"
	    "  server                   an example server.ini: every key with its default\n"
	    "  client                   an example client.ini: every key with its default\n"
	    "  reference                the option reference of docs/CONFIGURATION.md (Markdown)\n"
	    "  -h, --help               this help\n"
	    "  -V, --version            the version\n"
	    "\n"
	    "Exit status: 0 done; 1 output error; 2 usage error.\n");
}

int
main(int argc, char **argv)
{
	if (pps_cli_help_or_version(argc, argv, "pps-config-doc", usage))
		return 0;
	if (argc == 2 && strcmp(argv[1], "server") == 0)
		return pps_config_write_example(pps_server_settings_schema(), stdout) ? 1 : 0;
	if (argc == 2 && strcmp(argv[1], "client") == 0)
		return pps_config_write_example(pps_client_settings_schema(), stdout) ? 1 : 0;
	if (argc == 2 && strcmp(argv[1], "reference") == 0) {
		int ret = pps_config_write_reference(pps_server_settings_schema(), stdout);

		if (ret == 0 && fputc('\n', stdout) == EOF)
			ret = -EIO;
		if (ret == 0)
			ret = pps_config_write_reference(pps_client_settings_schema(), stdout);
		return ret ? 1 : 0;
	}
	fprintf(stderr, "usage: pps-config-doc server|client|reference (see --help)\n");
	return PPS_EXIT_USAGE;
}
