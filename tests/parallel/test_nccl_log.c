/* test_nccl_log.c - the NCCL INFO log parser (kernels/nccl_log.h) on lines
 * in the formats NCCL prints (2.7 to 2.28: "Channel 00 :" and bus ids in
 * older versions, "Channel 00/0 :" and device indices later), from logs
 * people posted with NCCL issues, and the interconnect word each log
 * leads to; then lines rendered from NCCL 2.28.9's own format strings
 * (v2289_*, each citing its source line). */
#define _POSIX_C_SOURCE 200809L
#include "check.h"
#include "nccl_log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static void feed(gb_nccl_report_t *r, const char *const *lines) {
    gb_nccl_report_init(r);
    for (int i = 0; lines[i]; i++)
        gb_nccl_log_line(r, lines[i], strlen(lines[i]));
}

static void check_json(const gb_nccl_report_t *r, const char *want) {
    char buf[256];
    CHECK(gb_nccl_transports_json(r, buf, sizeof(buf)) == 0);
    CHECKF(strcmp(buf, want) == 0, "transports %s, want %s", buf, want);
}

/* 8 GPUs on NVSwitches (H100 HGX), 2.19+: P2P over CUMEM, NVLS */
static const char *const hgx[] = {
    "node1:1234:1301 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.5<0>\n",
    "node1:1234:1301 [0] NCCL INFO NVLS multicast support is available on dev 0\n",
    "node1:1234:1301 [0] NCCL INFO Pattern 4, crossNic 0, nChannels 16, bw 40.000000/40.000000, "
    "type NVL/PIX, sameChannels 1\n",
    "node1:1234:1301 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read\n",
    "node1:1234:1305 [4] NCCL INFO Channel 07/0 : 4[4] -> 5[5] via P2P/CUMEM\n",
    "node1:1234:1301 [0] NCCL INFO Connected all rings\n",
    "node1:1234:1301 [0] NCCL INFO NVLS comm 0x55a7be5601c0 headRank 0 nHeads 8 buffSize 4194304 "
    "memSize 2097152 nvlsPerRankSize 201326592 nvlsTotalSize 1610612736\n",
    "node1:1234:1301 [0] NCCL INFO 32 coll channels, 32 collnet channels, 16 nvls channels, 32 p2p "
    "channels, 32 p2p channels per peer\n",
    NULL};

/* 4 GPUs without NVLink, P2P over PCIe (2.7-era lines: bus ids, IPC) */
static const char *const pcie[] = {
    "gpu3:8811:8830 [1] NCCL INFO Pattern 4, crossNic 0, nChannels 2, speed 12.000000/12.000000, "
    "type PHB/PIX, sameChannels 1\n",
    "gpu3:8811:8830 [1] NCCL INFO Channel 00 : 1[3e000] -> 2[88000] via P2P/IPC\n",
    "gpu3:8811:8830 [1] NCCL INFO Channel 01 : 1[3e000] -> 0[3d000] via P2P/IPC/read\n",
    "gpu3:8811:8830 [1] NCCL INFO 2 coll channels, 0 nvls channels, 2 p2p channels, 2 p2p channels "
    "per peer\n",
    NULL};

/* NCCL_P2P_DISABLE=1 on an NVLink box: shared host memory */
static const char *const shm[] = {
    "pod:77:90 [0] NCCL INFO NCCL_P2P_DISABLE set by environment to 1\n",
    "pod:77:90 [0] NCCL INFO NVLS multicast support is not available on dev 0\n",
    "pod:77:90 [0] NCCL INFO Pattern 4, crossNic 0, nChannels 2, bw 20.000000/20.000000, type "
    "NVL/PIX, "
    "sameChannels 1\n",
    "pod:77:90 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via SHM/direct/direct\n",
    "pod:77:91 [1] NCCL INFO Channel 00/0 : 1[1] -> 0[0] via SHM/direct/direct\n",
    NULL};

/* one GPU per node, two nodes over InfiniBand with GPUDirect RDMA */
static const char *const ib[] = {
    "h20-05:1789225:1789736 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_2:1/IB [RO]; OOB "
    "ibs85f0:192.168.1.10<0>\n",
    "h20-05:1789225:1789736 [0] NCCL INFO Channel 07/0 : 0[0] -> 1[0] [receive] via "
    "NET/IB/3/GDRDMA\n",
    "h20-05:1789225:1789736 [0] NCCL INFO Channel 01/0 : 1[0] -> 0[0] [send] via NET/IB/2/GDRDMA\n",
    NULL};

