/* SPDX-License-Identifier: MIT */
/*
 * Priority mapping: the send order inside one adaptation window.
 *
 * Each ADU gets a class from its (temporal, quality) layer under the policy;
 * classes go in order. A dependency never has a later class, because an ADU
 * depends only on lower-or-equal layers in both dimensions (its references
 * and, for an enhancement, the lower quality of the same frame) and every
 * class key grows with both. Inside one class, ADUs that depend on each other
 * (a P chain) go in dependency order (their depth in the chain); ADUs of equal
 * depth go in bit-reversed order of time, so that sending any prefix of them
 * spreads the frames shown evenly (TOMCCAP 2008 section 7: priority order in
 * the window; the even spread is what makes a dropped half of a temporal
 * layer cost every other frame, not a frozen tail).
 */
#include "pps-names.h"
#include "pps-prioritizer.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

const char *const pps_priority_policy_names[] = {
    [PPS_PRIORITY_TEMPORAL_FIRST] = "temporal-first",
    [PPS_PRIORITY_QUALITY_FIRST] = "quality-first",
    [PPS_PRIORITY_BALANCED] = "balanced",
    [PPS_PRIORITY_POLICY_COUNT] = NULL,
};
_Static_assert(sizeof(pps_priority_policy_names) / sizeof(pps_priority_policy_names[0]) ==
                   PPS_PRIORITY_POLICY_COUNT + 1,
               "a name for every pps_priority_policy_t");

const char *
pps_priority_policy_name(pps_priority_policy_t policy)
{
	if ((unsigned)policy < PPS_PRIORITY_POLICY_COUNT)
		return pps_priority_policy_names[policy];
	return "unknown";
}

int
pps_priority_policy_from_name(const char *name, pps_priority_policy_t *out)
{
	int i = pps_names_find(pps_priority_policy_names, name);

	if (i < 0)
		return i;
	*out = (pps_priority_policy_t)i;
	return 0;
}

static unsigned
class_key(const pps_adu_info_t *info, pps_priority_policy_t policy)
{
	unsigned t = info->temporal_layer, q = info->quality_layer;

	switch (policy) {
	case PPS_PRIORITY_QUALITY_FIRST:
		return t * 16 + q;
	case PPS_PRIORITY_BALANCED:
		return (t + q) * 16 + t;
	case PPS_PRIORITY_TEMPORAL_FIRST:
	default:
		return q * 16 + t;
	}
}

static unsigned
bit_reverse(unsigned value, unsigned bits)
{
	unsigned out = 0;

	for (unsigned i = 0; i < bits; i++) {
		out = out << 1 | (value & 1);
		value >>= 1;
	}
	return out;
}

typedef struct {
	pps_adu_t *adu;
	unsigned key;
	unsigned depth;
	unsigned spread; /* bit-reversed rank among ADUs of equal key and depth */
	uint32_t frame_index;
	size_t decode_pos;
} sort_item_t;

static int
compare_items(const void *a, const void *b)
{
	const sort_item_t *x = a, *y = b;

	if (x->key != y->key)
		return x->key < y->key ? -1 : 1;
	if (x->depth != y->depth)
		return x->depth < y->depth ? -1 : 1;
	if (x->spread != y->spread)
		return x->spread < y->spread ? -1 : 1;
	return x->decode_pos < y->decode_pos ? -1 : x->decode_pos > y->decode_pos;
}

static int
compare_time(const void *a, const void *b)
{
	const sort_item_t *x = *(const sort_item_t *const *)a, *y = *(const sort_item_t *const *)b;

	if (x->frame_index != y->frame_index)
		return x->frame_index < y->frame_index ? -1 : 1;
	return x->decode_pos < y->decode_pos ? -1 : x->decode_pos > y->decode_pos;
}

int
pps_priority_sort(pps_adu_t **adus, size_t n, pps_priority_policy_t policy)
{
	sort_item_t *items;
	sort_item_t **group;

	if (n < 2)
		return 0;
	items = calloc(n, sizeof(*items));
	group = calloc(n, sizeof(*group));
	if (!items || !group) {
		free(items);
		free(group);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		const pps_adu_info_t *info = pps_adu_info(adus[i]);

		items[i].adu = adus[i];
		items[i].key = class_key(info, policy);
		items[i].frame_index = info->frame_index;
		items[i].decode_pos = i;
		/* Depth in the chain of same-class dependencies inside the window.
		 * Input is in decode order, so dependencies are already placed. */
		for (size_t j = 0; j < i; j++) {
			if (items[j].key == items[i].key &&
			    pps_adu_depends_on(adus[i], pps_adu_info(adus[j])->id) &&
			    items[j].depth + 1 > items[i].depth)
				items[i].depth = items[j].depth + 1;
		}
	}
	/* Spread: rank each group of equal (key, depth) by time, bit-reverse. */
	for (size_t i = 0; i < n; i++) {
		size_t count = 0;
		unsigned bits = 0;

		for (size_t j = 0; j < n; j++) {
			if (items[j].key == items[i].key && items[j].depth == items[i].depth)
				group[count++] = &items[j];
		}
		if (group[0] != &items[i])
			continue; /* the group was ranked when its first member came up */
		qsort(group, count, sizeof(*group), compare_time);
		while ((1u << bits) < count)
			bits++;
		for (size_t r = 0; r < count; r++)
			group[r]->spread = bit_reverse((unsigned)r, bits);
	}
	qsort(items, n, sizeof(*items), compare_items);
	for (size_t i = 0; i < n; i++)
		adus[i] = items[i].adu;
	free(items);
	free(group);
	return 0;
}
