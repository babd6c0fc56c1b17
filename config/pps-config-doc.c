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

#include <stdio.h>
#include <string.h>

int
main(int argc, char **argv)
{
	if (argc == 2 && strcmp(argv[1], "server") == 0)
		return pps_config_write_example(PPS_CONFIG_PROGRAM_SERVER, "server", stdout) ? 1
		                                                                             : 0;
	if (argc == 2 && strcmp(argv[1], "client") == 0)
		return pps_config_write_example(PPS_CONFIG_PROGRAM_CLIENT, "client", stdout) ? 1
		                                                                             : 0;
	if (argc == 2 && strcmp(argv[1], "reference") == 0)
		return pps_config_write_reference(stdout) ? 1 : 0;
	fprintf(stderr, "usage: %s server|client|reference\n", argv[0]);
	return PPS_EXIT_USAGE;
}
