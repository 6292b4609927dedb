/* Pass detection on synthetic launch traces: repeating decode passes,
 * varying lengths, alternating prefill/decode shapes, tied embeddings,
 * weight initialisation before the first pass, graph replays, marks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ft/passes.h"

#define W 1   /* allocation holding the weights */
#define ACT 2 /* activation segment, buffers reused every layer */
#define KV 3  /* persistent KV cache */

struct gen {
	struct ft_passes p;
	uint64_t launches;
	uint64_t boundaries[64];
	int nb;
	uint64_t starts[64]; /* launch index where each forward began */
	int nf;
};

static void launch(struct gen *g, int n, ...)
{
	struct ft_region_ref r[8];
	va_list ap;
	va_start(ap, n);
	for (int i = 0; i < n; i++) {
		r[i] = (struct ft_region_ref){ 0 };
		r[i].alloc_id = va_arg(ap, unsigned);
		r[i].offset = va_arg(ap, unsigned);
	}
	va_end(ap);
	uint64_t start;
	if (ft_passes_launch(&g->p, g->launches, r, (unsigned)n, &start) == FT_PASS_EAGER &&
	    g->nb < 64)
		g->boundaries[g->nb++] = start;
	g->launches++;
}

/* One forward of a layers-deep model; shape selects the activation offsets
 * (prefill buffers are larger, so they sit elsewhere); extra adds per-layer
 * elementwise launches (longer sequences run more of them here). */
static void forward(struct gen *g, int layers, int shape, int extra, int tied, int step)
{
	unsigned a = shape ? 4096 : 0; /* activation base for this shape */
	g->starts[g->nf++] = g->launches;
	launch(g, 3, 4 + step % 2, 0, W, 0, ACT, a);            /* embedding: ids, table */
	for (int l = 0; l < layers; l++) {
		unsigned w = 100 + (unsigned)l * 10;
		launch(g, 3, ACT, a, W, w + 0, ACT, a + 64);    /* norm */
		launch(g, 3, ACT, a + 64, W, w + 1, ACT, a + 128); /* qkv */
		launch(g, 3, ACT, a + 128, KV, (unsigned)l, ACT, a + 192); /* attention */
		launch(g, 3, ACT, a + 192, W, w + 2, ACT, a);   /* o */
		launch(g, 3, ACT, a, W, w + 3, ACT, a + 256);   /* up */
		for (int e = 0; e < extra; e++)
			launch(g, 2, ACT, a + 256, ACT, a + 320);
		launch(g, 3, ACT, a + 256, W, w + 4, ACT, a);   /* down */
	}
	launch(g, 3, ACT, a, W, 90, ACT, a + 64);               /* final norm */
	launch(g, 3, ACT, a + 64, W, tied ? 0 : 91, ACT, a + 512); /* head */
	launch(g, 2, ACT, a + 512, 4 + (step + 1) % 2, 0);      /* argmax -> next ids */
}

static void init_weights(struct gen *g, int layers)
{
	launch(g, 1, W, 0);
	for (int l = 0; l < layers; l++)
		for (unsigned k = 0; k < 5; k++)
			launch(g, 1, W, 100 + (unsigned)l * 10 + (4 - k)); /* creation order differs */
	launch(g, 1, W, 90);
	launch(g, 1, W, 91);
}

static int setup(void **state)
{
	struct gen *g = calloc(1, sizeof(*g));
	assert_int_equal(ft_passes_init(&g->p), 0);
	*state = g;
	return 0;
}

static int teardown(void **state)
{
	struct gen *g = *state;
	ft_passes_destroy(&g->p);
	free(g);
	return 0;
}

/* Every forward after the first starts a detected pass, exactly there. */
static void expect_all(struct gen *g, int from)
{
	int want = g->nf - from;
	if (g->nb != want)
		fail_msg("%d boundaries detected, %d forwards to find", g->nb, want);
	for (int i = 0; i < want; i++)
		assert_int_equal(g->boundaries[i], g->starts[from + i]);
}

