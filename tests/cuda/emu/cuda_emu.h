/* cuda_emu.h - runs the CUDA backend's own kernels (kernels.cu) on the CPU,
 * so their indexing, reductions and launch shapes are tested where there is
 * no GPU (test_cuda_emu). Not a CUDA implementation: just enough of the
 * execution model for these kernels, kept strict where a GPU would be.
 *
 * emu_translate.py turns each `k<<<grid, block, shmem, stream>>>(args)` of
 * kernels.cu into `gb_emu::launch(k, grid, block, shmem, stream)(args)` and
 * includes this header first. A launch runs the grid's blocks one after
 * another; a block's threads are fibers on one OS thread, each run until it
 * exits or waits at a barrier (switching, below):
 *   - __syncthreads / __syncthreads_or: released when every live thread of
 *     the block waits there (exited threads count as arrived, as on sm_70+);
 *   - __shfl_sync / __shfl_xor_sync (full mask only): released when all 32
 *     lanes of the warp wait; a shuffle in a warp where a lane has exited is
 *     an error (undefined on a GPU), as is any barrier that can never be
 *     released (a deadlock on a GPU): the emulator prints it and aborts;
 *   - __shared__ variables are static, so shared by the block's threads
 *     (blocks never overlap);
 *   - launch limits as on sm_70..sm_90: at most 1024 threads per block,
 *     block.z <= 64, grid.y and grid.z <= 65535, grid.x < 2^31, no zero
 *     dimension: a bad launch sets the error cudaGetLastError returns;
 *   - "device" pointers are host pointers; streams are ignored (every launch
 *     completes before it returns);
 *   - emu_translate.py also plants faults in the kernels, each switched on
 *     at run time by GB_EMU_MUTANT=k, so the test shows that it fails.
 * Threads of a block run in order between barriers (first to last, or last
 * to first with GB_EMU_ORDER=reverse: a race between threads of one barrier
 * phase usually shows as a different result in one of the two orders), so
 * the emulator finds many races but proves none absent (compute-sanitizer's
 * racecheck on a GPU does that).
 *
 * Switching: fiber i keeps stack i for the whole process and runs thread i
 * of every block, one body after another. It is entered once through
 * ucontext (makecontext, swapcontext) and from then on by the compiler's
 * __builtin_setjmp/__builtin_longjmp, which make no system call: glibc's
 * swapcontext makes a sigprocmask call at every switch, and that was 90% of
 * the emulator's time (test_cuda_emu took 21 s, 10 of them in the kernel;
 * now 2 s). Under ASan each switch is announced
 * (__sanitizer_start_switch_fiber), so it knows which stack it is on. */
#ifndef GB_CUDA_EMU_H
#define GB_CUDA_EMU_H

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <ucontext.h>
#include <unistd.h>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#define GB_EMU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define GB_EMU_ASAN 1
#endif
#endif
#ifdef GB_EMU_ASAN
#include <sanitizer/common_interface_defs.h>
#endif

#undef __global__
#undef __device__
#undef __host__
#undef __forceinline__
#undef __shared__
#undef __launch_bounds__
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__      static
#define __launch_bounds__(...)

