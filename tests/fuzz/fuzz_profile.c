/*
 * libFuzzer target: profile.json text as FT_PROFILE_STORAGE_DIR would hold
 * it.  Whatever ft_profile_from_json accepts is planned at a budget taken
 * from the input's own bytes (memory mode) and in latency mode, written
 * back to JSON and read again; nothing may crash, leak or read out of
 * bounds (tests/fuzz/run.sh builds it with ASan and UBSan).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ft/plan.h"
#include "ft/profile.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 1);
	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = 0;
	struct ft_profile p;
	memset(&p, 0, sizeof(p));
	char why[256];
	if (ft_profile_from_json(text, &p, why, sizeof(why)) == FT_PROFILE_OK) {
		uint64_t total = 0;
		for (uint32_t t = 0; t < p.ntraps; t++)
			total += p.traps[t].bytes;
		for (int memory = 0; memory < 2; memory++) {
			struct ft_plan_input in = { .profile = &p,
						    .budget = memory ? total / 2 + (1ull << 28) : 0,
						    .num_blocks = 2 + size % 7, .min_blocks = 2,
						    .scale = 1.0, .raw = (int)(size & 1),
						    .one_block = (int)(size % 3 == 0) };
			struct ft_plan pl;
			if (!ft_plan_make(&in, &pl, why, sizeof(why)))
				ft_plan_free(&pl);
		}
		char *back = ft_profile_to_json(&p);
		struct ft_profile q;
		memset(&q, 0, sizeof(q));
		if (back && ft_profile_from_json(back, &q, why, sizeof(why)) == FT_PROFILE_OK)
			ft_profile_free(&q);
		free(back);
	}
	ft_profile_free(&p);
	free(text);
	return 0;
}