static void repeating_decode(void **state)
{
	struct gen *g = *state;
	for (int s = 0; s < 8; s++)
		forward(g, 6, 0, 0, 0, s);
	expect_all(g, 1);
	assert_int_equal(g->p.passes, 7);
}

static void varying_lengths_and_shapes(void **state)
{
	struct gen *g = *state;
	static const int shape[] = { 1, 0, 0, 0, 1, 0, 0, 1, 1, 0 };
	static const int extra[] = { 3, 0, 0, 0, 5, 0, 0, 1, 2, 0 };
	for (int s = 0; s < 10; s++)
		forward(g, 4, shape[s], extra[s], 0, s);
	expect_all(g, 1);
}

static void tied_embeddings(void **state)
{
	struct gen *g = *state;
	for (int s = 0; s < 6; s++)
		forward(g, 4, 0, 0, 1, s);
	expect_all(g, 1); /* at the embedding, not at the head that shares it */
}

static void after_weight_init(void **state)
{
	struct gen *g = *state;
	init_weights(g, 4);
	for (int s = 0; s < 6; s++)
		forward(g, 4, s == 0, 0, 0, s);
	/* The first forward may or may not be told apart from the
	 * initialisation; every later one is found, where it starts. */
	assert_true(g->nb == g->nf - 1 || g->nb == g->nf);
	int off = g->nb - (g->nf - 1);
	for (int i = 0; i < g->nf - 1; i++)
		assert_int_equal(g->boundaries[off + i], g->starts[1 + i]);
}

/* A deep model: initialisation plus the first forward exceed the 256
 * launches after which learning restarts; later forwards must still be
 * found where they start. */
static void deep_model_after_init(void **state)
{
	struct gen *g = *state;
	init_weights(g, 16);
	for (int s = 0; s < 8; s++)
		forward(g, 16, s == 0, s == 0 ? 3 : 0, 0, s);
	int found = 0;
	for (int f = 2; f < g->nf; f++)
		for (int i = 0; i < g->nb; i++)
			found += g->boundaries[i] == g->starts[f];
	if (found != g->nf - 2)
		fail_msg("%d of %d forward starts found (%d boundaries)", found, g->nf - 2, g->nb);
}

static void graphs_and_marks(void **state)
{
	struct gen *g = *state;
	assert_int_equal(ft_passes_graph(&g->p, 1), FT_PASS_GRAPH);
	assert_int_equal(ft_passes_graph(&g->p, 0), FT_PASS_NONE);
	assert_int_equal(g->p.passes, 1);
	assert_int_equal(ft_passes_mark(&g->p), FT_PASS_MARK);
	/* After a mark, only marks count. */
	for (int s = 0; s < 4; s++)
		forward(g, 4, 0, 0, 0, s);
	assert_int_equal(g->nb, 0);
	assert_int_equal(ft_passes_graph(&g->p, 1), FT_PASS_NONE);
	assert_int_equal(ft_passes_mark(&g->p), FT_PASS_MARK);
	assert_int_equal(g->p.passes, 3);
}

static void no_repeat_no_pass(void **state)
{
	struct gen *g = *state;
	/* A long stream of distinct regions never repeats. */
	for (unsigned i = 0; i < 5000; i++)
		launch(g, 2, W, i, ACT, i % 7);
	assert_int_equal(g->nb, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(repeating_decode, setup, teardown),
		cmocka_unit_test_setup_teardown(varying_lengths_and_shapes, setup, teardown),
		cmocka_unit_test_setup_teardown(tied_embeddings, setup, teardown),
		cmocka_unit_test_setup_teardown(after_weight_init, setup, teardown),
		cmocka_unit_test_setup_teardown(deep_model_after_init, setup, teardown),
		cmocka_unit_test_setup_teardown(graphs_and_marks, setup, teardown),
		cmocka_unit_test_setup_teardown(no_repeat_no_pass, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
