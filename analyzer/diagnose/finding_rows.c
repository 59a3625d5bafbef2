/* finding_rows.c -- the table of every finding kind's row (finding_ops.h), from FINDING_KINDS'
 * last column, and the questions answered through it. A file of its own: the rows live in the
 * passes, which include finding_ops.h, so the table cannot sit beside that header. */
#include <stdio.h>

#include "finding_ops.h"

static const struct finding_ops *const rows[F_KIND_COUNT] = {
#define F_ROW(id, name, sev, prio, traits, differs, ops) [F_##id] = &ops,
    FINDING_KINDS(F_ROW)
#undef F_ROW
};

static const struct finding_ops no_row;

const struct finding_ops *finding_ops(enum finding_kind k)
{
    return (unsigned)k < F_KIND_COUNT ? rows[k] : &no_row;
}

void finding_write_own(struct json_writer *w, const struct finding *f)
{
    const struct finding_ops *o = finding_ops(f->kind);
    if (o->json)
        o->json(w, f);
}

void finding_failure_words(const struct finding *f, char *buf, size_t len)
{
    const struct f_death *death = finding_death(f);
    const struct finding_ops *o = finding_ops(f->kind);
    if (death && death->exception && death->exception->end.has_exception)
        snprintf(buf, len, "%s", death->exception->end.exception.type);
    else if (o->failure)
        o->failure(f, buf, len);
    else
        snprintf(buf, len, "%s", finding_kind_name(f->kind));
}
