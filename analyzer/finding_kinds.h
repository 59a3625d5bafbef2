/* finding_kinds.h -- every kind of finding in one list: the enum, the JSON names, the severity,
 * the root-cause priority and the traits other code asks about are all generated from it.
 *
 * X(ID, json name, severity, priority, traits, what differs)
 *   severity  F_SEV_ERROR (red in the text report, a root cause) or F_SEV_WARN (yellow: a
 *             limit of what can be concluded, or a slowness, never the hang itself)
 *   priority  where several findings are roots at the same depth, the lower number comes
 *             first: the cause a person should act on first (docs/analyzer.md, "What makes a
 *             root cause"). Numbers leave room between them for a new kind.
 *   traits    F_T_DEATH (a rank's process ended), F_T_MISMATCH (ranks called different things
 *             under one seq: their classes say who called what), F_T_TIMELINE (the HTML
 *             timeline centres on its collective)
 *   what differs  for a mismatch, the words of its summary ("holds different counts")
 *
 * A kind with data of its own (beyond struct finding's common part) has a struct of its own in
 * finding.h, the member of struct finding's union `as` named in the comment of its line here
 * (as.in_flight: struct f_in_flight); a finding's kind says which member holds.
 *
 * Adding a kind: docs/architecture.md, "Add a finding kind" (tests/cli kinds-documented and
 * kinds-listed check the docs' lists of kinds against this one). */
#ifndef LOCKSTEP_FINDING_KINDS_H
#define LOCKSTEP_FINDING_KINDS_H

#define FINDING_KINDS(X)                                                                           \
    X(DUPLICATE_RANK, "duplicate_rank", F_SEV_ERROR, 10, 0, NULL)                                  \
    X(RANK_CRASHED, "rank_crashed", F_SEV_ERROR, 20, F_T_DEATH, NULL)                              \
    X(RANK_EXITED, "rank_exited", F_SEV_ERROR, 30, F_T_DEATH, NULL)                                \
    X(COMM_ABORTED, "comm_aborted", F_SEV_ERROR, 40, 0, NULL)                                      \
    X(NCCL_ERROR, "nccl_error", F_SEV_ERROR, 50, 0, NULL)                                          \
    X(COMM_INIT_MISMATCH, "comm_init_mismatch", F_SEV_ERROR, 60, 0, NULL)                          \
    X(OP_MISMATCH, "op_mismatch", F_SEV_ERROR, 70, F_T_MISMATCH | F_T_TIMELINE,                    \
      "different operations")                                                                      \
    X(COUNT_MISMATCH, "count_mismatch", F_SEV_ERROR, 80, F_T_MISMATCH | F_T_TIMELINE,              \
      "different counts")                                                                          \
    X(DTYPE_MISMATCH, "dtype_mismatch", F_SEV_ERROR, 90, F_T_MISMATCH | F_T_TIMELINE,              \
      "different datatypes")                                                                       \
    X(REDOP_MISMATCH, "redop_mismatch", F_SEV_ERROR, 100, F_T_MISMATCH | F_T_TIMELINE,             \
      "different reduction ops")                                                                   \
    X(ROOT_MISMATCH, "root_mismatch", F_SEV_ERROR, 110, F_T_MISMATCH | F_T_TIMELINE,               \
      "different roots")                                                                           \
    X(P2P_SIZE_MISMATCH, "p2p_size_mismatch", F_SEV_ERROR, 120, 0, NULL)                           \
    X(DEADLOCK_CYCLE, "deadlock_cycle", F_SEV_ERROR, 130, 0, NULL)                                 \
    X(P2P_UNMATCHED, "p2p_unmatched", F_SEV_ERROR, 140, 0, NULL)                                   \
    /* as.in_flight: since_s, lagging, gpu */                                                      \
    X(STUCK_IN_FLIGHT, "stuck_in_flight", F_SEV_ERROR, 150, F_T_TIMELINE, NULL)                    \
    X(MISSING_RANKS, "missing_ranks", F_SEV_ERROR, 160, F_T_TIMELINE, NULL)                        \
    /* as.outside: since_s, odd */                                                                 \
    X(STUCK_OUTSIDE_NCCL, "stuck_outside_nccl", F_SEV_ERROR, 165, 0, NULL)                         \
    /* as.straggler: late_by_s */                                                                  \
    X(STRAGGLER, "straggler", F_SEV_WARN, 170, F_T_TIMELINE, NULL)                                 \
    X(TRACE_INCOMPLETE, "trace_incomplete", F_SEV_WARN, 180, 0, NULL)

#endif
