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
LDLIBS  += $(PKG_LIBS) -lhttp_parser -lpthread -lm
ifeq ($(SAN),1)
CFLAGS  += -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
LDFLAGS += -fsanitize=address,undefined
endif
# The fuzzing build (clang only; tests/fuzz/README.md): every object carries
# libFuzzer's coverage hooks and ASan+UBSan; only the harnesses link libFuzzer.
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

.PHONY: all deps run test check check-asan check-layers tests clean install fmt lint bench test-image \
	fuzz fuzz-bins
.SECONDARY:

all: $(BUILD)/labd

# The sandbox library and the labbox CLI (SANDBOX_* variables, $(BUILD)/libsandbox.a).
-include sandbox/sandbox.mk
# the job pools' agent, bound into each pool from libexec/ beside labd
all: $(JOBAGENT)

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/libcommon.a: $(COMMON_OBJS)
	$(AR) rcs $@ $^

$(BUILD)/libserver.a: $(SERVER_OBJS)
	$(AR) rcs $@ $^

$(BUILD)/labd: $(BUILD)/server/main.o $(BUILD)/libserver.a $(SANDBOX_LIB) $(BUILD)/libcommon.a
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/tests/%: $(BUILD)/tests/unit/%.o $(BUILD)/libserver.a $(SANDBOX_LIB) $(BUILD)/libcommon.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS) -lcmocka

tests: all $(UNIT_BINS) $(SANDBOX_TEST_BINS)

# One libFuzzer harness per parser of untrusted bytes (tests/fuzz/). Built in
# build-fuzz by `make fuzz` and by the fuzz suite of `make test`.
$(BUILD)/tests/fuzz/%: $(BUILD)/tests/fuzz/%.o $(BUILD)/libserver.a $(SANDBOX_LIB) $(BUILD)/libcommon.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

fuzz-bins: $(FUZZ_BINS)

deps:
	@bash deploy/install-deps.sh

run: deps
	@$(MAKE) --no-print-directory all
	$(BUILD)/labd --demo

test: deps
	@$(MAKE) --no-print-directory tests lint check-layers
	@BUILD=$(BUILD) bash tests/run.sh

check: test

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

# Each harness for FUZZ_SECONDS (default 60) from its corpus; findings land in
# build-fuzz/findings/<name>/ (tests/fuzz/README.md says what to do with them).
FUZZ_SECONDS ?= 60
fuzz: deps
	@FUZZ_SECONDS=$(FUZZ_SECONDS) bash tests/fuzz/run.sh long

bench: deps all
	@bash bench/run.sh

install: all
	install -d $(DESTDIR)$(PREFIX)/sbin $(DESTDIR)$(PREFIX)/share/labd/web
	install -m 0755 $(BUILD)/labd $(DESTDIR)$(PREFIX)/sbin/labd
	$(if $(SANDBOX_CLI),install -D -m 0755 $(SANDBOX_CLI) $(DESTDIR)$(PREFIX)/bin/labbox)
	# the job agent, found by labd one folder up from sbin (supervisor/poollaunch.c)
	install -D -m 0755 $(BUILD)/libexec/labd-jobagent $(DESTDIR)$(PREFIX)/libexec/labd-jobagent
	cp -R web/. $(DESTDIR)$(PREFIX)/share/labd/web/
	install -d $(DESTDIR)/etc/labd
	test -e $(DESTDIR)/etc/labd/labd.ini || install -m 0640 deploy/labd.ini $(DESTDIR)/etc/labd/labd.ini
	install -D -m 0644 deploy/labd.service $(DESTDIR)/lib/systemd/system/labd.service

fmt:
	clang-format -i $$(git ls-files '*.c' '*.h')

# The include order of docs/architecture.md, and no store or HTTP in root-side
# code (tests/layers/run.sh proves it fails on planted violations).
check-layers: tests
	@bash tests/layers/check-layers.sh . $(BUILD)

# Banned functions (STYLE.md 10): unbounded copies and unchecked conversions. Then the
# naming rules of docs/architecture.md "Words" (guards, tags, exported prefixes from the
# built objects, periods' units; tests/lint/run.sh proves each check fails when broken).
lint: $(BUILD)/libserver.a $(BUILD)/libcommon.a $(SANDBOX_LIB)
	@! git grep -nE '\b(sprintf|vsprintf|strcpy|strcat|gets|atoi|atol)[[:space:]]*\(' -- '*.c' '*.h' \
	  || { echo "lint: banned function used" >&2; exit 1; }
	@bash tests/lint/check-words.sh . $(BUILD)

clean:
	rm -rf build build-asan build-fuzz

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
