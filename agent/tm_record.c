/* tm_record.c - the pure half of telemetry.h: which clocks-event reasons
 * count as throttling, CPU contention over a window, and the amendment of a
 * result record with the samples of its timed window. No threads, no NVML,
 * no files: everything here is a function of its arguments.
 *
 * The record's "telemetry" object (docs/result-record.md):
 *   source        "nvml" (GPU job) or "proc" (CPU job)
 *   interval_ms   between samples
 *   window_ms     [start, end] the samples were cut to, or null (no window:
 *                 every sample of the job)
 *   columns, samples   the kept rows, t_ms counted from the window's start
 *   kept_every    k: each row is the first of k consecutive samples (of its
 *                 GPU), its reasons the union of theirs
 *   gpus / cpu    the summary over every sample of the window
 *   throttled, reasons, reason_names, throttle_names   (GPU)
 *   flag          a short line when the window is the reason the result is
 *                 invalid or flagged, else null
 *   error         why the telemetry is incomplete, or null */
#define _POSIX_C_SOURCE 200809L
#include "telemetry.h"

#include "gb_util.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    uint64_t bit;
    const char *name;
} reason_table[] = {
    {GB_TM_REASON_GPU_IDLE, "gpu_idle"},
    {GB_TM_REASON_APP_CLOCKS, "applications_clocks_setting"},
    {GB_TM_REASON_SW_POWER_CAP, "sw_power_cap"},
    {GB_TM_REASON_HW_SLOWDOWN, "hw_slowdown"},
    {GB_TM_REASON_SYNC_BOOST, "sync_boost"},
    {GB_TM_REASON_SW_THERMAL, "sw_thermal_slowdown"},
    {GB_TM_REASON_HW_THERMAL, "hw_thermal_slowdown"},
    {GB_TM_REASON_HW_POWER_BRAKE, "hw_power_brake_slowdown"},
    {GB_TM_REASON_DISPLAY_CLOCKS, "display_clock_setting"},
};

const char *gb_tm_reason_name(uint64_t bit) {
    for (size_t i = 0; i < sizeof reason_table / sizeof reason_table[0]; i++)
        if (reason_table[i].bit == bit) return reason_table[i].name;
    return NULL;
}

/* The name of bit b into buf (a table name, or unknown_0x...). */
static const char *bit_name(int b, char *buf, size_t len) {
    const char *n = gb_tm_reason_name(1ULL << b);
    if (n) return n;
    snprintf(buf, len, "unknown_0x%" PRIx64, (uint64_t)1 << b);
    return buf;
}

void gb_tm_reason_names(uint64_t reasons, char *out, size_t len) {
    if (!len) return;
    out[0] = '\0';
    int total = 0, done = 0;
    for (int b = 0; b < 64; b++)
        total += (reasons >> b) & 1;
    size_t o = 0;
    for (int b = 0; b < 64; b++) {
        if (!(reasons & (1ULL << b))) continue;
        char unk[32];
        const char *name = bit_name(b, unk, sizeof unk);
        /* room for this name, and for ", +NN more" if others follow */
        size_t need = (o ? 2 : 0) + strlen(name) + (done + 1 < total ? 10 : 0);
        if (o + need >= len) { /* whole names only, and how many are left out */
            snprintf(out + o, len - o, "%s+%d more", o ? ", " : "", total - done);
            return;
        }
        o += (size_t)snprintf(out + o, len - o, "%s%s", o ? ", " : "", name);
        done++;
    }
}

uint64_t gb_tm_throttle_bits(uint64_t reasons, unsigned limit_mw, unsigned default_mw) {
    const uint64_t benign = GB_TM_REASON_GPU_IDLE | GB_TM_REASON_APP_CLOCKS |
                            GB_TM_REASON_DISPLAY_CLOCKS | GB_TM_REASON_SW_POWER_CAP;
    uint64_t bits = reasons & ~benign;
    if ((reasons & GB_TM_REASON_SW_POWER_CAP) && limit_mw && default_mw && limit_mw < default_mw)
        bits |= GB_TM_REASON_SW_POWER_CAP;
    return bits;
}

