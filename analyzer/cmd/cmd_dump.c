/* cmd_dump.c -- `lockstep dump PATH`: every field of one trace, readable. */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "names.h"
#include "rank_end.h"
#include "symbolizer.h"
#include "timefmt.h"
#include "summary_reader.h"
#include "trace_reader.h"

static const char *end_kind_name(uint32_t k)
{
    switch (k) {
    case LS_END_RUNNING:
        return "running (no end recorded)";
    case LS_END_EXITED:
        return "exited";
    case LS_END_SIGNALED:
        return "killed by signal";
    case LS_END_UNDERSCORE_EXIT:
        return "_exit()";
    default:
        return "?";
    }
}

/* What the shim kept of why the process ended (docs/trace-format.md, end_why), after "end:". */
static void dump_end_why(const struct tr_trace *t)
{
    struct rank_end e;
    const struct ls_end_why *w = &t->hdr.end_why;
    if (!rank_end_read(t, &e) && !w->stderr_tail && !w->error_file)
        return;
    char words[1200];
    rank_end_words(&e, words, sizeof(words));
    if (words[0])
        printf("\n  ended by %s (from %s)", words, e.source);
    if (w->error_file)
        printf("\n  torchrun error file %s", trace_pool_string(t, w->error_file));
    if (w->stderr_tail && trace_pool_string(t, w->stderr_tail))
        printf("\n  stderr tail kept: %zu bytes", strlen(trace_pool_string(t, w->stderr_tail)));
    if (e.nccl_warning[0])
        printf("\n  NCCL's last warning: %s", e.nccl_warning);
    if (e.cuda_result)
        printf("\n  CUDA error %d (%s)", e.cuda_result, e.cuda_error);
}

static void dump_header(const struct tr_trace *t)
{
    const struct ls_header *h = &t->hdr;
    char w[64], d[32];
    uint64_t now = timefmt_now_ns();
    printf("trace %s\n", t->path);
    printf("  format %u, %llu bytes%s\n", h->version, (unsigned long long)t->file_bytes,
           t->truncated ? " (truncated)" : "");
    if (t->truncated)
        printf("  TRUNCATED: %llu of %llu bytes; %zu ring slots lost\n",
               (unsigned long long)t->file_bytes, (unsigned long long)h->file_size,
               t->lost_to_truncation);
    printf("  host %s  pid %d  ppid %d  uid %u\n", h->host, h->pid, h->ppid, h->uid);
    printf("  rank %d  local rank %d  world size %d  local world size %d  (rank %s)\n", h->rank,
           h->local_rank, h->world_size, h->local_world_size,
           h->rank_source == LS_RANK_FROM_ENV ? "from the environment" : "unknown");
    printf("  job '%s' (from %s)\n", h->job, h->job_source[0] ? h->job_source : "-");
    printf("  command %s\n", h->cmdline);
    printf("  nccl version %u  flags 0x%x%s%s%s%s%s\n", h->nccl_version, h->flags,
           h->flags & LS_HFLAG_CUDA_SEEN ? " cuda-seen" : "",
           h->flags & LS_HFLAG_CLOSED ? " closed" : "",
           h->flags & LS_HFLAG_SITES_FULL ? " sites-full" : "",
           h->flags & LS_HFLAG_COMMS_FULL ? " comms-full" : "",
           h->flags & LS_HFLAG_PEERS_FULL ? " peers-full" : "");
    if (h->python != LS_PYTHON_NONE)
        printf("  python %u.%u: frames %s (depth %u, %u python stacks%s)\n", h->python_version >> 8,
               h->python_version & 0xff,
               h->python == LS_PYTHON_ACTIVE ? "recorded" : "not readable, not recorded",
               h->py_depth, h->pysite_count,
               h->flags & LS_HFLAG_PYSITES_FULL ? ", table full" : "");
    printf("  started %s\n", timefmt_wall(w, sizeof(w), h->start_ns));
    printf("  heartbeat %s (%s ago)\n", timefmt_wall(w, sizeof(w), h->heartbeat_ns),
           h->heartbeat_ns && now > h->heartbeat_ns
               ? timefmt_duration(d, sizeof(d), now - h->heartbeat_ns)
               : "0 s");
    printf("  end: %s", end_kind_name(h->end_kind));
    if (h->end_kind == LS_END_EXITED || h->end_kind == LS_END_UNDERSCORE_EXIT)
        printf(" with status %d", h->end_status);
    if (h->end_kind == LS_END_SIGNALED)
        printf(" %s (%d)", names_signal(h->end_signal), h->end_signal);
    if (h->end_ns)
        printf(" at %s", timefmt_wall(w, sizeof(w), h->end_ns));
    dump_end_why(t);
    printf("\n  last enter %s", timefmt_wall(w, sizeof(w), ls_last_enter_ns(h)));
    printf("  last exit %s  calls in flight %llu\n", timefmt_wall(w, sizeof(w), ls_last_exit_ns(h)),
           (unsigned long long)ls_calls_in_flight(h));
    printf("  ring: %llu records reserved, capacity %llu%s; %zu kept, %zu half-written, %zu "
           "never published\n",
           (unsigned long long)h->next_ticket, (unsigned long long)h->ring_cap,
           t->wrapped ? " (WRAPPED: older records overwritten)" : "", t->nrecords, t->nbusy,
           t->nunwritten);
    for (size_t i = 0; i < t->nbusy; i++)
        printf("  HALF-WRITTEN record at ticket %llu\n", (unsigned long long)t->busy_tickets[i]);
}

