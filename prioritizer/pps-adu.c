/* SPDX-License-Identifier: MIT */
#include "pps-adu.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

struct pps_adu {
	atomic_int refcount;
	pps_adu_info_t info;
	size_t size;
	uint8_t *data;
};

static bool
info_valid(const pps_adu_info_t *info)
{
	return info->dep_count <= PPS_ADU_MAX_DEPS &&
	       info->temporal_layer < PPS_ADU_MAX_TEMPORAL_LAYERS &&
	       info->quality_layer < PPS_ADU_MAX_QUALITY_LAYERS &&
	       info->frame_type <= PPS_ADU_FRAME_PD;
}

pps_adu_t *
pps_adu_new_take(const pps_adu_info_t *info, uint8_t *data, size_t size)
{
	pps_adu_t *adu;

	if (!info_valid(info)) {
		errno = EINVAL;
		return NULL;
	}
	adu = malloc(sizeof(*adu));
	if (!adu) {
		errno = ENOMEM;
		return NULL;
	}
	atomic_init(&adu->refcount, 1);
	adu->info = *info;
	adu->size = size;
	adu->data = data;
	return adu;
}

pps_adu_t *
pps_adu_new(const pps_adu_info_t *info, const uint8_t *data, size_t size)
{
	uint8_t *copy = malloc(size ? size : 1);
	pps_adu_t *adu;

	if (!copy) {
		errno = ENOMEM;
		return NULL;
	}
	if (size)
		memcpy(copy, data, size);
	adu = pps_adu_new_take(info, copy, size);
	if (!adu)
		free(copy);
	return adu;
}

pps_adu_t *
pps_adu_ref(pps_adu_t *adu)
{
	atomic_fetch_add_explicit(&adu->refcount, 1, memory_order_relaxed);
	return adu;
}

void
pps_adu_unref(pps_adu_t *adu)
{
	if (!adu)
		return;
	if (atomic_fetch_sub_explicit(&adu->refcount, 1, memory_order_acq_rel) != 1)
		return;
	free(adu->data);
	free(adu);
}

const pps_adu_info_t *
pps_adu_info(const pps_adu_t *adu)
{
	return &adu->info;
}

const uint8_t *
pps_adu_data(const pps_adu_t *adu)
{
	return adu->data;
}

size_t
pps_adu_size(const pps_adu_t *adu)
{
	return adu->size;
}

bool
pps_adu_depends_on(const pps_adu_t *adu, uint32_t id)
{
	for (unsigned i = 0; i < adu->info.dep_count; i++) {
		if (adu->info.deps[i] == id)
			return true;
	}
	return false;
}