void gb_tm_cpu_window(const gb_tm_cpu_sample_t *s, size_t n, int64_t start_ms, int64_t end_ms,
                      gb_tm_cpu_window_t *out) {
    memset(out, 0, sizeof *out);
    long a = -1, b = -1;
    for (size_t i = 0; i < n; i++)
        if (s[i].have_worker && s[i].t_ms <= start_ms) a = (long)i;
    for (size_t i = 0; a < 0 && i < n; i++)
        if (s[i].have_worker && s[i].t_ms >= start_ms) a = (long)i;
    for (size_t i = 0; i < n; i++)
        if (s[i].have_worker && s[i].t_ms >= end_ms) {
            b = (long)i;
            break;
        }
    for (size_t i = n; b < 0 && i-- > 0;)
        if (s[i].have_worker && s[i].t_ms <= end_ms) b = (long)i;
    if (a < 0 || b <= a) return;
    const gb_tm_cpu_sample_t *x = &s[a], *y = &s[b];
    if (y->total <= x->total || y->busy < x->busy || y->steal < x->steal || y->worker < x->worker)
        return; /* no time passed, or counters that went backwards */
    double total = (double)(y->total - x->total);
    double busy = (double)(y->busy - x->busy), worker = (double)(y->worker - x->worker);
    double others = busy > worker ? busy - worker : 0;
    out->ok = 1;
    out->span_ms = y->t_ms - x->t_ms;
    out->covers = x->t_ms <= start_ms && y->t_ms >= end_ms;
    out->others_pct = 100.0 * others / total;
    out->steal_pct = 100.0 * (double)(y->steal - x->steal) / total;
    out->taken_pct = out->others_pct + out->steal_pct;
    out->worker_pct = 100.0 * worker / total;
    out->ticks = y->total - x->total;
    out->from = (size_t)a;
    out->to = (size_t)b;
}

/* ---- helpers -------------------------------------------------------------- */

static double round1(double x) {
    return round(x * 10.0) / 10.0;
}

/* Decimals that show x (a share over limit) above the limit: "10.0% ...,
 * limit 10%" was the reason a 10.04% window was invalid. */
