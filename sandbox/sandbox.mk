# sandbox/sandbox.mk - libsandbox, the labbox CLI and the sandbox tests.
# Included by the top-level Makefile, which provides CC, CFLAGS, LDLIBS, BUILD and
# the generic $(BUILD)/%.o rule.

SANDBOX_SRCS := $(filter-out sandbox/labbox.c sandbox/jobagent.c,$(wildcard sandbox/*.c))
SANDBOX_OBJS := $(SANDBOX_SRCS:%.c=$(BUILD)/%.o)
SANDBOX_LIB  := $(BUILD)/libsandbox.a
SANDBOX_CLI  := $(BUILD)/labbox

SANDBOX_UNIT_SRCS := $(wildcard tests/sandbox/test_*.c)
SANDBOX_UNIT_BINS := $(SANDBOX_UNIT_SRCS:tests/sandbox/%.c=$(BUILD)/tests/sandbox/%)
SANDBOX_PROBE     := $(BUILD)/tests/security/probe
SANDBOX_SECCOMP_ONLY := $(BUILD)/tests/security/seccomp_only

SANDBOX_TEST_BINS := $(SANDBOX_CLI) $(SANDBOX_UNIT_BINS) $(SANDBOX_PROBE) $(SANDBOX_SECCOMP_ONLY) $(JOBAGENT)

# The job agent runs inside job sandboxes on any image: static, libc only, and built
# without sanitizers (their runtimes cannot be linked static).
JOBAGENT     := $(BUILD)/libexec/labd/labd-jobagent
JOBAGENT_CFLAGS := $(filter-out -fsanitize=% -fno-sanitize-recover=%,$(CFLAGS))

all: $(SANDBOX_CLI) $(JOBAGENT)

$(BUILD)/agent/%.o: sandbox/%.c
	@mkdir -p $(dir $@)
	$(CC) $(JOBAGENT_CFLAGS) -c $< -o $@

$(JOBAGENT): $(BUILD)/agent/jobagent.o $(BUILD)/agent/jobproto.o $(BUILD)/agent/jobshare.o
	@mkdir -p $(dir $@)
	$(CC) -static -o $@ $^

# its test binds $(BUILD)/libexec/labd into sandboxes
$(BUILD)/tests/sandbox/test_jobagent: | $(JOBAGENT)

$(SANDBOX_LIB): $(SANDBOX_OBJS)
	$(AR) rcs $@ $^

$(SANDBOX_CLI): $(BUILD)/sandbox/labbox.o $(SANDBOX_LIB) $(BUILD)/libcommon.a
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/tests/sandbox/%: $(BUILD)/tests/sandbox/%.o $(SANDBOX_LIB) $(BUILD)/libcommon.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS) -lcmocka

# The probe runs inside sandboxes and reports errno names; it needs only libc,
# and is built without sanitizers even in `make check-asan`: it runs where
# /proc is not the probe's (pivot_root controls) and with a user's LD_PRELOAD,
# which the sanitizer runtimes refuse.
$(BUILD)/tests/security/probe.o: tests/security/probe.c
	@mkdir -p $(dir $@)
	$(CC) $(filter-out -fsanitize=% -fno-sanitize-recover=%,$(CFLAGS)) -c $< -o $@

$(SANDBOX_PROBE): $(BUILD)/tests/security/probe.o
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^

.PHONY: sandbox-test
sandbox-test: $(SANDBOX_TEST_BINS)
	BUILD=$(BUILD) bash tests/security/run.sh

# labd's seccomp filter alone around a command: the escape suite's controls.
$(SANDBOX_SECCOMP_ONLY): $(BUILD)/tests/security/seccomp_only.o $(SANDBOX_LIB) $(BUILD)/libcommon.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)
