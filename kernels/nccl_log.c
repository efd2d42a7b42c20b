/* nccl_log.c - see nccl_log.h. Lines are matched by substrings, never by
 * position, so the prefix NCCL puts before "NCCL INFO" (host:pid:tid
 * [dev], or a timestamp a launcher adds) does not matter. */
#define _POSIX_C_SOURCE 200809L
#include "nccl_log.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const char *const names[GB_NT_COUNT] = {
    "P2P/IPC", "P2P/CUMEM",  "P2P/direct", "P2P/MNNVL", "P2P/indirect", "SHM",
    "NET/IB",  "NET/Socket", "NET",        "NVLS",      "CollNet",
};

const char *gb_nccl_transport_name(int t) {
    return t >= 0 && t < GB_NT_COUNT ? names[t] : "?";
}

void gb_nccl_report_init(gb_nccl_report_t *r) {
    memset(r, 0, sizeof(*r));
}

static int starts(const char *s, const char *prefix) {
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* The transport after " via ". */
static int classify(const char *v) {
    if (starts(v, "P2P/IPC")) return GB_NT_P2P_IPC;
    if (starts(v, "P2P/CUMEM")) return GB_NT_P2P_CUMEM;
    if (starts(v, "P2P/direct") || starts(v, "direct pointer")) return GB_NT_P2P_DIRECT;
    if (starts(v, "P2P/MNNVL")) return GB_NT_P2P_MNNVL;
    if (starts(v, "P2P/indirect")) return GB_NT_P2P_INDIRECT;
    if (starts(v, "P2P")) return GB_NT_P2P_IPC;
    if (starts(v, "SHM") || starts(v, "direct shared memory")) return GB_NT_SHM;
    if (starts(v, "NET/IB")) return GB_NT_NET_IB;
    if (starts(v, "NET/Socket")) return GB_NT_NET_SOCKET;
    if (starts(v, "NET")) return GB_NT_NET_OTHER;
    if (starts(v, "COLLNET") || starts(v, "CollNet")) return GB_NT_COLLNET;
    if (starts(v, "NVLS")) return GB_NT_NVLS;
    return -1;
}

/* "<n> <what> channels" anywhere in s: n, or -1. */
static int channels_of(const char *s, const char *what) {
    char pat[48];
    snprintf(pat, sizeof(pat), " %s channels", what);
    const char *p = strstr(s, pat);
    if (!p) return -1;
    const char *q = p;
    while (q > s && isdigit((unsigned char)q[-1]))
        q--;
    if (q == p) return -1;
    return atoi(q);
}

void gb_nccl_log_line(gb_nccl_report_t *r, const char *line, size_t len) {
    char buf[1024];
    if (len >= sizeof(buf)) len = sizeof(buf) - 1;
    memcpy(buf, line, len);
    buf[len] = 0;
    char *nl = strpbrk(buf, "\r\n");
    if (nl) *nl = 0;
    const char *s = strstr(buf, "NCCL INFO");
    if (!s) return;
    r->info_lines++;
    s += 9;
    /* connections: "Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM", and CollNet's
     * own "CollNet 00/0 : 0 [send] via COLLNET/..." ("Coll 00 :" before) */
    const char *via = strstr(s, " via ");
    int t = via ? classify(via + 5) : -1;
    if (via && (strstr(s, "Channel") || t == GB_NT_COLLNET)) {
        if (t >= 0) {
            r->transports |= 1u << t;
            r->connections++;
        }
        return;
    }
    /* "N coll channels, N collnet channels, ..." says nothing about CollNet:
     * NCCL 2.19+ prints the ring channel count in both places */
    int n = channels_of(s, "nvls");
    if (n > 0) r->transports |= 1u << GB_NT_NVLS;
    if (strstr(s, "NVLS comm 0x")) r->transports |= 1u << GB_NT_NVLS;
    if (strstr(s, "NVLS multicast support is available")) r->nvls_supported = 1;
    const char *ty = strstr(s, ", type ");
    if (ty && strstr(s, "Pattern")) {
        ty += 7;
        if (starts(ty, "NVL") || starts(ty, "NVB"))
            r->nvl_paths++;
        else if (starts(ty, "PIX") || starts(ty, "PXB") || starts(ty, "PXN") || starts(ty, "PHB") ||
                 starts(ty, "SYS") || starts(ty, "NODE") || starts(ty, "P2C") || starts(ty, "C2C"))
            r->pci_paths++;
    }
}

int gb_nccl_log_file(gb_nccl_report_t *r, const char *path, char *err, size_t errlen) {
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "NCCL log %s: %s", path, strerror(errno));
        return -1;
    }
    char line[1024];
    while (fgets(line, sizeof(line), f)) {
        size_t n = strlen(line);
        gb_nccl_log_line(r, line, n);
        /* a line longer than the buffer: skip the rest of it */
        while (n == sizeof(line) - 1 && line[n - 1] != '\n' && fgets(line, sizeof(line), f))
            n = strlen(line);
    }
    fclose(f);
    return 1;
}

