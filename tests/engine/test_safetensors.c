/* test_safetensors.c - the safetensors reader accepts what the writer (and
 * the format) produce and rejects every malformed file with a reason: short
 * files, lying header lengths, non-JSON, bad UTF-8, unknown dtypes and fields,
 * bad shapes and offsets, size mismatches, gaps, overlaps, trailing bytes,
 * duplicate names; and the files around them: directories, FIFOs (without
 * hanging), torch.save checkpoints named as such, saves through a symbolic
 * link (the link stays), saves refused over a FIFO or a directory, a save
 * cut short by a full disk (RLIMIT_FSIZE) that leaves the old file whole;
 * a file truncated by another process while it is read (a line naming it
 * and exit status 1, not "Bus error"; any other SIGBUS still kills). */
#define _XOPEN_SOURCE 700
#include "check.h"
#include "safetensors.h"

#include <dirent.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char err[512];

/* A file image: 8-byte length, header text, then `data_len` bytes 0..n. */
static unsigned char *image(const char *hdr, size_t data_len, size_t *len) {
    size_t hl = strlen(hdr);
    *len = 8 + hl + data_len;
    unsigned char *b = malloc(*len);
    CHECK(b);
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)((uint64_t)hl >> (8 * i));
    memcpy(b + 8, hdr, hl);
    for (size_t i = 0; i < data_len; i++)
        b[8 + hl + i] = (unsigned char)i;
    return b;
}

static void reject(const char *hdr, size_t data_len, const char *why) {
    size_t len;
    unsigned char *b = image(hdr, data_len, &len);
    gb_st_t *st = gb_st_parse(b, len, err, sizeof(err));
    CHECKF(st == NULL, "accepted a bad file: %s", hdr);
    CHECKF(strstr(err, why), "header %s: error '%s' does not mention '%s'", hdr, err, why);
    free(b);
}

static void test_parse_good(void) {
    size_t len;
    unsigned char *b =
        image("{\"__metadata__\":{\"format\":\"pt\"},"
              "\"b\":{\"dtype\":\"I64\",\"shape\":[],\"data_offsets\":[24,32]},"
              "\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
              "\"e\":{\"dtype\":\"F16\",\"shape\":[0,4],\"data_offsets\":[32,32]}}  ",
              32, &len);
    gb_st_t *st = gb_st_parse(b, len, err, sizeof(err));
    CHECKF(st, "%s", err);
    CHECK(gb_st_count(st) == 3);
    const gb_st_tensor_t *a = gb_st_find(st, "a"), *s = gb_st_find(st, "b");
    CHECK(a && a->dtype == GB_ST_F32 && a->ndim == 2 && a->shape[1] == 3 && a->numel == 6);
    CHECK(a->nbytes == 24 && ((const unsigned char *)a->data)[0] == 0);
    CHECK(s && s->ndim == 0 && s->numel == 1 && ((const unsigned char *)s->data)[0] == 24);
    CHECK(gb_st_at(st, 0) == a); /* offset order */
    CHECK(gb_st_find(st, "zz") == NULL && gb_st_at(st, 3) == NULL);
    CHECK(strcmp(gb_st_metadata(st, "format"), "pt") == 0 && !gb_st_metadata(st, "x"));
    gb_st_close(&st);
    CHECK(st == NULL);
    gb_st_close(&st);
    free(b);
}

