/* Writes a synthetic Llama-3-8B-shaped profile.json for the tool tests.
 * usage: make_profile DIR LAYERS DEVICE_NAME TIME_SCALE */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ft/profile.h"
#include "ft/traps.h"
#include "llama_sizes.h"

int main(int argc, char **argv)
{
	if (argc != 5)
		return 2;
	struct ft_profile p;
	memset(&p, 0, sizeof(p));
	p.schema = FT_PROFILE_SCHEMA;
	snprintf(p.library, sizeof(p.library), "%s", FT_VERSION);
	snprintf(p.device.name, sizeof(p.device.name), "%s", argv[3]);
	p.device.total_bytes = 150754820096ULL;
	p.device.driver = 13000;
	p.nweights = llama_sizes(&p.weights, (uint32_t)atoi(argv[2]), 4096, 14336, 1024, 128256, 0);
	p.fingerprint = ft_profile_fingerprint(p.weights, p.nweights);
	int k = ft_traps_group(p.weights, p.nweights, 256 << 20, &p.traps);
	p.ntraps = (uint32_t)k;
	double scale = atof(argv[4]);
	for (int i = 0; i < k; i++) {
		double ms = scale * (double)p.traps[i].bytes / 3.3e9; /* ~3.3 TB/s decode */
		p.traps[i].compute = (struct ft_stat_ms){ ms, ms * 0.97, ms * 1.1, 10 };
	}
	static const struct ft_curve_point curve[] = {
		{ 65536, 0.0041 }, { 262144, 0.0075 }, { 1 << 20, 0.0218 },
		{ 4 << 20, 0.0791 }, { 16 << 20, 0.3107 }, { 64 << 20, 1.243 },
	};
	p.ncurve = 6;
	p.curve = malloc(sizeof(curve));
	memcpy(p.curve, curve, sizeof(curve));
	int rc = ft_profile_save(&p, argv[1]);
	ft_profile_free(&p);
	return rc ? 1 : 0;
}
