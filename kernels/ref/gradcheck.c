/* gradcheck.c - the checkers of gradcheck.h. gb_gradcheck collects the
 * numeric estimates of the chosen elements and hands them to the same
 * comparison as gb_cmp_*, so both report alike. */
#include "gradcheck.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Keep pair in the worst list (sorted by ratio, largest first). */
static void keep_worst(gb_cmp_t *c, const gb_cmp_pair_t *pair) {
    int pos = c->n_worst;
    while (pos > 0 && !(c->worst[pos - 1].ratio >= pair->ratio))
        pos--;
    if (pos >= GB_CMP_WORST) return;
    int last = c->n_worst < GB_CMP_WORST ? c->n_worst : GB_CMP_WORST - 1;
    memmove(&c->worst[pos + 1], &c->worst[pos], sizeof(c->worst[0]) * (size_t)(last - pos));
    c->worst[pos] = *pair;
    if (c->n_worst < GB_CMP_WORST) c->n_worst++;
}

/* The comparison over either element type: got_f64 or got_f32 is non-NULL. */
static int compare(const double *got_f64, const float *got_f32, const double *ref, size_t n,
                   double atol, double rtol, gb_cmp_t *out) {
    memset(out, 0, sizeof(*out));
    out->n = n;
    out->atol = atol;
    out->rtol = rtol;
    double diff2 = 0.0, ref2 = 0.0;
    for (size_t i = 0; i < n; i++) {
        double g = got_f64 ? got_f64[i] : (double)got_f32[i];
        double r = ref[i];
        gb_cmp_pair_t pair = {.index = i, .got = g, .ref = r};
        if (!isfinite(g) || !isfinite(r)) {
            out->n_nonfinite++;
            out->n_bad++;
            pair.err = pair.ratio = INFINITY;
        } else {
            double err = fabs(g - r), tol = atol + rtol * fabs(r);
            pair.err = err;
            /* tol may be 0 (an exact comparison): then any difference is Inf times over */
            pair.ratio = tol > 0.0 ? err / tol : (err > 0.0 ? INFINITY : 0.0);
            if (err > tol) out->n_bad++;
            if (err > out->max_abs) out->max_abs = err;
            if (r != 0.0 && err / fabs(r) > out->max_rel) out->max_rel = err / fabs(r);
            diff2 += err * err;
            ref2 += r * r;
        }
        if (pair.ratio > out->max_ratio) out->max_ratio = pair.ratio;
        keep_worst(out, &pair);
    }
    out->rel_l2 = ref2 > 0.0 ? sqrt(diff2 / ref2) : (diff2 > 0.0 ? INFINITY : 0.0);
    return out->n_bad ? -1 : 0;
}

int gb_cmp_f64(const double *got, const double *ref, size_t n, double atol, double rtol,
               gb_cmp_t *out) {
    return compare(got, NULL, ref, n, atol, rtol, out);
}

int gb_cmp_f32(const float *got, const double *ref, size_t n, double atol, double rtol,
               gb_cmp_t *out) {
    return compare(NULL, got, ref, n, atol, rtol, out);
}

void gb_cmp_print(FILE *f, const char *what, const gb_cmp_t *c) {
    fprintf(f,
            "%s: %zu of %zu over atol %.3g + rtol %.3g*|ref| (%zu not finite); max abs %.3e, "
            "max rel %.3e, rel L2 %.3e, max err/tol %.3g\n",
            what, c->n_bad, c->n, c->atol, c->rtol, c->n_nonfinite, c->max_abs, c->max_rel,
            c->rel_l2, c->max_ratio);
    for (int i = 0; i < c->n_worst; i++)
        fprintf(f, "  [%zu] got %.17g ref %.17g err %.3e (err/tol %.3g)\n", c->worst[i].index,
                c->worst[i].got, c->worst[i].ref, c->worst[i].err, c->worst[i].ratio);
}

/* ---- finite differences ------------------------------------------------- */

void gb_gc_opts_default(gb_gc_opts_t *o) {
    memset(o, 0, sizeof(*o));
    o->h = GB_GC_H_DEFAULT;
    o->atol = GB_GC_ATOL_DEFAULT;
    o->rtol = GB_GC_RTOL_DEFAULT;
}

