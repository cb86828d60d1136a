/* jobrun.c - one training job in its pool: the spec checked, inputs and
 * outputs staged (downloading), the agent driven (training), max runtime and
 * stop grace enforced root-side, the exit classified, the home synced and the
 * log copied (uploading); see pool.h. Slow work (mounts, syncfs, the copy)
 * runs in forked workers: the loop never waits on a user's home. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "config/config.h"
#include "labd/clock.h"
#include "labd/fault.h"
#include "labd/log.h"
#include "sandbox/jobagent.h"
#include "supervisor/jobenv.h"
#include "supervisor/keeper.h"
#include "supervisor/pool.h"
#include "supervisor/worker.h"

#define HOME_FULL_BYTES (1 << 20) /* less free than this at the end: home_full */
#define STATE_FULL_BYTES (1 << 20) /* less free than this for labd-web: the state disk is full */
#define ML_INSIDE POOL_ML_INSIDE

struct stage_report {
	int ok;
	char reason[200];
};

struct upload_report {
	int ok;
	bool home_full;
};

/* What a staging or uploading worker needs (copied into the child by fork). */
struct job_ctx {
	const char *state_dir;
	struct pool_box *p;
	bool redo; /* a staging the previous supervisor left half done */
};

/* Writes a command to the agent; 0, or -errno (the pool is then killed). */
static int tell_agent(struct host *ps, struct pool_box *p, const char *text, size_t len)
{
	ssize_t n;

	do
		n = write(p->io.cmd_fd, text, len);
	while (n < 0 && errno == EINTR);
	if (n == (ssize_t)len)
		return 0;
	/* a full pipe means the agent stopped reading: it cannot be driven */
	log_warn("pool %lld: cannot write to its agent: %s", p->pool_id,
		 n < 0 ? strerror(errno) : "short write");
	host_stop(ps, &p->b, "gone", "the pool's agent stopped answering");
	return -EIO;
}

static void emit_phase(struct host *ps, struct pool_box *p, const char *phase)
{
	json_t *e = host_event("job_phase", &p->b);
	json_object_set_new(e, "job_id", json_integer(p->job.job_id));
	json_object_set_new(e, "phase", json_string(phase));
	json_object_set_new(e, "at_ms", json_integer(clock_wall_ms()));
	host_emit(ps, e);
	FAULT_POINT_STEP("job.phase", phase);
}

/* Texts in job_exited and the record as JSON takes them: the failure is the
 * job's own bytes, a reason may hold a path cut mid-character (%.80s). */
static void utf8_clean(char *s)
{
	jobagent_utf8_clean(s, strlen(s));
}

/* The pool's keeper drops output it cannot write to the job's log (it never
 * blocks the job on it); a job that ends on a full state disk says so. Root's
 * keeper may still have had ext4's reserved blocks, hence "may". */
static void note_state_disk_full(struct host *ps, struct pool_job *j)
{
	size_t len = strlen(j->reason);
	struct statvfs v;

	if (statvfs(host_state_dir(ps), &v) == 0 &&
	    (uint64_t)v.f_bavail * v.f_frsize < STATE_FULL_BYTES)
		snprintf(j->reason + len, sizeof(j->reason) - len,
			 "; the state disk is full: its log may be incomplete");
}

static void emit_exited(struct host *ps, struct pool_box *p)
{
	struct pool_job *j = &p->job;
	json_t *e = host_event("job_exited", &p->b);

	note_state_disk_full(ps, j);

	utf8_clean(j->failure);
	utf8_clean(j->reason);
	json_object_set_new(e, "job_id", json_integer(j->job_id));
	json_object_set_new(e, "kind", json_string(j->kind));
	json_object_set_new(e, "code", json_integer(j->code));
	json_object_set_new(e, "signal", json_integer(j->signal));
	json_object_set_new(e, "at_ms", json_integer(j->exit_at_ms));
	json_object_set_new(e, "reason", json_string(j->reason));
	json_object_set_new(e, "failure", json_string(j->failure));
	json_object_set_new(e, "home_full", json_boolean(j->home_full));
	log_info("job %lld in pool %lld of %s: %s (%s)", j->job_id, p->pool_id, p->b.user, j->kind,
		 j->reason);
	host_emit(ps, e);
	FAULT_POINT("job.end");
}

void jobrun_clear(struct pool_box *p)
{
	struct pool_job *j = &p->job;

	worker_end(j->worker); /* still running: its result is nobody's now */
	if (j->worker_fd >= 0)
		close(j->worker_fd);
	joblog_close(&j->log);
	jobspec_free(&j->spec);
	free(j->spec_text);
	memset(j, 0, sizeof(*j));
	j->worker_fd = -1;
	j->log.fd = -1;
}

