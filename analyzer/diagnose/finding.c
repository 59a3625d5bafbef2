/* finding.c -- findings: creation, summaries, STAT-style classes, freeing. */
#define _GNU_SOURCE
#include "finding.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lockstep/nccl_profiler.h"
#include "rankset.h"

static const struct kind_info {
    const char *name, *differs;
    enum finding_severity severity;
    int priority;
    unsigned traits;
} kinds[F_KIND_COUNT] = {
#define F_KIND_INFO(id, name_, sev, prio, traits_, differs_, ops)                                  \
    [F_##id] = {                                                                                   \
        .name = name_, .differs = differs_, .severity = sev, .priority = prio, .traits = traits_},
    FINDING_KINDS(F_KIND_INFO)
#undef F_KIND_INFO
};

/* The rank lists and the owned memory of every kind's data (finding_kinds.h), as offsets into a
 * struct finding. */
static const struct list_info {
    enum finding_kind kind;
    unsigned what;
    size_t at;
} lists[] = {
#define F_LIST_INFO(id, what_, field) {F_##id, what_, offsetof(struct finding, as.field)},
    FINDING_LISTS(F_LIST_INFO)
#undef F_LIST_INFO
};

static const struct owned_info {
    enum finding_kind kind;
    size_t at;
} owned[] = {
#define F_OWNED_INFO(id, field) {F_##id, offsetof(struct finding, as.field)},
    FINDING_OWNED(F_OWNED_INFO)
#undef F_OWNED_INFO
};

#define NLISTS (sizeof lists / sizeof lists[0])

/* List k of the table in finding f (whose kind is lists[k].kind). */
static struct intvec *list_at(const struct finding *f, size_t k)
{
    return (struct intvec *)((char *)f + lists[k].at);
}

/* The first list of f's data that is all of `what`, NULL none. */
static struct intvec *list_of(const struct finding *f, unsigned what)
{
    for (size_t k = 0; k < NLISTS; k++)
        if (lists[k].kind == f->kind && (lists[k].what & what) == what)
            return list_at(f, k);
    return NULL;
}

const char *finding_kind_name(enum finding_kind k)
{
    return (unsigned)k < F_KIND_COUNT ? kinds[k].name : "?";
}

enum finding_severity finding_kind_severity(enum finding_kind k)
{
    return (unsigned)k < F_KIND_COUNT ? kinds[k].severity : F_SEV_ERROR;
}

int finding_kind_priority(enum finding_kind k)
{
    return (unsigned)k < F_KIND_COUNT ? kinds[k].priority : 1 << 20;
}

int finding_kind_has(enum finding_kind k, unsigned traits)
{
    return (unsigned)k < F_KIND_COUNT && (kinds[k].traits & traits) == traits;
}

const char *finding_kind_differs(enum finding_kind k)
{
    return (unsigned)k < F_KIND_COUNT ? kinds[k].differs : NULL;
}