int gb_nccl_log_dir(gb_nccl_report_t *r, const char *dir, const char *prefix, char *err,
                    size_t errlen) {
    DIR *d = opendir(dir);
    if (!d) {
        snprintf(err, errlen, "NCCL log directory %s: %s", dir, strerror(errno));
        return -1;
    }
    int files = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!starts(e->d_name, prefix)) continue;
        char path[4096];
        if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, e->d_name) >= sizeof(path)) continue;
        if (gb_nccl_log_file(r, path, err, errlen) > 0) files++;
    }
    closedir(d);
    return files;
}

static int usable_path(const char *p) {
    return p && p[0] && !strpbrk(p, "\"\\%\n\r\t");
}

int gb_nccl_log_newdir(char *dir, size_t len, char *err, size_t errlen) {
    const char *given = getenv("GB_NCCL_LOG_DIR");
    struct stat st;
    if (usable_path(given) && strstr(given, "gb-nccl-") && stat(given, &st) == 0 &&
        S_ISDIR(st.st_mode) && strlen(given) < len) {
        snprintf(dir, len, "%s", given);
        return 0;
    }
    const char *tmp = getenv("TMPDIR");
    if (!usable_path(tmp)) tmp = "/tmp";
    (void)gb_nccl_log_prune(tmp, 7L * 86400); /* earlier runs' logs, after a week */
    if ((size_t)snprintf(dir, len, "%s/gb-nccl-XXXXXX", tmp) >= len || !mkdtemp(dir)) {
        snprintf(err, errlen, "cannot make a directory for NCCL's log under %s", tmp);
        return -1;
    }
    return 1;
}

int gb_nccl_transports_json(const gb_nccl_report_t *r, char *buf, size_t len) {
    size_t o = 0;
    int n = snprintf(buf, len, "[");
    if (n < 0 || (size_t)n >= len) return -1;
    o = (size_t)n;
    int first = 1;
    for (int t = 0; t < GB_NT_COUNT; t++) {
        if (!(r->transports & (1u << t))) continue;
        n = snprintf(buf + o, len - o, "%s\"%s\"", first ? "" : ",", names[t]);
        if (n < 0 || (size_t)n >= len - o) return -1;
        o += (size_t)n;
        first = 0;
    }
    n = snprintf(buf + o, len - o, "]");
    return n < 0 || (size_t)n >= len - o ? -1 : 0;
}

const char *gb_nccl_interconnect(const gb_nccl_report_t *r, int nvlink_hint) {
    unsigned p2p = (1u << GB_NT_P2P_IPC) | (1u << GB_NT_P2P_CUMEM) | (1u << GB_NT_P2P_DIRECT);
    /* MNNVL is NVLink between nodes; indirect P2P goes through a GPU it
     * reaches over NVLink (a two-hop path whose first hop is a GPU) */
    unsigned nvl = (1u << GB_NT_NVLS) | (1u << GB_NT_P2P_MNNVL) | (1u << GB_NT_P2P_INDIRECT);
    unsigned net = (1u << GB_NT_NET_IB) | (1u << GB_NT_NET_SOCKET) | (1u << GB_NT_NET_OTHER) |
                   (1u << GB_NT_COLLNET);
    if (r->transports & nvl) return "nvlink";
    if (r->transports & p2p) {
        if (r->nvl_paths > 0) return "nvlink";
        if (r->pci_paths > 0) return "pcie";
        return nvlink_hint ? "nvlink" : "pcie";
    }
    if (r->transports & (1u << GB_NT_SHM)) return "pcie";
    if (r->transports & net) return "net";
    return "none";
}

int gb_nccl_log_prune(const char *tmp, long max_age_s) {
    int tfd = open(tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = tfd >= 0 ? fdopendir(tfd) : NULL;
    if (!d) {
        if (tfd >= 0) close(tfd);
        return 0;
    }
    int removed = 0;
    time_t now = time(NULL);
    struct dirent *e;
    while ((e = readdir(d))) {
        /* mkdtemp's name: "gb-nccl-" and six characters */
        if (strncmp(e->d_name, "gb-nccl-", 8) != 0 || strlen(e->d_name) != 14) continue;
        /* by descriptor from here: a name swapped for a link meanwhile (a
         * TMPDIR others may write without the sticky bit) is not followed */
        int fd = openat(tfd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        struct stat st;
        if (fd < 0) continue;
        if (fstat(fd, &st) != 0 || st.st_uid != geteuid() || now - st.st_mtime <= max_age_s) {
            close(fd);
            continue;
        }
        DIR *l = fdopendir(fd);
        if (!l) {
            close(fd);
            continue;
        }
        struct dirent *f;
        while ((f = readdir(l))) {
            size_t n = strlen(f->d_name);
            struct stat fs;
            if (strncmp(f->d_name, "nccl.", 5) == 0 && n > 9 &&
                strcmp(f->d_name + n - 4, ".log") == 0 &&
                fstatat(fd, f->d_name, &fs, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(fs.st_mode))
                unlinkat(fd, f->d_name, 0);
        }
        closedir(l); /* closes fd */
        removed += unlinkat(tfd, e->d_name, AT_REMOVEDIR) == 0;
    }
    closedir(d); /* closes tfd */
    return removed;
}
