/*
 * The launch gate (include/ft/gate.h): nesting counts once, the closer's
 * own calls pass, a thread at a closed gate waits until it opens, and
 * closing waits until the threads inside have left.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "ft/gate.h"

static void sleep_ms(int ms)
{
	struct timespec t = { 0, ms * 1000000L };
	nanosleep(&t, NULL);
}

/* Nested entries and the closer's own calls. */
static void nesting_and_the_closer(void **state)
{
	(void)state;
	ft_gate_enter();
	ft_gate_enter();
	ft_gate_leave();
	ft_gate_close(); /* inside: it waits for no one else */
	ft_gate_enter(); /* the closer passes */
	ft_gate_leave();
	ft_gate_open();
	ft_gate_leave();
	ft_gate_close(); /* outside, nothing inside */
	ft_gate_enter();
	ft_gate_leave();
	ft_gate_open();
}

static _Atomic int stage;

static void *launcher(void *arg)
{
	(void)arg;
	ft_gate_enter();
	atomic_store(&stage, 1);
	while (atomic_load(&stage) < 2)
		sleep_ms(1);
	sleep_ms(20); /* still inside while the closer waits */
	atomic_store(&stage, 3);
	ft_gate_leave();
	return NULL;
}

static void *latecomer(void *arg)
{
	(void)arg;
	ft_gate_enter(); /* the gate is closed: waits until it opens */
	atomic_store(&stage, 5);
	ft_gate_leave();
	return NULL;
}

/* Closing waits for a thread inside; a thread at the closed gate waits for
 * it to open. */
static void close_waits_and_blocks(void **state)
{
	(void)state;
	pthread_t a, b;
	atomic_store(&stage, 0);
	assert_int_equal(pthread_create(&a, NULL, launcher, NULL), 0);
	while (atomic_load(&stage) < 1)
		sleep_ms(1);
	atomic_store(&stage, 2);
	ft_gate_close();
	assert_int_equal(atomic_load(&stage), 3); /* it had left */
	assert_int_equal(pthread_create(&b, NULL, latecomer, NULL), 0);
	sleep_ms(30);
	assert_int_equal(atomic_load(&stage), 3); /* still waiting at the gate */
	ft_gate_open();
	pthread_join(b, NULL);
	assert_int_equal(atomic_load(&stage), 5);
	pthread_join(a, NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(nesting_and_the_closer),
		cmocka_unit_test(close_waits_and_blocks),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
