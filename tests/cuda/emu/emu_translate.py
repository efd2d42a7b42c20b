#!/usr/bin/env python3
"""emu_translate.py IN.cu OUT.cpp - kernels.cu for the CPU emulator
(cuda_emu.h): each launch `k<...><<<grid, block, shmem, stream>>>(args)`
becomes `GB_EMU_LAUNCH((k<...>), grid, block, shmem, stream)(args)`, and
cuda_emu.h is included first. Planted faults (MUTANTS) are spliced in,
each off unless GB_EMU_MUTANT names it at run time: test_cuda_emu must fail
under every one. Fails when a launch is left over or a fault's text is not
found exactly once (kernels.cu changed: update the table)."""
import re
import sys

# (number, what it breaks, kind, unique context in kernels.cu, the original
# text inside it, the faulty text). kind "expr": the two expressions are
# chosen at run time; "stmt": the two statements (never a declaration).
MUTANTS = [
    (1, "NCHW->NHWC reads h and w swapped", "expr",
     "float v = c < 3 ? src[(((size_t)b * 3 + c) * h + y) * w + x] : 0.0f;",
     "src[(((size_t)b * 3 + c) * h + y) * w + x]", "src[(((size_t)b * 3 + c) * w + x) * h + y]"),
    (2, "softmax warp reduction over 16 lanes only", "expr",
     "for (int off = 16; off > 0; off >>= 1) {", "16", "8"),
    (3, "mean-loss tree without its barrier", "stmt",
     "part[threadIdx.x] += part[threadIdx.x + off];\n        __syncthreads();",
     "__syncthreads();", ""),
    (4, "BN statistics merge one row phase short", "expr",
     "for (int j = 1; j < kBnRows; j++) {\n            gb_moments_t o", "kBnRows", "kBnRows - 1"),
    (5, "BN backward partials at the channel tile, not the row chunk", "expr",
     "float *pp = partials + ((size_t)blockIdx.y * c + ch) * 2;", "blockIdx.y", "blockIdx.x"),
    (6, "max-pool backward forgets the padding in x", "expr",
     "ox * s - p + code % k == ix", "ox * s - p + code % k == ix", "ox * s + code % k == ix"),
    (7, "softmax lanes past k leave before the shuffles", "stmt",
     "if (row >= n) return;", "if (row >= n) return;", "if (row >= n || lane >= k) return;"),
    (8, "SGD weight copy takes the momentum", "expr",
     "if (wcopy) st(wcopy, i, p);", "st(wcopy, i, p)", "st(wcopy, i, b)"),
    (9, "finite check without the block vote", "expr",
     "if (__syncthreads_or(bad) && threadIdx.x == 0)", "__syncthreads_or(bad)", "bad"),
    # the 16-byte batch-norm kernels (the _v kernels, their finalize, launchers)
    (10, "BN 16-byte statistics: a lane sums its neighbour's channel", "expr",
     "float d = ld(a.v, j) - shift[j];", "ld(a.v, j)", "ld(a.v, (j + 1) % V)"),
    (11, "BN 16-byte statistics: the block's tree one merge step short", "expr",
     "for (int st = tree_top(rows); st > 0; st >>= 1) {\n        __syncthreads();\n"
     "        if (ty < st && ty + st < rows) {\n            int o = tid + st * blockDim.x;\n"
     "            float n = sn[tid];", "st > 0", "st > 1"),
    (12, "BN 16-byte statistics: the two-row pass counts one row", "expr",
     "cnt += 2.0f;", "2.0f", "1.0f"),
    (13, "BN 16-byte forward apply: a lane's shift from the next lane", "expr",
     "b[j] = coef[c + ch0 + j];", "coef[c + ch0 + j]", "coef[c + ch0 + (j ^ 1)]"),
    (14, "BN 16-byte backward partials at the channel tile, not the row chunk", "expr",
     "float *pp = partials + ((size_t)blockIdx.y * c + (size_t)vi * V) * 2;", "blockIdx.y",
     "blockIdx.x"),
    (15, "BN 16-byte backward apply strides one block's rows, not the grid's", "expr",
     "k3[j] = coef[2 * c + ch0 + j];\n    }\n    size_t step = (size_t)gridDim.y * blockDim.y * c;",
     "(size_t)gridDim.y * blockDim.y * c", "(size_t)blockDim.y * c"),
    (16, "BN finalize: the slices' tree one merge step short", "expr",
     "for (int st = blockDim.y / 2; st > 0; st >>= 1) {\n        __syncthreads();\n"
     "        if (ty < st) {\n            int o", "st > 0", "st > 1"),
    (17, "BN backward finalize: a slice skips every other chunk of its own", "expr",
     "for (int r = ty; r < rchunks; r += blockDim.y) {\n            sg +=", "r += blockDim.y",
     "r += 2 * blockDim.y"),
    (18, "BN launchers take 16-byte accesses on misaligned pointers", "expr",
     "c % vec_t<T>::n == 0 && (aligned16(ptrs) && ...);", "(aligned16(ptrs) && ...)", "true"),
    (19, "BN 16-byte backward tree without its barrier", "stmt",
     "for (int st = tree_top(rows); st > 0; st >>= 1) {\n        __syncthreads();\n"
     "        if (ty < st && ty + st < rows) {\n            int o = tid + st * blockDim.x;\n"
     "            GB_UNROLL", "__syncthreads();", ""),
    # the fused step's kernels
    (20, "fused finalize: the prologue's bias written over its scale", "expr",
     "st(pre, c + ch, f.b);", "c + ch", "ch"),
    (21, "block end 16-byte: every channel of a vector takes the first one's residual scale",
     "expr", "za[j] = zc ? zc[ch0 + j] : 1.0f;", "zc[ch0 + j]", "zc[ch0]"),
    (22, "block end one element: the projection's shift left out", "expr",
     "float za = zc ? zc[ch] : 1.0f, zb = zc ? zc[c + ch] : 0.0f;\n        st(y, i,",
     "zc[c + ch]", "0.0f"),
    (23, "backward's recomputed mask without the prologue's bias", "expr",
     "if (recompute) return gb_prologue_passes(x, pa, pb) ? dy : 0.0f;", "pb", "0.0f"),
    (24, "block end launcher takes 16 bytes on misaligned tensors", "expr",
     "bn_vec_ok<T>(c, x, z, y));\n        if (sh.vec)\n            k_bn_fwd_apply_v<T, true>",
     "bn_vec_ok<T>(c, x, z, y)", "c % vec_t<T>::n == 0"),
]


