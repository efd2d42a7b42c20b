/* gb_sysinfo.c - see gb_sysinfo.h. */
#define _GNU_SOURCE /* sched_getaffinity */
#include "gb_sysinfo.h"

#include <ctype.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

static void trim(char *s) {
    size_t n = strlen(s);
    while (n && isspace((unsigned char)s[n - 1]))
        s[--n] = '\0';
    size_t i = 0;
    while (s[i] && isspace((unsigned char)s[i]))
        i++;
    if (i) memmove(s, s + i, n - i + 1);
}

/* The value after "key<spaces>:" in a "key : value" file, or -1. */
static int proc_field(const char *path, const char *key, char *out, size_t len) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char line[1024];
    size_t klen = strlen(key);
    int rc = -1;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, key, klen) != 0) continue;
        const char *p = line + klen;
        while (*p == ' ' || *p == '\t')
            p++;
        if (*p != ':') continue;
        snprintf(out, len, "%s", p + 1);
        trim(out);
        rc = 0;
        break;
    }
    fclose(f);
    return rc;
}

void gb_sys_cpu_model(char *out, size_t len) {
    if (proc_field("/proc/cpuinfo", "model name", out, len) == 0 && out[0]) return;
    if (proc_field("/proc/cpuinfo", "Model", out, len) == 0 && out[0]) return; /* arm64 */
    struct utsname u;
    snprintf(out, len, "%s CPU", uname(&u) == 0 ? u.machine : "unknown");
}

int gb_sys_cpu_cores(void) {
    /* the affinity mask, as the engine's threads (gb_cpus_usable): an agent
     * under taskset or a cpuset said the host's count, and placement sent
     * it more CPU replicas than it could run */
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

uint64_t gb_sys_memory_bytes(void) {
    char v[64];
    if (proc_field("/proc/meminfo", "MemTotal", v, sizeof v) != 0) return 0;
    return strtoull(v, NULL, 10) * 1024ULL; /* "NNN kB" */
}

void gb_sys_os(char *out, size_t len) {
    FILE *f = fopen("/etc/os-release", "r");
    snprintf(out, len, "unknown");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "PRETTY_NAME=", 12) != 0) continue;
        char *v = line + 12;
        trim(v);
        size_t n = strlen(v);
        if (n >= 2 && v[0] == '"' && v[n - 1] == '"') {
            v[n - 1] = '\0';
            v++;
        }
        snprintf(out, len, "%s", v);
        break;
    }
    fclose(f);
}

void gb_sys_kernel(char *out, size_t len) {
    struct utsname u;
    if (uname(&u) == 0)
        snprintf(out, len, "%s %s", u.sysname, u.release);
    else
        snprintf(out, len, "unknown");
}

void gb_sys_hostname(char *out, size_t len) {
    if (gethostname(out, len) != 0 || !out[0]) snprintf(out, len, "localhost");
    out[len - 1] = '\0';
}
