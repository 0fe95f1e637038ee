/* libmicrohttpd, loaded on first use (see src/lib/mhd_lazy.h). */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <microhttpd.h>
#include "array_len.h"
#include "dl_lazy.h"
#include "log.h"
#include "mhd_lazy.h"

/* The functions the tree calls. Only MHD_start_daemon() comes before all
 * others (no daemon, no connection, no response), so it loads the rest. */
static struct {
	struct MHD_Daemon *(*start_daemon_va)(unsigned int, uint16_t, MHD_AcceptPolicyCallback,
					      void *, MHD_AccessHandlerCallback, void *, va_list);
	void (*stop_daemon)(struct MHD_Daemon *);
	enum MHD_Result (*add_connection)(struct MHD_Daemon *, MHD_socket, const struct sockaddr *,
					  socklen_t);
	const union MHD_ConnectionInfo *(*get_connection_info)(struct MHD_Connection *,
							       enum MHD_ConnectionInfoType, ...);
	const char *(*lookup_connection_value)(struct MHD_Connection *, enum MHD_ValueKind,
					       const char *);
	void (*suspend_connection)(struct MHD_Connection *);
	void (*resume_connection)(struct MHD_Connection *);
	struct MHD_Response *(*create_response_from_buffer)(size_t, void *,
							    enum MHD_ResponseMemoryMode);
	enum MHD_Result (*add_response_header)(struct MHD_Response *, const char *, const char *);
	enum MHD_Result (*queue_response)(struct MHD_Connection *, unsigned int,
					  struct MHD_Response *);
	void (*destroy_response)(struct MHD_Response *);
} mhd;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int load_err;
static char load_detail[256];

static void load(void)
{
	const struct dl_lazy_sym syms[] = {
		{ "MHD_start_daemon_va", &mhd.start_daemon_va },
		{ "MHD_stop_daemon", &mhd.stop_daemon },
		{ "MHD_add_connection", &mhd.add_connection },
		{ "MHD_get_connection_info", &mhd.get_connection_info },
		{ "MHD_lookup_connection_value", &mhd.lookup_connection_value },
		{ "MHD_suspend_connection", &mhd.suspend_connection },
		{ "MHD_resume_connection", &mhd.resume_connection },
		{ "MHD_create_response_from_buffer", &mhd.create_response_from_buffer },
		{ "MHD_add_response_header", &mhd.add_response_header },
		{ "MHD_queue_response", &mhd.queue_response },
		{ "MHD_destroy_response", &mhd.destroy_response },
	};

	load_err = dl_lazy_open(MHD_LAZY_SONAME, syms, ARRAY_LEN(syms), load_detail,
				sizeof(load_detail));
}

int mhd_lazy_load(char *detail, size_t len)
{
	pthread_once(&once, load);
	if (load_err && detail)
		snprintf(detail, len, "%s", load_detail);
	return load_err;
}

struct MHD_Daemon *MHD_start_daemon(unsigned int flags, uint16_t port, MHD_AcceptPolicyCallback apc,
				    void *apc_cls, MHD_AccessHandlerCallback dh, void *dh_cls, ...)
{
	struct MHD_Daemon *d;
	char why[256];
	va_list ap;

	if (mhd_lazy_load(why, sizeof(why))) {
		sg_error("http: %s", why);
		errno = ELIBACC;
		return NULL;
	}
	va_start(ap, dh_cls);
	d = mhd.start_daemon_va(flags, port, apc, apc_cls, dh, dh_cls, ap);
	va_end(ap);
	return d;
}

void MHD_stop_daemon(struct MHD_Daemon *daemon)
{
	mhd.stop_daemon(daemon);
}

enum MHD_Result MHD_add_connection(struct MHD_Daemon *daemon, MHD_socket client_socket,
				   const struct sockaddr *addr, socklen_t addrlen)
{
	return mhd.add_connection(daemon, client_socket, addr, addrlen);
}

/* The info types the tree asks for take no further argument. */
const union MHD_ConnectionInfo *MHD_get_connection_info(struct MHD_Connection *connection,
							enum MHD_ConnectionInfoType info_type, ...)
{
	return mhd.get_connection_info(connection, info_type);
}

const char *MHD_lookup_connection_value(struct MHD_Connection *connection, enum MHD_ValueKind kind,
					const char *key)
{
	return mhd.lookup_connection_value(connection, kind, key);
}

void MHD_suspend_connection(struct MHD_Connection *connection)
{
	mhd.suspend_connection(connection);
}

void MHD_resume_connection(struct MHD_Connection *connection)
{
	mhd.resume_connection(connection);
}

struct MHD_Response *MHD_create_response_from_buffer(size_t size, void *buffer,
						     enum MHD_ResponseMemoryMode mode)
{
	return mhd.create_response_from_buffer(size, buffer, mode);
}

enum MHD_Result MHD_add_response_header(struct MHD_Response *response, const char *header,
					const char *content)
{
	return mhd.add_response_header(response, header, content);
}

enum MHD_Result MHD_queue_response(struct MHD_Connection *connection, unsigned int status_code,
				   struct MHD_Response *response)
{
	return mhd.queue_response(connection, status_code, response);
}

void MHD_destroy_response(struct MHD_Response *response)
{
	mhd.destroy_response(response);
}
