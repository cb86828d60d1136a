/* slurmparse.c - the pure parsers and tables of slurmcli.h: what Slurm's tools print
 * (22.05, research notes §2), read into labd's terms. No I/O here. */
#include "backend/slurmcli.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NAME_RT "labd-rt-"
#define NAME_POOL "labd-pool-"
#define SQUEUE_FIELDS 8

/* A decimal id >= 1 that fills text: no sign, no leading zero, no overflow. */
static int parse_id(const char *text, int64_t *id)
{
	char *end;
	long long v;

	if (text[0] < '1' || text[0] > '9' || strlen(text) > 18)
		return -EINVAL;
	errno = 0;
	v = strtoll(text, &end, 10);
	if (errno || *end)
		return -EINVAL;
	*id = v;
	return 0;
}

int slurmcli_name_parse(const char *name, bool *pool, int64_t *id)
{
	if (strncmp(name, NAME_RT, strlen(NAME_RT)) == 0) {
		*pool = false;
		return parse_id(name + strlen(NAME_RT), id);
	}
	if (strncmp(name, NAME_POOL, strlen(NAME_POOL)) == 0) {
		*pool = true;
		return parse_id(name + strlen(NAME_POOL), id);
	}
	return -EINVAL;
}

void slurmcli_name(bool pool, int64_t id, char *out, size_t outlen)
{
	snprintf(out, outlen, "%s%lld", pool ? NAME_POOL : NAME_RT, (long long)id);
}

/* Copies field into out (outlen), or -EINVAL when it does not fit. */
static int copy_field(const char *field, char *out, size_t outlen)
{
	if (strlen(field) >= outlen)
		return -EINVAL;
	memcpy(out, field, strlen(field) + 1);
	return 0;
}

/* A reason may be a sentence ("Nodes required for job are DOWN, DRAINED or reserved
 * for jobs in higher priority partitions"): its start is enough. */
static int copy_cut(const char *field, char *out, size_t outlen)
{
	size_t len = strlen(field) < outlen - 1 ? strlen(field) : outlen - 1;

	memcpy(out, field, len);
	out[len] = '\0';
	return 0;
}

/* "n/a", "(null)" and "None" are Slurm's words for no host. */
static int copy_host(const char *field, char *out, size_t outlen)
{
	if (!strcasecmp(field, "n/a") || !strcmp(field, "(null)") || !strcmp(field, "None"))
		field = "";
	return copy_field(field, out, outlen);
}

/* The peer addresses of the comment's tail, "<first address>:<count>". */
static int parse_peers(const char *text, struct slurm_job *out)
{
	char addr[16];
	const char *colon = strchr(text, ':');
	struct in_addr in;
	char *end;
	long n;

	if (!colon || (size_t)(colon - text) >= sizeof(addr))
		return -EINVAL;
	memcpy(addr, text, (size_t)(colon - text));
	addr[colon - text] = '\0';
	errno = 0;
	n = strtol(colon + 1, &end, 10);
	if (inet_pton(AF_INET, addr, &in) != 1 || errno || *end || colon[1] < '1' ||
	    colon[1] > '9' || n > 64)
		return -EINVAL;
	out->peer_first = ntohl(in.s_addr);
	out->peer_n = (unsigned)n;
	return 0;
}

/* The user's part: labd's user names only. */
static int copy_user_name(const char *field, char *out, size_t outlen)
{
	for (const char *p = field; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || strchr("._-", *p)))
			return -EINVAL;
	return copy_field(field, out, outlen);
}

/* The comment: the user's name, and for a job on several nodes the peer addresses
 * after it (field is changed); Slurm prints "(null)" for none. */
static int copy_comment(char *field, struct slurm_job *out)
{
	char *colon = strchr(field, ':');

	if (!strcmp(field, "(null)") || !strcmp(field, "N/A"))
		field[0] = '\0';
	if (colon) {
		*colon = '\0';
		if (parse_peers(colon + 1, out) < 0)
			return -EINVAL;
	}
	return copy_user_name(field, out->user, sizeof(out->user));
}

/* Splits line at '|' into exactly n fields (line is changed). */
static int split(char *line, char **f, int n)
{
	int k = 0;

	f[k++] = line;
	for (char *p = line; *p; p++)
		if (*p == '|') {
			if (k == n)
				return -EINVAL;
			*p = '\0';
			f[k++] = p + 1;
		}
	return k == n ? 0 : -EINVAL;
}

