/* guard.c - see guard.h. */
#include "http/guard.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "http/forwarded.h"
#include "labd/log.h"
#include "labd/str.h"

#define ADDR_BUCKETS 1024

struct guard {
	int fd;
	long long deadline_ms; /* 0: none */
	unsigned char addr[16]; /* IPv6, or IPv4-mapped */
	char peer[INET6_ADDRSTRLEN]; /* the same as text, made once per connection */
	bool counted;
	/* Behind a trusted front proxy: the forwarded client of the request in
	 * flight (or of the WebSocket it became), counted instead of the peer. */
	unsigned char client[16];
	bool client_counted;
	struct guard *prev, *next;
};

/* Connections per address: a chained table, an entry freed at zero. */
struct addr_count {
	unsigned char addr[16];
	unsigned n;
	struct addr_count *next;
};

static pthread_mutex_t addr_lock = PTHREAD_MUTEX_INITIALIZER;
static struct addr_count *addr_table[ADDR_BUCKETS];

static _Thread_local struct guard *guarded; /* this worker's connections */
static _Thread_local unsigned with_deadline;

static unsigned bucket(const unsigned char *addr)
{
	uint32_t h = 2166136261u; /* FNV-1a */
	for (int i = 0; i < 16; i++)
		h = (h ^ addr[i]) * 16777619u;
	return h % ADDR_BUCKETS;
}

/* Adds one connection of addr; returns the new count (0 when out of memory:
 * the connection is then let through uncounted). */
static unsigned addr_acquire(const unsigned char *addr)
{
	unsigned b = bucket(addr), n = 0;
	struct addr_count *c;

	pthread_mutex_lock(&addr_lock);
	for (c = addr_table[b]; c && memcmp(c->addr, addr, 16) != 0; c = c->next)
		;
	if (!c && (c = calloc(1, sizeof(*c)))) {
		memcpy(c->addr, addr, 16);
		c->next = addr_table[b];
		addr_table[b] = c;
	}
	if (c)
		n = ++c->n;
	pthread_mutex_unlock(&addr_lock);
	return n;
}

static void addr_release(const unsigned char *addr)
{
	unsigned b = bucket(addr);

	pthread_mutex_lock(&addr_lock);
	for (struct addr_count **pc = &addr_table[b]; *pc; pc = &(*pc)->next) {
		struct addr_count *c = *pc;
		if (memcmp(c->addr, addr, 16) != 0)
			continue;
		if (--c->n == 0) {
			*pc = c->next;
			free(c);
		}
		break;
	}
	pthread_mutex_unlock(&addr_lock);
}

/* The client address as 16 bytes (IPv4 as ::ffff:a.b.c.d): its family
 * (AF_INET, AF_INET6), or 0 if none. */
static int client_addr(struct MHD_Connection *conn, unsigned char *out)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	const struct sockaddr *sa = ci ? ci->client_addr : NULL;

	memset(out, 0, 16);
	if (sa && sa->sa_family == AF_INET) {
		out[10] = out[11] = 0xff;
		memcpy(out + 12, &((const struct sockaddr_in *)sa)->sin_addr, 4);
		return AF_INET;
	}
	if (sa && sa->sa_family == AF_INET6) {
		memcpy(out, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
		return AF_INET6;
	}
	return 0;
}

/* addr of family (from client_addr) as text, "unknown" without one. */
static void peer_text(const unsigned char *addr, int family, char *out, size_t outlen)
{
	if (!family || !inet_ntop(family, family == AF_INET ? addr + 12 : addr, out,
				  (socklen_t)outlen))
		str_copy(out, outlen, "unknown");
}


/* conn's guard record, or NULL. */
static struct guard *guard_of(struct MHD_Connection *conn)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);

	return ci ? ci->socket_context : NULL;
}

void guard_open(struct MHD_Connection *conn, void **socket_context, const struct labd_config *cfg,
		long long deadline_ms)
{
	unsigned max_per_address = cfg->max_connections_per_address;
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
	struct guard *g = calloc(1, sizeof(*g));

	*socket_context = g;
	if (!g || !ci) {
		log_error("guard: cannot track a connection");
		return;
	}
	g->fd = ci->connect_fd;
	int family = client_addr(conn, g->addr);
	peer_text(g->addr, family, g->peer, sizeof(g->peer));
	/* A trusted front proxy's connections carry many clients: those are
	 * counted per request instead (guard_hold_client). */
	if (max_per_address && family && !forwarded_trusted(cfg, g->peer)) {
		unsigned n = addr_acquire(g->addr);
		g->counted = n > 0;
		if (n > max_per_address) {
			log_warn("guard: refusing a connection: %u open from one address", n - 1);
			shutdown(g->fd, SHUT_RDWR);
		}
	}
	g->next = guarded;
	if (guarded)
		guarded->prev = g;
	guarded = g;
	guard_set_deadline(conn, deadline_ms);
}

const char *guard_peer(struct MHD_Connection *conn)
{
	const struct guard *g = guard_of(conn);

	return g ? g->peer : "unknown";
}

void guard_close(void **socket_context)
{
	struct guard *g = *socket_context;

	if (!g)
		return;
	if (g->counted)
		addr_release(g->addr);
	if (g->client_counted)
		addr_release(g->client);
	if (g->deadline_ms)
		with_deadline--;
	if (g->prev)
		g->prev->next = g->next;
	else
		guarded = g->next;
	if (g->next)
		g->next->prev = g->prev;
	free(g);
	*socket_context = NULL;
}

/* client as 16 bytes (IPv4 as ::ffff:a.b.c.d); -EINVAL when not an address. */
static int client_bytes(const char *client, unsigned char *out)
{
	memset(out, 0, 16);
	if (inet_pton(AF_INET6, client, out) == 1)
		return 0;
	out[10] = out[11] = 0xff;
	return inet_pton(AF_INET, client, out + 12) == 1 ? 0 : -EINVAL;
}

int guard_hold_client(struct MHD_Connection *conn, const char *client, unsigned max_per_address)
{
	struct guard *g = guard_of(conn);
	unsigned char addr[16];
	unsigned n;

	guard_release_client(conn);
	if (!g || !max_per_address || client_bytes(client, addr) < 0)
		return 0;
	if (!(n = addr_acquire(addr)))
		return 0; /* out of memory: let through uncounted, as at accept */
	if (n > max_per_address) {
		addr_release(addr);
		log_warn("guard: refusing a request from %s: %u in flight through the front proxy",
			 client, n - 1);
		return -EBUSY;
	}
	memcpy(g->client, addr, 16);
	g->client_counted = true;
	return 0;
}

void guard_release_client(struct MHD_Connection *conn)
{
	struct guard *g = guard_of(conn);

	if (g && g->client_counted) {
		addr_release(g->client);
		g->client_counted = false;
	}
}

void guard_set_deadline(struct MHD_Connection *conn, long long deadline_ms)
{
	struct guard *g = guard_of(conn);

	if (!g)
		return;
	with_deadline += (deadline_ms != 0) - (g->deadline_ms != 0);
	g->deadline_ms = deadline_ms;
}

void guard_sweep(long long now_ms)
{
	for (struct guard *g = guarded; g && with_deadline; g = g->next) {
		if (!g->deadline_ms || g->deadline_ms > now_ms)
			continue;
		log_info("guard: closing a connection that missed its deadline");
		g->deadline_ms = 0;
		with_deadline--;
		shutdown(g->fd, SHUT_RDWR);
	}
}

unsigned guard_count(void)
{
	return with_deadline;
}
