# sandguard build. Targets:
#   make              build/sandguard (agent, exec, serve, events, policy, probe, ...)
#   make tests        the binary, the unit tests and the test helpers
#   make unit         build and run the unit tests (cmocka)
#   make integration  build and run the integration suites (root)
#   make check        = scripts/check.sh: install deps, build, run every test (CI)
#   make demo         = scripts/demo.sh: the main job, end to end
#   make vmtest       LSM mode on stock Debian kernels under qemu
#   make vmbench      the hook-overhead loops in LSM mode, in those VMs (by hand)
#   make check-asan   unit + integration tests under ASan/UBSan
#   make fuzz         libFuzzer targets, bounded (FUZZ_SECONDS)
#   make chaos        10,000 batches under kill -9 and restarts (CHAOS_BATCHES)
#   make bench        benchmarks (by hand; QUICK=1 for a short run)
#   make format       clang-format every C file in place (.clang-format)
#   make format-check list the files clang-format would change; fails if any
#   make deps         scripts/install-deps.sh
#   make clean        remove every build directory
#
# Layout: src/<component>/ holds each component's .c and .h side by side
# (docs/architecture.md has the map); include/abi/ holds the structs and
# constants the BPF programs and userspace share; src/agent/bpf/ the BPF
# programs. Sources include "<component>/x.h" across components.

CC      ?= gcc
CLANG   ?= clang
BPFTOOL ?= bpftool
LLVM_STRIP ?= llvm-strip
BUILD   ?= build
V       ?= 0
Q       := $(if $(filter 1,$(V)),,@)

ARCH := $(shell uname -m | sed -e 's/x86_64/x86/' -e 's/aarch64/arm64/')
BTF_VMLINUX ?= /sys/kernel/btf/vmlinux

# The version: `git describe` of a v* tag in a checkout; without tags, the
# VERSION file and the commit; without git, the VERSION file alone.
SG_VERSION := $(shell v=$$(cat VERSION); \
	git describe --tags --match 'v*' --dirty 2>/dev/null | sed 's/^v//' | grep . || \
	{ h=$$(git rev-parse --short HEAD 2>/dev/null) && echo "$$v-g$$h" || echo "$$v"; })

# Userspace flags. EXTRA_CFLAGS / EXTRA_LDFLAGS let check-asan and the
# static VM build reuse the same rules.
CFLAGS  ?= -O2 -g
# -Wno-format-truncation: as in the kernel's default warning set. Paths are
# joined into PATH_MAX buffers with snprintf; one that would not fit fails
# at open()/mkdir() with a message, which is the check that matters.
CFLAGS  += -std=gnu11 -Wall -Wextra -Wno-unused-parameter -D_GNU_SOURCE \
           -Iinclude -Isrc -I$(BUILD) -MMD -MP $(EXTRA_CFLAGS)
# libmicrohttpd is loaded when an HTTP server starts (src/lib/mhd_lazy.h).
# libbpf, libelf, zlib and jansson are linked in (their -dev packages ship
# the archives) and libm is not used, so the binary needs libc alone: every
# `sandguard exec`, a warm one included, starts without loading and
# relocating 5 more shared libraries (docs/performance.md, section 9).
# tests/stages/tree.sh checks it.
LDLIBS  := -Wl,-Bstatic -lbpf -lelf -lz -ljansson -lcrypto -Wl,-Bdynamic -lpthread
# -z now: every symbol is bound at the start, once, in the executor,
# rather than lazily in each forked init and main, where every first call
# of a libc function wrote the GOT (a copy-on-write page fault, tens of
# microseconds on this VM: init 35 -> 22 faults, main 27 -> 16; cold4 in
# docs/performance.md). It also makes the GOT read-only (full RELRO).
LDFLAGS += -Wl,-z,now,-z,relro $(EXTRA_LDFLAGS)

# (gcc only: clang has no such warning and would warn about the flag)
CFLAGS  += $(shell $(CC) -Werror -Wno-format-truncation -E -x c /dev/null >/dev/null 2>&1 && echo -Wno-format-truncation)

BPF_CFLAGS := -g -O2 -target bpf -mcpu=v3 -D__TARGET_ARCH_$(ARCH) -Wall \
              -Iinclude -I$(BUILD) -I/usr/include/$(shell uname -m)-linux-gnu

# Components, lowest layer first: a component includes only those before it
# (tests/stages/tree_layers.py checks this).
COMPONENTS := lib policy judge telemetry health sandbox interp control node artifact exec pool executor session serve agent cli