static int over_digits(double x, double limit) {
    int d = 1;
    for (double scale = 10.0; d < 4 && round(x * scale) / scale <= limit; scale *= 10.0)
        d++;
    return d;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* {"min", "median", "max"} of v[0..n-1] (sorted in place); null when n = 0.
 * The median of an even count is the mean of the middle two. */
static cJSON *stats(double *v, size_t n) {
    if (n == 0) return cJSON_CreateNull();
    qsort(v, n, sizeof *v, cmp_double);
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    double med = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    cJSON_AddNumberToObject(o, "min", v[0]);
    cJSON_AddNumberToObject(o, "median", med);
    cJSON_AddNumberToObject(o, "max", v[n - 1]);
    return o;
}

/* A reasons mask as a JSON number: a double holds 53 bits exactly, and the
 * coordinator refuses more (a driver's bit 63, "unknown", failed the job
 * and lost its figures). Bits 52 and up are folded into bit 52; the names
 * and the verdict are drawn from the whole mask. */
static double reasons_num(uint64_t r) {
    const uint64_t top = 1ULL << 52;
    return (double)(r >= top ? (r & (top - 1)) | top : r);
}

static cJSON *names_array(uint64_t reasons) {
    cJSON *a = cJSON_CreateArray();
    for (int b = 0; a && b < 64; b++)
        if (reasons & (1ULL << b)) {
            char unk[32];
            cJSON_AddItemToArray(a, cJSON_CreateString(bit_name(b, unk, sizeof unk)));
        }
    return a;
}

static void set_item(cJSON *o, const char *key, cJSON *v) {
    if (cJSON_GetObjectItemCaseSensitive(o, key))
        cJSON_ReplaceItemInObjectCaseSensitive(o, key, v);
    else
        cJSON_AddItemToObject(o, key, v);
}

/* Append to a fixed buffer, truncating. */
static void app(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void app(char *buf, size_t len, const char *fmt, ...) {
    size_t o = strlen(buf);
    if (o + 1 >= len) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf + o, len - o, fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n >= len - o && len >= 4) /* cut: say so */
        memcpy(buf + len - 4, "...", 4);
}

/* ---- GPU ------------------------------------------------------------------ */

typedef struct gpu_acc {
    size_t n, throttled, judged; /* judged: samples with reasons */
    uint64_t reasons, throttle;
    unsigned min_limit_mw;
} gpu_acc_t;

/* Whether the first (last) of the samples s stands for, of those with
 * reasons, had HW slowdown. */
static int slow_first(const gb_tm_gpu_sample_t *s) {
    return s->have & GB_TM_FOLDED ? !!(s->have & GB_TM_SLOW_FIRST)
                                  : !!(s->reasons & GB_TM_REASON_HW_SLOWDOWN);
}
static int slow_last(const gb_tm_gpu_sample_t *s) {
    return s->have & GB_TM_FOLDED ? !!(s->have & GB_TM_SLOW_LAST)
                                  : !!(s->reasons & GB_TM_REASON_HW_SLOWDOWN);
}

void gb_tm_fold(gb_tm_gpu_sample_t *x, const gb_tm_gpu_sample_t *y) {
    int xr = !!(x->have & GB_TM_HAVE_REASONS), yr = !!(y->have & GB_TM_HAVE_REASONS);
    int first = xr ? slow_first(x) : yr && slow_first(y);
    int last = yr ? slow_last(y) : xr && slow_last(x);
    /* a run: the two touch with slowdown on both sides, or y held one */
    if ((xr && yr && slow_last(x) && slow_first(y)) || (y->have & GB_TM_SLOWDOWN_RUN))
        x->have |= GB_TM_SLOWDOWN_RUN;
    x->reasons |= y->reasons;
    x->have = (x->have & ~(unsigned)(GB_TM_SLOW_FIRST | GB_TM_SLOW_LAST)) | GB_TM_FOLDED |
              (first ? GB_TM_SLOW_FIRST : 0) | (last ? GB_TM_SLOW_LAST : 0) |
              (y->have & GB_TM_HAVE_REASONS);
}

/* nvml.h of HW slowdown (clocks cut by half or more): "May be also
 * reported during PState or clock change". One sample of it alone (at
 * 100 ms) is such a change as likely as a slowdown, and invalidated a
 * healthy GPU's result; it counts with a hardware thermal or power-brake
 * reason in the same sample, or in the sample before or after it of the
 * same GPU (in[] sorted by (gpu, t), samples with reasons only). */
static int lone_slowdown_backed(const gb_tm_gpu_sample_t *const *in, size_t n, size_t i) {
    const uint64_t hw = GB_TM_REASON_HW_THERMAL | GB_TM_REASON_HW_POWER_BRAKE;
    if ((in[i]->reasons & hw) || (in[i]->have & GB_TM_SLOWDOWN_RUN)) return 1;
    for (int dir = -1; dir <= 1; dir += 2)
        for (size_t k = i;;) {
            if (dir < 0 ? k == 0 : k + 1 >= n) break;
            k = dir < 0 ? k - 1 : k + 1;
            if (in[k]->gpu != in[i]->gpu) break;
            if (!(in[k]->have & GB_TM_HAVE_REASONS)) continue;
            /* where the two touch: k's last before i, k's first after it */
            if (dir < 0 ? slow_last(in[k]) && slow_first(in[i])
                        : slow_last(in[i]) && slow_first(in[k]))
                return 1;
            break;
        }
    return 0;
}

static int cmp_row(const void *a, const void *b) {
    const gb_tm_gpu_sample_t *x = *(const gb_tm_gpu_sample_t *const *)a,
                             *y = *(const gb_tm_gpu_sample_t *const *)b;
    if (x->gpu != y->gpu) return x->gpu < y->gpu ? -1 : 1;
    return (x->t_ms > y->t_ms) - (x->t_ms < y->t_ms);
}

/* The rows of the kept samples, decimated by k: each row the first sample
 * of k consecutive ones of its GPU, with their reasons' union. in[] is
 * sorted by (gpu, t). A row at the same ms as its GPU's previous one, or
 * before t0 (the wall clock stepped back during the job), is left out, so
 * t_ms is >= 0 and rises strictly within a GPU as the store's key needs. */
static cJSON *gpu_rows(const gb_tm_gpu_sample_t *const *in, size_t n, size_t k, int64_t t0) {
    cJSON *rows = cJSON_CreateArray();
    size_t i = 0;
    unsigned last_gpu = ~0u;
    int64_t last_t = -1;
    while (rows && i < n) {
        const gb_tm_gpu_sample_t *s = in[i];
        uint64_t reasons = 0;
        unsigned have_r = 0;
        size_t j = i;
        for (; j < n && j < i + k && in[j]->gpu == s->gpu; j++) {
            reasons |= in[j]->reasons;
            have_r |= in[j]->have & GB_TM_HAVE_REASONS;
        }
        if (s->t_ms - t0 < 0 || (s->gpu == last_gpu && s->t_ms - t0 <= last_t)) {
            i = j;
            continue;
        }
        last_gpu = s->gpu;
        last_t = s->t_ms - t0;
        cJSON *r = cJSON_CreateArray();
        if (!r) {
            cJSON_Delete(rows);
            return NULL;
        }
#define NUM_OR_NULL(flag, v)                                                                       \
    cJSON_AddItemToArray(r, (s->have & (flag)) ? cJSON_CreateNumber(v) : cJSON_CreateNull())
        cJSON_AddItemToArray(r, cJSON_CreateNumber(s->gpu));
        cJSON_AddItemToArray(r, cJSON_CreateNumber((double)(s->t_ms - t0)));
        NUM_OR_NULL(GB_TM_HAVE_SM, s->sm_mhz);
        NUM_OR_NULL(GB_TM_HAVE_MEM, s->mem_mhz);
        NUM_OR_NULL(GB_TM_HAVE_POWER, s->power_mw / 1000.0);
        NUM_OR_NULL(GB_TM_HAVE_TEMP, s->temp_c);
        NUM_OR_NULL(GB_TM_HAVE_UTIL, s->util_pct);
        NUM_OR_NULL(GB_TM_HAVE_USED, (double)s->mem_used);
        cJSON_AddItemToArray(r, have_r ? cJSON_CreateNumber(reasons_num(reasons))
                                       : cJSON_CreateNull());
        NUM_OR_NULL(GB_TM_HAVE_LIMIT, s->limit_mw / 1000.0);
#undef NUM_OR_NULL
        cJSON_AddItemToArray(rows, r);
        i = j;
    }
    return rows;
}

/* Rows left after decimating by k. */
static size_t rows_after(const gb_tm_gpu_sample_t *const *in, size_t n, size_t k) {
    size_t rows = 0, i = 0;
    while (i < n) {
        size_t j = i;
        while (j < n && j < i + k && in[j]->gpu == in[i]->gpu)
            j++;
        rows++;
        i = j;
    }
    return rows;
}

typedef struct part {
    cJSON *tm;         /* the telemetry object being built */
    size_t n_rows_src; /* samples in the window (rows before decimation) */
    int64_t t0;
    char verdict[256], flag[160];
} part_t;

static int gpu_part(const gb_tm_data_t *d, int64_t ws, int64_t we, part_t *p,
                    const gb_tm_gpu_sample_t ***sorted_out) {
    cJSON *tm = p->tm;
    int ng = d->n_gpus > GB_TM_MAX_GPUS ? GB_TM_MAX_GPUS : d->n_gpus;
    gpu_acc_t acc[GB_TM_MAX_GPUS];
    memset(acc, 0, sizeof acc);
    size_t n_in = 0;
    for (size_t i = 0; i < d->n_gpu; i++)
        if (d->gpu[i].t_ms >= ws && d->gpu[i].t_ms <= we && (int)d->gpu[i].gpu < ng) n_in++;
    const gb_tm_gpu_sample_t **in = calloc(n_in + 1, sizeof *in);
    double *v = calloc(n_in + 1, sizeof *v);
    if (!in || !v) {
        free(in);
        free(v);
        return -1;
    }
    size_t m = 0;
    for (size_t i = 0; i < d->n_gpu; i++)
        if (d->gpu[i].t_ms >= ws && d->gpu[i].t_ms <= we && (int)d->gpu[i].gpu < ng)
            in[m++] = &d->gpu[i];
    qsort(in, n_in, sizeof *in, cmp_row);
    uint64_t all = 0, all_throttle = 0;
    cJSON *gpus = cJSON_AddArrayToObject(tm, "gpus");
    for (int g = 0; gpus && g < ng; g++) {
        gpu_acc_t *a = &acc[g];
        for (size_t i = 0; i < n_in; i++) {
            const gb_tm_gpu_sample_t *s = in[i];
            if ((int)s->gpu != g) continue;
            a->n++;
            if (s->have & GB_TM_HAVE_LIMIT && (!a->min_limit_mw || s->limit_mw < a->min_limit_mw))
                a->min_limit_mw = s->limit_mw;
            if (!(s->have & GB_TM_HAVE_REASONS)) continue;
            a->judged++;
            uint64_t t = gb_tm_throttle_bits(
                s->reasons, s->have & GB_TM_HAVE_LIMIT ? s->limit_mw : 0, d->default_limit_mw[g]);
            if ((t & GB_TM_REASON_HW_SLOWDOWN) && !lone_slowdown_backed(in, n_in, i))
                t &= ~GB_TM_REASON_HW_SLOWDOWN; /* listed in reasons, not a verdict */
            a->reasons |= s->reasons;
            a->throttle |= t;
            a->throttled += t != 0;
        }
        all |= a->reasons;
        all_throttle |= a->throttle;
        cJSON *o = cJSON_CreateObject();
        if (!o) break;
        cJSON_AddNumberToObject(o, "gpu", g);
        if (d->have_nvml_index) cJSON_AddNumberToObject(o, "nvml_gpu", d->nvml_index[g]);
        cJSON_AddNumberToObject(o, "samples", (double)a->n);
        static const struct {
            const char *key;
            unsigned flag;
        } fields[] = {{"sm_mhz", GB_TM_HAVE_SM},     {"mem_mhz", GB_TM_HAVE_MEM},
                      {"power_w", GB_TM_HAVE_POWER}, {"temp_c", GB_TM_HAVE_TEMP},
                      {"util_pct", GB_TM_HAVE_UTIL}, {"mem_used_bytes", GB_TM_HAVE_USED}};
        for (size_t f = 0; f < sizeof fields / sizeof fields[0]; f++) {
            size_t nv = 0;
            for (size_t i = 0; i < n_in; i++) {
                const gb_tm_gpu_sample_t *s = in[i];
                if ((int)s->gpu != g || !(s->have & fields[f].flag)) continue;
                switch (fields[f].flag) {
                case GB_TM_HAVE_SM:
                    v[nv++] = s->sm_mhz;
                    break;
                case GB_TM_HAVE_MEM:
                    v[nv++] = s->mem_mhz;
                    break;
                case GB_TM_HAVE_POWER:
                    v[nv++] = s->power_mw / 1000.0;
                    break;
                case GB_TM_HAVE_TEMP:
                    v[nv++] = s->temp_c;
                    break;
                case GB_TM_HAVE_UTIL:
                    v[nv++] = s->util_pct;
                    break;
                default:
                    v[nv++] = (double)s->mem_used;
                    break;
                }
            }
            cJSON_AddItemToObject(o, fields[f].key, stats(v, nv));
        }
        if (a->min_limit_mw)
            cJSON_AddNumberToObject(o, "power_limit_w", a->min_limit_mw / 1000.0);
        else
            cJSON_AddNullToObject(o, "power_limit_w");
        if (d->default_limit_mw[g])
            cJSON_AddNumberToObject(o, "default_power_limit_w", d->default_limit_mw[g] / 1000.0);
        else
            cJSON_AddNullToObject(o, "default_power_limit_w");
        cJSON_AddNumberToObject(o, "reasons", reasons_num(a->reasons));
        cJSON_AddItemToObject(o, "reason_names", names_array(a->reasons));
        cJSON_AddItemToObject(o, "throttle_names", names_array(a->throttle));
        if (a->n && !a->judged)
            cJSON_AddNullToObject(o, "throttled_samples");
        else
            cJSON_AddNumberToObject(o, "throttled_samples", (double)a->throttled);
        cJSON_AddItemToArray(gpus, o);
    }
    free(v);
    cJSON_AddNumberToObject(tm, "reasons", reasons_num(all));
    cJSON_AddItemToObject(tm, "reason_names", names_array(all));
    cJSON_AddItemToObject(tm, "throttle_names", names_array(all_throttle));
    /* a GPU none of whose samples had its clocks-event reasons (a driver
     * or a virtual GPU that answers "not supported") was not judged: its
     * throttled_samples is null (v_telemetry's throttled NULL, not 0, which
     * read as a clean run), and the flag says so */
    int unjudged = -1;
    for (int g = 0; g < ng && unjudged < 0; g++)
        if (acc[g].n && !acc[g].judged) unjudged = g;
    cJSON_AddBoolToObject(tm, "throttled", all_throttle != 0);
    cJSON *cols = cJSON_CreateStringArray(
        (const char *const[]){"gpu", "t_ms", "sm_mhz", "mem_mhz", "power_w", "temp_c", "util_pct",
                              "mem_used_bytes", "reasons", "power_limit_w"},
        10);
    cJSON_AddItemToObject(tm, "columns", cols);
    if (all_throttle) {
        /* the names leave the verdict room for its GPUs; both whole-named */
        char names[112], fnames[sizeof p->flag - 12];
        gb_tm_reason_names(all_throttle, names, sizeof names);
        gb_tm_reason_names(all_throttle, fnames, sizeof fnames);
        gb_fmt(p->verdict, sizeof p->verdict, "GPU throttling in the timed window: %s (", names);
        int first = 1;
        for (int g = 0; g < ng; g++)
            if (acc[g].throttled) {
                char nv[24] = ""; /* the physical GPU, where the job's numbering differs */
                if (d->have_nvml_index && d->nvml_index[g] != g)
                    gb_fmt(nv, sizeof nv, " (NVML %d)", d->nvml_index[g]);
                app(p->verdict, sizeof p->verdict, "%sGPU %d%s: %zu of %zu samples",
                    first ? "" : ", ", g, nv, acc[g].throttled, acc[g].n);
                first = 0;
            }
        app(p->verdict, sizeof p->verdict, ")");
        gb_fmt(p->flag, sizeof p->flag, "throttled: %s", fnames);
    } else if (unjudged >= 0) {
        gb_fmt(p->flag, sizeof p->flag,
               "throttling not judged: GPU %d gave no clocks-event reasons (%zu samples)", unjudged,
               acc[unjudged].n);
    }
    if (n_in == 0) {
        char why[160];
        if (ws > INT64_MIN && we < INT64_MAX)
            gb_fmt(why, sizeof why,
                   "no GPU sample in the timed window (%" PRId64 " ms, interval %d ms)", we - ws,
                   d->interval_ms);
        else
            gb_fmt(why, sizeof why, "no GPU sample was taken");
        set_item(tm, "error", cJSON_CreateString(why));
    }
    *sorted_out = in;
    p->n_rows_src = n_in;
    return 0;
}

/* ---- CPU ------------------------------------------------------------------ */

/* Rows of the CPU samples in the window, each over the interval since the
 * previous sample; decimated by k. */
static cJSON *cpu_rows(const gb_tm_data_t *d, int64_t ws, int64_t we, size_t k, int64_t t0) {
    cJSON *rows = cJSON_CreateArray();
    size_t seen = 0;
    int64_t last_t = INT64_MIN;
    for (size_t i = 1; rows && i < d->n_cpu; i++) {
        const gb_tm_cpu_sample_t *x = &d->cpus[i - 1], *y = &d->cpus[i];
        if (y->t_ms < ws || y->t_ms > we) continue;
        if (seen++ % k != 0 || y->t_ms - t0 < 0 || y->t_ms - t0 <= last_t) continue;
        last_t = y->t_ms - t0;
        cJSON *r = cJSON_CreateArray();
        if (!r) break;
        cJSON_AddItemToArray(r, cJSON_CreateNumber((double)(y->t_ms - t0)));
        cJSON_AddItemToArray(r,
                             y->mhz > 0 ? cJSON_CreateNumber(round1(y->mhz)) : cJSON_CreateNull());
        int ok = y->total > x->total && y->busy >= x->busy && y->steal >= x->steal;
        double total = ok ? (double)(y->total - x->total) : 0;
        int wok = ok && x->have_worker && y->have_worker && y->worker >= x->worker;
        double busy = ok ? (double)(y->busy - x->busy) : 0;
        double worker = wok ? (double)(y->worker - x->worker) : 0;
        cJSON_AddItemToArray(
            r, wok ? cJSON_CreateNumber(round1(100.0 * (busy > worker ? busy - worker : 0) / total))
                   : cJSON_CreateNull());
        cJSON_AddItemToArray(
            r, ok ? cJSON_CreateNumber(round1(100.0 * (double)(y->steal - x->steal) / total))
                  : cJSON_CreateNull());
        cJSON_AddItemToArray(r, wok ? cJSON_CreateNumber(round1(100.0 * worker / total))
                                    : cJSON_CreateNull());
        cJSON_AddItemToArray(rows, r);
    }
    return rows;
}

int gb_tm_cpu_taken_floor(double taken_pct, uint64_t ticks, int cores, double *floor_pct) {
    double slack = 2.0 * (cores > 0 ? cores : 1) + 2.0;
    double taken = taken_pct / 100.0 * (double)ticks - slack;
    *floor_pct = taken > 0 && ticks > 0 ? 100.0 * taken / ((double)ticks + slack) : 0;
    return *floor_pct > GB_TM_CPU_INVALID_PCT;
}

static int cpu_part(const gb_tm_data_t *d, int64_t ws, int64_t we, part_t *p) {
    cJSON *tm = p->tm;
    cJSON_AddNumberToObject(tm, "cores", d->cores);
    cJSON *cols = cJSON_CreateStringArray(
        (const char *const[]){"t_ms", "cpu_mhz", "others_pct", "steal_pct", "worker_pct"}, 5);
    cJSON_AddItemToObject(tm, "columns", cols);
    size_t n_in = 0;
    double *v = calloc(d->n_cpu + 1, sizeof *v); /* n_cpu: room for either way below */
    if (!v) return -1;
    size_t nv = 0;
    for (size_t i = 0; i < d->n_cpu; i++) {
        if (d->cpus[i].t_ms < ws || d->cpus[i].t_ms > we) continue;
        n_in += i > 0;
        if (d->cpus[i].mhz > 0) v[nv++] = round1(d->cpus[i].mhz);
    }
    gb_tm_cpu_window_t w;
    gb_tm_cpu_window(d->cpus, d->n_cpu, ws, we, &w);
    /* a window shorter than the sampling interval holds no sample: its
     * clock is the one the samples around it read, those the contention
     * figure comes from (it was null for every small gemm) */
    if (nv == 0 && w.ok)
        for (size_t i = w.from; i <= w.to; i++)
            if (d->cpus[i].mhz > 0) v[nv++] = round1(d->cpus[i].mhz);
    int judged = w.ok && w.ticks >= GB_TM_CPU_MIN_TICKS;
    double floor_pct = 0; /* too few ticks: the least the others took */
    int coarse_bad =
        w.ok && !judged && gb_tm_cpu_taken_floor(w.taken_pct, w.ticks, d->cores, &floor_pct);
    cJSON *c = cJSON_AddObjectToObject(tm, "cpu");
    if (c && w.ok) {
        cJSON_AddNumberToObject(c, "span_ms", (double)w.span_ms);
        cJSON_AddBoolToObject(c, "covers_window", w.covers);
        cJSON_AddNumberToObject(c, "others_pct", round1(w.others_pct));
        cJSON_AddNumberToObject(c, "steal_pct", round1(w.steal_pct));
        cJSON_AddNumberToObject(c, "taken_pct", round1(w.taken_pct));
        cJSON_AddNumberToObject(c, "worker_pct", round1(w.worker_pct));
        cJSON_AddNumberToObject(c, "ticks", (double)w.ticks);
        cJSON_AddBoolToObject(c, "judged", judged || coarse_bad);
        cJSON_AddBoolToObject(c, "flagged",
                              coarse_bad || (judged && w.taken_pct > GB_TM_CPU_FLAG_PCT));
    } else if (c) {
        cJSON_AddNullToObject(c, "taken_pct");
        cJSON_AddBoolToObject(c, "flagged", 0);
        set_item(tm, "error",
                 cJSON_CreateString("fewer than two CPU samples around the timed window"));
    }
    if (c) cJSON_AddItemToObject(c, "cpu_mhz", stats(v, nv));
    free(v);
    if (w.ok && !judged && !coarse_bad)
        set_item(tm, "error",
                 cJSON_CreateString("the CPU samples around the timed window hold too few clock "
                                    "ticks to judge contention"));
    if (coarse_bad)
        gb_fmt(p->verdict, sizeof p->verdict,
               "CPU contention in the timed window: at least %.*f%% of the CPU time taken by "
               "other processes and the hypervisor (%.1f%% in %llu clock ticks, too few for a "
               "closer figure), limit %.0f%%",
               over_digits(floor_pct, GB_TM_CPU_INVALID_PCT), floor_pct, w.taken_pct,
               (unsigned long long)w.ticks, GB_TM_CPU_INVALID_PCT);
    if (judged && w.taken_pct > GB_TM_CPU_INVALID_PCT)
        gb_fmt(p->verdict, sizeof p->verdict,
               "CPU contention in the timed window: %.*f%% of the CPU time taken by other "
               "processes (%.1f%%) and the hypervisor (%.1f%%), limit %.0f%%",
               over_digits(w.taken_pct, GB_TM_CPU_INVALID_PCT), w.taken_pct, w.others_pct,
               w.steal_pct, GB_TM_CPU_INVALID_PCT);
    if (judged && w.taken_pct > GB_TM_CPU_FLAG_PCT)
        gb_fmt(p->flag, sizeof p->flag,
               "cpu contention: %.1f%% of the CPU time taken by others (%.1f%% steal)", w.taken_pct,
               w.steal_pct);
    if (coarse_bad) /* the window is the reason: flag says so, as for a judged one */
        gb_fmt(p->flag, sizeof p->flag,
               "cpu contention: at least %.1f%% of the CPU time taken by others (%.1f%% in %llu "
               "clock ticks)",
               floor_pct, w.taken_pct, (unsigned long long)w.ticks);
    p->n_rows_src = n_in;
    return 0;
}

/* ---- the record ----------------------------------------------------------- */

/* Record validity: the telemetry verdict first, then any earlier reason,
 * at most 255 bytes. */
static void invalidate(cJSON *rec, const char *verdict) {
    char reason[256];
    const cJSON *old = cJSON_GetObjectItemCaseSensitive(rec, "invalid_reason");
    const cJSON *valid = cJSON_GetObjectItemCaseSensitive(rec, "valid");
    if (cJSON_IsFalse(valid) && cJSON_IsString(old) && old->valuestring[0]) {
        if (gb_fmt(reason, sizeof reason, "%s; %s", verdict, old->valuestring) != 0)
            memcpy(reason + sizeof reason - 4, "...", 4);
    } else {
        gb_copy(reason, sizeof reason, verdict);
    }
    set_item(rec, "valid", cJSON_CreateFalse());
    set_item(rec, "invalid_reason", cJSON_CreateString(reason));
}

int gb_tm_amend(const char *record_json, const gb_tm_data_t *d, size_t max_len, char **out,
                char *err, size_t errlen) {
    *out = NULL;
    cJSON *rec = cJSON_Parse(record_json);
    if (!cJSON_IsObject(rec)) {
        cJSON_Delete(rec);
        gb_fmt(err, errlen, "the result record is not a JSON object");
        return -1;
    }
    const cJSON *w = cJSON_GetObjectItemCaseSensitive(rec, "timed_window_ms");
    int have_window = cJSON_IsArray(w) && cJSON_GetArraySize(w) == 2 && cJSON_IsNumber(w->child) &&
                      cJSON_IsNumber(w->child->next) && w->child->valuedouble > 0 &&
                      w->child->next->valuedouble >= w->child->valuedouble &&
                      w->child->next->valuedouble < 9e15;
    int64_t ws = have_window ? (int64_t)w->child->valuedouble : INT64_MIN;
    int64_t we = have_window ? (int64_t)w->child->next->valuedouble : INT64_MAX;
    part_t p;
    memset(&p, 0, sizeof p);
    p.tm = cJSON_CreateObject();
    const gb_tm_gpu_sample_t **sorted = NULL;
    int rc = -1;
    if (!p.tm) goto oom;
    int gpu = d->n_gpus > 0;
    cJSON_AddStringToObject(p.tm, "source", gpu ? "nvml" : "proc");
    cJSON_AddNumberToObject(p.tm, "interval_ms", d->interval_ms);
    if (have_window) {
        cJSON *wa = cJSON_AddArrayToObject(p.tm, "window_ms");
        if (wa) {
            cJSON_AddItemToArray(wa, cJSON_CreateNumber((double)ws));
            cJSON_AddItemToArray(wa, cJSON_CreateNumber((double)we));
        }
    } else {
        cJSON_AddNullToObject(p.tm, "window_ms");
    }
    cJSON_AddNullToObject(p.tm, "error");
    /* rows count from the window's start (or the first sample) */
    p.t0 = have_window ? ws
           : gpu       ? (d->n_gpu ? d->gpu[0].t_ms : 0)
                       : (d->n_cpu ? d->cpus[0].t_ms : 0);
    if (gpu ? gpu_part(d, ws, we, &p, &sorted) : cpu_part(d, ws, we, &p)) goto oom;
    if (d->error && d->error[0]) set_item(p.tm, "error", cJSON_CreateString(d->error));
    /* whatever made it incomplete (the sampler, or too few samples in the
     * window) is said in the result's flag: valid, but not judged whole */
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(p.tm, "error");
    if (cJSON_IsString(e) && !p.flag[0])
        gb_fmt(p.flag, sizeof p.flag, "telemetry incomplete: %s", e->valuestring);
    if (!have_window)
        set_item(p.tm, "note",
                 cJSON_CreateString("the record has no timed_window_ms: every sample of the job "
                                    "was judged"));
    cJSON_AddItemToObject(p.tm, "flag",
                          p.flag[0] ? cJSON_CreateString(p.flag) : cJSON_CreateNull());
    /* the verdict judges kinds that measure: a sleep (the control plane's
     * test kind) measures nothing, so a throttled GPU or a busy CPU cannot
     * make it wrong. Its telemetry is kept and the verdict it would have
     * drawn is said in not_judged, unless its test hook judge_telemetry
     * asks for the verdict (the integration tests of the verdicts) */
    const cJSON *kind = cJSON_GetObjectItemCaseSensitive(rec, "kind");
    int measures = !cJSON_IsString(kind) || strcmp(kind->valuestring, "sleep") != 0 ||
                   cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(rec, "judge_telemetry"));
    if (p.verdict[0] && !measures) {
        set_item(p.tm, "not_judged", cJSON_CreateString(p.verdict));
    } else if (p.verdict[0]) {
        invalidate(rec, p.verdict);
    }
    set_item(rec, "telemetry", p.tm);
    cJSON *tm = p.tm;
    p.tm = NULL; /* owned by rec now */
    /* the fewest rows that keep the record under max_len bytes */
    size_t n_src = p.n_rows_src;
    size_t k = 1;
    if (gpu)
        while (rows_after(sorted, n_src, k) > GB_TM_MAX_ROWS)
            k *= 2;
    else
        while ((n_src + k - 1) / k > GB_TM_MAX_ROWS) /* cpu_rows keeps a partial block too */
            k *= 2;
    for (;;) {
        cJSON *rows = n_src == 0 || k > n_src ? cJSON_CreateArray()
                      : gpu                   ? gpu_rows(sorted, n_src, k, p.t0)
                                              : cpu_rows(d, ws, we, k, p.t0);
        if (!rows) goto oom;
        set_item(tm, "samples", rows);
        set_item(tm, "kept_every", cJSON_CreateNumber((double)k));
        char *text = cJSON_PrintUnformatted(rec);
        if (!text) goto oom;
        if (strlen(text) <= max_len) {
            *out = text;
            rc = 0;
            break;
        }
        free(text);
        if (k > n_src) /* not even without rows: the summary alone is too much */
            break;
        k *= 2;
    }
    if (rc != 0) {
        /* last resort: the verdict without the details */
        cJSON *small = cJSON_CreateObject();
        if (!small) goto oom;
        static const char *const keep[] = {"source",    "interval_ms",    "window_ms",
                                           "throttled", "throttle_names", "flag",
                                           "not_judged"};
        for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++) {
            const cJSON *it = cJSON_GetObjectItemCaseSensitive(tm, keep[i]);
            if (it) cJSON_AddItemToObject(small, keep[i], cJSON_Duplicate(it, 1));
        }
        cJSON_AddStringToObject(small, "error",
                                "the record is too large for the telemetry details: dropped");
        set_item(rec, "telemetry", small);
        char *text = cJSON_PrintUnformatted(rec);
        if (text && strlen(text) <= max_len) {
            *out = text;
            rc = 0;
        } else {
            free(text);
            gb_fmt(err, errlen, "the result record is too large to add its telemetry");
        }
    }
    goto done;
oom:
    gb_fmt(err, errlen, "out of memory amending the result record");
done:
    cJSON_Delete(p.tm);
    cJSON_Delete(rec);
    free(sorted);
    return rc;
}
