/*
 * The selection table: where each collective runs, per form, size and
 * communicator size. Read by the MPI layer once at MPI_Init (rank 0 reads
 * it and broadcasts it, so every rank decides from the same table), shown
 * by `incoll info`, written by `incoll tune` (docs/tuning.md). No MPI in
 * here: any component that interposes on a programming model's
 * collectives can use it.
 *
 * A table is a text file, one entry a line, the first entry that matches
 * a call deciding it ('#' starts a comment):
 *
 *   shape [WORD...] [ranks=R] [hosts=H] [ppn=P]   what it was measured on
 *   COLL[:FORM] BYTES PATH [ranks=R] [ppn=P] [dtype=D]
 *
 *   COLL   allreduce reduce bcast barrier allgather gather scatter
 *          reduce_scatter_block reduce_scatter, or all
 *   FORM   blocking, nb or persistent; absent: every form
 *   BYTES  LO-HI (inclusive), LO- (LO and more), N, or * (every size);
 *          K, M, G suffixes are binary. The size is what the MPI layer
 *          plans with: the whole vector of an allreduce, reduce and bcast,
 *          one rank's block of an allgather, gather and scatter, one
 *          rank's result of a reduce_scatter(_block); 0 for a barrier
 *   PATH   inc (libincoll: in the network, its host-based algorithms when
 *          the group cannot), mpi (the MPI library's own), or one of
 *          libincoll's host-based allreduce algorithms: rd, ring,
 *          rabenseifner (allreduce entries only)
 *   R      communicator sizes, LO-HI, LO- or N (default: every size)
 *   P      ranks per fabric host of the job, the same forms (default: any;
 *          an entry with ppn= does not apply where it is unknown)
 *   D      the reduction's datatype class: int, float or any (default);
 *          an entry with dtype=int or float applies to reductions only
 *
 * The shape line's ranks=, hosts=, ppn=, radix= and levels= (each a
 * range) say which fabrics the file's entries apply to (tune_apply_job):
 * on a job of another shape they are set aside and only the override's
 * entries decide. Its other words are shown, not matched.
 *
 * A call no entry matches goes to libincoll (inc). The override setting
 * (INCOLL_TUNE) is a comma-separated list of the same entries with ':'
 * between the fields, "bcast:0-4K:mpi,allgather:nb:1K-16K:mpi,
 * gather:*:inc:ranks=2-4", put before the file's entries.
 */
#ifndef INCOLL_TUNE_H
#define INCOLL_TUNE_H

#include "common/fabric_conf.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* The collectives, in the MPI layer's order (mpi_coll_t). */
#define TUNE_COLL_COUNT 9
#define TUNE_COLL_ALL 255

/* The forms, as bits of an entry's forms. */
#define TUNE_FORM_BLOCKING 0
#define TUNE_FORM_NB 1
#define TUNE_FORM_PERSISTENT 2
#define TUNE_FORM_COUNT 3
#define TUNE_FORMS_ALL 7

/* The paths (incoll.h's incoll_path_t has the same values). */
typedef enum {
    TUNE_PATH_INC = 0,
    TUNE_PATH_MPI = 1,
    TUNE_PATH_HOST = 2, /* a named host-based algorithm (entry's algo) */
    TUNE_PATH_COUNT
} tune_path_t;

/* A host path's algorithm: incoll_algo_t's values. */
#define TUNE_ALGO_RD 2
#define TUNE_ALGO_RING 3
#define TUNE_ALGO_RABENSEIFNER 4

/* A call's datatype class (tune_select), and an entry's mask of them. */
#define TUNE_DCLASS_NONE 0  /* not a reduction */
#define TUNE_DCLASS_INT 1   /* integers */
#define TUNE_DCLASS_FLOAT 2 /* floating point, half and bfloat too */
#define TUNE_DMASK_ANY 0xff

#define TUNE_MAX 256
#define TUNE_NO_LINE 0xffff

/* One entry. Plain integers: a table travels as bytes (MPI_Bcast). */
typedef struct {
    uint64_t lo, hi;   /* bytes, inclusive */
    uint32_t rlo, rhi; /* communicator sizes, inclusive */
    uint16_t line;     /* in its source: file line, or override item */
    uint8_t coll;      /* 0..TUNE_COLL_COUNT-1, or TUNE_COLL_ALL */
    uint8_t forms;     /* bits 1 << TUNE_FORM_* */
    uint8_t path;      /* tune_path_t */
    uint8_t from_env;  /* 1: from the override setting */
    uint8_t algo;      /* TUNE_PATH_HOST: TUNE_ALGO_*, else 0 */
    uint8_t dmask;     /* TUNE_DCLASS_* bits, or TUNE_DMASK_ANY */
    uint16_t plo, phi; /* ranks per host, inclusive (0-65535: any) */
    uint16_t pad;
} tune_entry_t;