/* two nodes over TCP sockets, 2 GPUs each with direct pointers (one process) */
static const char *const sock[] = {
    "a:5:6 [0] NCCL INFO Using network Socket\n",
    "a:5:6 [0] NCCL INFO Channel 00 : 2[a000] -> 3[b000] via P2P/direct pointer\n",
    "a:5:6 [0] NCCL INFO Channel 01 : 0[6000] -> 3[b000] [send] via NET/Socket/0\n",
    "a:5:6 [0] NCCL INFO Pattern 4, crossNic 0, nChannels 2, speed 1.2/1.2, type SYS/SYS, "
    "sameChannels 0\n",
    NULL};

/* a network plugin, and CollNet (SHARP) connections in the 2.19+ and the
 * 2.7-era formats; the channel summary's "collnet channels" is the ring
 * count on 2.19+ (printed twice) and must not count */
static const char *const plugin[] = {
    "x:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/AWS Libfabric/0/GDRDMA\n",
    "x:1:2 [0] NCCL INFO 16 coll channels, 16 collnet channels, 0 nvls channels, 16 p2p channels, "
    "2 p2p channels per peer\n",
    "x:1:2 [0] NCCL INFO CollNet 00/0 : 0 [send] via COLLNET/SHARP/0/GDRDMA\n",
    "x:1:2 [0] NCCL INFO Coll 01 : 0 [receive] via COLLNET/SHARP/1\n", NULL};

/* one GPU: nothing connects; noise that must not count */
static const char *const one[] = {
    "solo:9:9 [0] NCCL INFO cudaDriverVersion 12040\n",
    "solo:9:9 [0] NCCL INFO comm 0x5600 rank 0 nranks 1 cudaDev 0 busId 1000 - Init COMPLETE\n",
    "this line mentions via P2P/IPC but is not NCCL's\n",
    "solo:9:9 [0] NCCL WARN Channel 00 : 0[0] -> 1[1] via P2P/IPC (a warning, not INFO)\n", NULL};

/* NCCL 2.28.9's own format strings (the version this project builds
 * against), rendered with realistic values: every line below cites the
 * INFO call in NCCL's tag v2.28.9-1 that prints it. The prefix is
 * "%s:%d:%d " (host, pid, tid) then "[%d] NCCL INFO " (src/debug.cc:349,
 * :363). No 2.28 log from a real run has been seen yet. */

/* 8 H100 on NVSwitches, gpubench's layout (one process, a thread per GPU:
 * same pid, so P2P is a direct pointer), NVLS on */
static const char *const v2289_nvl[] = {
    /* src/misc/param.cc:89 */
    "dgx:4242:4251 [0] NCCL INFO NCCL_NVLS_ENABLE set by environment to 2.\n",
    /* src/transport/nvls.cc:201 */
    "dgx:4242:4251 [0] NCCL INFO NVLS multicast support is available on dev 0 (NVLS_NCHANNELS "
    "16)\n",
    /* src/graph/search.cc:1201, for the ring, tree and NVLS graphs (init.cc:1021, :1029, :1058) */
    "dgx:4242:4251 [0] NCCL INFO Pattern 4, crossNic 0, nChannels 24, bw 40.000000/40.000000, "
    "type NVL/PIX, sameChannels 1\n",
    "dgx:4242:4251 [0] NCCL INFO Pattern 1, crossNic 0, nChannels 24, bw 40.000000/40.000000, "
    "type NVL/PIX, sameChannels 1\n",
    "dgx:4242:4251 [0] NCCL INFO Pattern 5, crossNic 0, nChannels 16, bw 40.000000/40.000000, "
    "type NVL/PIX, sameChannels 0\n",
    /* src/graph/rings.cc:47 via dumpLine (rings.cc:25): no " via " */
    "dgx:4242:4251 [0] NCCL INFO Channel 00/24 : 0 1 2 3 4 5 6 7\n",
    /* src/transport/p2p.cc:386, with and without "/read" */
    "dgx:4242:4251 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/direct pointer/read\n",
    "dgx:4242:4258 [7] NCCL INFO Channel 01/1 : 7[7] -> 0[0] via P2P/direct pointer\n",
    /* src/transport/nvls.cc:340 (%p: "0x...") */
    "dgx:4242:4251 [0] NCCL INFO NVLS comm 0x7f3a2c000b70 headRank 0 nHeads 8 nvlsRanks 8 buffSize "
    "1048576 nvlsPerRankSize 33554432 nvlsTotalSize 268435456\n",
    /* src/init.cc:1358 */
    "dgx:4242:4251 [0] NCCL INFO 24 coll channels, 24 collnet channels, 16 nvls channels, 32 p2p "
    "channels, 32 p2p channels per peer\n",
    NULL};