static void test_parse_bad(void) {
    /* the length field */
    unsigned char tiny[4] = {0};
    CHECK(gb_st_parse(tiny, 4, err, sizeof(err)) == NULL && strstr(err, "shorter"));
    /* another file given by mistake (a JSON spec) says it is not one */
    static const char spec[] = "{\"kind\": \"sleep\", \"duration_ms\": [100, 200]}";
    CHECKF(gb_st_parse(spec, sizeof spec - 1, err, sizeof(err)) == NULL &&
               strstr(err, "not a safetensors file: its first 8 bytes, the header length, read "),
           "%s", err);
    size_t len;
    unsigned char *b = image("{}", 0, &len);
    b[0] = 200; /* claims more header than the file has */
    CHECK(gb_st_parse(b, len, err, sizeof(err)) == NULL && strstr(err, "header length"));
    b[0] = 2;
    b[7] = 0x80; /* 2^63 */
    CHECK(gb_st_parse(b, len, err, sizeof(err)) == NULL && strstr(err, "header length"));
    free(b);
    /* the JSON */
    reject("[1,2]     ", 0, "start with '{'");
    reject("{\"a\":", 0, "not a JSON object");
    reject("{} x", 0, "trailing bytes");
    reject("{\"\xff\":{}}", 0, "UTF-8");
    reject("{\"\xc0\x80\":{}}", 0, "UTF-8"); /* overlong NUL */
    reject("{\"a\":5}", 0, "not an object");
    reject("{\"__metadata__\":{\"k\":1}}", 0, "not a string");
    reject("{\"__metadata__\":[]}", 0, "__metadata__");
    /* the entries */
    reject("{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4, "needs dtype");
    reject("{\"a\":{\"dtype\":\"F33\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "dtype F33");
    reject("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"x\":1}}", 4,
           "unknown");
    reject("{\"a\":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
           "repeated");
    reject("{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 4, "non-negative");
    reject("{\"a\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,4]}}", 4,
           "not an integer");
    /* whole numbers written as fractions or exponents: the reference reader
     * refuses them, so this one does too (cJSON would read 1.0 as 1) */
    reject("{\"a\":{\"dtype\":\"F32\",\"shape\":[1.0],\"data_offsets\":[0,4]}}", 4,
           "'1.0' is not an integer");
    reject("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4e0]}}", 4,
           "'4e0' is not an integer");
    /* ... but digits and dots inside strings are names, not numbers */
    {
        size_t l2;
        unsigned char *b2 = image("{\"layer1.0.w\":{\"dtype\":\"F32\",\"shape\":[1],"
                                  "\"data_offsets\":[0,4]}}",
                                  4, &l2);
        gb_st_t *ok = gb_st_parse(b2, l2, err, sizeof(err));
        CHECKF(ok != NULL, "%s", err);
        gb_st_close(&ok);
        free(b2);
    }
    reject("{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 4,
           "at most");
    reject("{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,4]}}",
           4, "overflow");
    reject("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}}", 4, "two");
    reject("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,0]}}", 4,
           "end before they begin");
    reject("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,8]}}", 4, "outside");
    reject("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}", 4, "bytes for");
    /* the tiling of the buffer */
    reject("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8, "gap");
    reject("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
           "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
           8, "overlap");
    reject("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 6, "after the last");
    reject("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
           "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
           8, "twice");
}

static void test_roundtrip(void) {
    char dir[] = "/tmp/gb_st_XXXXXX";
    CHECK(mkdtemp(dir));
    char path[256];
    snprintf(path, sizeof(path), "%s/t.safetensors", dir);
    float a[6] = {1, 2, 3, 4, 5, 6};
    int64_t s = 42, sa[2] = {2, 3};
    gb_st_writer_t *w = gb_st_writer_new();
    CHECK(w);
    CHECK(gb_st_writer_add(w, "x.weight", GB_ST_F32, 2, sa, a, err, sizeof(err)) == 0);
    CHECK(gb_st_writer_add(w, "n\"q", GB_ST_I64, 0, NULL, &s, err, sizeof(err)) == 0);
    CHECK(gb_st_writer_add(w, "x.weight", GB_ST_F32, 2, sa, a, err, sizeof(err)) == -1);
    CHECK(gb_st_writer_add(w, "", GB_ST_F32, 2, sa, a, err, sizeof(err)) == -1);
    int64_t neg[1] = {-1};
    CHECK(gb_st_writer_add(w, "neg", GB_ST_F32, 1, neg, a, err, sizeof(err)) == -1);
    CHECK(gb_st_writer_meta(w, "producer", "test", err, sizeof(err)) == 0);
    CHECK(gb_st_writer_write(w, path, err, sizeof(err)) == 0);
    gb_st_writer_destroy(&w);
    CHECK(w == NULL);
    gb_st_t *st = gb_st_open(path, err, sizeof(err));
    CHECKF(st, "%s", err);
    const gb_st_tensor_t *t = gb_st_find(st, "x.weight");
    CHECK(t && t->dtype == GB_ST_F32 && memcmp(t->data, a, sizeof(a)) == 0);
    t = gb_st_find(st, "n\"q");
    CHECK(t && t->dtype == GB_ST_I64 && t->ndim == 0 && memcmp(t->data, &s, 8) == 0);
    CHECK(strcmp(gb_st_metadata(st, "producer"), "test") == 0);
    gb_st_close(&st);
    /* the data starts 8-byte aligned */
    FILE *f = fopen(path, "rb");
    CHECK(f);
    unsigned char l8[8];
    CHECK(fread(l8, 1, 8, f) == 8);
    fclose(f);
    CHECK(l8[0] % 8 == 0);
    /* truncated on disk */
    CHECK(truncate(path, 20) == 0);
    CHECK(gb_st_open(path, err, sizeof(err)) == NULL && strstr(err, path));
    unlink(path);
    CHECK(gb_st_open(path, err, sizeof(err)) == NULL && strstr(err, "No such file"));
    /* an unwritable destination */
    w = gb_st_writer_new();
    snprintf(path, sizeof(path), "%s/missing/t.safetensors", dir);
    CHECK(gb_st_writer_write(w, path, err, sizeof(err)) == -1);
    gb_st_writer_destroy(&w);
    rmdir(dir);
    CHECK(gb_st_dtype_parse("BF16") == GB_ST_BF16 && gb_st_dtype_parse("f32") == -1);
    CHECK(gb_st_dtype_size(GB_ST_F64) == 8 && gb_st_dtype_name(GB_ST_NDTYPES) == NULL);
}

static void write_small(const char *path, float v, int expect_ok) {
    float a[4] = {v, v, v, v};
    int64_t sh[1] = {4};
    gb_st_writer_t *w = gb_st_writer_new();
    CHECK(w && gb_st_writer_add(w, "a", GB_ST_F32, 1, sh, a, err, sizeof(err)) == 0);
    int rc = gb_st_writer_write(w, path, err, sizeof(err));
    CHECKF(expect_ok ? rc == 0 : rc == -1, "write %s: rc %d (%s)", path, rc, err);
    gb_st_writer_destroy(&w);
}

static float first_value(const char *path) {
    gb_st_t *st = gb_st_open(path, err, sizeof(err));
    CHECKF(st, "%s", err);
    float v = NAN;
    const gb_st_tensor_t *t = st ? gb_st_find(st, "a") : NULL;
    if (t) memcpy(&v, t->data, sizeof(v));
    gb_st_close(&st);
    return v;
}

/* no PATH.tmp.* left in dir */
static int leftovers(const char *dir) {
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        n += strstr(e->d_name, ".tmp.") != NULL;
    if (d) closedir(d);
    return n;
}

/* Runs fn(arg) in a child with stderr into buf: the child's wait status. */
static int in_child(void (*fn)(void *), void *arg, char *buf, size_t len) {
    int pfd[2];
    CHECK(pipe(pfd) == 0);
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        close(pfd[0]);
        dup2(pfd[1], STDERR_FILENO);
        fn(arg);
        _exit(0);
    }
    close(pfd[1]);
    size_t n = 0;
    ssize_t k;
    char rest[4096];
    while ((k = n + 1 < len ? read(pfd[0], buf + n, len - 1 - n)
                            : read(pfd[0], rest, sizeof rest)) > 0)
        if (n + 1 < len) n += (size_t)k; /* the rest drained: a long report must not get SIGPIPE */
    buf[n] = '\0';
    close(pfd[0]);
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid);
    return status;
}

static void read_all(void *arg) {
    const gb_st_tensor_t *t = arg;
    volatile unsigned char sum = 0;
    for (size_t i = 0; i < t->nbytes; i++)
        sum += ((const unsigned char *)t->data)[i];
    (void)sum;
}

static void bus_by_kill(void *arg) {
    (void)arg;
    raise(SIGBUS);
}

/* a mapping that is not the reader's, cut short and touched */
static void bus_elsewhere(void *arg) {
    const char *path = arg;
    int fd = open(path, O_RDWR);
    unsigned char *m = mmap(NULL, 1 << 16, PROT_READ, MAP_SHARED, fd, 0);
    if (fd < 0 || m == MAP_FAILED || ftruncate(fd, 0) != 0) _exit(3);
    volatile unsigned char c = m[100];
    (void)c;
}

static int died_of_bus(int status, const char *stderr_text) {
    if (strstr(stderr_text, "cut short")) return 0;
#if defined(__SANITIZE_ADDRESS__)
    if (WIFEXITED(status) && WEXITSTATUS(status) != 0 && strstr(stderr_text, "BUS")) return 1;
#endif
    return WIFSIGNALED(status) && WTERMSIG(status) == SIGBUS;
}

/* Another process truncates a file while it is loaded: the run stops with
 * the file's name and exit status 1 (it died of "Bus error"). */
static void test_truncated_while_read(const char *dir) {
    char p[256], q[256], buf[1024];
    snprintf(p, sizeof(p), "%s/cut.safetensors", dir);
    static float big[1 << 16]; /* 256 KiB of data: many pages */
    int64_t sh[1] = {1 << 16};
    gb_st_writer_t *w = gb_st_writer_new();
    CHECK(w && gb_st_writer_add(w, "a", GB_ST_F32, 1, sh, big, err, sizeof(err)) == 0);
    CHECKF(gb_st_writer_write(w, p, err, sizeof(err)) == 0, "%s", err);
    gb_st_writer_destroy(&w);
    gb_st_t *st = gb_st_open(p, err, sizeof(err));
    CHECKF(st, "%s", err);
    const gb_st_tensor_t *t = st ? gb_st_find(st, "a") : NULL;
    CHECK(t && t->nbytes == sizeof(big));
    CHECK(truncate(p, 4096) == 0);
    int s = in_child(read_all, (void *)t, buf, sizeof(buf));
    CHECKF(WIFEXITED(s) && WEXITSTATUS(s) == 1, "status %#x, stderr '%s'", s, buf);
    CHECKF(strstr(buf, p) && strstr(buf, "cut short"), "stderr '%s'", buf);
    /* any other SIGBUS keeps its action, sent by kill or a fault elsewhere:
     * the default kills; under ASan its handler reports "BUS" and exits */
    s = in_child(bus_by_kill, NULL, buf, sizeof(buf));
    CHECKF(died_of_bus(s, buf), "kill: status %#x, stderr '%s'", s, buf);
    snprintf(q, sizeof(q), "%s/other", dir);
    FILE *f = fopen(q, "wb");
    CHECK(f && fwrite(big, 1, 1 << 16, f) == 1 << 16 && fclose(f) == 0);
    s = in_child(bus_elsewhere, q, buf, sizeof(buf));
    CHECKF(died_of_bus(s, buf), "fault: status %#x, stderr '%s'", s, buf);
    gb_st_close(&st);
    /* closed: the slot is free again, nothing guards the old range */
    unlink(q);
    unlink(p);
}

static void test_files(void) {
    char dir[] = "/tmp/gb_stf_XXXXXX", p[256], q[256];
    CHECK(mkdtemp(dir));
    /* reading what is not a regular file */
    CHECK(gb_st_open(dir, err, sizeof(err)) == NULL && strstr(err, "is a directory"));
    snprintf(p, sizeof(p), "%s/fifo", dir);
    CHECK(mkfifo(p, 0600) == 0);
    /* no writer: a blocking open would hang here */
    CHECKF(gb_st_open(p, err, sizeof(err)) == NULL && strstr(err, "pipe or FIFO"), "%s", err);
    /* ... and saving over it is refused, the FIFO stays */
    write_small(p, 1, 0);
    CHECKF(strstr(err, "pipe or FIFO"), "%s", err);
    struct stat sb;
    CHECK(lstat(p, &sb) == 0 && S_ISFIFO(sb.st_mode));
    unlink(p);
    write_small(dir, 1, 0);
    CHECK(strstr(err, "is a directory"));
    /* a link and a file planted at the old temporary name, PATH.tmp.PID (a
     * shared directory): neither written through nor taken as the file */
    snprintf(p, sizeof(p), "%s/planted.safetensors", dir);
    snprintf(q, sizeof(q), "%s/victim", dir);
    char tp[300];
    snprintf(tp, sizeof(tp), "%s.tmp.%ld", p, (long)getpid());
    FILE *vf = fopen(q, "w");
    CHECK(vf && fputs("untouched", vf) >= 0 && fclose(vf) == 0);
    CHECK(symlink(q, tp) == 0);
    write_small(p, 7, 1);
    char vb[32] = "";
    vf = fopen(q, "r");
    CHECK(vf && fgets(vb, sizeof(vb), vf) && fclose(vf) == 0);
    CHECKF(strcmp(vb, "untouched") == 0, "the save wrote through a planted link: %s", vb);
    CHECK(lstat(tp, &sb) == 0 && S_ISLNK(sb.st_mode) && first_value(p) == 7);
    unlink(tp);
    CHECK(mknod(tp, S_IFREG | 0666, 0) == 0 && chmod(tp, 0666) == 0);
    write_small(p, 8, 1);
    CHECK(lstat(p, &sb) == 0 && (sb.st_mode & 0777) != 0666 && first_value(p) == 8);
    unlink(tp);
    unlink(q);
    unlink(p);
    /* a torch.save checkpoint (zip, or a bare pickle) is named as such */
    snprintf(p, sizeof(p), "%s/w.pt", dir);
    const char *heads[2] = {"PK\x03\x04 torch zip archive......", "\x80\x02 an old pickle....."};
    for (int i = 0; i < 2; i++) {
        FILE *f = fopen(p, "wb");
        size_t hn = strlen(heads[i]);
        CHECK(f && fwrite(heads[i], 1, hn, f) == hn && fclose(f) == 0);
        CHECKF(gb_st_open(p, err, sizeof(err)) == NULL && strstr(err, "torch.save"), "%s", err);
    }
    unlink(p);
    /* a huge file with a wrong header is refused from its first page, not
     * read whole first (it took 44 s and 3.25 GB for 3 GB; 50 GB said "out
     * of memory"): 8 GB, sparse, a header that lies about its length */
    snprintf(p, sizeof(p), "%s/huge.safetensors", dir);
    {
        FILE *f = fopen(p, "wb");
        static const unsigned char bad[16] = {16,  0,   0,   0,   0,   0,   0,   0,
                                              '{', '"', 'a', '"', ':', '1', '}', 0};
        CHECK(f && fwrite(bad, 1, sizeof(bad), f) == sizeof(bad) && fclose(f) == 0);
        CHECK(truncate(p, (off_t)8 << 30) == 0);
        struct rusage r0, r1;
        getrusage(RUSAGE_SELF, &r0);
        CHECKF(gb_st_open(p, err, sizeof(err)) == NULL && strstr(err, "header"), "%s", err);
        getrusage(RUSAGE_SELF, &r1);
        CHECKF(r1.ru_maxrss - r0.ru_maxrss < 64 * 1024, "peak RSS grew %ld KiB",
               r1.ru_maxrss - r0.ru_maxrss);
    }
    unlink(p);
    /* a save through a symbolic link writes its target; the link stays */
    snprintf(p, sizeof(p), "%s/target.safetensors", dir);
    snprintf(q, sizeof(q), "%s/link.safetensors", dir);
    write_small(p, 1, 1);
    CHECK(symlink("target.safetensors", q) == 0);
    write_small(q, 2, 1);
    CHECK(lstat(q, &sb) == 0 && S_ISLNK(sb.st_mode));
    CHECK(first_value(p) == 2 && first_value(q) == 2);
    CHECK(gb_st_check_writable(q, err, sizeof(err)) == 0);
    unlink(p);
    /* a dangling link is refused up front */
    CHECK(gb_st_check_writable(q, err, sizeof(err)) == -1 && strstr(err, "symbolic link"));
    unlink(q);
    snprintf(q, sizeof(q), "%s/missing/x.safetensors", dir);
    CHECK(gb_st_check_writable(q, err, sizeof(err)) == -1 && strstr(err, "missing") &&
          strstr(err, "No such file"));
    /* a disk that fills up mid-write (RLIMIT_FSIZE stands in for it): an
     * error naming the file, the old contents whole, no temporary left */
    write_small(p, 3, 1);
    struct rlimit old, lim;
    CHECK(getrlimit(RLIMIT_FSIZE, &old) == 0);
    void (*prev)(int) = signal(SIGXFSZ, SIG_IGN);
    lim = old;
    lim.rlim_cur = 64; /* the header alone is longer */
    CHECK(setrlimit(RLIMIT_FSIZE, &lim) == 0);
    write_small(p, 4, 0);
    CHECK(setrlimit(RLIMIT_FSIZE, &old) == 0);
    signal(SIGXFSZ, prev);
    CHECKF(strstr(err, p) && strstr(err, "unchanged"), "%s", err);
    CHECK(first_value(p) == 3 && leftovers(dir) == 0);
    unlink(p);
    test_truncated_while_read(dir);
    CHECK(rmdir(dir) == 0);
}

int main(void) {
    test_files();
    test_parse_good();
    test_parse_bad();
    test_roundtrip();
    return 0;
}