/* ---- staging (downloading), in a worker ---- */

static int stage_fail(int fd, const char *fmt, const char *a, const char *b)
{
	struct stage_report r = {0};
	char full[512];

	snprintf(full, sizeof(full), fmt, a, b);
	snprintf(r.reason, sizeof(r.reason), "%.199s", full);
	return worker_send(fd, &r, sizeof(r), -1) < 0 ? 2 : 1;
}

/* Opens rel beneath the home and mounts it at inside (a dir of /opt/ml). */
static int mount_home_dir(const struct job_ctx *c, const char *rel, bool create,
			  const char *inside, bool ro, char *why, size_t len)
{
	struct sandbox_error err = {0};
	int dfd = -1;

	if (sandbox_home_open_beneath(c->state_dir, &c->p->b.h, rel, create, c->p->b.host_uid, &dfd,
				      &err) < 0) {
		snprintf(why, len, "%.60s: %.130s", rel[0] ? rel : "(home)", err.message);
		return -1;
	}
	int rc = sandbox_inject(&c->p->b.h, dfd, inside, ro, &err);
	close(dfd);
	if (rc < 0)
		snprintf(why, len, "%.60s at %.40s: %.90s", rel, inside, err.message);
	return rc;
}

static int write_file(const char *dir, const char *name, json_t *j)
{
	char path[LAUNCH_PATH_MAX + 64];
	int rc;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	rc = json_dump_file(j, path, JSON_COMPACT);
	json_decref(j);
	return rc < 0 ? -1 : chmod(path, 0644);
}

/* /opt/ml/input/config: root's files, 0644, rewritten for each job. */
static int write_config(const struct job_ctx *c)
{
	const struct jobspec *s = &c->p->job.spec;
	char ml[LAUNCH_PATH_MAX], dir[LAUNCH_PATH_MAX + 32];
	json_t *data = json_object();

	poollaunch_ml_dir(c->state_dir, c->p->pool_id, ml, sizeof(ml));
	snprintf(dir, sizeof(dir), "%s/input/config", ml);
	for (size_t i = 0; i < s->n_channels; i++)
		json_object_set_new(data, s->channels[i].name,
				    json_pack("{s:s,s:s,s:s}", "TrainingInputMode", "File",
					      "S3DistributionType", "FullyReplicated",
					      "RecordWrapperType", "None"));
	if (write_file(dir, "hyperparameters.json",
		       s->hyperparameters ? json_incref(s->hyperparameters) : json_object()) < 0 ||
	    write_file(dir, "inputdataconfig.json", data) < 0 ||
	    write_file(dir, "resourceconfig.json",
		       jobhosts_resourceconfig(&s->hosts)) < 0)
		return -1;
	return 0;
}

/* The mount point of a channel: a root dir in the pool's ml tree. */
static int channel_dir(const struct job_ctx *c, const char *name)
{
	char path[LAUNCH_PATH_MAX + 96];

	snprintf(path, sizeof(path), "%s/pools/%lld/ml/input/data/%s", c->state_dir,
		 c->p->pool_id, name);
	return mkdir(path, 0755) < 0 && errno != EEXIST ? -1 : 0;
}

static void eject_all(const struct job_ctx *c);

