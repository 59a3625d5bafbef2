/* trace_query.c -- test tool: prints the traces given as one JSON array, for assertions. */
#include <dirent.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "trace_reader.h"

static void print_string(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            printf("\\%c", ch);
        else if (ch < 0x20)
            printf("\\u%04x", ch);
        else
            putchar(ch);
    }
    putchar('"');
}

static void print_site(const struct tr_trace *t, uint32_t id)
{
    const struct tr_site *s = trace_site(t, id);
    printf("[");
    for (uint32_t i = 0; s && i < s->nframes; i++) {
        printf(i ? "," : "");
        print_string(s->frames[i].symbol);
    }
    printf("]");
}

/* The Python frames of a call site: [[file, line, func], ...] innermost first, or null. */
static void print_python(const struct tr_trace *t, uint32_t id)
{
    const struct tr_site *s = trace_site(t, id);
    if (!s || !s->py) {
        printf("null");
        return;
    }
    printf("[");
    for (uint32_t i = 0; i < s->py->nframes; i++) {
        printf(i ? ",[" : "[");
        print_string(s->py->frames[i].file);
        printf(",%d,", s->py->frames[i].line);
        print_string(s->py->frames[i].func);
        printf("]");
    }
    printf("]");
}

static void print_trace(const struct tr_trace *t)
{
    const struct ls_header *h = &t->hdr;
    printf("{\"path\":");
    print_string(t->path);
    printf(",\"rank\":%d,\"local_rank\":%d,\"world_size\":%d,\"pid\":%d,\"ppid\":%d,\"host\":",
           h->rank, h->local_rank, h->world_size, h->pid, h->ppid);
    print_string(h->host);
    printf(",\"job\":");
    print_string(h->job);
    printf(",\"cmdline\":");
    print_string(h->cmdline);
    printf(",\"end_kind\":%u,\"end_status\":%d,\"end_signal\":%d,\"heartbeat_ns\":%" PRIu64
           ",\"start_ns\":%" PRIu64 ",\"nccl_version\":%u,\"stack_depth\":%u"
           ",\"ring_cap\":%" PRIu64 ",\"ticket_block\":%u,\"next_ticket\":%" PRIu64
           ",\"unread\":%" PRIu64
           ",\"wrapped\":%d,\"nbusy\":%zu,\"nunwritten\":%zu,\"nreserved\":%zu,\"nvoid\":%zu,"
           "\"truncated\":%d,\"completion\":%u,"
           "\"python\":%u,\"python_version\":%u,\"py_depth\":%u,\"pysite_count\":%u,"
           "\"site_count\":%u,\"header_flags\":%u,\"clock_source\":%u,\"comms\":[",
           h->end_kind, h->end_status, h->end_signal, h->heartbeat_ns, h->start_ns, h->nccl_version,
           h->stack_depth, h->ring_cap, h->ticket_block, h->next_ticket, t->unread, t->wrapped,
           t->nbusy, t->nunwritten, t->nreserved, t->nvoid, t->truncated, h->completion, h->python,
           h->python_version, h->py_depth, h->pysite_count, h->site_count, h->flags,
           h->clock_source);
    for (uint32_t i = 0; i < t->ncomms; i++) {
        const struct ls_comm *c = &t->comms[i];
        printf("%s{\"id\":\"%016" PRIx64 "\",\"parent\":\"%016" PRIx64
               "\",\"nranks\":%d,\"rank\":%d,\"color\":%d,\"key\":%d,\"create_op\":\"%s\","
               "\"flags\":%u,\"init_result\":%d,\"coll_issued\":%" PRIu64 ",\"coll_done\":%" PRIu64
               ",\"coll_completed\":%" PRIu64 ",\"p2p_sends\":%" PRIu64 ",\"p2p_recvs\":%" PRIu64
               ",\"name\":",
               i ? "," : "", c->comm_id, c->parent_id, c->nranks, c->rank, c->color, c->key,
               ls_op_name(c->create_op), c->flags, c->init_result, c->coll_issued, c->coll_done,
               c->coll_completed, c->p2p_sends, c->p2p_recvs);
        print_string(c->name);
        printf("}");
    }
    /* The header's stream table as the shim left it: GPU completion tracking per stream. */
    printf("],\"streams\":[");
    for (uint32_t i = 0; i < h->stream_count && i < LS_MAX_STREAMS; i++) {
        const struct ls_stream *st = &h->streams[i];
        printf("%s{\"stream\":%" PRIu64 ",\"flags\":%u,\"issued_ticket\":%" PRIu64
               ",\"event_ticket\":%" PRIu64 ",\"completed_ticket\":%" PRIu64
               ",\"completed_ns\":%" PRIu64 "}",
               i ? "," : "", st->stream, st->flags, st->issued_ticket, st->event_ticket,
               st->completed_ticket, st->completed_ns);
    }
    printf("],\"site_counts\":[");
    for (uint32_t i = 0; i < t->nsites; i++)
        printf("%s%" PRIu64, i ? "," : "", t->sites[i].count);
    printf("],\"records\":[");
    for (size_t i = 0; i < t->nrecords; i++) {
        const struct ls_record *r = &t->records[i];
        printf("%s{\"ticket\":%" PRIu64 ",\"op\":\"%s\",\"comm\":\"%016" PRIx64
               "\",\"seq\":%" PRIu64 ",\"count\":%" PRIu64 ",\"aux\":%" PRIu64
               ",\"dtype\":%d,\"redop\":%d,\"peer\":%d,\"comm_rank\":%d,\"group\":%" PRIu64
               ",\"depth\":%u,\"flags\":%u,\"result\":%d,\"in_flight\":%s,\"tid\":%u"
               ",\"enter_ns\":%" PRIu64 ",\"exit_ns\":%" PRIu64 ",\"complete_ns\":%" PRIu64
               ",\"sendbuff\":%" PRIu64 ",\"recvbuff\":%" PRIu64 ",\"stream\":%" PRIu64
               ",\"site\":",
               i ? "," : "", r->ticket - 1, ls_op_name(r->op), r->comm_id, r->seq, r->count, r->aux,
               r->dtype == LS_DTYPE_NONE ? -1 : r->dtype, r->redop, r->peer, r->comm_rank,
               r->group_id, r->group_depth, r->flags, r->result,
               r->exit_ns == 0 && r->result == LS_RESULT_PENDING ? "true" : "false", r->tid,
               r->enter_ns, r->exit_ns, r->complete_ns, r->sendbuff, r->recvbuff, r->stream);
        print_site(t, r->callsite);
        printf(",\"callsite\":%u,\"python\":", r->callsite);
        print_python(t, r->callsite);
        printf("}");
    }
    printf("]}");
}

