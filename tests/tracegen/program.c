/* program.c -- what each simulated rank calls, iteration by iteration, faults included. */
#include "sim.h"

static void add(struct rank_state *rs, struct step st)
{
    rs->steps[rs->nsteps++] = st;
}

static struct step coll(int comm, int op, uint64_t count, int peer, enum site_kind site)
{
    struct step st = {ST_COLL, comm, op, 7 /* fp32 */, -1, peer, count, site};
    if (ls_op_has_redop((unsigned)op))
        st.redop = 0;
    return st;
}

static struct step world_collective(const struct scenario *sc, int rank, int i)
{
    int rooted = i % 10 == 0 || (sc->mismatch == MIS_ROOT && i == sc->mismatch_seq);
    struct step st = rooted ? coll(0, LS_OP_BROADCAST, BASE_COUNT / 4, 0, SITE_EVAL)
                            : coll(0, LS_OP_ALLREDUCE, BASE_COUNT, -1, SITE_TRAIN);
    if (sc->mismatch != MIS_NONE && rank == sc->mismatch_rank && i == sc->mismatch_seq) {
        st.site = SITE_ODD;
        switch (sc->mismatch) {
        case MIS_OP:
            st = coll(0, rooted ? LS_OP_ALLREDUCE : LS_OP_BROADCAST, st.count, rooted ? -1 : 0,
                      SITE_ODD);
            break;
        case MIS_COUNT:
            st.count *= 2;
            break;
        case MIS_DTYPE:
            st.dtype = 6; /* fp16 */
            break;
        case MIS_REDOP:
            st.redop = 2; /* max */
            break;
        case MIS_ROOT:
            st.peer = 1;
            break;
        default:
            break;
        }
    }
    return st;
}

const struct stop *program_stop_at(const struct scenario *sc, int rank, int iter)
{
    for (int i = 0; i < sc->nstops; i++)
        if (sc->stops[i].rank == rank && sc->stops[i].seq == iter)
            return &sc->stops[i];
    return NULL;
}

int program_next(const struct scenario *sc, struct rank_state *rs)
{
    int n = sc->nranks, r = rs->rank, i = rs->iter++;
    rs->nsteps = rs->pc = 0;
    if (i == 0) {
        if (r == sc->never_join_rank) {
            rs->stopped_how = STOP_IDLE;
            return 0;
        }
        add(rs, (struct step){.kind = ST_INIT, .site = SITE_INIT});
        if (sc->split)
            add(rs, (struct step){.kind = ST_SPLIT, .site = SITE_INIT});
        return 1;
    }
    if (i > sc->ncoll) {
        const struct stop *st = program_stop_at(sc, r, i);
        rs->stopped_how = st ? (int)st->how : STOP_EXIT;
        rs->stop_arg = st ? st->arg : 0;
        return 0;
    }
    const struct stop *st = program_stop_at(sc, r, i);
    if (st && st->how != STOP_BUSY && st->how != STOP_ENTERING && st->how != STOP_WRITING) {
        rs->stopped_how = (int)st->how;
        rs->stop_arg = st->arg;
        return 0;
    }
    rs->clock += GAP_NS;
    if (r == sc->straggler_rank)
        rs->clock += (uint64_t)(sc->straggler_s * 1e9);
    if (sc->p2p && n > 1) {
        struct step send = {ST_SEND, 0, LS_OP_SEND, 7, -1, (r + 1) % n, BASE_COUNT / 8, SITE_HALO};
        struct step recv = {ST_RECV,        0,        LS_OP_RECV, 7, -1, (r + n - 1) % n,
                            BASE_COUNT / 8, SITE_HALO};
        if (i == sc->ncoll && r == sc->p2p_size_rank)
            send.count *= 2;
        add(rs, (struct step){.kind = ST_GSTART, .site = SITE_HALO});
        add(rs, send);
        if (!(i == sc->ncoll && r == sc->p2p_skip_recv_rank))
            add(rs, recv);
        add(rs, (struct step){.kind = ST_GEND, .site = SITE_HALO});
    }
    struct step world = world_collective(sc, r, i);
    struct step sub = coll(1, LS_OP_ALLREDUCE, BASE_COUNT / 2, -1, SITE_SUB);
    int swap = sc->split && i == sc->ncoll && r == sc->deadlock_rank;
    if (swap)
        add(rs, sub);
    if (sc->grouped)
        add(rs, (struct step){.kind = ST_GSTART, .site = world.site});
    add(rs, world);
    if (sc->grouped)
        add(rs, (struct step){.kind = ST_GEND, .site = world.site});
    if (sc->split && !swap)
        add(rs, sub);
    return 1;
}
