/* Admission for the HTTP server: a cap on running requests per server and
 * per tenant, and a bounded FIFO queue in front of them (see
 * serve_internal.h). One mutex, one condition variable: every change
 * broadcasts, and each waiter checks whether it may go. The queue is at
 * most a few hundred long, so the scans are cheap.
 *
 * A waiter whose client may hang up (gate_wait.gone) wakes every
 * GATE_POLL_MS to ask, so that a request nobody waits for any more gives
 * its place up instead of running. Each running request holds a ticket
 * with the time it is due to end at the latest, which is what Retry-After
 * is estimated from. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "lib/clock.h"
#include "serve_internal.h"

#define GATE_POLL_MS 200

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
	struct gate_ticket *tickets; /* the running requests */
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

static struct timespec at_ns(uint64_t ns)
{
	return (struct timespec){ .tv_sec = (time_t)(ns / 1000000000ull),
				  .tv_nsec = (long)(ns % 1000000000ull) };
}

/* Wait in line until the request may start, the wait is over, the gate
 * closes or the client hangs up. Called and returns with the lock held. */
static enum gate_verdict wait_in_line(struct serve_gate *g, struct gate_waiter *w,
				      const struct gate_wait *how)
{
	const uint64_t ms = 1000000; /* ns */
	uint64_t until = clock_ns(CLOCK_MONOTONIC) + how->wait_ms * ms;
	enum gate_verdict v;

	enqueue(g, w);
	for (;;) {
		uint64_t now = clock_ns(CLOCK_MONOTONIC), wake = until;
		struct timespec ts;

		if (may_start(g, w, w->t, w->cap)) {
			v = GATE_OK;
			break;
		}
		if (g->closed || now >= until) {
			v = blame(g, w->t, w->cap);
			break;
		}
		if (how->gone) {
			/* Ask without the lock: it is a syscall on the client's socket. */
			pthread_mutex_unlock(&g->lock);
			bool gone = how->gone(how->gone_arg);
			pthread_mutex_lock(&g->lock);
			if (gone) {
				v = GATE_GONE;
				break;
			}
			if (now + GATE_POLL_MS * ms < wake)
				wake = now + GATE_POLL_MS * ms;
			if (may_start(g, w, w->t, w->cap))
				continue;
		}
		ts = at_ns(wake);
		pthread_cond_timedwait(&g->changed, &g->lock, &ts);
	}
	dequeue(g, w);
	/* Our place in line is gone either way: those behind may go now. */
	pthread_cond_broadcast(&g->changed);
	return v;
}

enum gate_verdict gate_enter(struct serve_gate *g, const char *tenant, uint32_t tenant_cap,
			     const struct gate_wait *how, struct gate_ticket *ticket)
{
	struct gate_waiter w = { .cap = tenant_cap ? tenant_cap : 1 };
	enum gate_verdict v = GATE_OK;

	memset(ticket, 0, sizeof(*ticket));
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
	if (!may_start(g, NULL, w.t, w.cap)) {
		/* No wait, or no room to wait: the tenant's own cap or share is
		 * to blame whenever it is full, the server's otherwise. */
		if (!how->wait_ms)
			v = blame(g, w.t, w.cap);
		else if (w.t->waiting >= g->tenant_queue)
			v = GATE_TENANT_QUEUE;
		else if (g->waiting >= g->max_waiting)
			v = w.t->running >= w.cap ? GATE_TENANT_FULL : GATE_SERVER_QUEUE;
		else
			v = wait_in_line(g, &w, how);
	}
	if (v != GATE_OK) {
		tenant_put(g, w.t);
		pthread_mutex_unlock(&g->lock);
		return v;
	}
	g->running++;
	w.t->running++;
	ticket->tenant = w.t;
	ticket->ends_ms = clock_ms(CLOCK_MONOTONIC) + how->expected_ms;
	ticket->next = g->tickets;
	if (g->tickets)
		g->tickets->prev = ticket;
	g->tickets = ticket;
	pthread_mutex_unlock(&g->lock);
	return GATE_OK;
}

void gate_leave(struct serve_gate *g, struct gate_ticket *ticket)
{
	struct gate_tenant *t = ticket->tenant;

	if (!t)
		return;
	pthread_mutex_lock(&g->lock);
	if (ticket->prev)
		ticket->prev->next = ticket->next;
	else
		g->tickets = ticket->next;
	if (ticket->next)
		ticket->next->prev = ticket->prev;
	t->running--;
	g->running--;
	tenant_put(g, t);
	pthread_cond_broadcast(&g->changed);
	pthread_mutex_unlock(&g->lock);
	memset(ticket, 0, sizeof(*ticket));
}

unsigned gate_retry_after_s(struct serve_gate *g)
{
	uint64_t now = clock_ms(CLOCK_MONOTONIC), first = UINT64_MAX;
	unsigned s;

	pthread_mutex_lock(&g->lock);
	for (const struct gate_ticket *t = g->tickets; t; t = t->next)
		if (t->ends_ms < first)
			first = t->ends_ms;
	pthread_mutex_unlock(&g->lock);
	if (first == UINT64_MAX || first <= now)
		return 1;
	s = (unsigned)((first - now + 999) / 1000);
	return s > SERVE_RETRY_AFTER_MAX_S ? SERVE_RETRY_AFTER_MAX_S : s;
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