def splice(src):
    for num, what, kind, ctx, orig, bad in MUTANTS:
        if src.count(ctx) != 1 or orig not in ctx:
            sys.exit("emu_translate: fault %d (%s): its context is in kernels.cu %d times"
                     % (num, what, src.count(ctx)))
        if kind == "expr":
            alt = "(gb_emu::mutant() == %d ? (%s) : (%s))" % (num, bad, orig)
        else:
            alt = "if (gb_emu::mutant() == %d) { %s } else { %s }" % (num, bad, orig)
        src = src.replace(ctx, ctx.replace(orig, alt, 1))
    return src


def main():
    if sys.argv[1:] == ["--count"]:  # for CMake: one test per planted fault
        print(len(MUTANTS))
        return
    src = open(sys.argv[1]).read()
    src = splice(src)
    pat = re.compile(r'(\bk_\w+(?:<[^<>();]*>)?)\s*<<<(.*?)>>>\s*\(', re.S)
    out, n = pat.subn(lambda m: 'GB_EMU_LAUNCH((%s), %s)(' % (m.group(1), ' '.join(m.group(2).split())), src)
    if '<<<' in out or n == 0:
        sys.exit('emu_translate: a launch was not translated (%d done)' % n)
    with open(sys.argv[2], 'w') as f:
        f.write('/* generated by emu_translate.py from %s: do not edit */\n' % sys.argv[1])
        f.write('#include "cuda_emu.h"\n')
        f.write(out)


if __name__ == "__main__":
    main()