BPF_SRCS  := $(wildcard src/agent/bpf/*.bpf.c)
# The agent's objects are also built without fetching atomics, for kernels
# before 5.12 (src/agent/bpf/common.bpf.h, SG_BPF_COMPAT).
BPF_COMPAT := egress files tasks
BPF_OBJS  := $(patsubst src/agent/bpf/%.bpf.c,$(BUILD)/bpf/%.bpf.o,$(BPF_SRCS)) \
             $(patsubst %,$(BUILD)/bpf/%_compat.bpf.o,$(BPF_COMPAT))
SKELS     := $(patsubst $(BUILD)/bpf/%.bpf.o,$(BUILD)/%.skel.h,$(BPF_OBJS))
comp_objs  = $(patsubst src/%.c,$(BUILD)/obj/%.o,$(wildcard src/$(1)/*.c))
POLICY_BLOB := $(BUILD)/obj/policy/default_policy.o
INTERP_BLOB := $(BUILD)/obj/interp/interp_bootstrap.o
KERNEL_BLOB := $(BUILD)/obj/session/session_kernel_py.o
ALL_OBJS  := $(foreach c,$(COMPONENTS),$(call comp_objs,$(c))) $(POLICY_BLOB) $(INTERP_BLOB) $(KERNEL_BLOB)
# One archive per component: a test links the archives of what it tests,
# and the linker takes only the objects it needs from them.
comp_lib   = $(BUILD)/lib/libsg_$(1).a
libs_of    = $(foreach c,$(1),$(call comp_lib,$(c)))

UNIT_SRCS := $(wildcard tests/unit/test_*.c)
UNIT_BINS := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(UNIT_SRCS))
HELPER_SRCS := $(wildcard tests/helpers/*.c)
HELPER_LIB  := $(wildcard tests/helpers/lib/*.c)
HELPER_BINS := $(patsubst tests/helpers/%.c,$(BUILD)/tests/%,$(HELPER_SRCS))

# The components each unit test links (highest first), and nothing else:
# test_base64 builds without clang, bpftool or kernel BTF.
test_base64_LINK        := lib
test_sha256_LINK        := lib
test_fs_util_LINK       := lib
test_json_shape_LINK    := lib
test_node_idle_LINK     := lib
test_event_json_LINK    := telemetry lib
test_event_json_decode_LINK := telemetry lib
test_event_log_LINK     := telemetry lib
test_event_budget_LINK  := telemetry lib
test_event_stream_LINK  := telemetry lib
test_health_LINK        := health telemetry policy lib
test_detectors_LINK     := health telemetry policy lib
test_canary_LINK        := exec judge health telemetry policy lib
test_ledger_LINK        := telemetry policy lib
test_ledger_fleet_LINK  := telemetry policy lib
test_journal_LINK       := telemetry policy lib
test_fold_LINK          := telemetry policy lib
test_metrics_LINK       := telemetry lib
test_metrics_http_LINK  := telemetry lib
test_match_LINK         := policy lib
test_cgroup_mounts_LINK := lib
test_policy_LINK        := policy lib
test_policy_errors_LINK := policy lib
test_policy_bounds_LINK := policy lib
test_policy_locate_LINK := policy lib
test_scores_LINK        := judge lib
test_lcb_LINK           := judge lib
test_py_equal_LINK      := exec judge lib
test_tenant_state_LINK  := node policy lib
test_ticket_queue_LINK  := lib
test_executor_proto_LINK := executor pool exec node artifact judge interp sandbox control telemetry policy lib
test_pool_quiet_LINK    := pool lib
test_exec_input_LINK    := exec judge lib
test_exec_batch_LINK    := exec node artifact judge interp sandbox control telemetry policy lib
test_exec_result_LINK   := exec node artifact judge interp sandbox control telemetry policy lib
test_exec_verify_LINK   := exec node artifact judge interp sandbox control telemetry policy lib
test_verify_compile_LINK := exec node artifact judge interp sandbox control telemetry policy lib
test_exec_admission_LINK := exec node artifact judge interp sandbox control telemetry policy lib
test_exec_owed_LINK := exec node artifact judge interp sandbox control telemetry policy lib
test_artifact_LINK      := exec node artifact judge interp sandbox control telemetry policy lib
test_sandbox_LINK       := sandbox policy lib
test_sandbox_seccomp_LINK := sandbox policy lib
test_sandbox_enforcer_LINK := sandbox policy lib
test_serve_gate_LINK    := serve session executor pool exec node artifact judge interp sandbox control telemetry policy lib
test_serve_routes_LINK  := serve session executor pool exec node artifact judge interp sandbox control telemetry policy lib
test_serve_runcode_LINK := serve session executor pool exec node artifact judge interp sandbox control telemetry policy lib
test_serve_auth_LINK    := serve session executor pool exec node artifact judge interp sandbox control telemetry policy lib
test_run_build_cache_LINK := serve session executor pool exec node artifact judge interp sandbox control telemetry policy lib
test_control_LINK       := control lib
test_agent_client_LINK  := control lib
# Helpers drive the whole agent.
HELPER_LINK := agent control sandbox health telemetry policy lib

.SECONDARY:
.PHONY: all deps tools tests check unit integration demo vmtest vmbench check-asan fuzz chaos bench \
        format format-check clean
all: tools $(BUILD)/sandguard

# Say which tool is missing and how to get it, instead of a cryptic failure.
tools:
	@for t in $(CC):gcc $(CLANG):clang $(BPFTOOL):bpftool $(LLVM_STRIP):llvm pkg-config:pkg-config; do \
	  bin=$${t%%:*}; pkg=$${t##*:}; \
	  command -v $$bin >/dev/null 2>&1 || { echo "make: '$$bin' not found: run scripts/install-deps.sh (apt-get install $$pkg)" >&2; exit 1; }; \
	done
	@for l in libbpf:libbpf-dev jansson:libjansson-dev libmicrohttpd:libmicrohttpd-dev libelf:libelf-dev zlib:zlib1g-dev; do \
	  pc=$${l%%:*}; pkg=$${l##*:}; \
	  pkg-config --exists $$pc || { echo "make: library '$$pc' not found: run scripts/install-deps.sh (apt-get install $$pkg)" >&2; exit 1; }; \
	done
	@test -r $(BTF_VMLINUX) || test -r include/vmlinux/$(ARCH)/vmlinux.h || \
	  { echo "make: no kernel BTF at $(BTF_VMLINUX) and no include/vmlinux/$(ARCH)/vmlinux.h: build on a kernel with CONFIG_DEBUG_INFO_BTF=y" >&2; exit 1; }

deps:
	$(Q)scripts/install-deps.sh

# vmlinux.h: generated from the running kernel's BTF (CO-RE relocates it on
# other kernels); a checked-in per-arch copy is used where there is no BTF.
$(BUILD)/vmlinux.h:
	$(Q)mkdir -p $(BUILD)
	$(Q)if [ -r $(BTF_VMLINUX) ]; then $(BPFTOOL) btf dump file $(BTF_VMLINUX) format c > $@.tmp; \
	    else cp include/vmlinux/$(ARCH)/vmlinux.h $@.tmp; fi && mv $@.tmp $@

# DWARF is stripped (llvm-strip -g): libbpf needs only .BTF and .BTF.ext,
# and the skeletons embed each object in the binary.
$(BUILD)/bpf/%.bpf.o: src/agent/bpf/%.bpf.c $(BUILD)/vmlinux.h $(wildcard src/agent/bpf/*.h) $(wildcard include/abi/*.h)
	@echo "  BPF     $@"
	$(Q)mkdir -p $(@D)
	$(Q)$(CLANG) $(BPF_CFLAGS) -c $< -o $@.tmp && $(LLVM_STRIP) -g $@.tmp && mv $@.tmp $@

$(BUILD)/bpf/%_compat.bpf.o: src/agent/bpf/%.bpf.c $(BUILD)/vmlinux.h $(wildcard src/agent/bpf/*.h) $(wildcard include/abi/*.h)
	@echo "  BPF     $@"
	$(Q)mkdir -p $(@D)
	$(Q)$(CLANG) $(BPF_CFLAGS) -DSG_BPF_COMPAT -c $< -o $@.tmp && $(LLVM_STRIP) -g $@.tmp && mv $@.tmp $@

$(BUILD)/%.skel.h: $(BUILD)/bpf/%.bpf.o
	@echo "  SKEL    $@"
	$(Q)$(BPFTOOL) gen skeleton $< > $@.tmp && mv $@.tmp $@

# Only the agent's loaders include skeletons; nothing else waits for clang.
$(call comp_objs,agent): | $(SKELS)

# build/version.h is rewritten only when the version changes, so that
# only the files that print it are rebuilt.
$(BUILD)/version.h: FORCE
	$(Q)mkdir -p $(@D)
	$(Q)echo '#define SG_VERSION "$(SG_VERSION)"' > $@.tmp; \
	  if cmp -s $@.tmp $@; then rm $@.tmp; else mv $@.tmp $@; fi
FORCE:
$(call comp_objs,cli) $(call comp_objs,agent): | $(BUILD)/version.h

$(BUILD)/obj/%.o: src/%.c
	@echo "  CC      $@"
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) -c $< -o $@

# The embedded default policy: policies/default.json linked into the binary.
$(POLICY_BLOB): src/policy/default_policy.S policies/default.json
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) -c $< -o $@

# The interpreter forkserver's bootstrap: src/interp/interp_bootstrap.py, likewise.
$(INTERP_BLOB): src/interp/interp_bootstrap.S src/interp/interp_bootstrap.py
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) -c $< -o $@

# A session's Python kernel: src/session/session_kernel.py, likewise.
$(KERNEL_BLOB): src/session/session_kernel.S src/session/session_kernel.py
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) -c $< -o $@

$(BUILD)/lib/libsg_%.a:
	@echo "  AR      $@"
	$(Q)mkdir -p $(@D)
	$(Q)rm -f $@ && ar rcs $@ $^
$(foreach c,$(COMPONENTS),$(eval $(call comp_lib,$(c)): $(call comp_objs,$(c))))
$(call comp_lib,policy): $(POLICY_BLOB)
$(call comp_lib,interp): $(INTERP_BLOB)
$(call comp_lib,session): $(KERNEL_BLOB)

$(BUILD)/sandguard: $(ALL_OBJS)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

.SECONDEXPANSION:
$(BUILD)/tests/test_%: tests/unit/test_%.c $$(call libs_of,$$(test_$$*_LINK))
	@echo "  TEST    $@"
	$(Q)test -n "$(test_$*_LINK)" || { echo "make: no test_$*_LINK line in the Makefile: list the components test_$* links" >&2; exit 1; }
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) -o $@ $< -Wl,--start-group $(call libs_of,$(test_$*_LINK)) -Wl,--end-group \
	  $(LDFLAGS) $(LDLIBS) -lcmocka -lm

$(BUILD)/tests/%: tests/helpers/%.c $(HELPER_LIB) $(call libs_of,$(HELPER_LINK))
	@echo "  HELPER  $@"
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) -Itests/helpers/lib -o $@ $< $(HELPER_LIB) \
	  -Wl,--start-group $(call libs_of,$(HELPER_LINK)) -Wl,--end-group $(LDFLAGS) $(LDLIBS)

unit: all $(UNIT_BINS)
	$(Q)tests/run-unit.sh $(BUILD)

integration: all $(UNIT_BINS) $(HELPER_BINS)
	$(Q)tests/run-integration.sh $(BUILD)

# Everything the test stages run.
tests: all $(UNIT_BINS) $(HELPER_BINS)

# The README's two commands, for those who already have make.
check:
	$(Q)scripts/check.sh

demo:
	$(Q)scripts/demo.sh

vmtest: deps
	$(Q)scripts/vmtest/run.sh

vmbench: deps
	$(Q)VMTEST_PAYLOAD=bench VMTEST_KERNELS="$${VMTEST_KERNELS:-bookworm trixie}" scripts/vmtest/run.sh

check-asan:
	$(Q)$(MAKE) --no-print-directory BUILD=build-asan CC=clang \
	  EXTRA_CFLAGS="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all" \
	  EXTRA_LDFLAGS="-fsanitize=address,undefined" all $(patsubst $(BUILD)/%,build-asan/%,$(UNIT_BINS) $(HELPER_BINS))
	$(Q)SANDGUARD_ASAN=1 tests/run-unit.sh build-asan; u=$$?; \
	  SANDGUARD_ASAN=1 tests/run-integration.sh build-asan && [ $$u -eq 0 ]

check-asan: export ASAN_OPTIONS ?= detect_leaks=1:halt_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1
check-asan: export UBSAN_OPTIONS ?= halt_on_error=1:print_stacktrace=1

fuzz:
	$(Q)scripts/fuzz.sh $(FUZZ_SECONDS)

# The chaos run at full size (CI runs a few hundred batches): kill -9 of
# the agent, executors and serve, restarts and reloads during 10,000
# batches; every batch booked once, nothing left behind.
CHAOS_BATCHES ?= 10000
chaos: tests
	$(Q)CHAOS_BATCHES=$(CHAOS_BATCHES) tests/stages/chaos.sh $(BUILD)

bench: deps
	$(Q)scripts/install-deps.sh --bench
	$(Q)$(MAKE) --no-print-directory all
	$(Q)scripts/bench/run.sh $(if $(QUICK),--quick)

C_FILES = $(shell git ls-files '*.c' '*.h' 2>/dev/null || find src include tests scripts -name '*.[ch]')
format:
	$(Q)clang-format -i $(C_FILES)

format-check:
	$(Q)bad=$$(for f in $(C_FILES); do clang-format --dry-run -Werror $$f >/dev/null 2>&1 || echo $$f; done); \
	  if [ -n "$$bad" ]; then echo "format-check: not formatted (run make format):" $$bad >&2; exit 1; fi

clean:
	rm -rf build build-asan build-static build-fuzz build-werror

-include $(ALL_OBJS:.o=.d)
