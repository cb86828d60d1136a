/* migrations.c - labd's schema history; see migrations.h. */
#include "store/migrations.h"

#include <stddef.h>

static const char *const migrations[] = {
	/* 1: accounts, cookie sessions, API tokens, login throttling, audit log. */
	"CREATE TABLE users ("
	"  id INTEGER PRIMARY KEY,"
	"  name TEXT NOT NULL UNIQUE,"
	"  role TEXT NOT NULL CHECK (role IN ('admin', 'user')),"
	"  password_hash TEXT NOT NULL,"
	"  disabled INTEGER NOT NULL DEFAULT 0 CHECK (disabled IN (0, 1)),"
	"  created_at INTEGER NOT NULL,"
	"  updated_at INTEGER NOT NULL);"
	"CREATE TABLE sessions ("
	"  id INTEGER PRIMARY KEY,"
	"  user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,"
	"  token_hash TEXT NOT NULL UNIQUE,"
	"  csrf_token TEXT NOT NULL,"
	"  address TEXT,"
	"  created_at INTEGER NOT NULL,"
	"  last_seen INTEGER NOT NULL,"
	"  expires_at INTEGER NOT NULL);"
	"CREATE INDEX sessions_user ON sessions(user_id);"
	"CREATE TABLE api_tokens ("
	"  id INTEGER PRIMARY KEY,"
	"  user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,"
	"  name TEXT NOT NULL,"
	"  prefix TEXT NOT NULL,"
	"  token_hash TEXT NOT NULL UNIQUE,"
	"  created_at INTEGER NOT NULL,"
	"  last_used_at INTEGER,"
	"  UNIQUE (user_id, name));"
	"CREATE TABLE login_failures ("
	"  key TEXT PRIMARY KEY,"
	"  failures INTEGER NOT NULL,"
	"  last_failure INTEGER NOT NULL,"
	"  locked_until INTEGER NOT NULL DEFAULT 0);"
	"CREATE TABLE audit ("
	"  id INTEGER PRIMARY KEY,"
	"  time INTEGER NOT NULL,"
	"  actor TEXT,"
	"  action TEXT NOT NULL,"
	"  target TEXT,"
	"  address TEXT,"
	"  detail TEXT);",
	/* 2: interactive runtimes; the partial unique index keeps one live runtime
	 * per user even if two starts race. */
	"CREATE TABLE runtimes ("
	"  id INTEGER PRIMARY KEY,"
	"  user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,"
	"  kind TEXT NOT NULL CHECK (kind IN ('cpu', 'gpu')),"
	"  state TEXT NOT NULL CHECK (state IN ('starting', 'running', 'stopping', 'stopped',"
	"    'failed')),"
	"  reason TEXT,"
	"  token TEXT NOT NULL,"
	"  gpus TEXT NOT NULL DEFAULT '',"
	"  created_at INTEGER NOT NULL,"
	"  ready_at INTEGER,"
	"  deadline INTEGER NOT NULL,"
	"  ended_at INTEGER,"
	"  last_activity INTEGER NOT NULL);"
	"CREATE INDEX runtimes_user ON runtimes(user_id, id);"
	"CREATE UNIQUE INDEX runtimes_one_live ON runtimes(user_id)"
	"  WHERE state IN ('starting', 'running', 'stopping');",
	/* 3: where the runtime is reached, as its backend reported it */
	"ALTER TABLE runtimes ADD COLUMN endpoint TEXT NOT NULL DEFAULT '';",
	/* 4: user ids are never reused (AUTOINCREMENT): homes and host uids are
	 * keyed on them, so a new user with an old name must get a new id. The
	 * table is rebuilt (SQLite cannot add AUTOINCREMENT in place) keeping
	 * every id; db_migrate runs this with foreign keys off, so dropping the
	 * old table cascades to nothing, and checks them before committing. */
	"CREATE TABLE users_new ("
	"  id INTEGER PRIMARY KEY AUTOINCREMENT,"
	"  name TEXT NOT NULL UNIQUE,"
	"  role TEXT NOT NULL CHECK (role IN ('admin', 'user')),"
	"  password_hash TEXT NOT NULL,"
	"  disabled INTEGER NOT NULL DEFAULT 0 CHECK (disabled IN (0, 1)),"
	"  created_at INTEGER NOT NULL,"
	"  updated_at INTEGER NOT NULL);"
	"INSERT INTO users_new (id, name, role, password_hash, disabled, created_at, updated_at)"
	"  SELECT id, name, role, password_hash, disabled, created_at, updated_at FROM users;"
	"DROP TABLE users;"
	"ALTER TABLE users_new RENAME TO users;",
	/* 5: runtime grants: a login session's one-time handoff code to a user
	 * origin and the runtime cookie it became; both die with the session. */
	"CREATE TABLE runtime_grants ("
	"  id INTEGER PRIMARY KEY,"
	"  session_id INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,"
	"  target_user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,"
	"  code_hash TEXT UNIQUE,"
	"  code_expires_at INTEGER NOT NULL,"
	"  cookie_hash TEXT UNIQUE,"
	"  created_at INTEGER NOT NULL);"
	"CREATE INDEX runtime_grants_session ON runtime_grants(session_id);",
	/* 6: governance. Limits are kept as text ("name=value ...", store/quota.h)
	 * so a later step adds a limit without a migration. A plan in use cannot
	 * be deleted (RESTRICT); the API names its users first. */
	"CREATE TABLE plans ("
	"  id INTEGER PRIMARY KEY,"
	"  name TEXT NOT NULL UNIQUE,"
	"  limits TEXT NOT NULL DEFAULT '',"
	"  created_at INTEGER NOT NULL,"
	"  updated_at INTEGER NOT NULL);"
	"CREATE TABLE groups ("
	"  id INTEGER PRIMARY KEY,"
	"  name TEXT NOT NULL UNIQUE,"
	"  plan_id INTEGER REFERENCES plans(id) ON DELETE RESTRICT,"
	"  created_at INTEGER NOT NULL);"
	"CREATE TABLE group_members ("
	"  group_id INTEGER NOT NULL REFERENCES groups(id) ON DELETE CASCADE,"
	"  user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,"
	"  PRIMARY KEY (group_id, user_id));"
	"CREATE INDEX group_members_user ON group_members(user_id);"
	"CREATE TABLE user_quotas ("
	"  user_id INTEGER PRIMARY KEY REFERENCES users(id) ON DELETE CASCADE,"
	"  plan_id INTEGER REFERENCES plans(id) ON DELETE RESTRICT,"
	"  overrides TEXT NOT NULL DEFAULT '',"
	"  updated_at INTEGER NOT NULL);",
	/* 7: the usage ledger, one row per billed runtime (later per job). No
	 * foreign keys: entries outlive runtimes and accounts, so they name the
	 * user too. end_at is NULL while open; billable_s is end_at - start_at
	 * once closed, last_heartbeat - start_at while open. */
	"CREATE TABLE ledger ("
	"  id INTEGER PRIMARY KEY,"
	"  runtime_id INTEGER,"
	"  user_id INTEGER NOT NULL,"
	"  user_name TEXT NOT NULL,"
	"  kind TEXT NOT NULL CHECK (kind IN ('cpu', 'gpu')),"
	"  gpus TEXT NOT NULL DEFAULT '',"
	"  plan TEXT NOT NULL,"
	"  start_at INTEGER NOT NULL,"
	"  end_at INTEGER,"
	"  billable_s INTEGER NOT NULL DEFAULT 0 CHECK (billable_s >= 0),"
	"  end_reason TEXT,"
	"  last_heartbeat INTEGER NOT NULL);"
	"CREATE UNIQUE INDEX ledger_runtime ON ledger(runtime_id) WHERE runtime_id IS NOT NULL;"
	"CREATE INDEX ledger_user ON ledger(user_id, start_at);"
	"CREATE INDEX ledger_start ON ledger(start_at);"
	"CREATE INDEX ledger_open ON ledger(id) WHERE end_at IS NULL;",
	/* 8: runtime ids are never reused (AUTOINCREMENT): the ledger and API
	 * clients name runtimes by id, and deleting a user (whose runtimes go
	 * with them) let the next runtime take the highest id again. Rebuilt as
	 * migration 4 rebuilt users (foreign keys off), with the sequence past
	 * every id the ledger has seen. */
	"CREATE TABLE runtimes_new ("
	"  id INTEGER PRIMARY KEY AUTOINCREMENT,"
	"  user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,"
	"  kind TEXT NOT NULL CHECK (kind IN ('cpu', 'gpu')),"
	"  state TEXT NOT NULL CHECK (state IN ('starting', 'running', 'stopping', 'stopped',"
	"    'failed')),"
	"  reason TEXT,"
	"  token TEXT NOT NULL,"
	"  gpus TEXT NOT NULL DEFAULT '',"
	"  created_at INTEGER NOT NULL,"
	"  ready_at INTEGER,"
	"  deadline INTEGER NOT NULL,"
	"  ended_at INTEGER,"
	"  last_activity INTEGER NOT NULL,"
	"  endpoint TEXT NOT NULL DEFAULT '');"
	"INSERT INTO runtimes_new (id, user_id, kind, state, reason, token, gpus, created_at,"
	"  ready_at, deadline, ended_at, last_activity, endpoint)"
	"  SELECT id, user_id, kind, state, reason, token, gpus, created_at, ready_at, deadline,"
	"  ended_at, last_activity, endpoint FROM runtimes;"
	"DROP TABLE runtimes;"
	"ALTER TABLE runtimes_new RENAME TO runtimes;"
	"CREATE INDEX runtimes_user ON runtimes(user_id, id);"
	"CREATE UNIQUE INDEX runtimes_one_live ON runtimes(user_id)"
	"  WHERE state IN ('starting', 'running', 'stopping');"
	"INSERT INTO sqlite_sequence (name, seq) SELECT 'runtimes', 0"
	"  WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'runtimes');"
	"UPDATE sqlite_sequence SET seq = max(seq,"
	"  (SELECT coalesce(max(id), 0) FROM runtimes),"
	"  (SELECT coalesce(max(runtime_id), 0) FROM ledger)) WHERE name = 'runtimes';",
	/* 9: the GPU queue. A GPU start with no GPU free is a runtime row in
	 * state 'queued' (so it has its id, counts as the user's one live
	 * runtime and survives restarts) plus a gpu_queue entry: when it was
	 * queued, when it expires, and the position and estimate last computed
	 * (so every reader of the row shows the same). The CHECK on state needs
	 * the table rebuilt, as migration 8 did, keeping ids and the sequence. */
	"CREATE TABLE runtimes_new ("
	"  id INTEGER PRIMARY KEY AUTOINCREMENT,"
	"  user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,"
	"  kind TEXT NOT NULL CHECK (kind IN ('cpu', 'gpu')),"
	"  state TEXT NOT NULL CHECK (state IN ('queued', 'starting', 'running', 'stopping',"
	"    'stopped', 'failed')),"
	"  reason TEXT,"
	"  token TEXT NOT NULL,"
	"  gpus TEXT NOT NULL DEFAULT '',"
	"  created_at INTEGER NOT NULL,"
	"  ready_at INTEGER,"
	"  deadline INTEGER NOT NULL,"
	"  ended_at INTEGER,"
	"  last_activity INTEGER NOT NULL,"
	"  endpoint TEXT NOT NULL DEFAULT '');"
	"INSERT INTO runtimes_new SELECT id, user_id, kind, state, reason, token, gpus, created_at,"
	"  ready_at, deadline, ended_at, last_activity, endpoint FROM runtimes;"
	"CREATE TEMP TABLE runtimes_seq9 AS SELECT seq FROM sqlite_sequence WHERE name = 'runtimes';"
	"DROP TABLE runtimes;"
	"ALTER TABLE runtimes_new RENAME TO runtimes;"
	"INSERT INTO sqlite_sequence (name, seq) SELECT 'runtimes', 0"
	"  WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'runtimes');"
	"UPDATE sqlite_sequence SET seq = max(seq, (SELECT coalesce(max(seq), 0) FROM"
	"  temp.runtimes_seq9)) WHERE name = 'runtimes';"
	"DROP TABLE temp.runtimes_seq9;"
	"CREATE INDEX runtimes_user ON runtimes(user_id, id);"
	"CREATE UNIQUE INDEX runtimes_one_live ON runtimes(user_id)"
	"  WHERE state IN ('queued', 'starting', 'running', 'stopping');"
	"CREATE TABLE gpu_queue ("
	"  runtime_id INTEGER PRIMARY KEY REFERENCES runtimes(id) ON DELETE CASCADE,"
	"  queued_at INTEGER NOT NULL,"
	"  expires_at INTEGER NOT NULL,"
	"  position INTEGER NOT NULL DEFAULT 0,"
	"  estimate_at INTEGER NOT NULL DEFAULT 0);",
	/* 10: token scopes and expiry. Tokens made before scopes existed could do
	 * all their owner could, so they keep "*" (every scope of the owner's
	 * role, at use time); expires_at NULL = never. */
	("ALTER TABLE api_tokens ADD COLUMN scopes TEXT NOT NULL DEFAULT '*';"
	 "ALTER TABLE api_tokens ADD COLUMN expires_at INTEGER;"),
	/* 11: runtime images. A plan may name an image of [images] ('' = the host's
	 * root); a runtime records the image it ran on and that image's content hash
	 * (labd-image.json), so a rebuilt image shows as a different hash. */
	("ALTER TABLE plans ADD COLUMN image TEXT NOT NULL DEFAULT '';"
	 "ALTER TABLE runtimes ADD COLUMN image TEXT NOT NULL DEFAULT '';"
	 "ALTER TABLE runtimes ADD COLUMN image_hash TEXT NOT NULL DEFAULT '';"),
	/* 12: training jobs (docs/jobs.md). A job row keeps the normalised
	 * request (spec) and the columns the scheduler matches on; its status
	 * and secondary status are the API's names; every change of the
	 * secondary status is a job_transitions row. A pool is the sandbox a
	 * job runs in, kept warm after it for keep_alive_s. Ids are never reused
	 * (AUTOINCREMENT): the supervisor and the ledger name them. Job names
	 * are unique per user for good (a name names one run). The ledger bills
	 * job attempts (source 'job') and warm periods (source 'warm') beside
	 * runtimes. */
	("CREATE TABLE jobs ("
	 "  id INTEGER PRIMARY KEY AUTOINCREMENT,"
	 "  user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,"
	 "  name TEXT NOT NULL,"
	 "  status TEXT NOT NULL CHECK (status IN ('InProgress', 'Completed', 'Failed',"
	 "    'Stopping', 'Stopped')),"
	 "  secondary TEXT NOT NULL,"
	 "  spec TEXT NOT NULL,"
	 "  kind TEXT NOT NULL CHECK (kind IN ('cpu', 'gpu')),"
	 "  gpu_count INTEGER NOT NULL DEFAULT 0,"
	 "  image TEXT NOT NULL DEFAULT '',"
	 "  memory_bytes INTEGER NOT NULL DEFAULT 0,"
	 "  cpus_milli INTEGER NOT NULL DEFAULT 0,"
	 "  network INTEGER NOT NULL DEFAULT 0,"
	 "  pool_id INTEGER NOT NULL DEFAULT 0,"
	 "  reused_pool INTEGER NOT NULL DEFAULT 0,"
	 "  run_sent INTEGER NOT NULL DEFAULT 0,"
	 "  attempt INTEGER NOT NULL DEFAULT 1,"
	 "  max_retries INTEGER NOT NULL DEFAULT 0,"
	 "  max_runtime_s INTEGER NOT NULL,"
	 "  max_wait_s INTEGER NOT NULL,"
	 "  keep_alive_s INTEGER NOT NULL DEFAULT 0,"
	 "  grace_s INTEGER NOT NULL,"
	 "  created_at INTEGER NOT NULL,"
	 "  started_at INTEGER NOT NULL DEFAULT 0,"
	 "  ended_at INTEGER NOT NULL DEFAULT 0,"
	 "  training_ms INTEGER NOT NULL DEFAULT 0,"
	 "  exit_code INTEGER,"
	 "  failure_reason TEXT NOT NULL DEFAULT '',"
	 "  warm_status TEXT NOT NULL DEFAULT '',"
	 "  warm_from INTEGER NOT NULL DEFAULT 0,"
	 "  warm_to INTEGER NOT NULL DEFAULT 0,"
	 "  warm_until INTEGER NOT NULL DEFAULT 0,"
	 "  warm_reason TEXT NOT NULL DEFAULT '',"
	 "  reused_by INTEGER NOT NULL DEFAULT 0,"
	 "  UNIQUE (user_id, name));"
	 "CREATE INDEX jobs_live ON jobs(status) WHERE status IN ('InProgress', 'Stopping');"
	 "CREATE INDEX jobs_user ON jobs(user_id, id);"
	 "CREATE TABLE job_transitions ("
	 "  id INTEGER PRIMARY KEY,"
	 "  job_id INTEGER NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,"
	 "  secondary TEXT NOT NULL,"
	 "  start_at_ms INTEGER NOT NULL,"
	 "  end_at_ms INTEGER,"
	 "  message TEXT NOT NULL DEFAULT '');"
	 "CREATE INDEX job_transitions_job ON job_transitions(job_id, id);"
	 "CREATE TABLE pools ("
	 "  id INTEGER PRIMARY KEY AUTOINCREMENT,"
	 "  user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,"
	 "  state TEXT NOT NULL CHECK (state IN ('starting', 'available', 'in_use', 'ended')),"
	 "  gpu INTEGER NOT NULL DEFAULT 0,"
	 "  gpus TEXT NOT NULL DEFAULT '',"
	 "  gpu_count INTEGER NOT NULL DEFAULT 0,"
	 "  image TEXT NOT NULL DEFAULT '',"
	 "  memory_bytes INTEGER NOT NULL DEFAULT 0,"
	 "  cpus_milli INTEGER NOT NULL DEFAULT 0,"
	 "  network INTEGER NOT NULL DEFAULT 0,"
	 "  created_at INTEGER NOT NULL,"
	 "  deadline INTEGER NOT NULL,"
	 "  ready INTEGER NOT NULL DEFAULT 0,"
	 "  available_until INTEGER NOT NULL DEFAULT 0,"
	 "  job_id INTEGER NOT NULL DEFAULT 0,"
	 "  last_job_id INTEGER NOT NULL DEFAULT 0,"
	 "  ended_at INTEGER NOT NULL DEFAULT 0,"
	 "  end_reason TEXT NOT NULL DEFAULT '');"
	 "CREATE INDEX pools_live ON pools(user_id) WHERE state <> 'ended';"
	 "ALTER TABLE ledger ADD COLUMN job_id INTEGER;"
	 "ALTER TABLE ledger ADD COLUMN pool_id INTEGER;"
	 "ALTER TABLE ledger ADD COLUMN source TEXT NOT NULL DEFAULT 'runtime'"
	 "  CHECK (source IN ('runtime', 'job', 'warm'));"
	 "CREATE INDEX ledger_job ON ledger(job_id) WHERE job_id IS NOT NULL;"
	 "CREATE INDEX ledger_pool ON ledger(pool_id) WHERE pool_id IS NOT NULL;"),
	/* 13: what is observed of a running job (docs/jobs.md "Logs", "Metrics",
	 * "Profiling rules"): metric points extracted from its log (capped per
	 * metric), its last samples (cgroup and GPU readings, kept per job),
	 * the profiling rules' findings with the samples that showed them, and
	 * how far its log was read (so a restarted labd-web resumes there). */
	("CREATE TABLE job_metrics ("
	 "  job_id INTEGER NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,"
	 "  name TEXT NOT NULL,"
	 "  at_ms INTEGER NOT NULL,"
	 "  value REAL NOT NULL);"
	 "CREATE INDEX job_metrics_job ON job_metrics(job_id, name, at_ms);"
	 "CREATE TABLE job_samples ("
	 "  id INTEGER PRIMARY KEY,"
	 "  job_id INTEGER NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,"
	 "  at_ms INTEGER NOT NULL,"
	 "  cpu_usage_us INTEGER NOT NULL,"
	 "  cpu_percent REAL,"
	 "  memory_bytes INTEGER NOT NULL,"
	 "  memory_limit_bytes INTEGER NOT NULL,"
	 "  io_wait_us INTEGER NOT NULL,"
	 "  io_wait_percent REAL,"
	 "  gpu_percent REAL,"
	 "  gpu_memory_bytes INTEGER,"
	 "  log_bytes INTEGER NOT NULL);"
	 "CREATE INDEX job_samples_job ON job_samples(job_id, id);"
	 "CREATE TABLE job_findings ("
	 "  job_id INTEGER NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,"
	 "  rule TEXT NOT NULL,"
	 "  first_at_ms INTEGER NOT NULL,"
	 "  last_at_ms INTEGER NOT NULL,"
	 "  message TEXT NOT NULL,"
	 "  samples TEXT NOT NULL DEFAULT '[]',"
	 "  PRIMARY KEY (job_id, rule));"
	 "CREATE TABLE job_observe ("
	 "  job_id INTEGER PRIMARY KEY REFERENCES jobs(id) ON DELETE CASCADE,"
	 "  log_offset INTEGER NOT NULL DEFAULT 0,"
	 "  started_at_ms INTEGER NOT NULL DEFAULT 0,"
	 "  first_output_at_ms INTEGER NOT NULL DEFAULT 0,"
	 "  last_output_at_ms INTEGER NOT NULL DEFAULT 0);"),
	/* 14: the metric definitions a job's extraction dropped (bit i: its
	 * metric_definitions[i] hit PCRE2's limits too often; docs/jobs.md
	 * "Metrics"), kept so that a restarted labd-web neither matches them
	 * again nor forgets to say so. */
	("ALTER TABLE job_observe ADD COLUMN dropped_defs INTEGER NOT NULL DEFAULT 0;"),
	/* 15: what each job keeps on the state file system, charged to its
	 * user (docs/jobs.md "Retention"): the bytes of its spec (fixed at
	 * submit), of its log and an estimate of its metric points (measured
	 * while it may grow; final once measured after its end), beside the
	 * job in a row of its own so that summing a user's stays cheap (a
	 * jobs row holds a spec of up to ~1 MiB before its later columns).
	 * ended_at orders the retention sweep. */
	("CREATE TABLE job_storage ("
	 "  job_id INTEGER PRIMARY KEY REFERENCES jobs(id) ON DELETE CASCADE,"
	 "  user_id INTEGER NOT NULL,"
	 "  spec_bytes INTEGER NOT NULL DEFAULT 0,"
	 "  log_bytes INTEGER NOT NULL DEFAULT 0,"
	 "  metric_bytes INTEGER NOT NULL DEFAULT 0,"
	 "  ended_at INTEGER NOT NULL DEFAULT 0,"
	 "  final INTEGER NOT NULL DEFAULT 0);"
	 "CREATE INDEX job_storage_user ON job_storage(user_id, ended_at);"
	 "CREATE INDEX job_storage_ended ON job_storage(ended_at);"
	 "CREATE INDEX job_storage_open ON job_storage(job_id) WHERE final = 0;"
	 "INSERT INTO job_storage (job_id, user_id, spec_bytes, ended_at)"
	 "  SELECT id, user_id, length(CAST(spec AS BLOB)), ended_at FROM jobs;"),
	/* 16: courses. A user's e-mail (CSV import; "" = none). A group's end:
	 * expires_at (NULL = never), ended_at when its members were disabled,
	 * retired_at when the expired accounts were deleted after the retention
	 * (docs/operations.md "Courses"). */
	("ALTER TABLE users ADD COLUMN email TEXT NOT NULL DEFAULT '';"
	 "ALTER TABLE groups ADD COLUMN expires_at INTEGER;"
	 "ALTER TABLE groups ADD COLUMN ended_at INTEGER;"
	 "ALTER TABLE groups ADD COLUMN retired_at INTEGER;"),
	/* 17: tuning jobs (docs/jobs.md "Tuning jobs"): the normalised request,
	 * each trial (a training job of its own, made in index order; its
	 * parameters, its objective value and why it ended, copied so that a
	 * trial outlives its job's retention) and the value each trial reached
	 * at each early-stopping rung (hyperband), so that a restarted labd-web
	 * goes on with the same search and the same comparisons. */
	("CREATE TABLE tuning_jobs ("
	 "  id INTEGER PRIMARY KEY,"
	 "  user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,"
	 "  name TEXT NOT NULL,"
	 "  spec TEXT NOT NULL,"
	 "  status TEXT NOT NULL CHECK (status IN ('InProgress', 'Completed', 'Failed',"
	 "    'Stopping', 'Stopped')),"
	 "  reason TEXT NOT NULL DEFAULT '',"
	 "  created_at INTEGER NOT NULL,"
	 "  ended_at INTEGER NOT NULL DEFAULT 0,"
	 "  UNIQUE (user_id, name));"
	 "CREATE INDEX tuning_jobs_live ON tuning_jobs(status)"
	 "  WHERE status IN ('InProgress', 'Stopping');"
	 "CREATE TABLE tuning_trials ("
	 "  tuning_id INTEGER NOT NULL REFERENCES tuning_jobs(id) ON DELETE CASCADE,"
	 "  idx INTEGER NOT NULL,"
	 "  job_id INTEGER NOT NULL DEFAULT 0,"
	 "  job_name TEXT NOT NULL,"
	 "  parameters TEXT NOT NULL,"
	 "  status TEXT NOT NULL CHECK (status IN ('Pending', 'InProgress', 'Completed',"
	 "    'Failed', 'Stopped', 'EarlyStopped')),"
	 "  objective REAL,"
	 "  reason TEXT NOT NULL DEFAULT '',"
	 "  rung INTEGER NOT NULL DEFAULT 0,"
	 "  created_at_ms INTEGER NOT NULL,"
	 "  started_at INTEGER NOT NULL DEFAULT 0,"
	 "  ended_at INTEGER NOT NULL DEFAULT 0,"
	 "  PRIMARY KEY (tuning_id, idx));"
	 "CREATE TABLE tuning_rungs ("
	 "  tuning_id INTEGER NOT NULL REFERENCES tuning_jobs(id) ON DELETE CASCADE,"
	 "  rung INTEGER NOT NULL,"
	 "  idx INTEGER NOT NULL,"
	 "  value REAL NOT NULL,"
	 "  PRIMARY KEY (tuning_id, rung, idx));"),
	/* 18: preemptible jobs (docs/jobs.md "Preemptible capacity"). A job's
	 * capacity; while labd stops it for someone who waits, preempting says
	 * who (and preempt_at_ms since when), so a restarted labd-web puts it
	 * back in the queue when its end comes, or stops it again; preemptions
	 * counts its interruptions, each one a row of job_interruptions (when,
	 * what waited, when it was queued again and when it resumed). A plan's
	 * preemptible_rate is the fraction of a preemptible second it bills;
	 * each ledger entry keeps its capacity and the rate it bills at. */
	("ALTER TABLE jobs ADD COLUMN capacity TEXT NOT NULL DEFAULT 'on-demand';"
	 "ALTER TABLE jobs ADD COLUMN preempting TEXT NOT NULL DEFAULT '';"
	 "ALTER TABLE jobs ADD COLUMN preempt_at_ms INTEGER NOT NULL DEFAULT 0;"
	 "ALTER TABLE jobs ADD COLUMN preemptions INTEGER NOT NULL DEFAULT 0;"
	 "CREATE TABLE job_interruptions ("
	 "  id INTEGER PRIMARY KEY,"
	 "  job_id INTEGER NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,"
	 "  reason TEXT NOT NULL,"
	 "  waiting TEXT NOT NULL,"
	 "  at_ms INTEGER NOT NULL,"
	 "  requeued_at_ms INTEGER,"
	 "  resumed_at_ms INTEGER);"
	 "CREATE INDEX job_interruptions_job ON job_interruptions(job_id);"
	 "CREATE INDEX jobs_preemptible ON jobs(id) WHERE capacity = 'preemptible'"
	 "  AND status = 'InProgress';"
	 "ALTER TABLE plans ADD COLUMN preemptible_rate REAL NOT NULL DEFAULT 0.3;"
	 "ALTER TABLE ledger ADD COLUMN capacity TEXT NOT NULL DEFAULT 'on-demand';"
	 "ALTER TABLE ledger ADD COLUMN rate REAL NOT NULL DEFAULT 1;"),
	/* 19: notifications (docs/jobs.md "Notifications"). A user's webhooks
	 * (events: a bit set over notify/notify.h's names; the secret signs each
	 * body and is shown once). A delivery is one event for one webhook,
	 * queued once per event key, pending until delivered or out of attempts;
	 * its attempts are the log. */
	("CREATE TABLE webhooks ("
	 "  id INTEGER PRIMARY KEY AUTOINCREMENT,"
	 "  user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,"
	 "  url TEXT NOT NULL,"
	 "  events INTEGER NOT NULL,"
	 "  secret TEXT NOT NULL,"
	 "  created_at INTEGER NOT NULL);"
	 "CREATE INDEX webhooks_user ON webhooks(user_id);"
	 "CREATE TABLE webhook_deliveries ("
	 "  id INTEGER PRIMARY KEY AUTOINCREMENT,"
	 "  webhook_id INTEGER NOT NULL REFERENCES webhooks(id) ON DELETE CASCADE,"
	 "  event TEXT NOT NULL,"
	 "  event_key TEXT NOT NULL,"
	 "  body TEXT NOT NULL,"
	 "  created_at_ms INTEGER NOT NULL,"
	 "  state TEXT NOT NULL DEFAULT 'pending'"
	 "    CHECK (state IN ('pending', 'delivered', 'failed')),"
	 "  attempts INTEGER NOT NULL DEFAULT 0,"
	 "  next_at_ms INTEGER NOT NULL,"
	 "  last_status INTEGER NOT NULL DEFAULT 0,"
	 "  last_error TEXT NOT NULL DEFAULT '',"
	 "  UNIQUE (webhook_id, event_key));"
	 "CREATE INDEX webhook_deliveries_due ON webhook_deliveries(next_at_ms)"
	 "  WHERE state = 'pending';"
	 "CREATE TABLE webhook_attempts ("
	 "  delivery_id INTEGER NOT NULL REFERENCES webhook_deliveries(id) ON DELETE CASCADE,"
	 "  attempt INTEGER NOT NULL,"
	 "  at_ms INTEGER NOT NULL,"
	 "  duration_ms INTEGER NOT NULL,"
	 "  status INTEGER NOT NULL,"
	 "  error TEXT NOT NULL,"
	 "  PRIMARY KEY (delivery_id, attempt));"),
	/* 20: shared GPUs (docs/gpu.md "Sharing one card"). A plan's kind of GPU
	 * device ('whole', 'share' or a MIG profile such as '1g.18gb'); the kind
	 * a runtime, a job and a job sandbox were given (a job's: what it asked
	 * within its plan, fixed at submit, so the queue keeps each kind apart
	 * across a restart) and the fraction of a card each of their devices is
	 * (thousandths: a MIG instance's memory over its card's, 1/count for a
	 * share, 1000 for a whole card), copied onto the ledger entry as it
	 * opens: its GPU seconds are charged times that fraction. */
	("ALTER TABLE plans ADD COLUMN gpu TEXT NOT NULL DEFAULT 'whole';"
	 "ALTER TABLE runtimes ADD COLUMN gpu_kind TEXT NOT NULL DEFAULT 'whole';"
	 "ALTER TABLE runtimes ADD COLUMN gpu_fraction_milli INTEGER NOT NULL DEFAULT 1000;"
	 "ALTER TABLE jobs ADD COLUMN gpu_kind TEXT NOT NULL DEFAULT 'whole';"
	 "ALTER TABLE pools ADD COLUMN gpu_kind TEXT NOT NULL DEFAULT 'whole';"
	 "ALTER TABLE pools ADD COLUMN gpu_fraction_milli INTEGER NOT NULL DEFAULT 1000;"
	 "ALTER TABLE ledger ADD COLUMN fraction_milli INTEGER NOT NULL DEFAULT 1000;"),
	/* 21: jobs on several hosts (docs/jobs.md "Several hosts"). The number of
	 * sandboxes an entry's seconds ran in at once (a job's instance_count, 1 for
	 * everything else), kept on the entry as it opens: the quota windows count
	 * each second that many times, as the rate bills it, also once the job's row
	 * is gone. */
	("ALTER TABLE ledger ADD COLUMN hosts INTEGER NOT NULL DEFAULT 1;"),
};

int migrations_count(void)
{
	return (int)(sizeof(migrations) / sizeof(migrations[0]));
}

const char *migrations_sql(int version)
{
	if (version < 1 || version > migrations_count())
		return NULL;
	return migrations[version - 1];
}