int slurmcli_parse_squeue_line(const char *line, struct slurm_job *out)
{
	char copy[512], *f[SQUEUE_FIELDS];
	size_t len = strcspn(line, "\r\n");

	memset(out, 0, sizeof(*out));
	if (len >= sizeof(copy))
		return -EINVAL;
	memcpy(copy, line, len);
	copy[len] = '\0';
	/* a name with a '|' of its own gives more fields: never labd's */
	if (split(copy, f, SQUEUE_FIELDS) < 0)
		return -EINVAL;
	if (parse_id(f[0], &out->job_id) < 0)
		return -EINVAL;
	if (slurmcli_name_parse(f[1], &out->pool, &out->id) < 0)
		return 1;
	if (copy_field(f[2], out->state, sizeof(out->state)) < 0 || !out->state[0] ||
	    copy_cut(f[3], out->reason, sizeof(out->reason)) < 0 ||
	    copy_host(f[4], out->host, sizeof(out->host)) < 0 ||
	    slurmcli_parse_time(f[5], &out->start_at) < 0 ||
	    copy_comment(f[6], out) < 0 || copy_host(f[7], out->nodes, sizeof(out->nodes)) < 0)
		return -EINVAL;
	return 0;
}

int slurmcli_parse_sbatch(const char *out, int64_t *job_id)
{
	char id[24];
	size_t len = strcspn(out, ";\r\n");

	if (len == 0 || len >= sizeof(id))
		return -EINVAL;
	memcpy(id, out, len);
	id[len] = '\0';
	/* nothing but the cluster's name may follow on that one line */
	if (out[len] == ';' && strcspn(out + len + 1, "\r\n") == 0)
		return -EINVAL;
	len += strcspn(out + len, "\r\n");
	len += strspn(out + len, "\r\n");
	if (out[len] != '\0')
		return -EINVAL;
	return parse_id(id, job_id);
}

/* One index or range "a" / "a-b" of an IDX list into idx. */
static int add_range(const char *item, size_t itemlen, unsigned *idx, size_t max, size_t *n)
{
	char text[16], *end;
	unsigned long a, b;

	if (itemlen == 0 || itemlen >= sizeof(text))
		return -EINVAL;
	memcpy(text, item, itemlen);
	text[itemlen] = '\0';
	if (text[0] < '0' || text[0] > '9')
		return -EINVAL;
	a = strtoul(text, &end, 10);
	b = a;
	if (*end == '-') {
		if (end[1] < '0' || end[1] > '9')
			return -EINVAL;
		b = strtoul(end + 1, &end, 10);
	}
	if (*end || b < a || b > 1023)
		return -EINVAL;
	for (unsigned long v = a; v <= b; v++) {
		if (*n >= max)
			return -EINVAL;
		idx[(*n)++] = (unsigned)v;
	}
	return 0;
}

int slurmcli_parse_gres_idx(const char *line, unsigned *idx, size_t max, size_t *n)
{
	/* the node's allocation, not JOB_GRES= or TresPerNode= (they name no index) */
	const char *g = strstr(line, " GRES=");
	const char *open, *close, *p;

	*n = 0;
	if (!g)
		return 0;
	g += strlen(" GRES=");
	if (strncmp(g, "gpu", 3) != 0 || (g[3] != ':' && g[3] != '('))
		return 0; /* another GRES first, or none: no GPU on this node */
	open = strstr(g, "(IDX:");
	if (!open || (size_t)(open - g) > 64 || memchr(g, ' ', (size_t)(open - g)))
		return strncmp(g, "gpu:0", 5) == 0 ? 0 : -EINVAL;
	open += strlen("(IDX:");
	close = strchr(open, ')');
	if (!close)
		return -EINVAL;
	if (strncmp(open, "N/A", 3) == 0)
		return 0;
	for (p = open; p < close;) {
		size_t len = strcspn(p, ",)");
		if (add_range(p, len, idx, max, n) < 0)
			return -EINVAL;
		p += len + (p[len] == ',');
	}
	return 0;
}

int slurmcli_parse_time(const char *text, int64_t *at)
{
	struct tm tm;
	const char *end;

	*at = 0;
	if (!text[0] || !strcmp(text, "N/A") || !strcmp(text, "Unknown") || !strcmp(text, "None"))
		return 0;
	memset(&tm, 0, sizeof(tm));
	end = strptime(text, "%Y-%m-%dT%H:%M:%S", &tm);
	if (!end || *end)
		return -EINVAL;
	tm.tm_isdst = -1; /* Slurm prints local time */
	*at = (int64_t)mktime(&tm);
	return *at > 0 ? 0 : -EINVAL;
}

