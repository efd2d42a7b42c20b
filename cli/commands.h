/* commands.h - every `gpubench` subcommand: one function per command, each in
 * its own cmd_*.c file, registered in the table in main.c. Each returns the
 * process exit status (0 ok, 1 failure, 2 usage error) and never calls exit()
 * itself, so `gpubench run` can compose them. */
#ifndef GB_CLI_COMMANDS_H
#define GB_CLI_COMMANDS_H

typedef int (*gb_cmd_fn)(int argc, char **argv);

typedef struct gb_command {
    const char *name;
    gb_cmd_fn fn;
    const char *summary;
} gb_command_t;

int cmd_help(int argc, char **argv);
int cmd_version(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_coordinator(int argc, char **argv);
int cmd_agent(int argc, char **argv);
int cmd_worker(int argc, char **argv);
int cmd_submit(int argc, char **argv);
int cmd_wait(int argc, char **argv);
int cmd_status(int argc, char **argv);
int cmd_nodes(int argc, char **argv);
int cmd_cancel(int argc, char **argv);
int cmd_results(int argc, char **argv);
int cmd_compare(int argc, char **argv);
int cmd_scaling(int argc, char **argv);
int cmd_keygen(int argc, char **argv);
int cmd_train(int argc, char **argv);

#endif
