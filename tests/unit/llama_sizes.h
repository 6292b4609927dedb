/* Weight sizes of a Llama-shaped model in first-touch order (bf16): the
 * embedding, per layer input norm, q, k, v, o, post-attention norm, gate,
 * up, down, then the final norm and (untied) the head. */
#ifndef FT_TEST_LLAMA_SIZES_H
#define FT_TEST_LLAMA_SIZES_H

#include <stdint.h>
#include <stdlib.h>

static inline uint32_t llama_sizes(uint64_t **out, uint32_t layers, uint64_t d, uint64_t ffn,
				   uint64_t kv, uint64_t vocab, int tied)
{
	uint64_t *s = malloc((layers * 9 + 3) * sizeof(*s));
	uint32_t n = 0;
	s[n++] = vocab * d * 2;
	for (uint32_t l = 0; l < layers; l++) {
		uint64_t layer[9] = { d * 2, d * d * 2, kv * d * 2, kv * d * 2, d * d * 2,
				      d * 2, ffn * d * 2, ffn * d * 2, d * ffn * 2 };
		for (int i = 0; i < 9; i++)
			s[n++] = layer[i];
	}
	s[n++] = d * 2;
	if (!tied)
		s[n++] = vocab * d * 2;
	*out = s;
	return n;
}

#endif
