/* html.c -- what the HTML report's files share: escaped text, compressed rank lists, the root
 * finding of a job. */
#include <stdlib.h>
#include <string.h>

#include "html.h"
#include "rankset.h"

void html_text(FILE *f, const char *s)
{
    for (; s && *s; s++) {
        switch (*s) {
        case '&':
            fputs("&amp;", f);
            break;
        case '<':
            fputs("&lt;", f);
            break;
        case '>':
            fputs("&gt;", f);
            break;
        case '"':
            fputs("&quot;", f);
            break;
        case '\'':
            fputs("&#39;", f);
            break;
        default:
            fputc((unsigned char)*s < 0x20 && *s != '\n' ? ' ' : *s, f);
        }
    }
}

void html_ranks(FILE *f, const int *ranks, size_t n, size_t max)
{
    char *s = rankset_format(ranks, n);
    if (!s) {
        fprintf(f, "%zu ranks", n);
        return;
    }
    size_t len = strlen(s);
    if (max && len > max) {
        size_t cut = max;
        while (cut > 0 && s[cut] != ',')
            cut--;
        s[cut] = 0;
        html_text(f, s);
        fputs(",\xe2\x80\xa6", f);
    } else
        html_text(f, s);
    free(s);
}

const struct finding *html_root_finding(const struct report_input *in, size_t job)
{
    for (size_t i = 0; i < in->fs->n; i++)
        if (in->fs->v[i].job == job && in->fs->v[i].consequence_of < 0)
            return &in->fs->v[i];
    return NULL;
}
