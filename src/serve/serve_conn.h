/* The server's connections, below HTTP: one thread accepts them, hands
 * each to libmicrohttpd (serve_http.c), and enforces what libmicrohttpd
 * cannot:
 *
 *  - the connection cap: past max_connections a new connection is
 *    answered "503 Service Unavailable" with Retry-After and closed
 *    gracefully (what it sent is read and dropped, so the client reads
 *    the 503 instead of a reset). When the process is out of file
 *    descriptors, one kept in reserve is freed to answer the same way;
 *  - the header deadline: a connection that has not delivered a whole
 *    request line and headers header_timeout_s after it was accepted (or
 *    after its previous response) is shut down. libmicrohttpd's own
 *    timeout is only an idle timeout, which a client sending one byte at
 *    a time never reaches (slowloris).
 *
 * libmicrohttpd tells this layer when a connection starts and closes
 * (MHD_OPTION_NOTIFY_CONNECTION), and when its headers are in and its
 * response is out; the entry it gets back is the connection's
 * socket_context. */
#ifndef SG_SERVE_CONN_H
#define SG_SERVE_CONN_H
#include <stdint.h>
#include <sys/socket.h>

struct serve_conns;
struct conn_entry;

/* Hands an accepted socket over: 0 when taken (the taker closes it), else
 * the socket is already closed. */
typedef int (*conn_hand_over)(void *arg, int fd, const struct sockaddr *sa, socklen_t len);

/* Take over `listen_fd` (non-blocking, listening). NULL when out of memory. */
struct serve_conns *conns_new(int listen_fd, uint32_t max_connections, uint32_t header_timeout_s,
			      conn_hand_over hand_over, void *arg);
/* Start accepting. 0 or -errno. */
int conns_start(struct serve_conns *c);
/* Stop accepting and close the listening socket; live connections stay
 * (libmicrohttpd closes them). Safe to call twice. */
void conns_stop(struct serve_conns *c);
void conns_free(struct serve_conns *c);

/* From libmicrohttpd's notifications (any thread). `fd` is the socket;
 * the returned entry (NULL when out of memory) goes with the connection. */
struct conn_entry *conns_opened(struct serve_conns *c, int fd);
void conns_closed(struct serve_conns *c, struct conn_entry *e);
/* The request's headers are in: its header deadline no longer applies. */
void conns_headers_in(struct serve_conns *c, struct conn_entry *e);
/* Its response is out: a kept-alive connection owes the next request's
 * headers within header_timeout_s. */
void conns_request_done(struct serve_conns *c, struct conn_entry *e);
/* When the connection was accepted, while its first request is being read
 * (its client's clock started no later); 0 for a kept-alive connection's
 * later requests, or without an entry. */
uint64_t conns_first_request_ms(struct serve_conns *c, struct conn_entry *e);

/* Open connections; and how many were shut for a header deadline, or
 * answered 503 for the cap, since the start. */
uint32_t conns_live(struct serve_conns *c);
uint64_t conns_timed_out(struct serve_conns *c);
uint64_t conns_refused(struct serve_conns *c);

#endif
