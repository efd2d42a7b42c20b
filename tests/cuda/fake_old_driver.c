/* fake_old_driver.c - built as libcuda.so.1 in a folder of its own: a CUDA
 * driver that says it supports CUDA 12.4 (driver 550) and nothing more, so
 * the CUDA 13 runtime refuses it with cudaErrorInsufficientDriver. Put first
 * on LD_LIBRARY_PATH, it lets a machine without a GPU see what a GPU machine
 * with an old driver sees (tests/cuda/old_driver.sh). */
int cuDriverGetVersion(int *version);
int cuInit(unsigned int flags);

int cuDriverGetVersion(int *version) {
    *version = 12040;
    return 0;
}

int cuInit(unsigned int flags) {
    (void)flags;
    return 0;
}
