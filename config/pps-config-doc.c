/* SPDX-License-Identifier: MIT */
/*
 * pps-config-doc: prints the documented example INI files and the README's
 * option reference from the loader's own key table.
 *
 *   pps-config-doc server     > config/server.ini
 *   pps-config-doc client     > config/client.ini
 *   pps-config-doc reference  (the Markdown tables between the README markers)
 */
#include "pps-config.h"
#include "pps-version.h"

#include <stdio.h>
#include <string.h>

static void
usage(FILE *out)
{
	fprintf(out,
	        "Usage: pps-config-doc server|client|reference\n"
	        "Print the settings documentation generated from the configuration loader's key\n"
	        "table.\n"
	        "\n"
	        "  server                   an example server.ini: every key with its default\n"
	        "  client                   an example client.ini: every key with its default\n"
	        "  reference                the README's option reference (Markdown tables)\n"
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
		return pps_config_write_example(PPS_CONFIG_PROGRAM_SERVER, "server", stdout) ? 1
		                                                                             : 0;
	if (argc == 2 && strcmp(argv[1], "client") == 0)
		return pps_config_write_example(PPS_CONFIG_PROGRAM_CLIENT, "client", stdout) ? 1
		                                                                             : 0;
	if (argc == 2 && strcmp(argv[1], "reference") == 0)
		return pps_config_write_reference(stdout) ? 1 : 0;
	fprintf(stderr, "usage: pps-config-doc server|client|reference (see --help)\n");
	return PPS_EXIT_USAGE;
}
