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

#endif
