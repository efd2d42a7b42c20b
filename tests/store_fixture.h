/* store_fixture.h - for tests that fill a store as the coordinator does:
 * the end of a job's first attempt, its result (parsed from a result
 * record, as the coordinator stores one) and the job's end, committed.
 * Include after check.h, store.h and record.h. */
#ifndef GB_TESTS_STORE_FIXTURE_H
#define GB_TESTS_STORE_FIXTURE_H

#include <string.h>

/* Job `id` (attempt 1, run by `agent`) ends in `state` ("done" or another
 * end) at `now`, with the result `record` (NULL: none stored), inside the
 * caller's open transaction, which this commits. */
static inline void gb_test_job_end(gb_store_t *st, uint64_t id, const char *agent, const char *kind,
                                   const char *state, const char *record, const char *now) {
    int ok = strcmp(state, "done") == 0;
    if (record) {
        gb_record_t r;
        char err[300];
        CHECKF(gb_record_parse(record, strlen(record), kind, &r, err, sizeof err) == 0, "%s: %s",
               record, err);
        gb_store_result_t res = {.job_id = id,
                                 .attempt = 1,
                                 .agent_id = agent,
                                 .status = ok ? "ok" : "failed",
                                 .kind = kind,
                                 .backend = r.backend,
                                 .device_model = r.device_model,
                                 .precision = r.precision,
                                 .n_devices = r.n_devices,
                                 .images_per_sec = r.images_per_sec,
                                 .step_ms_median = r.step_ms_median,
                                 .step_ms_p90 = r.step_ms_p90,
                                 .gflops = r.gflops,
                                 .valid = r.valid,
                                 .record = record,
                                 .exit_code = 0};
        int inserted;
        CHECK(gb_store_result_insert(st, &res, now, &inserted) == 0 && inserted);
        gb_record_free(&r);
    }
    CHECK(gb_store_attempt_end(st, id, 1, ok ? "done" : "failed", NULL, now) == 0);
    CHECK(gb_store_job_finish(st, id, state, NULL, now) == 0);
    CHECK(gb_store_commit(st) == 0);
}

#endif