static void dump_comms(const struct tr_trace *t)
{
    printf("\ncommunicators (%u):\n", t->ncomms);
    for (uint32_t i = 0; i < t->ncomms; i++) {
        const struct ls_comm *c = &t->comms[i];
        char flags[160];
        printf("  %016" PRIx64 " rank %d of %d  parent %016" PRIx64
               "  created by %s (color %d key %d)  flags 0x%x (%s)  init %s\n",
               c->comm_id, c->rank, c->nranks, c->parent_id, ls_op_name(c->create_op), c->color,
               c->key, c->flags, names_comm_flags(c->flags, flags, sizeof(flags)),
               names_result(c->init_result));
        printf(
            "      collectives issued %llu done %llu  sends %llu recvs %llu  site %u  dev %d%s%s\n",
            (unsigned long long)c->coll_issued, (unsigned long long)c->coll_done,
            (unsigned long long)c->p2p_sends, (unsigned long long)c->p2p_recvs, c->create_site,
            c->cuda_dev, c->name[0] ? "  name " : "", c->name);
    }
    if (t->npeers)
        printf("\np2p peers (%u):\n", t->npeers);
    for (uint32_t i = 0; i < t->npeers; i++)
        printf("  comm %016" PRIx64 " peer %d: sends %llu recvs %llu\n", t->peers[i].comm_id,
               t->peers[i].peer, (unsigned long long)t->peers[i].sends,
               (unsigned long long)t->peers[i].recvs);
}

static void dump_sites(const struct tr_trace *t, struct symbolizer *sym)
{
    printf("\ncall sites (%u):\n", t->nsites);
    for (uint32_t i = 0; i < t->nsites; i++) {
        const struct tr_site *s = &t->sites[i];
        if (s->nframes == 0) {
            printf("  #%u (not published)\n", i + 1);
            continue;
        }
        printf("  #%u %s  (%llu calls)\n", i + 1, symbolizer_site(sym, t, i + 1),
               (unsigned long long)s->count);
        for (uint32_t f = 0; s->py && f < s->py->nframes; f++)
            printf("      py %-40s %s\n", symbolizer_pyframe(sym, &s->py->frames[f]),
                   s->py->frames[f].file);
        for (uint32_t f = 0; f < s->nframes; f++)
            printf("      %2u %-40s %s+0x%llx\n", f, symbolizer_frame(sym, &s->frames[f]),
                   s->frames[f].module[0] ? s->frames[f].module : "?",
                   (unsigned long long)s->frames[f].module_off);
    }
}

