EXTENSION = job_state
MODULE_big = job_state
OBJS = \
	src/job_state.o \
	src/spi.o \
	src/token.o \
	src/fsm.o \
	src/job_trigger.o \
	src/event.o \
	src/rowwrite.o \
	src/submit.o \
	src/claim.o \
	src/claim_mark.o \
	src/take.o \
	src/claim_limited.o \
	src/lease.o \
	src/complete.o \
	src/operator.o \
	src/retry.o \
	src/budget.o \
	src/meter.o \
	src/fence.o \
	src/queue.o \
	src/queue_trigger.o \
	src/resource.o \
	src/bucket.o \
	src/sweeper.o \
	src/notify.o \
	src/bgworker.o \
	src/cron.o \
	src/schedule.o \
	src/purge.o \
	src/operation.o \
	src/limits.o \
	src/slot.o \
	src/namecheck.o \
	src/drop_guard.o \
	src/acl.o \
	src/util.o \
	src/tables.o

DATA = $(wildcard sql/$(EXTENSION)--*.sql)

TESTS = $(wildcard test/sql/*.sql)
REGRESS = $(patsubst test/sql/%.sql,%,$(TESTS))
REGRESS_OPTS = --inputdir=test --load-extension=$(EXTENSION)

ISOLATION = $(patsubst test/specs/%.spec,%,$(wildcard test/specs/*.spec))
ISOLATION_OPTS = --inputdir=test --load-extension=$(EXTENSION)

TAP_TESTS = 1
PROVE_TESTS = test/t/*.pl

PG_CFLAGS += -Wall -Wmissing-prototypes -Wpointer-arith -Wendif-labels
ifdef WERROR
PG_CFLAGS += -Werror -Wextra -Wno-unused-parameter -Wno-sign-compare -Wno-missing-field-initializers
endif

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# every object includes the shared header (PGXS does not track headers)
$(OBJS): src/job_state.h src/errcodes.h

# ---- release archive for PGXN --------------------------------------------
# make dist: job_state-<version>.zip of the files tracked in git at HEAD,
# under a job_state-<version>/ prefix; the version is the control file's
# default_version.  It needs a git checkout with no uncommitted changes to
# tracked files (the archive is HEAD, not the working tree), and META.json
# must carry the same version.
EXTVERSION := $(shell sed -n "s/^[[:space:]]*default_version[[:space:]]*=[[:space:]]*'\([^']*\)'.*/\1/p" $(EXTENSION).control)
DISTNAME = $(EXTENSION)-$(EXTVERSION)

.PHONY: dist
dist:
	@test -n "$(EXTVERSION)" || \
		{ echo "make dist: no default_version in $(EXTENSION).control" >&2; exit 1; }
	@test "$$(git rev-parse --show-toplevel 2>/dev/null)" = "$(CURDIR)" || \
		{ echo "make dist: $(CURDIR) is not the top of a git checkout; the archive is made from the files git tracks (git archive HEAD)" >&2; exit 1; }
	@git diff --quiet HEAD -- || \
		{ echo "make dist: tracked files have uncommitted changes; commit them first (the archive is HEAD)" >&2; exit 1; }
	@bad=$$(sed -n 's/^[[:space:]]*"version"[[:space:]]*:[[:space:]]*"\([^"]*\)".*/\1/p' META.json | grep -vx '$(EXTVERSION)'); \
		test -z "$$bad" || \
		{ echo "make dist: META.json has version $$bad, $(EXTENSION).control says $(EXTVERSION)" >&2; exit 1; }
	git archive --format zip --prefix $(DISTNAME)/ --output $(DISTNAME).zip HEAD
	@echo "make dist: wrote $(DISTNAME).zip"
