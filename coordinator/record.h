/* record.h - check a result record (docs/result-record.md) that arrived in
 * a Result and pull out the columns the store and its views need. A pure
 * function of the JSON text, so it is tested and fuzzed without sockets.
 * The record must be a JSON object whose "kind" is the job's kind; known
 * keys must have their documented types and sane ranges (finite,
 * non-negative figures; sample arrays of numbers of equal length; the
 * telemetry rows and summaries the store's trigger and views read). */
#ifndef GB_COORD_RECORD_H
#define GB_COORD_RECORD_H

#include <stddef.h>

#define GB_RECORD_MAX_SAMPLES 100000
#define GB_RECORD_MAX_SIZES   4096 /* allreduce message sizes in one record */
#define GB_RECORD_MAX_TM_ROWS 4096 /* telemetry sample rows (the agent keeps at most 2048) */
#define GB_RECORD_MAX_GPUS    64   /* GPUs of one telemetry summary */

typedef struct gb_record {
    void *root; /* the parsed cJSON; the strings below point into it */
    char *text; /* root printed again: the record as stored (valid JSON to SQLite too) */
    const char *backend, *device_model, *precision, *invalid_reason;
    int n_devices;                                              /* -1 when absent */
    int valid;                                                  /* -1 when absent, else 0/1 */
    double images_per_sec, step_ms_median, step_ms_p90, gflops; /* NaN when absent */
    double *step_ms, *loss; /* n_samples each (loss may be NULL); malloc'd */
    size_t n_samples;
    int samples_stride; /* steps per sample (the record's samples_stride, else 1) */
} gb_record_t;

/* 0 with out filled (release with gb_record_free), or -1 with the reason. */
int gb_record_parse(const char *json, size_t len, const char *kind, gb_record_t *out, char *err,
                    size_t errlen);
void gb_record_free(gb_record_t *r);

/* A multi-node job's row is valid only if every rank's record is
 * (docs/telemetry.md). One rank's verdict: its record's `valid` (-1 when
 * it says none) and `invalid_reason`, and the node it ran on. */
typedef struct gb_rank_verdict {
    int rank;
    const char *node;
    int valid;                  /* -1, 0, 1 */
    const char *invalid_reason; /* NULL: none given */
} gb_rank_verdict_t;

/* The row's reason is at most this long (NUL included): the ranks that fit,
 * then how many more were invalid. */
#define GB_RECORD_FOLD_MAX 2048

/* The job row's `valid` from its ranks' verdicts v[0..n) (v[0] rank 0's,
 * whose record is the row's): 0 when any rank's is 0, else rank 0's (-1
 * when it says none). When it is 0, out holds the row's invalid_reason:
 * rank 0's own reason, unchanged, when only rank 0 is invalid; otherwise
 * every invalid rank in rank order, "rank R on NODE: REASON" joined by
 * "; ", as many as fit in outlen, then "; and K more invalid rank(s)".
 * Otherwise out is "". */
int gb_record_fold_valid(const gb_rank_verdict_t *v, size_t n, char *out, size_t outlen);

#endif
