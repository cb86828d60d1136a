# labd - self-hosted notebook lab.  `make run` and `make test` do the whole set-up
# on a fresh Debian 12 machine as root (deploy/install-deps.sh installs what is missing).

CC      ?= cc
BUILD   ?= build
PREFIX  ?= /usr/local
VERSION := 0.1.0

PKGS        := libmicrohttpd sqlite3 libseccomp libcgroup openssl jansson inih libpcre2-8 libcurl
PKG_CFLAGS  := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS    := $(shell pkg-config --libs $(PKGS) 2>/dev/null)

CFLAGS  ?= -O2 -g
CFLAGS  += -std=c17 -Wall -Wextra -Werror -Wshadow -Wvla -D_GNU_SOURCE \
           -DLABD_VERSION='"$(VERSION)"' -I. -Iinclude -Iserver $(PKG_CFLAGS) -MMD -MP
LDLIBS  += $(PKG_LIBS) -lhttp_parser -lcsv -lpthread -lm
ifeq ($(SAN),1)
CFLAGS  += -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
LDFLAGS += -fsanitize=address,undefined
endif
# The ThreadSanitizer build of `make check-tsan` (-O1: TSan's own advice, fast enough
# and with stacks that still name every frame).
# tests/tsan/fork.c goes into every instrumented link (it is why there: its comment).
ifeq ($(TSAN),1)
CFLAGS  += -fsanitize=thread -O1 -fno-omit-frame-pointer
LDFLAGS += -fsanitize=thread $(BUILD)/tests/tsan/fork.o
TSAN_FORK := $(BUILD)/tests/tsan/fork.o
endif
# The fuzzing build (clang only; tests/fuzz/README.md): every object carries
# libFuzzer's coverage hooks and ASan+UBSan; only the harnesses link libFuzzer.
# The fault build (make faults, in $(BUILD)-faults/): FAULT_POINT()s kill labd where a
# test arms them (include/labd/fault.h); every other build compiles them out.
ifeq ($(FAULTS),1)
CFLAGS  += -DLABD_FAULTS
endif
ifeq ($(FUZZ),1)
CFLAGS  += -fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer \
           -fno-sanitize-recover=all
LDFLAGS += -fsanitize=fuzzer,address,undefined
endif

COMMON_SRCS := $(wildcard common/*.c)
SERVER_SRCS := $(wildcard server/*/*.c)
UNIT_SRCS   := $(wildcard tests/unit/test_*.c)

COMMON_OBJS := $(COMMON_SRCS:%.c=$(BUILD)/%.o)
SERVER_OBJS := $(SERVER_SRCS:%.c=$(BUILD)/%.o)
UNIT_BINS   := $(UNIT_SRCS:tests/unit/%.c=$(BUILD)/tests/%)
FUZZ_SRCS   := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_BINS   := $(FUZZ_SRCS:tests/fuzz/%.c=$(BUILD)/tests/fuzz/%)

.PHONY: all deps run test check check-asan check-tsan check-layers tests clean install fmt lint bench test-image \
	fuzz fuzz-bins faults analyze test-slurm
.SECONDARY:

all: $(BUILD)/labd

# The sandbox library and the labbox CLI (SANDBOX_* variables, $(BUILD)/libsandbox.a).
-include sandbox/sandbox.mk
# the job pools' agent, bound into each pool from libexec/ beside labd
all: $(JOBAGENT)

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/libcommon.a: $(COMMON_OBJS) | $(TSAN_FORK)
	$(AR) rcs $@ $^

$(BUILD)/libserver.a: $(SERVER_OBJS)
	$(AR) rcs $@ $^

$(BUILD)/labd: $(BUILD)/server/main.o $(BUILD)/libserver.a $(SANDBOX_LIB) $(BUILD)/libcommon.a
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/tests/%: $(BUILD)/tests/unit/%.o $(BUILD)/libserver.a $(SANDBOX_LIB) $(BUILD)/libcommon.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS) -lcmocka

# The stand-in NVML the GPU tests load through [gpu] nvml_library (tests/standin/).
NVML_STANDIN := $(BUILD)/tests/standin/libnvml-standin.so
$(NVML_STANDIN): tests/standin/nvml_standin.c
	@mkdir -p $(dir $@)
	$(CC) $(filter-out -MMD -MP,$(CFLAGS)) -fPIC -shared -fvisibility=hidden -o $@ $< \
		$(shell pkg-config --libs jansson)