double gb_gc_dot(const double *a, const double *b, size_t n) {
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

/* (f(x + step) - f(x - step)) / (2 step) at element i; x[i] is restored. */
static int central_diff(gb_gc_fn_t f, void *ctx, double *x, size_t i, double step, double *out) {
    double saved = x[i], fp, fm;
    x[i] = saved + step;
    int rc = f(ctx, &fp);
    x[i] = saved - step;
    if (rc == 0) rc = f(ctx, &fm);
    x[i] = saved;
    if (rc != 0) return -1;
    /* Divide by the step actually taken: saved +- step is rounded, so the two
     * points are not exactly 2 step apart; this removes that error. */
    *out = (fp - fm) / ((saved + step) - (saved - step));
    return 0;
}

int gb_gradcheck(gb_gc_fn_t f, void *ctx, double *x, size_t n, const double *analytic,
                 const size_t *idx, size_t n_idx, const gb_gc_opts_t *opts, const char *name,
                 gb_gc_report_t *rep) {
    gb_gc_opts_t dflt;
    if (!opts) {
        gb_gc_opts_default(&dflt);
        opts = &dflt;
    }
    gb_gc_report_t local;
    if (!rep) rep = &local;
    memset(rep, 0, sizeof(*rep));
    FILE *log = opts->log ? opts->log : stderr;
    size_t count = idx ? n_idx : n;
    double *num = malloc(sizeof(double) * (count ? count : 1));
    double *ana = malloc(sizeof(double) * (count ? count : 1));
    size_t *where = malloc(sizeof(size_t) * (count ? count : 1));
    int status = -1;
    if (!num || !ana || !where) {
        rep->fn_failed = 1;
        if (!opts->quiet) fprintf(log, "gradcheck %s: out of memory\n", name);
        goto done;
    }

    size_t kept = 0;
    for (size_t k = 0; k < count; k++) {
        size_t i = idx ? idx[k] : k;
        if (i >= n) {
            rep->fn_failed = 1;
            if (!opts->quiet) fprintf(log, "gradcheck %s: index %zu >= %zu\n", name, i, n);
            goto done;
        }
        double d1;
        if (central_diff(f, ctx, x, i, opts->h, &d1) != 0) {
            rep->fn_failed = 1;
            if (!opts->quiet) fprintf(log, "gradcheck %s: function failed at [%zu]\n", name, i);
            goto done;
        }
        rep->checked++;
        /* The kink test only matters where the element would fail, so it is
         * only run there; whether it skips depends on f alone. */
        int fails = !(fabs(analytic[i] - d1) <= opts->atol + opts->rtol * fabs(d1));
        if (opts->nonsmooth && fails) {
            double d2;
            if (central_diff(f, ctx, x, i, opts->h / 2, &d2) != 0) {
                rep->fn_failed = 1;
                if (!opts->quiet) fprintf(log, "gradcheck %s: function failed at [%zu]\n", name, i);
                goto done;
            }
            if (!(fabs(d1 - d2) <= opts->atol + opts->rtol * fabs(d1))) {
                rep->skipped++;
                continue;
            }
        }
        num[kept] = d1;
        ana[kept] = analytic[i];
        where[kept] = i;
        kept++;
    }

    int cmp_rc = gb_cmp_f64(ana, num, kept, opts->atol, opts->rtol, &rep->cmp);
    for (int w = 0; w < rep->cmp.n_worst; w++)
        rep->cmp.worst[w].index = where[rep->cmp.worst[w].index];
    status = (cmp_rc == 0 && rep->skipped <= opts->max_skip) ? 0 : -1;
    if (status != 0 && !opts->quiet) {
        fprintf(log,
                "gradcheck %s failed: h %.1e, %zu checked, %zu skipped as kinks (at most %zu "
                "allowed); got = analytic, ref = numeric\n",
                name, opts->h, rep->checked, rep->skipped, opts->max_skip);
        gb_cmp_print(log, "  analytic vs numeric", &rep->cmp);
    }

done:
    free(num);
    free(ana);
    free(where);
    return status;
}
