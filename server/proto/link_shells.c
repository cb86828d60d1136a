/* link_shells.c - the job shells' terminals a node's link keeps for the head; see
 * link.h ("job shells kept by a node's link").
 *
 * A small array under one lock: at most LINK_SHELLS_MAX entries, found by token. The
 * token is compared in constant time; it is not what admits the head (the data line's
 * HMAC is), but it must not be guessable from the outside either. */
#include "proto/link.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include "labd/crypto.h"

struct kept {
	bool used;
	bool claimed;
	int fd;
	long long expires_ms;
	char token[LINK_SHELL_TOKEN_HEX + 1];
};

struct link_shells {
	pthread_mutex_t lock;
	struct kept k[LINK_SHELLS_MAX];
};

struct link_shells *link_shells_new(void)
{
	struct link_shells *t = calloc(1, sizeof(*t));

	if (t)
		pthread_mutex_init(&t->lock, NULL);
	return t;
}

void link_shells_free(struct link_shells *t)
{
	if (!t)
		return;
	for (int i = 0; i < LINK_SHELLS_MAX; i++)
		if (t->k[i].used && !t->k[i].claimed)
			close(t->k[i].fd);
	pthread_mutex_destroy(&t->lock);
	free(t);
}

static void expire_locked(struct link_shells *t, long long now_ms, int *n)
{
	for (int i = 0; i < LINK_SHELLS_MAX; i++) {
		struct kept *e = &t->k[i];
		if (e->used && !e->claimed && now_ms >= e->expires_ms) {
			close(e->fd); /* the master's last holder: the shell gets SIGHUP */
			memset(e, 0, sizeof(*e));
			(*n)++;
		}
	}
}

/* The entry under token, claimed or not as asked (any: either), or NULL; under lock. */
static struct kept *find_locked(struct link_shells *t, const char *token, bool claimed, bool any)
{
	if (!token || strlen(token) != LINK_SHELL_TOKEN_HEX)
		return NULL;
	for (int i = 0; i < LINK_SHELLS_MAX; i++) {
		struct kept *e = &t->k[i];
		if (e->used && (any || e->claimed == claimed) &&
		    crypto_equal(e->token, token, LINK_SHELL_TOKEN_HEX))
			return e;
	}
	return NULL;
}

int link_shells_keep(struct link_shells *t, int fd, long long now_ms, char *token)
{
	unsigned char raw[LINK_SHELL_TOKEN_BYTES];
	struct kept *e = NULL;
	int n = 0;

	if (crypto_random(raw, sizeof(raw)) < 0) {
		close(fd);
		return -EIO;
	}
	crypto_hex(raw, sizeof(raw), token); /* LINK_SHELL_TOKEN_HEX digits */
	pthread_mutex_lock(&t->lock);
	expire_locked(t, now_ms, &n);
	for (int i = 0; i < LINK_SHELLS_MAX && !e; i++)
		if (!t->k[i].used)
			e = &t->k[i];
	if (e) {
		*e = (struct kept){.used = true, .fd = fd, .expires_ms = now_ms + LINK_SHELL_CLAIM_MS};
		memcpy(e->token, token, sizeof(e->token));
	}
	pthread_mutex_unlock(&t->lock);
	if (!e) {
		close(fd);
		token[0] = '\0';
		return -EBUSY;
	}
	return 0;
}

int link_shells_claim(struct link_shells *t, const char *token, long long now_ms)
{
	struct kept *e;
	int fd = -ENOENT, n = 0;

	pthread_mutex_lock(&t->lock);
	expire_locked(t, now_ms, &n);
	if ((e = find_locked(t, token, false, false))) {
		e->claimed = true;
		fd = e->fd;
	}
	pthread_mutex_unlock(&t->lock);
	return fd;
}

int link_shells_resize(struct link_shells *t, const char *token, int cols, int rows)
{
	struct winsize ws = {.ws_row = (unsigned short)rows, .ws_col = (unsigned short)cols};
	struct kept *e;
	int rc = -ENOENT;

	if (cols < 1 || cols > 1000 || rows < 1 || rows > 1000)
		return -EINVAL;
	/* under the lock: the claimer closes the fd only after link_shells_done, and
	 * expiry under it too. A terminal still waiting takes its size as well: the
	 * head's resize may overtake the data port's reading of its claim. */
	pthread_mutex_lock(&t->lock);
	if ((e = find_locked(t, token, false, true)))
		rc = ioctl(e->fd, TIOCSWINSZ, &ws) < 0 ? -errno : 0;
	pthread_mutex_unlock(&t->lock);
	return rc;
}

void link_shells_done(struct link_shells *t, const char *token)
{
	struct kept *e;

	pthread_mutex_lock(&t->lock);
	if ((e = find_locked(t, token, true, false)))
		memset(e, 0, sizeof(*e));
	pthread_mutex_unlock(&t->lock);
}

int link_shells_expire(struct link_shells *t, long long now_ms)
{
	int n = 0;

	pthread_mutex_lock(&t->lock);
	expire_locked(t, now_ms, &n);
	pthread_mutex_unlock(&t->lock);
	return n;
}

int link_shells_waiting(struct link_shells *t)
{
	int n = 0;

	pthread_mutex_lock(&t->lock);
	for (int i = 0; i < LINK_SHELLS_MAX; i++)
		n += t->k[i].used && !t->k[i].claimed;
	pthread_mutex_unlock(&t->lock);
	return n;
}
