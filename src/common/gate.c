/* The launch gate (include/ft/gate.h). */
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "ft/gate.h"

static _Atomic int inside;  /* threads between enter and leave */
static _Atomic int closed;
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t opened = PTHREAD_COND_INITIALIZER, drained = PTHREAD_COND_INITIALIZER;
static pthread_mutex_t closer = PTHREAD_MUTEX_INITIALIZER; /* one closer at a time */
static _Thread_local int depth;
static _Thread_local int closing;   /* this thread closed the gate */
static _Thread_local int passed;    /* ... and entered while it was closed */

void ft_gate_enter(void)
{
	if (depth++)
		return;
	if (closing) { /* the closer's own calls pass */
		passed = 1;
		return;
	}
	for (;;) {
		/* (sequentially consistent: a closer that set closed sees this
		 * thread inside, or this thread sees closed) */
		atomic_fetch_add(&inside, 1);
		if (!atomic_load(&closed))
			return;
		atomic_fetch_sub(&inside, 1);
		pthread_mutex_lock(&m);
		pthread_cond_broadcast(&drained);
		while (atomic_load(&closed))
			pthread_cond_wait(&opened, &m);
		pthread_mutex_unlock(&m);
	}
}

void ft_gate_leave(void)
{
	if (!depth || --depth)
		return;
	if (passed) {
		passed = 0;
		return;
	}
	atomic_fetch_sub(&inside, 1);
	if (atomic_load(&closed)) {
		pthread_mutex_lock(&m);
		pthread_cond_broadcast(&drained);
		pthread_mutex_unlock(&m);
	}
}

void ft_gate_close(void)
{
	pthread_mutex_lock(&closer);
	atomic_store(&closed, 1);
	int mine = depth > 0;
	pthread_mutex_lock(&m);
	while (atomic_load(&inside) > mine) {
		/* (timed: a wake-up lost to a race costs a millisecond) */
		struct timespec t;
		clock_gettime(CLOCK_REALTIME, &t);
		t.tv_nsec += 1000000;
		if (t.tv_nsec >= 1000000000) {
			t.tv_sec++;
			t.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&drained, &m, &t);
	}
	pthread_mutex_unlock(&m);
	closing = 1;
}

void ft_gate_after_fork(void)
{
	pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
	pthread_cond_t cfresh = PTHREAD_COND_INITIALIZER;
	m = fresh;
	closer = fresh;
	opened = cfresh;
	drained = cfresh;
	atomic_store(&closed, 0);
	atomic_store(&inside, depth > 0 && !passed);
	closing = 0;
}

void ft_gate_open(void)
{
	closing = 0;
	pthread_mutex_lock(&m);
	atomic_store(&closed, 0);
	pthread_cond_broadcast(&opened);
	pthread_mutex_unlock(&m);
	pthread_mutex_unlock(&closer);
}
