/* html_p2p.h -- the HTML report's picture of a communicator's point-to-point calls (html_p2p.c). */
#ifndef LOCKSTEP_HTML_P2P_H
#define LOCKSTEP_HTML_P2P_H

#include <stddef.h>
#include <stdio.h>

#include "report.h"

/* True when some member of communicator c recorded a send or a receive on it. */
int html_p2p_any(const struct m_comm *c);

/* Writes the point-to-point picture of communicator c as an inline SVG (ids made unique with
 * `svg_id`): one lane per sender and receiver, its newest sends (#k from the sender) each above
 * the receive #k it pairs with on the receiver, a half never posted marked, and the calls of a
 * deadlock's cycle (the job's deadlock_cycle findings, through the wait-for graph) outlined with
 * an arrow from each blocked call to the call of the rank it waits for. Writes nothing when c
 * has no send or receive. Returns 0, or -1 when out of memory (what was written stays). */
int html_p2p(FILE *f, const struct report_input *in, const struct m_comm *c, int svg_id);

#endif