typedef struct {
    uint32_t n;
    /* The job's ranks per fabric host its ppn= entries are matched with
     * (0: unknown), set by whoever applies the job's shape: it travels
     * with the table and is part of its hash, so ranks that agree on a
     * table agree on it too. */
    uint32_t ppn;
    char source[256]; /* where the file entries came from */
    char shape[128];  /* its shape line, or "" */
    char env[256];    /* the override as given (clipped), or "" */
    /* The shape line's ranges (lo 0: not given). */
    uint32_t s_rlo, s_rhi, s_hlo, s_hhi, s_plo, s_phi;
    uint32_t s_xlo, s_xhi, s_llo, s_lhi; /* radix=, levels= */
    /* tune_apply_shape: 1 matched, 0 set aside (file entries dropped),
     * -1 not compared (no shape line, or never applied). */
    int32_t shape_ok;
    char shape_note[512]; /* what tune_apply_job found, in words: any
                             values fit */
    /* Where tune_select starts for a collective and form: the first entry
     * that names both (n: none), as tune_reindex found it for a table of
     * idx_n entries; a table of another n is scanned whole. Derived from
     * e[], not part of the hash. */
    uint32_t idx_n;
    uint16_t first[TUNE_COLL_COUNT][TUNE_FORM_COUNT];
    tune_entry_t e[TUNE_MAX];
} tune_table_t;

/* The table shipped, measured on the emulated fabric (docs/tuning.md). */
extern const char tune_default_text[];

/* Names: collective (TUNE_COLL_ALL: "all"), form, path. */
const char *tune_coll_name(int coll);
const char *tune_form_name(int form);
const char *tune_path_name(int path);

/* An empty table (every call inc). */
void tune_init(tune_table_t *t, const char *source);

/*
 * Appends the entries of text (a file's contents) to t, naming name:line
 * in errors. 0, or -1 with "NAME:LINE: what is wrong" in err.
 */
int tune_parse_text(tune_table_t *t, const char *text, const char *name,
                    char *err, size_t errlen);

/* A table file's text (at most 1 MiB, no NUL), malloc'd; NULL with
 * "PATH: what is wrong" in err. */
char *tune_read_text(const char *path, char *err, size_t errlen);

/* Reads and appends a file (tune_parse_text). 0 or -1 with err. */
int tune_parse_file(tune_table_t *t, const char *path, char *err,
                    size_t errlen);

/*
 * Puts the override's entries (INCOLL_TUNE's syntax) before t's. 0, or -1
 * with "INCOLL_TUNE item N 'ITEM': what is wrong" in err (t unchanged).
 */
int tune_parse_override(tune_table_t *t, const char *spec, char *err,
                        size_t errlen);

/*
 * The table in force for a process: file (INCOLL_TUNE_FILE's value) when
 * set ("none": no file entries), else DIR/tune.conf when fabric_dir has
 * one, else tune_default_text; then override (INCOLL_TUNE) before them.
 * 0, or -1 with the error in err (t is then an empty table).
 */
int tune_load(tune_table_t *t, const char *file, const char *fabric_dir,
              const char *override, char *err, size_t errlen);

/*
 * The path of a call: collective coll, form, bytes (as BYTES above) on a
 * communicator of ranks members, with ppn ranks per fabric host (0:
 * unknown) and datatype class dclass (TUNE_DCLASS_*). *entry_p (may be
 * NULL) gets the deciding entry's index, or -1 when none matched (then
 * TUNE_PATH_INC). Pure: the same arguments give the same answer on every
 * rank.
 */
