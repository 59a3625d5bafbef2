/* names.h -- names of NCCL results, signals and communicator flags as people know them. */
#ifndef LOCKSTEP_NAMES_H
#define LOCKSTEP_NAMES_H

#include <stddef.h>

/* ncclResult_t name without the "nccl" prefix ("Success", "RemoteError", ...); "Pending" for
 * LS_RESULT_PENDING; "Unknown" otherwise. Never NULL, static storage. */
const char *names_result(int result);

/* True when a result counts as an error: not success, in progress or pending. */
int names_result_is_error(int result);

/* The names of communicator entry flags (LS_COMM_*) set in `flags`, joined by ',' ("aborted,
 * async-error"), "-" for none; unknown bits as their hex value. Writes at most len bytes to out
 * and returns out. */
char *names_comm_flags(unsigned flags, char *out, size_t len);

/* The CTA policy a record's flags hold (LS_REC_CTA_*: a nccl*Config call's): "default",
 * "efficiency", "zero" (no NCCL kernel: the copy engines move the data), "policy <n>" for others;
 * NULL when unset. Static storage. */
const char *names_cta_policy(unsigned flags);

/* "SIGSEGV" and the like; "SIG<n>" in a static buffer for others. Never NULL. */
const char *names_signal(int sig);

/* A function's name as people read it in a stack: a C++ symbol ("_Z...") demangled with the C++
 * runtime's demangler (libstdc++, loaded when first needed) and shortened to its qualified
 * name, without template arguments, parameters, qualifiers or clone suffixes
 * ("c10d::ProcessGroupNCCL::collective", "{lambda#1}::operator()"); any other name, or one
 * that cannot be demangled, as it is. Writes at most len bytes to out and returns out. */
char *names_function(const char *raw, char *out, size_t len);

#endif