namespace gb_emu {

enum { READY, WAIT_BLOCK, WAIT_WARP, DONE };

struct fiber {
    void *at[5];   /* where it waits, after its first entry (__builtin_setjmp) */
    ucontext_t uc; /* its first entry only */
    char *stack;
    uint3 tid;
    int state;
    bool started;
    void *fake; /* ASan's fake stack while it is switched out */
};

struct world {
    void *sched[5];      /* the scheduler (run_block) */
    ucontext_t sched_uc; /* written by a fiber's first entry, never resumed */
    void *sched_fake = nullptr;
    const void *sched_bottom = nullptr; /* the OS thread's stack (ASan) */
    size_t sched_size = 0;
    std::vector<fiber *> f; /* f[i] runs thread i; never moved; freed at exit */
    fiber *cur = nullptr;
    std::function<void()> body;
    uint3 block;
    dim3 bdim, gdim;
    uint64_t xch[1024];
    int or_acc = 0, or_result = 0;
    cudaError_t last = cudaSuccess;
    const char *kernel = "";
    ~world() {
        for (fiber *x : f) {
            free(x->stack);
            delete x;
        }
    }
};

inline world &w() {
    static world W;
    return W;
}

enum { kStack = 256 * 1024 };

/* a fault a GPU would hang or misbehave on: said, and the process ends
 * with status 70 (a plain test failure, not a crash). _exit: called from a
 * fiber, exit's static destructors would free the stack it runs on. */
inline void die(const char *what) {
    fprintf(stderr, "cuda_emu: %s in %s (block %u,%u,%u)\n", what, w().kernel, w().block.x,
            w().block.y, w().block.z);
    fflush(NULL);
    _exit(70);
}

/* GB_EMU_MUTANT=k switches on planted fault k of emu_translate.py (0: none),
 * so test_cuda_emu can show it fails when a kernel is wrong */
inline int mutant() {
    static int m = -1;
    if (m < 0) {
        const char *e = getenv("GB_EMU_MUTANT");
        m = e ? atoi(e) : 0;
    }
    return m;
}

/* GB_EMU_ORDER=reverse runs a block's threads last to first between
 * barriers: a kernel whose threads read what others write in the same
 * barrier phase (a race on a GPU) gives another result in one of the two
 * orders, so test_cuda_emu runs in both. */
inline int reverse_order() {
    static int r = -1;
    if (r < 0) {
        const char *e = getenv("GB_EMU_ORDER");
        r = e && strcmp(e, "reverse") == 0;
    }
    return r;
}

inline unsigned linear(uint3 t) {
    return (t.z * w().bdim.y + t.y) * w().bdim.x + t.x;
}

/* ASan's side of a switch: before it (to the stack at bottom, size bytes;
 * fake: where the leaving side's fake stack is kept) and after it */
inline void switch_begin(void **fake, const void *bottom, size_t size) {
#ifdef GB_EMU_ASAN
    __sanitizer_start_switch_fiber(fake, bottom, size);
#else
    (void)fake, (void)bottom, (void)size;
#endif
}
inline void switch_end(void *fake, const void **bottom_old, size_t *size_old) {
#ifdef GB_EMU_ASAN
    __sanitizer_finish_switch_fiber(fake, bottom_old, size_old);
#else
    (void)fake, (void)bottom_old, (void)size_old;
#endif
}

/* __builtin_longjmp may not be called in the function that set the buffer.
 * Not seen as noreturn (it returns when `to` is null, never the case), and
 * not instrumented: ASan calls __asan_handle_no_return before a noreturn
 * call, and that makes a sigaltstack system call each time. */
[[gnu::noinline, gnu::no_sanitize_address]] inline void jump(void **to) {
    if (to) __builtin_longjmp(to, 1);
}

/* the running fiber waits in `state` until the scheduler resumes it */
inline void yield_as(int state) {
    world &W = w();
    fiber *f = W.cur;
    f->state = state;
    if (__builtin_setjmp(f->at) == 0) {
        switch_begin(&f->fake, W.sched_bottom, W.sched_size);
        jump(W.sched);
    }
    switch_end(f->fake, nullptr, nullptr);
}

/* a fiber's life: the body of each block it is given, then DONE; it never
 * returns (its stack is kept for the next block) */
inline void fiber_main() {
    world &W = w();
    switch_end(nullptr, &W.sched_bottom, &W.sched_size);
    for (;;) {
        W.body();
        yield_as(DONE);
    }
}

/* from the scheduler into fiber f, back when f waits or is done */
inline void resume(fiber *f) {
    world &W = w();
    W.cur = f;
    if (__builtin_setjmp(W.sched) == 0) {
        switch_begin(&W.sched_fake, f->stack, kStack);
        if (!f->started) {
            f->started = true;
            swapcontext(&W.sched_uc, &f->uc); /* the only return is the longjmp */
        } else {
            jump(f->at);
        }
    }
    switch_end(W.sched_fake, nullptr, nullptr);
}

inline void run_block() {
    world &W = w();
    unsigned nt = W.bdim.x * W.bdim.y * W.bdim.z;
    while (W.f.size() < nt) {
        fiber *f = new fiber();
        f->stack = (char *)malloc(kStack);
        if (!f->stack) die("out of memory for fiber stacks");
        getcontext(&f->uc);
        f->uc.uc_stack.ss_sp = f->stack;
        f->uc.uc_stack.ss_size = kStack;
        f->uc.uc_link = nullptr;
        makecontext(&f->uc, fiber_main, 0);
        W.f.push_back(f);
    }
    for (unsigned i = 0; i < nt; i++) {
        fiber &f = *W.f[i];
        f.tid = make_uint3(i % W.bdim.x, (i / W.bdim.x) % W.bdim.y, i / (W.bdim.x * W.bdim.y));
        f.state = READY;
    }
    W.or_acc = 0;
    int rev = reverse_order();
    for (;;) {
        for (unsigned j = 0; j < nt; j++) {
            unsigned i = rev ? nt - 1 - j : j;
            if (W.f[i]->state == READY) resume(W.f[i]);
        }
        unsigned live = 0, at_block = 0, released = 0;
        for (unsigned i = 0; i < nt; i++) {
            live += W.f[i]->state != DONE;
            at_block += W.f[i]->state == WAIT_BLOCK;
        }
        if (live == 0) return;
        for (unsigned w0 = 0; w0 < nt; w0 += 32) {
            unsigned lanes = nt - w0 < 32 ? nt - w0 : 32, waiting = 0, done = 0;
            for (unsigned l = 0; l < lanes; l++) {
                waiting += W.f[w0 + l]->state == WAIT_WARP;
                done += W.f[w0 + l]->state == DONE;
            }
            if (waiting && done) die("a full-mask shuffle in a warp where a lane has exited");
            if (waiting && waiting == lanes) {
                for (unsigned l = 0; l < lanes; l++)
                    W.f[w0 + l]->state = READY;
                released += lanes;
            }
        }
        if (released) continue;
        if (at_block == live) {
            W.or_result = W.or_acc;
            W.or_acc = 0;
            for (unsigned i = 0; i < nt; i++)
                if (W.f[i]->state == WAIT_BLOCK) W.f[i]->state = READY;
            continue;
        }
        die("deadlock: threads wait at different barriers");
    }
}

inline void syncthreads() {
    yield_as(WAIT_BLOCK);
}

inline int syncthreads_or(int pred) {
    w().or_acc |= pred != 0;
    yield_as(WAIT_BLOCK);
    return w().or_result;
}

template <typename T> inline T shfl_from(unsigned mask, T v, unsigned src_lane) {
    if (mask != 0xffffffffu) die("a shuffle with a partial mask (not emulated)");
    static_assert(sizeof(T) <= sizeof(uint64_t), "shuffle of a wide type");
    unsigned me = linear(w().cur->tid), base = me & ~31u;
    uint64_t bits = 0;
    memcpy(&bits, &v, sizeof(T));
    w().xch[me] = bits;
    yield_as(WAIT_WARP);
    T r;
    memcpy(&r, &w().xch[base + (src_lane & 31u)], sizeof(T));
    yield_as(WAIT_WARP); /* nobody overwrites a slot before every lane read */
    return r;
}

template <typename... P> struct launcher {
    void (*k)(P...);
    dim3 g, b;
    const char *name;
    template <typename... A> void operator()(A &&...a) {
        world &W = w();
        bool bad = b.x == 0 || b.y == 0 || b.z == 0 || g.x == 0 || g.y == 0 || g.z == 0 ||
                   (uint64_t)b.x * b.y * b.z > 1024 || b.x > 1024 || b.y > 1024 || b.z > 64 ||
                   g.x > 0x7fffffffu || g.y > 65535 || g.z > 65535;
        if (bad) {
            W.last = cudaErrorInvalidConfiguration;
            return;
        }
        std::function<void()> body = [&]() { k(P(a)...); };
        W.body = body;
        W.kernel = name;
        W.bdim = b;
        W.gdim = g;
        for (unsigned z = 0; z < g.z; z++)
            for (unsigned y = 0; y < g.y; y++)
                for (unsigned x = 0; x < g.x; x++) {
                    W.block = make_uint3(x, y, z);
                    run_block();
                }
    }
};

template <typename... P>
launcher<P...> launch_named(const char *name, void (*k)(P...), dim3 g, dim3 b, size_t shmem = 0,
                            cudaStream_t s = nullptr) {
    (void)s;
    if (shmem) die("dynamic shared memory (not emulated)");
    return launcher<P...>{k, g, b, name};
}

inline cudaError_t get_last_error() {
    cudaError_t e = w().last;
    w().last = cudaSuccess;
    return e;
}

} // namespace gb_emu

#define threadIdx        (gb_emu::w().cur->tid)
#define blockIdx         (gb_emu::w().block)
#define blockDim         (gb_emu::w().bdim)
#define gridDim          (gb_emu::w().gdim)
#define __syncthreads    gb_emu::syncthreads
#define __syncthreads_or gb_emu::syncthreads_or
#define cudaGetLastError gb_emu::get_last_error

template <typename T> inline T __shfl_sync(unsigned mask, T v, int src, int width = 32) {
    (void)width;
    return gb_emu::shfl_from(mask, v, (unsigned)src);
}
template <typename T> inline T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32) {
    (void)width;
    unsigned lane = gb_emu::linear(gb_emu::w().cur->tid) & 31u;
    return gb_emu::shfl_from(mask, v, lane ^ (unsigned)lane_mask);
}
template <typename T> inline T atomicAdd(T *p, T v) {
    T old = *p;
    *p = old + v;
    return old;
}
template <typename T> inline T atomicOr(T *p, T v) {
    T old = *p;
    *p = old | v;
    return old;
}

#define GB_EMU_LAUNCH(k, ...) gb_emu::launch_named(#k, k, __VA_ARGS__)

#endif
