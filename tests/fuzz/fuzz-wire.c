/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for the wire parser. The first input byte picks how the
 * rest is cut into chunks, so splits at every boundary get exercised; every
 * record the parser returns must re-encode to the same size, and the parser
 * must never hand out a fragment outside its ADU.
 *
 *   CC=clang meson setup build-fuzz -Dfuzz=true && ninja -C build-fuzz
 *   build-fuzz/tests/fuzz/fuzz-wire -max_total_time=600 tests/fuzz/corpus
 */
#include "pps-wire.h"

#include <assert.h>
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	pps_wire_parser_t *parser;
	size_t step;

	if (size < 1)
		return 0;
	step = (size_t)data[0] % 17 + 1;
	data++;
	size--;
	parser = pps_wire_parser_new(2048);
	if (!parser)
		abort();
	while (size > 0) {
		size_t len = size < step ? size : step;
		const uint8_t *chunk = data;
		pps_wire_record_t record;
		int ret;

		data += len;
		size -= len;
		while ((ret = pps_wire_parser_next(parser, &chunk, &len, &record)) == 0) {
			uint8_t out[4096];
			size_t n = 0;

			ret = pps_wire_encode(&record, out, sizeof(out), &n);
			assert(ret == 0 && n > 0 && n <= 2048);
			if (record.kind == PPS_WIRE_ADU_FRAGMENT) {
				const pps_wire_adu_fragment_t *f = &record.u.adu_fragment;

				assert((uint64_t)f->offset + f->payload_len <= f->total_bytes);
				assert(f->dep_count <= PPS_WIRE_MAX_DEPS);
			}
		}
		if (ret != -EAGAIN) {
			/* Failed: the detail is named, and the failure stays. */
			assert(pps_wire_parser_error_code(parser) != PPS_WIRE_OK);
			assert(ret == (pps_wire_parser_error_code(parser) == PPS_WIRE_ERR_TOO_LONG
			                   ? -EMSGSIZE
			                   : -EPROTO));
			break;
		}
	}
	pps_wire_parser_free(parser);
	return 0;
}
