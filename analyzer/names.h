/* names.h -- names of NCCL results and signals as people know them. */
#ifndef LOCKSTEP_NAMES_H
#define LOCKSTEP_NAMES_H

/* ncclResult_t name without the "nccl" prefix ("Success", "RemoteError", ...); "Pending" for
 * LS_RESULT_PENDING; "Unknown" otherwise. Never NULL, static storage. */
const char *names_result(int result);

/* True when a result counts as an error: not success, in progress or pending. */
int names_result_is_error(int result);

/* "SIGSEGV" and the like; "SIG<n>" in a static buffer for others. Never NULL. */
const char *names_signal(int sig);

#endif