tests: all $(UNIT_BINS) $(SANDBOX_TEST_BINS) $(NVML_STANDIN)

# One libFuzzer harness per parser of untrusted bytes (tests/fuzz/). Built in
# build-fuzz by `make fuzz` and by the fuzz suite of `make test`.
$(BUILD)/tests/fuzz/%: $(BUILD)/tests/fuzz/%.o $(BUILD)/libserver.a $(SANDBOX_LIB) $(BUILD)/libcommon.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

fuzz-bins: $(FUZZ_BINS)

# labd with its fault points armed by LABD_FAULT (tests/integration/test_faults.py), in
# $(BUILD)-faults: a copy of $(BUILD) in which only the objects of the files that hold a
# fault point (and have none compiled in yet) are built again, with -DLABD_FAULTS.
FAULT_BUILD := $(BUILD)-faults
FAULT_OBJS = $(patsubst %.c,$(FAULT_BUILD)/%.o,$(shell grep -rl --include='*.c' 'labd/fault\.h' common sandbox server))
faults: all
	@mkdir -p $(FAULT_BUILD) && cp -au --remove-destination $(BUILD)/. $(FAULT_BUILD)/
	@for o in $(FAULT_OBJS); do nm "$$o" 2>/dev/null | grep -q fault_point || rm -f "$$o"; done
	@rm -f $(FAULT_BUILD)/*.a $(FAULT_BUILD)/labd $(FAULT_BUILD)/labbox
	@$(MAKE) --no-print-directory BUILD=$(FAULT_BUILD) FAULTS=1 all

deps:
	@bash deploy/install-deps.sh

run: deps
	@$(MAKE) --no-print-directory all
	$(BUILD)/labd --demo

test: deps
	@$(MAKE) --no-print-directory tests lint check-layers
	@BUILD=$(BUILD) bash tests/run.sh

check: test

# labd on Slurm (tests/slurm/): a private cluster of the suite's own (munged, slurmctld,
# two slurmd in network namespaces of their own, stand-in GPUs), the shared homes'
# single-writer guard and the Slurm backend end to end. Apart from make test, which is
# at its time budget; CI runs it after make test (.ci/run).
test-slurm: deps
	@$(MAKE) --no-print-directory tests
	@BUILD=$(BUILD) bash tests/slurm/run.sh

# The full runtime image (the ML set and PyTorch CPU; docs/operations.md), built once and
# cached like the small one of make test, and a runtime on it that imports the ML set.
test-image: deps
	@$(MAKE) --no-print-directory all
	@BUILD=$(BUILD) bash tests/integration/run.sh tests/integration/image_ml_check.py

# The same suites against an ASan+UBSan build.
# A small ASan quarantine: with the default (256 MiB) every freed block stays out of
# reach, so a process that merely allocates and frees grows, and the tests that bound
# labd-web's memory would measure ASan rather than labd (a use after free within the
# last 4 MiB of frees is still caught).
check-asan: deps
	@$(MAKE) --no-print-directory BUILD=build-asan SAN=1 tests
	@BUILD=build-asan LABD_ASAN=1 ASAN_OPTIONS=$${ASAN_OPTIONS:-quarantine_size_mb=4} bash tests/run.sh

# The unit tests and the integration files that drive labd-web's threads against a
# ThreadSanitizer build; any report, from any process, fails it (tests/tsan/README.md).
check-tsan: deps
	@$(MAKE) --no-print-directory BUILD=build-tsan TSAN=1 build-tsan/tests/tsan/fork.o
	@$(MAKE) --no-print-directory BUILD=build-tsan TSAN=1 tests
	@BUILD=build-tsan bash tests/tsan/run.sh

# Each harness for FUZZ_SECONDS (default 60) from its corpus; findings land in
# build-fuzz/findings/<name>/ (tests/fuzz/README.md says what to do with them).
FUZZ_SECONDS ?= 60
fuzz: deps
	@FUZZ_SECONDS=$(FUZZ_SECONDS) bash tests/fuzz/run.sh long

bench: deps all
	@bash bench/run.sh

# `make install [PREFIX=/usr/local] [DESTDIR=]` (docs/install.md): labd and labbox in
# sbin (root's tools), the job agent in libexec/labd/ (labd finds it in libexec/labd/ beside
# or one folder above its own binary, and binds that folder alone into job sandboxes), the web UI and
# the docs in share/, the unit in SYSTEMD_UNIT_DIR with PREFIX's paths, and
# /etc/labd/labd.ini only when absent: an upgrade never overwrites the admin's config.
SYSTEMD_UNIT_DIR ?= /etc/systemd/system
install: all
	@test -f web/static/vendor/uplot/VERSION || \
	  { echo "install: web/static/vendor is empty: run make deps first" >&2; exit 1; }
	install -d $(DESTDIR)$(PREFIX)/sbin $(DESTDIR)$(PREFIX)/libexec/labd \
	  $(DESTDIR)$(PREFIX)/share/labd/web $(DESTDIR)$(PREFIX)/share/doc/labd
	install -m 0755 $(BUILD)/labd $(SANDBOX_CLI) $(DESTDIR)$(PREFIX)/sbin/
	install -m 0755 $(JOBAGENT) $(DESTDIR)$(PREFIX)/libexec/labd/labd-jobagent
	cp -R web/*.html web/static $(DESTDIR)$(PREFIX)/share/labd/web/
	install -m 0644 docs/*.md $(DESTDIR)$(PREFIX)/share/doc/labd/
	install -d -m 0755 $(DESTDIR)/etc/labd
	test -e $(DESTDIR)/etc/labd/labd.ini || { sed 's|/usr/local/|$(PREFIX)/|g' deploy/labd.ini \
	  >$(DESTDIR)/etc/labd/labd.ini.new && chmod 0640 $(DESTDIR)/etc/labd/labd.ini.new && \
	  mv $(DESTDIR)/etc/labd/labd.ini.new $(DESTDIR)/etc/labd/labd.ini; }
	install -d $(DESTDIR)$(SYSTEMD_UNIT_DIR)
	sed 's|/usr/local/|$(PREFIX)/|g' deploy/systemd/labd.service \
	  >$(DESTDIR)$(SYSTEMD_UNIT_DIR)/labd.service
	chmod 0644 $(DESTDIR)$(SYSTEMD_UNIT_DIR)/labd.service

fmt:
	clang-format -i $$(git ls-files '*.c' '*.h')

# The include order of docs/architecture.md, and no store or HTTP in root-side
# code (tests/layers/run.sh proves it fails on planted violations).
check-layers: tests
	@bash tests/layers/check-layers.sh . $(BUILD)

# Banned functions (STYLE.md 10): unbounded copies and unchecked conversions. Then the
# naming rules of docs/architecture.md "Words" (guards, tags, exported prefixes from the
# built objects, periods' units; tests/lint/run.sh proves each check fails when broken).
# Then gcc's static analyzer over every C file (make analyze, below).
lint: $(BUILD)/libserver.a $(BUILD)/libcommon.a $(SANDBOX_LIB)
	@! git grep -nE '\b(sprintf|vsprintf|strcpy|strcat|gets|atoi|atol)[[:space:]]*\(' -- '*.c' '*.h' \
	  || { echo "lint: banned function used" >&2; exit 1; }
	@bash tests/lint/check-words.sh . $(BUILD)
	@$(MAKE) --no-print-directory -j2 analyze

# gcc's static analyzer (-fanalyzer) over every C file, tests included; any finding
# fails (make lint runs it; tests/lint/analyze.sh proves it fails on planted bugs). A
# finding it gets wrong is silenced in place with a comment saying why. -O0: gcc 12's
# analyzer misreads a moving realloc after -O1's passes (api/quota_storage.c).
# Stamps under $(BUILD)/analyze keep a second run to the files that changed.
ANALYZE_CC    ?= gcc
ANALYZE_FLAGS := $(filter-out -O% -g -MMD -MP -fsanitize=% -fno-sanitize-recover=% \
		   -fno-omit-frame-pointer,$(CFLAGS)) -O0 -fanalyzer
ANALYZE_SRCS  := $(COMMON_SRCS) $(SERVER_SRCS) server/main.c $(wildcard sandbox/*.c) \
		 $(wildcard tests/*/*.c)
ANALYZE_OKS   := $(ANALYZE_SRCS:%.c=$(BUILD)/analyze/%.ok)

$(BUILD)/analyze/%.ok: %.c
	@mkdir -p $(dir $@)
	@$(ANALYZE_CC) $(ANALYZE_FLAGS) -MMD -MP -MT $@ -MF $(@:.ok=.d) -c $< -o /dev/null
	@touch $@

analyze: $(ANALYZE_OKS)
	@echo "analyze: $(words $(ANALYZE_OKS)) files, no finding"

clean:
	rm -rf build build-asan build-tsan build-fuzz build-faults build-asan-faults

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
