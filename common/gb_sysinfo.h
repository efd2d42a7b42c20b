/* gb_sysinfo.h - facts about this machine that the agent's inventory and the
 * worker's result records share: CPU model, cores, memory, OS, kernel and
 * host name, read from /proc, /etc/os-release and uname. Each fills a
 * caller buffer and falls back to "unknown" (or 0) rather than failing. */
#ifndef GB_SYSINFO_H
#define GB_SYSINFO_H

#include <stddef.h>
#include <stdint.h>

void gb_sys_cpu_model(char *out, size_t len); /* "AMD EPYC 9R45 ..." */
int gb_sys_cpu_cores(void);            /* logical CPUs this process may run on (affinity), >= 1 */
uint64_t gb_sys_memory_bytes(void);    /* MemTotal */
void gb_sys_os(char *out, size_t len); /* PRETTY_NAME of os-release */
void gb_sys_kernel(char *out, size_t len); /* uname -sr */
void gb_sys_hostname(char *out, size_t len);

#endif
