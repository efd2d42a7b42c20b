/* replay.c - runs a fuzz target's LLVMFuzzerTestOneInput over every file of
 * the directories given (the committed seed corpus and the regressions:
 * inputs that once crashed), so every normal and sanitizer test pass
 * replays them without libFuzzer. A failing input aborts, naming itself.
 *
 *   replay_TARGET DIR...   */
#define _POSIX_C_SOURCE 200809L
#include "check.h"
#include "gb_util.h"

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int main(int argc, char **argv) {
    size_t n = 0;
    for (int a = 1; a < argc; a++) {
        DIR *d = opendir(argv[a]);
        if (!d) continue; /* a target without regressions yet */
        for (struct dirent *e; (e = readdir(d));) {
            if (e->d_name[0] == '.') continue;
            char path[4096], err[300];
            snprintf(path, sizeof path, "%s/%s", argv[a], e->d_name);
            char *data = NULL;
            size_t len = 0;
            CHECKF(gb_read_file(path, 16u << 20, &data, &len, err, sizeof err) == 0, "%s", err);
            fprintf(stderr, "replay %s (%zu bytes)\n", path, len);
            /* a copy of exactly len bytes, so ASan sees reads past the end */
            uint8_t *copy = malloc(len ? len : 1);
            CHECK(copy);
            memcpy(copy, data, len);
            free(data);
            LLVMFuzzerTestOneInput(copy, len);
            free(copy);
            n++;
        }
        closedir(d);
    }
    CHECKF(n > 0, "no input found in the directories given");
    printf("%zu input(s) replayed\n", n);
    return 0;
}
