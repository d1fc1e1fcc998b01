EXTENSION = job_state
MODULE_big = job_state
OBJS = \
	src/init.o \
	src/dispatch.o \
	src/job_state.o \
	src/spi.o \
	src/token.o \
	src/timeline.o \
	src/durability.o \
	src/fsm.o \
	src/job_trigger.o \
	src/event.o \
	src/rowwrite.o \
	src/rowindex.o \
	src/submit.o \
	src/claim.o \
	src/claim_mark.o \
	src/lease_floor.o \
	src/frontier.o \
	src/take.o \
	src/claim_limited.o \
	src/lease.o \
	src/complete.o \
	src/callback.o \
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
	src/waiter.o \
	src/wait.o \
	src/bgworker.o \
	src/cron.o \
	src/schedule.o \
	src/purge.o \
	src/retention.o \
	src/operation.o \
	src/ref.o \
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

# each object's own headers (PGXS does not track them): a header change
# rebuilds exactly the objects that include it, directly or through
# another header
src/init.o: src/job_state.h src/errcodes.h src/claim_mark.h src/frontier.h src/bgworker.h src/waiter.h
src/dispatch.o: src/dispatch.h
src/job_state.o: src/job_state.h src/errcodes.h
src/spi.o: src/job_state.h src/errcodes.h
src/token.o: src/job_state.h src/errcodes.h src/tables.h src/token.h src/acl.h src/frontier.h src/dispatch.h
src/fsm.o: src/job_state.h src/errcodes.h src/tables.h src/rules.h src/slots.h src/frontier.h
src/job_trigger.o: src/job_state.h src/errcodes.h src/tables.h src/rules.h src/slots.h src/frontier.h src/waiter.h
src/event.o: src/job_state.h src/errcodes.h src/tables.h src/rowwrite.h src/rules.h src/frontier.h
src/rowwrite.o: src/job_state.h src/errcodes.h src/rowwrite.h src/rowindex.h src/dispatch.h
src/rowindex.o: src/job_state.h src/errcodes.h src/rowindex.h src/dispatch.h
src/submit.o: src/job_state.h src/errcodes.h src/tables.h src/rowwrite.h src/rules.h src/acl.h src/bgworker.h src/frontier.h
src/claim.o: src/job_state.h src/errcodes.h src/tables.h src/rules.h src/take.h src/claim_mark.h src/frontier.h src/token.h src/acl.h
src/claim_mark.o: src/job_state.h src/errcodes.h src/claim_mark.h src/frontier.h src/dispatch.h
src/lease_floor.o: src/job_state.h src/errcodes.h src/lease_floor.h
src/frontier.o: src/job_state.h src/errcodes.h src/frontier.h src/dispatch.h
src/take.o: src/job_state.h src/errcodes.h src/tables.h src/rowwrite.h src/rules.h src/take.h src/claim_mark.h src/frontier.h src/token.h src/lease_floor.h
src/claim_limited.o: src/job_state.h src/errcodes.h src/tables.h src/slots.h src/take.h src/claim_mark.h src/frontier.h
src/lease.o: src/job_state.h src/errcodes.h src/tables.h src/rules.h src/frontier.h
src/complete.o: src/job_state.h src/errcodes.h src/tables.h src/rowwrite.h src/rules.h src/token.h src/frontier.h
src/callback.o: src/job_state.h src/errcodes.h src/tables.h src/rowwrite.h src/token.h src/frontier.h
src/operator.o: src/job_state.h src/errcodes.h src/tables.h src/rowwrite.h src/rules.h src/acl.h src/frontier.h
src/retry.o: src/job_state.h src/errcodes.h src/tables.h src/rules.h src/frontier.h
src/budget.o: src/job_state.h src/errcodes.h src/tables.h src/rules.h src/token.h src/frontier.h
src/meter.o: src/job_state.h src/errcodes.h src/tables.h src/rules.h src/frontier.h
src/fence.o: src/job_state.h src/errcodes.h src/rowwrite.h src/token.h
src/queue.o: src/job_state.h src/errcodes.h src/acl.h
src/queue_trigger.o: src/job_state.h src/errcodes.h src/tables.h src/slots.h src/frontier.h
src/resource.o: src/job_state.h src/errcodes.h src/tables.h src/slots.h src/frontier.h
src/bucket.o: src/job_state.h src/errcodes.h src/tables.h src/rowwrite.h src/slots.h src/frontier.h
src/sweeper.o: src/job_state.h src/errcodes.h src/tables.h src/rules.h src/cron.h src/bgworker.h src/frontier.h src/take.h src/claim_mark.h src/lease_floor.h
src/notify.o: src/job_state.h src/errcodes.h src/bgworker.h src/waiter.h src/dispatch.h
src/bgworker.o: src/job_state.h src/errcodes.h src/bgworker.h
src/waiter.o: src/job_state.h src/errcodes.h src/waiter.h src/dispatch.h
src/wait.o: src/job_state.h src/errcodes.h src/tables.h src/frontier.h src/acl.h src/waiter.h
src/cron.o: src/job_state.h src/errcodes.h src/cron.h
src/schedule.o: src/job_state.h src/errcodes.h src/acl.h src/cron.h
src/purge.o: src/job_state.h src/errcodes.h src/tables.h src/acl.h src/frontier.h
src/operation.o: src/job_state.h src/errcodes.h src/token.h
src/limits.o: src/job_state.h src/errcodes.h src/tables.h src/slots.h src/frontier.h
src/slot.o: src/job_state.h src/errcodes.h src/tables.h src/rowwrite.h src/slots.h src/frontier.h
src/namecheck.o: src/job_state.h src/errcodes.h
src/drop_guard.o: src/job_state.h src/errcodes.h
src/acl.o: src/job_state.h src/errcodes.h src/tables.h src/rowwrite.h src/acl.h src/frontier.h
src/util.o: src/job_state.h src/errcodes.h
src/tables.o: src/job_state.h src/errcodes.h src/tables.h src/rowwrite.h src/frontier.h src/lease_floor.h src/dispatch.h

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
