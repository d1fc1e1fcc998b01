EXTENSION = job_state
MODULE_big = job_state
OBJS = \
	src/job_state.o \
	src/spi.o \
	src/token.o \
	src/fsm.o \
	src/event.o \
	src/rowwrite.o \
	src/submit.o \
	src/claim.o \
	src/claim_mark.o \
	src/take.o \
	src/lease.o \
	src/complete.o \
	src/retry.o \
	src/budget.o \
	src/fence.o \
	src/queue.o \
	src/queue_trigger.o \
	src/resource.o \
	src/bucket.o \
	src/sweeper.o \
	src/notify.o \
	src/worker.o \
	src/cron.o \
	src/schedule.o \
	src/purge.o \
	src/operation.o \
	src/limits.o \
	src/slot.o \
	src/drop_guard.o

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