struct finding *finding_add(struct findings *fs, enum finding_kind kind, size_t job)
{
    if (fs->n == fs->cap) {
        size_t cap = fs->cap ? fs->cap * 2 : 16;
        struct finding *v = realloc(fs->v, cap * sizeof(*v));
        if (!v)
            return NULL;
        fs->v = v;
        fs->cap = cap;
    }
    struct finding *f = &fs->v[fs->n++];
    memset(f, 0, sizeof(*f));
    f->kind = kind;
    f->job = job;
    f->consequence_of = -1;
    f->rank = -1;
    switch (kind) {
#define F_PAYLOAD_UNSET(id, member, ...)                                                           \
    case F_##id:                                                                                   \
        f->as.member = (struct f_##member){__VA_ARGS__};                                           \
        break;
        FINDING_PAYLOADS(F_PAYLOAD_UNSET)
#undef F_PAYLOAD_UNSET
    default:
        break;
    }
    return f;
}

const char *finding_reason_name(enum incomplete_reason r)
{
    static const char *const names[] = {
#define INCOMPLETE_REASON_NAME(id, name) [INC_##id] = name,
        INCOMPLETE_REASONS(INCOMPLETE_REASON_NAME)
#undef INCOMPLETE_REASON_NAME
    };
    return (unsigned)r < sizeof names / sizeof names[0] ? names[r] : names[INC_UNKNOWN];
}

const char *finding_role_name(enum class_role r)
{
    static const char *const names[] = {
#define CLASS_ROLE_NAME(id, name) [ROLE_##id] = name,
        CLASS_ROLES(CLASS_ROLE_NAME)
#undef CLASS_ROLE_NAME
    };
    return (unsigned)r < sizeof names / sizeof names[0] ? names[r] : NULL;
}

static const struct intvec no_ranks;

const struct intvec *finding_singled_out(const struct finding *f)
{
    const struct intvec *odd = list_of(f, F_L_ODD);
    return odd ? odd : &f->missing;
}

const struct intvec *finding_kind_names_apart(const struct finding *f)
{
    return list_of(f, F_L_APART);
}

const struct f_death *finding_death(const struct finding *f)
{
    return finding_kind_has(f->kind, F_T_DEATH) ? &f->as.death : NULL;
}

const struct intvec *finding_ended(const struct finding *f)
{
    const struct intvec *v = list_of(f, F_L_ENDED);
    return v ? v : &no_ranks;
}

const struct intvec *finding_missing_comm_ranks(const struct finding *f)
{
    const struct intvec *v = list_of(f, F_L_COMM);
    return v ? v : &no_ranks;
}

/* Frees what f's own data owns: its rank lists and its memory. */
static void payload_free(struct finding *f)
{
    for (size_t k = 0; k < NLISTS; k++)
        if (lists[k].kind == f->kind)
            intvec_free(list_at(f, k));
    for (size_t k = 0; k < sizeof owned / sizeof owned[0]; k++)
        if (owned[k].kind == f->kind) {
            void **p = (void **)((char *)f + owned[k].at);
            free(*p);
            *p = NULL;
        }
}

static char *vformat(const char *fmt, va_list ap)
{
    char *s = NULL;
    if (vasprintf(&s, fmt, ap) < 0)
        return NULL;
    return s;
}

void finding_summary(struct finding *f, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    free(f->summary);
    f->summary = vformat(fmt, ap);
    va_end(ap);
}

void finding_detail(struct finding *f, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *line = vformat(fmt, ap);
    va_end(ap);
    if (!line)
        return;
    char **d = realloc(f->details, (f->ndetails + 1) * sizeof(*d));
    if (!d) {
        free(line);
        return;
    }
    f->details = d;
    f->details[f->ndetails++] = line;
}

static int str_eq(const char *a, const char *b)
{
    return a == b || (a && b && strcmp(a, b) == 0);
}

static int class_eq(const struct f_class *a, const struct f_class *b)
{
    return a->role == b->role && a->has_call == b->has_call && a->op == b->op &&
           a->dtype == b->dtype && a->redop == b->redop && a->root == b->root &&
           a->count == b->count && a->seq == b->seq && a->comm == b->comm &&
           str_eq(a->callsite, b->callsite) && str_eq(a->state, b->state) &&
           a->claimant.pid == b->claimant.pid && strcmp(a->outside.where, b->outside.where) == 0 &&
           strcmp(a->outside.blocked, b->outside.blocked) == 0 &&
           strcmp(a->outside.thread, b->outside.thread) == 0;
}

int finding_class_add_member(struct finding *f, const struct f_class *key, int rank, int comm_rank)
{
    struct f_class *c = NULL;
    for (size_t i = 0; i < f->nclasses && !c; i++) {
        if (class_eq(&f->classes[i], key)) {
            c = &f->classes[i];
            if (key->seconds_ago > c->seconds_ago)
                c->seconds_ago = key->seconds_ago;
            if (key->outside.cpu_share > c->outside.cpu_share)
                c->outside.cpu_share = key->outside.cpu_share;
        }
    }
    if (!c) {
        struct f_class *v = realloc(f->classes, (f->nclasses + 1) * sizeof(*v));
        if (!v)
            return -1;
        f->classes = v;
        c = &f->classes[f->nclasses++];
        *c = *key;
        memset(&c->ranks, 0, sizeof(c->ranks));
        memset(&c->comm_ranks, 0, sizeof(c->comm_ranks));
    }
    if (comm_rank >= 0 && intvec_push(&c->comm_ranks, comm_rank) < 0)
        return -1;
    return intvec_push(&c->ranks, rank);
}

int finding_class_add(struct finding *f, const struct f_class *key, int rank)
{
    return finding_class_add_member(f, key, rank, -1);
}

const char *finding_class_site(const struct f_class *c)
{
    return c->callsite ? c->callsite : c->outside.where[0] ? c->outside.where : NULL;
}

static const char *raised_at(const struct finding *f)
{
    const struct f_death *d = finding_death(f);
    return d && d->exception ? d->exception->site : NULL;
}

size_t finding_nsites(const struct finding *f)
{
    return raised_at(f) ? 1 : f->nclasses;
}

const char *finding_site(const struct finding *f, size_t i)
{
    if (raised_at(f))
        return i == 0 ? raised_at(f) : NULL;
    return i < f->nclasses ? finding_class_site(&f->classes[i]) : NULL;
}

void finding_free(struct finding *f)
{
    free(f->summary);
    for (size_t k = 0; k < f->ndetails; k++)
        free(f->details[k]);
    free(f->details);
    for (size_t k = 0; k < f->nclasses; k++) {
        intvec_free(&f->classes[k].ranks);
        intvec_free(&f->classes[k].comm_ranks);
    }
    free(f->classes);
    payload_free(f);
    intvec_free(&f->ranks);
    intvec_free(&f->missing);
    intvec_free(&f->waiting);
    memset(f, 0, sizeof(*f));
}

void findings_free(struct findings *fs)
{
    for (size_t i = 0; i < fs->n; i++)
        finding_free(&fs->v[i]);
    free(fs->v);
    fs->v = NULL;
    fs->n = fs->cap = 0;
}

void findings_normalize(struct findings *fs)
{
    for (size_t i = 0; i < fs->n; i++) {
        struct finding *f = &fs->v[i];
        f->ranks.n = rankset_normalize(f->ranks.v, f->ranks.n);
        f->missing.n = rankset_normalize(f->missing.v, f->missing.n);
        f->waiting.n = rankset_normalize(f->waiting.v, f->waiting.n);
        for (size_t k = 0; k < NLISTS; k++)
            if (lists[k].kind == f->kind && (lists[k].what & F_L_SET)) {
                struct intvec *v = list_at(f, k);
                v->n = rankset_normalize(v->v, v->n);
            }
        for (size_t k = 0; k < f->nclasses; k++) {
            struct f_class *c = &f->classes[k];
            c->ranks.n = rankset_normalize(c->ranks.v, c->ranks.n);
            c->comm_ranks.n = rankset_normalize(c->comm_ranks.v, c->comm_ranks.n);
        }
    }
}

/* What a proxy step in NCCL's step state waits for: its JSON name and, around the peer's rank,
 * its words. States without an entry are said by direction. */
static const struct gpu_wait {
    int state;
    const char *name, *before, *after;
} gpu_waits[] = {
    {NPR_ST_STEP_SEND_GPU_WAIT, "gpu_data", "waiting for its GPU to fill the data to send to rank ",
     ""},
    {NPR_ST_STEP_SEND_PEER_WAIT, "peer_credit", "waiting for rank ",
     " to free a buffer (clear to send)"},
    {NPR_ST_STEP_SEND_WAIT, "send_done", "sending to rank ", " (not acknowledged)"},
    {NPR_ST_STEP_RECV_WAIT, "recv_data", NULL, NULL}, /* nothing arrived: said by direction */
    {NPR_ST_STEP_RECV_FLUSH_WAIT, "recv_flush", "flushing data received from rank ", ""},
    {NPR_ST_STEP_RECV_GPU_WAIT, "gpu_consume", "received from rank ",
     ", waiting for its GPU to consume it"},
};

static const struct gpu_wait *gpu_wait_of(int state)
{
    for (size_t i = 0; i < sizeof gpu_waits / sizeof gpu_waits[0]; i++)
        if (gpu_waits[i].state == state)
            return &gpu_waits[i];
    return NULL;
}

const char *finding_gpu_wait_name(int state, int is_send)
{
    const struct gpu_wait *w = gpu_wait_of(state);
    return w ? w->name : is_send ? "send" : "recv";
}

void finding_gpu_wait_words(int state, int is_send, int peer, char *buf, size_t len)
{
    const struct gpu_wait *w = gpu_wait_of(state);
    if (w && w->before)
        snprintf(buf, len, "%s%d%s", w->before, peer, w->after);
    else
        snprintf(buf, len, "%s%d", is_send ? "sending to rank " : "waiting to receive from rank ",
                 peer);
}