/* p2p.cc's other forms: a process per GPU (cuMem, or legacy IPC with
 * NCCL_CUMEM_ENABLE=0), each with "/read" or "/CE" (copy engine,
 * NCCL_P2P_USE_CUDA_MEMCPY; it turns read off, so never both) */
static const char *const v2289_p2p[] = {
    /* src/transport/p2p.cc:393 ("P2P/%s%s%s": CUMEM, read, CE) */
    "n:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read\n",
    "n:1:2 [0] NCCL INFO Channel 01/0 : 0[0] -> 1[1] via P2P/CUMEM/CE\n",
    "n:1:2 [0] NCCL INFO Channel 02/0 : 0[0] -> 1[1] via P2P/CUMEM\n",
    /* src/transport/p2p.cc:398 ("P2P/IPC%s%s") */
    "n:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC/read\n",
    "n:1:2 [0] NCCL INFO Channel 01/0 : 0[0] -> 1[1] via P2P/IPC/CE\n", NULL};

/* comm->MNNVL (multi-node NVLink, GB200 NVL72): p2p.cc:393 prints MNNVL
 * where it prints CUMEM; NVLink by definition, across trays */
static const char *const v2289_mnnvl[] = {
    /* src/transport/p2p.cc:393 */
    "tray3:9:12 [0] NCCL INFO Channel 00/0 : 0[0] -> 4[0] via P2P/MNNVL/read\n",
    "tray3:9:12 [1] NCCL INFO Channel 00/0 : 1[1] -> 5[1] via P2P/MNNVL\n", NULL};

/* P2P through an intermediate GPU (paths.cc:309-316: a two-hop path whose
 * first hop is a GPU, i.e. NVLink through that GPU: NVB) */
static const char *const v2289_indirect[] = {
    /* src/transport/p2p.cc:406 ("P2P/indirect/%d[%d]%s") */
    "n:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 3[3] via P2P/indirect/1[1]/read\n", NULL};

/* 4 GPUs behind one PCIe switch, no NVLink: P2P allowed up to PXB
 * (paths.cc:319) */
static const char *const v2289_pcie[] = {
    /* src/transport/nvls.cc:201 */
    "ws:77:80 [0] NCCL INFO NVLS multicast support is not available on dev 0 (NVLS_NCHANNELS 0)\n",
    /* src/graph/search.cc:1201 */
    "ws:77:80 [0] NCCL INFO Pattern 4, crossNic 0, nChannels 2, bw 24.000000/24.000000, type "
    "PXB/PIX, sameChannels 1\n",
    /* src/transport/p2p.cc:386 */
    "ws:77:80 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/direct pointer\n",
    "ws:77:83 [3] NCCL INFO Channel 01/0 : 3[3] -> 0[0] via P2P/direct pointer\n",
    /* src/init.cc:1358 */
    "ws:77:80 [0] NCCL INFO 2 coll channels, 2 collnet channels, 0 nvls channels, 2 p2p channels, "
    "2 p2p channels per peer\n",
    NULL};

/* NCCL_P2P_DISABLE=1 on an A100 NVSwitch box (no multicast before sm_90):
 * paths.cc:673-677 sends GPU to GPU through the CPU, so the search says
 * PHB; SHM, with or without the copy engine on either side */
static const char *const v2289_shm[] = {
    /* src/graph/paths.cc:225 */
    "a100:5:6 [0] NCCL INFO NCCL_P2P_DISABLE set by environment to 1\n",
    /* src/transport/nvls.cc:201 */
    "a100:5:6 [0] NCCL INFO NVLS multicast support is not available on dev 0 (NVLS_NCHANNELS 0)\n",
    /* src/graph/search.cc:1201 */
    "a100:5:6 [0] NCCL INFO Pattern 4, crossNic 0, nChannels 2, bw 10.000000/10.000000, type "
    "PHB/PIX, sameChannels 1\n",
    /* src/transport/shm.cc:128: "Channel %02d :", no connection index */
    "a100:5:6 [0] NCCL INFO Channel 00 : 0[0] -> 1[1] via SHM/direct/direct\n",
    "a100:5:7 [1] NCCL INFO Channel 01 : 1[1] -> 0[0] via SHM/CE/direct\n",
    "a100:5:7 [1] NCCL INFO Channel 02 : 1[1] -> 0[0] via SHM/CE/CE\n", NULL};

