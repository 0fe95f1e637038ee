/* Quiet moments for the warm pool's own work (see src/pool/pool_quiet.h). */
#include <errno.h>
#include <time.h>
#include "pool_quiet.h"

/* The one this thread entered: a caller's thread serves one caller at a
 * time, and may take several sandboxes for it (retries, tests). */
static __thread struct pool_quiet *entered;

void pool_quiet_init(struct pool_quiet *q)
{
	pthread_condattr_t attr;

	pthread_mutex_init(&q->lock, NULL);
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&q->changed, &attr);
	pthread_condattr_destroy(&attr);
	q->on_path = 0;
	q->stopping = false;
}

void pool_quiet_destroy(struct pool_quiet *q)
{
	pthread_cond_destroy(&q->changed);
	pthread_mutex_destroy(&q->lock);
}

void pool_quiet_enter(struct pool_quiet *q)
{
	if (entered == q)
		return;
	entered = q;
	pthread_mutex_lock(&q->lock);
	q->on_path++;
	pthread_mutex_unlock(&q->lock);
}

void pool_quiet_leave(struct pool_quiet *q)
{
	if (entered != q)
		return;
	entered = NULL;
	pthread_mutex_lock(&q->lock);
	if (--q->on_path == 0)
		pthread_cond_broadcast(&q->changed);
	pthread_mutex_unlock(&q->lock);
}

bool pool_quiet_wait(struct pool_quiet *q, uint64_t max_ms)
{
	struct timespec until;
	bool quiet;
	int err = 0;

	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += (time_t)(max_ms / 1000);
	until.tv_nsec += (long)(max_ms % 1000) * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&q->lock);
	while (q->on_path && !q->stopping && err != ETIMEDOUT)
		err = pthread_cond_timedwait(&q->changed, &q->lock, &until);
	quiet = !q->on_path;
	pthread_mutex_unlock(&q->lock);
	return quiet;
}

void pool_quiet_stop(struct pool_quiet *q)
{
	pthread_mutex_lock(&q->lock);
	q->stopping = true;
	pthread_cond_broadcast(&q->changed);
	pthread_mutex_unlock(&q->lock);
}