static void dump_record(const struct ls_record *r)
{
    char w[64], d[32], arg[48];
    if (ls_op_is_rooted(r->op))
        snprintf(arg, sizeof(arg), "root %d", r->peer);
    else if (ls_op_is_p2p(r->op))
        snprintf(arg, sizeof(arg), "peer %d", r->peer);
    else if (ls_op_is_onesided(r->op)) /* peer, then signals x index / context */
        snprintf(arg, sizeof(arg), "peer %d %ux%d/%d", r->peer, ls_signal_count(r->aux),
                 ls_signal_index(r->aux), ls_signal_ctx(r->aux));
    else if (r->op == LS_OP_COMM_SPLIT)
        snprintf(arg, sizeof(arg), "color %d key %d", (int32_t)(r->aux >> 32), (int32_t)r->aux);
    else
        snprintf(arg, sizeof(arg), "-");
    /* In flight only as every reader decides it (ls_record_pending); a record that returned
     * without an exit time (a damaged one) has no duration to show. */
    const char *dur = ls_record_pending(r) ? "IN FLIGHT"
                      : r->exit_ns < r->enter_ns
                          ? "-"
                          : timefmt_duration(d, sizeof(d), r->exit_ns - r->enter_ns);
    char config[96] = ""; /* a nccl*Config call's tag and policy */
    if (r->flags & LS_REC_COLL_CONFIG) {
        const char *cta = names_cta_policy(r->flags);
        snprintf(config, sizeof(config), " config tag %llu%s%s", (unsigned long long)r->aux,
                 cta ? " cta " : "", cta ? cta : "");
    }
    char graph[64] = ""; /* a CUDA-graph capture, or a launch's replay of one */
    if (r->flags & LS_REC_GRAPH_REPLAY)
        snprintf(graph, sizeof(graph), " replay launch %u capture site %u",
                 (unsigned)ls_replay_launch(r->aux), (unsigned)ls_replay_capture_site(r->aux));
    else if (r->flags & LS_REC_GRAPH_CAPTURED)
        snprintf(graph, sizeof(graph), " captured%s",
                 r->flags & LS_REC_GRAPH_TRACKED ? " (launches recorded)" : "");
    printf("%8llu %-14s %016" PRIx64
           " r%-4d #%-6llu n=%-10llu %-7s %-4s %-16s g%llu/%u %s %10s %-11s "
           "site %u tid %u%s%s%s\n",
           (unsigned long long)(r->ticket - 1), ls_op_name(r->op), r->comm_id, r->comm_rank,
           (unsigned long long)r->seq, (unsigned long long)r->count, ls_dtype_name(r->dtype),
           ls_redop_name(r->redop), arg, (unsigned long long)r->group_id, r->group_depth,
           timefmt_wall(w, sizeof(w), r->enter_ns), dur, names_result(r->result), r->callsite,
           r->tid, r->flags & LS_REC_IN_GROUP ? " in-group" : "", config, graph);
}

static const struct command_option dump_options[] = {
    CMD_OPERAND("PATH", "one trace file (*.trace): its header, communicators, call sites and\n"
                        "every record in its ring; or a node summary (*.summary): each of its\n"
                        "traces, with the records the summary holds"),
    CMD_END};

const struct command_help dump_help = {
    "dump",
    "PATH",
    "print every record of one trace, readable",
    NULL,
    12,
    dump_options,
    "exit status: 0 printed, 2 bad input (not a lockstep trace, unreadable)\n",
    0};

/* Every field of trace t; `more` separates it from the one before. */
static void dump_trace(const struct tr_trace *t, int more)
{
    struct symbolizer *sym = symbolizer_new(1);
    if (more)
        printf("\n");
    dump_header(t);
    dump_comms(t);
    if (sym)
        dump_sites(t, sym);
    printf("\nrecords (%zu):\n  ticket op             comm             rank seq     count        "
           "dtype   redop root/peer       group  entered                    duration   result\n",
           t->nrecords);
    for (size_t i = 0; i < t->nrecords; i++)
        dump_record(&t->records[i]);
    symbolizer_free(sym);
}

int cmd_dump(int argc, char **argv)
{
    int parsed = command_parse(&dump_help, &argc, argv, NULL);
    if (parsed >= 0)
        return parsed;
    if (optind >= argc)
        return command_usage_error(&dump_help, "no trace file given");
    if (argc - optind > 1)
        return command_usage_error(&dump_help, "one trace file at a time, not %d", argc - optind);
    char err[1024];
    const char *path = argv[optind];
    if (summary_is_name(path)) { /* a node summary: each of its traces, as it holds them */
        struct summary_contents sc;
        if (summary_load(path, 0, &sc, err, sizeof(err)) < 0) {
            fprintf(stderr, "lockstep: %s\n", err);
            return 2;
        }
        for (size_t i = 0; i < sc.ntraces; i++)
            dump_trace(sc.traces[i], i > 0);
        for (size_t i = 0; i < sc.nunreadable; i++)
            printf("\nunreadable: %s\n", sc.unreadable[i]);
        summary_contents_free(&sc);
        return 0;
    }
    struct tr_trace *t = trace_load(path, err, sizeof(err));
    if (!t) {
        fprintf(stderr, "lockstep: %s\n", err);
        return 2;
    }
    dump_trace(t, 0);
    trace_free(t);
    return 0;
}