/* two nodes, one GPU each, InfiniBand: a GPU alone in its node searches
 * with type LOC (search.cc:1000-1012), neither NVLink nor PCIe */
static const char *const v2289_net[] = {
    /* src/graph/search.cc:1201 */
    "nodeA:300:310 [0] NCCL INFO Pattern 4, crossNic 0, nChannels 2, bw 25.000000/25.000000, "
    "type LOC/PIX, sameChannels 1\n",
    /* src/transport/net.cc:313 ("NET/%s/%d%s%s%s": GDRDMA, (PCI), Shared) */
    "nodeA:300:310 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0/GDRDMA\n",
    "nodeA:300:310 [0] NCCL INFO Channel 01/1 : 0[0] -> 1[0] [send] via "
    "NET/IB/1/GDRDMA(PCI)/Shared\n",
    /* src/transport/net.cc:317 (PXN: the proxy rank in parentheses) */
    "nodeA:300:310 [0] NCCL INFO Channel 02/0 : 0[0] -> 1[0] [send] via NET/IB/0(2)/GDRDMA\n",
    /* src/transport/net.cc:359 */
    "nodeA:300:310 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [receive] via NET/IB/0/GDRDMA\n",
    "nodeA:300:310 [0] NCCL INFO Channel 03/0 : 1[0] -> 0[0] [receive] via NET/Socket/0\n",
    /* src/init.cc:1358 */
    "nodeA:300:310 [0] NCCL INFO 2 coll channels, 2 collnet channels, 0 nvls channels, 2 p2p "
    "channels, 2 p2p channels per peer\n",
    NULL};

/* CollNet (SHARP plugin): src/transport/coll_net.cc:182 and :206
 * ("CollNet %02d/%1d : %d [send|receive] via COLLNET/%s/%d%s%s") */
static const char *const v2289_collnet[] = {
    "n:1:2 [0] NCCL INFO CollNet 00/0 : 0 [send] via COLLNET/SHARP/0/GDRDMA\n",
    "n:1:2 [0] NCCL INFO CollNet 00/1 : 0 [receive] via COLLNET/SHARP/0/GDRDMA(PCI)\n", NULL};