static int stage_worker(void *arg, int fd)
{
	const struct job_ctx *c = arg;
	const struct jobspec *s = &c->p->job.spec;
	struct stage_report r = {.ok = 1};
	char why[200], rel[JOBSPEC_PATH_MAX_BYTES + 16], inside[128];
	int dfd;
	struct sandbox_error err;

	if (c->redo) /* what the previous supervisor's worker mounted goes first */
		eject_all(c);
	/* a missing working dir fails the job before anything runs; a scratch home
	 * starts empty, and gets it made */
	if (sandbox_home_open_beneath(c->state_dir, &c->p->b.h, s->cwd, c->p->scratch_home,
				      c->p->b.host_uid, &dfd, &err) < 0)
		return stage_fail(fd, "stage_failed: working dir %.80s: %.100s",
				  s->cwd[0] ? s->cwd : "(home)", err.message);
	close(dfd);
	/* a scratch home's channel folders start empty and writable: its agent fills them
	 * from algo-1's before the command runs (sandbox/jobshare.h) */
	for (size_t i = 0; i < s->n_channels; i++) {
		bool scratch = c->p->scratch_home;
		snprintf(inside, sizeof(inside), ML_INSIDE "/input/data/%s", s->channels[i].name);
		if (channel_dir(c, s->channels[i].name) < 0 ||
		    mount_home_dir(c, s->channels[i].path, scratch, inside, !scratch, why,
				   sizeof(why)) < 0)
			return stage_fail(fd, "stage_failed: input channel %.64s: %.120s",
					  s->channels[i].name, why);
	}
	static const char *const outs[][2] = {{"/model", ML_INSIDE "/model"},
					      {"/output", ML_INSIDE "/output"}};
	for (size_t i = 0; i < 2; i++) {
		snprintf(rel, sizeof(rel), "%s%s", s->output_path, outs[i][0]);
		if (mount_home_dir(c, rel, true, outs[i][1], false, why, sizeof(why)) < 0)
			return stage_fail(fd, "stage_failed: output %.170s%s", why, "");
	}
	/* SM_OUTPUT_DATA_DIR exists for the script, as managed training makes it */
	snprintf(rel, sizeof(rel), "%s/output/data", s->output_path);
	if (sandbox_home_open_beneath(c->state_dir, &c->p->b.h, rel, true, c->p->b.host_uid, &dfd,
				      &err) == 0)
		close(dfd);
	if (mount_home_dir(c, s->checkpoint_path, true, ML_INSIDE "/checkpoints", false, why,
			   sizeof(why)) < 0)
		return stage_fail(fd, "stage_failed: checkpoints %.170s%s", why, "");
	if (write_config(c) < 0)
		return stage_fail(fd, "stage_failed: cannot write %s: %s", "/opt/ml/input/config",
				  strerror(errno));
	return worker_send(fd, &r, sizeof(r), -1) < 0 ? 2 : 0;
}

/* ---- uploading, in a worker ---- */

/* Copies the state copy of the log to <output_path>/log.txt in the home, owned
 * by the user, never opening what the user left there (joblog_copy_out). */
static void copy_log(const struct job_ctx *c)
{
	const struct pool_job *j = &c->p->job;
	struct sandbox_error err;
	int dfd = -1, rc = -1;

	if (sandbox_home_open_beneath(c->state_dir, &c->p->b.h, j->spec.output_path, true,
				      c->p->b.host_uid, &dfd, &err) == 0)
		rc = joblog_copy_out(j->log.path, dfd, "log.txt", c->p->b.host_uid);
	if (rc < 0)
		log_warn("job %lld: could not copy its log into the home: %s", j->job_id,
			 dfd < 0 ? err.message : strerror(-rc));
	if (dfd >= 0)
		close(dfd);
}

static bool home_full(const struct job_ctx *c)
{
	char mnt[LAUNCH_PATH_MAX];
	struct statvfs v;

	return sandbox_home_mount_path(c->state_dir, &c->p->b.h, mnt, sizeof(mnt)) == 0 &&
	       statvfs(mnt, &v) == 0 && (uint64_t)v.f_bavail * v.f_frsize < HOME_FULL_BYTES;
}

static void eject_all(const struct job_ctx *c)
{
	const struct jobspec *s = &c->p->job.spec;
	char inside[128], path[LAUNCH_PATH_MAX + 96];

	/* quietly: a mount a failed staging never made is not there */
	sandbox_eject(&c->p->b.h, ML_INSIDE "/model");
	sandbox_eject(&c->p->b.h, ML_INSIDE "/output");
	sandbox_eject(&c->p->b.h, ML_INSIDE "/checkpoints");
	for (size_t i = 0; i < s->n_channels; i++) {
		snprintf(inside, sizeof(inside), ML_INSIDE "/input/data/%s", s->channels[i].name);
		sandbox_eject(&c->p->b.h, inside);
		snprintf(path, sizeof(path), "%s/pools/%lld/ml/input/data/%s", c->state_dir,
			 c->p->pool_id, s->channels[i].name);
		rmdir(path);
	}
}