static inline int tune_select(const tune_table_t *t, int coll, int form,
                              uint64_t bytes, uint32_t ranks, uint32_t ppn,
                              int dclass, int *entry_p)
{
    uint32_t i = t->idx_n == t->n && (unsigned)coll < TUNE_COLL_COUNT &&
                         (unsigned)form < TUNE_FORM_COUNT
                     ? t->first[coll][form]
                     : 0;
    for (; i < t->n; i++) {
        const tune_entry_t *e = &t->e[i];
        if ((e->coll == coll || e->coll == TUNE_COLL_ALL) &&
            (e->forms & (1u << form)) && bytes >= e->lo && bytes <= e->hi &&
            ranks >= e->rlo && ranks <= e->rhi &&
            (e->dmask == TUNE_DMASK_ANY || (e->dmask & dclass)) &&
            ((e->plo == 0 && e->phi == 0xffff) ||
             (ppn != 0 && ppn >= e->plo && ppn <= e->phi))) {
            if (entry_p)
                *entry_p = (int)i;
            return e->path;
        }
    }
    if (entry_p)
        *entry_p = -1;
    return TUNE_PATH_INC;
}

/* Sets t's index (first, idx_n) from its entries: every function here
 * that changes the entries calls it; a table taken from elsewhere (the
 * agreement's copy of rank 0's) gets it again before use. */
void tune_reindex(tune_table_t *t);

/* tune_select for a call of no datatype class on a job whose ranks per
 * host are unknown. */
static inline int tune_lookup(const tune_table_t *t, int coll, int form,
                              uint64_t bytes, uint32_t ranks, int *entry_p)
{
    return tune_select(t, coll, form, bytes, ranks, 0, TUNE_DCLASS_NONE,
                       entry_p);
}

/* A host path's algorithm name ("rd", "ring", "rabenseifner"), or "?". */
const char *tune_algo_name(int algo);

/* What a job's shape is compared with: each value 0 when unknown (then
 * not compared). */
typedef struct {
    uint32_t ranks;  /* the world's ranks */
    uint32_t hosts;  /* fabric hosts the job uses */
    uint32_t ppn;    /* most ranks on one of them */
    uint32_t radix;  /* the fabric tree's widest switch (children) */
    uint32_t levels; /* its switch levels */
} tune_job_t;

/*
 * Applies the shape line to a job: when a range the line gives does not
 * hold the job's value (a value 0 is unknown and not compared), the
 * file's entries are dropped (the override's stay) and t->shape_ok is 0;
 * else 1 (-1 when the table has no shape range). t->shape_note says so
 * and, word by word, which matched, which did not and which were not
 * compared.
 */
void tune_apply_job(tune_table_t *t, const tune_job_t *job);

/* A fabric.conf's radix and levels as a job's shape counts them (the
 * manager's way): the most children (hosts and switches) of one of its
 * switches, and its levels. */
void tune_conf_tree(const fabric_conf_t *conf, uint32_t *radix_p,
                    uint32_t *levels_p);

/* tune_apply_job on a job whose radix and levels are unknown. */
void tune_apply_shape(tune_table_t *t, uint32_t ranks, uint32_t hosts,
                      uint32_t ppn);

/* A hash of what decides (every entry's matching fields and path, in
 * order, and t->ppn; not where they came from): equal tables decide
 * alike. */
uint64_t tune_hash(const tune_table_t *t);

/* Where entry i came from, "FILE:LINE" or "INCOLL_TUNE item N". */
void tune_entry_where(const tune_table_t *t, int i, char *buf, size_t len);

/* Writes t as a table file (its entries, with where each came from as a
 * comment when comments is 1). */
void tune_write(const tune_table_t *t, FILE *out, int comments);

/* One entry in the file syntax, "bcast:blocking 1K-8K mpi". */
void tune_entry_format(const tune_entry_t *e, char *buf, size_t len);

/*
 * Merges the table `incoll tune` wrote for a run on ranks ranks (run,
 * every entry for those ranks and up) into an existing table (old, read
 * from old_name), so that runs on several rank counts make one table: the
 * run's entries rule from ranks up to the next rank count the old table
 * has rows for (the lowest bound of its ranks= above ranks; none: and
 * up), put before the old table's entries, which keep ruling everywhere
 * else; an old entry whose every collective and form the run measured at
 * every size is dropped when its ranks are within the run's range (dead)
 * and ends below the run's when its ranks reach into it from below. The
 * shape line is the run's with ranks= widened to
 * hold both tables' (none when the old table's applies to any ranks); a
 * shape word both give (hosts=, ppn=, radix=, levels=) must be equal.
 * header (comment lines, may be NULL) goes first, then the run's own
 * comments and entries, then the old table's comments before its shape
 * line and its entries. A malloc'd text; NULL with "what is wrong" in err
 * (*dropped_p: the old entries dropped).
 */
char *tune_merge_text(const char *old, const char *old_name, const char *run,
                      uint32_t ranks, const char *header, int *dropped_p,
                      char *err, size_t errlen);

#endif
