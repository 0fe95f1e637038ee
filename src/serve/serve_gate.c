/* Admission for the HTTP server: a cap on running requests per server and
 * per tenant, and a bounded FIFO queue in front of them (see
 * serve_internal.h). One mutex, one condition variable: every change
 * broadcasts, and each waiter checks whether it may go. The queue is at
 * most a few dozen long, so the scans are cheap. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "serve_internal.h"

struct gate_tenant {
	char name[SG_TENANT_MAX];
	uint32_t running, waiting;
	struct gate_tenant *next;
};

struct gate_waiter {
	struct gate_tenant *t;
	uint32_t cap;
	struct gate_waiter *prev, *next;
};

struct serve_gate {
	pthread_mutex_t lock;
	pthread_cond_t changed;
	uint32_t max_running, max_waiting, tenant_queue;
	uint32_t running, waiting;
	bool closed;
	struct gate_tenant *tenants; /* those with a running or waiting request */
	struct gate_waiter *head, *tail;
};

struct serve_gate *gate_new(uint32_t max_running, uint32_t max_waiting, uint32_t tenant_queue)
{
	struct serve_gate *g = calloc(1, sizeof(*g));
	pthread_condattr_t attr;

	if (!g)
		return NULL;
	pthread_mutex_init(&g->lock, NULL);
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC); /* waits immune to clock steps */
	pthread_cond_init(&g->changed, &attr);
	pthread_condattr_destroy(&attr);
	g->max_running = max_running ? max_running : 1;
	g->max_waiting = max_waiting;
	g->tenant_queue = tenant_queue;
	return g;
}

void gate_free(struct serve_gate *g)
{
	if (!g)
		return;
	while (g->tenants) {
		struct gate_tenant *t = g->tenants;
		g->tenants = t->next;
		free(t);
	}
	pthread_cond_destroy(&g->changed);
	pthread_mutex_destroy(&g->lock);
	free(g);
}

static struct gate_tenant *tenant_get(struct serve_gate *g, const char *name)
{
	struct gate_tenant *t;

	for (t = g->tenants; t; t = t->next)
		if (!strcmp(t->name, name))
			return t;
	t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	snprintf(t->name, sizeof(t->name), "%s", name);
	t->next = g->tenants;
	g->tenants = t;
	return t;
}

/* Forget a tenant with nothing running or waiting: tenants come and go
 * with requests, the table must not grow with every name ever seen. */
static void tenant_put(struct serve_gate *g, struct gate_tenant *t)
{
	struct gate_tenant **pp;

	if (t->running || t->waiting)
		return;
	for (pp = &g->tenants; *pp; pp = &(*pp)->next) {
		if (*pp == t) {
			*pp = t->next;
			free(t);
			return;
		}
	}
}

static bool has_room(const struct serve_gate *g, const struct gate_tenant *t, uint32_t cap)
{
	return g->running < g->max_running && t->running < cap;
}

/* Whether a request of tenant t may start now, standing behind the
 * waiters from `head` up to (not including) `self`: every one of those
 * must be held back by its own tenant's cap, or it goes first. */
static bool may_start(const struct serve_gate *g, const struct gate_waiter *self,
		      const struct gate_tenant *t, uint32_t cap)
{
	if (g->closed || !has_room(g, t, cap))
		return false;
	for (const struct gate_waiter *w = g->head; w && w != self; w = w->next)
		if (w->t->running < w->cap)
			return false;
	return true;
}

static enum gate_verdict blame(const struct serve_gate *g, const struct gate_tenant *t,
			       uint32_t cap)
{
	if (g->closed)
		return GATE_CLOSED;
	return t->running >= cap ? GATE_TENANT_FULL : GATE_SERVER_FULL;
}

static void enqueue(struct serve_gate *g, struct gate_waiter *w)
{
	w->prev = g->tail;
	w->next = NULL;
	if (g->tail)
		g->tail->next = w;
	else
		g->head = w;
	g->tail = w;
	g->waiting++;
	w->t->waiting++;
}

static void dequeue(struct serve_gate *g, struct gate_waiter *w)
{
	if (w->prev)
		w->prev->next = w->next;
	else
		g->head = w->next;
	if (w->next)
		w->next->prev = w->prev;
	else
		g->tail = w->prev;
	g->waiting--;
	w->t->waiting--;
}

static struct timespec deadline_after(uint64_t ms)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += (time_t)(ms / 1000);
	ts.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	return ts;
}

enum gate_verdict gate_enter(struct serve_gate *g, const char *tenant, uint32_t tenant_cap,
			     uint64_t wait_ms)
{
	struct gate_waiter w = { .cap = tenant_cap ? tenant_cap : 1 };
	enum gate_verdict v = GATE_OK;
	struct timespec until;
	bool go;
	int err = 0;

	pthread_mutex_lock(&g->lock);
	if (g->closed) {
		pthread_mutex_unlock(&g->lock);
		return GATE_CLOSED;
	}
	w.t = tenant_get(g, tenant);
	if (!w.t) {
		pthread_mutex_unlock(&g->lock);
		return GATE_SERVER_FULL; /* out of memory: the server's problem */
	}
	if (may_start(g, NULL, w.t, w.cap))
		goto start;
	/* No wait, or no room to wait: the tenant's own cap or share is to
	 * blame whenever it is full, the server's otherwise. */
	if (!wait_ms)
		v = blame(g, w.t, w.cap);
	else if (w.t->waiting >= g->tenant_queue)
		v = GATE_TENANT_QUEUE;
	else if (g->waiting >= g->max_waiting)
		v = w.t->running >= w.cap ? GATE_TENANT_FULL : GATE_SERVER_QUEUE;
	if (v != GATE_OK) {
		tenant_put(g, w.t);
		pthread_mutex_unlock(&g->lock);
		return v;
	}

	enqueue(g, &w);
	until = deadline_after(wait_ms);
	for (;;) {
		go = may_start(g, &w, w.t, w.cap);
		if (go || g->closed || err == ETIMEDOUT)
			break;
		err = pthread_cond_timedwait(&g->changed, &g->lock, &until);
	}
	dequeue(g, &w);
	/* Our place in line is gone either way: those behind may go now. */
	pthread_cond_broadcast(&g->changed);
	if (!go) {
		v = blame(g, w.t, w.cap);
		tenant_put(g, w.t);
		pthread_mutex_unlock(&g->lock);
		return v;
	}
start:
	g->running++;
	w.t->running++;
	pthread_mutex_unlock(&g->lock);
	return GATE_OK;
}

void gate_leave(struct serve_gate *g, const char *tenant)
{
	struct gate_tenant *t;

	pthread_mutex_lock(&g->lock);
	for (t = g->tenants; t && strcmp(t->name, tenant); t = t->next)
		;
	if (t && t->running) {
		t->running--;
		g->running--;
		tenant_put(g, t);
	}
	pthread_cond_broadcast(&g->changed);
	pthread_mutex_unlock(&g->lock);
}

void gate_close(struct serve_gate *g)
{
	pthread_mutex_lock(&g->lock);
	g->closed = true;
	pthread_cond_broadcast(&g->changed);
	pthread_mutex_unlock(&g->lock);
}

void gate_counts(struct serve_gate *g, uint32_t *running, uint32_t *waiting)
{
	pthread_mutex_lock(&g->lock);
	*running = g->running;
	*waiting = g->waiting;
	pthread_mutex_unlock(&g->lock);
}