static int upload_worker(void *arg, int fd)
{
	const struct job_ctx *c = arg;
	struct upload_report r = {.ok = 1};
	char mnt[LAUNCH_PATH_MAX];

	int hfd = sandbox_home_mount_path(c->state_dir, &c->p->b.h, mnt, sizeof(mnt)) < 0
			  ? -1
			  : open(mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (hfd >= 0) { /* what the job wrote is on the home's disk before it counts as done */
		syncfs(hfd);
		close(hfd);
	}
	copy_log(c);
	eject_all(c);
	r.home_full = home_full(c);
	return worker_send(fd, &r, sizeof(r), -1) < 0 ? 2 : 0;
}

static void begin_upload(struct host *ps, struct pool_box *p)
{
	struct job_ctx c = {host_state_dir(ps), p, false};

	p->job.step = J_UPLOADING;
	host_save(ps, &p->b); /* a restart now redoes the upload: its end is known */
	emit_phase(ps, p, "uploading");
	if (worker_spawn(upload_worker, &c, WORKER_JOB_LIMIT_MS, &p->job.worker,
			 &p->job.worker_fd) < 0) {
		log_warn("job %lld: the upload worker could not start", p->job.job_id);
		emit_exited(ps, p);
		jobrun_clear(p);
	}
}

static void set_exit(struct pool_job *j, const char *kind, int code, int sig, const char *reason)
{
	snprintf(j->kind, sizeof(j->kind), "%s", kind);
	j->code = code;
	j->signal = sig;
	j->exit_at_ms = clock_wall_ms();
	snprintf(j->reason, sizeof(j->reason), "%s", reason);
	utf8_clean(j->reason); /* the record carries it too (json_pack refuses bad UTF-8) */
}

/* ---- requests ---- */

static int64_t oom_kills(struct pool_box *p)
{
	struct sandbox_usage u;
	return sandbox_usage(&p->b.h, &u) == 0 && u.oom_kills > 0 ? u.oom_kills : 0;
}

json_t *jobrun_run(struct host *ps, struct pool_box *p, long long id, json_t *msg)
{
	const struct labd_config *cfg = host_cfg(ps);
	struct pool_job *j = &p->job;
	struct job_ctx c = {host_state_dir(ps), p, false};
	char err[200];
	uint64_t cap;
	int rc;

	jobrun_clear(p);
	if (jobspec_parse(proto_str(msg, "spec"), &j->spec, err, sizeof(err)) < 0) {
		log_error("refused job_run in pool %lld of %s: %s", p->pool_id, p->b.user, err);
		return proto_error(id, "bad_spec", err);
	}
	if (p->scratch_home && j->spec.n_channels && j->spec.hosts.current < 2) {
		jobrun_clear(p);
		log_error("refused job_run in pool %lld of %s: input channels on a scratch home",
			  p->pool_id, p->b.user);
		return proto_error(id, "bad_spec",
				   "inputs: this host's home is a scratch folder, and only a host "
				   "past algo-1 fetches its channels from algo-1");
	}
	j->job_id = proto_int(msg, "job_id");
	if (!(j->spec_text = strdup(proto_str(msg, "spec")))) {
		jobrun_clear(p);
		return proto_error(id, "busy", "out of memory");
	}
	j->grace_s = j->spec.grace_s >= 0 ? j->spec.grace_s : cfg->jobs_grace_s;
	cap = j->spec.log_max_bytes > 0 && (uint64_t)j->spec.log_max_bytes < cfg->jobs_log_max_bytes
		      ? (uint64_t)j->spec.log_max_bytes
		      : cfg->jobs_log_max_bytes;
	if (joblog_open(&j->log, c.state_dir, j->job_id, cap, launch_labd_gid(cfg)) < 0) {
		jobrun_clear(p);
		return proto_error(id, "log_failed", "the job's log file could not be opened");
	}
	/* the keeper writes the log: the output never waits on this process */
	if ((rc = keeper_set_log(p->keeper_sock, j->log.fd, cap, j->log.size_bytes)) < 0) {
		log_error("pool %lld: its keeper did not take the job's log: %s", p->pool_id,
			  strerror(-rc));
		jobrun_clear(p);
		return proto_error(id, "log_failed", "the pool's keeper did not take the job's log");
	}
	j->oom_kills_before = oom_kills(p);
	j->step = J_STAGING;
	if (worker_spawn(stage_worker, &c, WORKER_JOB_LIMIT_MS, &j->worker, &j->worker_fd) < 0) {
		jobrun_clear(p);
		return proto_error(id, "busy", "the staging worker could not start");
	}
	log_info("job %lld in pool %lld of %s: staging", j->job_id, p->pool_id, p->b.user);
	host_save(ps, &p->b); /* a restart now loses this job: it says so */
	/* the reply goes first (the caller sends it); the phase at the next tick */
	j->downloading_unsaid = true;
	return proto_ok(id);
}

static void ask_stop(struct host *ps, struct pool_box *p, const char *kind, int64_t grace_s)
{
	struct pool_job *j = &p->job;

	if (!j->stop_kind)
		j->stop_kind = kind;
	if (j->step != J_TRAINING && j->step != J_STARTING)
		return; /* staging: checked when it is done; uploading: over already */
	j->step = J_STOPPING;
	j->kill_at_ms = clock_ms() + grace_s * 1000;
	host_save(ps, &p->b);
	tell_agent(ps, p, "term\n", 5);
}

json_t *jobrun_stop(struct host *ps, struct pool_box *p, long long id, json_t *msg)
{
	struct pool_job *j = &p->job;
	int64_t grace = proto_int(msg, "grace_s");

	if (j->step == J_STOPPING) { /* a second stop may only shorten the grace */
		long long at = clock_ms() + grace * 1000;
		j->kill_at_ms = at < j->kill_at_ms ? at : j->kill_at_ms;
		host_save(ps, &p->b);
	} else {
		ask_stop(ps, p, "stopped", grace);
	}
	return proto_ok(id);
}

/* ---- events ---- */

static void start_command(struct host *ps, struct pool_box *p)
{
	struct pool_job *j = &p->job;
	struct jobenv env;
	char cwd[JOBSPEC_PATH_MAX_BYTES + 64], *text;
	size_t len;
	int64_t ncpus = p->cpus_milli ? (p->cpus_milli + 999) / 1000 : 1;

	snprintf(cwd, sizeof(cwd), "/home/%s%s%s", p->b.user, j->spec.cwd[0] ? "/" : "",
		 j->spec.cwd);
	if (jobenv_build(&j->spec, j->job_id, p->b.user, ncpus, &env) < 0 ||
	    jobenv_add_share(&j->spec, p->b.user, &env) < 0 ||
	    agentio_format_run((char *const *)j->spec.argv, env.entries, cwd, &text, &len) < 0) {
		jobenv_free(&env);
		set_exit(j, "stage_failed", 0, 0, "stage_failed: out of memory");
		begin_upload(ps, p);
		return;
	}
	jobenv_free(&env);
	j->step = J_STARTING;
	host_save(ps, &p->b);
	tell_agent(ps, p, text, len);
	free(text);
}

static void on_staged(struct host *ps, struct pool_box *p)
{
	struct pool_job *j = &p->job;
	struct stage_report r;
	int passed;
	ssize_t n = worker_recv(j->worker_fd, &r, sizeof(r), &passed);

	if (n == -EAGAIN)
		return;
	if (passed >= 0)
		close(passed);
	close(j->worker_fd);
	j->worker_fd = -1;
	j->worker = 0; /* it answered: its pid is no longer ours to end */
	if (n != (ssize_t)sizeof(r) || !r.ok) {
		set_exit(j, "stage_failed", 0, 0,
			 n == (ssize_t)sizeof(r) ? r.reason
			 : n == -ETIMEDOUT ? "stage_failed: staging ran past its time limit"
					   : "stage_failed: the staging worker died");
		begin_upload(ps, p);
		return;
	}
	if (j->stop_kind) { /* stopped while staging: nothing ran */
		set_exit(j, j->stop_kind, 0, 0, "stopped before it started");
		begin_upload(ps, p);
		return;
	}
	start_command(ps, p);
}

static void on_uploaded(struct host *ps, struct pool_box *p)
{
	struct pool_job *j = &p->job;
	struct upload_report r;
	int passed;
	ssize_t n = worker_recv(j->worker_fd, &r, sizeof(r), &passed);

	if (n == -EAGAIN)
		return;
	if (passed >= 0)
		close(passed);
	close(j->worker_fd);
	j->worker_fd = -1;
	j->worker = 0; /* it answered: its pid is no longer ours to end */
	if (n == (ssize_t)sizeof(r))
		j->home_full = r.home_full;
	else
		log_warn("job %lld: its upload %s: the home's copy of its log may be missing",
			 j->job_id, n == -ETIMEDOUT ? "ran past its time limit" : "worker died");
	j->step = J_ENDED;
	if (!host_listening(ps)) { /* said once a web process listens (jobrun_say_held) */
		host_save(ps, &p->b);
		return;
	}
	jobrun_say_held(ps, p);
}

void jobrun_say_held(struct host *ps, struct pool_box *p)
{
	int rc;

	if (p->job.step != J_ENDED)
		return;
	emit_exited(ps, p);
	jobrun_clear(p);
	/* output between jobs is nobody's */
	if ((rc = keeper_set_log(p->keeper_sock, -1, 0, 0)) < 0)
		log_warn("pool %lld: its keeper did not let go of the job's log: %s", p->pool_id,
			 strerror(-rc));
	host_save(ps, &p->b); /* idle again */
}

void jobrun_on_worker(struct host *ps, struct pool_box *p)
{
	if (p->job.step == J_STAGING)
		on_staged(ps, p);
	else if (p->job.step == J_UPLOADING)
		on_uploaded(ps, p);
}

/* How the command ended, from its wait status and the memory cgroup. */
static void classify(struct pool_box *p, int status)
{
	struct pool_job *j = &p->job;
	char why[64];

	if (oom_kills(p) > j->oom_kills_before) {
		set_exit(j, "oom", WIFEXITED(status) ? WEXITSTATUS(status) : 0,
			 WIFSIGNALED(status) ? WTERMSIG(status) : 0,
			 "out of memory: the job used more than its memory limit");
		return;
	}
	if (WIFSIGNALED(status))
		snprintf(why, sizeof(why), "killed by signal %d", WTERMSIG(status));
	else
		snprintf(why, sizeof(why), "exited with status %d", WEXITSTATUS(status));
	if (j->stop_kind) {
		char r[200];
		snprintf(r, sizeof(r), "%s: %s",
			 strcmp(j->stop_kind, "max_runtime") ? "stopped" : "max runtime reached", why);
		set_exit(j, j->stop_kind, WIFEXITED(status) ? WEXITSTATUS(status) : 0,
			 WIFSIGNALED(status) ? WTERMSIG(status) : 0, r);
	} else if (WIFSIGNALED(status)) {
		set_exit(j, "signaled", 0, WTERMSIG(status), why);
	} else {
		set_exit(j, "exited", WEXITSTATUS(status), 0, why);
	}
}

/* The agent said the command ended: its whole output is in the log once the
 * keeper has drained the pipe (before the upload copies the log). */
static void sync_log(struct pool_box *p)
{
	int rc = keeper_sync(p->keeper_sock, NULL);

	if (rc < 0)
		log_warn("job %lld: its pool's keeper did not sync the log: %s", p->job.job_id,
			 strerror(-rc));
}

void jobrun_on_agent(struct host *ps, struct pool_box *p, const struct agent_status *st)
{
	struct pool_job *j = &p->job;

	if (st->said == AGENT_STARTED && j->step == J_STARTING) {
		j->step = J_TRAINING;
		j->runtime_end_ms = clock_ms() + j->spec.max_runtime_s * 1000;
		j->sample_at_ms = clock_ms();
		host_save(ps, &p->b);
		emit_phase(ps, p, "training");
		return;
	}
	if (st->said == AGENT_STARTED && j->step == J_STOPPING)
		return; /* stopped while starting: term is on its way */
	if (st->said == AGENT_ERROR && (j->step == J_STARTING || j->step == J_STOPPING)) {
		char why[200];
		/* as a shell says a command it cannot run: the user's failure, 127 */
		snprintf(why, sizeof(why), "the command could not start: %.150s", st->failure);
		set_exit(j, "exited", 127, 0, why);
		sync_log(p);
		begin_upload(ps, p);
		return;
	}
	if (st->said == AGENT_EXITED &&
	    (j->step == J_STARTING || j->step == J_TRAINING || j->step == J_STOPPING)) {
		classify(p, st->status);
		memcpy(j->failure, st->failure, st->failure_len + 1);
		utf8_clean(j->failure);
		sync_log(p);
		begin_upload(ps, p);
		return;
	}
	log_error("pool %lld of %s: its agent said %d out of turn", p->pool_id, p->b.user,
		  (int)st->said);
	host_stop(ps, &p->b, "gone", "the pool's agent broke its protocol");
}

static void sample(struct host *ps, struct pool_box *p)
{
	struct sandbox_usage u;
	struct stat st;
	json_t *e;

	if (sandbox_usage(&p->b.h, &u) < 0)
		return;
	/* the keeper appends to the log: its size is the file's */
	if (p->job.log.fd >= 0 && fstat(p->job.log.fd, &st) == 0)
		p->job.log.size_bytes = (uint64_t)st.st_size;
	e = host_event("job_sample", &p->b);
	json_object_set_new(e, "job_id", json_integer(p->job.job_id));
	json_object_set_new(e, "at_ms", json_integer(clock_wall_ms()));
	json_object_set_new(e, "cpu_usage_us", json_integer(u.cpu_usage_us > 0 ? u.cpu_usage_us : 0));
	json_object_set_new(e, "memory_bytes", json_integer(u.memory_bytes > 0 ? u.memory_bytes : 0));
	json_object_set_new(e, "memory_limit_bytes",
			    json_integer(u.memory_limit_bytes > 0 ? u.memory_limit_bytes : 0));
	json_object_set_new(e, "io_wait_us", json_integer(u.io_wait_us >= 0 ? u.io_wait_us : -1));
	json_object_set_new(e, "log_bytes", json_integer((json_int_t)p->job.log.size_bytes));
	host_emit(ps, e);
}

long long jobrun_tick(struct host *ps, struct pool_box *p, long long now)
{
	struct pool_job *j = &p->job;
	long long next = -1;

	if (j->downloading_unsaid) {
		j->downloading_unsaid = false;
		emit_phase(ps, p, "downloading");
	}
	if (j->step == J_TRAINING && now >= j->runtime_end_ms)
		ask_stop(ps, p, "max_runtime", j->grace_s);
	if (j->step == J_STOPPING && now >= j->kill_at_ms) {
		/* the agent (or the job) did not end it in time: the whole pool goes */
		host_stop(ps, &p->b, "requested",
			   "the job did not stop within its grace period: its pool was killed");
		return -1;
	}
	if ((j->step == J_TRAINING || j->step == J_STOPPING) && now >= j->sample_at_ms) {
		sample(ps, p);
		j->sample_at_ms = now + host_cfg(ps)->jobs_sample_interval_ms;
	}
	if (j->step == J_TRAINING)
		next = j->runtime_end_ms;
	if (j->step == J_STOPPING)
		next = j->kill_at_ms;
	if ((j->step == J_TRAINING || j->step == J_STOPPING) && j->sample_at_ms < next)
		next = j->sample_at_ms;
	return next;
}

/* Whether the job ended its own sandbox (docs/jobs.md "Restarts and
 * retries"). The sandbox's init reported the agent's end, so init outlived
 * the agent: the agent died alone, not with its sandbox. A signal did it, and
 * nothing of labd sends one to the agent alone (a stop goes through init and
 * the cgroup, with a cause set first; the OOM killer is counted before this).
 * So it came from inside the sandbox, where everything runs as the agent's
 * uid: the job's own code, while its command ran (kill -9 -1 reaches every
 * process it may signal). An agent that exits with a status ends because
 * labd's side of its pipes is gone: a loss, retried. A sandbox lost whole
 * (init killed from outside, a restart that finds it gone) reports no agent
 * status: a loss too. */
static bool killed_by_job(const struct pool_job *j, const struct sandbox_result *res)
{
	return (j->step == J_STARTING || j->step == J_TRAINING) && res->kind == SANDBOX_SIGNALED;
}

void jobrun_pool_died(struct host *ps, struct pool_box *p, const struct sandbox_result *res)
{
	struct pool_job *j = &p->job;

	if (j->step == J_NONE)
		return;
	if (j->step == J_UPLOADING || j->step == J_ENDED) {
		/* its end is known; the home copy of the log may be missing */
		emit_exited(ps, p);
	} else if (j->stop_kind || p->b.cause[0]) {
		set_exit(j, j->stop_kind ? j->stop_kind : "stopped", 0, SIGKILL,
			 p->b.cause[0] ? p->b.reason : "killed with its pool");
		emit_exited(ps, p);
	} else if (res && (res->kind == SANDBOX_OOM || oom_kills(p) > j->oom_kills_before)) {
		set_exit(j, "oom", 0, SIGKILL, "out of memory: the job used more than its memory limit");
		emit_exited(ps, p);
	} else if (res && killed_by_job(j, res)) {
		char why[200];
		snprintf(why, sizeof(why),
			 "the job killed its job agent (signal %d, as kill -9 -1 does), which ends "
			 "its sandbox: the job's own failure, not retried",
			 res->signal);
		set_exit(j, "signaled", 0, res->signal, why);
		emit_exited(ps, p);
	} else {
		log_warn("job %lld was lost with pool %lld of %s", j->job_id, p->pool_id, p->b.user);
	}
	jobrun_clear(p);
}

/* ---- across a supervisor restart ---- */

static int64_t epoch_of(long long mono_ms)
{
	return mono_ms ? clock_wall_ms() + (mono_ms - clock_ms()) : 0;
}

static long long mono_of(int64_t epoch_ms)
{
	return epoch_ms ? clock_ms_at(epoch_ms) : 0;
}

json_t *jobrun_record(struct pool_box *p)
{
	struct pool_job *j = &p->job;
	json_t *r = json_pack("{s:I,s:i,s:s,s:I,s:I,s:I,s:I,s:s,s:I}", "id", (json_int_t)j->job_id,
			      "step", (int)j->step, "spec", j->spec_text ? j->spec_text : "",
			      "log_max_bytes", (json_int_t)j->log.max_bytes, "runtime_end_at_ms",
			      (json_int_t)epoch_of(j->runtime_end_ms), "kill_at_ms",
			      (json_int_t)epoch_of(j->kill_at_ms), "oom_kills_before",
			      (json_int_t)j->oom_kills_before, "stop_kind",
			      j->stop_kind ? j->stop_kind : "", "grace_s", (json_int_t)j->grace_s);

	if (r && j->step >= J_UPLOADING) /* utf8_clean'd when set */
		json_object_set_new(r, "exit",
				    json_pack("{s:s,s:i,s:i,s:I,s:s,s:s,s:b}", "kind", j->kind, "code",
					      j->code, "signal", j->signal, "at_ms",
					      (json_int_t)j->exit_at_ms, "reason", j->reason,
					      "failure", j->failure, "home_full", j->home_full));
	return r;
}

static const char *str_of(json_t *o, const char *name)
{
	const char *s = json_string_value(json_object_get(o, name));
	return s ? s : "";
}

static void restore_exit(struct pool_job *j, json_t *x)
{
	snprintf(j->kind, sizeof(j->kind), "%s", str_of(x, "kind"));
	j->code = (int)json_integer_value(json_object_get(x, "code"));
	j->signal = (int)json_integer_value(json_object_get(x, "signal"));
	j->exit_at_ms = json_integer_value(json_object_get(x, "at_ms"));
	snprintf(j->reason, sizeof(j->reason), "%s", str_of(x, "reason"));
	snprintf(j->failure, sizeof(j->failure), "%s", str_of(x, "failure"));
	j->home_full = json_is_true(json_object_get(x, "home_full"));
}

int jobrun_restore(struct host *ps, struct pool_box *p, json_t *rec)
{
	struct pool_job *j = &p->job;
	struct job_ctx c = {host_state_dir(ps), p, true};
	const char *stop = str_of(rec, "stop_kind");
	json_int_t step = json_integer_value(json_object_get(rec, "step"));
	char err[200];

	jobrun_clear(p);
	j->job_id = json_integer_value(json_object_get(rec, "id"));
	if (step <= J_NONE || step > J_ENDED || j->job_id <= 0 ||
	    !(j->spec_text = strdup(str_of(rec, "spec"))) ||
	    jobspec_parse(j->spec_text, &j->spec, err, sizeof(err)) < 0) {
		log_error("pool %lld: its record's job cannot be taken over", p->pool_id);
		jobrun_clear(p);
		return -EINVAL;
	}
	j->step = (enum job_step)step;
	/* for the log's size only: the keeper kept writing it */
	if (joblog_open(&j->log, c.state_dir, j->job_id,
			(uint64_t)json_integer_value(json_object_get(rec, "log_max_bytes")),
			launch_labd_gid(host_cfg(ps))) < 0)
		log_warn("job %lld: its log cannot be opened for its size", j->job_id);
	j->runtime_end_ms = mono_of(json_integer_value(json_object_get(rec, "runtime_end_at_ms")));
	j->kill_at_ms = mono_of(json_integer_value(json_object_get(rec, "kill_at_ms")));
	j->sample_at_ms = clock_ms();
	j->oom_kills_before = json_integer_value(json_object_get(rec, "oom_kills_before"));
	j->stop_kind = strcmp(stop, "max_runtime") == 0 ? "max_runtime"
		       : strcmp(stop, "stopped") == 0   ? "stopped"
							: NULL;
	j->grace_s = json_integer_value(json_object_get(rec, "grace_s"));
	if (j->step >= J_UPLOADING)
		restore_exit(j, json_object_get(rec, "exit"));
	if (j->step == J_STAGING) {
		/* its worker died with the previous supervisor: staged again from scratch */
		j->downloading_unsaid = true;
		if (worker_spawn(stage_worker, &c, WORKER_JOB_LIMIT_MS, &j->worker,
				 &j->worker_fd) < 0)
			return -EAGAIN;
	} else if (j->step == J_UPLOADING) {
		begin_upload(ps, p); /* sync, copy, eject: each safe to do twice */
	}
	log_info("job %lld in pool %lld of %s taken over (step %d)", j->job_id, p->pool_id,
		 p->b.user, (int)j->step);
	return 0;
}
