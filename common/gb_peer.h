/* gb_peer.h - the words a worker's error carries when what failed is
 * another rank of a multi-node job, not this one: its connection closed or
 * was reset, it sent or took nothing for the ring's timeout (the CPU tcp
 * ring, kernels/ring.c), or NCCL said ncclRemoteError ("remote process
 * exited or there was a network error", kernels/cuda). They are written
 * where the cause is known (an errno, an ncclResult_t), so that nothing
 * downstream reads a library's wording: the coordinator holds a rank's
 * failure that carries them for the peer's own report or its agent's loss
 * (coordinator.c, docs/scaling.md). Header only: the kernels, the CUDA
 * backend and the coordinator all include it. */
#ifndef GB_PEER_H
#define GB_PEER_H

#include <string.h>

#define GB_PEER_GONE "peer gone: "

/* 1 when a worker's error says another rank went away. */
static inline int gb_peer_gone(const char *err) {
    return err != NULL && strstr(err, GB_PEER_GONE) != NULL;
}

#endif