static int is_trace_name(const char *name)
{
    size_t n = strlen(name);
    return n > 6 && strcmp(name + n - 6, ".trace") == 0;
}

int main(int argc, char **argv)
{
    int first = 1, status = 0;
    uint64_t window = 0; /* --window N: the newest N tickets, as the analysis reads them */
    int a0 = 1;
    if (argc > 2 && strcmp(argv[1], "--window") == 0) {
        window = strtoull(argv[2], NULL, 10);
        a0 = 3;
    }
    printf("[");
    for (int a = a0; a < argc; a++) {
        struct stat st;
        char **paths = NULL;
        size_t npaths = 0;
        if (stat(argv[a], &st) == 0 && S_ISDIR(st.st_mode)) {
            DIR *d = opendir(argv[a]);
            struct dirent *e;
            while (d && (e = readdir(d)) != NULL) {
                if (!is_trace_name(e->d_name))
                    continue;
                paths = realloc(paths, (npaths + 1) * sizeof *paths);
                size_t len = strlen(argv[a]) + strlen(e->d_name) + 2;
                paths[npaths] = malloc(len);
                snprintf(paths[npaths++], len, "%s/%s", argv[a], e->d_name);
            }
            if (d)
                closedir(d);
        } else {
            paths = malloc(sizeof *paths);
            paths[npaths++] = strdup(argv[a]);
        }
        for (size_t i = 0; i < npaths; i++) {
            char err[512];
            struct tr_trace *t = trace_load_window(paths[i], window, err, sizeof err);
            if (!t) {
                fprintf(stderr, "trace_query: %s\n", err);
                status = 2;
            } else {
                printf(first ? "" : ",");
                first = 0;
                print_trace(t);
                trace_free(t);
            }
            free(paths[i]);
        }
        free(paths);
    }
    printf("]\n");
    return status;
}