/* Error texts of a controller that did not answer (src/common/slurm_protocol_api.c,
 * slurm_errno.c): the row stays as it is. */
static const char *const unknown_texts[] = {
	"Socket timed out",
	"Unable to contact slurm controller",
	"Slurm backup controller in standby mode",
	"Zero Bytes were transmitted or received",
	"Communication connection failure",
	"Connection refused",
	"Transport endpoint is not connected",
	"Slurm is busy", /* slurmctld throttling RPCs */
	"Slurm temporarily unable to accept job",
};

enum slurm_verdict slurmcli_classify(int status, bool timed_out, const char *err)
{
	if (timed_out)
		return SLURM_UNKNOWN;
	if (status == 0)
		return SLURM_ANSWERED;
	for (size_t i = 0; i < sizeof(unknown_texts) / sizeof(unknown_texts[0]); i++)
		if (strstr(err, unknown_texts[i]))
			return SLURM_UNKNOWN;
	if (strstr(err, "Invalid job id"))
		return SLURM_GONE;
	return SLURM_REFUSED;
}

enum slurm_phase slurmcli_phase(const char *state)
{
	static const char *const pending[] = {"PENDING", "CONFIGURING", "REQUEUED", "REQUEUE_HOLD",
					      "REQUEUE_FED", "RESV_DEL_HOLD", "RESIZING"};
	static const char *const running[] = {"RUNNING", "SUSPENDED", "STOPPED", "SIGNALING",
					      "STAGE_OUT"};

	for (size_t i = 0; i < sizeof(pending) / sizeof(pending[0]); i++)
		if (!strcmp(state, pending[i]))
			return SLURM_PHASE_PENDING;
	for (size_t i = 0; i < sizeof(running) / sizeof(running[0]); i++)
		if (!strcmp(state, running[i]))
			return SLURM_PHASE_RUNNING;
	return !strcmp(state, "COMPLETING") ? SLURM_PHASE_ENDING : SLURM_PHASE_ENDED;
}

/* Slurm's final states in labd's causes (docs/slurm.md "How Slurm's ends read"). */
static const struct {
	const char *state, *cause;
	bool failed;
	const char *reason; /* NULL: "the node <host> failed" */
} ends[] = {
	{"COMPLETED", "time_limit", false, "the Slurm allocation ran out"},
	{"TIMEOUT", "time_limit", false, "Slurm's time limit for the allocation passed"},
	{"DEADLINE", "time_limit", false, "Slurm's deadline for the allocation passed"},
	{"OUT_OF_MEMORY", "oom", true, "Slurm ended the allocation: out of memory"},
	{"PREEMPTED", "gone", true, "preempted in Slurm"},
	{"NODE_FAIL", "gone", true, NULL},
	{"BOOT_FAIL", "gone", true, NULL},
	{"CANCELLED", "requested", false, "cancelled in Slurm"},
	{"FAILED", "start_failed", true, "Slurm could not run the allocation"},
};

void slurmcli_end(const char *state, const char *reason, const char *host,
		  bool cancelled_by_labd, struct slurm_end *out)
{
	const char *h = host && host[0] ? host : "(unknown)";

	(void)reason;
	if (cancelled_by_labd && !strcmp(state, "CANCELLED")) {
		out->cause = "requested";
		out->failed = false;
		snprintf(out->reason, sizeof(out->reason), "stopped");
		return;
	}
	for (size_t i = 0; i < sizeof(ends) / sizeof(ends[0]); i++)
		if (!strcmp(state, ends[i].state)) {
			out->cause = ends[i].cause;
			out->failed = ends[i].failed;
			if (!ends[i].reason)
				snprintf(out->reason, sizeof(out->reason), "the node %s failed%s", h,
					 !strcmp(state, "BOOT_FAIL") ? " to boot" : "");
			else
				snprintf(out->reason, sizeof(out->reason), "%s", ends[i].reason);
			return;
		}
	out->cause = "gone";
	out->failed = true;
	snprintf(out->reason, sizeof(out->reason), "Slurm ended the allocation (%.40s)", state);
}

void slurmcli_pending_text(const char *reason, char *out, size_t outlen)
{
	if (!strcmp(reason, "Resources"))
		snprintf(out, outlen, "waiting in Slurm for free resources");
	else if (!strcmp(reason, "Priority"))
		snprintf(out, outlen, "waiting in Slurm behind jobs of higher priority");
	else if (!strcmp(reason, "None") || !reason[0])
		snprintf(out, outlen, "waiting in Slurm");
	else
		snprintf(out, outlen, "waiting in Slurm (%.40s)", reason);
}
