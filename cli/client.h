/* client.h - the client side of the control protocol, shared by the
 * commands (submit, wait, status, nodes, cancel, results) and by `gpubench
 * run`, which drives its embedded coordinator the same way. */
#ifndef GB_CLI_CLIENT_H
#define GB_CLI_CLIENT_H

#include "gb_curve.h"
#include "output.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* Every call takes the control endpoint and the CURVE keys to reach it with
 * (NULL: plaintext). */

/* Submit a spec. 0 with the sweep id; 1 when the coordinator rejected it
 * (reason in err); -1 when it could not be reached. */
int cli_submit(const char *control, const gb_curve_client_t *curve, const char *spec,
               uint64_t *sweep_id, uint32_t *n_jobs, char *err, size_t errlen);

/* Block until the sweep ends; a progress line on stderr when it is a
 * terminal (or always with progress > 0). Rides out coordinator restarts.
 * Returns the exit status: 0 all done, 1 some failed or were cancelled or
 * the wait timed out (timeout_s > 0) or was stopped, 2 no such sweep. */
int cli_wait(const char *control, const gb_curve_client_t *curve, uint64_t sweep_id, int timeout_s,
             int interval_ms, int progress, atomic_int *stop);

/* Print v_results of db (one sweep, or all with sweep_id 0); the table
 * format shows the main columns, csv/json every column. Returns the exit
 * status (1 when the store cannot be read). */
int cli_print_results(const char *db, uint64_t sweep_id, gb_format_t fmt);

/* Wait until at least n agents are connected; 0 or -1 on timeout. */
int cli_wait_nodes(const char *control, const gb_curve_client_t *curve, int n, int timeout_ms,
                   atomic_int *stop);

#endif
