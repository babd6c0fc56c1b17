/* SPDX-License-Identifier: MIT */
#include "pps-names.h"

#include <errno.h>
#include <string.h>

int
pps_names_find(const char *const *names, const char *name)
{
	for (int i = 0; names[i]; i++)
		if (strcmp(names[i], name) == 0)
			return i;
	return -EINVAL;
}

const char *
pps_names_get(const char *const *names, int value, const char *fallback)
{
	for (int i = 0; value >= 0 && names[i]; i++)
		if (i == value)
			return names[i];
	return fallback;
}