int main(void) {
    gb_nccl_report_t r;
    feed(&r, hgx);
    /* "32 collnet channels" in the summary: not CollNet (2.19+ prints the
     * ring count there) */
    check_json(&r, "[\"P2P/CUMEM\",\"NVLS\"]");
    CHECK(r.connections == 2 && r.nvl_paths == 1 && r.nvls_supported == 1 && r.info_lines == 8);
    CHECK(strcmp(gb_nccl_interconnect(&r, 0), "nvlink") == 0);

    feed(&r, pcie);
    check_json(&r, "[\"P2P/IPC\"]");
    CHECK(r.pci_paths == 1 && r.nvl_paths == 0 && r.connections == 2);
    /* NCCL's own word wins over a wrong hint */
    CHECK(strcmp(gb_nccl_interconnect(&r, 1), "pcie") == 0);

    feed(&r, shm);
    check_json(&r, "[\"SHM\"]");
    CHECK(!r.nvls_supported);
    /* P2P off: the traffic went through host memory, never NVLink, though
     * the topology has it: the row must not say nvlink */
    CHECK(strcmp(gb_nccl_interconnect(&r, 1), "pcie") == 0);

    feed(&r, ib);
    check_json(&r, "[\"NET/IB\"]");
    CHECK(strcmp(gb_nccl_interconnect(&r, 0), "net") == 0);

    feed(&r, sock);
    check_json(&r, "[\"P2P/direct\",\"NET/Socket\"]");
    CHECK(strcmp(gb_nccl_interconnect(&r, 1), "pcie") == 0); /* type SYS: not NVLink */

    feed(&r, plugin);
    check_json(&r, "[\"NET\",\"CollNet\"]");
    CHECK(r.connections == 3);
    CHECK(strcmp(gb_nccl_interconnect(&r, 0), "net") == 0);

    feed(&r, one);
    check_json(&r, "[]");
    CHECK(r.connections == 0 && r.info_lines == 2);
    CHECK(strcmp(gb_nccl_interconnect(&r, 1), "none") == 0);

    /* NCCL 2.28.9's own lines (see v2289_* above) */
    feed(&r, v2289_nvl);
    check_json(&r, "[\"P2P/direct\",\"NVLS\"]");
    CHECK(r.connections == 2 && r.nvl_paths == 3 && r.pci_paths == 0 && r.nvls_supported == 1 &&
          r.info_lines == 10);
    CHECK(strcmp(gb_nccl_interconnect(&r, 0), "nvlink") == 0);
    feed(&r, v2289_p2p);
    check_json(&r, "[\"P2P/IPC\",\"P2P/CUMEM\"]");
    CHECK(r.connections == 5);
    feed(&r, v2289_mnnvl);
    check_json(&r, "[\"P2P/MNNVL\"]");
    CHECK(r.connections == 2);
    /* NVLink whatever the hint, with no topology line */
    CHECK(strcmp(gb_nccl_interconnect(&r, 0), "nvlink") == 0);
    feed(&r, v2289_indirect);
    check_json(&r, "[\"P2P/indirect\"]");
    CHECK(r.connections == 1 && strcmp(gb_nccl_interconnect(&r, 0), "nvlink") == 0);
    feed(&r, v2289_pcie);
    check_json(&r, "[\"P2P/direct\"]");
    CHECK(r.connections == 2 && r.pci_paths == 1 && r.nvl_paths == 0 && !r.nvls_supported);
    CHECK(strcmp(gb_nccl_interconnect(&r, 1), "pcie") == 0);
    feed(&r, v2289_shm);
    check_json(&r, "[\"SHM\"]");
    CHECK(r.connections == 3 && r.pci_paths == 1 && r.info_lines == 6);
    CHECK(strcmp(gb_nccl_interconnect(&r, 1), "pcie") == 0);
    feed(&r, v2289_net);
    check_json(&r, "[\"NET/IB\",\"NET/Socket\"]");
    CHECK(r.connections == 5 && r.nvl_paths == 0 && r.pci_paths == 0);
    CHECK(strcmp(gb_nccl_interconnect(&r, 0), "net") == 0);
    feed(&r, v2289_collnet);
    check_json(&r, "[\"CollNet\"]");
    CHECK(r.connections == 2 && strcmp(gb_nccl_interconnect(&r, 0), "net") == 0);
    /* two nodes of 8 NVLink GPUs: every rank's file together */
    gb_nccl_report_init(&r);
    const char *const *const both[] = {v2289_nvl, v2289_net};
    for (int b = 0; b < 2; b++)
        for (int i = 0; both[b][i]; i++)
            gb_nccl_log_line(&r, both[b][i], strlen(both[b][i]));
    check_json(&r, "[\"P2P/direct\",\"NET/IB\",\"NET/Socket\",\"NVLS\"]");
    CHECK(strcmp(gb_nccl_interconnect(&r, 0), "nvlink") == 0);

    /* P2P without a topology line (GRAPH not logged): the backend's hint */
    static const char *const bare[] = {
        "h:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM\n", NULL};
    feed(&r, bare);
    CHECK(strcmp(gb_nccl_interconnect(&r, 1), "nvlink") == 0);
    CHECK(strcmp(gb_nccl_interconnect(&r, 0), "pcie") == 0);

    /* a line without a newline, one longer than the parser's buffer */
    gb_nccl_report_init(&r);
    const char *nonl = "h:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via SHM/direct/direct";
    gb_nccl_log_line(&r, nonl, strlen(nonl));
    char *longl = malloc(5000);
    CHECK(longl);
    memset(longl, 'x', 4999);
    longl[4999] = 0;
    memcpy(longl, "NCCL INFO Channel 00 : ", 23);
    gb_nccl_log_line(&r, longl, 4999);
    check_json(&r, "[\"SHM\"]");

    /* files: one, and every file of a directory with a prefix (NCCL's %p) */
    char dir[] = "/tmp/gb_nccl_XXXXXX", path[256], err[256];
    CHECK(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/nccl.100.log", dir);
    FILE *f = fopen(path, "w");
    CHECK(f);
    for (int i = 0; ib[i]; i++)
        fputs(ib[i], f);
    fputs(longl, f); /* no newline, and long */
    fputc('\n', f);
    fclose(f);
    snprintf(path, sizeof(path), "%s/nccl.101.log", dir);
    f = fopen(path, "w");
    CHECK(f);
    for (int i = 0; hgx[i]; i++)
        fputs(hgx[i], f);
    fclose(f);
    snprintf(path, sizeof(path), "%s/other.log", dir);
    f = fopen(path, "w");
    CHECK(f);
    fputs(shm[3], f);
    fclose(f);
    gb_nccl_report_init(&r);
    CHECK(gb_nccl_log_dir(&r, dir, "nccl.", err, sizeof(err)) == 2);
    check_json(&r, "[\"P2P/CUMEM\",\"NET/IB\",\"NVLS\"]");
    gb_nccl_report_init(&r);
    CHECK(gb_nccl_log_file(&r, path, err, sizeof(err)) == 1);
    check_json(&r, "[\"SHM\"]");
    CHECK(gb_nccl_log_file(&r, "/nonexistent/nccl.log", err, sizeof(err)) == -1 &&
          strstr(err, "/nonexistent/nccl.log"));
    CHECK(gb_nccl_log_dir(&r, "/nonexistent", "nccl.", err, sizeof(err)) == -1);
    char small[8];
    feed(&r, hgx);
    CHECK(gb_nccl_transports_json(&r, small, sizeof(small)) == -1);
    CHECK(strcmp(gb_nccl_transport_name(GB_NT_NET_IB), "NET/IB") == 0 &&
          strcmp(gb_nccl_transport_name(99), "?") == 0);
    free(longl);
    /* pruning old log directories: an old one goes, a new one stays, an
     * old one holding anything but NCCL's logs stays, and other names are
     * not looked at */
    static const char *const sub[] = {"gb-nccl-old111", "gb-nccl-new222", "gb-nccl-odd333",
                                      "gb-nccl-toolong4", "other-old4444"};
    for (int i = 0; i < 5; i++) {
        snprintf(path, sizeof(path), "%s/%s", dir, sub[i]);
        CHECK(mkdir(path, 0700) == 0);
        snprintf(path, sizeof(path), "%s/%s/nccl.host.%d.log", dir, sub[i], 100 + i);
        f = fopen(path, "w");
        CHECK(f && fputs("NCCL INFO x\n", f) >= 0 && fclose(f) == 0);
    }
    snprintf(path, sizeof(path), "%s/gb-nccl-odd333/keep.txt", dir);
    f = fopen(path, "w");
    CHECK(f && fclose(f) == 0);
    struct stat st;
    struct timespec old[2] = {{time(NULL) - 8 * 86400, 0}, {time(NULL) - 8 * 86400, 0}};
    for (int i = 0; i < 5; i++) {
        if (i == 1) continue; /* the new one */
        snprintf(path, sizeof(path), "%s/%s", dir, sub[i]);
        CHECK(utimensat(AT_FDCWD, path, old, 0) == 0);
    }
    /* a name of that form that is a link to another directory: not followed */
    snprintf(path, sizeof(path), "%s/victim", dir);
    CHECK(mkdir(path, 0700) == 0);
    snprintf(path, sizeof(path), "%s/victim/nccl.host.9.log", dir);
    f = fopen(path, "w");
    CHECK(f && fclose(f) == 0);
    snprintf(path, sizeof(path), "%s/victim", dir);
    CHECK(utimensat(AT_FDCWD, path, old, 0) == 0);
    char link[600];
    snprintf(link, sizeof(link), "%s/gb-nccl-link01", dir);
    CHECK(symlink(path, link) == 0);
    CHECK(utimensat(AT_FDCWD, link, old, AT_SYMLINK_NOFOLLOW) == 0);
    CHECK(gb_nccl_log_prune(dir, 7 * 86400) == 1);
    snprintf(path, sizeof(path), "%s/victim/nccl.host.9.log", dir);
    CHECKF(stat(path, &st) == 0, "a log behind a link was removed");
    for (int i = 0; i < 5; i++) {
        snprintf(path, sizeof(path), "%s/%s", dir, sub[i]);
        CHECKF((stat(path, &st) == 0) == (i != 0), "%s: %s", sub[i], i ? "removed" : "kept");
    }
    snprintf(path, sizeof(path), "%s/gb-nccl-odd333/keep.txt", dir);
    CHECK(stat(path, &st) == 0);
    CHECK(gb_nccl_log_prune("/nonexistent", 0) == 0);
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
    printf("nccl_log: ok\n");
    return 0;
}
