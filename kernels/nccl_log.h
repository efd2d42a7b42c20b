/* nccl_log.h - what NCCL says it used, read from its INFO log (pure C, no
 * NCCL needed: unit-tested on sample lines, linked into the CUDA backend).
 *
 * With NCCL_DEBUG=INFO and NCCL_DEBUG_SUBSYS=INIT,P2P,SHM,NET,GRAPH, NCCL
 * logs one line per channel connection, e.g. (2.18 and later; older
 * versions print "Channel 00 :" and bus ids in the brackets):
 *   host:12:34 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read
 *   host:12:34 [0] NCCL INFO Channel 02/0 : 0[0] -> 1[1] via P2P/IPC
 *   host:12:34 [0] NCCL INFO Channel 00 : 2[a000] -> 3[b000] via P2P/direct pointer
 *   host:12:34 [1] NCCL INFO Channel 00/0 : 1[1] -> 0[0] via SHM/direct/direct
 *   host:12:34 [0] NCCL INFO Channel 07/0 : 0[0] -> 2[0] [receive] via NET/IB/3/GDRDMA
 *   host:12:34 [0] NCCL INFO Channel 01/0 : 0[0] -> 2[0] [send] via NET/Socket/0
 *   host:12:34 [0] NCCL INFO CollNet 00/0 : 0 [send] via COLLNET/SHARP/0/GDRDMA
 * plus the channel summary ("16 coll channels, 16 collnet channels, 16 nvls
 * channels, 32 p2p channels, ...": only its nvls count means something,
 * NCCL 2.19+ prints the ring count as the collnet one; an NVLS
 * communicator also logs "NVLS comm 0x... headRank ..."), and the topology search ("Pattern 4,
 * crossNic 0, nChannels 4, bw 24.000000/24.000000, type NVL/PIX, sameChannels 0": the path type
 * inside the node, then to the network; NVL is NVLink). Transports are named as the log names them:
 * P2P/IPC, P2P/CUMEM, P2P/direct, P2P/MNNVL, P2P/indirect, SHM, NET/IB, NET/Socket, NET (another
 * network plugin), NVLS, CollNet. 2.28.9 also prints (src/transport/p2p.cc:393, :406)
 *   host:12:34 [0] NCCL INFO Channel 00/0 : 0[0] -> 4[0] via P2P/MNNVL/read
 *   host:12:34 [0] NCCL INFO Channel 00/0 : 0[0] -> 3[3] via P2P/indirect/1[1]/read
 */
#ifndef GB_NCCL_LOG_H
#define GB_NCCL_LOG_H

#include <stddef.h>

enum {
    GB_NT_P2P_IPC = 0,
    GB_NT_P2P_CUMEM,
    GB_NT_P2P_DIRECT,
    GB_NT_P2P_MNNVL,    /* cuMem over multi-node NVLink (2.20+) */
    GB_NT_P2P_INDIRECT, /* through an intermediate GPU, over NVLink */
    GB_NT_SHM,
    GB_NT_NET_IB,
    GB_NT_NET_SOCKET,
    GB_NT_NET_OTHER,
    GB_NT_NVLS,
    GB_NT_COLLNET,
    GB_NT_COUNT
};

typedef struct gb_nccl_report {
    unsigned transports; /* bit (1u << GB_NT_*) per transport seen */
    int connections;     /* "Channel .. via .." lines */
    int nvl_paths;       /* topology searches whose intra-node type was NVLink (NVL, NVB) */
    int pci_paths;       /* ... whose intra-node type was PCIe or the host (PIX..SYS) */
    int nvls_supported;  /* "NVLS multicast support is available" seen */
    int info_lines;      /* lines with "NCCL INFO" */
} gb_nccl_report_t;

void gb_nccl_report_init(gb_nccl_report_t *r);
/* One log line (need not be NUL-terminated; a trailing newline is fine). */
void gb_nccl_log_line(gb_nccl_report_t *r, const char *line, size_t len);
/* Every line of a file, or of every file whose name starts with `prefix`
 * in `dir` (NCCL_DEBUG_FILE's %p/%h expand per process). Returns the number
 * of files read, or -1 with a reason. */
int gb_nccl_log_file(gb_nccl_report_t *r, const char *path, char *err, size_t errlen);
int gb_nccl_log_dir(gb_nccl_report_t *r, const char *dir, const char *prefix, char *err,
                    size_t errlen);

/* Removes NCCL log directories the CUDA backend made under tmp
 * ("gb-nccl-XXXXXX", this user's) last changed more than max_age_s
 * seconds ago: their "nccl.*.log" files, then the directory (one holding
 * anything else is left). A result record names its run's directory
 * (details.nccl_log); every data-parallel GPU run made one and none was
 * removed. Returns the number of directories removed. */
int gb_nccl_log_prune(const char *tmp, long max_age_s);

/* A new NCCL log directory, "gb-nccl-XXXXXX" under $TMPDIR (under /tmp
 * when TMPDIR is unset, or holds a character that JSON or NCCL_DEBUG_FILE
 * would read as their own: '"', a backslash, '%', a tab or a line break), its
 * older siblings pruned (a week). With $GB_NCCL_LOG_DIR naming a
 * directory of that kind, that one instead: a launcher's replica
 * processes log into one, so rank 0 reads every local rank's lines.
 * 1 when it made one, 0 when it took $GB_NCCL_LOG_DIR's, -1 with the
 * reason. */
int gb_nccl_log_newdir(char *dir, size_t len, char *err, size_t errlen);

const char *gb_nccl_transport_name(int t);
/* JSON array of the transports seen, e.g. ["P2P/CUMEM","NET/IB"]; -1 when
 * it did not fit. */
int gb_nccl_transports_json(const gb_nccl_report_t *r, char *buf, size_t len);

/* The interconnect the job really used, in the words of the result record:
 *   "nvlink" - NVLS, P2P/MNNVL or P2P/indirect (NVLink by what they are),
 *              or P2P with an NVLink path (from the topology search;
 *              without one, nvlink_hint: the backend saw NVLink between the
 *              GPUs);
 *   "pcie"   - P2P over PCIe, or SHM (through host memory, over PCIe);
 *   "net"    - only network transports (one GPU per node);
 *   "none"   - no connection at all (one GPU). */
const char *gb_nccl_interconnect(const gb_nccl_report_t *r, int nvlink_hint);

#endif
